/**
 * The parts of a large batch of new alarms as one binary `COPY … FROM STDIN` (driver/copy-rows.ts
 * writes the rows), for the `fresh` form of alarm-inserts.ts's `alarmsInsertParts` on a
 * node-postgres connection: no arrays to build on this side nor to read on the server's.
 */
import { RawJson } from '../json.js';
import { pairKey, type Alarm, type AlarmSource } from '../types.js';
import { alarmsGetByKeys, recurrenceExtra, writtenAlarm, type NewAlarm } from './alarms.js';
import type { CopyIn } from './driver/copy-in.js';
import { CopyRows } from './driver/copy-rows.js';
import { arrayLiteral, sql, textElement, type Executor } from './driver/db.js';
import { newRowIds } from './driver/row-id.js';

/**
 * The columns a new alarm is copied with (the others take their defaults): first those that
 * differ from one timer to the next in most batches, then those a batch usually shares
 * (`sameShared`), which `copyPart` encodes once for a part whose timers all share them.
 */
export const COPY_ALARMS = `COPY chronos.alarms (id, fire_at, next_fire_at, scheduled_for, idempotency_key,
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

// After a copy of alarms with §3a columns (contract §3a), those columns, in the copy's transaction:
// no other session sees the rows before it commits.
const copiedExtrasUpdate = sql(
  'alarms_copied_extras',
  `UPDATE chronos.alarms a SET rrule = coalesce(e.x ->> 1, ''),
     rrule_start = timestamptz 'epoch' + (e.x ->> 2)::int8 * interval '1 millisecond',
     starts_at = timestamptz 'epoch' + (e.x ->> 3)::int8 * interval '1 millisecond',
     ends_at = timestamptz 'epoch' + (e.x ->> 4)::int8 * interval '1 millisecond',
     jitter_seconds = coalesce((e.x ->> 5)::int, 0), expires_after_seconds = coalesce((e.x ->> 6)::int, 0)
   FROM jsonb_array_elements($1::jsonb) AS e(x)
   WHERE a.id = (e.x ->> 0)::uuid`,
);

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
export async function copyParts(
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
  // The §3a columns of copied alarms that have them, written once the copy is done.
  const copiedExtras: { id: string; extra: NonNullable<ReturnType<typeof recurrenceExtra>> }[] = [];
  try {
    for (let k = 0; k < parts && !copy.refused; k++) {
      const alarms = part(k);
      if (alarms === null) {
        await copy.abort('a timer spec was refused');
        return { written: [] };
      }
      const { ids, bytes } = newRowIds(alarms.length, Date.now(), { literal: false, bytes: true });
      alarms.forEach((a, i) => {
        if (a.id === undefined) return;
        ids[i] = a.id;
        Buffer.from(a.id.replace(/-/g, ''), 'hex').copy(bytes!, i * 16);
      });
      copyPart(rows, alarms, bytes!, source, send);
      alarms.forEach((a, i) => {
        const extra = recurrenceExtra(a);
        if (extra !== null) copiedExtras.push({ id: ids[i]!, extra });
      });
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
        results.push({ alarm: writtenAlarm(a, ids[i]!, payload!, source, createdAt), deduped: false });
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
  if (copiedExtras.length > 0) {
    await ex.query(copiedExtrasUpdate, [JSON.stringify(copiedExtras.map(({ id, extra }) => [id, ...extra]))]);
  }
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
