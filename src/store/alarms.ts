/**
 * Every statement on `alarms`. Each says what it guarantees; none is built from user text.
 *
 * Due-ness is decided here, by the database's `now()` (I5). Writes that bring an alarm due
 * within `notify_horizon` announce it on the `chronos_due` channel so a sleeping dispatcher
 * wakes at once; writes due later do not notify (a NOTIFY takes a database-wide lock at commit,
 * and the dispatcher's fallback poll will see them anyway).
 */
import { RawJson } from '../json.js';
import type { Alarm, AlarmKind, AlarmSource, AlarmStatus } from '../types.js';
import { sql, type Executor } from './db.js';

export const DUE_CHANNEL = 'chronos_due';

const COLUMNS = `id::text AS id, owner_did, user_id, label, kind, fire_at, cron_expr, timezone, next_fire_at,
  scheduled_for, conversation_id, wake_message, payload::text AS payload, status, idempotency_key,
  max_failures, failure_count, last_error, claimed_at, require_ack, source, created_at, updated_at,
  last_fired_at`;

// Announces the write when the alarm is due within the horizon ($n milliseconds).
const notifyIfSoon = (horizonParam: string) =>
  `CASE WHEN status = 'active' AND next_fire_at <= now() + ${horizonParam}::int * interval '1 millisecond'
   THEN pg_notify('${DUE_CHANNEL}', '') END AS notified`;

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
  created_at: Date;
  updated_at: Date;
  last_fired_at: Date | null;
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
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    lastFiredAt: row.last_fired_at,
  };
}

/** The schedule columns, as resolved from `at` / `in_seconds` / `cron`. */
export interface ScheduleColumns {
  kind: AlarmKind;
  fireAt: Date | null;
  cronExpr: string;
  timezone: string;
  nextFireAt: Date;
}

export interface NewAlarm extends ScheduleColumns {
  ownerDid: string;
  userId: string;
  label: string;
  conversationId: string;
  wakeMessage: string;
  /** JSON text of an object; stored as JSONB. */
  payload: string;
  idempotencyKey: string;
  maxFailures: number;
  requireAck: boolean;
  source: AlarmSource;
}

/** Per-owner limits checked by the insert itself; 0 = unlimited. */
export interface InsertQuotas {
  maxActiveAlarms: number;
  createRatePerMinute: number;
}

// One statement checks the owner's quotas and inserts, so a create is one round trip. The rate
// count stops at the limit and comes, with the time until it frees a slot, from one read of the
// owner's last minute. The active count reads alarms_owner_status_idx and nothing else: its status
// is a parameter ($19 = 'active'), which no partial index can serve, so a generic plan made while
// the table was small cannot walk alarms_due_idx instead (migration 0006 says why that mattered),
// and it has no LIMIT for the same reason — the quota keeps an owner's active alarms near it.
// Nothing is inserted when a quota is full, or when the owner already has this idempotency key.
const insert = sql(
  'alarms_insert',
  `WITH recent AS (
     SELECT count(*)::int AS n, extract(epoch FROM (min(created_at) + interval '1 minute' - now()))::float8 AS reset_s
     FROM (SELECT created_at FROM alarms WHERE owner_did = $1 AND created_at > now() - interval '1 minute'
           ORDER BY created_at DESC LIMIT $17) r
   ), quota AS (
     SELECT recent.n AS recent, recent.reset_s AS rate_reset_s,
       CASE WHEN $18 = 0 THEN 0
            ELSE (SELECT count(*) FROM alarms WHERE owner_did = $1 AND status = $19)::int END AS active
     FROM recent
   ), ins AS (
     INSERT INTO alarms (owner_did, user_id, label, kind, fire_at, cron_expr, timezone, next_fire_at,
       scheduled_for, conversation_id, wake_message, payload, idempotency_key, max_failures, require_ack, source)
     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11::jsonb, $12, $13, $14, $15 FROM quota
     WHERE ($17 = 0 OR quota.recent < $17) AND ($18 = 0 OR quota.active < $18)
     ON CONFLICT (owner_did, idempotency_key) WHERE idempotency_key <> '' DO NOTHING
     RETURNING ${COLUMNS}, ${notifyIfSoon('$16')}
   )
   SELECT ins.*, quota.recent AS quota_recent, quota.rate_reset_s AS quota_rate_reset_s, quota.active AS quota_active
   FROM quota LEFT JOIN ins ON true`,
);

const byKey = sql(
  'alarms_by_key',
  `SELECT ${COLUMNS} FROM alarms WHERE owner_did = $1 AND idempotency_key = $2 AND idempotency_key <> ''`,
);

export type InsertResult =
  | { alarm: Alarm; deduped: boolean }
  | { quota: 'create_rate'; retryAfterSeconds: number }
  | { quota: 'max_active_alarms' };

/**
 * Creates an alarm within the owner's quotas. With an idempotency key the owner already used,
 * writes nothing and returns the existing alarm with `deduped: true` (the unique index decides,
 * so concurrent creates agree). Concurrent creates by one owner may each see the last free slot:
 * a quota can be overshot by the number of creates racing for it, never more.
 */
export async function alarmsInsert(
  ex: Executor,
  alarm: NewAlarm,
  notifyHorizonMs: number,
  quotas: InsertQuotas = { maxActiveAlarms: 0, createRatePerMinute: 0 },
): Promise<InsertResult> {
  const [row] = await ex.query<
    AlarmRow & { quota_recent: number; quota_rate_reset_s: number | null; quota_active: number }
  >(insert, [
    alarm.ownerDid,
    alarm.userId,
    alarm.label,
    alarm.kind,
    alarm.fireAt,
    alarm.cronExpr,
    alarm.timezone,
    alarm.nextFireAt,
    alarm.conversationId,
    alarm.wakeMessage,
    alarm.payload,
    alarm.idempotencyKey,
    alarm.maxFailures,
    alarm.requireAck,
    alarm.source,
    notifyHorizonMs,
    quotas.createRatePerMinute,
    quotas.maxActiveAlarms,
    'active',
  ]);
  if (row?.id) return { alarm: toAlarm(row), deduped: false };
  const { createRatePerMinute: rate, maxActiveAlarms: max } = quotas;
  if (row && rate > 0 && row.quota_recent >= rate) {
    return { quota: 'create_rate', retryAfterSeconds: Math.max(1, Math.ceil(row.quota_rate_reset_s ?? 1)) };
  }
  if (row && max > 0 && row.quota_active >= max) return { quota: 'max_active_alarms' };
  const [existing] = await ex.query<AlarmRow>(byKey, [alarm.ownerDid, alarm.idempotencyKey]);
  if (!existing) throw new Error('alarm with idempotency key vanished during insert');
  return { alarm: toAlarm(existing), deduped: true };
}

export async function alarmsGetByKey(ex: Executor, ownerDid: string, key: string): Promise<Alarm | null> {
  const [row] = await ex.query<AlarmRow>(byKey, [ownerDid, key]);
  return row ? toAlarm(row) : null;
}

const get = sql('alarms_get', `SELECT ${COLUMNS} FROM alarms WHERE id = $1 AND owner_did = $2`);

/** One alarm of one owner; another owner's alarm is as absent as a missing one. */
export async function alarmsGet(ex: Executor, ownerDid: string, id: string): Promise<Alarm | null> {
  const [row] = await ex.query<AlarmRow>(get, [id, ownerDid]);
  return row ? toAlarm(row) : null;
}

// Newest first, keyset on (created_at, id) read from the cursor's own row, so the database's
// microseconds decide the order and a page is stable while alarms are created.
const list = sql(
  'alarms_list',
  `SELECT ${COLUMNS} FROM alarms
   WHERE owner_did = $1 AND ($2::text IS NULL OR status = $2)
     AND ($3::uuid IS NULL OR (created_at, id) < (SELECT c.created_at, c.id FROM alarms c WHERE c.id = $3::uuid))
   ORDER BY created_at DESC, id DESC LIMIT $4`,
);

/** One page of an owner's alarms, newest first, after the alarm `afterId` when given. */
export async function alarmsList(
  ex: Executor,
  ownerDid: string,
  options: { status?: AlarmStatus; limit: number; afterId?: string },
): Promise<Alarm[]> {
  const rows = await ex.query<AlarmRow>(list, [
    ownerDid,
    options.status ?? null,
    options.afterId ?? null,
    options.limit,
  ]);
  return rows.map(toAlarm);
}

// One UPDATE: an active alarm becomes cancelled and loses its lease, so an in-flight delivery
// cannot record over it and it is never claimed again.
const cancelById = sql(
  'alarms_cancel_by_id',
  `UPDATE alarms SET status = 'cancelled', claimed_at = NULL, lease_token = NULL, wake_id = NULL, updated_at = now()
   WHERE id = $1 AND owner_did = $2 AND status = 'active' RETURNING ${COLUMNS}`,
);
const cancelByKey = sql(
  'alarms_cancel_by_key',
  `UPDATE alarms SET status = 'cancelled', claimed_at = NULL, lease_token = NULL, wake_id = NULL, updated_at = now()
   WHERE owner_did = $1 AND idempotency_key = $2 AND idempotency_key <> '' AND status = 'active'
   RETURNING ${COLUMNS}`,
);

export type AlarmRef = { id: string } | { key: string };

/** Cancels an active alarm; null when there is no active alarm to cancel (look it up to say why). */
export async function alarmsCancel(ex: Executor, ownerDid: string, ref: AlarmRef): Promise<Alarm | null> {
  const [row] =
    'id' in ref
      ? await ex.query<AlarmRow>(cancelById, [ref.id, ownerDid])
      : await ex.query<AlarmRow>(cancelByKey, [ownerDid, ref.key]);
  return row ? toAlarm(row) : null;
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
}

// A new schedule replaces the occurrence in hand: the lease and the current wake are dropped, so
// a delivery of the old time still in flight cannot record over it (its fencing token is gone),
// and the alarm fires at its new time only.
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
  label = coalesce($8, label),
  conversation_id = coalesce($9, conversation_id),
  wake_message = coalesce($10, wake_message),
  payload = coalesce($11::jsonb, payload),
  idempotency_key = coalesce($12, idempotency_key),
  max_failures = coalesce($13, max_failures),
  require_ack = coalesce($14, require_ack),
  updated_at = now()`;

const rescheduleById = sql(
  'alarms_reschedule_by_id',
  `UPDATE alarms SET ${RESCHEDULE_SET}
   WHERE id = $1 AND owner_did = $2 AND status = 'active'
   RETURNING ${COLUMNS}, ${notifyIfSoon('$15')}`,
);
const rescheduleByKey = sql(
  'alarms_reschedule_by_key',
  `UPDATE alarms SET ${RESCHEDULE_SET}
   WHERE owner_did = $2 AND idempotency_key = $1 AND idempotency_key <> '' AND status = 'active'
   RETURNING ${COLUMNS}, ${notifyIfSoon('$15')}`,
);

/** One UPDATE of an active alarm; null when there is no active alarm to change. */
export async function alarmsReschedule(
  ex: Executor,
  ownerDid: string,
  ref: AlarmRef,
  changes: AlarmChanges,
  notifyHorizonMs: number,
): Promise<Alarm | null> {
  const s = changes.schedule;
  const values = [
    'id' in ref ? ref.id : ref.key,
    ownerDid,
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
  ];
  const [row] = await ex.query<AlarmRow>('id' in ref ? rescheduleById : rescheduleByKey, values);
  return row ? toAlarm(row) : null;
}

const countByStatus = sql(
  'alarms_count_by_status',
  `SELECT status, count(*)::int AS n FROM alarms GROUP BY status`,
);

export async function alarmsCountByStatus(ex: Executor): Promise<Record<AlarmStatus, number>> {
  const counts: Record<AlarmStatus, number> = { active: 0, fired: 0, cancelled: 0, failed: 0 };
  for (const row of await ex.query<{ status: AlarmStatus; n: number }>(countByStatus))
    counts[row.status] = row.n;
  return counts;
}
