/**
 * Bulk scheduling: `scheduleMany(tx, specs)` of 5,000 and 50,000 one-shot timers in one
 * transaction of the caller's (BEGIN, scheduleMany, COMMIT), timed from the call to the commit.
 * Target (PostgreSQL, issue 13): ≥ 60,000 timers/s at both sizes. `schedule()` one by one in one
 * transaction is measured beside it, at the smaller size, for the ratio.
 *
 * Each size runs `--runs` times on an emptied table (the first run of each size warm-up, not
 * counted); CPU of the bench process and of PostgreSQL's backends is recorded per timer.
 *
 *   npx tsx bench/schedule-many.ts [--backend=postgres|pglite|both] [--sizes=5000,50000] [--runs=5] [--quiet=20]
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { PGlite } from '@electric-sql/pglite';
import { createChronos, type Chronos, type TimerSpec } from '../src/library.js';
import { LiteDb } from '../src/store/db.js';
import {
  backendCpu,
  backendCpuSince,
  backendsFromArgs,
  createBench,
  log,
  numberArg,
  percentile,
  waitForQuiet,
  writeResult,
  type BenchDatabase,
  type Load,
} from './support.js';

interface Run {
  load: Load;
  size: number;
  method: 'scheduleMany' | 'schedule';
  ms: number;
  timersPerSecond: number;
  clientCpuUsPerTimer: number;
  postgresCpuUsPerTimer: number | null;
}

const wipe = 'TRUNCATE chronos.alarms, chronos.wakes, chronos.wake_attempts';

function specs(size: number, round: number): TimerSpec[] {
  const at = new Date(Date.now() + 3_600_000);
  return Array.from({ length: size }, (_, i) => ({
    key: `bulk:${round}:${i}`,
    at: new Date(at.getTime() + i),
    payload: { order: i, note: 'expire the cart' },
  }));
}

/** Runs `fn` inside the caller's own transaction, on PostgreSQL or PGlite. */
async function inTransaction<T>(
  bench: BenchDatabase,
  pool: pg.Pool | null,
  fn: (tx: unknown) => Promise<T>,
): Promise<T> {
  if (pool) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } finally {
      client.release();
    }
  }
  return ((bench.db as LiteDb).lite as PGlite).transaction((tx) => fn(tx));
}

async function measure(
  bench: BenchDatabase,
  chronos: Chronos,
  pool: pg.Pool | null,
  size: number,
  method: Run['method'],
  round: number,
): Promise<Run> {
  await bench.db.exec(wipe);
  const load = await waitForQuiet();
  const batch = specs(size, round);
  const pgBefore = bench.url ? await backendCpu(bench.url) : null;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await inTransaction(bench, pool, async (tx) => {
    if (method === 'scheduleMany') await chronos.scheduleMany(tx, batch);
    else for (const spec of batch) await chronos.schedule(tx, spec);
  });
  const ms = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const pgCpuMs = pgBefore && bench.url ? await backendCpuSince(bench.url, pgBefore) : null;
  return {
    load,
    size,
    method,
    ms: Math.round(ms * 10) / 10,
    timersPerSecond: Math.round((size / ms) * 1000),
    clientCpuUsPerTimer: Math.round(((cpu.user + cpu.system) / size) * 10) / 10,
    postgresCpuUsPerTimer: pgCpuMs === null ? null : Math.round(((pgCpuMs * 1000) / size) * 10) / 10,
  };
}

const sizes = (process.argv.find((a) => a.startsWith('--sizes='))?.slice(8) ?? '5000,50000')
  .split(',')
  .map(Number);
const runs = numberArg('runs', 5);

for (const kind of backendsFromArgs()) {
  const bench = await createBench(kind, 'schedule_many');
  const pool = bench.url ? new pg.Pool({ connectionString: bench.url, max: 2 }) : null;
  const chronos = pool
    ? await createChronos({ pool })
    : await createChronos({ pglite: (bench.db as LiteDb).lite as PGlite });
  const results: Run[] = [];
  try {
    let round = 0;
    for (const size of sizes) {
      await measure(bench, chronos, pool, size, 'scheduleMany', round++); // warm-up
      for (let i = 0; i < runs; i++) {
        const run = await measure(bench, chronos, pool, size, 'scheduleMany', round++);
        results.push(run);
        log(
          `${kind} scheduleMany ${size}: ${run.ms} ms = ${run.timersPerSecond}/s (client ${run.clientCpuUsPerTimer} µs, pg ${run.postgresCpuUsPerTimer ?? '-'} µs a timer)`,
        );
      }
    }
    const small = Math.min(...sizes);
    for (let i = 0; i < Math.min(runs, 3); i++) {
      const run = await measure(bench, chronos, pool, small, 'schedule', round++);
      results.push(run);
      log(`${kind} schedule() one by one ${small}: ${run.ms} ms = ${run.timersPerSecond}/s`);
    }
    const summary = [...new Set(results.map((r) => `${r.method} ${r.size}`))].map((name) => {
      const rs = results.filter((r) => `${r.method} ${r.size}` === name);
      return {
        name,
        medianTimersPerSecond: percentile(
          rs.map((r) => r.timersPerSecond),
          50,
        ),
        best: Math.max(...rs.map((r) => r.timersPerSecond)),
      };
    });
    for (const s of summary) log(`${kind} ${s.name}: median ${s.medianTimersPerSecond}/s, best ${s.best}/s`);
    await writeResult(`schedule-many-${kind}`, { sizes, runs, summary, results });
  } finally {
    await chronos.close();
    await pool?.end();
    await bench.drop();
  }
}
