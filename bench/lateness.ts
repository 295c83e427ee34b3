/**
 * Lateness: 1,000 alarms due at random instants over 10 s; delivered − due, p50/p99/max.
 * Target (PostgreSQL): p99 ≤ 25 ms, none early.
 *
 * Two variants, each with one worker (the library's `work()`, in-process handler):
 * - `prescheduled`: all 1,000 written before the worker starts (one bulk INSERT, due 2–12 s
 *   later); the dispatcher sleeps until exactly the next due time.
 * - `live`: the worker runs first; each alarm is created through the library's `schedule()` (its
 *   own connection pool, as an application would) 20 ms to 3 s before it is due, so nearer
 *   alarms must wake the sleeping dispatcher by NOTIFY.
 *
 * Lateness is read three ways, and none may be early:
 * - `fire.latenessMs`, what the handler is told (the dispatcher's own figure);
 * - `fire.firedAt − fire.scheduledFor` (asserted ≥ 0 for every fire) and, independently, the
 *   handler's own wall clock mapped onto the database clock (offset measured with
 *   `clock_timestamp()` round trips before the run) minus the due instant;
 * - in the database: `wakes.fired_at` (the claim's `now()`) − `scheduled_for` and
 *   `wakes.delivered_at` − `scheduled_for`; `fired_at < scheduled_for` must count 0.
 *
 *   npx tsx bench/lateness.ts [--backend=postgres|pglite|both] [--count=1000] [--spread=10000]
 */
import { performance } from 'node:perf_hooks';
import { createChronos, type Chronos } from '../packages/chronos-timers/src/library.js';
import type { TimerFire } from '../packages/chronos-timers/src/receivers/handler.js';
import { LiteDb, sql, type Db } from '../packages/chronos-timers/src/store/driver/db.js';
import {
  backendsFromArgs,
  deadline,
  createBench,
  log,
  numberArg,
  OWNER,
  sleep,
  summarize,
  USER_ID,
  writeResult,
  waitForQuiet,
  type BenchDatabase,
  type Summary,
} from './support.js';

interface Observed {
  key: string;
  latenessMs: number;
  firedMinusScheduledMs: number;
  /** The handler's wall clock, mapped to the database clock, minus the due instant. */
  handlerDbLatenessMs: number;
}

const clockRead = sql('bench_clock', 'SELECT clock_timestamp() AS now');

/** Database clock minus local clock (ms), from the round trip with the smallest delay. */
async function clockOffsetMs(db: Db): Promise<{ offsetMs: number; uncertaintyMs: number }> {
  let best = { offsetMs: 0, uncertaintyMs: Number.POSITIVE_INFINITY };
  for (let i = 0; i < 50; i++) {
    const sent = performance.timeOrigin + performance.now();
    const [row] = await db.query<{ now: Date }>(clockRead);
    const received = performance.timeOrigin + performance.now();
    const rtt = received - sent;
    // Date has millisecond resolution: half a millisecond more of doubt.
    if (rtt / 2 + 0.5 < best.uncertaintyMs) {
      best = { offsetMs: row!.now.getTime() + 0.5 - (sent + received) / 2, uncertaintyMs: rtt / 2 + 0.5 };
    }
  }
  return best;
}

const dueInstants = (count: number, spreadMs: number, startMs: number) =>
  Array.from({ length: count }, () => Math.round(startMs + Math.random() * spreadMs)).sort((a, b) => a - b);

// Bulk: the alarms due at the given instants (ms since epoch), keys `late-<n>`.
const insertAt = sql(
  'bench_insert_at',
  `INSERT INTO chronos.alarms (owner_did, user_id, kind, fire_at, next_fire_at, scheduled_for, idempotency_key, source,
     queue)
   SELECT '${OWNER}', '${USER_ID}', 'once', t, t, t, 'late-' || n, 'library', 'default'
   FROM unnest($1::float8[]) WITH ORDINALITY AS u(ms, n), LATERAL (SELECT timestamptz 'epoch' + ms * interval '1 millisecond') AS d(t)`,
);

const fromWakes = sql(
  'bench_lateness_wakes',
  `SELECT extract(epoch FROM (w.fired_at - w.scheduled_for)) * 1000 AS claimed_ms,
     extract(epoch FROM (w.delivered_at - w.scheduled_for)) * 1000 AS delivered_ms
   FROM chronos.wakes w JOIN chronos.alarms a ON a.id = w.alarm_id WHERE a.status = 'fired'`,
);
const earlyInDb = sql(
  'bench_lateness_early',
  `SELECT count(*)::int AS early FROM chronos.wakes WHERE fired_at < scheduled_for`,
);
const firedCount = sql(
  'bench_lateness_fired',
  `SELECT count(*)::int AS n FROM chronos.alarms WHERE status = 'fired'`,
);
const wipe = 'TRUNCATE chronos.alarms, chronos.wakes, chronos.wake_attempts';

async function openChronos(bench: BenchDatabase): Promise<Chronos> {
  return bench.kind === 'postgres'
    ? createChronos({ databaseUrl: bench.url! })
    : createChronos({ pglite: (bench.db as LiteDb).lite });
}

async function runVariant(
  bench: BenchDatabase,
  variant: 'prescheduled' | 'live',
  count: number,
  spreadMs: number,
) {
  await bench.db.exec(wipe);
  const load = await waitForQuiet();
  const worker = await openChronos(bench);
  // The application's own connection (PGlite has one: the same instance).
  const app = await openChronos(bench);
  const clock = await clockOffsetMs(bench.db);
  const dbNow = () => performance.timeOrigin + performance.now() + clock.offsetMs;

  const observed: Observed[] = [];
  let early = 0;
  let allFired: () => void = () => {};
  const done = new Promise<void>((resolve) => (allFired = resolve));
  const handler = (fire: TimerFire) => {
    const handlerDb = dbNow();
    if (fire.firedAt.getTime() < fire.scheduledFor.getTime()) early++;
    observed.push({
      key: fire.key,
      latenessMs: fire.latenessMs,
      firedMinusScheduledMs: fire.firedAt.getTime() - fire.scheduledFor.getTime(),
      handlerDbLatenessMs: handlerDb - fire.scheduledFor.getTime(),
    });
    if (observed.length === count) allFired();
  };

  let stop: () => Promise<void>;
  const createErrors: string[] = [];
  let createdAfterDue = 0;
  if (variant === 'prescheduled') {
    const instants = dueInstants(count, spreadMs, dbNow() + 2_000);
    await bench.db.query(insertAt, [instants]);
    const w = worker.work(handler);
    stop = () => w.stop();
  } else {
    const w = worker.work(handler);
    stop = () => w.stop();
    await sleep(500);
    const start = dbNow() + 3_000;
    const instants = dueInstants(count, spreadMs, start);
    const creations = instants.map((due, i) => {
      const leadMs = 20 + Math.random() * 2_980;
      return sleep(Math.max(0, due - leadMs - dbNow())).then(() =>
        app
          .schedule(null, { key: `late-${i}`, at: new Date(due) })
          .then(() => {
            // Created only after it was due (the application fell behind): its lateness is not the worker's.
            if (dbNow() > due) createdAfterDue++;
          })
          .catch((error: Error) => void createErrors.push(error.message)),
      );
    });
    await Promise.all(creations);
  }
  const timeout = deadline(spreadMs + 30_000).then(() => 'timeout' as const);
  const outcome = await Promise.race([done.then(() => 'done' as const), timeout]);
  // Then until every fire is recorded.
  for (let i = 0; i < 2_000; i++) {
    const [row] = await bench.db.query<{ n: number }>(firedCount);
    if (row!.n >= observed.length) break;
    await sleep(5);
  }
  await stop();
  const wakes = await bench.db.query<{ claimed_ms: number; delivered_ms: number }>(fromWakes);
  const [earlyRow] = await bench.db.query<{ early: number }>(earlyInDb);
  await app.close();
  await worker.close();
  if (outcome === 'timeout') throw new Error(`${variant}: only ${observed.length} of ${count} fired in time`);
  if (createErrors.length > 0) throw new Error(`${variant}: creates failed: ${createErrors[0]}`);

  const result = {
    variant,
    load,
    count,
    spreadMs,
    fired: observed.length,
    duplicates: observed.length - new Set(observed.map((o) => o.key)).size,
    clockOffsetUncertaintyMs: Math.round(clock.uncertaintyMs * 1000) / 1000,
    lateness: summarize(observed.map((o) => o.latenessMs)),
    firedMinusScheduled: summarize(observed.map((o) => o.firedMinusScheduledMs)),
    handlerObserved: summarize(observed.map((o) => o.handlerDbLatenessMs)),
    dbClaimed: summarize(wakes.map((w) => Number(w.claimed_ms))),
    dbDelivered: summarize(wakes.map((w) => Number(w.delivered_ms))),
    createdAfterDue,
    earlyByFire: early,
    earlyInDb: earlyRow!.early,
    handlerEarlyBeyondUncertainty: observed.filter((o) => o.handlerDbLatenessMs < -clock.uncertaintyMs)
      .length,
  };
  if (result.earlyByFire > 0 || result.earlyInDb > 0) {
    throw new Error(
      `${variant}: ${result.earlyByFire} fires (${result.earlyInDb} in the database) were early`,
    );
  }
  return result;
}

function line(name: string, s: Summary): string {
  return `${name} p50 ${s.p50} p99 ${s.p99} max ${s.max}`;
}

async function runBackend(kind: BenchDatabase['kind'], count: number, spreadMs: number) {
  const bench = await createBench(kind, 'lateness');
  const variants = [];
  try {
    for (const variant of ['prescheduled', 'live'] as const) {
      const r = await runVariant(bench, variant, count, spreadMs);
      variants.push(r);
      log(
        `${kind} ${variant}: ${line('latenessMs', r.lateness)} | ${line('handler', r.handlerObserved)} | ` +
          `${line('db claimed', r.dbClaimed)} | early ${r.earlyByFire}/${r.earlyInDb}`,
      );
    }
  } finally {
    await bench.drop();
  }
  return { backend: kind, variants };
}

const count = numberArg('count', 1_000);
const spreadMs = numberArg('spread', 10_000);
for (const kind of backendsFromArgs()) {
  const path = await writeResult(`lateness-${kind}`, await runBackend(kind, count, spreadMs));
  log(`wrote ${path}`);
}
