-- Version 7: operators (who log into the web UI and read fleet data;
-- devices only upload) and their sessions and API tokens, of which only
-- the SHA-256 of the secret is kept (`expires_unix_ns` NULL: an API token,
-- valid until revoked).

CREATE TABLE operators (
    name            TEXT PRIMARY KEY,
    group_name      TEXT NOT NULL,
    password_hash   TEXT NOT NULL,  -- Argon2id PHC string
    created_unix_ns INTEGER NOT NULL
);
CREATE TABLE operator_credentials (
    hash            BLOB PRIMARY KEY,
    operator        TEXT NOT NULL,
    group_name      TEXT NOT NULL,
    kind            TEXT NOT NULL,  -- session | api
    created_unix_ns INTEGER NOT NULL,
    expires_unix_ns INTEGER
);
CREATE INDEX operator_credentials_by_operator ON operator_credentials (operator);
