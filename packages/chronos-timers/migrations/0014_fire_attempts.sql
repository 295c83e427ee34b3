-- A library worker's fire is kept on its timer's row (issue 18: the drain). A timer of a queue
-- that a library `work()` delivers no longer opens a wake row, updates it and adds an attempt row
-- for every fire: those three writes, with the wake's indexes, were most of PostgreSQL's CPU per
-- fire, and only `chronos serve`'s wake tracking (acknowledge, nudge, escalate: contract §7)
-- reads them. What the handler is told that the wake used to count, the attempts of the fire in
-- hand, is counted here: the claim adds one, an outcome that ends the occurrence puts it back to
-- 0. Written only by claims and recordings, in no index: the claim stays heap-only (0007).
ALTER TABLE alarms ADD COLUMN fire_attempts int NOT NULL DEFAULT 0;
