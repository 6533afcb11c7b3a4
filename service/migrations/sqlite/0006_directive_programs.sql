-- Version 6: a group's directive may name programs to shim on the
-- devices that opted in (`edge-agent watch --shim-dir`). Directives stored
-- before name none (`NULL`).

ALTER TABLE directives ADD COLUMN programs TEXT;  -- JSON array of program names
