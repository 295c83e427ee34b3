/**
 * Scale out: 1, 2 and 3 `chronos serve` processes against one PostgreSQL, each run 5,000 wakes
 * due at the same instant, delivered through the webhook path to a local router stand-in (the
 * test suite's sink in a process of its own, answering 200 at once).
 *
 * Per run: fires/s from the due instant to the last wake received, lateness (received − due, on
 * this host's one clock), how the wakes split between the instances (from each one's
 * `chronos_deliveries_total`), duplicates, and the CPU the instances and PostgreSQL's backends
 * used. The instances run as production runs them (`node bin/chronos.js serve`, default batch
 * 200, concurrency 200) and are idle, waiting, when the wakes fall due.
 *
 *   npx tsx bench/scale-out.ts [--count=5000] [--runs=3] [--instances=1,2,3] [--quiet=N]
 *
 * Results: bench/results/scale-out.json. On a 2-core machine, 3 instances (plus PostgreSQL and
 * the sink) measure contention for the CPUs, not scale.
 */
import { Instance, stopAll } from '../test/scenarios/support/instance.js';
import { sql } from '../packages/chronos-timers/src/store/driver/db.js';
import {
  createPostgres,
  loadWaitingAlarms,
  log,
  numberArg,
  processCpuMs,
  sleep,
  summarize,
  writeResult,
  type Summary,
} from './support.js';
import { machineCpu, postgresCpu, quietEnough, startSinkProcess } from './webhook-support.js';

const COUNT = numberArg('count', 5_000);
const RUNS = numberArg('runs', 3);
const LEAD_S = 3;
const COUNTS = (
  process.argv.find((a) => a.startsWith('--instances='))?.slice('--instances='.length) ?? '1,2,3'
)
  .split(',')
  .map(Number);

const truncate = sql('bench_scale_truncate', 'TRUNCATE chronos.alarms, chronos.wakes, chronos.wake_attempts');
const fired = sql(
  'bench_scale_fired',
  `SELECT count(*)::int AS n FROM chronos.alarms WHERE status = 'fired'`,
);
const dueAt = sql(
  'bench_scale_due_at',
  `SELECT extract(epoch FROM min(scheduled_for))::float8 * 1000 AS ms FROM chronos.alarms`,
);

interface Run {
  instances: number;
  wakes: number;
  firesPerSecond: number;
  /** Due instant → last wake received. */
  drainMs: number;
  latenessMs: Summary;
  early: number;
  duplicates: number;
  /** Wakes each instance delivered. */
  split: number[];
  cpuMs: { instances: number; postgres: number; machineBusy: number };
  cpuPressureAtStart: number | null;
}

async function main(): Promise<void> {
  const bench = await createPostgres('scale_out', 4);
  const sink = await startSinkProcess({ samples: true });
  const database = new URL(bench.url!).pathname.slice(1);
  const results: Run[] = [];
  let fleet: Instance[] = [];
  try {
    for (const n of COUNTS) {
      fleet = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          Instance.create(`chronos-${i + 1}`, {
            DATABASE_URL: bench.url!,
            CHRONOS_ROUTER_URL: sink.url,
            CHRONOS_MAX_ACTIVE_ALARMS: '0',
            CHRONOS_CREATE_RATE: '0',
          }),
        ),
      );
      await Promise.all(fleet.map((instance) => instance.start()));
      // Run 0 warms the fleet (JIT, pools, prepared statements) and is not counted.
      for (let run = 0; run <= RUNS; run++) {
        const load = await quietEnough();
        await bench.db.query(truncate);
        await sink.reset();
        const before = await Promise.all(
          fleet.map((i) => i.metric('chronos_deliveries_total', { outcome: 'delivered' })),
        );
        await loadWaitingAlarms(bench.db, COUNT, { fromSeconds: LEAD_S, stepMs: 0, keyPrefix: `run${run}-` });
        const [{ ms: due }] = (await bench.db.query<{ ms: number }>(dueAt)) as [{ ms: number }];
        await sleep(due - Date.now() - 200);
        const cpuBefore = fleet.map((i) => processCpuMs(i.pid!) ?? 0);
        const pgCpu = postgresCpu(database);
        const busy = machineCpu();
        for (;;) {
          const [{ n: done }] = (await bench.db.query<{ n: number }>(fired)) as [{ n: number }];
          if (done >= COUNT) break;
          if (Date.now() - due > 120_000) throw new Error(`only ${done} of ${COUNT} fired after 2 minutes`);
          await sleep(50);
        }
        const cpu = {
          instances: Math.round(
            fleet.reduce((sum, i, k) => sum + (processCpuMs(i.pid!) ?? 0) - cpuBefore[k]!, 0),
          ),
          postgres: Math.round(pgCpu()),
          machineBusy: Math.round(busy() * 100) / 100,
        };
        const report = await sink.report();
        const lateness = report.samples.map(([scheduled, received]) => received - scheduled);
        const lastReceived = Math.max(...report.samples.map(([, received]) => received));
        const after = await Promise.all(
          fleet.map((i) => i.metric('chronos_deliveries_total', { outcome: 'delivered' })),
        );
        const result: Run = {
          instances: n,
          wakes: COUNT,
          drainMs: Math.round(lastReceived - due),
          firesPerSecond: Math.round((COUNT / (lastReceived - due)) * 1000),
          latenessMs: summarize(lateness),
          early: lateness.filter((ms) => ms < 0).length,
          duplicates: report.received - COUNT,
          split: after.map((a, k) => a - before[k]!),
          cpuMs: cpu,
          cpuPressureAtStart: load.cpuPressureAvg10,
        };
        if (run > 0) results.push(result);
        log(
          `${n} instance(s), ${run === 0 ? 'warm-up' : `run ${run}`}: ${result.firesPerSecond} fires/s, lateness p50 ${result.latenessMs.p50} ms ` +
            `p99 ${result.latenessMs.p99} ms max ${result.latenessMs.max} ms, split ${result.split.join('/')}, ` +
            `duplicates ${result.duplicates}, early ${result.early}`,
        );
      }
      await stopAll(fleet);
      fleet = [];
    }
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    const byInstances = COUNTS.map((n) => {
      const runs = results.filter((r) => r.instances === n);
      return {
        instances: n,
        medianFiresPerSecond: median(runs.map((r) => r.firesPerSecond)),
        medianLatenessP50Ms: median(runs.map((r) => r.latenessMs.p50)),
        medianLatenessP99Ms: median(runs.map((r) => r.latenessMs.p99)),
        medianLatenessMaxMs: median(runs.map((r) => r.latenessMs.max)),
      };
    });
    console.table(byInstances);
    log(`wrote ${await writeResult('scale-out', { count: COUNT, runs: RUNS, byInstances, results })}`);
  } finally {
    await stopAll(fleet);
    await sink.stop();
    await bench.drop();
  }
}

await main();
