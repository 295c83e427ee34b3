/**
 * The inserts of new alarms: one statement that checks an owner's quotas and writes a whole batch
 * (`alarmsInsert`), and a batch too large for one statement written part by part in the caller's
 * transaction (`alarmsInsertParts`), whose parts go as one binary `COPY` on node-postgres
 * (alarm-copy.ts). Every other statement on `alarms` is in alarms.ts.
 */
import { RawJson } from '../json.js';
import { pairKey, type Alarm, type AlarmSource } from '../types.js';
import {
  alarmsGetByKeys,
  LIVE,
  recurrenceExtra,
  underOwnerLock,
  writtenAlarm,
  type NewAlarm,
} from './alarms.js';
import { copyParts, COPY_ALARMS } from './alarm-copy.js';
import { arrayLiteral, sql, sqlState, textElement, type Executor, type Statement } from './driver/db.js';
import { newRowIds } from './driver/row-id.js';

/** Per-owner limits checked by the insert itself, for one owner; 0 = unlimited. */
export interface InsertQuotas {
  ownerDid: string;
  maxActiveAlarms: number;
  createRatePerMinute: number;
}

// One statement checks one owner's quotas and inserts a whole batch, in order, all or nothing:
// a create of one alarm and a batch of 50,000 are the same round trip.
// - Columns travel as arrays, one element per alarm, times as epoch milliseconds (int8), so
//   neither side formats or parses a timestamp per row; the ids are made by the caller
//   (time-ordered, see driver/row-id.ts), so each result is matched to its input without a lookup.
//   A column whose value is the same for every alarm (the owner, the queue, the kind… in most
//   batches) travels as that one value: `col($n)` picks it for every row (see batchColumn).
//   The fire time ($6) travels empty when every alarm fires once at its next fire time ($9).
//   Array literals are our own (driver/db.ts), not the driver's: less work for the client and
//   for PostgreSQL in a large batch (bench/schedule-many.ts; figures in bench/README.md,
//   "Figures from the store's comments"). The payloads are one JSON array
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
//   other column already, and in a large batch formatting and parsing them all back cost more
//   than the insert. They come as one text in one row — `id US payload` records separated by
//   RS (chr 31 and 30, control characters JSONB's text never holds raw) — which the client
//   splits for much less than as many rows cost to parse.
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
       traceparent, rrule, rrule_start, starts_at, ends_at, jitter_seconds, expires_after_seconds)
     SELECT u.id, CASE WHEN cardinality($2::text[]) = 1 THEN ($2::text[])[1] ELSE u.owner_did END, CASE WHEN cardinality($3::text[]) = 1 THEN ($3::text[])[1] ELSE u.user_id END,
       CASE WHEN cardinality($4::text[]) = 1 THEN ($4::text[])[1] ELSE u.label END, CASE WHEN cardinality($5::text[]) = 1 THEN ($5::text[])[1] ELSE u.kind END,
       timestamptz 'epoch' + (CASE cardinality($6::int8[]) WHEN 0 THEN (CASE WHEN cardinality($9::int8[]) = 1 THEN ($9::int8[])[1] ELSE u.next_ms END) WHEN 1 THEN ($6::int8[])[1] ELSE u.fire_ms END) * interval '1 millisecond',
       CASE WHEN cardinality($7::text[]) = 1 THEN ($7::text[])[1] ELSE u.cron_expr END, CASE WHEN cardinality($8::text[]) = 1 THEN ($8::text[])[1] ELSE u.timezone END,
       timestamptz 'epoch' + (CASE WHEN cardinality($9::int8[]) = 1 THEN ($9::int8[])[1] ELSE u.next_ms END) * interval '1 millisecond',
       timestamptz 'epoch' + (CASE WHEN cardinality($9::int8[]) = 1 THEN ($9::int8[])[1] ELSE u.next_ms END) * interval '1 millisecond',
       CASE WHEN cardinality($10::text[]) = 1 THEN ($10::text[])[1] ELSE u.conversation_id END, CASE WHEN cardinality($11::text[]) = 1 THEN ($11::text[])[1] ELSE u.wake_message END,
       CASE WHEN jsonb_array_length($12::jsonb) = 1 THEN $12::jsonb -> 0 ELSE u.payload END, CASE WHEN cardinality($13::text[]) = 1 THEN ($13::text[])[1] ELSE u.idempotency_key END,
       CASE WHEN cardinality($14::int[]) = 1 THEN ($14::int[])[1] ELSE u.max_failures END, CASE WHEN cardinality($15::bool[]) = 1 THEN ($15::bool[])[1] ELSE u.require_ack END, $17,
       CASE WHEN cardinality($16::text[]) = 1 THEN ($16::text[])[1] ELSE u.queue END, CASE WHEN cardinality($23::text[]) = 1 THEN ($23::text[])[1] ELSE u.traceparent END,
       coalesce(u.extra ->> 0, ''), timestamptz 'epoch' + (u.extra ->> 1)::int8 * interval '1 millisecond',
       timestamptz 'epoch' + (u.extra ->> 2)::int8 * interval '1 millisecond',
       timestamptz 'epoch' + (u.extra ->> 3)::int8 * interval '1 millisecond',
       coalesce((u.extra ->> 4)::int, 0), coalesce((u.extra ->> 5)::int, 0)
     FROM ROWS FROM (unnest($1::uuid[]), unnest($2::text[]), unnest($3::text[]), unnest($4::text[]),
            unnest($5::text[]), unnest($6::int8[]), unnest($7::text[]), unnest($8::text[]), unnest($9::int8[]),
            unnest($10::text[]), unnest($11::text[]), jsonb_array_elements($12::jsonb), unnest($13::text[]),
            unnest($14::int[]), unnest($15::bool[]), unnest($16::text[]), unnest($23::text[]),
            jsonb_array_elements($24::jsonb))
          WITH ORDINALITY AS u(id, owner_did, user_id, label, kind, fire_ms, cron_expr, timezone, next_ms,
            conversation_id, wake_message, payload, idempotency_key, max_failures, require_ack, queue, traceparent,
            extra, ord),
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
// confirmed) is a large share of what PostgreSQL spends writing a large batch, so the parts of
// one are tried `fresh` first (see alarmsInsertParts; bench/README.md, "Bulk scheduling").
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
// were not (a key taken already); no payload comes back, which spares PostgreSQL the formatting
// of every payload (bench/README.md, "Bulk scheduling").
const insertManyKnown = insertForms(
  'alarms_insert_many_known',
  `CASE WHEN (SELECT count(*) FROM ins) = $22 THEN NULL
     ELSE (SELECT string_agg(ins.id::text, chr(30)) FROM ins) END`,
  'id, next_fire_at, queue',
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
 * runs the next: the client's work and the database's overlap instead of adding up
 * (bench/schedule-many.ts; figures in bench/README.md, "Figures from the store's comments"). `ex`
 * must then be one transaction's connection, so that the batch stays all or nothing: a statement that fails aborts it.
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
 * The batch runs in a savepoint, its parts first in the `fresh` form, which PostgreSQL writes
 * faster (bench/README.md, "Bulk scheduling") but which fails on a key taken
 * already or given twice. Then the batch goes back to the savepoint and is written again with
 * `ON CONFLICT`, its parts made again by `part` (unless one of them was refused meanwhile: the
 * batch is then refused as it is). A batch that repeats keys costs up to twice the work (it is
 * written twice), a batch of new keys less. On a connection outside a transaction block, where there is no
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
  const made = newRowIds(n);
  const { ids } = made;
  let literal = made.literal;
  // An alarm whose due instant depends on its id (jitter) came with its id.
  if (alarms.some((a) => a.id !== undefined)) {
    alarms.forEach((a, i) => {
      if (a.id !== undefined) ids[i] = a.id;
    });
    literal = `{${ids.join(',')}}`;
  }
  const extras = alarms.some((a) => recurrenceExtra(a) !== null)
    ? JSON.stringify(alarms.map((a) => recurrenceExtra(a)))
    : '[]';
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
    extras,
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
      results[i] = { alarm: writtenAlarm(a, id, new RawJson(payload), source, createdAt), deduped: false };
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
