/**
 * What an rrule costs against a cron (issue 48): 50,000 recurring alarms all due now, drained by
 * one library worker, each fire recorded with its next occurrence computed (the rule expanded
 * from its start in Europe/Paris for rrule; croner for cron). The same daily schedule both ways
 * ("0 9 * * *" and "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0"), run by run in turn so the
 * machine's drift falls on both. Timed from `work()` to every row's next_fire_at in the future;
 * CPU per fire (the worker's and PostgreSQL's backends') is recorded too, since on a shared
 * machine it varies far less than wall time. Target: rrule ≤ 1.2× cron.
 *
 *   npx tsx bench/recurrence-cost.ts [--count=50000] [--runs=3] [--quiet=<percent>]
 *
 * Result: bench/results/recurrence-cost.json.
 */
import { performance } from 'node:perf_hooks';
import { createChronos, type Chronos } from '../packages/chronos-timers/src/library.js';
import { sql } from '../packages/chronos-timers/src/store/driver/db.js';
import {
  backendCpu,
  backendCpuSince,
  createBench,
  log,
  numberArg,
  OWNER,
  percentile,
  sleep,
  USER_ID,
  waitForQuiet,
  writeResult,
  type BenchDatabase,
} from './support.js';

type Kind = 'cron' | 'rrule';

// Every alarm due a second ago, its rule starting a day before (the rrule's DTSTART).
const load = sql(
  'bench_recurrence_load',
  `INSERT INTO chronos.alarms (owner_did, user_id, kind, cron_expr, rrule, rrule_start, timezone,
     next_fire_at, scheduled_for, idempotency_key, payload, source, queue)
   SELECT '${OWNER}', '${USER_ID}', $2::text,
     CASE WHEN $2 = 'cron' THEN '0 9 * * *' ELSE '' END,
     CASE WHEN $2 = 'rrule' THEN 'FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0' ELSE '' END,
     CASE WHEN $2 = 'rrule' THEN date_trunc('second', now()) - interval '1 day' END,
     'Europe/Paris', now() - interval '1 second', now() - interval '1 second',
     'rec-' || i, '{"bench":true}'::jsonb, 'library', 'default'
   FROM generate_series(1, $1::int) AS i`,
);
const recorded = sql(
  'bench_recurrence_recorded',
  `SELECT count(*) FILTER (WHERE next_fire_at > now())::int AS n FROM chronos.alarms`,
);
const wipe = `TRUNCATE chronos.alarms, chronos.wakes, chronos.wake_attempts`;

interface Run {
  kind: Kind;
  recordedMs: number;
  firesPerSecond: number;
  workerCpuUsPerFire: number;
  postgresCpuUsPerFire: number | null;
}

async function drainOnce(bench: BenchDatabase, chronos: Chronos, kind: Kind, count: number): Promise<Run> {
  await bench.db.exec(wipe);
  await bench.db.query(load, [count, kind]);
  await bench.db.exec('ANALYZE chronos.alarms');
  await waitForQuiet();
  let seen = 0;
  let allSeen: () => void = () => {};
  const delivered = new Promise<void>((resolve) => (allSeen = resolve));
  const pgBefore = bench.url ? await backendCpu(bench.url) : null;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const worker = chronos.work(() => {
    if (++seen === count) allSeen();
  });
  let recordedAt: number;
  try {
    await delivered;
    for (;;) {
      const [row] = await bench.db.query<{ n: number }>(recorded);
      if (row!.n === count) {
        recordedAt = performance.now();
        break;
      }
      await sleep(2);
    }
  } finally {
    await worker.stop();
  }
  const cpu = process.cpuUsage(cpuBefore);
  const pgCpuMs = bench.url ? await backendCpuSince(bench.url, pgBefore) : null;
  const recordedMs = Math.round(recordedAt - started);
  return {
    kind,
    recordedMs,
    firesPerSecond: Math.round((count / recordedMs) * 1000),
    workerCpuUsPerFire: Math.round((cpu.user + cpu.system) / count),
    postgresCpuUsPerFire: pgCpuMs === null ? null : Math.round((pgCpuMs * 1000) / count),
  };
}

const count = numberArg('count', 50_000);
const runs = numberArg('runs', 3);
const bench = await createBench('postgres', 'recurrence_cost');
const chronos = await createChronos({ databaseUrl: bench.url! });
const all: Run[] = [];
try {
  // Warm: the pool, the statements, croner and the rule cache of each kind.
  for (const kind of ['cron', 'rrule'] as const) await drainOnce(bench, chronos, kind, 1_000);
  for (let i = 0; i < runs; i++) {
    const order: Kind[] = i % 2 === 0 ? ['cron', 'rrule'] : ['rrule', 'cron'];
    for (const kind of order) {
      const run = await drainOnce(bench, chronos, kind, count);
      all.push(run);
      log(
        `run ${i + 1} ${kind}: ${run.recordedMs} ms (${run.firesPerSecond} fires/s); CPU per fire worker ` +
          `${run.workerCpuUsPerFire} µs, PostgreSQL ${run.postgresCpuUsPerFire} µs`,
      );
    }
  }
} finally {
  await chronos.close();
  await bench.drop();
}
const median = (kind: Kind, pick: (r: Run) => number) =>
  percentile(all.filter((r) => r.kind === kind).map(pick), 50);
const summary = Object.fromEntries(
  (['cron', 'rrule'] as const).map((kind) => [
    kind,
    {
      recordedMs: median(kind, (r) => r.recordedMs),
      workerCpuUsPerFire: median(kind, (r) => r.workerCpuUsPerFire),
      postgresCpuUsPerFire: median(kind, (r) => r.postgresCpuUsPerFire ?? Number.NaN),
    },
  ]),
) as Record<Kind, { recordedMs: number; workerCpuUsPerFire: number; postgresCpuUsPerFire: number }>;
const ratio = {
  wall: Math.round((summary.rrule.recordedMs / summary.cron.recordedMs) * 100) / 100,
  workerCpu: Math.round((summary.rrule.workerCpuUsPerFire / summary.cron.workerCpuUsPerFire) * 100) / 100,
};
log(
  `medians of ${runs}: cron ${summary.cron.recordedMs} ms, rrule ${summary.rrule.recordedMs} ms; ` +
    `rrule / cron: wall ${ratio.wall}×, worker CPU ${ratio.workerCpu}× (target ≤ 1.2×)`,
);
log(`wrote ${await writeResult('recurrence-cost', { count, runs, summary, ratio, runs_: all })}`);
