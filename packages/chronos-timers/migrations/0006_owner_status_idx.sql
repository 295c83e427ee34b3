-- The create's quota counts the owner's active alarms. With the partial alarms_owner_active_idx
-- (WHERE status = 'active') that count could also walk alarms_due_idx (partial on the same
-- predicate) filtering by owner, and a generic plan made while the table was small chose that
-- walk — every active alarm of every owner, per create — and kept it for the connection's life
-- when no ANALYZE came (autovacuum off). The count now names the status as a parameter, which no
-- partial index can serve, over this index, which holds the owner and the status together.
DROP INDEX alarms_owner_active_idx;
CREATE INDEX alarms_owner_status_idx ON alarms (owner_did, status);
