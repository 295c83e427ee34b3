/**
 * The statements on `wakes` that surfaces use: list an owner's wakes, acknowledge one, and
 * acknowledge by a reported reply. Every one is scoped to an owner.
 *
 * Acknowledging is a conditional `UPDATE … RETURNING`: a wake moves to `acknowledged` once, and
 * only the statement that moved it gets it back, so with several instances (or a repeated
 * request) each ack happens — and is announced — exactly once. Time is the database's `now()`.
 */
import type { TimeCursor, Trigger, Wake, WakeAttempt, WakeStatus } from '../types.js';
import { sql, type Executor } from './driver/db.js';

// A wake's own columns (alias w) and its alarm's label and message (alias a): what the wake view
// shows is the alarm as it is now, as the nudge repeats it.
export const WAKE_COLUMNS = `w.id::text AS id, w.alarm_id::text AS alarm_id, w.owner_did, w.user_id,
  w.conversation_id, w.status, w.scheduled_for, w.fired_at, w.delivered_at, w.lateness_ms, w.attempts, w.fire_count,
  w.require_ack, w.last_error, w.nudged_at, w.escalated_at, w.acknowledged_at, w.ack_note, w.ack_inferred,
  w.created_at, w.trigger, a.label, a.wake_message`;

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
  trigger: Trigger;
  label: string;
  wake_message: string;
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
    trigger: row.trigger,
    label: row.label,
    wakeMessage: row.wake_message,
  };
}

// Newest first, keyset on (created_at, id) carried in the cursor itself (a wake may be pruned
// between pages; the next page still starts in the right place).
// Filters combine: status ($2), alarm ($6), conversation ($7), require_ack ($8); NULL = not
// filtered on. One alarm's wakes have a statement of their own, which names the alarm outright so
// that even a generic plan finds them by wakes_alarm_idx rather than walking the owner's every
// wake; every owner's wakes (the operator's dashboard, $1 NULL) have another.
const listStatement = (name: string, owner: string, alarm: string) =>
  sql(
    name,
    `SELECT ${WAKE_COLUMNS}, (extract(epoch FROM w.created_at) * 1000000)::int8::text AS created_us
     FROM chronos.wakes w JOIN chronos.alarms a ON a.id = w.alarm_id
     WHERE ${owner} AND ($2::text IS NULL OR w.status = $2)
       AND ${alarm}
       AND ($7::text IS NULL OR w.conversation_id = $7)
       AND ($8::bool IS NULL OR w.require_ack = $8)
       AND ($3::int8 IS NULL
            OR (w.created_at, w.id) < (timestamptz 'epoch' + $3::int8 * interval '1 microsecond', $4::uuid))
     ORDER BY w.created_at DESC, w.id DESC LIMIT $5`,
  );
const ANY_ALARM = '($6::uuid IS NULL OR w.alarm_id = $6::uuid)';
const list = listStatement('wakes_list', 'w.owner_did = $1', ANY_ALARM);
const listOfAlarm = listStatement('wakes_list_of_alarm', 'w.owner_did = $1', 'w.alarm_id = $6::uuid');
const listAll = listStatement('wakes_list_every_owner', '$1::text IS NULL', ANY_ALARM);

export interface WakeFilter {
  status?: WakeStatus;
  alarmId?: string;
  conversationId?: string;
  requireAck?: boolean;
}

/** One page of an owner's wakes (every owner's when `ownerDid` is null), newest first, after `after` when given. */
export async function wakesList(
  ex: Executor,
  ownerDid: string | null,
  options: WakeFilter & { limit: number; after?: TimeCursor },
): Promise<{ wake: Wake; cursor: TimeCursor }[]> {
  const statement = ownerDid === null ? listAll : options.alarmId ? listOfAlarm : list;
  const rows = await ex.query<WakeRow & { created_us: string }>(statement, [
    ownerDid,
    options.status ?? null,
    options.after?.createdUs ?? null,
    options.after?.id ?? null,
    options.limit,
    options.alarmId ?? null,
    options.conversationId ?? null,
    options.requireAck ?? null,
  ]);
  return rows.map((row) => ({ wake: toWake(row), cursor: { createdUs: row.created_us, id: row.id } }));
}

const get = sql(
  'wakes_get',
  `SELECT ${WAKE_COLUMNS} FROM chronos.wakes w JOIN chronos.alarms a ON a.id = w.alarm_id
   WHERE w.id = $1 AND w.owner_did = $2`,
);

/** One wake of one owner; another owner's wake is as absent as a missing one. */
export async function wakesGet(ex: Executor, ownerDid: string, id: string): Promise<Wake | null> {
  const [row] = await ex.query<WakeRow>(get, [id, ownerDid]);
  return row ? toWake(row) : null;
}

// Acknowledges a wake that is still open (pending or delivered), once: a wake already
// acknowledged, failed, or another owner's is left alone and nothing is returned.
const ack = sql(
  'wakes_ack',
  `UPDATE chronos.wakes w SET status = 'acknowledged', acknowledged_at = now(), ack_note = $3, ack_inferred = false,
     updated_at = now()
   FROM chronos.alarms a
   WHERE w.id = $1 AND w.owner_did = $2 AND w.status IN ('pending', 'delivered') AND a.id = w.alarm_id
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
// within the reply window before the database's now(); each once, as above. `<> ''` repeats the
// predicate of wakes_conversation_idx (migration 0013), so that even a generic plan can use it.
const ackByReply = sql(
  'wakes_ack_by_reply',
  `UPDATE chronos.wakes w SET status = 'acknowledged', acknowledged_at = now(), ack_inferred = true,
     updated_at = now()
   FROM chronos.alarms a
   WHERE w.owner_did = $1 AND w.conversation_id = $2 AND w.conversation_id <> ''
     AND w.status IN ('pending', 'delivered')
     AND (w.fired_at >= now() - $3::float8 * interval '1 millisecond'
          OR w.nudged_at >= now() - $3::float8 * interval '1 millisecond')
     AND a.id = w.alarm_id
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

/**
 * Every attempt of the wake `w` (a row of `chronos.wakes` in the statement around it), for a
 * LATERAL join: its rows of `wake_attempts`, and a first attempt delivered, which is kept on the
 * wake's own row (migration 0017) unless a row holds attempt 1 (recorded before that migration,
 * or first by a worker fenced out since). Columns: wake_id, attempt, started_at, duration_ms,
 * outcome, status_code, error.
 */
export const ATTEMPTS_OF_WAKE = `(
     SELECT a.wake_id, a.attempt, a.started_at, a.duration_ms, a.outcome, a.status_code, a.error
     FROM chronos.wake_attempts a WHERE a.wake_id = w.id
     UNION ALL
     SELECT w.id, 1, w.first_attempt_started_at, w.first_attempt_ms, 'delivered', w.first_attempt_status, ''
     WHERE w.first_attempt_started_at IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM chronos.wake_attempts a WHERE a.wake_id = w.id AND a.attempt = 1)
   )`;

// Every attempt of one of the owner's wakes, oldest first; null when the owner has no such wake.
const attempts = sql(
  'wakes_attempts',
  `SELECT w.id IS NOT NULL AS found, t.attempt, t.started_at, t.duration_ms, t.outcome, t.status_code, t.error
   FROM (SELECT id, first_attempt_started_at, first_attempt_ms, first_attempt_status
         FROM chronos.wakes WHERE id = $1 AND owner_did = $2) w
   LEFT JOIN LATERAL ${ATTEMPTS_OF_WAKE} t ON true
   ORDER BY t.started_at, t.attempt`,
);

export async function wakesAttempts(
  ex: Executor,
  ownerDid: string,
  wakeId: string,
): Promise<WakeAttempt[] | null> {
  const rows = await ex.query<{
    found: boolean;
    attempt: number | null;
    started_at: Date;
    duration_ms: number;
    outcome: WakeAttempt['outcome'];
    status_code: number | null;
    error: string;
  }>(attempts, [wakeId, ownerDid]);
  if (rows.length === 0) return null;
  return rows
    .filter((r) => r.attempt !== null)
    .map((r) => ({
      attempt: r.attempt!,
      startedAt: r.started_at,
      finishedAt: new Date(r.started_at.getTime() + r.duration_ms),
      outcome: r.outcome,
      statusCode: r.status_code,
      error: r.error === '' ? null : r.error,
      durationMs: r.duration_ms,
    }));
}
