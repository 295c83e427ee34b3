/**
 * Statements on `schedule_changes`: the heads-ups (`schedule.changed`) owed to agents whose
 * alarms a schedules-file edit created or changed (contract §13) — an outbox.
 *
 * A heads-up is inserted in the transaction of the change it announces, so it exists exactly
 * when the change committed. It is sent like a tracker stage: claimed in one statement per batch
 * (`FOR UPDATE SKIP LOCKED`, a lease and a fresh token), sent, and recorded only under the token
 * it was claimed with, so any number of trackers may run and a tracker that dies mid-send leaves
 * a lease that lapses: sent again later, never lost (receivers deduplicate on `webhook-id`).
 */
import { sql, type Executor } from './driver/db.js';
import { capLastError } from './last-error.js';

const MS = `interval '1 millisecond'`;

export type ScheduleChangeKind = 'created' | 'updated';

export interface NewScheduleChange {
  /** `<alarm id>:file:<n>`, the `webhook-id`. */
  messageId: string;
  alarmId: string;
  ownerDid: string;
  change: ScheduleChangeKind;
  /** The JSON text to send. */
  body: string;
}

const insert = sql(
  'schedule_changes_insert',
  `INSERT INTO chronos.schedule_changes (message_id, alarm_id, owner_did, change, body)
   VALUES ($1, $2, $3, $4, $5)`,
);

/** Owes one heads-up; run it on the transaction of the change. */
export async function scheduleChangesInsert(ex: Executor, change: NewScheduleChange): Promise<void> {
  await ex.query(insert, [change.messageId, change.alarmId, change.ownerDid, change.change, change.body]);
}

export interface ScheduleChangeClaim {
  id: string;
  token: string;
  /** 1 for the first send. */
  attempt: number;
  messageId: string;
  alarmId: string;
  ownerDid: string;
  change: ScheduleChangeKind;
  body: string;
}

/**
 * Claims up to $1 heads-ups not sent, not given up, not under a live lease nor waiting out a
 * retry, oldest first; each gets a lease of $2 ms and a fresh token.
 */
const claim = sql(
  'schedule_changes_claim',
  `UPDATE chronos.schedule_changes s SET lease_until = now() + $2::float8 * ${MS},
     lease_token = gen_random_uuid(), attempts = s.attempts + 1
   WHERE s.id = ANY(ARRAY(
       SELECT c.id FROM chronos.schedule_changes c
       WHERE c.sent_at IS NULL AND c.failed_at IS NULL
         AND (c.lease_until IS NULL OR c.lease_until <= now())
       ORDER BY c.created_at
       LIMIT $1
       FOR UPDATE SKIP LOCKED))
   RETURNING s.id::text AS id, s.lease_token::text AS token, s.attempts AS attempt, s.message_id,
     s.alarm_id::text AS alarm_id, s.owner_did, s.change, s.body, s.created_at`,
);

export async function scheduleChangesClaim(
  ex: Executor,
  options: { limit: number; leaseMs: number },
): Promise<ScheduleChangeClaim[]> {
  const rows = await ex.query<{
    id: string;
    token: string;
    attempt: number;
    message_id: string;
    alarm_id: string;
    owner_did: string;
    change: ScheduleChangeKind;
    body: string;
    created_at: Date;
  }>(claim, [options.limit, options.leaseMs]);
  return rows
    .sort((a, b) => a.created_at.getTime() - b.created_at.getTime())
    .map((row) => ({
      id: row.id,
      token: row.token,
      attempt: row.attempt,
      messageId: row.message_id,
      alarmId: row.alarm_id,
      ownerDid: row.owner_did,
      change: row.change,
      body: row.body,
    }));
}

export interface ScheduleChangeOutcome {
  id: string;
  token: string;
  /** 'sent': accepted; 'retry': try again after retryMs; 'failed': refused for good. */
  result: 'sent' | 'retry' | 'failed';
  error: string;
  retryMs: number;
}

// Records a batch of sends under their own tokens: sent_at for a 2xx, failed_at for a refusal
// trying again cannot mend, otherwise when to try again.
const record = sql(
  'schedule_changes_record',
  `UPDATE chronos.schedule_changes s SET
     sent_at = CASE WHEN o.result = 'sent' THEN now() ELSE s.sent_at END,
     failed_at = CASE WHEN o.result = 'failed' THEN now() ELSE s.failed_at END,
     lease_until = CASE WHEN o.result = 'retry' THEN now() + o.retry_ms * ${MS} END,
     lease_token = NULL,
     last_error = CASE WHEN o.result = 'sent' THEN s.last_error ELSE o.error END
   FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::float8[]) AS o(id, token, result, error, retry_ms)
   WHERE s.id = o.id AND s.lease_token = o.token
   RETURNING s.id::text AS id`,
);

/** Records outcomes in one statement; returns the ids recorded (the rest were fenced out). */
export async function scheduleChangesRecord(
  ex: Executor,
  outcomes: readonly ScheduleChangeOutcome[],
): Promise<Set<string>> {
  if (outcomes.length === 0) return new Set();
  const rows = await ex.query<{ id: string }>(record, [
    outcomes.map((o) => o.id),
    outcomes.map((o) => o.token),
    outcomes.map((o) => o.result),
    outcomes.map((o) => (o.result === 'sent' ? '' : capLastError(o.error))),
    outcomes.map((o) => (o.result === 'retry' ? Math.max(0, Math.round(o.retryMs)) : 0)),
  ]);
  return new Set(rows.map((r) => r.id));
}

// Deletes up to $2 heads-ups sent or given up more than $1 ms ago, oldest first.
const prune = sql(
  'schedule_changes_prune',
  `DELETE FROM chronos.schedule_changes WHERE id = ANY(ARRAY(
     SELECT id FROM chronos.schedule_changes
     WHERE (sent_at IS NOT NULL OR failed_at IS NOT NULL)
       AND coalesce(sent_at, failed_at) < now() - $1::float8 * ${MS}
     ORDER BY coalesce(sent_at, failed_at)
     LIMIT $2
     FOR UPDATE SKIP LOCKED))
   RETURNING id::text AS id`,
);

export async function scheduleChangesPrune(
  ex: Executor,
  options: { retentionMs: number; limit: number },
): Promise<number> {
  return (await ex.query(prune, [options.retentionMs, options.limit])).length;
}

const owed = sql(
  'schedule_changes_owed',
  `SELECT count(*)::int AS n FROM chronos.schedule_changes WHERE sent_at IS NULL AND failed_at IS NULL`,
);

/** Heads-ups not sent yet (under way, waiting out a retry): the tracker's backlog of them. */
export async function scheduleChangesOwed(ex: Executor): Promise<number> {
  const [row] = await ex.query<{ n: number }>(owed);
  return row?.n ?? 0;
}
