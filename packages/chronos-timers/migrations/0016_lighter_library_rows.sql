-- Fewer and cheaper index entries for a library timer (issue 18: bulk scheduling and the drain).
-- Indexes were 57 % of what PostgreSQL spent copying a batch of 5,000 timers (a `perf` profile
-- of the backend, bench/README.md "What PostgreSQL spends on a batch"), and every fire of a
-- one-off timer writes them again (its status changes, so the update cannot be heap-only).
-- Measured by inserting 5,000 library-shaped rows from a table PostgreSQL filled first, variants
-- interleaved (bench/index-variants.ts, results/index-variants.json): 47.6 ms with the indexes
-- of 0015, 45.7 with the collation below, 42.3 with the owner index below, 41.3 with both.
--
-- The text columns that indexes hold compare as bytes (collation "C"), not through the
-- database's locale: each comparison in a B-tree descent was a locale-aware `strcoll` that
-- copied both strings first. Owner DIDs, idempotency keys and queue names are identifiers, and
-- equality is the same either way (a deterministic collation's equality is byte equality); only
-- an ORDER BY on one of them can differ, and the one that orders by owner (a schedules file's
-- export) needs a stable order, not a linguistic one. The alarms' and the wakes' owner columns
-- change together, so a comparison of one with the other keeps one collation.
-- The indexes on these columns are rebuilt; the tables are not rewritten.
DROP INDEX alarms_owner_idx;
ALTER TABLE alarms
    ALTER COLUMN owner_did TYPE text COLLATE "C",
    ALTER COLUMN idempotency_key TYPE text COLLATE "C",
    ALTER COLUMN queue TYPE text COLLATE "C";
ALTER TABLE wakes ALTER COLUMN owner_did TYPE text COLLATE "C";

-- An owner's alarms, newest first, leave the library's timers out, as alarms_owner_live_idx does
-- (0015): the listing and the create rate are there for what an agent or an operator made through
-- the service. A library timer always has a key, so an owner's library timers are reached through
-- alarms_idempotency_idx instead (alarms.ts, the listing's second branch): a listing of an owner
-- with many library timers reads all of them to find the newest, which an application, which has
-- them in its own tables, rarely asks for.
CREATE INDEX alarms_owner_idx ON alarms (owner_did, created_at DESC) WHERE source <> 'library';
