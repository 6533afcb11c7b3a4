-- edge-service schema version 2 on PostgreSQL: the same tables, columns and
-- views as an SQLite file of version 2 (service/src/store/sqlite.rs), in
-- PostgreSQL's types. PostgreSQL support began at version 2, so an empty
-- database gets this first; later versions are appended as new files
-- (never edit one that was released: databases of every version migrate).
-- Ids are 32 lowercase hex digits compared bytewise (COLLATE "C").
CREATE TABLE runs (
    seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id               TEXT COLLATE "C" NOT NULL UNIQUE,
    group_name       TEXT NOT NULL,
    program          TEXT NOT NULL,
    start_unix_ns    BIGINT NOT NULL,
    duration_ns      BIGINT NOT NULL,
    exit_kind        TEXT NOT NULL,          -- code | signal | running | detached
    exit_value       INTEGER,                -- exit status or signal number
    arch             TEXT NOT NULL,
    processes        BIGINT NOT NULL,
    threads          BIGINT NOT NULL,
    events           BIGINT NOT NULL,
    window_index     BIGINT NOT NULL,        -- 0: whole run; 1, 2, ...: windows
    spool_dropped    BIGINT NOT NULL,
    truncated        BOOLEAN NOT NULL,
    facts            TEXT NOT NULL,          -- JSON, as in GET /v1/runs/{id}
    received_unix_ns BIGINT NOT NULL,
    raw              BYTEA NOT NULL,         -- the summary exactly as sent
    device           TEXT COLLATE "C",       -- NULL: not known
    stream           TEXT COLLATE "C",       -- NULL: not known
    window_ns        BIGINT NOT NULL DEFAULT 0,
    cpu_user_ns      BIGINT,                 -- NULL: not measured
    cpu_system_ns    BIGINT,
    in_flight        BIGINT NOT NULL DEFAULT 0,
    peers_folded     BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_group_start ON runs (group_name, start_unix_ns);
CREATE INDEX runs_by_device ON runs (device, start_unix_ns);
CREATE INDEX runs_by_stream ON runs (stream, window_index);
CREATE TABLE syscalls (
    run         BIGINT NOT NULL REFERENCES runs (seq),
    syscall     TEXT NOT NULL,
    fd_kind     TEXT NOT NULL,
    count       BIGINT NOT NULL,
    errors      BIGINT NOT NULL,
    total_ns    BIGINT NOT NULL,
    min_ns      BIGINT NOT NULL,
    max_ns      BIGINT NOT NULL,
    mean_ns     DOUBLE PRECISION NOT NULL,
    consecutive BIGINT NOT NULL,
    gap_mean_ns DOUBLE PRECISION NOT NULL,
    result_mean DOUBLE PRECISION NOT NULL,
    param_mean  DOUBLE PRECISION,
    PRIMARY KEY (run, syscall, fd_kind)
);
CREATE VIEW run_syscalls AS
    SELECT r.id, r.group_name, r.program, r.start_unix_ns, s.*
    FROM syscalls s JOIN runs r ON r.seq = s.run;
CREATE TABLE peers (
    run              BIGINT NOT NULL REFERENCES runs (seq),
    transport        TEXT NOT NULL,          -- tcp | udp
    address          TEXT NOT NULL,          -- 192.0.2.1 | 2001:db8::1
    port             INTEGER NOT NULL,
    calls            BIGINT NOT NULL,
    bytes            BIGINT NOT NULL,
    total_ns         BIGINT NOT NULL,
    errors           BIGINT NOT NULL,
    last_syscall     TEXT,                   -- the most recent call; NULL: none
    last_result      BIGINT,
    last_end_unix_ns BIGINT,
    PRIMARY KEY (run, transport, address, port)
);
CREATE VIEW run_peers AS
    SELECT r.id, r.group_name, r.device, r.program, r.start_unix_ns, r.window_index, p.*
    FROM peers p JOIN runs r ON r.seq = p.run;
CREATE TABLE devices (
    group_name         TEXT NOT NULL,
    device             TEXT COLLATE "C" NOT NULL,
    first_seen_unix_ns BIGINT NOT NULL,      -- received time of its first run
    last_seen_unix_ns  BIGINT NOT NULL,      -- received time of its latest run
    last_start_unix_ns BIGINT NOT NULL,      -- start of its most recent run
    last_program       TEXT NOT NULL,        -- that run's program
    facts              TEXT NOT NULL,        -- that run's facts, JSON
    runs               BIGINT NOT NULL,      -- whole runs stored
    windows            BIGINT NOT NULL,      -- windows stored
    PRIMARY KEY (group_name, device)
);
CREATE TABLE directives (
    group_name  TEXT PRIMARY KEY,
    match_text  TEXT,
    only_list   TEXT,                        -- JSON array of syscall names
    time_window TEXT
);
