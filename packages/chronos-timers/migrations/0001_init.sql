-- Chronos schema, version 1: the alarms table. Every scheduled wake is one row (I1).
-- Forward-only: later changes go in new files.

CREATE TABLE alarms (
    id               UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_did        TEXT NOT NULL,
    user_id          TEXT NOT NULL,
    label            TEXT NOT NULL DEFAULT '',
    kind             TEXT NOT NULL CHECK (kind IN ('once', 'cron')),
    fire_at          TIMESTAMPTZ,
    cron_expr        TEXT NOT NULL DEFAULT '',
    timezone         TEXT NOT NULL DEFAULT 'UTC',
    -- The claim key: when the alarm is next due. A retry after a failed delivery moves it later;
    -- scheduled_for keeps the occurrence's own instant, from which lateness is measured.
    next_fire_at     TIMESTAMPTZ NOT NULL,
    scheduled_for    TIMESTAMPTZ NOT NULL,
    conversation_id  TEXT NOT NULL DEFAULT '',
    wake_message     TEXT NOT NULL DEFAULT '',
    payload          JSONB NOT NULL DEFAULT '{}'::jsonb,
    status           TEXT NOT NULL DEFAULT 'active'
                     CHECK (status IN ('active', 'fired', 'cancelled', 'failed')),
    idempotency_key  TEXT NOT NULL DEFAULT '',
    max_failures     INT NOT NULL DEFAULT 5 CHECK (max_failures BETWEEN 1 AND 100),
    failure_count    INT NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    -- The lease: NULL = unclaimed. lease_token fences a worker whose lease lapsed.
    claimed_at       TIMESTAMPTZ,
    lease_token      UUID,
    -- The wake of the occurrence being delivered; kept across retries so webhook-id is stable.
    wake_id          UUID,
    require_ack      BOOLEAN NOT NULL DEFAULT false,
    source           TEXT NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'mcp', 'library')),
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_fired_at    TIMESTAMPTZ
);

-- The claim path: due, active alarms in due order. Leads with the due time so an idle claim
-- reads nothing however many alarms wait in the future.
CREATE INDEX alarms_due_idx ON alarms (next_fire_at) WHERE status = 'active';

-- Owner-scoped listing, newest first (keyset pagination on created_at, id).
CREATE INDEX alarms_owner_idx ON alarms (owner_did, created_at DESC);

-- Per-owner idempotency, enforced by the database.
CREATE UNIQUE INDEX alarms_idempotency_idx ON alarms (owner_did, idempotency_key)
    WHERE idempotency_key <> '';

-- The active-alarm quota counts these without reading an owner's history.
CREATE INDEX alarms_owner_active_idx ON alarms (owner_did) WHERE status = 'active';
