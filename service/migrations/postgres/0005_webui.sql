-- edge-service schema version 5: the web UI lists a group's runs of one
-- program newest first, and the diagnosis page loads them by time range,
-- through this index.
CREATE INDEX runs_by_group_program ON runs (group_name, program, start_unix_ns);
