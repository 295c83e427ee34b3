-- Operators and agents in control (contract §5, §6, §7): pause and resume, fire now, retry; the
-- trigger of each wake; nudges counted from delivery; the schedules file as a source.

ALTER TABLE alarms DROP CONSTRAINT alarms_status_check;
ALTER TABLE alarms ADD CONSTRAINT alarms_status_check
    CHECK (status IN ('active', 'paused', 'fired', 'cancelled', 'failed'));
ALTER TABLE alarms DROP CONSTRAINT alarms_source_check;
ALTER TABLE alarms ADD CONSTRAINT alarms_source_check CHECK (source IN ('api', 'mcp', 'library', 'file'));

-- What brought the occurrence in hand: its schedule, or a "fire now" (manual). A manual fire is
-- claimable whether the alarm is active or paused; every change out of active and paused sets it
-- back to 'schedule'.
ALTER TABLE alarms ADD COLUMN trigger TEXT NOT NULL DEFAULT 'schedule'
    CHECK (trigger IN ('schedule', 'manual'));
-- For a manual fire of an active cron alarm: the scheduled occurrence it stepped in front of,
-- which the alarm goes back to afterwards (its schedule is not moved). NULL otherwise.
ALTER TABLE alarms ADD COLUMN held_occurrence TIMESTAMPTZ;

-- The claim of one queue, now including manual fires of paused alarms.
CREATE INDEX alarms_claim_idx_2 ON alarms (queue, next_fire_at) WHERE status = 'active' OR trigger = 'manual';
DROP INDEX alarms_claim_idx;
ALTER INDEX alarms_claim_idx_2 RENAME TO alarms_claim_idx;

ALTER TABLE wakes ADD COLUMN trigger TEXT NOT NULL DEFAULT 'schedule' CHECK (trigger IN ('schedule', 'manual'));

-- Nudges count from delivery: only a delivered wake is nudged, nudge_after after delivered_at.
DROP INDEX wakes_nudge_idx;
CREATE INDEX wakes_nudge_idx ON wakes (delivered_at)
    WHERE require_ack AND status = 'delivered' AND (nudged_at IS NULL OR nudge_lease_token IS NOT NULL);

-- An owner's wakes of one alarm, and an owner's wakes by status (GET /v1/wakes filters).
CREATE INDEX wakes_owner_alarm_idx ON wakes (owner_did, alarm_id, created_at DESC);

-- Retention of finished alarms: the fired, cancelled and failed, oldest change first.
CREATE INDEX alarms_finished_idx ON alarms (updated_at) WHERE status IN ('fired', 'cancelled', 'failed');
