-- edge-service schema version 7: operators (people who log into the web UI
-- and read fleet data; devices only upload) and their credentials.
-- An operator belongs to one group; the password is an Argon2id PHC string.
CREATE TABLE operators (
    name            TEXT PRIMARY KEY,
    group_name      TEXT NOT NULL,
    password_hash   TEXT NOT NULL,
    created_unix_ns BIGINT NOT NULL
);
-- Web UI sessions and API tokens: only the SHA-256 of the secret is kept.
-- expires_unix_ns NULL: an API token, valid until revoked.
CREATE TABLE operator_credentials (
    hash            BYTEA PRIMARY KEY,
    operator        TEXT NOT NULL,
    group_name      TEXT NOT NULL,
    kind            TEXT NOT NULL,
    created_unix_ns BIGINT NOT NULL,
    expires_unix_ns BIGINT
);
CREATE INDEX operator_credentials_by_operator ON operator_credentials (operator);
