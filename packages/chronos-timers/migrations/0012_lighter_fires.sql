-- Fewer index entries written per fire (issue 13: the library drain must not get slower). 0009
-- added two indexes that every fire writes to, and the drain lost a quarter of its rate
-- (bench/drain.ts: PostgreSQL CPU per fire from about 70 to about 90 µs on the same machine).
--
-- An owner's live alarms (active or paused: what max_active_alarms counts) get a partial index
-- of their own, in place of (owner_did, status): a fired, cancelled or failed alarm then leaves
-- no entry in it, which pays for alarms_finished_idx (retention needs that one). The count names
-- its statuses as literals; no other partial index has a predicate they imply, so a generic plan
-- cannot walk another index instead (the trap of 0006).
CREATE INDEX alarms_owner_live_idx ON alarms (owner_did) WHERE status IN ('active', 'paused');
DROP INDEX alarms_owner_status_idx;

-- An alarm's wakes are found by wakes_alarm_idx (alarm_id, fired_at), with a statement of their
-- own; the owner's and alarm's index of 0009 only repeated it, at one more entry per wake.
DROP INDEX wakes_owner_alarm_idx;
