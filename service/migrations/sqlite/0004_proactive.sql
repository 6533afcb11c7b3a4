-- Version 4 (summary format 3, the proactive loop): each run's kind
-- (light records are stored like runs, and the detector reads them by
-- kind and start), per-device directives with their fulfilment count, and
-- the detector's reports. Ids are AUTOINCREMENT: a deleted directive's id
-- is never given again, since devices count their traced runs by id.

ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'full';     -- full | light
CREATE INDEX runs_by_kind ON runs (kind, start_unix_ns);
CREATE TABLE device_directives (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    group_name      TEXT NOT NULL,
    device          TEXT NOT NULL,          -- 32 hex digits
    program         TEXT,                   -- NULL: any program
    match_text      TEXT,                   -- NULL: any command line
    runs            INTEGER NOT NULL,       -- full runs asked for
    received        INTEGER NOT NULL DEFAULT 0, -- full runs received with directive=<id>
    created_unix_ns INTEGER NOT NULL,
    expires_unix_ns INTEGER NOT NULL,
    issuer          TEXT NOT NULL           -- operator | detector
);
CREATE INDEX device_directives_by_device ON device_directives (group_name, device);
CREATE TABLE reports (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    group_name       TEXT NOT NULL,
    program          TEXT NOT NULL,
    trigger_kind     TEXT NOT NULL,         -- slow | failing
    status           TEXT NOT NULL,         -- diagnosed | failed
    detected_unix_ns INTEGER NOT NULL,
    created_unix_ns  INTEGER NOT NULL,
    cluster          TEXT NOT NULL,         -- the cluster in words
    devices          TEXT NOT NULL,         -- JSON: the devices traced
    headline         TEXT NOT NULL,
    text_body        TEXT NOT NULL,
    json_body        TEXT NOT NULL,         -- JSON (null when failed)
    html_body        TEXT NOT NULL
);
CREATE INDEX reports_by_group ON reports (group_name, created_unix_ns);
