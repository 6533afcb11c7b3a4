-- Version 5: the web UI lists a group's runs of one program newest first,
-- and the diagnosis page loads them by time range, through this index
-- (without it both read every run of the group, raw summaries and all).

CREATE INDEX runs_by_group_program ON runs (group_name, program, start_unix_ns);
