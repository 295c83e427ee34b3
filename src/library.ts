/**
 * The TypeScript library (contract §9): timers written in the caller's own transaction.
 *
 * `schedule(tx, spec)` inserts the timer on `tx`, so it commits with the caller's state change
 * or not at all (I6). `work(handler)` runs a dispatcher that calls `handler` for each due timer,
 * at least once; deduplicate on `fire.wakeId` (or on `key` for one-shot timers).
 */
import pg from 'pg';
import type { PGlite } from '@electric-sql/pglite';
import { AlarmService } from './core/alarm-service.js';
import { systemClock, type Clock } from './clock.js';
import { invalidInput } from './errors.js';
import { silentLogger, type Logger } from './logger.js';
import { LIBRARY_OWNER, parseOwner } from './core/owner.js';
import { Dispatcher } from './dispatch/dispatcher.js';
import { HandlerReceiver, type TimerHandler } from './receivers/handler.js';
import { alarmsGetByKey } from './store/alarms.js';
import { DbClock } from './store/db-clock.js';
import { executorOf, LiteDb, PgDb, type Db, type Executor } from './store/db.js';
import { openEmbedded } from './store/embedded.js';
import { migrate } from './store/migrate.js';
import type { Alarm } from './types.js';

export interface ChronosOptions {
  /** A PostgreSQL connection string. */
  databaseUrl?: string;
  /** Or a node-postgres pool of your own (Chronos does not end it). */
  pool?: pg.Pool;
  /** Or a directory for the embedded store (PGlite), locked for this process. */
  dataDir?: string;
  /** Or a PGlite instance of your own (Chronos does not close it). */
  pglite?: PGlite;
  clock?: Clock;
  logger?: Logger;
  /** The fallback poll of `work()`, and the horizon within which new timers wake it at once. */
  pollIntervalMs?: number;
}

export interface TimerSpec {
  /** Your own id for the timer, unique per owner: scheduling the same key again is a no-op. */
  key: string;
  at?: Date | string;
  inSeconds?: number;
  cron?: string;
  timezone?: string;
  payload?: Record<string, unknown>;
  /** Default `did:matrix:00000000-0000-0000-0000-000000000000:lib`. */
  owner?: string;
  label?: string;
  maxFailures?: number;
}

export type RescheduleSpec = Omit<TimerSpec, 'key'>;

export interface WorkOptions {
  concurrency?: number;
  batchSize?: number;
  leaseMs?: number;
  retryBaseMs?: number;
  retryMaxMs?: number;
}

export interface Worker {
  /** Stops claiming; finishes what it holds within `graceMs` and releases the rest. */
  stop(graceMs?: number): Promise<void>;
  /** One claim-deliver-record pass (for tests). */
  runOnce(): Promise<number>;
}

export interface Chronos {
  migrate(): Promise<string[]>;
  schedule(tx: unknown, spec: TimerSpec): Promise<Alarm>;
  cancel(tx: unknown, key: string, owner?: string): Promise<Alarm>;
  reschedule(tx: unknown, key: string, spec: RescheduleSpec): Promise<Alarm>;
  /** The timer with this key, or null. */
  get(key: string, owner?: string): Promise<Alarm | null>;
  work(handler: TimerHandler, options?: WorkOptions): Worker;
  close(): Promise<void>;
  /** The embedded store, for your own transactions on it (when Chronos opened one). */
  readonly pglite: PGlite | null;
  readonly db: Db;
}

export async function createChronos(options: ChronosOptions): Promise<Chronos> {
  const db = await openDb(options);
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? silentLogger;
  const pollIntervalMs = options.pollIntervalMs ?? 1_000;
  const service = new AlarmService({
    db,
    dbClock: new DbClock(db, clock),
    quotas: { maxActiveAlarms: 0, createRatePerMinute: 0, minCronIntervalMs: 1_000 },
    notifyHorizonMs: pollIntervalMs,
  });
  const workers = new Set<Worker>();
  const on = (tx: unknown): Executor | undefined =>
    tx === null || tx === undefined ? undefined : executorOf(tx);
  const ownerOf = (owner: string | undefined) => parseOwner(owner ?? LIBRARY_OWNER);

  return {
    db,
    pglite: db instanceof LiteDb ? db.lite : null,
    migrate: () => migrate(db),

    async schedule(tx, spec) {
      if (typeof spec?.key !== 'string' || spec.key === '') {
        throw invalidInput('key', 'a non-empty string naming the timer, e.g. "invoice:42:expire"', spec?.key);
      }
      const { alarm } = await service.create(ownerOf(spec.owner), toBody(spec, true), {
        source: 'library',
        tx: on(tx),
      });
      return alarm;
    },

    cancel: (tx, key, owner) => service.cancel(ownerOf(owner), { key }, on(tx)),

    reschedule: (tx, key, spec) =>
      service.update(ownerOf(spec.owner), { key }, toBody(spec, false), { source: 'library', tx: on(tx) }),

    get: (key, owner) => alarmsGetByKey(db, ownerOf(owner).did, key),

    work(handler, work = {}) {
      const dispatcher = new Dispatcher({
        db,
        receiver: new HandlerReceiver(handler),
        clock,
        logger,
        pollIntervalMs,
        leaseMs: work.leaseMs,
        batchSize: work.batchSize,
        concurrency: work.concurrency,
        retry: { baseMs: work.retryBaseMs ?? 1_000, maxMs: work.retryMaxMs ?? 3_600_000 },
      });
      const started = dispatcher.start();
      const worker: Worker = {
        async stop(graceMs) {
          await started;
          await dispatcher.stop(graceMs);
          workers.delete(worker);
        },
        runOnce: () => dispatcher.runOnce(),
      };
      workers.add(worker);
      return worker;
    },

    async close() {
      await Promise.all([...workers].map((w) => w.stop()));
      await db.close();
    },
  };
}

function toBody(spec: RescheduleSpec & { key?: string }, withKey: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (withKey) body.idempotency_key = spec.key;
  if (spec.at !== undefined) body.at = spec.at instanceof Date ? spec.at.toISOString() : spec.at;
  if (spec.inSeconds !== undefined) body.in_seconds = spec.inSeconds;
  if (spec.cron !== undefined) body.cron = spec.cron;
  if (spec.timezone !== undefined) body.timezone = spec.timezone;
  if (spec.payload !== undefined) body.payload = spec.payload;
  if (spec.label !== undefined) body.label = spec.label;
  if (spec.maxFailures !== undefined) body.max_failures = spec.maxFailures;
  return body;
}

async function openDb(options: ChronosOptions): Promise<Db> {
  if (options.pool) return new PgDb(options.pool, false);
  if (options.databaseUrl) return PgDb.connect(options.databaseUrl);
  if (options.pglite) return new LiteDb(options.pglite);
  if (options.dataDir) return openEmbedded(options.dataDir);
  throw invalidInput('options', 'one of databaseUrl, pool, dataDir or pglite', undefined);
}
