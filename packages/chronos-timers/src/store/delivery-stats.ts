/**
 * Delivery figures read at scrape time for `/metrics`. Read-only; nothing here takes a lock.
 */
import { sql, type Executor } from './driver/db.js';

// Active alarms whose last delivery attempt failed and that wait for a retry (or are being
// retried now). Walks the active rows only (alarms_claim_idx is partial on status = 'active').
const retryQueueDepth = sql(
  'delivery_retry_queue_depth',
  `SELECT count(*)::int AS n FROM chronos.alarms WHERE status = 'active' AND failure_count > 0`,
);

export async function deliveryRetryQueueDepth(ex: Executor): Promise<number> {
  const [row] = await ex.query<{ n: number }>(retryQueueDepth);
  return row?.n ?? 0;
}
