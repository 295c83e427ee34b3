-- Calendar recurrences, schedule windows, jitter and expiry (contract §3a, third edition).
--
-- rrule:          the RFC 5545 rule of an alarm of kind 'rrule', as stored and shown ('' otherwise).
-- rrule_start:    the rule's DTSTART (starts_at, else the creation instant to the whole second),
--                 kept so every later read expands the rule from the same start.
-- starts_at, ends_at: the window of a cron or rrule alarm (NULL: none).
-- jitter_seconds: each occurrence is due up to this many seconds after its instant (0: none).
-- expires_after_seconds: an occurrence not delivered this long after its due instant is given
--                 up (0: never); the deadline is scheduled_for plus this.
ALTER TABLE alarms
    ADD COLUMN rrule                 TEXT NOT NULL DEFAULT '',
    ADD COLUMN rrule_start           TIMESTAMPTZ,
    ADD COLUMN starts_at             TIMESTAMPTZ,
    ADD COLUMN ends_at               TIMESTAMPTZ,
    ADD COLUMN jitter_seconds        INT NOT NULL DEFAULT 0 CHECK (jitter_seconds BETWEEN 0 AND 3600),
    ADD COLUMN expires_after_seconds INT NOT NULL DEFAULT 0
                                     CHECK (expires_after_seconds BETWEEN 0 AND 31536000);

ALTER TABLE alarms DROP CONSTRAINT alarms_kind_check;
ALTER TABLE alarms ADD CONSTRAINT alarms_kind_check CHECK (kind IN ('once', 'cron', 'rrule'));
ALTER TABLE alarms DROP CONSTRAINT alarms_status_check;
ALTER TABLE alarms ADD CONSTRAINT alarms_status_check
    CHECK (status IN ('active', 'paused', 'fired', 'cancelled', 'failed', 'expired'));
ALTER TABLE wakes DROP CONSTRAINT wakes_status_check;
ALTER TABLE wakes ADD CONSTRAINT wakes_status_check
    CHECK (status IN ('pending', 'delivered', 'acknowledged', 'failed', 'expired'));

-- An expired alarm is finished, as a fired one: pruned after the retention period.
DROP INDEX IF EXISTS alarms_finished_idx;
CREATE INDEX alarms_finished_idx ON alarms (updated_at) WHERE status IN ('fired', 'cancelled', 'failed', 'expired');
