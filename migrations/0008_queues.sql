-- Queues (contract §4a): every alarm names who delivers it. `chronos serve` claims the queue
-- `router` (alarms made through HTTP, MCP and the schedules file); a library `work()` claims only
-- the queue it is given (library timers default to `default`). Rows stored before queues existed
-- go where they were delivered: the library's to `default`, the rest to `router`.
ALTER TABLE alarms ADD COLUMN queue TEXT NOT NULL DEFAULT 'router';
UPDATE alarms SET queue = 'default' WHERE source = 'library';
-- Every insert names its queue.
ALTER TABLE alarms ALTER COLUMN queue DROP DEFAULT;
ALTER TABLE alarms ADD CONSTRAINT alarms_queue_check CHECK (queue ~ '^[a-z0-9_.-]{1,64}$');

-- The claim of one queue: due active alarms of that queue, in due order, on an index that leads
-- with the queue, so a due alarm of another queue never stands in the way.
CREATE INDEX alarms_claim_idx ON alarms (queue, next_fire_at) WHERE status = 'active';
DROP INDEX alarms_due_idx;
