-- Wakes: one row per fire, written before anything is sent, and the attempts made to deliver it.

CREATE TABLE wakes (
    id               UUID PRIMARY KEY,
    alarm_id         UUID NOT NULL REFERENCES alarms (id),
    owner_did        TEXT NOT NULL,
    user_id          TEXT NOT NULL,
    conversation_id  TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'delivered', 'acknowledged', 'failed')),
    scheduled_for    TIMESTAMPTZ NOT NULL,
    fired_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    delivered_at     TIMESTAMPTZ,
    lateness_ms      INT,
    attempts         INT NOT NULL DEFAULT 0,
    fire_count       INT NOT NULL DEFAULT 1,
    require_ack      BOOLEAN NOT NULL DEFAULT false,
    last_error       TEXT NOT NULL DEFAULT '',
    nudged_at        TIMESTAMPTZ,
    escalated_at     TIMESTAMPTZ,
    acknowledged_at  TIMESTAMPTZ,
    ack_note         TEXT,
    ack_inferred     BOOLEAN NOT NULL DEFAULT false,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX wakes_alarm_idx ON wakes (alarm_id, fired_at DESC);
CREATE INDEX wakes_owner_idx ON wakes (owner_did, created_at DESC);
-- The tracker's scan: wakes that still wait for an acknowledgement.
CREATE INDEX wakes_open_idx ON wakes (fired_at)
    WHERE require_ack AND status IN ('pending', 'delivered');

-- One row per delivery attempt: the fire history ("did it fire, when, how late, how many tries").
CREATE TABLE wake_attempts (
    wake_id          UUID NOT NULL REFERENCES wakes (id) ON DELETE CASCADE,
    attempt          INT NOT NULL,
    started_at       TIMESTAMPTZ NOT NULL,
    duration_ms      INT NOT NULL,
    outcome          TEXT NOT NULL CHECK (outcome IN ('delivered', 'failed', 'retry')),
    status_code      INT,
    error            TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (wake_id, attempt, started_at)
);
