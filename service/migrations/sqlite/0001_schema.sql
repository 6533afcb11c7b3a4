-- Version 1: runs, their syscalls, directives. A new file gets it first,
-- then every migration, so that new and migrated files are alike.

CREATE TABLE IF NOT EXISTS runs (
    seq              INTEGER PRIMARY KEY,   -- insertion order; syscalls.run points here
    id               TEXT NOT NULL UNIQUE,  -- 32 lowercase hex digits
    group_name       TEXT NOT NULL,         -- the uploading token's group
    program          TEXT NOT NULL,
    start_unix_ns    INTEGER NOT NULL,
    duration_ns      INTEGER NOT NULL,
    exit_kind        TEXT NOT NULL,         -- code | signal | running | detached
    exit_value       INTEGER,               -- exit status or signal number
    arch             TEXT NOT NULL,
    processes        INTEGER NOT NULL,
    threads          INTEGER NOT NULL,
    events           INTEGER NOT NULL,
    window_index     INTEGER NOT NULL,      -- 0: whole run; 1, 2, ...: windows
    spool_dropped    INTEGER NOT NULL,
    truncated        INTEGER NOT NULL,      -- 0 or 1
    facts            TEXT NOT NULL,         -- JSON, as in GET /v1/runs/{id}
    received_unix_ns INTEGER NOT NULL,
    raw              BLOB NOT NULL          -- the summary exactly as sent
);
CREATE INDEX IF NOT EXISTS runs_by_group_start ON runs (group_name, start_unix_ns);
CREATE TABLE IF NOT EXISTS syscalls (
    run         INTEGER NOT NULL REFERENCES runs (seq),
    syscall     TEXT NOT NULL,
    fd_kind     TEXT NOT NULL,
    count       INTEGER NOT NULL,
    errors      INTEGER NOT NULL,
    total_ns    INTEGER NOT NULL,
    min_ns      INTEGER NOT NULL,
    max_ns      INTEGER NOT NULL,
    mean_ns     REAL NOT NULL,
    consecutive INTEGER NOT NULL,
    gap_mean_ns REAL NOT NULL,
    result_mean REAL NOT NULL,
    param_mean  REAL,
    PRIMARY KEY (run, syscall, fd_kind)
) WITHOUT ROWID;
CREATE VIEW IF NOT EXISTS run_syscalls AS
    SELECT r.id, r.group_name, r.program, r.start_unix_ns, s.*
    FROM syscalls s JOIN runs r ON r.seq = s.run;
CREATE TABLE IF NOT EXISTS directives (
    group_name  TEXT PRIMARY KEY,
    match_text  TEXT,
    only_list   TEXT,                       -- JSON array of syscall names
    time_window TEXT
);
