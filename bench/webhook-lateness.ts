/**
 * Webhook lateness: 1,000 wakes due at random instants over 10 s, delivered by one running
 * instance through the webhook path to a local router stand-in (another process) answering 200
 * at once. Target (PostgreSQL): p99 ≤ 30 ms, none early.
 *
 * Two measures per wake, both against the due instant (`scheduled_for`, by the database clock,
 * which on this one host is the same clock the sink reads):
 * - `received`: when the sink had the whole request — what the router sees, the figure held to
 *   the target;
 * - `attemptStart`: the dispatcher's own lateness (`wakes.lateness_ms`, the attempt's start by
 *   the database clock), as exported in `chronos_lateness_seconds`.
 *
 * The dispatcher runs as in the service (its loop, default poll 1 s, LISTEN/NOTIFY) and is warm.
 * The alarms are inserted 2 s before the first is due; the dispatcher finds each next due instant
 * by itself and sleeps until exactly then.
 *
 *   npx tsx bench/webhook-lateness.ts [--count=1000] [--spread=10000] [--runs=3] [--quiet=N]
 *
 * `--quiet=N` waits (up to 5 min) before each run until the CPU pressure is under N %.
 */
import { randomBytes } from 'node:crypto';
import { Dispatcher } from '../packages/chronos-timers/src/dispatch/dispatcher.js';
import { Metrics } from '../packages/chronos-timers-server/src/metrics.js';
import { WebhookReceiver } from '../packages/chronos-timers-server/src/receivers/webhook.js';
import { sql } from '../packages/chronos-timers/src/store/driver/db.js';
import {
  createPostgres,
  log,
  numberArg,
  OWNER,
  summarize,
  USER_ID,
  writeResult,
  type Load,
  type Summary,
} from './support.js';
import { machineCpu, quietEnough, startSinkProcess } from './webhook-support.js';

const COUNT = numberArg('count', 1_000);
const SPREAD_MS = numberArg('spread', 10_000);
const RUNS = numberArg('runs', 3);
const LEAD_MS = 2_000;
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;

// `$1` once-alarms due at random instants in [now + $2 ms, now + $2 + $3 ms).
const loadRandom = sql(
  'bench_webhook_random_due',
  `INSERT INTO chronos.alarms (owner_did, user_id, kind, fire_at, next_fire_at, scheduled_for, idempotency_key,
     label, wake_message, payload, source, queue)
   SELECT '${OWNER}', '${USER_ID}', 'once', t, t, t, $4::text || i, 'bench wake', 'Wake up.',
     '{"task": "check-build", "build": 12345678901234567890}'::jsonb, 'library', 'router'
   FROM (SELECT i, now() + ($2::int + random() * $3::int) * interval '1 millisecond' AS t
         FROM generate_series(1, $1::int) AS i) AS d`,
);
const latenessOf = sql(
  'bench_webhook_lateness_of',
  `SELECT w.lateness_ms FROM chronos.wakes w JOIN chronos.alarms a ON a.id = w.alarm_id
   WHERE a.idempotency_key LIKE $1 AND w.status = 'delivered'`,
);
const pending = sql(
  'bench_webhook_pending',
  `SELECT count(*)::int AS n FROM chronos.alarms WHERE idempotency_key LIKE $1 AND status = 'active'`,
);

interface Run {
  received: Summary;
  attemptStart: Summary;
  early: number;
  machineCpuBusy: number;
  /** The machine's load when the run started (other work on the same 2 CPUs). */
  loadAtStart: Load;
}

async function main(): Promise<void> {
  const bench = await createPostgres('webhook_lateness', 20);
  const sink = await startSinkProcess({ samples: true });
  const metrics = new Metrics();
  const receiver = new WebhookReceiver({
    url: sink.url,
    secrets: [SECRET],
    timeoutMs: 10_000,
    concurrency: 200,
    metrics,
  });
  const dispatcher = new Dispatcher({
    queue: 'router',
    db: bench.db,
    receiver,
    metrics,
    leaseMs: 30_000,
    deliveryTimeoutMs: 10_000,
  });
  const runs: Run[] = [];
  try {
    log(`webhook lateness: ${COUNT} wakes over ${SPREAD_MS} ms, ${RUNS} runs`);
    await dispatcher.start();
    // Warm: 200 wakes over one second, untimed.
    await bench.db.query(loadRandom, [200, 200, 1_000, 'warm-']);
    await waitDrained(bench.db, 'warm-%');
    for (let i = 0; i < RUNS; i++) {
      const prefix = `late-${i}-`;
      const loadAtStart = await quietEnough();
      await sink.reset();
      const cpu = machineCpu();
      await bench.db.query(loadRandom, [COUNT, LEAD_MS, SPREAD_MS, prefix]);
      await new Promise((resolve) => setTimeout(resolve, LEAD_MS + SPREAD_MS));
      await waitDrained(bench.db, `${prefix}%`);
      const machineCpuBusy = Math.round(cpu() * 100) / 100;
      const report = await sink.report();
      if (report.received !== COUNT)
        throw new Error(`run ${i}: sink received ${report.received} of ${COUNT}`);
      const received = report.samples.map(([due, at]) => at - due);
      const attemptStart = (await bench.db.query<{ lateness_ms: number }>(latenessOf, [`${prefix}%`])).map(
        (r) => r.lateness_ms,
      );
      const run: Run = {
        received: summarize(received),
        attemptStart: summarize(attemptStart),
        early: received.filter((ms) => ms < 0).length,
        machineCpuBusy,
        loadAtStart,
      };
      runs.push(run);
      log(
        `run ${i + 1}: received − due p50 ${run.received.p50} ms, p99 ${run.received.p99} ms, max ${run.received.max} ms, ` +
          `early ${run.early}; attempt start p99 ${run.attemptStart.p99} ms; machine ${Math.round(machineCpuBusy * 100)}% busy, ` +
          `CPU pressure at start ${loadAtStart.cpuPressureAvg10}%`,
      );
    }
  } finally {
    await dispatcher.stop(5_000);
    await receiver.close();
    await sink.stop();
    await bench.drop();
  }
  const p99s = runs.map((r) => r.received.p99);
  const summary = {
    count: COUNT,
    spreadMs: SPREAD_MS,
    worstP99Ms: Math.max(...p99s),
    bestP99Ms: Math.min(...p99s),
    worstMaxMs: Math.max(...runs.map((r) => r.received.max)),
    early: runs.reduce((n, r) => n + r.early, 0),
    targetP99Ms: 30,
  };
  log(
    `p99 received − due: best ${summary.bestP99Ms} ms, worst ${summary.worstP99Ms} ms; early: ${summary.early}`,
  );
  const path = await writeResult('webhook-lateness', { summary, runs });
  log(`written ${path}`);
}

async function waitDrained(
  db: import('../packages/chronos-timers/src/store/driver/db.js').Db,
  pattern: string,
): Promise<void> {
  for (;;) {
    const [row] = await db.query<{ n: number }>(pending, [pattern]);
    if (row!.n === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

await main();
