-- Queues (contract §4a): every alarm names who delivers it. `chronos serve` claims the queue
-- `router` (alarms made through HTTP, MCP and the schedules file); a library `work()` claims only
-- the queue it is given (library timers default to `default`). Rows stored before queues existed
-- go where they were delivered: the library's to `default`, the rest to `router`.
ALTER TABLE alarms ADD COLUMN queue TEXT NOT NULL DEFAULT 'router';
UPDATE alarms SET queue = 'default' WHERE source = 'library';
-- Every insert names its queue. Its form (1-64 of [a-z0-9_.-]) is checked by every door that takes
-- one; a CHECK here would cost each row of a bulk insert a regular expression.
ALTER TABLE alarms ALTER COLUMN queue DROP DEFAULT;

-- The claim of one queue: due active alarms of that queue, in due order, on an index that leads
-- with the queue, so a due alarm of another queue never stands in the way.
CREATE INDEX alarms_claim_idx ON alarms (queue, next_fire_at) WHERE status = 'active';
DROP INDEX alarms_due_idx;
