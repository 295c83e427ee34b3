/**
 * The workloads of the comparison, each run against one system (`Peer`) on a fresh database, in
 * a process of its own (`bench/compare.ts` starts one per workload, system, settings and run).
 *
 * - `drain5k`, `drain50k`: N timers due now, loaded in bulk; then the worker starts; fires/s =
 *   N ÷ (worker start → last handler call). One untimed drain of 1,000 first warms the process
 *   and its pool. A drain that has fired under 1 % after `stallMs`, or is not done by `capMs`,
 *   is stopped and reported as the rate so far, marked capped.
 * - `bulk5k`, `bulk50k`: N timers (due an hour ahead) in ONE transaction: BEGIN → scheduleMany →
 *   COMMIT; timers/s.
 * - `pertx16`: N timers, each in its own transaction (BEGIN, scheduleOne, COMMIT), from 16
 *   callers at once, each on its own connection; timers/s.
 * - `lateness-bulk`: 1,000 timers due at random instants over 10 s (the first 2 s ahead), written
 *   in one transaction before the worker starts. `lateness-live`: the worker runs first and each
 *   timer is written in its own transaction 20 ms to 3 s before it is due. Lateness = handler
 *   start − due (wall clock, whole ms); early = a handler that started before its due time.
 * - `claim`: one due timer among N waiting (10k, 100k, 400k, 1M), the worker running: each
 *   iteration writes one timer due now and times the system's own claim statement that returns
 *   it (matched by text at the driver, `statement-timer.ts`), and the pick-up (commit → handler).
 *   200 iterations per depth after a warm-up, or fewer (at least 20) when they take over 30 s.
 * - `rss`: the worker alone in a process (`rss-worker.ts`) with 100k waiting: RSS after 3 s idle
 *   (after GC), then its peak while it drains 5,000 timers due now, loaded in bulk (stopped like
 *   a drain when it stalls or reaches the cap). That
 *   process runs compiled JavaScript on plain `node` (`buildRssWorker()`, into `.tmp/`), as a
 *   deployed worker would: under tsx every TypeScript module Chronos loads is transpiled in
 *   memory (the peers ship JavaScript), which added some 40 MB to Chronos's RSS alone.
 *
 * Every bulk load is followed by ANALYZE: autovacuum is off on the benchmark server, and in
 * steady use it would have analysed tables this size (all three systems' docs assume it runs).
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import {
  backendCpu,
  backendCpuSince,
  deadline,
  log,
  machineLoad,
  percentile,
  sleep,
  summarize,
  type Load,
  type Summary,
} from '../support.js';
import {
  inTransaction,
  installPeers,
  timersFrom,
  type Peer,
  type SettingsName,
  type SystemName,
  type Timer,
} from './peer.js';
import { timeStatements, type TimedStatement } from './statement-timer.js';

export const WORKLOADS = [
  'drain5k',
  'drain50k',
  'bulk5k',
  'bulk50k',
  'pertx16',
  'lateness-bulk',
  'lateness-live',
  'claim',
  'rss',
] as const;
export type WorkloadName = (typeof WORKLOADS)[number];

/** Workloads whose figure does not depend on the worker's settings: run once per system, at the defaults. */
export const SETTINGS_FREE: readonly WorkloadName[] = ['bulk5k', 'bulk50k', 'pertx16'];

export type SizeName = 'full' | 'small';

export interface Sizes {
  drain5k: number;
  drain50k: number;
  bulk5k: number;
  bulk50k: number;
  pertxTotal: number;
  pertxCallers: number;
  latenessCount: number;
  latenessSpreadMs: number;
  /** How long after the last due time a lateness run waits for stragglers. */
  latenessGraceMs: number;
  claimDepths: number[];
  claimIterations: number;
  /** A depth stops sampling after this long (with at least 20 samples): claims that scan take long. */
  claimBudgetMs: number;
  rssWaiting: number;
  rssDrain: number;
  /** How long the worker idles before its RSS is read. */
  rssIdleMs: number;
  /** A drain stops here, finished or not. */
  drainCapMs: number;
  /** A drain that has fired under 1 % by now is stopped. */
  drainStallMs: number;
}

export const SIZES: Record<SizeName, Sizes> = {
  full: {
    drain5k: 5_000,
    drain50k: 50_000,
    bulk5k: 5_000,
    bulk50k: 50_000,
    pertxTotal: 5_000,
    pertxCallers: 16,
    latenessCount: 1_000,
    latenessSpreadMs: 10_000,
    latenessGraceMs: 10_000,
    claimDepths: [10_000, 100_000, 400_000, 1_000_000],
    claimIterations: 200,
    claimBudgetMs: 30_000,
    rssWaiting: 100_000,
    rssDrain: 5_000,
    rssIdleMs: 3_000,
    drainCapMs: 120_000,
    drainStallMs: 8_000,
  },
  small: {
    drain5k: 1_000,
    drain50k: 5_000,
    bulk5k: 1_000,
    bulk50k: 5_000,
    pertxTotal: 1_000,
    pertxCallers: 16,
    latenessCount: 200,
    latenessSpreadMs: 2_000,
    latenessGraceMs: 1_000,
    claimDepths: [10_000, 100_000],
    claimIterations: 30,
    claimBudgetMs: 10_000,
    rssWaiting: 10_000,
    rssDrain: 1_000,
    rssIdleMs: 1_000,
    drainCapMs: 10_000,
    drainStallMs: 2_000,
  },
};

/** One number of a workload, with what the table needs to show it. */
export interface Figure {
  /** The row: a workload, or a workload and a part of it (`claim@1000000`, `rss-idle`). */
  metric: string;
  label: string;
  value: number;
  unit: '/s' | 'ms' | 'MB';
  better: 'higher' | 'lower';
  /** The true value is at least `value` (timers that had not fired when the run ended). */
  atLeast?: boolean;
  /** The run was stopped before it finished; `value` is what it did meanwhile. */
  capped?: string;
  /** Further numbers shown beside the value (lateness: p50 and early). */
  extra?: Record<string, number>;
}

export interface WorkloadOutput {
  figures: Figure[];
  detail: Record<string, unknown>;
}

export interface WorkloadContext {
  peer: Peer;
  url: string;
  sizes: Sizes;
  system: SystemName;
  settings: SettingsName;
}

const nowMs = () => Date.now();
const round = (x: number, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;
const perSecond = (count: number, ms: number, digits = 0) => round((count / ms) * 1000, digits);

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** ANALYZE the whole (fresh, one-system) database: what autovacuum would have done. */
async function analyze(url: string): Promise<void> {
  await withClient(url, (c) => c.query('ANALYZE'));
}

async function inOneTransaction(client: pg.ClientBase, fn: () => Promise<void>): Promise<void> {
  await client.query('BEGIN');
  try {
    await fn();
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// Drain

interface DrainRun {
  /** The machine's load as the worker started. */
  load: Load;
  count: number;
  fired: number;
  duplicates: number;
  /** Worker start → last handler call (or → the cap). */
  elapsedMs: number;
  startupMs: number;
  firstToLastMs: number;
  capped: string | null;
  workerCpuUsPerFire: number;
  postgresCpuUsPerFire: number | null;
}

async function drainOnce(ctx: WorkloadContext, count: number, keyPrefix: string): Promise<DrainRun> {
  const { peer, sizes } = ctx;
  await peer.loadDue(count, keyPrefix);
  await analyze(ctx.url);
  const seen = new Set<string>();
  let duplicates = 0;
  let firstAt = 0;
  let lastAt = 0;
  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => (done = resolve));
  const pgBefore = await backendCpu(ctx.url);
  const load = machineLoad();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const worker = await peer.startWorker((key) => {
    const now = performance.now();
    if (seen.size === 0) firstAt = now;
    if (seen.has(key)) duplicates++;
    seen.add(key);
    lastAt = now;
    if (seen.size === count) done();
  });
  const stalled = deadline(sizes.drainStallMs).then(() =>
    seen.size < count / 100 ? ('stalled' as const) : new Promise<never>(() => {}),
  );
  const outcome = await Promise.race([
    finished.then(() => 'done' as const),
    stalled,
    deadline(sizes.drainCapMs).then(() => 'cap' as const),
  ]);
  const endedAt = performance.now();
  const fired = seen.size;
  await worker.stop();
  const cpu = process.cpuUsage(cpuBefore);
  const pgCpuMs = await backendCpuSince(ctx.url, pgBefore);
  const complete = outcome === 'done';
  const elapsedMs = complete ? lastAt - started : endedAt - started;
  if (!complete) await peer.purge();
  return {
    load,
    count,
    fired,
    duplicates,
    elapsedMs: round(elapsedMs, 1),
    startupMs: round(firstAt ? firstAt - started : Number.NaN, 1),
    firstToLastMs: round(firstAt ? lastAt - firstAt : Number.NaN, 1),
    capped: complete
      ? null
      : `${fired.toLocaleString('en')} of ${count.toLocaleString('en')} fired in ${round(elapsedMs / 1000, 1)} s`,
    workerCpuUsPerFire: fired ? Math.round((cpu.user + cpu.system) / fired) : Number.NaN,
    postgresCpuUsPerFire: pgCpuMs === null || !fired ? null : Math.round((pgCpuMs * 1000) / fired),
  };
}

async function drain(ctx: WorkloadContext, which: 'drain5k' | 'drain50k'): Promise<WorkloadOutput> {
  const count = ctx.sizes[which];
  const warm = await drainOnce(ctx, Math.min(1_000, count), 'warm-');
  const run = await drainOnce(ctx, count, 'drain-');
  if (run.duplicates > 0) throw new Error(`${which}: ${run.duplicates} timers fired twice in a clean run`);
  return {
    figures: [
      {
        metric: which,
        label: `drain ${count.toLocaleString('en')} due`,
        value: perSecond(run.fired, run.elapsedMs, run.capped ? 2 : 0),
        unit: '/s',
        better: 'higher',
        ...(run.capped ? { capped: run.capped } : {}),
      },
    ],
    detail: { warmUp: warm, run },
  };
}

// ---------------------------------------------------------------------------------------------
// Scheduling

async function bulk(ctx: WorkloadContext, which: 'bulk5k' | 'bulk50k'): Promise<WorkloadOutput> {
  const count = ctx.sizes[which];
  const base = nowMs() + 3_600_000;
  return withClient(ctx.url, async (client) => {
    // Untimed: a first transaction warms the connection, the statements and the code path.
    await inOneTransaction(client, () => ctx.peer.scheduleMany(client, timersFrom(100, 'warm-', base, 1)));
    const timers = timersFrom(count, 'bulk-', base, 1);
    const load = machineLoad();
    const started = performance.now();
    await inOneTransaction(client, () => ctx.peer.scheduleMany(client, timers));
    const ms = performance.now() - started;
    const waiting = await ctx.peer.countWaiting();
    if (waiting !== count + 100)
      throw new Error(`${which}: expected ${count + 100} timers waiting, found ${waiting}`);
    return {
      figures: [
        {
          metric: which,
          label: `schedule ${count.toLocaleString('en')} in one transaction`,
          value: perSecond(count, ms),
          unit: '/s',
          better: 'higher',
        },
      ],
      detail: { loadAtMeasurement: load, count, ms: round(ms, 1) },
    };
  });
}

async function perTransaction(ctx: WorkloadContext): Promise<WorkloadOutput> {
  const { pertxTotal: total, pertxCallers: callers } = ctx.sizes;
  const clients = await Promise.all(
    Array.from({ length: callers }, async () => {
      const c = new pg.Client({ connectionString: ctx.url });
      await c.connect();
      return c;
    }),
  );
  try {
    const base = nowMs() + 3_600_000;
    // Untimed: three transactions per caller.
    await Promise.all(
      clients.map(async (c, ci) => {
        for (let i = 0; i < 3; i++) {
          const timer = { key: `warm-${ci}-${i}`, dueAtMs: base + i };
          await inOneTransaction(c, () => ctx.peer.scheduleOne(c, timer));
        }
      }),
    );
    const latencies: number[] = [];
    const load = machineLoad();
    const started = performance.now();
    await Promise.all(
      clients.map(async (c, ci) => {
        for (let i = ci; i < total; i += callers) {
          const timer = { key: `tx-${i}`, dueAtMs: base + i };
          const t0 = performance.now();
          await inOneTransaction(c, () => ctx.peer.scheduleOne(c, timer));
          latencies.push(performance.now() - t0);
        }
      }),
    );
    const ms = performance.now() - started;
    const waiting = await ctx.peer.countWaiting();
    if (waiting !== total + 3 * callers) {
      throw new Error(`pertx16: expected ${total + 3 * callers} timers waiting, found ${waiting}`);
    }
    return {
      figures: [
        {
          metric: 'pertx16',
          label: `schedule ${total.toLocaleString('en')}, one per transaction, ${callers} callers`,
          value: perSecond(total, ms),
          unit: '/s',
          better: 'higher',
        },
      ],
      detail: {
        loadAtMeasurement: load,
        total,
        callers,
        ms: round(ms, 1),
        transactionMs: summarize(latencies),
      },
    };
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
}

// ---------------------------------------------------------------------------------------------
// Lateness

async function lateness(ctx: WorkloadContext, variant: 'bulk' | 'live'): Promise<WorkloadOutput> {
  const { peer, sizes } = ctx;
  const count = sizes.latenessCount;
  const spreadMs = sizes.latenessSpreadMs;
  const firedAt = new Map<string, number>();
  let duplicates = 0;
  let allFired: () => void = () => {};
  const done = new Promise<void>((resolve) => (allFired = resolve));
  const onFire = (key: string) => {
    const at = nowMs();
    if (firedAt.has(key)) duplicates++;
    else firedAt.set(key, at);
    if (firedAt.size === count) allFired();
  };
  const randomTimers = (startMs: number): Timer[] =>
    Array.from({ length: count }, () => Math.round(startMs + Math.random() * spreadMs))
      .sort((a, b) => a - b)
      .map((dueAtMs, i) => ({ key: `late-${i}`, dueAtMs }));

  let timers: Timer[];
  let createdAfterDue = 0;
  const createErrors: string[] = [];
  let load: Load;
  const pool = new pg.Pool({ connectionString: ctx.url, max: 10 });
  let worker;
  try {
    if (variant === 'bulk') {
      timers = randomTimers(nowMs() + 2_000);
      await withClient(ctx.url, (c) => inOneTransaction(c, () => peer.scheduleMany(c, timers)));
      await analyze(ctx.url);
      load = machineLoad();
      worker = await peer.startWorker(onFire);
    } else {
      load = machineLoad();
      worker = await peer.startWorker(onFire);
      await sleep(500);
      timers = randomTimers(nowMs() + 3_000);
      await Promise.all(
        timers.map((timer) => {
          const leadMs = 20 + Math.random() * 2_980;
          return sleep(Math.max(0, timer.dueAtMs - leadMs - nowMs())).then(() =>
            inTransaction(pool, (tx) => peer.scheduleOne(tx, timer))
              .then(() => {
                if (nowMs() > timer.dueAtMs) createdAfterDue++;
              })
              .catch((error: Error) => void createErrors.push(error.message)),
          );
        }),
      );
    }
    const lastDue = timers.at(-1)!.dueAtMs;
    await Promise.race([done, deadline(Math.max(0, lastDue + sizes.latenessGraceMs - nowMs()))]);
    await worker.stop();
  } finally {
    await pool.end();
  }
  if (createErrors.length > 0) throw new Error(`lateness-${variant}: ${createErrors[0]}`);
  const endedAt = nowMs();
  // A timer that never fired was at least (end − due) late.
  const lateness = timers.map((t) => (firedAt.get(t.key) ?? endedAt) - t.dueAtMs);
  const unfired = count - firedAt.size;
  const early = timers.filter((t) => firedAt.has(t.key) && firedAt.get(t.key)! < t.dueAtMs).length;
  const sorted = [...lateness].sort((a, b) => a - b);
  const censoredFrom =
    unfired > 0
      ? Math.min(...timers.filter((t) => !firedAt.has(t.key)).map((t) => endedAt - t.dueAtMs))
      : Infinity;
  const p = (q: number) => percentile(sorted, q);
  const p99 = p(99);
  return {
    figures: [
      {
        metric: `lateness-${variant}`,
        label:
          variant === 'bulk'
            ? `lateness p99, ${count.toLocaleString('en')} over ${spreadMs / 1000} s, scheduled in bulk`
            : `lateness p99, ${count.toLocaleString('en')} over ${spreadMs / 1000} s, scheduled one by one while running`,
        value: p99,
        unit: 'ms',
        better: 'lower',
        ...(p99 >= censoredFrom ? { atLeast: true } : {}),
        ...(unfired > 0
          ? {
              capped: `${unfired.toLocaleString('en')} of ${count.toLocaleString('en')} not fired ${sizes.latenessGraceMs / 1000} s after the last due time`,
            }
          : {}),
        extra: { p50: p(50), early },
      },
    ],
    detail: {
      loadAtMeasurement: load,
      count,
      spreadMs,
      fired: firedAt.size,
      duplicates,
      early,
      createdAfterDue,
      lateness: summarize(lateness),
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Claim cost at depth

interface DepthResult {
  depth: number;
  waiting: number;
  load: Load;
  claimMs: Summary;
  pickupMs: Summary;
  /** Iterations where no matching claim statement returned the timer (should be 0). */
  unmatched: number;
}

async function claim(ctx: WorkloadContext): Promise<WorkloadOutput> {
  const { peer, sizes } = ctx;
  const recorded: TimedStatement[] = [];
  const untime = timeStatements(peer.claimStatement, recorded);
  const app = new pg.Pool({ connectionString: ctx.url, max: 1 });
  const depths: DepthResult[] = [];
  let loaded = 0;
  let seq = 0;
  const warmUp = Math.max(10, Math.round(sizes.claimIterations / 10));
  try {
    for (const depth of sizes.claimDepths) {
      const started = performance.now();
      await peer.loadWaiting(depth - loaded, `wait-${loaded}-`);
      loaded = depth;
      await analyze(ctx.url);
      await withClient(ctx.url, (c) => c.query('CHECKPOINT'));
      log(
        `${ctx.system} ${ctx.settings}: ${depth.toLocaleString('en')} waiting, loaded in ${round((performance.now() - started) / 1000, 1)} s`,
      );
      let waiter: { key: string; resolve: () => void } | null = null;
      const worker = await peer.startWorker((key) => {
        if (waiter?.key === key) waiter.resolve();
      });
      const claims: number[] = [];
      const pickups: number[] = [];
      let unmatched = 0;
      const load = machineLoad();
      const budgetEnds = performance.now() + sizes.claimBudgetMs;
      try {
        for (let i = 0; i < warmUp + sizes.claimIterations; i++) {
          if (i >= warmUp + 20 && performance.now() > budgetEnds) break;
          const key = `due-${seq++}`;
          const fired = new Promise<void>((resolve) => (waiter = { key, resolve }));
          recorded.length = 0;
          await inTransaction(app, (tx) => peer.scheduleOne(tx, { key, dueAtMs: nowMs() - 1 }));
          const committed = performance.now();
          peer.wake();
          const outcome = await Promise.race([
            fired.then(() => 'fired' as const),
            deadline(10_000).then(() => 'timeout' as const),
          ]);
          const pickedUp = performance.now();
          if (outcome === 'timeout') throw new Error(`claim at ${depth}: timer ${key} not fired within 10 s`);
          // Let the statement's own promise settle (the handler can run before the driver's callback returns).
          await sleep(0);
          const match = recorded.find((s) => s.rows > 0);
          if (i < warmUp) continue;
          if (!match) unmatched++;
          else claims.push(match.ms);
          pickups.push(pickedUp - committed);
        }
      } finally {
        await worker.stop();
      }
      const waiting = await peer.countWaiting();
      depths.push({
        depth,
        waiting,
        load,
        claimMs: summarize(claims),
        pickupMs: summarize(pickups),
        unmatched,
      });
      log(
        `${ctx.system} ${ctx.settings}: claim at ${depth.toLocaleString('en')}: p50 ${round(percentile(claims, 50))} ms, pick-up p50 ${round(percentile(pickups, 50))} ms`,
      );
    }
  } finally {
    untime();
    await app.end();
  }
  return {
    figures: depths.map((d) => ({
      metric: `claim@${d.depth}`,
      label: `claim of 1 due among ${d.depth.toLocaleString('en')} waiting, p50`,
      value: d.claimMs.p50,
      unit: 'ms' as const,
      better: 'lower' as const,
      extra: { p99: d.claimMs.p99, pickupP50: d.pickupMs.p50 },
    })),
    detail: { iterations: sizes.claimIterations, warmUp, depths },
  };
}

// ---------------------------------------------------------------------------------------------
// Worker memory

/** Where `buildRssWorker` compiles the worker process and the adapters (gitignored). */
export const RSS_BUILD_DIR = fileURLToPath(new URL('../../.tmp/compare-build/', import.meta.url));

/**
 * Compiles `rss-worker.ts` and what it loads (the adapters, Chronos's `src/`) to JavaScript under
 * `RSS_BUILD_DIR`, with Chronos's migrations beside it; about 4 s.
 */
export function buildRssWorker(): void {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  installPeers();
  rmSync(RSS_BUILD_DIR, { recursive: true, force: true });
  mkdirSync(`${RSS_BUILD_DIR}bench/peers`, { recursive: true });
  // The compiled adapters find their libraries where the bench installed them.
  symlinkSync(`${root}bench/peers/node_modules`, `${RSS_BUILD_DIR}bench/peers/node_modules`);
  const files = ['rss-worker', 'chronos', 'pg-boss', 'graphile-worker'].map(
    (f) => `../../bench/peers/${f}.ts`,
  );
  const tsconfig = {
    extends: '../../tsconfig.json',
    compilerOptions: { rootDir: '../..', outDir: '.', noEmit: false, declaration: false, sourceMap: false },
    include: [],
    files,
  };
  writeFileSync(`${RSS_BUILD_DIR}tsconfig.json`, JSON.stringify(tsconfig, null, 2));
  // What the compiled Chronos reads beside itself: its migrations and its package.json (version).
  symlinkSync(`${root}migrations`, `${RSS_BUILD_DIR}migrations`);
  symlinkSync(`${root}package.json`, `${RSS_BUILD_DIR}package.json`);
  execFileSync(
    process.execPath,
    [`${root}node_modules/typescript/bin/tsc`, '-p', `${RSS_BUILD_DIR}tsconfig.json`],
    {
      stdio: 'inherit',
    },
  );
}

export interface RssReport {
  idleRssMB: number;
  idleHeapUsedMB: number;
  drainPeakRssMB: number;
  drained: number;
  drainMs: number;
}

async function rss(ctx: WorkloadContext): Promise<WorkloadOutput> {
  const { peer, sizes } = ctx;
  await peer.loadWaiting(sizes.rssWaiting, 'wait-');
  await analyze(ctx.url);
  const script = `${RSS_BUILD_DIR}bench/peers/rss-worker.js`;
  const spec = JSON.stringify({
    system: ctx.system,
    settings: ctx.settings,
    url: ctx.url,
    drain: sizes.rssDrain,
    idleMs: sizes.rssIdleMs,
    capMs: sizes.drainCapMs,
    stallMs: sizes.drainStallMs,
  });
  const child = spawn(process.execPath, ['--expose-gc', script, spec], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? 1)));
  let report: RssReport | null = null;
  const load = machineLoad();
  for await (const line of lines) {
    if (line === 'IDLE') {
      // The worker has idled and measured: give it timers to drain (one statement, untimed), then
      // tell it they are there, so its stall and cap count from the commit.
      await peer.loadDue(sizes.rssDrain, 'rss-');
      child.stdin.write('GO\n');
    } else if (line.startsWith('REPORT ')) {
      report = JSON.parse(line.slice('REPORT '.length)) as RssReport;
    }
  }
  const code = await exited;
  if (code !== 0 || !report) throw new Error(`rss: the worker process exited with ${code}`);
  const capped =
    report.drained < sizes.rssDrain
      ? `${report.drained.toLocaleString('en')} of ${sizes.rssDrain.toLocaleString('en')} drained`
      : undefined;
  return {
    figures: [
      {
        metric: 'rss-idle',
        label: `worker RSS, idle, ${sizes.rssWaiting.toLocaleString('en')} waiting (after GC)`,
        value: round(report.idleRssMB, 1),
        unit: 'MB',
        better: 'lower',
      },
      {
        metric: 'rss-drain',
        label: `worker RSS, peak while draining ${sizes.rssDrain.toLocaleString('en')}`,
        value: round(report.drainPeakRssMB, 1),
        unit: 'MB',
        better: 'lower',
        ...(capped ? { capped } : {}),
      },
    ],
    detail: { loadAtMeasurement: load, ...report },
  };
}

export async function runWorkload(ctx: WorkloadContext, workload: WorkloadName): Promise<WorkloadOutput> {
  switch (workload) {
    case 'drain5k':
    case 'drain50k':
      return drain(ctx, workload);
    case 'bulk5k':
    case 'bulk50k':
      return bulk(ctx, workload);
    case 'pertx16':
      return perTransaction(ctx);
    case 'lateness-bulk':
      return lateness(ctx, 'bulk');
    case 'lateness-live':
      return lateness(ctx, 'live');
    case 'claim':
      return claim(ctx);
    case 'rss':
      return rss(ctx);
  }
}
