/**
 * Shared by the webhook benchmarks: the sink process, a Db wrapper that times each named
 * statement (where the dispatcher's time goes), and CPU use of this process and the machine.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { Db, Executor, Row, Statement } from '../packages/chronos-timers/src/store/driver/db.js';
import { machineLoad, processCpuMs, type Load } from './support.js';

export interface SinkReport {
  received: number;
  connections: number;
  /** `[scheduled_for ms, received at ms]` per request, when started with samples. */
  samples: [number, number][];
  cpuMs: number;
}

export interface SinkProcess {
  url: string;
  reset(): Promise<void>;
  report(): Promise<SinkReport>;
  stop(): Promise<void>;
}

/** Starts bench/webhook-sink.ts in a child process and waits until it listens. */
export async function startSinkProcess(options: { samples?: boolean } = {}): Promise<SinkProcess> {
  const script = fileURLToPath(new URL('./webhook-sink.ts', import.meta.url));
  const child: ChildProcess = fork(script, options.samples ? ['--samples'] : [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const next = (type: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const onMessage = (message: Record<string, unknown>) => {
        if (message.type !== type) return;
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(message);
      };
      const onExit = (code: number | null) => reject(new Error(`sink process exited (${code})`));
      child.on('message', onMessage);
      child.once('exit', onExit);
    });
  const ready = await next('ready');
  return {
    url: `http://127.0.0.1:${ready.port as number}/wakes`,
    reset: async () => {
      const done = next('reset');
      child.send({ type: 'reset' });
      await done;
    },
    report: async () => {
      const done = next('report');
      child.send({ type: 'report' });
      return (await done) as unknown as SinkReport;
    },
    stop: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send({ type: 'stop' });
      await exited;
    },
  };
}

/** Total and count per statement name, for the statements run through a TimedDb. */
export type StatementTimes = Record<string, { calls: number; totalMs: number }>;

/** One statement run through a TimedDb: when it started and ended (performance.now()), and its size. */
export interface StatementSpan {
  name: string;
  startedAt: number;
  endedAt: number;
  /** What `inFlight()` said as it started (deliveries under way), when given. */
  inFlight: number | null;
  /** Rows it returned. */
  rows: number;
  /** Elements of its first parameter when that is an array (a recording's outcomes). */
  batch: number | null;
}

/** Elements of a parameter that is an array, or the array literal the store sends for one. */
function arrayLength(value: unknown): number | null {
  if (Array.isArray(value)) return value.length;
  if (typeof value === 'string' && value.startsWith('{')) return value === '{}' ? 0 : value.split(',').length;
  return null;
}

/**
 * Forwards to `db`, timing every query by statement name; with `spans`, also keeps each query's
 * start, end and size (`--timeline`), and the deliveries under way as it started (`inFlight`).
 */
export function timedDb(
  db: Db,
  options: { spans?: boolean; inFlight?: () => number } = {},
): { db: Db; times: StatementTimes; spans: StatementSpan[]; reset(): void } {
  let times: StatementTimes = {};
  let spans: StatementSpan[] = [];
  const time = async <T>(name: string, values: readonly unknown[] | undefined, run: () => Promise<T[]>) => {
    const startedAt = performance.now();
    const inFlight = options.inFlight?.() ?? null;
    try {
      const rows = await run();
      if (options.spans) {
        const batch = arrayLength(values?.[0]);
        spans.push({ name, startedAt, endedAt: performance.now(), inFlight, rows: rows.length, batch });
      }
      return rows;
    } finally {
      const entry = (times[name] ??= { calls: 0, totalMs: 0 });
      entry.calls++;
      entry.totalMs += performance.now() - startedAt;
    }
  };
  const wrapped: Db = {
    kind: db.kind,
    schema: db.schema,
    query: <T = Row>(statement: Statement, values?: readonly unknown[]) =>
      time(statement.name, values, () => db.query<T>(statement, values)),
    exec: (script: string) => db.exec(script),
    transaction: <T>(fn: (tx: Executor) => Promise<T>) => db.transaction(fn),
    listen: (channel, onNotify) => db.listen(channel, onNotify),
    close: () => db.close(),
  };
  return {
    db: wrapped,
    get times() {
      return times;
    },
    get spans() {
      return spans;
    },
    reset: () => {
      times = {};
      spans = [];
    },
  };
}

/** Busy share of all CPUs between two readings of /proc/stat (Linux), 0–1. */
export function machineCpu(): () => number {
  const read = () => {
    const fields = readFileSync('/proc/stat', 'utf8')
      .split('\n')[0]!
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    const idle = fields[3]! + (fields[4] ?? 0);
    const total = fields.reduce((a, b) => a + b, 0);
    return { idle, total };
  };
  const start = read();
  return () => {
    const end = read();
    const total = end.total - start.total;
    return total > 0 ? 1 - (end.idle - start.idle) / total : 0;
  };
}

/** CPU milliseconds this process used since the returned function was made. */
export function processCpu(): () => number {
  const start = process.cpuUsage();
  return () => {
    const used = process.cpuUsage(start);
    return (used.user + used.system) / 1000;
  };
}

/**
 * CPU milliseconds used by the PostgreSQL backends serving `database` (Linux /proc; the
 * server's shared processes — WAL writer, checkpointer — are not counted) since the returned
 * function was made. Backends that start or end in between are counted from when seen.
 */
export function postgresCpu(database: string): () => number {
  const read = (): Map<number, number> => {
    const usage = new Map<number, number>();
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
        if (!cmdline.startsWith('postgres:') || !cmdline.includes(` ${database} `)) continue;
        const ms = processCpuMs(Number(entry));
        if (ms !== null) usage.set(Number(entry), ms);
      } catch {
        // the process ended while being read
      }
    }
    return usage;
  };
  const start = read();
  return () => {
    let total = 0;
    for (const [pid, ms] of read()) total += ms - (start.get(pid) ?? 0);
    return total;
  };
}

/**
 * `--quiet=N`: before each timed run, wait (up to `maxMs`) until the machine's CPU pressure
 * (PSI avg10) is under N %, so a run is not timed while other work has the CPUs. Returns the
 * load when the run starts, recorded beside it.
 */
export async function quietEnough(maxMs = 300_000, argv = process.argv.slice(2)): Promise<Load> {
  const percent = Number(argv.find((a) => a.startsWith('--quiet='))?.slice('--quiet='.length) ?? Number.NaN);
  const until = Date.now() + maxMs;
  let load = machineLoad();
  while (
    Number.isFinite(percent) &&
    load.cpuPressureAvg10 !== null &&
    load.cpuPressureAvg10 >= percent &&
    Date.now() < until
  ) {
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    load = machineLoad();
  }
  return load;
}
