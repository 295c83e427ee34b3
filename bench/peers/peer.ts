/**
 * One interface over Chronos and the job queues it is compared with (`bench/compare.ts`).
 *
 * An adapter drives one system through its own documented API only: it schedules timers on a
 * transaction the caller holds, runs that system's worker with an in-process handler, and says
 * exactly what it called (`description`), so the comparison can be read and repeated. Each
 * system runs on a fresh database of its own. Settings come in two sets: `defaults` (what the
 * system does when given nothing but a connection) and `fastest` (the settings its own docs give
 * for throughput and latency); `docs/comparison.md` lists both for every system.
 *
 * Loading many timers for the depth and memory workloads (`loadDue`, `loadWaiting`) is untimed
 * and uses the fastest way each system documents; scheduling that is measured goes through
 * `scheduleMany` and `scheduleOne`.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';

export const SYSTEMS = ['chronos', 'graphile-worker', 'pg-boss'] as const;
export type SystemName = (typeof SYSTEMS)[number];

export const SETTINGS = ['defaults', 'fastest'] as const;
export type SettingsName = (typeof SETTINGS)[number];

/** A timer to schedule: a key unique in the run, due at `dueAtMs` (ms since the epoch, whole ms). */
export interface Timer {
  key: string;
  dueAtMs: number;
}

/** Called once per timer as its handler starts, with the timer's key. */
export type FireHandler = (key: string) => void;

export interface PeerWorker {
  /** Stops claiming and waits for what it holds. */
  stop(): Promise<void>;
}

/** What an adapter calls, in words and options: recorded with every result. */
export interface PeerDescription {
  /** The system's package and version, e.g. `pg-boss 12.38.0`; Chronos: the commit. */
  version: string;
  settings: SettingsName;
  /** The options given to the system (constructor, queue and worker), as passed. */
  options: Record<string, unknown>;
  /** The calls behind scheduleMany, scheduleOne and the worker. */
  calls: { scheduleMany: string; scheduleOne: string; worker: string; load: string };
}

export interface Peer {
  readonly system: SystemName;
  readonly settings: SettingsName;
  readonly description: PeerDescription;
  /**
   * The text of the system's claim (fetch) statement, as its worker sends it: the claim-depth
   * workload times the statement that matches this and returns the due timer.
   */
  readonly claimStatement: RegExp;
  /** Installs the system's schema on the fresh database and opens what scheduling needs. */
  setup(): Promise<void>;
  /** Schedules `timers` on `tx`, a pg client inside BEGIN that the caller commits. */
  scheduleMany(tx: pg.ClientBase, timers: readonly Timer[]): Promise<void>;
  /** Schedules one timer on `tx`, a pg client inside BEGIN: what an application's transaction does. */
  scheduleOne(tx: pg.ClientBase, timer: Timer): Promise<void>;
  /** Untimed: `count` timers due now, keys `<prefix><n>`. */
  loadDue(count: number, keyPrefix: string): Promise<void>;
  /** Untimed: `count` timers due an hour or more from now, keys `<prefix><n>`. */
  loadWaiting(count: number, keyPrefix: string): Promise<void>;
  /** Timers not yet fired, for checks. */
  countWaiting(): Promise<number>;
  /** Deletes every timer not yet fired (after a warm-up the settings could not finish). */
  purge(): Promise<void>;
  /** Starts the system's worker, calling `onFire` as each timer's handler starts. */
  startWorker(onFire: FireHandler): Promise<PeerWorker>;
  /** Makes a worker look for due timers now, where the system offers a call for it (else nothing). */
  wake(): void;
  close(): Promise<void>;
}

export interface PeerOptions {
  /** The fresh database this system runs on. */
  url: string;
  settings: SettingsName;
}

/** Loads one adapter (its library only: a worker process holds no other system's code). */
export async function openPeer(system: SystemName, options: PeerOptions): Promise<Peer> {
  switch (system) {
    case 'chronos':
      return new (await import('./chronos.js')).ChronosPeer(options);
    case 'pg-boss':
      return new (await importPeer('./pg-boss.js', 'PgBossPeer'))(options);
    case 'graphile-worker':
      return new (await importPeer('./graphile-worker.js', 'GraphileWorkerPeer'))(options);
  }
}

/**
 * Loads a peer's adapter once its library is installed (`installPeers`). Through a specifier
 * the compiler does not follow, so that the project's typecheck does not need the peers (a plain
 * `npm install` of Chronos leaves them out); `bench/peers/tsconfig.json` checks the adapters.
 */
async function importPeer(file: string, name: string): Promise<new (options: PeerOptions) => Peer> {
  installPeers();
  const specifier: string = file;
  return ((await import(specifier)) as Record<string, new (options: PeerOptions) => Peer>)[name]!;
}

const PEERS_DIR = fileURLToPath(new URL('.', import.meta.url));

/**
 * Installs the peers (pg-boss, graphile-worker) into `bench/peers/node_modules` from their own
 * lock, `npm --prefix bench/peers ci`, unless they are there already. They are not Chronos's
 * dependencies, even for development: they want Node 22, and a plain `npm install` of Chronos on
 * Node 20 warned of it (EBADENGINE).
 */
export function installPeers(): void {
  if (
    existsSync(`${PEERS_DIR}node_modules/pg-boss/package.json`) &&
    existsSync(`${PEERS_DIR}node_modules/graphile-worker/package.json`)
  )
    return;
  process.stderr.write('bench: installing the peers (npm --prefix bench/peers ci)\n');
  execFileSync('npm', ['--prefix', PEERS_DIR, 'ci', '--no-audit', '--no-fund'], { stdio: ['ignore', 2, 2] });
}

/** Splits `items` into chunks of at most `size`. */
export function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** `count` timers, keys `<prefix><n>`, the first due at `firstDueMs` and one every `stepMs` after. */
export function timersFrom(count: number, keyPrefix: string, firstDueMs: number, stepMs: number): Timer[] {
  return Array.from({ length: count }, (_, i) => ({
    key: `${keyPrefix}${i}`,
    dueAtMs: Math.round(firstDueMs + i * stepMs),
  }));
}

/** Runs `fn` on a client of `pool` inside BEGIN … COMMIT (ROLLBACK on error). */
export async function inTransaction<T>(pool: pg.Pool, fn: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    client.release();
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    client.release();
    throw error;
  }
}

/** The version of an installed package, from its package.json: a peer's (`bench/peers/node_modules`) or Chronos's. */
export function packageVersion(name: string): string {
  const peer = new URL(`./node_modules/${name}/package.json`, import.meta.url);
  const url = existsSync(peer) ? peer : new URL(`../../node_modules/${name}/package.json`, import.meta.url);
  return `${name} ${(JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version}`;
}
