-- Version 8 (issue 35, the live peer analysis): its incidents. One row per
-- incident: opened when a peer method's finding persisted (k of n
-- windows), its last window moved on while findings continue, closed when
-- its device has been clean long enough. The fields are the alert
-- webhook's (wire::alert::IncidentAlert); evidence is the JSON the peers
-- report draws (the metric's series, the flagged windows).

CREATE TABLE incidents (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    group_name           TEXT NOT NULL,
    program              TEXT NOT NULL,
    device               TEXT NOT NULL,     -- 32 hex digits
    cause                TEXT NOT NULL,     -- disk | network | errno | crash | hang
    errno                TEXT,              -- the errno's name (cause errno)
    metric               TEXT NOT NULL,
    deviation            REAL NOT NULL,
    first_window_unix_ns INTEGER NOT NULL,
    last_window_unix_ns  INTEGER NOT NULL,
    opened_unix_ns       INTEGER NOT NULL,
    closed_unix_ns       INTEGER,           -- NULL: open
    evidence             TEXT NOT NULL      -- JSON
);
CREATE INDEX incidents_open ON incidents (group_name, closed_unix_ns);
CREATE INDEX incidents_by_opened ON incidents (opened_unix_ns);
