/**
 * Webhook drain: 5,000 wakes due at one instant, delivered by one running instance through the
 * webhook path — claimed, signed, POSTed to a local router stand-in that answers 200 at once,
 * and recorded. Targets (PostgreSQL): ≥ 5,000 wakes/s end to end (issue 4), ≥ 10,000 (issue 18).
 *
 * The dispatcher runs as in the service (its loop, the WebhookReceiver with its keep-alive pool,
 * a 20-connection database pool) and is warm: an untimed round goes first. Each run inserts
 * `--count` alarms due 2 s ahead (so the dispatcher is asleep, waiting for exactly that instant)
 * and is timed from the due instant to the moment the last outcome is recorded (the dispatcher's
 * `chronos_deliveries_total` reaches the count); then the database and the sink confirm that every
 * wake was fired once and received once. The router stand-in is another process
 * (bench/webhook-sink.ts), as a router would be.
 *
 * Where the time goes: every statement is timed (claim, record, next-due probe), the POSTs by
 * the receiver's histogram, signing and body building by a separate loop; CPU used by this
 * process, the sink process and the whole machine (2 cores run all three and PostgreSQL).
 *
 * `--receiver=noop` runs the same dispatcher with a receiver that answers at once without any
 * HTTP: the claim → record path alone, for comparison.
 *
 *   npx tsx bench/webhook-drain.ts [--count=5000] [--runs=5] [--batch=200] [--concurrency=200]
 *     [--pipelining=1] [--connections=concurrency/pipelining, at most 64] [--receiver=webhook|noop]
 *     [--quiet=N] [--timeline]
 *
 * `--pipelining=10` is `CHRONOS_ROUTER_PIPELINING=10`: ten wakes to a connection, a pool of 20.
 *
 * `--quiet=N` waits (up to 5 min) before each run until the CPU pressure is under N %.
 *
 * `--timeline` prints, after each run, every statement the dispatcher ran: when it started and
 * ended (ms from the due instant), the deliveries under way as it started, and its size (rows
 * claimed, outcomes recorded) — where a run waits on what.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Dispatcher } from '../packages/chronos-timers/src/dispatch/dispatcher.js';
import { RawJson } from '../packages/chronos-timers/src/json.js';
import { Metrics } from '../packages/chronos-timers-server/src/metrics.js';
import type { Fire, Receiver } from '../packages/chronos-timers/src/receivers/receiver.js';
import { webhookHeaders } from '../packages/chronos-timers-server/src/receivers/signing.js';
import { wakeBody } from '../packages/chronos-timers-server/src/receivers/wake-body.js';
import { WebhookReceiver } from '../packages/chronos-timers-server/src/receivers/webhook.js';
import { sql, type Db } from '../packages/chronos-timers/src/store/driver/db.js';
import type { Alarm } from '../packages/chronos-timers/src/types.js';
import {
  createPostgres,
  log,
  numberArg,
  OWNER,
  percentile,
  USER_ID,
  writeResult,
  type Load,
} from './support.js';
import {
  machineCpu,
  postgresCpu,
  processCpu,
  quietEnough,
  startSinkProcess,
  timedDb,
  type StatementSpan,
  type StatementTimes,
} from './webhook-support.js';

const COUNT = numberArg('count', 5_000);
const RUNS = numberArg('runs', 5);
const BATCH = numberArg('batch', 200);
const CONCURRENCY = numberArg('concurrency', 200);
const PIPELINING = numberArg('pipelining', 1);
// As the service sizes its pool (receivers/webhook.ts).
const CONNECTIONS = numberArg('connections', Math.min(Math.ceil(CONCURRENCY / PIPELINING), 64));
const NOOP = process.argv.includes('--receiver=noop');
const TIMELINE = process.argv.includes('--timeline');
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;

// `$1` once-alarms due `$2` ms from now, with a wake message and a payload of realistic size.
const loadDueAt = sql(
  'bench_webhook_due_at',
  `WITH ins AS (
     INSERT INTO chronos.alarms (owner_did, user_id, kind, fire_at, next_fire_at, scheduled_for, idempotency_key,
       label, conversation_id, wake_message, payload, source, queue)
     SELECT '${OWNER}', '${USER_ID}', 'once', t, t, t, $3::text || i, 'bench wake', 'conv-' || i,
       'Wake up: the build you asked me to watch should be done by now.',
       '{"task": "check-build", "build": 12345678901234567890, "attempt": 1}'::jsonb, 'library', 'router'
     FROM generate_series(1, $1::int) AS i,
       LATERAL (SELECT now() + $2::int * interval '1 millisecond') AS d(t)
     RETURNING next_fire_at)
   SELECT min(next_fire_at) AS due_at, count(*)::int AS n FROM ins`,
);
const firedCount = sql(
  'bench_webhook_fired',
  `SELECT count(*) FILTER (WHERE status = 'fired')::int AS fired,
     count(*) FILTER (WHERE status <> 'fired')::int AS other FROM chronos.alarms WHERE idempotency_key LIKE $1`,
);

async function delivered(metrics: Metrics): Promise<number> {
  const { values } = await metrics.deliveries.get();
  return values.reduce((sum, v) => sum + v.value, 0);
}

async function attemptSum(metrics: Metrics): Promise<{ count: number; sumMs: number }> {
  const { values } = await metrics.webhookAttemptSeconds.get();
  let count = 0;
  let sum = 0;
  for (const v of values) {
    if (v.metricName === 'chronos_webhook_attempt_seconds_count') count += v.value;
    if (v.metricName === 'chronos_webhook_attempt_seconds_sum') sum += v.value;
  }
  return { count, sumMs: sum * 1000 };
}

/** Waits (polling this process's own counter) until `target` outcomes have been recorded. */
async function until(metrics: Metrics, target: number): Promise<number> {
  for (;;) {
    if ((await delivered(metrics)) >= target) return Date.now();
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** Microseconds to build and sign one wake body, outside the dispatcher. */
function signCostUs(): number {
  const alarm = {
    id: '0b6f2f0e-6f43-4a6b-9a55-1b1e6f0c9e11',
    ownerDid: OWNER,
    userId: USER_ID,
    label: 'bench wake',
    kind: 'once',
    conversationId: 'conv-1',
    wakeMessage: 'Wake up: the build you asked me to watch should be done by now.',
    payload: new RawJson('{"task": "check-build", "build": 12345678901234567890, "attempt": 1}'),
  } as Alarm;
  const fire: Fire = {
    alarm,
    wakeId: '5d1c0e8e-8c0a-4f0e-a1b4-1f0f2b8b2f77',
    attempt: 1,
    fireCount: 1,
    trigger: 'schedule',
    traceparent: '',
    scheduledFor: new Date(),
    firedAt: new Date(),
    latenessMs: 3,
  };
  const n = 20_000;
  for (let i = 0; i < 2_000; i++) webhookHeaders([SECRET], fire.wakeId, wakeBody(fire), 1_800_000_000);
  const started = performance.now();
  for (let i = 0; i < n; i++) webhookHeaders([SECRET], fire.wakeId, wakeBody(fire), 1_800_000_000);
  return ((performance.now() - started) * 1000) / n;
}

interface Run {
  count: number;
  /** Due instant → last outcome recorded. */
  elapsedMs: number;
  wakesPerSecond: number;
  received: number;
  connections: number;
  fired: number;
  statements: StatementTimes;
  postCount: number;
  postSumMs: number;
  dispatcherCpuMs: number;
  sinkCpuMs: number;
  postgresCpuMs: number;
  /** CPU of dispatcher, sink and PostgreSQL backends together, per wake. */
  cpuUsPerWake: number;
  machineCpuBusy: number;
  /** The machine's load when the run started (other work on the same 2 CPUs). */
  loadAtStart: Load;
}

const SHORT_NAMES: Record<string, string> = {
  alarms_claim_due: 'claim',
  alarms_record_outcomes: 'record',
  alarms_next_due: 'next due',
};

/** One line per statement of a run, in the order they started (`--timeline`). */
function printTimeline(spans: readonly StatementSpan[], dueAtPerf: number): void {
  const ms = (perf: number) => String(Math.round(perf - dueAtPerf)).padStart(5);
  for (const span of [...spans].sort((a, b) => a.startedAt - b.startedAt)) {
    const size =
      span.name === 'alarms_record_outcomes' ? `${span.batch ?? '?'} outcomes` : `${span.rows} rows`;
    console.log(
      `  ${ms(span.startedAt)} → ${ms(span.endedAt)} ms  ${(SHORT_NAMES[span.name] ?? span.name).padEnd(8)} ` +
        `${size.padStart(13)}, ${span.inFlight} under way as it started`,
    );
  }
}

async function runOnce(
  db: Db,
  timed: ReturnType<typeof timedDb>,
  metrics: Metrics,
  sink: Awaited<ReturnType<typeof startSinkProcess>>,
  index: number,
  database: string,
): Promise<Run> {
  const prefix = `drain-${index}-`;
  const loadAtStart = await quietEnough();
  await sink.reset();
  const before = await delivered(metrics);
  const posts = await attemptSum(metrics);
  const [loaded] = await db.query<{ due_at: Date; n: number }>(loadDueAt, [COUNT, 2_000, prefix]);
  timed.reset();
  const dueAtPerf = performance.now() + (loaded!.due_at.getTime() - Date.now());
  // Sampling starts just before the due instant, so the idle wait is not counted.
  await new Promise((resolve) =>
    setTimeout(resolve, Math.max(0, loaded!.due_at.getTime() - Date.now() - 50)),
  );
  const cpu = processCpu();
  const machine = machineCpu();
  const pgCpu = postgresCpu(database);
  const doneAt = await until(metrics, before + COUNT);
  const dispatcherCpuMs = cpu();
  const machineCpuBusy = machine();
  const postgresCpuMs = pgCpu();
  const elapsedMs = doneAt - loaded!.due_at.getTime();
  if (TIMELINE) printTimeline(timed.spans, dueAtPerf);
  const report = await sink.report();
  const [check] = await db.query<{ fired: number; other: number }>(firedCount, [`${prefix}%`]);
  const after = await attemptSum(metrics);
  return {
    count: COUNT,
    elapsedMs,
    wakesPerSecond: Math.round((COUNT / elapsedMs) * 1000),
    received: report.received,
    connections: report.connections,
    fired: check!.fired,
    statements: timed.times,
    postCount: after.count - posts.count,
    postSumMs: Math.round(after.sumMs - posts.sumMs),
    dispatcherCpuMs: Math.round(dispatcherCpuMs),
    sinkCpuMs: Math.round(report.cpuMs),
    postgresCpuMs: Math.round(postgresCpuMs),
    cpuUsPerWake: Math.round(((dispatcherCpuMs + report.cpuMs + postgresCpuMs) * 1000) / COUNT),
    machineCpuBusy: Math.round(machineCpuBusy * 100) / 100,
    loadAtStart,
  };
}

async function main(): Promise<void> {
  const bench = await createPostgres('webhook_drain', 20);
  const sink = await startSinkProcess();
  const metrics = new Metrics();
  const webhook = new WebhookReceiver({
    url: sink.url,
    secrets: [SECRET],
    timeoutMs: 10_000,
    concurrency: CONCURRENCY,
    connections: CONNECTIONS,
    pipelining: PIPELINING,
    metrics,
  });
  const noop: Receiver = { name: 'noop', deliver: async () => ({ ok: true, statusCode: 200 }) };
  const receiver = NOOP ? noop : webhook;
  // The dispatcher is made on the timed store, which asks it how many deliveries are under way.
  let dispatcher: Dispatcher | null = null;
  const timed = timedDb(bench.db, { spans: TIMELINE, inFlight: () => dispatcher?.inFlight ?? 0 });
  dispatcher = new Dispatcher({
    queue: 'router',
    db: timed.db,
    receiver,
    metrics,
    leaseMs: 30_000,
    batchSize: BATCH,
    concurrency: CONCURRENCY,
    deliveryTimeoutMs: 10_000,
  });
  const runs: Run[] = [];
  try {
    log(
      `webhook drain (${NOOP ? 'noop receiver' : 'webhook'}): ${COUNT} wakes, batch ${BATCH}, concurrency ${CONCURRENCY}, connections ${CONNECTIONS}, pipelining ${PIPELINING}, ${RUNS} runs`,
    );
    await dispatcher.start();
    // Warm: prepared statements on the pool's connections, keep-alive sockets to the sink, JIT.
    await bench.db.query(loadDueAt, [COUNT, 0, 'warm-']);
    await until(metrics, COUNT);
    for (let i = 0; i < RUNS; i++) {
      const run = await runOnce(bench.db, timed, metrics, sink, i, new URL(bench.url!).pathname.slice(1));
      if ((!NOOP && run.received !== COUNT) || run.fired !== COUNT) {
        throw new Error(
          `run ${i}: expected ${COUNT} received and fired, got ${run.received} and ${run.fired}`,
        );
      }
      runs.push(run);
      const claim = run.statements.alarms_claim_due;
      const record = run.statements.alarms_record_outcomes;
      log(
        `run ${i + 1}: ${run.elapsedMs} ms → ${run.wakesPerSecond} wakes/s; ` +
          `claim ${claim?.calls ?? 0}× ${Math.round(claim?.totalMs ?? 0)} ms, ` +
          `record ${record?.calls ?? 0}× ${Math.round(record?.totalMs ?? 0)} ms, ` +
          `POST mean ${(run.postSumMs / run.postCount).toFixed(2)} ms; ` +
          `cpu: dispatcher ${run.dispatcherCpuMs} ms, sink ${run.sinkCpuMs} ms, postgres ${run.postgresCpuMs} ms ` +
          `(${run.cpuUsPerWake} µs/wake), machine ${Math.round(run.machineCpuBusy * 100)}% busy, ` +
          `CPU pressure at start ${run.loadAtStart.cpuPressureAvg10}%`,
      );
    }
  } finally {
    await dispatcher.stop(5_000);
    await webhook.close();
    await sink.stop();
    await bench.drop();
  }
  const rates = runs.map((r) => r.wakesPerSecond);
  const signUs = signCostUs();
  const summary = {
    count: COUNT,
    batch: BATCH,
    concurrency: CONCURRENCY,
    connections: CONNECTIONS,
    pipelining: PIPELINING,
    medianWakesPerSecond: percentile(rates, 50),
    bestWakesPerSecond: Math.max(...rates),
    worstWakesPerSecond: Math.min(...rates),
    medianElapsedMs: percentile(
      runs.map((r) => r.elapsedMs),
      50,
    ),
    signAndBuildUsPerWake: Math.round(signUs * 10) / 10,
    targetWakesPerSecond: 10_000,
  };
  log(
    `median ${summary.medianWakesPerSecond} wakes/s (best ${summary.bestWakesPerSecond}, worst ${summary.worstWakesPerSecond}); ` +
      `build + sign ${summary.signAndBuildUsPerWake} µs/wake`,
  );
  const name = `webhook-drain${NOOP ? '-noop' : ''}-b${BATCH}-c${CONCURRENCY}-k${CONNECTIONS}${PIPELINING > 1 ? `-p${PIPELINING}` : ''}`;
  const path = await writeResult(name, { receiver: NOOP ? 'noop' : 'webhook', summary, runs });
  log(`written ${path}`);
}

await main();
