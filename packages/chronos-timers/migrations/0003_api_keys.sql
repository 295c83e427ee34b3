-- API keys: only a hash of each key is stored.
CREATE TABLE api_keys (
    id               TEXT PRIMARY KEY,
    owner_did        TEXT NOT NULL,
    key_hash         TEXT NOT NULL UNIQUE,
    label            TEXT NOT NULL DEFAULT '',
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_at     TIMESTAMPTZ,
    revoked_at       TIMESTAMPTZ
);
CREATE INDEX api_keys_owner_idx ON api_keys (owner_did);
