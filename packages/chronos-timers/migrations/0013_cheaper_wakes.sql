-- Fewer writes per fire (issue 18: where the drain's PostgreSQL time goes). Measured with
-- bench/statement-cost.ts (batch 200, variants interleaved in one run): the two foreign keys
-- below cost about 11 µs of PostgreSQL CPU per fire, the conversation index's entries for wakes
-- with no conversation about 2 µs — together 13 % of the claim and the recording of a fire.
--
-- The foreign keys. Each insert of a wake checked its alarm, and each attempt its wake, with a
-- row lock (FOR KEY SHARE) on a row the same statement had just written. Only the store writes
-- these tables, and it keeps them whole by itself: a wake is inserted only by the claim that
-- updates (and so locks) its alarm in the same statement, an attempt only by the statement that
-- updates its wake, and every delete takes the children with it (the retention of finished
-- alarms deletes their wakes and attempts in one statement; the retention of wakes deletes their
-- attempts, which ON DELETE CASCADE did before). test/tracker/retention.test.ts and
-- test/core/schema.test.ts check that nothing is left behind.
ALTER TABLE wake_attempts DROP CONSTRAINT IF EXISTS wake_attempts_wake_id_fkey;
ALTER TABLE wakes DROP CONSTRAINT IF EXISTS wakes_alarm_id_fkey;

-- A reply is reported in a conversation that has an id (1 to 200 characters): a wake with no
-- conversation (every library timer's) needs no entry in the index that finds them.
CREATE INDEX wakes_conversation_idx_2 ON wakes (owner_did, conversation_id)
    WHERE status IN ('pending', 'delivered') AND conversation_id <> '';
DROP INDEX wakes_conversation_idx;
ALTER INDEX wakes_conversation_idx_2 RENAME TO wakes_conversation_idx;

-- The tracker's first scan (0002) is gone: nudges count from delivery on wakes_nudge_idx (0009),
-- escalations run on wakes_escalation_idx (0005), and no statement reads this one any more; it
-- still took two entries for every wake that needs an ack.
DROP INDEX wakes_open_idx;
