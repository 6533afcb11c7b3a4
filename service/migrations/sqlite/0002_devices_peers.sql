-- Version 2 (summary format 2): where each run comes from (device,
-- stream, window length), its CPU time and calls in flight, its socket
-- peers, and a table of devices kept up to date by every insert. Runs
-- stored before keep `NULL` device and stream (format 1 summaries carry
-- none).

ALTER TABLE runs ADD COLUMN device TEXT;          -- 32 hex digits; NULL: not known
ALTER TABLE runs ADD COLUMN stream TEXT;          -- 32 hex digits; NULL: not known
ALTER TABLE runs ADD COLUMN window_ns INTEGER NOT NULL DEFAULT 0;   -- 0: a whole run
ALTER TABLE runs ADD COLUMN cpu_user_ns INTEGER;  -- NULL: not measured
ALTER TABLE runs ADD COLUMN cpu_system_ns INTEGER;
ALTER TABLE runs ADD COLUMN in_flight INTEGER NOT NULL DEFAULT 0;   -- calls in flight at the cut
ALTER TABLE runs ADD COLUMN peers_folded INTEGER NOT NULL DEFAULT 0; -- peers beyond the peers rows
CREATE INDEX runs_by_device ON runs (device, start_unix_ns);
CREATE INDEX runs_by_stream ON runs (stream, window_index);
CREATE TABLE peers (
    run              INTEGER NOT NULL REFERENCES runs (seq),
    transport        TEXT NOT NULL,         -- tcp | udp
    address          TEXT NOT NULL,         -- 192.0.2.1 | 2001:db8::1
    port             INTEGER NOT NULL,
    calls            INTEGER NOT NULL,
    bytes            INTEGER NOT NULL,
    total_ns         INTEGER NOT NULL,
    errors           INTEGER NOT NULL,
    last_syscall     TEXT,                  -- the most recent call; NULL: none
    last_result      INTEGER,
    last_end_unix_ns INTEGER,
    PRIMARY KEY (run, transport, address, port)
) WITHOUT ROWID;
CREATE VIEW run_peers AS
    SELECT r.id, r.group_name, r.device, r.program, r.start_unix_ns, r.window_index, p.*
    FROM peers p JOIN runs r ON r.seq = p.run;
CREATE TABLE devices (
    group_name         TEXT NOT NULL,
    device             TEXT NOT NULL,       -- 32 hex digits
    first_seen_unix_ns INTEGER NOT NULL,    -- received time of its first run
    last_seen_unix_ns  INTEGER NOT NULL,    -- received time of its latest run
    last_start_unix_ns INTEGER NOT NULL,    -- start of its most recent run
    last_program       TEXT NOT NULL,       -- that run's program
    facts              TEXT NOT NULL,       -- that run's facts, JSON
    runs               INTEGER NOT NULL,    -- whole runs stored
    windows            INTEGER NOT NULL,    -- windows stored
    PRIMARY KEY (group_name, device)
) WITHOUT ROWID;
