/**
 * Shared by every benchmark: a dedicated database per run (PostgreSQL `chronos_bench_*`, or
 * PGlite in a temp directory), bulk loading of waiting alarms, percentiles, the machine's
 * description, and writing raw results to `bench/results/`.
 *
 * Benchmarks never touch the `test` database or the test suite's `chronos_test_*` databases:
 * each creates its own and drops it when done (also on failure).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { cpus, freemem, loadavg, totalmem, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import {
  LiteDb,
  PgDb,
  sql,
  type BackendKind,
  type Db,
  type PGliteLike,
} from '../packages/chronos-timers/src/store/driver/db.js';
import { openEmbedded } from '../packages/chronos-timers/src/store/driver/embedded.js';
import { migrate } from '../packages/chronos-timers/src/store/driver/migrate.js';

/**
 * Statements on the store a library instance opened, for a benchmark's own counts: its PGlite
 * (one connection, shared), or a connection of its own to the PostgreSQL at `url`.
 */
export function storeOf(chronos: { pglite: PGliteLike | null }, url: string | null): Db {
  if (chronos.pglite) return new LiteDb(chronos.pglite);
  return PgDb.connect(url!, 1);
}

/** The server the benchmarks create their databases on (any database there, for admin). */
export const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/postgres';
export const RESULTS_DIR = fileURLToPath(new URL('./results/', import.meta.url));

/** The library's default owner: benchmark rows look like timers written through `schedule()`. */
export const OWNER = 'did:matrix:00000000-0000-0000-0000-000000000000:lib';
export const USER_ID = '00000000-0000-0000-0000-000000000000';

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export interface BenchDatabase {
  kind: BackendKind;
  db: Db;
  /** PostgreSQL: the URL of the dedicated database. PGlite: null. */
  url: string | null;
  /** PGlite: the data directory. PostgreSQL: null. */
  dataDir: string | null;
  /** Closes the store and drops the database (or removes the directory). */
  drop(): Promise<void>;
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

// Databases and directories to remove if the run is interrupted (Ctrl-C, kill).
const open = new Set<BenchDatabase>();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void Promise.allSettled([...open].map((b) => b.drop())).then(() => process.exit(130));
  });
}

/** A fresh, migrated PostgreSQL database named `chronos_bench_<label>_<random>`. */
export async function createPostgres(label: string, poolMax = 10): Promise<BenchDatabase> {
  const bench = await newPostgres(label, poolMax);
  try {
    await migrate(bench.db);
  } catch (error) {
    await bench.drop();
    throw error;
  }
  return bench;
}

/** A new, empty database and a store on it, dropped with `drop()` or on Ctrl-C. */
async function newPostgres(label: string, poolMax: number): Promise<BenchDatabase> {
  const name = `chronos_bench_${label.replace(/[^a-z0-9]/g, '_')}_${randomBytes(3).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = withDatabase(ADMIN_URL, name);
  const db = PgDb.connect(url, poolMax);
  const bench: BenchDatabase = {
    kind: 'postgres',
    db,
    url,
    dataDir: null,
    drop: async () => {
      open.delete(bench);
      await db.close().catch(() => {});
      await dropPostgres(name);
    },
  };
  open.add(bench);
  return bench;
}

async function dropPostgres(name: string): Promise<void> {
  await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

/**
 * A fresh, empty PostgreSQL database named `chronos_bench_<label>_<random>`, not migrated: for the
 * job queues compared with Chronos (`bench/peers/`), which install their own schema. Dropped on
 * Ctrl-C like the others; `db` is a two-connection store on it for the benchmark's own queries.
 */
export function createEmptyPostgres(label: string): Promise<BenchDatabase> {
  return newPostgres(label, 2);
}
/** A fresh, migrated embedded store (PGlite) in a temp directory, opened as Chronos opens it. */
export async function createPglite(label: string): Promise<BenchDatabase> {
  const dataDir = await mkdtemp(join(tmpdir(), `chronos-bench-${label}-`));
  const db = await openEmbedded(dataDir);
  await migrate(db);
  const bench: BenchDatabase = {
    kind: 'pglite',
    db,
    url: null,
    dataDir,
    // Closes whatever store is open now: a benchmark may have closed and reopened it.
    drop: async () => {
      open.delete(bench);
      await bench.db.close().catch(() => {});
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  open.add(bench);
  return bench;
}

export function createBench(kind: BackendKind, label: string): Promise<BenchDatabase> {
  return kind === 'postgres' ? createPostgres(label) : createPglite(label);
}

// Waiting (future) once-alarms, as the library writes them: owner, key, payload, source.
// `$1` rows, the first due `$2` seconds from now, one every `$3` milliseconds after that;
// keys are `$4` followed by the row number, so several loads can share a table.
const loadWaiting = sql(
  'bench_load_waiting',
  `INSERT INTO chronos.alarms (owner_did, user_id, kind, fire_at, next_fire_at, scheduled_for, idempotency_key,
     payload, source, queue)
   SELECT '${OWNER}', '${USER_ID}', 'once', t, t, t, $4::text || i, '{"bench":true}'::jsonb, 'library', 'default'
   FROM generate_series(1, $1::int) AS i,
     LATERAL (SELECT now() + $2::int * interval '1 second' + i * $3::int * interval '1 millisecond') AS d(t)`,
);

/** Inserts `count` alarms due at least `fromSeconds` from now, in one statement per 100k rows. */
export async function loadWaitingAlarms(
  db: Db,
  count: number,
  options: { fromSeconds?: number; stepMs?: number; keyPrefix?: string } = {},
): Promise<void> {
  const chunk = 100_000;
  for (let done = 0; done < count; done += chunk) {
    const n = Math.min(chunk, count - done);
    const prefix = `${options.keyPrefix ?? 'wait'}-${done}-`;
    await db.query(loadWaiting, [n, options.fromSeconds ?? 3600, options.stepMs ?? 10, prefix]);
  }
}

// `$1` once-alarms due now (or `$2` ms ago), keys `$3` followed by the row number.
const loadDue = sql(
  'bench_load_due',
  `INSERT INTO chronos.alarms (owner_did, user_id, kind, fire_at, next_fire_at, scheduled_for, idempotency_key,
     payload, source, queue)
   SELECT '${OWNER}', '${USER_ID}', 'once', t, t, t, $3::text || i, '{"bench":true}'::jsonb, 'library', 'default'
   FROM generate_series(1, $1::int) AS i,
     LATERAL (SELECT now() - $2::int * interval '1 millisecond') AS d(t)
   RETURNING id::text AS id`,
);

export async function loadDueAlarms(db: Db, count: number, keyPrefix: string, agoMs = 0): Promise<string[]> {
  const rows = await db.query<{ id: string }>(loadDue, [count, agoMs, keyPrefix]);
  return rows.map((r) => r.id);
}

export interface Summary {
  n: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of an unsorted list. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function summarize(values: readonly number[]): Summary {
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return {
    n: values.length,
    min: round(Math.min(...values)),
    p50: round(percentile(values, 50)),
    p90: round(percentile(values, 90)),
    p99: round(percentile(values, 99)),
    max: round(Math.max(...values)),
    mean: round(values.reduce((a, b) => a + b, 0) / values.length),
  };
}

/** How busy the machine is: load averages and Linux CPU pressure (share of time some task waited). */
export interface Load {
  at: string;
  loadAverage: number[];
  cpuPressureAvg10: number | null;
  cpuPressureAvg60: number | null;
}

export function machineLoad(): Load {
  let avg10: number | null = null;
  let avg60: number | null = null;
  try {
    const some = readFileSync('/proc/pressure/cpu', 'utf8').split('\n')[0] ?? '';
    avg10 = Number(/avg10=([\d.]+)/.exec(some)?.[1] ?? Number.NaN);
    avg60 = Number(/avg60=([\d.]+)/.exec(some)?.[1] ?? Number.NaN);
  } catch {
    // No PSI on this kernel.
  }
  return {
    at: new Date().toISOString(),
    loadAverage: loadavg().map((x) => Math.round(x * 100) / 100),
    cpuPressureAvg10: avg10,
    cpuPressureAvg60: avg60,
  };
}

/**
 * With `--quiet=<percent>` on the command line, waits (at most a minute) until the machine's CPU
 * pressure (PSI some avg10) is under that percentage, so a measurement is not taken while other
 * work saturates the CPUs. Returns the load it started under, to be recorded with the result.
 */
export async function waitForQuiet(argv = process.argv.slice(2)): Promise<Load> {
  const raw = argv.find((a) => a.startsWith('--quiet='))?.slice('--quiet='.length);
  const percent = raw === undefined ? Number.NaN : Number(raw);
  const until = Date.now() + 60_000;
  for (;;) {
    const load = machineLoad();
    if (!Number.isFinite(percent) || load.cpuPressureAvg10 === null || load.cpuPressureAvg10 < percent) {
      return load;
    }
    if (Date.now() > until) {
      log(`still busy after a minute (CPU pressure ${load.cpuPressureAvg10} %); measuring anyway`);
      return load;
    }
    await sleep(2_000);
  }
}

/** The load when this benchmark process started, recorded beside its results. */
const LOAD_AT_START = machineLoad();

/**
 * CPU milliseconds (user + system) a process has used so far, from /proc (Linux: `utime` and
 * `stime` in clock ticks of 1/100 s); null when the process is gone or /proc is not there.
 */
export function processCpuMs(pid: number | 'self'): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

/**
 * CPU microseconds a single-threaded process (a PostgreSQL backend) has run so far, from
 * `/proc/<pid>/schedstat` (nanoseconds, where `processCpuMs` counts 10 ms ticks): precise enough
 * to time one statement. It counts the process's main thread only, so not a Node process's.
 */
export function threadCpuUs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1000;
}

/**
 * CPU milliseconds used so far by each PostgreSQL backend connected to `url`'s database, read
 * from /proc — so only when the server runs on this machine (else null).
 */
export async function backendCpu(url: string): Promise<Map<number, number> | null> {
  const database = new URL(url).pathname.slice(1);
  const pids = await admin((c) =>
    c.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [database]),
  );
  const cpu = new Map<number, number>();
  for (const { pid } of pids.rows) {
    const ms = processCpuMs(pid);
    if (ms === null) return null;
    cpu.set(pid, ms);
  }
  return cpu;
}

/** CPU ms the database's backends used since `before` (backends that started since count from 0). */
export async function backendCpuSince(
  url: string,
  before: Map<number, number> | null,
): Promise<number | null> {
  const after = await backendCpu(url);
  if (!before || !after) return null;
  let total = 0;
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0);
  return total;
}

export interface Machine {
  date: string;
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  freeMemoryGiB: number;
  node: string;
  postgres: string;
  pglite: string;
  settings: Record<string, string>;
}

export async function describeMachine(): Promise<Machine> {
  const nproc = Number(execFileSync('nproc', { encoding: 'utf8' }).trim());
  const { version, settings } = await admin(async (c) => {
    const v = await c.query<{ version: string }>('SELECT version()');
    const s = await c.query<{ name: string; setting: string; unit: string | null }>(
      `SELECT name, setting, unit FROM pg_settings WHERE name IN ('shared_buffers', 'fsync', 'synchronous_commit',
         'autovacuum', 'jit', 'work_mem', 'effective_cache_size', 'random_page_cost', 'plan_cache_mode')`,
    );
    return {
      version: v.rows[0]!.version,
      settings: Object.fromEntries(
        s.rows.map((r) => [r.name, r.unit ? `${r.setting} ${r.unit}` : r.setting]),
      ),
    };
  });
  const pglitePackage = new URL('../node_modules/@electric-sql/pglite/package.json', import.meta.url);
  const pglite = (JSON.parse(await readFile(pglitePackage, 'utf8')) as { version: string }).version;
  return {
    date: new Date().toISOString(),
    cpus: nproc,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    freeMemoryGiB: Math.round((freemem() / 2 ** 30) * 10) / 10,
    node: process.version,
    postgres: version,
    pglite,
    settings,
  };
}

/** Writes `bench/results/<name>.json` with the machine and the command that produced it. */
export async function writeResult(name: string, data: unknown): Promise<string> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, `${name}.json`);
  const body = {
    benchmark: name,
    command: `npx tsx bench/${basename(process.argv[1] ?? name)} ${process.argv.slice(2).join(' ')}`.trim(),
    machine: await describeMachine(),
    load: { atStart: LOAD_AT_START, atEnd: machineLoad() },
    ...(data as object),
  };
  await writeFile(path, `${JSON.stringify(body, null, 2)}\n`);
  return path;
}

export async function writeText(name: string, text: string): Promise<string> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, name);
  await writeFile(path, text);
  return path;
}

/** Which backends this run covers: `--backend=postgres|pglite|both` (default both). */
export function backendsFromArgs(argv = process.argv.slice(2)): BackendKind[] {
  const arg = argv.find((a) => a.startsWith('--backend='))?.slice('--backend='.length) ?? 'both';
  if (arg === 'postgres' || arg === 'pglite') return [arg];
  if (arg === 'both') return ['postgres', 'pglite'];
  throw new Error(`--backend: expected postgres, pglite or both, got ${JSON.stringify(arg)}`);
}

/** `--name=value` as a number, or the default. */
export function numberArg(name: string, fallback: number, argv = process.argv.slice(2)): number {
  const raw = argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value)) throw new Error(`--${name}: expected a number, got ${JSON.stringify(raw)}`);
  return value;
}

export function log(message: string): void {
  process.stderr.write(`${new Date().toISOString().slice(11, 23)} ${message}\n`);
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves after `ms` without keeping the process alive: for timeouts raced against work. */
export const deadline = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

export function ms(x: number): string {
  return `${x.toFixed(x < 10 ? 3 : 1)} ms`;
}

/**
 * For the index benchmarks (index-cost.ts, index-variants.ts): a table `public.<table>` of `rows`
 * timers shaped as `scheduleMany` writes them (the library's owner, a key each, due an hour
 * ahead), and the statement that inserts them all into `alarms` with PostgreSQL alone.
 */
export function libraryRows(table: string, rows: number): { create: string; insert: string } {
  return {
    create: `CREATE UNLOGGED TABLE public.${table} AS
      SELECT gen_random_uuid() AS id, 'did:matrix:00000000-0000-0000-0000-000000000000:lib' AS owner_did,
        now() + interval '1 hour' + g * interval '1 ms' AS t, 'bulk:' || g AS key
      FROM generate_series(1, ${rows}) g`,
    insert: `INSERT INTO chronos.alarms (id, owner_did, user_id, kind, fire_at, next_fire_at, scheduled_for,
        payload, idempotency_key, queue, source)
      SELECT id, owner_did, '', 'once', t, t, t, '{}', key, 'default', 'library' FROM public.${table}
      ON CONFLICT (owner_did, idempotency_key) WHERE idempotency_key <> '' DO NOTHING`,
  };
}

/** `times` inserts of `insert` into an emptied `alarms`, each after TRUNCATE and CHECKPOINT: their ms. */
export async function timedInserts(
  c: { query(text: string): Promise<unknown> },
  insert: string,
  times = 5,
): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < times; i++) {
    await c.query('TRUNCATE chronos.alarms');
    await c.query('CHECKPOINT');
    const started = performance.now();
    await c.query('BEGIN');
    await c.query(insert);
    await c.query('COMMIT');
    ms.push(performance.now() - started);
  }
  return ms;
}
