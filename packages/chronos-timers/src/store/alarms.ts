/**
 * Every statement on `alarms`. Each says what it guarantees; none is built from user text.
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
  arrayLiteral,
  channel,
  pruneBatch,
  sqlState,
  sql,
  textElement,
  type Db,
  type Executor,
  type PruneBatch,
  type Statement,
} from './driver/db.js';
import type { CopyIn } from './driver/copy-in.js';
import { CopyRows } from './driver/copy-rows.js';
import { newRowIds } from './driver/row-id.js';

/** The channel that announces alarms due soon; its payload names their queue. */
export const dueChannel = (schema: string): string => channel(schema, 'due');

const COLUMN_NAMES = `owner_did user_id label kind fire_at cron_expr timezone next_fire_at scheduled_for
  conversation_id wake_message status idempotency_key max_failures failure_count last_error claimed_at require_ack
  source queue trigger held_occurrence traceparent created_at updated_at last_fired_at`.split(/\s+/);

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
  /** The text JSONB gives back for `payload`, when the caller knows it (json.ts, `jsonbText`). */
  storedPayload: string | undefined;
  idempotencyKey: string;
  maxFailures: number;
  requireAck: boolean;
  queue: string;
  /** The W3C traceparent of the span that created it, or ''. */
  traceparent: string;
}

/** Per-owner limits checked by the insert itself, for one owner; 0 = unlimited. */
export interface InsertQuotas {
  ownerDid: string;
  maxActiveAlarms: number;
  createRatePerMinute: number;
}

/**
 * The alarms an owner's `max_active_alarms` counts (a paused one is still theirs to resume; an
 * application's library timer is not the agent's, migration 0015): the predicate of
 * alarms_owner_live_idx, word for word, so the count is served by it.
 */
const LIVE = `status IN ('active', 'paused') AND source <> 'library'`;

// One statement checks one owner's quotas and inserts a whole batch, in order, all or nothing:
// a create of one alarm and a batch of 50,000 are the same round trip.
// - Columns travel as arrays, one element per alarm, times as epoch milliseconds (int8), so
//   neither side formats or parses a timestamp per row; the ids are made by the caller
//   (time-ordered, see row-id.ts), so each result is matched to its input without a lookup.
//   A column whose value is the same for every alarm (the owner, the queue, the kind… in most
//   batches) travels as that one value: `col($n)` picks it for every row (see batchColumn).
//   The fire time ($6) travels empty when every alarm fires once at its next fire time ($9).
//   Array literals are our own (db.ts), not the driver's: for 50,000 alarms that halved the
//   client's work and PostgreSQL's (bench/schedule-many.ts). The payloads are one JSON array
//   ($12, see jsonArray), parsed once straight into JSONB, not a text[] of escaped JSON texts.
// - The quota counts ($19 owner, NULL without quotas) run once: the creates of the owner's last
//   minute (stopping at the limit; not the library's, over alarms_owner_idx, 0016) and its live
//   alarms (active or paused, not the library's) over alarms_owner_live_idx, whose predicate the
//   count repeats word for word (0012, 0015).
//   Nothing is inserted when the batch ($22 alarms) would overrun either.
// - An idempotency key the owner already has inserts nothing for that alarm (the unique index
//   decides, so concurrent creates agree); the caller reads the existing alarm back.
// - It answers the ids written, each payload as stored (JSONB's text: what every later read
//   shows) and the time (now()) they were written, not the whole rows: the caller has every
//   other column already, and for 50,000 alarms formatting and parsing them all back cost more
//   than the insert. They come as one text in one row — `id US payload` records separated by
//   RS (chr 31 and 30, control characters JSONB's text never holds raw) — which the client
//   splits for a fraction of what 50,000 rows cost to parse.
// - One notification per queue with an alarm due within $18 ms, however many there are.
const insertManyText = (written: string, returning: string, onConflict: string) => `WITH quota AS (
     SELECT r.n AS recent, r.reset_s AS rate_reset_s,
       CASE WHEN $19::text IS NULL OR $21 = 0 THEN 0
            ELSE (SELECT count(*) FROM chronos.alarms WHERE owner_did = $19 AND ${LIVE})::int END AS active
     FROM (SELECT count(*)::int AS n,
             extract(epoch FROM (min(created_at) + interval '1 minute' - now()))::float8 AS reset_s
           FROM (SELECT created_at FROM chronos.alarms
                 WHERE $19::text IS NOT NULL AND $20 > 0 AND owner_did = $19 AND source <> 'library'
                   AND created_at > now() - interval '1 minute'
                 ORDER BY created_at DESC LIMIT $20) l) r
   ), ins AS (
     INSERT INTO chronos.alarms (id, owner_did, user_id, label, kind, fire_at, cron_expr, timezone, next_fire_at,
       scheduled_for, conversation_id, wake_message, payload, idempotency_key, max_failures, require_ack, source, queue,
       traceparent)
     SELECT u.id, CASE WHEN cardinality($2::text[]) = 1 THEN ($2::text[])[1] ELSE u.owner_did END, CASE WHEN cardinality($3::text[]) = 1 THEN ($3::text[])[1] ELSE u.user_id END,
       CASE WHEN cardinality($4::text[]) = 1 THEN ($4::text[])[1] ELSE u.label END, CASE WHEN cardinality($5::text[]) = 1 THEN ($5::text[])[1] ELSE u.kind END,
       timestamptz 'epoch' + (CASE cardinality($6::int8[]) WHEN 0 THEN (CASE WHEN cardinality($9::int8[]) = 1 THEN ($9::int8[])[1] ELSE u.next_ms END) WHEN 1 THEN ($6::int8[])[1] ELSE u.fire_ms END) * interval '1 millisecond',
       CASE WHEN cardinality($7::text[]) = 1 THEN ($7::text[])[1] ELSE u.cron_expr END, CASE WHEN cardinality($8::text[]) = 1 THEN ($8::text[])[1] ELSE u.timezone END,
       timestamptz 'epoch' + (CASE WHEN cardinality($9::int8[]) = 1 THEN ($9::int8[])[1] ELSE u.next_ms END) * interval '1 millisecond',
       timestamptz 'epoch' + (CASE WHEN cardinality($9::int8[]) = 1 THEN ($9::int8[])[1] ELSE u.next_ms END) * interval '1 millisecond',
       CASE WHEN cardinality($10::text[]) = 1 THEN ($10::text[])[1] ELSE u.conversation_id END, CASE WHEN cardinality($11::text[]) = 1 THEN ($11::text[])[1] ELSE u.wake_message END,
       CASE WHEN jsonb_array_length($12::jsonb) = 1 THEN $12::jsonb -> 0 ELSE u.payload END, CASE WHEN cardinality($13::text[]) = 1 THEN ($13::text[])[1] ELSE u.idempotency_key END,
       CASE WHEN cardinality($14::int[]) = 1 THEN ($14::int[])[1] ELSE u.max_failures END, CASE WHEN cardinality($15::bool[]) = 1 THEN ($15::bool[])[1] ELSE u.require_ack END, $17,
       CASE WHEN cardinality($16::text[]) = 1 THEN ($16::text[])[1] ELSE u.queue END, CASE WHEN cardinality($23::text[]) = 1 THEN ($23::text[])[1] ELSE u.traceparent END
     FROM ROWS FROM (unnest($1::uuid[]), unnest($2::text[]), unnest($3::text[]), unnest($4::text[]),
            unnest($5::text[]), unnest($6::int8[]), unnest($7::text[]), unnest($8::text[]), unnest($9::int8[]),
            unnest($10::text[]), unnest($11::text[]), jsonb_array_elements($12::jsonb), unnest($13::text[]),
            unnest($14::int[]), unnest($15::bool[]), unnest($16::text[]), unnest($23::text[]))
          WITH ORDINALITY AS u(id, owner_did, user_id, label, kind, fire_ms, cron_expr, timezone, next_ms,
            conversation_id, wake_message, payload, idempotency_key, max_failures, require_ack, queue, traceparent,
            ord),
          quota
     WHERE ($20 = 0 OR quota.recent + $22 <= $20) AND ($21 = 0 OR quota.active + $22 <= $21)
     ORDER BY u.ord
     ${onConflict}
     RETURNING ${returning}
   ), notified AS (
     SELECT pg_notify('chronos_due', q.queue)
     FROM (SELECT DISTINCT queue FROM ins
           WHERE next_fire_at <= now() + $18::int * interval '1 millisecond') q
   )
   SELECT ${written} AS written, (SELECT count(*) FROM ins)::int AS inserted,
     now() AS created_at, quota.recent AS quota_recent, quota.rate_reset_s AS quota_rate_reset_s,
     quota.active AS quota_active, (SELECT count(*) FROM notified)::int AS notified
   FROM quota`;
// Each insert in two forms: `skip` passes over an alarm whose key is taken (`ON CONFLICT … DO
// NOTHING`); `fresh` has no `ON CONFLICT`, and a taken key fails it (23505). The speculative
// insertion `ON CONFLICT` makes of every row (a look in the key's index, the row written, then
// confirmed) is about a quarter of what PostgreSQL spends writing a large batch, so the parts of
// one are tried `fresh` first (see alarmsInsertParts).
const SKIP_TAKEN_KEYS = `ON CONFLICT (owner_did, idempotency_key) WHERE idempotency_key <> '' DO NOTHING`;
const insertForms = (name: string, written: string, returning: string) => ({
  skip: sql(name, insertManyText(written, returning, SKIP_TAKEN_KEYS)),
  fresh: sql(`${name}_fresh`, insertManyText(written, returning, '')),
});
const insertMany = insertForms(
  'alarms_insert_many',
  '(SELECT string_agg(ins.id::text || chr(31) || ins.payload::text, chr(30)) FROM ins)',
  'id, next_fire_at, queue, payload',
);
// The same, for alarms whose stored payloads the caller knows: the ids written, only when some
// were not (a key taken already); no payload comes back. For 1,000 alarms with payloads of their
// own this took about an eighth off PostgreSQL's time (bench/README.md, "Bulk scheduling").
const insertManyKnown = insertForms(
  'alarms_insert_many_known',
  `CASE WHEN (SELECT count(*) FROM ins) = $22 THEN NULL
     ELSE (SELECT string_agg(ins.id::text, chr(30)) FROM ins) END`,
  'id, next_fire_at, queue',
);

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

export type InsertResult =
  | { results: { alarm: Alarm; deduped: boolean }[] }
  | { quota: 'create_rate'; retryAfterSeconds: number }
  | { quota: 'max_active_alarms' };

/**
 * One column of a batch: `[v]` when every alarm has the same value, else one value per alarm.
 * Both ways of sending a column below collapse a shared value to one, which the insert's
 * `CASE WHEN cardinality(…) = 1` (or `jsonb_array_length`) gives every row.
 */
function columnValues<T>(alarms: readonly NewAlarm[], value: (a: NewAlarm) => T): T[] {
  const first = value(alarms[0]!);
  // Most columns are shared: no array of n is made to find that out.
  let differs = 1;
  while (differs < alarms.length && value(alarms[differs]!) === first) differs++;
  if (differs === alarms.length) return [first];
  const values = new Array<T>(alarms.length);
  for (let i = 0; i < alarms.length; i++) values[i] = i < differs ? first : value(alarms[i]!);
  return values;
}

/** One column of a batch as a PostgreSQL array literal (see columnValues). */
function batchColumn<T>(
  alarms: readonly NewAlarm[],
  value: (a: NewAlarm) => T,
  element: (v: NonNullable<T>) => string,
): string {
  return arrayLiteral(columnValues(alarms, value), element);
}

/**
 * The payloads of a batch as one JSON array, `[p1,p2,…]` (see columnValues): the texts are joined
 * as they are, where a text[] literal escaped every `"` of every payload, and the database
 * parses each once, straight into JSONB.
 */
function jsonArray(alarms: readonly NewAlarm[], value: (a: NewAlarm) => string): string {
  return `[${columnValues(alarms, value).join(',')}]`;
}

const NO_QUOTAS: InsertQuotas = { ownerDid: '', maxActiveAlarms: 0, createRatePerMinute: 0 };

/**
 * Creates alarms, in order, in one statement (see `insertMany`), within one owner's quotas when
 * given. An alarm whose owner already used its idempotency key is not written: its result is the
 * existing alarm with `deduped: true` (a key given twice in one batch: the first one's alarm).
 * Under quotas the insert runs holding the owner's quota lock (see ownerQuotaLock), so
 * concurrent creates of one owner, on any number of instances, never overshoot them.
 *
 * Without quotas, a batch larger than `chunk` goes as several statements of `chunk` alarms, one
 * at a time, each built while PostgreSQL runs the one before it and each answer read while it
 * runs the next: the client's work and the database's overlap instead of adding up (for 50,000
 * timers 1.4–1.8 times the rate under load; bench/schedule-many.ts). `ex` must then be one transaction's
 * connection, so that the batch stays all or nothing: a statement that fails aborts it.
 */
export async function alarmsInsert(
  ex: Executor,
  alarms: readonly NewAlarm[],
  source: AlarmSource,
  notifyHorizonMs: number,
  quotas: InsertQuotas = NO_QUOTAS,
): Promise<InsertResult> {
  if (alarms.length === 0) return { results: [] };
  const quotaOwner = quotas.maxActiveAlarms > 0 || quotas.createRatePerMinute > 0 ? quotas.ownerDid : null;
  if (quotaOwner === null) return insertChecked(ex, alarms, source, notifyHorizonMs, quotas, null);
  return underOwnerLock(ex, quotaOwner, (tx) =>
    insertChecked(tx, alarms, source, notifyHorizonMs, quotas, quotaOwner),
  );
}

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
async function underOwnerLock<T>(
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

async function insertChecked(
  ex: Executor,
  alarms: readonly NewAlarm[],
  source: AlarmSource,
  notifyHorizonMs: number,
  quotas: InsertQuotas,
  quotaOwner: string | null,
): Promise<InsertResult> {
  const n = alarms.length;
  const batch = buildInsert(alarms, source, notifyHorizonMs, quotas, quotaOwner);
  const [first] = await ex.query<InsertAnswer>(batch.statement, batch.params);
  if (first!.inserted === 0) {
    const { createRatePerMinute: rate, maxActiveAlarms: max } = quotas;
    if (rate > 0 && first!.quota_recent + n > rate) {
      const retryAfterSeconds = Math.max(1, Math.ceil(first!.quota_rate_reset_s ?? 1));
      return { quota: 'create_rate', retryAfterSeconds };
    }
    if (max > 0 && first!.quota_active + n > max) return { quota: 'max_active_alarms' };
  }
  return { results: await readInsert(ex, alarms, batch, first!, source) };
}

/**
 * Inserts a batch too large for one statement, without quotas, as one statement per part on `ex`
 * (the caller's transaction): `part(k)` makes and checks the k-th part while the statement
 * before it runs, so making the batch costs the caller no time of its own past the first part.
 * `part` answering null stops the batch: nothing of it is kept, and the answer is null. A
 * statement refused part-way throws, and the caller's transaction (aborted) keeps none of it.
 *
 * The batch runs in a savepoint, its parts first in the `fresh` form, which writes about a
 * quarter faster for PostgreSQL (bench/README.md, "Bulk scheduling") but fails on a key taken
 * already or given twice. Then the batch goes back to the savepoint and is written again with
 * `ON CONFLICT`, its parts made again by `part` (unless one of them was refused meanwhile: the
 * batch is then refused as it is). A batch that repeats keys costs up to twice the work, a batch
 * of new keys a quarter less. On a connection outside a transaction block, where there is no
 * savepoint to go back to, the parts go with `ON CONFLICT` only, and a stopped batch deletes what
 * its earlier parts wrote.
 */
export async function alarmsInsertParts(
  ex: Executor,
  part: (k: number) => readonly NewAlarm[] | null,
  parts: number,
  source: AlarmSource,
  notifyHorizonMs: number,
): Promise<{ alarm: Alarm; deduped: boolean }[] | null> {
  const write = (form: InsertForm) => insertParts(ex, part, parts, source, notifyHorizonMs, form);
  if (!(await savepoint(ex))) {
    const outcome = await write('skip');
    if (!Array.isArray(outcome)) await ex.query(deleteByIds, [arrayLiteral(outcome.written, String)]);
    return Array.isArray(outcome) ? outcome : null;
  }
  let outcome: Awaited<ReturnType<typeof write>>;
  try {
    outcome = await write('fresh');
  } catch (error) {
    if (sqlState(error) !== '23505') throw error;
    await ex.query(rollbackToSavepoint);
    outcome = await write('skip');
  }
  if (!Array.isArray(outcome)) await ex.query(rollbackToSavepoint);
  await ex.query(releaseSavepoint);
  return Array.isArray(outcome) ? outcome : null;
}

const SAVEPOINT = 'chronos_schedule_many';
const setSavepoint = sql('alarms_savepoint', `SAVEPOINT ${SAVEPOINT}`);
const rollbackToSavepoint = sql('alarms_rollback_to_savepoint', `ROLLBACK TO SAVEPOINT ${SAVEPOINT}`);
const releaseSavepoint = sql('alarms_release_savepoint', `RELEASE SAVEPOINT ${SAVEPOINT}`);

/** Sets the batch's savepoint; false when `ex` is outside a transaction block (25P01). */
async function savepoint(ex: Executor): Promise<boolean> {
  try {
    await ex.query(setSavepoint);
    return true;
  } catch (error) {
    if (sqlState(error) === '25P01') return false;
    throw error;
  }
}

/**
 * The parts of a batch, each queued on the connection as soon as it is made, behind the one
 * running: the database goes from one to the next with no wait on this thread. The results, or,
 * when a part came back null, the ids the parts before it wrote. On a node-postgres connection
 * the `fresh` form copies the parts instead (`copyParts`).
 */
async function insertParts(
  ex: Executor,
  part: (k: number) => readonly NewAlarm[] | null,
  parts: number,
  source: AlarmSource,
  notifyHorizonMs: number,
  form: InsertForm,
): Promise<{ alarm: Alarm; deduped: boolean }[] | { written: string[] }> {
  if (form === 'fresh' && ex.copyIn)
    return copyParts(ex, ex.copyIn(COPY_ALARMS), part, parts, source, notifyHorizonMs);
  const results: { alarm: Alarm; deduped: boolean }[] = [];
  const written: string[] = [];
  const send = (alarms: readonly NewAlarm[]) => {
    const batch = buildInsert(alarms, source, notifyHorizonMs, NO_QUOTAS, null, form);
    const answer = ex.query<InsertAnswer>(batch.statement, batch.params);
    // Awaited below; a part queued behind one that failed fails too, and is not left unheard.
    answer.catch(() => undefined);
    return { alarms, batch, answer };
  };
  const first = part(0);
  if (first === null) return { written };
  let running = send(first);
  let stopped = false;
  for (let k = 1; k <= parts; k++) {
    let queued: ReturnType<typeof send> | null = null;
    if (k < parts) {
      const next = part(k);
      if (next === null) stopped = true;
      else queued = send(next);
    }
    let answer: InsertAnswer;
    try {
      [answer] = (await running.answer) as [InsertAnswer];
    } catch (error) {
      // A spec of a later part was refused: the batch is refused whatever this part met, and a
      // key taken here must not send it round again (its refusals would be counted twice).
      if (stopped && form === 'fresh' && sqlState(error) === '23505') return { written };
      throw error;
    }
    for (const r of await readInsert(ex, running.alarms, running.batch, answer, source)) {
      results.push(r);
      // Kept for a batch without a savepoint, which deletes what it wrote when it stops (the
      // redo after a taken key, in the same form, keeps them too, unused).
      if (form === 'skip' && !r.deduped) written.push(r.alarm.id);
    }
    if (stopped) return { written };
    if (queued) running = queued;
  }
  return results;
}

/**
 * The columns a new alarm is copied with (the others take their defaults): first those that
 * differ from one timer to the next in most batches, then those a batch usually shares
 * (`sameShared`), which `copyPart` encodes once for a part whose timers all share them.
 */
const COPY_ALARMS = `COPY chronos.alarms (id, fire_at, next_fire_at, scheduled_for, idempotency_key,
  owner_did, user_id, label, kind, cron_expr, timezone, conversation_id, wake_message, payload, max_failures,
  require_ack, source, queue, traceparent) FROM STDIN (FORMAT binary)`;

/** True when `a` and `b` hold the same columns of COPY_ALARMS from owner_did on. */
function sameShared(a: NewAlarm, b: NewAlarm): boolean {
  // Each column named: a loop over their names was the costliest line of a cold batch.
  return (
    a.ownerDid === b.ownerDid &&
    a.userId === b.userId &&
    a.label === b.label &&
    a.kind === b.kind &&
    a.cronExpr === b.cronExpr &&
    a.timezone === b.timezone &&
    a.conversationId === b.conversationId &&
    a.wakeMessage === b.wakeMessage &&
    a.payload === b.payload &&
    a.maxFailures === b.maxFailures &&
    a.requireAck === b.requireAck &&
    a.queue === b.queue &&
    a.traceparent === b.traceparent
  );
}

function copyShared(rows: CopyRows, a: NewAlarm, source: AlarmSource): void {
  rows
    .text(a.ownerDid)
    .text(a.userId)
    .text(a.label)
    .text(a.kind)
    .text(a.cronExpr)
    .text(a.timezone)
    .text(a.conversationId)
    .text(a.wakeMessage)
    .jsonb(a.payload)
    .int4(a.maxFailures)
    .bool(a.requireAck)
    .text(source)
    .text(a.queue)
    .text(a.traceparent);
}

/**
 * One part's rows: the shared columns encoded once when every alarm of the part has the same.
 * Every `SEND_BYTES` the rows made so far go to `send`, so the server writes them while the rest
 * of the part is made.
 */
function copyPart(
  rows: CopyRows,
  alarms: readonly NewAlarm[],
  ids: Uint8Array,
  source: AlarmSource,
  send: () => void,
): void {
  const first = alarms[0]!;
  let same = true;
  for (let i = 1; i < alarms.length && same; i++) same = sameShared(alarms[i]!, first);
  const shared = same ? new CopyRows(1024) : null;
  if (shared) copyShared(shared, first, source);
  const tail = shared?.takeFields();
  for (let i = 0; i < alarms.length; i++) {
    const a = alarms[i]!;
    const next = a.nextFireAt.getTime();
    rows
      .row(19)
      .uuid(ids, i * 16)
      .timestamptz(a.fireAt === null ? null : a.fireAt.getTime())
      .timestamptz(next)
      .timestamptz(next)
      .text(a.idempotencyKey);
    if (tail) rows.raw(tail);
    else copyShared(rows, a, source);
    if (rows.size >= SEND_BYTES) send();
  }
}

/**
 * How much of a part is made before it is sent: the server starts on a part's first rows while
 * the rest are made, rather than once the whole part is.
 */
const SEND_BYTES = 64 * 1024;

// After a copy: the time the rows were written (the transaction's), and one notification per
// queue whose earliest new alarm falls due within $3 ms.
const afterCopy = sql(
  'alarms_after_copy',
  `SELECT now() AS created_at,
     (SELECT count(pg_notify('chronos_due', q.queue)) FROM unnest($1::text[], $2::int8[]) AS q(queue, next_ms)
      WHERE timestamptz 'epoch' + q.next_ms * interval '1 millisecond' <= now() + $3::int * interval '1 millisecond')::int AS notified`,
);

/**
 * The parts of a batch as one `COPY`, sent `SEND_BYTES` at a time as they are made while the
 * server writes what came before: no round trip between parts, and no arrays to build or to read.
 * A part's specs are all read before any of its rows is sent, so a refused spec sends nothing of
 * its part. Used in
 * the `fresh` form only (a key taken fails the copy with 23505, and the caller writes the batch
 * again with `ON CONFLICT`). The results, or, when a part came back null, no ids (the caller
 * goes back to its savepoint).
 */
async function copyParts(
  ex: Executor,
  copy: CopyIn,
  part: (k: number) => readonly NewAlarm[] | null,
  parts: number,
  source: AlarmSource,
  notifyHorizonMs: number,
): Promise<{ alarm: Alarm; deduped: boolean }[] | { written: string[] }> {
  const rows = new CopyRows(SEND_BYTES + 8 * 1024).header();
  const send = () => {
    if (rows.size > 0) copy.write(rows.take());
  };
  // The transaction's time, read once the copy is done: every alarm of the batch holds this one
  // Date, so the answers are made while the server writes (and one payload text, one RawJson).
  const createdAt = new Date(Number.NaN);
  // An alarm whose stored payload only the database knows: read back after the copy (null here).
  const results: ({ alarm: Alarm; deduped: boolean } | null)[] = [];
  const unknown: { at: number; a: NewAlarm }[] = [];
  let text: string | undefined;
  let payload: RawJson | undefined;
  // Each queue's earliest new fire time, for the notification.
  const earliest = new Map<string, number>();
  try {
    for (let k = 0; k < parts && !copy.refused; k++) {
      const alarms = part(k);
      if (alarms === null) {
        await copy.abort('a timer spec was refused');
        return { written: [] };
      }
      const { ids, bytes } = newRowIds(alarms.length, Date.now(), { literal: false, bytes: true });
      copyPart(rows, alarms, bytes!, source, send);
      if (k === parts - 1) rows.trailer();
      send();
      for (let i = 0; i < alarms.length; i++) {
        const a = alarms[i]!;
        const next = a.nextFireAt.getTime();
        const seen = earliest.get(a.queue);
        if (seen === undefined || next < seen) earliest.set(a.queue, next);
        const stored = a.storedPayload;
        if (stored === undefined) {
          unknown.push({ at: results.length, a });
          results.push(null);
          continue;
        }
        if (stored !== text) payload = new RawJson((text = stored));
        results.push({ alarm: written(a, ids[i]!, payload!, source, createdAt), deduped: false });
      }
      // The socket written, and a refusal from the server read, before the next part is made.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  } catch (error) {
    // The connection must not stay in the copy: end it, keeping nothing, then say why.
    await copy.abort('the batch could not be made');
    throw error;
  }
  await copy.end();
  const [after] = await ex.query<{ created_at: Date }>(afterCopy, [
    arrayLiteral([...earliest.keys()], textElement),
    arrayLiteral([...earliest.values()], String),
    notifyHorizonMs,
  ]);
  createdAt.setTime(after!.created_at.getTime());
  if (unknown.length > 0) {
    // As stored, by their keys, as a taken key's alarm is read: parts are a library batch's only
    // (a caller's transaction), and the library gives every timer a key.
    const found = await alarmsGetByKeys(
      ex,
      unknown.map(({ a }) => ({ ownerDid: a.ownerDid, key: a.idempotencyKey })),
    );
    for (const { at, a } of unknown) {
      const alarm = found.get(pairKey(a.ownerDid, a.idempotencyKey));
      if (!alarm) throw new Error('alarm with idempotency key vanished during insert');
      results[at] = { alarm, deduped: false };
    }
  }
  // Every null filled above.
  return results as { alarm: Alarm; deduped: boolean }[];
}

// A batch stopped part-way takes back what its earlier parts wrote (new alarms: no wakes yet).
const deleteByIds = sql('alarms_delete_by_ids', 'DELETE FROM chronos.alarms WHERE id = ANY($1::uuid[])');

interface InsertAnswer {
  written: string | null;
  inserted: number;
  created_at: Date;
  quota_recent: number;
  quota_rate_reset_s: number | null;
  quota_active: number;
}

type InsertForm = keyof typeof insertMany;

interface Insert {
  /** `insertManyKnown` when every stored payload is known, else `insertMany`, in one form. */
  statement: Statement;
  known: boolean;
  params: unknown[];
  /** The ids the alarms will have. */
  ids: string[];
}

const firesOnceAtNext = (a: NewAlarm) => a.fireAt !== null && a.fireAt.getTime() === a.nextFireAt.getTime();

/** The statement and parameters that insert these alarms, and the ids it will give them. */
function buildInsert(
  alarms: readonly NewAlarm[],
  source: AlarmSource,
  notifyHorizonMs: number,
  quotas: InsertQuotas,
  quotaOwner: string | null,
  form: InsertForm = 'skip',
): Insert {
  const n = alarms.length;
  const { ids, literal } = newRowIds(n);
  const text = (f: (a: NewAlarm) => string) => batchColumn(alarms, f, textElement);
  const params = [
    literal,
    text((a) => a.ownerDid),
    text((a) => a.userId),
    text((a) => a.label),
    text((a) => a.kind),
    // `{}` when every alarm fires once, at its next fire time (most batches): the insert then
    // takes that column for this one, and neither side writes or reads it twice.
    alarms.every(firesOnceAtNext)
      ? '{}'
      : batchColumn(alarms, (a) => (a.fireAt === null ? null : a.fireAt.getTime()), String),
    text((a) => a.cronExpr),
    text((a) => a.timezone),
    batchColumn(alarms, (a) => a.nextFireAt.getTime(), String),
    text((a) => a.conversationId),
    text((a) => a.wakeMessage),
    jsonArray(alarms, (a) => a.payload),
    text((a) => a.idempotencyKey),
    batchColumn(alarms, (a) => a.maxFailures, String),
    batchColumn(
      alarms,
      (a) => a.requireAck,
      (b) => (b ? 't' : 'f'),
    ),
    text((a) => a.queue),
    source,
    notifyHorizonMs,
    quotaOwner,
    quotas.createRatePerMinute,
    quotas.maxActiveAlarms,
    n,
    text((a) => a.traceparent),
  ];
  const known = alarms.every((a) => a.storedPayload !== undefined);
  return { statement: (known ? insertManyKnown : insertMany)[form], known, params, ids };
}

/**
 * The results of one `insertMany` that wrote: each alarm as written, or, where its key was taken
 * already, the alarm that holds it (`deduped`).
 */
async function readInsert(
  ex: Executor,
  alarms: readonly NewAlarm[],
  batch: Insert,
  answer: InsertAnswer,
  source: AlarmSource,
): Promise<{ alarm: Alarm; deduped: boolean }[]> {
  const n = alarms.length;
  const { known } = batch;
  // The ids written, each with the payload text that came back ('' when only ids came back);
  // null when every alarm was written and its stored payload is known.
  let inserted: Map<string, string> | null = null;
  if (!known || answer.inserted < n) {
    inserted = new Map();
    if (answer.written !== null) {
      for (const record of answer.written.split('\u001e')) {
        const cut = known ? record.length : record.indexOf('\u001f');
        inserted.set(record.slice(0, cut), record.slice(cut + 1));
      }
    }
  }
  const createdAt = answer.created_at;
  const results = new Array<{ alarm: Alarm; deduped: boolean }>(n);
  const missing: number[] = [];
  for (let i = 0; i < n; i++) {
    const id = batch.ids[i]!;
    const a = alarms[i]!;
    let payload: string | undefined;
    if (inserted === null) payload = a.storedPayload;
    else if (inserted.has(id)) payload = known ? a.storedPayload : inserted.get(id);
    if (payload !== undefined)
      results[i] = { alarm: written(a, id, new RawJson(payload), source, createdAt), deduped: false };
    else missing.push(i);
  }
  if (missing.length > 0) {
    const existing = await alarmsGetByKeys(
      ex,
      missing.map((i) => ({ ownerDid: alarms[i]!.ownerDid, key: alarms[i]!.idempotencyKey })),
    );
    for (const i of missing) {
      const alarm = existing.get(pairKey(alarms[i]!.ownerDid, alarms[i]!.idempotencyKey));
      if (!alarm) throw new Error('alarm with idempotency key vanished during insert');
      results[i] = { alarm, deduped: true };
    }
  }
  return results;
}

/** An alarm as the insert wrote it: the columns' defaults filled in, the payload as stored. */
function written(a: NewAlarm, id: string, payload: RawJson, source: AlarmSource, createdAt: Date): Alarm {
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
     held_occurrence = CASE WHEN trigger = 'manual' AND kind = 'cron' THEN $3::timestamptz END,
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

// One UPDATE: one extra delivery of an active or paused alarm, due now (trigger 'manual', a fresh
// wake). A cron alarm's schedule is not moved: an active one returns to held_occurrence after it.
// Refused (nothing returned) while a delivery is under a live lease: it is being delivered now.
const fire = sql(
  'alarms_fire',
  `UPDATE chronos.alarms SET trigger = 'manual', next_fire_at = now(), scheduled_for = now(),
     held_occurrence = CASE WHEN kind = 'cron' AND status = 'active' AND trigger = 'schedule'
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
       WHERE status IN ('fired', 'cancelled', 'failed') AND updated_at < now() - $1::float8 * interval '1 millisecond'
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
