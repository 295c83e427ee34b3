/**
 * Memory: the worker's RSS after GC with 1M alarms waiting vs 1k waiting. Target (PostgreSQL):
 * equal within ± 20 MB — nothing in the worker grows with the number of waiting alarms.
 *
 * The worker is its own process (`node --expose-gc`, this file with `--worker`), started fresh
 * for each measurement: the library's `work()` with an in-process handler, defaults otherwise.
 * Besides the waiting alarms, 1,000 alarms fall due over its first 8 s, so it works rather than
 * only sleeps. When they are all fired it idles 2 s, runs the GC twice and reports
 * `process.memoryUsage()`; peak RSS comes from `process.resourceUsage()`.
 *
 * On PGlite the database lives inside the worker, so its RSS includes PostgreSQL's own memory
 * (WASM heap, buffer pool); the parent loads the store, closes it, and the worker opens it.
 *
 *   npx tsx bench/memory.ts [--backend=postgres|pglite|both] [--runs=3] [--large=1000000]
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { createChronos } from '../packages/chronos-timers/src/library.js';
import { sql } from '../packages/chronos-timers/src/store/driver/db.js';
import {
  backendsFromArgs,
  deadline,
  createBench,
  loadWaitingAlarms,
  log,
  numberArg,
  OWNER,
  sleep,
  storeOf,
  USER_ID,
  writeResult,
  waitForQuiet,
  type BenchDatabase,
  type Load,
} from './support.js';

const ACTIVE = 1_000;
const ACTIVE_SPREAD_MS = 8_000;
const MB = 2 ** 20;

interface WorkerReport {
  /** The machine's load when this worker started (set by the parent). */
  load?: Load;
  rssMB: number;
  heapUsedMB: number;
  heapTotalMB: number;
  externalMB: number;
  arrayBuffersMB: number;
  maxRssMB: number;
  fired: number;
  seconds: number;
}

// The worker's share of work: `$1` alarms due over the `$2` ms after `$3` seconds from now.
const loadActive = sql(
  'bench_memory_active',
  `INSERT INTO chronos.alarms (owner_did, user_id, kind, fire_at, next_fire_at, scheduled_for, idempotency_key, source,
     queue)
   SELECT '${OWNER}', '${USER_ID}', 'once', t, t, t, 'active-' || i, 'library', 'default'
   FROM (SELECT i, now() + $3::int * interval '1 second' + random() * $2::int * interval '1 millisecond' AS t
         FROM generate_series(1, $1::int) AS i) AS due`,
);
const fired = sql(
  'bench_memory_fired',
  `SELECT count(*)::int AS n FROM chronos.alarms WHERE status = 'fired'`,
);

/** The worker process: fire the active alarms, then report memory after GC. */
async function worker(target: string): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('memory worker: run with node --expose-gc');
  const started = performance.now();
  const chronos = await createChronos(
    target.startsWith('postgres') ? { databaseUrl: target } : { dataDir: target },
  );
  const store = storeOf(chronos, target.startsWith('postgres') ? target : null);
  let count = 0;
  let all: () => void = () => {};
  const done = new Promise<void>((resolve) => (all = resolve));
  const w = chronos.work(() => {
    if (++count === ACTIVE) all();
  });
  await Promise.race([done, deadline(ACTIVE_SPREAD_MS + 60_000)]);
  for (let i = 0; i < 400; i++) {
    const [row] = await store.query<{ n: number }>(fired);
    if (row!.n >= ACTIVE) break;
    await sleep(10);
  }
  // Idle a while: the dispatcher sleeps, polls, and must hold nothing about the waiting alarms.
  await sleep(2_000);
  gc();
  await sleep(100);
  gc();
  const m = process.memoryUsage();
  const report: WorkerReport = {
    rssMB: m.rss / MB,
    heapUsedMB: m.heapUsed / MB,
    heapTotalMB: m.heapTotal / MB,
    externalMB: m.external / MB,
    arrayBuffersMB: m.arrayBuffers / MB,
    maxRssMB: process.resourceUsage().maxRSS / 1024,
    fired: count,
    seconds: (performance.now() - started) / 1000,
  };
  await w.stop();
  if (!chronos.pglite) await store.close();
  await chronos.close();
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

function runWorker(target: string): Promise<WorkerReport> {
  const self = fileURLToPath(import.meta.url);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', self, `--worker=${target}`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`memory worker exited with ${code}`));
      resolve(JSON.parse(out.trim().split('\n').pop()!) as WorkerReport);
    });
  });
}

async function measure(bench: BenchDatabase, runs: number): Promise<WorkerReport[]> {
  const reports: WorkerReport[] = [];
  for (let i = 0; i < runs; i++) {
    await bench.db.exec(
      `DELETE FROM chronos.wake_attempts; DELETE FROM chronos.wakes; DELETE FROM chronos.alarms WHERE idempotency_key LIKE 'active-%'`,
    );
    // Due 3 s from now: the worker process takes a moment to start.
    await bench.db.query(loadActive, [ACTIVE, ACTIVE_SPREAD_MS, 3]);
    let target = bench.url!;
    if (bench.kind === 'pglite') {
      await bench.db.close();
      target = bench.dataDir!;
    }
    const load = await waitForQuiet();
    reports.push({ load, ...(await runWorker(target)) });
    if (bench.kind === 'pglite') await reopen(bench);
  }
  return reports;
}

/** PGlite: the worker held the store; open it again in this process. */
async function reopen(bench: BenchDatabase): Promise<void> {
  const { openEmbedded } = await import('../packages/chronos-timers/src/store/driver/embedded.js');
  bench.db = await openEmbedded(bench.dataDir!);
}

async function runBackend(kind: BenchDatabase['kind'], runs: number, large: number) {
  const results: Record<string, WorkerReport[]> = {};
  for (const waiting of [1_000, large]) {
    const bench = await createBench(kind, 'memory');
    try {
      const started = performance.now();
      await loadWaitingAlarms(bench.db, waiting);
      await bench.db.exec('ANALYZE');
      log(`${kind}: ${waiting} waiting loaded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      results[waiting] = await measure(bench, runs);
      for (const r of results[waiting]) {
        log(
          `${kind}: ${waiting} waiting: RSS ${r.rssMB.toFixed(1)} MB after GC (heap ${r.heapUsedMB.toFixed(1)} MB, ` +
            `peak RSS ${r.maxRssMB.toFixed(1)} MB), fired ${r.fired}`,
        );
      }
    } finally {
      await bench.drop();
    }
  }
  const median = (rs: WorkerReport[]) =>
    [...rs.map((r) => r.rssMB)].sort((a, b) => a - b)[Math.floor(rs.length / 2)]!;
  const small = median(results[1_000]!);
  const big = median(results[large]!);
  return {
    backend: kind,
    activeAlarms: ACTIVE,
    small: 1_000,
    large,
    rssSmallMB: Math.round(small * 10) / 10,
    rssLargeMB: Math.round(big * 10) / 10,
    differenceMB: Math.round((big - small) * 10) / 10,
    pass: Math.abs(big - small) <= 20,
    reports: results,
  };
}

const workerArg = process.argv.find((a) => a.startsWith('--worker='));
if (workerArg) {
  await worker(workerArg.slice('--worker='.length));
} else {
  const runs = numberArg('runs', 3);
  for (const kind of backendsFromArgs()) {
    const large = numberArg('large', 1_000_000);
    const result = await runBackend(kind, runs, large);
    log(
      `${kind}: RSS ${result.rssSmallMB} MB (1k) vs ${result.rssLargeMB} MB (${large}): Δ ${result.differenceMB} MB`,
    );
    const path = await writeResult(`memory-${kind}`, result);
    log(`wrote ${path}`);
  }
}
