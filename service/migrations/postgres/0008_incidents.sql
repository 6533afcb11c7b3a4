-- edge-service schema version 8 (issue 35, the live peer analysis): its
-- incidents, the alert webhook's fields (wire::alert::IncidentAlert) and
-- the evidence (JSON the peers report draws). The same as an SQLite file
-- of version 8.
CREATE TABLE incidents (
    id                   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_name           TEXT NOT NULL,
    program              TEXT NOT NULL,
    device               TEXT COLLATE "C" NOT NULL,  -- 32 hex digits
    cause                TEXT NOT NULL,     -- disk | network | errno | crash | hang
    errno                TEXT,              -- the errno's name (cause errno)
    metric               TEXT NOT NULL,
    deviation            DOUBLE PRECISION NOT NULL,
    first_window_unix_ns BIGINT NOT NULL,
    last_window_unix_ns  BIGINT NOT NULL,
    opened_unix_ns       BIGINT NOT NULL,
    closed_unix_ns       BIGINT,            -- NULL: open
    evidence             TEXT NOT NULL      -- JSON
);
CREATE INDEX incidents_open ON incidents (group_name, closed_unix_ns);
CREATE INDEX incidents_by_opened ON incidents (opened_unix_ns);
