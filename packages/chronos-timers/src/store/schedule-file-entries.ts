/**
 * Statements on `schedule_file_entries`: what the schedules file last said about each (owner,
 * key) it named (contract §13), and the lock that makes a reconcile one at a time.
 *
 * A reconcile runs in one transaction that first takes `scheduleFileLock`: reconciles of the
 * same schema — by several instances watching one file, or `chronos schedules apply` beside them
 * — run one after the other, and each reads what the one before committed. So an edit is applied
 * once, by whichever instance comes first; the others find every entry unchanged.
 */
import { pairKey } from '../types.js';
import { sql, type Executor } from './driver/db.js';

// One lock per schema: the statement text names `chronos.`, which an executor bound to another
// schema rewrites, so each schema's Chronos reconciles on its own key.
const lock = sql(
  'schedule_file_lock',
  `SELECT pg_advisory_xact_lock(hashtext('chronos.schedule_file_entries')::int8)`,
);

/** Takes the schedules file's transaction-scoped lock; held until the transaction ends. */
export async function scheduleFileLock(tx: Executor): Promise<void> {
  await tx.query(lock);
}

export interface FileEntryRecord {
  ownerDid: string;
  key: string;
  /** The normalised entry as last applied (JSON text). */
  entry: string;
  alarmId: string | null;
}

const byKeys = sql(
  'schedule_file_entries_by_keys',
  `SELECT owner_did, key, entry, alarm_id::text AS alarm_id FROM chronos.schedule_file_entries
   WHERE (owner_did, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
);

/** The records of these (owner, key) pairs, by `owner\0key`; pairs never applied are absent. */
export async function scheduleFileEntriesGet(
  ex: Executor,
  pairs: readonly { ownerDid: string; key: string }[],
): Promise<Map<string, FileEntryRecord>> {
  const found = new Map<string, FileEntryRecord>();
  if (pairs.length === 0) return found;
  const rows = await ex.query<{ owner_did: string; key: string; entry: string; alarm_id: string | null }>(
    byKeys,
    [pairs.map((p) => p.ownerDid), pairs.map((p) => p.key)],
  );
  for (const row of rows) {
    found.set(pairKey(row.owner_did, row.key), {
      ownerDid: row.owner_did,
      key: row.key,
      entry: row.entry,
      alarmId: row.alarm_id,
    });
  }
  return found;
}

// Records what the file now says for each pair, in one statement (a row per pair, inserted or
// replaced).
const put = sql(
  'schedule_file_entries_put',
  `INSERT INTO chronos.schedule_file_entries (owner_did, key, entry, alarm_id)
   SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[])
   ON CONFLICT (owner_did, key) DO UPDATE
     SET entry = excluded.entry, alarm_id = excluded.alarm_id, updated_at = now()`,
);

export async function scheduleFileEntriesPut(
  ex: Executor,
  records: readonly FileEntryRecord[],
): Promise<void> {
  if (records.length === 0) return;
  await ex.query(put, [
    records.map((r) => r.ownerDid),
    records.map((r) => r.key),
    records.map((r) => r.entry),
    records.map((r) => r.alarmId),
  ]);
}
