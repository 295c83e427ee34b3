/**
 * PostgreSQL server settings Chronos depends on, read once at start to warn an operator.
 *
 * Autovacuum: Chronos prepares each statement once per connection, and PostgreSQL keeps a
 * prepared statement's generic plan until something invalidates it — the ANALYZE autovacuum runs
 * as a table grows. With autovacuum off, a plan made while `wakes` was small is kept as it grows,
 * and the dead rows every fire leaves are never cleared, so claims slow down over time.
 */
import { sql, type Executor } from './db.js';

const autovacuum = sql('server_autovacuum', `SELECT current_setting('autovacuum') AS value`);

/** The warning to log at start, or null when the server's settings are as Chronos needs them. */
export async function serverSettingsWarning(ex: Executor): Promise<string | null> {
  const [row] = await ex.query<{ value: string }>(autovacuum);
  return row?.value === 'off'
    ? 'autovacuum is off on this PostgreSQL server: Chronos tables are neither analyzed nor vacuumed, so ' +
        'prepared plans made while they were small are kept as they grow and dead rows slow claims ' +
        'down; turn it on, or run VACUUM ANALYZE on alarms, wakes and wake_attempts regularly'
    : null;
}

const writable = sql(
  'server_read_only',
  `SELECT pg_catalog.current_setting('transaction_read_only') AS read_only,
          pg_catalog.pg_is_in_recovery() AS in_recovery`,
);

/** Why this session cannot write (`/readyz` answers 503 then), or null when it can. */
export async function readOnlyReason(ex: Executor): Promise<string | null> {
  const [row] = await ex.query<{ read_only: string; in_recovery: boolean }>(writable);
  if (row?.in_recovery) return 'the database is a standby (read-only)';
  return row?.read_only === 'on' ? 'the database is read-only' : null;
}
