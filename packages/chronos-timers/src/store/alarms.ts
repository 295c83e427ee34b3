/**
 * The statements on `alarms`, and the row they read. Each says what it guarantees; none is
 * built from user text. The inserts of new alarms are in alarm-inserts.ts (one statement per
 * batch or part) and alarm-copy.ts (a batch's parts as one binary `COPY`).
 *
 * Due-ness is decided here, by the database's `now()` (I5). Writes that bring an alarm due
 * within `notify_horizon` announce its queue on the `chronos_due` channel so a sleeping
 * dispatcher of that queue wakes at once; writes due later do not notify (a NOTIFY takes a
 * database-wide lock at commit, and the dispatcher's fallback poll will see them anyway).
 */
import { RawJson } from '../json.js';
import {
  ALARM_STATUSES,
  pairKey,
  type Alarm,
  type AlarmKind,
  type AlarmSource,
  type AlarmStatus,
  type TimeCursor,
  type Trigger,
} from '../types.js';
import { ChronosError } from '../errors.js';
import {
  channel,
  pruneBatch,
  sqlState,
  sql,
  type Db,
  type Executor,
  type PruneBatch,
  type Statement,
} from './driver/db.js';

/** The channel that announces alarms due soon; its payload names their queue. */
export const dueChannel = (schema: string): string => channel(schema, 'due');

const COLUMN_NAMES = `owner_did user_id label kind fire_at cron_expr timezone next_fire_at scheduled_for
  conversation_id wake_message status idempotency_key max_failures failure_count last_error claimed_at require_ack
  source queue trigger held_occurrence traceparent created_at updated_at last_fired_at
  rrule rrule_start starts_at ends_at jitter_seconds expires_after_seconds`.split(/\s+/);

/** The columns an AlarmRow is read from, of the row aliased `alias` (or unaliased). */
export function alarmColumns(alias = ''): string {
  const a = alias ? `${alias}.` : '';
  return [`${a}id::text AS id`, `${a}payload::text AS payload`, ...COLUMN_NAMES.map((c) => `${a}${c}`)].join(
    ', ',
  );
}

const COLUMNS = alarmColumns();

// Announces the write when the alarm is due within the horizon ($n milliseconds).
const notifyIfSoon = (horizonParam: string) =>
  `CASE WHEN status = 'active' AND next_fire_at <= now() + ${horizonParam}::int * interval '1 millisecond'
   THEN pg_notify('chronos_due', queue) END AS notified`;

export interface AlarmRow {
  id: string;
  owner_did: string;
  user_id: string;
  label: string;
  kind: AlarmKind;
  fire_at: Date | null;
  cron_expr: string;
  timezone: string;
  next_fire_at: Date;
  scheduled_for: Date;
  conversation_id: string;
  wake_message: string;
  payload: string;
  status: AlarmStatus;
  idempotency_key: string;
  max_failures: number;
  failure_count: number;
  last_error: string;
  claimed_at: Date | null;
  require_ack: boolean;
  source: AlarmSource;
  queue: string;
  trigger: Trigger;
  held_occurrence: Date | null;
  traceparent: string;
  created_at: Date;
  updated_at: Date;
  last_fired_at: Date | null;
  rrule: string;
  rrule_start: Date | null;
  starts_at: Date | null;
  ends_at: Date | null;
  jitter_seconds: number;
  expires_after_seconds: number;
}

export function toAlarm(row: AlarmRow): Alarm {
  return {
    id: row.id,
    ownerDid: row.owner_did,
    userId: row.user_id,
    label: row.label,
    kind: row.kind,
    fireAt: row.fire_at,
    cronExpr: row.cron_expr,
    timezone: row.timezone,
    nextFireAt: row.next_fire_at,
    scheduledFor: row.scheduled_for,
    conversationId: row.conversation_id,
    wakeMessage: row.wake_message,
    payload: new RawJson(row.payload),
    status: row.status,
    idempotencyKey: row.idempotency_key,
    maxFailures: row.max_failures,
    failureCount: row.failure_count,
    lastError: row.last_error,
    claimedAt: row.claimed_at,
    requireAck: row.require_ack,
    source: row.source,
    queue: row.queue,
    trigger: row.trigger,
    heldOccurrence: row.held_occurrence,
    traceparent: row.traceparent,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    lastFiredAt: row.last_fired_at,
    rrule: row.rrule,
    rruleStart: row.rrule_start,
    startsAt: row.starts_at,
    endsAt: row.ends_at,
    jitterSeconds: row.jitter_seconds,
    expiresAfterSeconds: row.expires_after_seconds,
  };
}

/** The schedule columns, as resolved from `at` / `in_seconds` / `cron`. */
export interface ScheduleColumns {
  kind: AlarmKind;
  fireAt: Date | null;
  cronExpr: string;
  timezone: string;
  nextFireAt: Date;
  /** Contract §3a; each absent when not set. */
  rrule?: string;
  rruleStart?: Date;
  startsAt?: Date;
  endsAt?: Date;
  jitterSeconds?: number;
}

/** The §3a columns of an alarm, or null when it has none (most alarms): one JSON array. */
export function recurrenceExtra(
  a: ScheduleColumns & { expiresAfterSeconds?: number },
): [string, number | null, number | null, number | null, number, number] | null {
  if (!a.rrule && !a.startsAt && !a.endsAt && !a.jitterSeconds && !a.expiresAfterSeconds) return null;
  return [
    a.rrule ?? '',
    a.rruleStart?.getTime() ?? null,
    a.startsAt?.getTime() ?? null,
    a.endsAt?.getTime() ?? null,
    a.jitterSeconds ?? 0,
    a.expiresAfterSeconds ?? 0,
  ];
}

export interface NewAlarm extends ScheduleColumns {
  /** Made by the caller when the due instant depends on it (jitter); else made at the insert. */
  id?: string;
  expiresAfterSeconds?: number;
  ownerDid: string;
  userId: string;
  label: string;
  conversationId: string;
  wakeMessage: string;
  /** JSON text of an object; stored as JSONB. */
  payload: string;
  /** The text JSONB gives back for `payload`, when the caller knows it (json.ts, `jsonbText`). */
  storedPayload: string | undefined;
  idempotencyKey: string;
  maxFailures: number;
  requireAck: boolean;
  queue: string;
  /** The W3C traceparent of the span that created it, or ''. */
  traceparent: string;
}

/**
 * The alarms an owner's `max_active_alarms` counts (a paused one is still theirs to resume; an
 * application's library timer is not the agent's, migration 0015): the predicate of
 * alarms_owner_live_idx, word for word, so the count is served by it.
 */
export const LIVE = `status IN ('active', 'paused') AND source <> 'library'`;

// The alarms of these (owner, key) pairs, in one statement.
const byKeys = sql(
  'alarms_by_keys',
  `SELECT ${COLUMNS} FROM chronos.alarms a
   WHERE (a.owner_did, a.idempotency_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
     AND a.idempotency_key <> ''`,
);

const byKey = sql(
  'alarms_by_key',
  `SELECT ${COLUMNS} FROM chronos.alarms WHERE owner_did = $1 AND idempotency_key = $2 AND idempotency_key <> ''`,
);

// The owner's quota lock: a transaction-scoped advisory lock on (this schema, the owner), taken
// before the statement that counts the owner's alarms and writes, and held until its commit. A
// statement sees what was committed when it started, so the lock must be a statement of its
// own: every create, batch and retry of one owner that counts a quota then counts what the one
// before it committed, on any number of instances (`'chronos_` names this schema's lock, as
// inSchema rewrites it). Other owners are not held up.
const ownerQuotaLock = sql(
  'alarms_owner_quota_lock',
  `SELECT pg_advisory_xact_lock(hashtext('chronos_quota'), hashtext($1::text))`,
);

/**
 * Runs `fn` in a transaction holding the owner's quota lock: on `ex` itself when it is one
 * transaction's connection (the caller's), else in a transaction of its own.
 */
export async function underOwnerLock<T>(
  ex: Executor,
  ownerDid: string,
  fn: (tx: Executor) => Promise<T>,
): Promise<T> {
  const run = async (tx: Executor) => {
    await tx.query(ownerQuotaLock, [ownerDid]);
    return fn(tx);
  };
  const db = ex as Partial<Db>;
  return typeof db.transaction === 'function' ? db.transaction(run) : run(ex);
}

/** An alarm as the insert wrote it: the columns' defaults filled in, the payload as stored. */
export function writtenAlarm(
  a: NewAlarm,
  id: string,
  payload: RawJson,
  source: AlarmSource,
  createdAt: Date,
): Alarm {
  return {
    id,
    ownerDid: a.ownerDid,
    userId: a.userId,
    label: a.label,
    kind: a.kind,
    fireAt: a.fireAt,
    cronExpr: a.cronExpr,
    timezone: a.timezone,
    nextFireAt: a.nextFireAt,
    scheduledFor: a.nextFireAt,
    conversationId: a.conversationId,
    wakeMessage: a.wakeMessage,
    payload,
    status: 'active',
    idempotencyKey: a.idempotencyKey,
    maxFailures: a.maxFailures,
    failureCount: 0,
    lastError: '',
    claimedAt: null,
    requireAck: a.requireAck,
    source,
    queue: a.queue,
    trigger: 'schedule',
    heldOccurrence: null,
    traceparent: a.traceparent,
    createdAt,
    updatedAt: createdAt,
    lastFiredAt: null,
    rrule: a.rrule ?? '',
    rruleStart: a.rruleStart ?? null,
    startsAt: a.startsAt ?? null,
    endsAt: a.endsAt ?? null,
    jitterSeconds: a.jitterSeconds ?? 0,
    expiresAfterSeconds: a.expiresAfterSeconds ?? 0,
  };
}

/** The alarms with these idempotency keys, by `owner\0key`; pairs with no alarm are absent. */
export async function alarmsGetByKeys(
  ex: Executor,
  pairs: readonly { ownerDid: string; key: string }[],
): Promise<Map<string, Alarm>> {
  const found = new Map<string, Alarm>();
  if (pairs.length === 0) return found;
  const rows = await ex.query<AlarmRow>(byKeys, [pairs.map((p) => p.ownerDid), pairs.map((p) => p.key)]);
  for (const row of rows) found.set(pairKey(row.owner_did, row.idempotency_key), toAlarm(row));
  return found;
}

export async function alarmsGetByKey(ex: Executor, ownerDid: string, key: string): Promise<Alarm | null> {
  const [row] = await ex.query<AlarmRow>(byKey, [ownerDid, key]);
  return row ? toAlarm(row) : null;
}

const get = sql('alarms_get', `SELECT ${COLUMNS} FROM chronos.alarms WHERE id = $1 AND owner_did = $2`);

/** One alarm of one owner; another owner's alarm is as absent as a missing one. */
export async function alarmsGet(ex: Executor, ownerDid: string, id: string): Promise<Alarm | null> {
  const [row] = await ex.query<AlarmRow>(get, [id, ownerDid]);
  return row ? toAlarm(row) : null;
}

// Newest first, keyset on (created_at, id) carried in the cursor itself: the database's
// microseconds decide the order, a page is stable while alarms are created, and an alarm deleted
// between pages (retention) does not end the list. `q` ($6) keeps labels that contain it, in any
// case (strpos, so `%` and `_` are plain characters). One statement for one owner ($1), another
// for every owner (the operator's dashboard): neither needs a generic plan that fits both.
//
// One owner's page is two pages merged: its alarms made through the service, read newest first
// on alarms_owner_idx (whose predicate the branch repeats word for word), and its library
// timers, which that index leaves out (0016), reached through alarms_idempotency_idx (every
// library timer has a key) and sorted.
const LIST_PAGE = `($2::text IS NULL OR status = $2)
       AND ($6::text IS NULL OR strpos(lower(label), lower($6)) > 0)
       AND ($3::int8 IS NULL
            OR (created_at, id) < (timestamptz 'epoch' + $3::int8 * interval '1 microsecond', $4::uuid))
     ORDER BY created_at DESC, id DESC LIMIT $5`;
const LISTED = `${COLUMNS}, (extract(epoch FROM created_at) * 1000000)::int8::text AS created_us`;
const list = sql(
  'alarms_list',
  `(SELECT ${LISTED} FROM chronos.alarms WHERE owner_did = $1 AND source <> 'library' AND ${LIST_PAGE})
   UNION ALL
   (SELECT ${LISTED} FROM chronos.alarms
     WHERE owner_did = $1 AND source = 'library' AND idempotency_key <> '' AND ${LIST_PAGE})
   ORDER BY created_at DESC, id DESC LIMIT $5`,
);
const listAll = sql(
  'alarms_list_every_owner',
  `SELECT ${LISTED} FROM chronos.alarms WHERE $1::text IS NULL AND ${LIST_PAGE}`,
);

/**
 * One page of an owner's alarms (of every owner when `ownerDid` is null), newest first, after
 * `after` when given; `labelContains` keeps those whose label contains it, ignoring case.
 */
export async function alarmsList(
  ex: Executor,
  ownerDid: string | null,
  options: { status?: AlarmStatus; labelContains?: string; limit: number; after?: TimeCursor },
): Promise<{ alarm: Alarm; cursor: TimeCursor }[]> {
  const rows = await ex.query<AlarmRow & { created_us: string }>(ownerDid === null ? listAll : list, [
    ownerDid,
    options.status ?? null,
    options.after?.createdUs ?? null,
    options.after?.id ?? null,
    options.limit,
    options.labelContains ?? null,
  ]);
  return rows.map((row) => ({ alarm: toAlarm(row), cursor: { createdUs: row.created_us, id: row.id } }));
}

export type AlarmRef = { id: string } | { key: string };

// An alarm named by its id or by its idempotency key ($1), for one owner ($2): the statement is
// made twice, once per form, each with its own index lookup.
const BY_REF = {
  id: 'id = $1::uuid AND owner_did = $2',
  key: "idempotency_key = $1 AND owner_did = $2 AND idempotency_key <> ''",
} as const;

interface RefStatement {
  id: Statement;
  key: Statement;
}

function byRef(name: string, text: (where: string) => string): RefStatement {
  return { id: sql(`${name}_by_id`, text(BY_REF.id)), key: sql(`${name}_by_key`, text(BY_REF.key)) };
}

async function updateOne(
  ex: Executor,
  statement: RefStatement,
  ownerDid: string,
  ref: AlarmRef,
  more: readonly unknown[] = [],
): Promise<Alarm | null> {
  const [row] = await ex.query<AlarmRow>('id' in ref ? statement.id : statement.key, [
    'id' in ref ? ref.id : ref.key,
    ownerDid,
    ...more,
  ]);
  return row ? toAlarm(row) : null;
}

// What every change out of `active` or `paused` also does: the occurrence in hand is given up —
// no lease (a delivery in flight cannot record over the change: its fencing token is gone), no
// wake, no manual fire.
const LET_GO = `claimed_at = NULL, lease_token = NULL, wake_id = NULL, trigger = 'schedule',
  held_occurrence = NULL, updated_at = now()`;

// One UPDATE: an active or paused alarm becomes cancelled; it is never claimed again.
const cancel = byRef(
  'alarms_cancel',
  (where) => `UPDATE chronos.alarms SET status = 'cancelled', ${LET_GO}
   WHERE ${where} AND status IN ('active', 'paused') RETURNING ${COLUMNS}`,
);

/** Cancels an active or paused alarm; null when there is none to cancel (look it up to say why). */
export function alarmsCancel(ex: Executor, ownerDid: string, ref: AlarmRef): Promise<Alarm | null> {
  return updateOne(ex, cancel, ownerDid, ref);
}

// One UPDATE: an active alarm stops firing. A delivery of its schedule in flight is fenced out, as
// by a cancel; a manual fire asked for before the pause still happens (it was asked for).
const pause = sql(
  'alarms_pause',
  `UPDATE chronos.alarms SET status = 'paused',
     claimed_at = CASE WHEN trigger = 'manual' THEN claimed_at END,
     lease_token = CASE WHEN trigger = 'manual' THEN lease_token END,
     wake_id = CASE WHEN trigger = 'manual' THEN wake_id END,
     held_occurrence = NULL, updated_at = now()
   WHERE ${BY_REF.id} AND status = 'active' RETURNING ${COLUMNS}`,
);

/** Pauses an active alarm; null when it is not active. */
export function alarmsPause(ex: Executor, ownerDid: string, id: string): Promise<Alarm | null> {
  return updateOne(ex, { id: pause, key: pause }, ownerDid, { id });
}

// One UPDATE: a paused alarm is active again, due at $3 (its next occurrence after now, or its
// own instant — or now when that passed — for a one-shot: no catching up). A one-shot's due
// instant stays its own (scheduled_for = fire_at, §4): lateness counts from there. A manual fire
// still pending keeps its place and the schedule waits behind it in held_occurrence.
const resume = sql(
  'alarms_resume',
  `UPDATE chronos.alarms SET status = 'active',
     next_fire_at = CASE WHEN trigger = 'manual' THEN next_fire_at ELSE $3 END,
     scheduled_for = CASE WHEN trigger = 'manual' THEN scheduled_for
                          WHEN kind = 'once' THEN coalesce(fire_at, $3) ELSE $3 END,
     held_occurrence = CASE WHEN trigger = 'manual' AND kind <> 'once' THEN $3::timestamptz END,
     updated_at = now()
   WHERE ${BY_REF.id} AND status = 'paused'
   RETURNING ${COLUMNS}, ${notifyIfSoon('$4')}`,
);

/** Resumes a paused alarm, due at `dueAt`; null when it is not paused. */
export function alarmsResume(
  ex: Executor,
  ownerDid: string,
  id: string,
  dueAt: Date,
  notifyHorizonMs: number,
): Promise<Alarm | null> {
  return updateOne(ex, { id: resume, key: resume }, ownerDid, { id }, [dueAt, notifyHorizonMs]);
}

// One UPDATE: a paused recurring alarm with no occurrence left (its rule ended, or its ends_at
// passed while it was paused) is finished on resume, as a fire past its last occurrence would
// have finished it. A manual fire still pending keeps it paused (it has a delivery to make).
const finish = sql(
  'alarms_finish',
  `UPDATE chronos.alarms SET status = 'fired', held_occurrence = NULL, updated_at = now()
   WHERE ${BY_REF.id} AND status = 'paused' AND kind <> 'once' AND trigger <> 'manual'
   RETURNING ${COLUMNS}`,
);

/** Finishes (`fired`) a paused recurring alarm that has nothing left to fire; null otherwise. */
export function alarmsFinish(ex: Executor, ownerDid: string, id: string): Promise<Alarm | null> {
  return updateOne(ex, { id: finish, key: finish }, ownerDid, { id });
}

// One UPDATE: one extra delivery of an active or paused alarm, due now (trigger 'manual', a fresh
// wake). A cron alarm's schedule is not moved: an active one returns to held_occurrence after it.
// Refused (nothing returned) while a delivery is under a live lease: it is being delivered now.
const fire = sql(
  'alarms_fire',
  `UPDATE chronos.alarms SET trigger = 'manual', next_fire_at = now(), scheduled_for = now(),
     held_occurrence = CASE WHEN kind <> 'once' AND status = 'active' AND trigger = 'schedule'
                            THEN next_fire_at ELSE held_occurrence END,
     wake_id = NULL, claimed_at = NULL, lease_token = NULL, updated_at = now()
   WHERE ${BY_REF.id} AND status IN ('active', 'paused')
     AND (claimed_at IS NULL OR claimed_at <= now() - $3::int * interval '1 millisecond')
   RETURNING ${COLUMNS}, pg_notify('chronos_due', queue) AS notified`,
);

/** Fires an alarm now, once more; null when it is not active or paused, or is being delivered. */
export function alarmsFire(
  ex: Executor,
  ownerDid: string,
  id: string,
  leaseMs: number,
): Promise<Alarm | null> {
  return updateOne(ex, { id: fire, key: fire }, ownerDid, { id }, [Math.round(leaseMs)]);
}

// One UPDATE: a failed alarm is active again with its failures forgotten, due now, with a fresh
// wake — while the owner has fewer than $3 live alarms (0: no limit).
const retry = sql(
  'alarms_retry',
  `UPDATE chronos.alarms SET status = 'active', failure_count = 0, last_error = '',
     next_fire_at = now(), scheduled_for = now(), ${LET_GO}
   WHERE ${BY_REF.id} AND status = 'failed'
     AND ($3::int = 0 OR (SELECT count(*) FROM chronos.alarms WHERE owner_did = $2 AND ${LIVE}) < $3::int)
   RETURNING ${COLUMNS}, pg_notify('chronos_due', queue) AS notified`,
);

/**
 * Makes a failed alarm active again, due now; null when it is not failed, or when the owner
 * already has `maxActiveAlarms` live alarms (0: no limit).
 */
export function alarmsRetry(
  ex: Executor,
  ownerDid: string,
  id: string,
  maxActiveAlarms: number,
): Promise<Alarm | null> {
  const statement = { id: retry, key: retry };
  if (maxActiveAlarms <= 0) return updateOne(ex, statement, ownerDid, { id }, [0]);
  return underOwnerLock(ex, ownerDid, (tx) => updateOne(tx, statement, ownerDid, { id }, [maxActiveAlarms]));
}

// One UPDATE for all of them: an owner's active and paused alarms matching every filter given
// (ids, label, conversation id; NULL = not filtered on) are cancelled. The owner's alarms are
// found on two indexes: those made through the service on alarms_owner_live_idx, its library
// timers (which that index leaves out, and which always have a key) on alarms_idempotency_idx;
// the OR names both predicates so the planner may read both and no other row.
const bulkCancel = sql(
  'alarms_bulk_cancel',
  `WITH cancelled AS (
     UPDATE chronos.alarms SET status = 'cancelled', ${LET_GO}
     WHERE owner_did = $1 AND status IN ('active', 'paused')
       AND (source <> 'library' OR idempotency_key <> '')
       AND ($2::uuid[] IS NULL OR id = ANY($2::uuid[]))
       AND ($3::text IS NULL OR label = $3)
       AND ($4::text IS NULL OR conversation_id = $4)
     RETURNING 1
   )
   SELECT count(*)::int AS n FROM cancelled`,
);

export interface BulkFilter {
  ids?: readonly string[];
  label?: string;
  conversationId?: string;
}

/** The statements that read one owner's alarms over two indexes (0016), for the test of their plans. */
export const OWNER_STATEMENTS = { list, bulkCancel } as const;

/** Cancels the owner's active and paused alarms matching every filter; returns how many. */
export async function alarmsBulkCancel(ex: Executor, ownerDid: string, filter: BulkFilter): Promise<number> {
  const [row] = await ex.query<{ n: number }>(bulkCancel, [
    ownerDid,
    filter.ids ?? null,
    filter.label ?? null,
    filter.conversationId ?? null,
  ]);
  return row?.n ?? 0;
}

/** Fields a reschedule may change; `undefined` leaves a field as it is. */
export interface AlarmChanges {
  schedule?: ScheduleColumns;
  label?: string;
  conversationId?: string;
  wakeMessage?: string;
  payload?: string;
  idempotencyKey?: string;
  maxFailures?: number;
  requireAck?: boolean;
  expiresAfterSeconds?: number;
}

// A new schedule replaces the occurrence in hand: the lease, the current wake and a pending manual
// fire are dropped, so a delivery of the old time still in flight cannot record over it (its
// fencing token is gone), and the alarm fires at its new time only. A paused alarm is edited and
// stays paused (resume computes its due time afresh).
const RESCHEDULE_SET = `
  kind = coalesce($3, kind),
  fire_at = CASE WHEN $3::text IS NULL THEN fire_at ELSE $4::timestamptz END,
  cron_expr = coalesce($5, cron_expr),
  timezone = coalesce($6, timezone),
  next_fire_at = coalesce($7, next_fire_at),
  scheduled_for = coalesce($7, scheduled_for),
  failure_count = CASE WHEN $3::text IS NULL THEN failure_count ELSE 0 END,
  claimed_at = CASE WHEN $3::text IS NULL THEN claimed_at END,
  lease_token = CASE WHEN $3::text IS NULL THEN lease_token END,
  wake_id = CASE WHEN $3::text IS NULL THEN wake_id END,
  trigger = CASE WHEN $3::text IS NULL THEN trigger ELSE 'schedule' END,
  held_occurrence = CASE WHEN $3::text IS NULL THEN held_occurrence END,
  label = coalesce($8, label),
  conversation_id = coalesce($9, conversation_id),
  wake_message = coalesce($10, wake_message),
  payload = coalesce($11::jsonb, payload),
  idempotency_key = coalesce($12, idempotency_key),
  max_failures = coalesce($13, max_failures),
  require_ack = coalesce($14, require_ack),
  rrule = CASE WHEN $3::text IS NULL THEN rrule ELSE coalesce($16::jsonb ->> 0, '') END,
  rrule_start = CASE WHEN $3::text IS NULL THEN rrule_start
                     ELSE timestamptz 'epoch' + ($16::jsonb ->> 1)::int8 * interval '1 millisecond' END,
  starts_at = CASE WHEN $3::text IS NULL THEN starts_at
                   ELSE timestamptz 'epoch' + ($16::jsonb ->> 2)::int8 * interval '1 millisecond' END,
  ends_at = CASE WHEN $3::text IS NULL THEN ends_at
                 ELSE timestamptz 'epoch' + ($16::jsonb ->> 3)::int8 * interval '1 millisecond' END,
  jitter_seconds = CASE WHEN $3::text IS NULL THEN jitter_seconds ELSE coalesce(($16::jsonb ->> 4)::int, 0) END,
  expires_after_seconds = coalesce($17, expires_after_seconds),
  updated_at = now()`;

const reschedule = byRef(
  'alarms_reschedule',
  (where) => `UPDATE chronos.alarms SET ${RESCHEDULE_SET}
   WHERE ${where} AND status IN ('active', 'paused')
   RETURNING ${COLUMNS}, ${notifyIfSoon('$15')}`,
);

/** One UPDATE of an active or paused alarm; null when there is none to change. */
export async function alarmsReschedule(
  ex: Executor,
  ownerDid: string,
  ref: AlarmRef,
  changes: AlarmChanges,
  notifyHorizonMs: number,
): Promise<Alarm | null> {
  const s = changes.schedule;
  try {
    return await updateOne(ex, reschedule, ownerDid, ref, [
      s?.kind ?? null,
      s?.fireAt ?? null,
      s?.cronExpr ?? null,
      s?.timezone ?? null,
      s?.nextFireAt ?? null,
      changes.label ?? null,
      changes.conversationId ?? null,
      changes.wakeMessage ?? null,
      changes.payload ?? null,
      changes.idempotencyKey ?? null,
      changes.maxFailures ?? null,
      changes.requireAck ?? null,
      notifyHorizonMs,
      s === undefined ? null : JSON.stringify(recurrenceExtra(s) ?? ['', null, null, null, 0, 0]),
      changes.expiresAfterSeconds ?? null,
    ]);
  } catch (error) {
    if (sqlState(error) === '23505') {
      throw new ChronosError('conflict', 'another of your alarms already uses this idempotency key', {
        cause: error,
      });
    }
    throw error;
  }
}

const countByStatus = sql(
  'alarms_count_by_status',
  `SELECT status, count(*)::int AS n FROM chronos.alarms GROUP BY status`,
);

export async function alarmsCountByStatus(ex: Executor): Promise<Record<AlarmStatus, number>> {
  const counts = Object.fromEntries(ALARM_STATUSES.map((s) => [s, 0])) as Record<AlarmStatus, number>;
  for (const row of await ex.query<{ status: AlarmStatus; n: number }>(countByStatus))
    counts[row.status] = row.n;
  return counts;
}

// Retention: deletes a batch of finished alarms (fired, cancelled, failed) whose last change is
// older than $1 ms, with their wakes and the wakes' attempts, oldest first — of every queue, or
// only of the queues in $3. A finished alarm is never claimed, so nothing in flight refers to it.
const pruneStatement = (name: string, scope: string) =>
  sql(
    name,
    `WITH gone AS (
       SELECT id FROM chronos.alarms
       WHERE status IN ('fired', 'cancelled', 'failed', 'expired') AND updated_at < now() - $1::float8 * interval '1 millisecond'
         ${scope}
       ORDER BY updated_at LIMIT $2
       FOR UPDATE SKIP LOCKED
     ), attempts AS (
       DELETE FROM chronos.wake_attempts t USING chronos.wakes w, gone
       WHERE t.wake_id = w.id AND w.alarm_id = gone.id
     ), wakes AS (
       DELETE FROM chronos.wakes w USING gone WHERE w.alarm_id = gone.id
     )
     DELETE FROM chronos.alarms a USING gone WHERE a.id = gone.id
     RETURNING a.id`,
  );
const prune = pruneStatement('alarms_prune_finished', '');
const pruneQueues = pruneStatement('alarms_prune_finished_of_queues', 'AND queue = ANY($3::text[])');

/**
 * Deletes one batch of finished alarms past retention (and their wakes); returns how many. With
 * `queues`, only those queues' alarms (a library worker prunes its own).
 */
export function alarmsPruneFinished(ex: Executor, options: PruneBatch): Promise<number> {
  return pruneBatch(ex, { every: prune, ofQueues: pruneQueues }, options);
}

// ---- The schedules file (contract §13) ---------------------------------------------------------

// Counts one more change of an alarm by the schedules file; the count numbers its heads-ups.
const countFileChange = sql(
  'alarms_count_file_change',
  `UPDATE chronos.alarms SET file_changes = file_changes + 1 WHERE id = $1 RETURNING file_changes`,
);

/** Counts a change of the alarm by the schedules file; returns how many there have been (1 first). */
export async function alarmsCountFileChange(ex: Executor, id: string): Promise<number> {
  const [row] = await ex.query<{ file_changes: number }>(countFileChange, [id]);
  if (!row) throw new Error(`alarm ${id} vanished while the schedules file changed it`);
  return row.file_changes;
}

// The active and paused alarms of the queue $2, of one owner ($1) or of every owner ($1 NULL),
// by owner, then oldest first: what a schedules file exported from them would hold.
const listLive = sql(
  'alarms_list_live',
  `SELECT ${COLUMNS} FROM chronos.alarms
   WHERE ($1::text IS NULL OR owner_did = $1) AND queue = $2 AND status IN ('active', 'paused')
   ORDER BY owner_did, created_at, id`,
);

/** The live (active and paused) alarms of a queue, of one owner or of all. */
export async function alarmsListLive(ex: Executor, ownerDid: string | null, queue: string): Promise<Alarm[]> {
  return (await ex.query<AlarmRow>(listLive, [ownerDid, queue])).map(toAlarm);
}

// How many active and paused alarms each queue other than $2 holds, of one owner ($1) or of
// every owner ($1 NULL): what an export of the queue $2 leaves out.
const countLiveElsewhere = sql(
  'alarms_count_live_elsewhere',
  `SELECT queue, count(*)::int AS n FROM chronos.alarms
   WHERE ($1::text IS NULL OR owner_did = $1) AND queue <> $2 AND status IN ('active', 'paused')
   GROUP BY queue ORDER BY queue`,
);

/** The live (active and paused) alarms of every queue but `queue`, counted by queue. */
export async function alarmsCountLiveElsewhere(
  ex: Executor,
  ownerDid: string | null,
  queue: string,
): Promise<{ queue: string; count: number }[]> {
  const rows = await ex.query<{ queue: string; n: number }>(countLiveElsewhere, [ownerDid, queue]);
  return rows.map((r) => ({ queue: r.queue, count: Number(r.n) }));
}
