-- The tracker's stages on each wake (contract §7): nudge, escalation and receipt. Each stage is
-- claimed with a lease, so a tracker that dies mid-send leaves the stage to be sent again, never
-- lost.
--
-- Per stage:
--   <stage>_lease_until  "not before": while a send is under way, the end of its lease; after a
--                        failed send, when to try again. NULL: never claimed, or done.
--   <stage>_lease_token  the claim under way (NULL when none). An outcome is recorded only under
--                        the token it was claimed with, so a tracker whose lease lapsed cannot
--                        write over a newer claim.
--   <stage>_attempts     sends tried, for the backoff.
-- A stage is done when its timestamp is set and no claim is under way: nudged_at (set at the
-- claim, like fired_at, and cleared again if the send fails), escalated_at (set only once the
-- fallback answered 2xx), receipt_sent_at (likewise).
ALTER TABLE wakes
    ADD COLUMN nudge_attempts          INT NOT NULL DEFAULT 0,
    ADD COLUMN nudge_lease_until       TIMESTAMPTZ,
    ADD COLUMN nudge_lease_token       UUID,
    ADD COLUMN escalation_attempts     INT NOT NULL DEFAULT 0,
    ADD COLUMN escalation_lease_until  TIMESTAMPTZ,
    ADD COLUMN escalation_lease_token  UUID,
    ADD COLUMN receipt_sent_at         TIMESTAMPTZ,
    ADD COLUMN receipt_attempts        INT NOT NULL DEFAULT 0,
    ADD COLUMN receipt_lease_until     TIMESTAMPTZ,
    ADD COLUMN receipt_lease_token     UUID,
    -- The last failed stage send, e.g. "fallback answered 503 Service Unavailable".
    ADD COLUMN tracker_error           TEXT NOT NULL DEFAULT '';

-- Wakes whose nudge is not done: each shrinks as its stage completes, so a pass reads only the
-- wakes that still wait for something.
CREATE INDEX wakes_nudge_idx ON wakes (fired_at)
    WHERE require_ack AND status IN ('pending', 'delivered')
      AND (nudged_at IS NULL OR nudge_lease_token IS NOT NULL);

-- Wakes whose escalation is not done (a failed delivery is escalated too).
CREATE INDEX wakes_escalation_idx ON wakes (fired_at)
    WHERE require_ack AND escalated_at IS NULL AND status IN ('pending', 'delivered', 'failed');

-- Acknowledged wakes whose receipt has not been accepted yet.
CREATE INDEX wakes_receipt_idx ON wakes (acknowledged_at)
    WHERE status = 'acknowledged' AND receipt_sent_at IS NULL;

-- Retention: when a finished wake's retention period starts. NULL for a wake that still waits
-- for an acknowledgement and has not been escalated; pending wakes are never in it.
CREATE INDEX wakes_retention_idx ON wakes ((
    CASE WHEN status = 'acknowledged' THEN acknowledged_at
         WHEN status = 'failed' THEN fired_at
         WHEN NOT require_ack THEN delivered_at
         ELSE escalated_at END))
    WHERE status <> 'pending';
