-- Version 3: retention (`prune`, `serve --retain`) finds the runs
-- received before a cutoff through this index.

CREATE INDEX runs_by_received ON runs (received_unix_ns);
