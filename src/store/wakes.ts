/**
 * The statements on `wakes` that surfaces use: list an owner's wakes, acknowledge one, and
 * acknowledge by a reported reply. Every one is scoped to an owner.
 *
 * Acknowledging is a conditional `UPDATE … RETURNING`: a wake moves to `acknowledged` once, and
 * only the statement that moved it gets it back, so with several instances (or a repeated
 * request) each ack happens — and is announced — exactly once. Time is the database's `now()`.
 */
import type { Wake, WakeStatus } from '../types.js';
import { sql, type Executor } from './db.js';

export const WAKE_COLUMNS = `id::text AS id, alarm_id::text AS alarm_id, owner_did, user_id, conversation_id,
  status, scheduled_for, fired_at, delivered_at, lateness_ms, attempts, fire_count, require_ack, last_error,
  nudged_at, escalated_at, acknowledged_at, ack_note, ack_inferred, created_at`;

export interface WakeRow {
  id: string;
  alarm_id: string;
  owner_did: string;
  user_id: string;
  conversation_id: string;
  status: WakeStatus;
  scheduled_for: Date;
  fired_at: Date;
  delivered_at: Date | null;
  lateness_ms: number | null;
  attempts: number;
  fire_count: number;
  require_ack: boolean;
  last_error: string;
  nudged_at: Date | null;
  escalated_at: Date | null;
  acknowledged_at: Date | null;
  ack_note: string | null;
  ack_inferred: boolean;
  created_at: Date;
}

export function toWake(row: WakeRow): Wake {
  return {
    id: row.id,
    alarmId: row.alarm_id,
    ownerDid: row.owner_did,
    userId: row.user_id,
    conversationId: row.conversation_id,
    status: row.status,
    scheduledFor: row.scheduled_for,
    firedAt: row.fired_at,
    deliveredAt: row.delivered_at,
    latenessMs: row.lateness_ms,
    attempts: row.attempts,
    fireCount: row.fire_count,
    requireAck: row.require_ack,
    lastError: row.last_error,
    nudgedAt: row.nudged_at,
    escalatedAt: row.escalated_at,
    acknowledgedAt: row.acknowledged_at,
    ackNote: row.ack_note,
    ackInferred: row.ack_inferred,
    createdAt: row.created_at,
  };
}

/** Where a page of wakes ends: the last wake's `created_at` in microseconds (exact), and its id. */
export interface WakeCursor {
  createdUs: string;
  id: string;
}

// Newest first, keyset on (created_at, id) carried in the cursor itself (a wake may be pruned
// between pages; the next page still starts in the right place).
const list = sql(
  'wakes_list',
  `SELECT ${WAKE_COLUMNS}, (extract(epoch FROM created_at) * 1000000)::int8::text AS created_us
   FROM chronos.wakes
   WHERE owner_did = $1 AND ($2::text IS NULL OR status = $2)
     AND ($3::int8 IS NULL
          OR (created_at, id) < (timestamptz 'epoch' + $3::int8 * interval '1 microsecond', $4::uuid))
   ORDER BY created_at DESC, id DESC LIMIT $5`,
);

/** One page of an owner's wakes, newest first, after `after` when given. */
export async function wakesList(
  ex: Executor,
  ownerDid: string,
  options: { status?: WakeStatus; limit: number; after?: WakeCursor },
): Promise<{ wake: Wake; cursor: WakeCursor }[]> {
  const rows = await ex.query<WakeRow & { created_us: string }>(list, [
    ownerDid,
    options.status ?? null,
    options.after?.createdUs ?? null,
    options.after?.id ?? null,
    options.limit,
  ]);
  return rows.map((row) => ({ wake: toWake(row), cursor: { createdUs: row.created_us, id: row.id } }));
}

const get = sql('wakes_get', `SELECT ${WAKE_COLUMNS} FROM chronos.wakes WHERE id = $1 AND owner_did = $2`);

/** One wake of one owner; another owner's wake is as absent as a missing one. */
export async function wakesGet(ex: Executor, ownerDid: string, id: string): Promise<Wake | null> {
  const [row] = await ex.query<WakeRow>(get, [id, ownerDid]);
  return row ? toWake(row) : null;
}

// Acknowledges a wake that is still open (pending or delivered), once: a wake already
// acknowledged, failed, or another owner's is left alone and nothing is returned.
const ack = sql(
  'wakes_ack',
  `UPDATE chronos.wakes SET status = 'acknowledged', acknowledged_at = now(), ack_note = $3, ack_inferred = false,
     updated_at = now()
   WHERE id = $1 AND owner_did = $2 AND status IN ('pending', 'delivered')
   RETURNING ${WAKE_COLUMNS}`,
);

/** The wake, when this call acknowledged it; null when it was not open (look it up to say why). */
export async function wakesAck(
  ex: Executor,
  ownerDid: string,
  id: string,
  note: string,
): Promise<Wake | null> {
  const [row] = await ex.query<WakeRow>(ack, [id, ownerDid, note]);
  return row ? toWake(row) : null;
}

// Acknowledges (inferred) this owner's open wakes in a conversation whose fire or nudge was
// within the reply window before the database's now(); each once, as above.
const ackByReply = sql(
  'wakes_ack_by_reply',
  `UPDATE chronos.wakes SET status = 'acknowledged', acknowledged_at = now(), ack_inferred = true, updated_at = now()
   WHERE owner_did = $1 AND conversation_id = $2 AND status IN ('pending', 'delivered')
     AND (fired_at >= now() - $3::float8 * interval '1 millisecond'
          OR nudged_at >= now() - $3::float8 * interval '1 millisecond')
   RETURNING ${WAKE_COLUMNS}`,
);

export async function wakesAckByReply(
  ex: Executor,
  ownerDid: string,
  conversationId: string,
  replyWindowMs: number,
): Promise<Wake[]> {
  const rows = await ex.query<WakeRow>(ackByReply, [ownerDid, conversationId, replyWindowMs]);
  return rows.map(toWake).sort((a, b) => a.firedAt.getTime() - b.firedAt.getTime());
}
