/**
 * The alarms migration 0018 repaired: rows stored before the payload limits held for what is
 * stored, whose payload it replaced by `{}` (failing the live ones), each with a `last_error`
 * saying what was there. Read once, right after that migration ran, to report them.
 */
import { sql, type Executor } from './driver/db.js';

const repaired = sql(
  'alarms_repaired_by_limits',
  `SELECT id FROM chronos.alarms
   WHERE payload = '{}'::jsonb AND last_error LIKE 'payload was % replaced by {}'
   ORDER BY id`,
);

/** The migration that repairs rows past the stored limits (see migrations/0018_…). */
export const STORED_LIMITS_MIGRATION = '0018_stored_payload_limits';

export async function alarmsRepairedByLimits(ex: Executor): Promise<string[]> {
  return (await ex.query<{ id: string }>(repaired)).map((r) => r.id);
}
