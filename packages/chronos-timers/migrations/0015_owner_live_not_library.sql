-- An application's own timers do not count against an owner's quotas (issues 13 and 18: bulk
-- scheduling). The quotas are there for a self-scheduling agent caught in a loop (contract §8);
-- a timer written through the library is the application's, in its own transaction, and the
-- library applies no quota to it. Yet every library timer wrote an entry in
-- alarms_owner_live_idx, which only the live-alarm count reads: about a tenth of what PostgreSQL
-- spends inserting a timer (50,000 rows inserted in psql, eight times each way, interleaved:
-- 710-866 ms without the index against 821-1,075 ms with it).
--
-- The index now leaves library timers out, and the count repeats its predicate word for word, so
-- it is still served by it (and, as in 0012, no other partial index has a predicate the count
-- implies). Building it reads the table once, under a lock that holds writes back meanwhile.
DROP INDEX alarms_owner_live_idx;
CREATE INDEX alarms_owner_live_idx ON alarms (owner_did)
  WHERE status IN ('active', 'paused') AND source <> 'library';
