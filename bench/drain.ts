/**
 * Drain: 5,000 alarms all due now; how long one worker takes until every one is delivered and
 * recorded (`status = 'fired'`). Target (PostgreSQL): ≥ 20,000 fires/s, i.e. ≤ 250 ms.
 *
 * The worker is the library's `work(handler)` (in-process handler that counts), started after
 * the alarms are in. Timed from the `work()` call — so it includes opening the LISTEN connection —
 * to the moment the database shows all 5,000 `fired`; the handler's last call is reported too.
 * The pool is warm (one untimed drain first), as in a running service. Each configuration of
 * batch size and concurrency runs `--runs` times; the table reports the median and the best.
 * CPU per fire is recorded too — the worker process's, and (PostgreSQL on this machine) its
 * backends' — since on a shared machine it varies far less than wall time.
 *
 *   npx tsx bench/drain.ts [--backend=postgres|pglite|both] [--count=5000] [--runs=5] [--grid=200x400,...]
 *     [--claim=lease|transaction|both]
 *
 * `--claim=both` runs every configuration with leased claims and with claims held in a
 * transaction (`work({ claim: 'transaction' })`), interleaved run by run.
 *
 * `--pgbouncer` (PostgreSQL only; issue 16) measures instead what a transaction pooler costs:
 * three library instances on one database — direct with named statements (the default), direct
 * with unnamed ones (`pooler: 'transaction'`), and through a real PgBouncer in transaction mode
 * (Debian's, test/scenarios/support/pgbouncer.ts, 20 server connections) with unnamed statements
 * and LISTEN on the direct URL — drained in turn, run after run, so the machine's drift falls on
 * all three alike. PgBouncer's own CPU is counted too. Result: bench/results/drain-pgbouncer.json.
 */
import { performance } from 'node:perf_hooks';
import { createChronos, type Chronos, type WorkOptions } from '../packages/chronos-timers/src/library.js';
import type { ClaimMode } from '../packages/chronos-timers/src/index.js';
import { LiteDb, sql } from '../packages/chronos-timers/src/store/driver/db.js';
import { PgBouncer } from '../test/scenarios/support/pgbouncer.js';
import {
  backendsFromArgs,
  createBench,
  loadDueAlarms,
  log,
  numberArg,
  percentile,
  sleep,
  backendCpu,
  backendCpuSince,
  processCpuMs,
  writeResult,
  waitForQuiet,
  type BenchDatabase,
  type Load,
} from './support.js';

interface Run {
  /** The machine's load when this run began. */
  load: Load;
  /** From work() to the handler's last call. */
  deliveredMs: number;
  /** From work() to all rows `fired`. */
  recordedMs: number;
  /** From the handler's first call to all rows `fired`. */
  afterFirstFireMs: number;
  firesPerSecond: number;
  /** CPU per fire in this (the worker's) process, µs. */
  workerCpuUsPerFire: number;
  /** CPU per fire in the database's backends, µs (PostgreSQL on this machine only). */
  postgresCpuUsPerFire: number | null;
}

const counts = sql(
  'bench_drain_counts',
  `SELECT count(*) FILTER (WHERE status = 'fired')::int AS fired, count(*)::int AS total FROM chronos.alarms`,
);
const wipe = `TRUNCATE chronos.alarms, chronos.wakes, chronos.wake_attempts`;

async function openChronos(bench: BenchDatabase): Promise<Chronos> {
  return bench.kind === 'postgres'
    ? createChronos({ databaseUrl: bench.url! })
    : createChronos({ pglite: (bench.db as LiteDb).lite });
}

async function drainOnce(
  bench: BenchDatabase,
  chronos: Chronos,
  count: number,
  options: WorkOptions,
): Promise<Run> {
  await bench.db.exec(wipe);
  await loadDueAlarms(bench.db, count, 'drain-');
  const load = await waitForQuiet();
  const seen = new Set<string>();
  let duplicates = 0;
  let firstAt = 0;
  let lastAt = 0;
  let allSeen: () => void = () => {};
  const delivered = new Promise<void>((resolve) => (allSeen = resolve));
  const pgBefore = bench.url ? await backendCpu(bench.url) : null;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const worker = chronos.work((fire) => {
    const now = performance.now();
    if (seen.size === 0) firstAt = now;
    if (seen.has(fire.key)) duplicates++;
    seen.add(fire.key);
    if (seen.size === count) {
      lastAt = now;
      allSeen();
    }
  }, options);
  let recordedAt: number;
  try {
    await delivered;
    for (;;) {
      const [row] = await bench.db.query<{ fired: number; total: number }>(counts);
      if (row!.fired === count) {
        recordedAt = performance.now();
        break;
      }
      await sleep(1);
    }
  } finally {
    await worker.stop();
  }
  const cpu = process.cpuUsage(cpuBefore);
  const pgCpuMs = bench.url ? await backendCpuSince(bench.url, pgBefore) : null;
  if (duplicates > 0) throw new Error(`drain: ${duplicates} alarms were delivered twice in a clean run`);
  const recordedMs = recordedAt - started;
  return {
    load,
    deliveredMs: round(lastAt - started),
    recordedMs: round(recordedMs),
    afterFirstFireMs: round(recordedAt - firstAt),
    firesPerSecond: Math.round((count / recordedMs) * 1000),
    workerCpuUsPerFire: Math.round((cpu.user + cpu.system) / count),
    postgresCpuUsPerFire: pgCpuMs === null ? null : Math.round((pgCpuMs * 1000) / count),
  };
}

const round = (x: number) => Math.round(x * 10) / 10;

interface Config extends WorkOptions {
  label: string;
}

/** `--grid=200x400,500x1000`: batch size × concurrency pairs to run instead of the standard grid. */
function gridArg(argv = process.argv.slice(2)): [number, number][] | null {
  const raw = argv.find((a) => a.startsWith('--grid='))?.slice('--grid='.length);
  if (raw === undefined) return null;
  return raw.split(',').map((pair) => {
    const [batch, concurrency] = pair.split('x').map(Number);
    if (!Number.isInteger(batch) || !Number.isInteger(concurrency) || batch! < 1 || concurrency! < 1) {
      throw new Error(`--grid: expected pairs like 200x400, got ${JSON.stringify(pair)}`);
    }
    return [batch!, concurrency!];
  });
}

function configsFor(kind: BenchDatabase['kind']): Config[] {
  const defaults: Config = {
    label:
      kind === 'postgres' ? 'default (batch 200, concurrency 200)' : 'default (batch 100, concurrency 200)',
  };
  const grid: [number, number][] =
    gridArg() ??
    (kind === 'postgres'
      ? [
          [100, 200],
          [500, 500],
          [1000, 1000],
          [2500, 2500],
        ]
      : [
          [200, 200],
          [1000, 1000],
          [5000, 5000],
        ]);
  const configs: Config[] = [
    defaults,
    ...grid.map(([batchSize, concurrency]) => ({
      label: `batch ${batchSize}, concurrency ${concurrency}`,
      batchSize,
      concurrency,
    })),
  ];
  // `--claim=transaction` (or `both`, each configuration with either, interleaved run by run).
  const claims = claimArg();
  return configs.flatMap((config) =>
    claims.map((claim) =>
      claim === 'lease' ? config : { ...config, label: `${config.label}, claim in a transaction`, claim },
    ),
  );
}

/** `--claim=lease|transaction|both`: how the worker holds its claims (WorkOptions.claim). */
function claimArg(argv = process.argv.slice(2)): ClaimMode[] {
  const raw = argv.find((a) => a.startsWith('--claim='))?.slice('--claim='.length) ?? 'lease';
  if (raw === 'both') return ['lease', 'transaction'];
  if (raw === 'lease' || raw === 'transaction') return [raw];
  throw new Error(`--claim: expected lease, transaction or both, got ${JSON.stringify(raw)}`);
}

async function runBackend(kind: BenchDatabase['kind'], count: number, runs: number) {
  const bench = await createBench(kind, 'drain');
  const chronos = await openChronos(bench);
  const results = [];
  try {
    await drainOnce(bench, chronos, Math.min(count, 1_000), {});
    // Run by run, every configuration in turn: drift in the machine's load falls on all alike.
    const configs = configsFor(kind);
    const byConfig = configs.map(() => [] as Run[]);
    for (let i = 0; i < runs; i++) {
      for (const [c, { label: _label, ...options }] of configs.entries()) {
        byConfig[c]!.push(await drainOnce(bench, chronos, count, options));
      }
    }
    for (const [c, config] of configs.entries()) {
      const { label, ...options } = config;
      const all = byConfig[c]!;
      const recorded = all.map((r) => r.recordedMs);
      const median = percentile(recorded, 50);
      const best = Math.min(...recorded);
      const medianOf = (xs: number[]) => percentile(xs, 50);
      const workerCpu = medianOf(all.map((r) => r.workerCpuUsPerFire));
      const pgCpu = all.every((r) => r.postgresCpuUsPerFire !== null)
        ? medianOf(all.map((r) => r.postgresCpuUsPerFire!))
        : null;
      results.push({
        config: label,
        options,
        count,
        medianMs: median,
        bestMs: best,
        cpuUsPerFire: { worker: workerCpu, postgres: pgCpu },
        runs: all,
      });
      log(
        `${kind}: ${label}: median ${median} ms (${Math.round((count / median) * 1000)} fires/s), ` +
          `best ${best} ms; runs ${recorded.join(', ')}; CPU per fire: worker ${workerCpu} µs` +
          (pgCpu === null ? '' : `, PostgreSQL ${pgCpu} µs`),
      );
    }
  } finally {
    await chronos.close();
    await bench.drop();
  }
  return { backend: kind, count, runsPerConfig: runs, results };
}

/** Direct (named, then unnamed statements) against through PgBouncer, interleaved run by run. */
async function runPgBouncer(count: number, runs: number) {
  const bench = await createBench('postgres', 'drain_pgbouncer');
  const url = new URL(bench.url!);
  const bouncer = await PgBouncer.start({
    serverHost: url.hostname,
    serverPort: Number(url.port || 5432),
    users: [decodeURIComponent(url.username)],
    poolSize: 20,
  });
  const direct = bench.url!;
  const variants = [
    { label: 'direct, named statements (default)', chronos: await createChronos({ databaseUrl: direct }) },
    {
      label: 'direct, unnamed statements (pooler: transaction)',
      chronos: await createChronos({ databaseUrl: direct, pooler: 'transaction', listenUrl: direct }),
    },
    {
      label: 'PgBouncer 1.18, transaction mode (pooler: transaction, LISTEN direct)',
      chronos: await createChronos({
        databaseUrl: bouncer.url(url.pathname.slice(1)),
        pooler: 'transaction',
        listenUrl: direct,
      }),
    },
  ];
  const results = [];
  try {
    const configs: Config[] = [
      { label: 'default (batch 200, concurrency 200)' },
      { label: 'batch 500, concurrency 500', batchSize: 500, concurrency: 500 },
    ];
    for (const variant of variants) await drainOnce(bench, variant.chronos, Math.min(count, 1_000), {});
    for (const { label: config, ...options } of configs) {
      const all = new Map(variants.map((v) => [v.label, [] as (Run & { pgbouncerCpuUsPerFire: number })[]]));
      for (let i = 0; i < runs; i++) {
        for (const variant of variants) {
          const bouncerBefore = processCpuMs(bouncer.pid!) ?? 0;
          const run = await drainOnce(bench, variant.chronos, count, options);
          const bouncerMs = (processCpuMs(bouncer.pid!) ?? 0) - bouncerBefore;
          all
            .get(variant.label)!
            .push({ ...run, pgbouncerCpuUsPerFire: Math.round((bouncerMs * 1000) / count) });
        }
      }
      for (const [variant, list] of all) {
        const medianOf = (xs: number[]) => percentile(xs, 50);
        const medianMs = medianOf(list.map((r) => r.recordedMs));
        const summary = {
          config,
          variant,
          options,
          count,
          medianMs,
          firesPerSecond: Math.round((count / medianMs) * 1000),
          bestMs: Math.min(...list.map((r) => r.recordedMs)),
          cpuUsPerFire: {
            worker: medianOf(list.map((r) => r.workerCpuUsPerFire)),
            postgres: medianOf(list.map((r) => r.postgresCpuUsPerFire ?? Number.NaN)),
            pgbouncer: medianOf(list.map((r) => r.pgbouncerCpuUsPerFire)),
          },
          runs: list,
        };
        results.push(summary);
        log(
          `${config} / ${variant}: median ${medianMs} ms (${summary.firesPerSecond} fires/s); runs ` +
            `${list.map((r) => r.recordedMs).join(', ')}; CPU per fire ${JSON.stringify(summary.cpuUsPerFire)} µs`,
        );
      }
    }
  } finally {
    for (const variant of variants) await variant.chronos.close();
    await bouncer.stop();
    await bench.drop();
  }
  return {
    backend: 'postgres',
    command: `npx tsx bench/drain.ts ${process.argv.slice(2).join(' ')}`,
    count,
    runsPerVariant: runs,
    pgbouncer: { version: '1.18 (Debian 12)', poolMode: 'transaction', defaultPoolSize: 20 },
    results,
  };
}

const count = numberArg('count', 5_000);
const runs = numberArg('runs', 5);
if (process.argv.includes('--pgbouncer')) {
  const path = await writeResult('drain-pgbouncer', await runPgBouncer(count, runs));
  log(`wrote ${path}`);
} else {
  for (const kind of backendsFromArgs()) {
    const path = await writeResult(`drain-${kind}`, await runBackend(kind, count, runs));
    log(`wrote ${path}`);
  }
}
