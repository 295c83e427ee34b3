/**
 * The library's composition root: opens the store, builds the services (alarms, wakes, keys,
 * the schedules file's reconciler) and the loops the library runs (a dispatcher per queue,
 * retention). `createChronos` builds on it; the server's `ChronosService`
 * (chronos-timers-server) extends it with the tracker, the webhook receiver, metrics and the
 * schedules file's watcher. No door reaches the store but through it.
 *
 * - `start()` runs the dispatcher of the queue `router` and the watch for revoked keys.
 * - `worker(queue, receiver)` makes a dispatcher for another queue (the library's `work()`).
 */
import type pg from 'pg';
import { shiftProcessClock, systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import { AlarmService } from './core/alarm-service.js';
import { KeyService } from './core/key-service.js';
import { WakeService } from './core/wake-service.js';
import { FireStatsService } from './core/fire-stats-service.js';
import { SchedulesFileService } from './core/schedules-file-service.js';
import { scheduleChangedBody } from './wire/schedules-file.js';
import { Dispatcher, type DispatcherDelivery, type DispatcherSettings } from './dispatch/dispatcher.js';
import { Loop } from './dispatch/loop.js';
import { createLogger, type Logger } from './logger.js';
import type { LoopMetrics } from './loop-metrics.js';
import { LogReceiver } from './receivers/log.js';
import type { Receiver } from './receivers/receiver.js';
import { DbClock } from './store/driver/db-clock.js';
import {
  executorOf,
  LiteDb,
  PgDb,
  schemaName,
  type DatabaseStatus,
  type Db,
  type Executor,
  type PGliteLike,
} from './store/driver/db.js';
import type { LockInfo } from './store/driver/embedded.js';
import { migrate, pendingMigrations } from './store/driver/migrate.js';
import { alarmsRepairedByLimits, STORED_LIMITS_MIGRATION } from './store/stored-repairs.js';
import { hostEventLog } from './store/driver/multi-host.js';
import { readOnlyReason, serverSettingsWarning } from './store/driver/server-settings.js';
import { PruneStage } from './tracker/prune.js';
import { ROUTER_QUEUE } from './types.js';

/**
 * Alarms per statement when a large batch is written on a caller's transaction (PostgreSQL): the
 * part size that wrote batches fastest, small and large alike (bench/README.md, "Bulk
 * scheduling").
 */
const INSERT_CHUNK = 1_000;

/** The API's connections to `DATABASE_URL` (its pool: requests, the key watch, `/readyz`). */
const API_CONNECTIONS = 20;

/**
 * The loops' own connections to `DATABASE_URL` (issue 45): the router's dispatcher, the tracker
 * and any worker claim, record and prune on a pool of their own, so a burst of requests that
 * takes every connection of the API's pool cannot stop a claim. They hold a connection only for
 * a statement at a time (a claim, a batch of outcomes), so a few are enough.
 */
export const LOOP_CONNECTIONS = 4;

export type { DatabaseStatus } from './store/driver/db.js';

/** A caller's open transaction, as the services take it (`tx` of the library's calls). */
export type Transaction = Executor;

export interface CoreOptions {
  clock?: Clock;
  logger?: Logger;
  /** An already open database (tests); otherwise opened from the config or the options below. */
  db?: Db;
  /** A node-postgres pool of the application's own (not ended by close()). */
  pool?: pg.Pool;
  /** A PGlite instance of the application's own (not closed by close()). */
  pglite?: PGliteLike;
  /** Where the router's fires go; the log when absent (the server passes its webhook's). */
  receiver?: Receiver | ((logger: Logger, clock: Clock) => Promise<Receiver>);
  /** Extra fields for the embedded store's lock file. */
  lock?: Partial<LockInfo>;
  /** Apply migrations while opening (the default); the library migrates when asked. */
  migrate?: boolean;
  /** What the loops record (the server's Prometheus metrics); the library records nothing. */
  metrics?: LoopMetrics;
}

/** What `ChronosCore.openParts` opened, for a constructor (the core's, or the server's). */
export interface CoreParts {
  config: Config;
  db: Db;
  loops: Db;
  logger: Logger;
  clock: Clock;
  receiver: Receiver;
  metrics: LoopMetrics | undefined;
}

export class ChronosCore {
  readonly alarms: AlarmService;
  readonly dbClock: DbClock;
  /** API keys: create, revoke, authenticate (HTTP and the CLI). */
  readonly keys: KeyService;
  /** Wake records: list, ack, reported replies (HTTP, MCP; the tracker hooks onAcknowledged). */
  readonly wakes: WakeService;
  /** The dashboard's figures: lateness per minute, fires due per minute (contract §15). */
  readonly fireStats: FireStatsService;
  /** The dispatcher of the queue `router`: wakes to the router (contract §4a, §6). */
  readonly dispatcher: Dispatcher;
  /** Reconciles alarms with a schedules file (contract §13): the watcher and `chronos schedules`. */
  readonly schedulesFile: SchedulesFileService;
  /** Where the router's fires go: its webhook, or the log when no router is configured. */
  readonly receiver: Receiver;
  /**
   * The store itself, for tests and benchmarks that set rows up as a crash would leave them. No
   * door uses it: they go through the services above.
   */
  readonly db: Db;
  readonly #db: Db;
  /** The loops' store: a pool of their own on `DATABASE_URL`, else the same as #db. */
  readonly #loops: Db;
  readonly #metrics: LoopMetrics | undefined;
  #unwatchKeys: (() => Promise<void>) | null = null;
  #started = false;

  readonly config: Config;
  readonly logger: Logger;
  readonly clock: Clock;

  protected constructor(parts: CoreParts) {
    const { config, db, logger, clock, receiver, metrics, loops } = parts;
    this.config = config;
    this.logger = logger;
    this.clock = clock;
    this.#db = db;
    this.#loops = loops;
    this.db = db;
    this.#metrics = metrics;
    this.receiver = receiver;
    this.dbClock = new DbClock(db, clock);
    this.alarms = new AlarmService({
      db,
      dbClock: this.dbClock,
      quotas: {
        maxActiveAlarms: config.maxActiveAlarms,
        createRatePerMinute: config.createRatePerMinute,
        minCronIntervalMs: config.minCronIntervalMs,
      },
      notifyHorizonMs: config.pollIntervalMs,
      leaseMs: config.leaseMs,
      insertChunk: db.kind === 'postgres' ? INSERT_CHUNK : undefined,
    });
    this.keys = new KeyService(db, { clock });
    this.fireStats = new FireStatsService({ db, dbClock: this.dbClock });
    this.wakes = new WakeService({
      db,
      replyWindowMs: config.replyWindowMs,
      logger: logger.child({ component: 'wakes' }),
    });
    this.schedulesFile = new SchedulesFileService({
      db,
      alarms: this.alarms,
      dbClock: this.dbClock,
      minCronIntervalMs: config.minCronIntervalMs,
      headsUpBody: scheduleChangedBody,
      // The heads-ups are owed by their rows; this only makes a running sender send them now.
      onHeadsUps: () => this.headsUpsWritten(),
    });
    this.dispatcher = this.worker(
      ROUTER_QUEUE,
      { receiver: this.receiver },
      {
        logger: logger.child({ loop: 'dispatcher' }),
        metrics,
        batchSize: config.batchSize,
        concurrency: config.concurrency,
      },
    );
  }

  /** Called when schedules-file heads-ups were written (the server's tracker sends them). */
  protected headsUpsWritten(): void {}

  /** The loops' store, for the loops a subclass adds (the server's tracker). */
  protected get loopsDb(): Db {
    return this.#loops;
  }

  /** What the loops record, if anything. */
  protected get loopMetrics(): LoopMetrics | undefined {
    return this.#metrics;
  }

  /** Whether start() ran and stop() has not. */
  protected get started(): boolean {
    return this.#started;
  }

  /**
   * Opens the store — the options' own, `DATABASE_URL`, or the embedded store in `dataDir` —
   * in the configured schema, and applies migrations (unless `migrate: false`).
   */
  static async openCore(config: Config, options: CoreOptions = {}): Promise<ChronosCore> {
    return new ChronosCore(await ChronosCore.openParts(config, options));
  }

  /** What open() opens, for a subclass's constructor. */
  protected static async openParts(config: Config, options: CoreOptions = {}): Promise<CoreParts> {
    const logger = options.logger ?? createLogger(config.logLevel, config.logFormat);
    if (config.testClockOffsetMs !== 0) {
      shiftProcessClock(config.testClockOffsetMs);
      logger.warn(
        { offsetMs: config.testClockOffsetMs },
        'CHRONOS_TEST_CLOCK_OFFSET is set: this process runs with its wall clock shifted (for tests only)',
      );
    }
    const schema = schemaName(config.schema, 'CHRONOS_SCHEMA');
    const owned = !options.db && !options.pool && !options.pglite;
    const db = options.db ?? (await openStore(config, options, schema, logger));
    let loops: Db | undefined;
    try {
      const metrics = options.metrics;
      if (options.migrate ?? true) {
        const applied = await migrate(db);
        if (applied.length > 0) logger.info({ applied, schema }, 'migrations applied');
        await reportStoredRepairs(db, applied, logger, metrics);
      }
      // The embedded store runs single-user: PostgreSQL's autovacuum never runs there, and
      // PGlite plans every statement anew.
      const warning = db.kind === 'postgres' ? await serverSettingsWarning(db) : null;
      if (warning) logger.warn(warning);
      if (db instanceof PgDb) logPooling(db, config, logger);
      const clock = options.clock ?? systemClock;
      const receiver =
        typeof options.receiver === 'function'
          ? await options.receiver(logger, clock)
          : (options.receiver ?? new LogReceiver(logger.child({ receiver: 'log' })));
      // The loops get connections of their own when the service opened the pool itself; an
      // application's pool and PGlite (one connection, whose statements queue in turn) are shared.
      loops =
        owned && db instanceof PgDb ? connectPg(config, schema, LOOP_CONNECTIONS).listenThrough(db) : db;
      return { config, db, loops, logger, clock, receiver, metrics };
    } catch (error) {
      if (loops && loops !== db) await loops.close();
      if (owned) await db.close();
      throw error;
    }
  }

  /** Which store this is: `postgres` or `pglite`. */
  get storeKind(): Db['kind'] {
    return this.#db.kind;
  }

  /** The schema Chronos's tables live in. */
  get schema(): string {
    return this.#db.schema;
  }

  /** The embedded store's PGlite, for the application's own statements on it; null on PostgreSQL. */
  get pglite(): PGliteLike | null {
    return this.#db instanceof LiteDb ? this.#db.lite : null;
  }

  /** Applies pending migrations; returns the versions applied. */
  migrate(): Promise<string[]> {
    return migrate(this.#db);
  }

  /** A caller's transaction — a node-postgres client inside BEGIN, or a PGlite transaction — for the services. */
  transaction(tx: unknown): Transaction {
    return executorOf(tx, this.#db.schema, !(this.#db instanceof PgDb) || this.#db.named);
  }

  /** A dispatcher of `queue`, handing each fire to `delivery.receiver`; started by its owner. */
  worker(
    queue: string,
    delivery: DispatcherDelivery,
    options: Partial<Omit<DispatcherSettings, 'db' | 'queue'>> = {},
  ): Dispatcher {
    const { config } = this;
    return new Dispatcher({
      db: this.#loops,
      queue,
      ...delivery,
      clock: this.clock,
      logger: this.logger,
      leaseMs: config.leaseMs,
      pollIntervalMs: config.pollIntervalMs,
      deliveryTimeoutMs: config.deliveryTimeoutMs,
      retry: { baseMs: config.retryBaseMs, maxMs: config.retryMaxMs },
      ...options,
    });
  }

  /**
   * Retention alone for `queues` (a library worker's own): the tracker's prune stage on a loop of
   * its own, deleting their finished alarms and wakes after the configured periods, one pass a
   * minute (at once again while a batch comes back full); nothing is sent. Started by its owner.
   */
  pruner(queues: readonly string[]): Loop {
    const { config } = this;
    const logger = this.logger.child({ loop: 'pruner' });
    const prune = new PruneStage({
      db: this.#loops,
      retentionMs: config.retentionMs,
      alarmRetentionMs: config.alarmRetentionMs,
      queues,
      logger,
    });
    const intervalMs = Math.max(config.trackerIntervalMs, 60_000);
    return new Loop({
      // Its failures are the tracker's retention failing, as where the tracker runs it.
      name: 'tracker',
      errorMessage: 'tracker: pass failed; retrying',
      look: async () => ((await prune.runOnce()).more ? 0 : intervalMs),
      clock: this.clock,
      logger,
    });
  }

  /** Starts the router's dispatcher and the key watch (the server adds its own loops). */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    this.#unwatchKeys = await this.keys.watch();
    await this.dispatcher.start();
  }

  /** Stops claiming, lets deliveries finish within the grace period, releases the rest. */
  async stop(): Promise<void> {
    if (!this.#started) return;
    this.#started = false;
    await this.dispatcher.stop(this.config.shutdownGraceMs);
    await this.#unwatchKeys?.();
    this.#unwatchKeys = null;
  }

  /** Stops the loops and closes the store (an application's own pool or PGlite is left open). */
  async close(): Promise<void> {
    await this.stop();
    await this.receiver.close?.();
    if (this.#loops !== this.#db) await this.#loops.close();
    await this.#db.close();
  }

  /** Ready when the database answers and every migration is applied; says which host is in use. */
  async readiness(): Promise<{ ready: boolean; reason?: string; database?: DatabaseStatus }> {
    let result: { ready: boolean; reason?: string };
    try {
      const pending = await pendingMigrations(this.#db);
      const readOnly = pending.length === 0 ? await readOnlyReason(this.#db) : null;
      result =
        pending.length > 0
          ? { ready: false, reason: `migrations pending: ${pending.join(', ')}` }
          : readOnly
            ? { ready: false, reason: readOnly }
            : { ready: true };
    } catch (error) {
      // The cause (an address, the driver's text) goes to the log, not to whoever asks /readyz.
      this.logger.warn({ err: { message: reasonOf(error) } }, 'readiness: database unreachable');
      result = { ready: false, reason: 'database unreachable' };
    }
    const database = this.databaseStatus();
    return database ? { ...result, database } : result;
  }

  /** The PostgreSQL host in use and the hosts listed; null on the embedded store or an application's pool. */
  databaseStatus(): DatabaseStatus | null {
    return this.#db instanceof PgDb ? this.#db.status() : null;
  }
}

/** The driver's message (what the store wrapped: `connect ECONNREFUSED …`, which hosts failed), else the error's. */
function reasonOf(error: unknown): string {
  const cause = (error as { cause?: unknown }).cause;
  const driver = cause instanceof Error ? cause.message || (cause as { code?: string }).code : undefined;
  return driver || (error as Error).message;
}

async function openStore(config: Config, options: CoreOptions, schema: string, logger: Logger): Promise<Db> {
  const reach = { pooler: config.dbPooler, listenUrl: config.listenUrl };
  if (options.pool) return new PgDb(options.pool, false, schema, reach);
  if (options.pglite) return new LiteDb(options.pglite, undefined, schema);
  if (config.databaseUrl) {
    const hostLog = {
      DATABASE_URL: hostEventLog(logger, 'DATABASE_URL'),
      CHRONOS_LISTEN_URL: hostEventLog(logger, 'CHRONOS_LISTEN_URL'),
    };
    return connectPg(config, schema, API_CONNECTIONS, (event, url) => hostLog[url](event));
  }
  // PGlite is loaded only for the embedded store.
  const { openEmbedded } = await importEmbedded();
  return openEmbedded(config.dataDir, {
    lock: options.lock,
    schema,
    sharedBuffersMB: config.embeddedSharedBuffersMB,
  });
}

/** A pool of `max` connections to `DATABASE_URL`; `onHostEvent` logs a multi-host URL's changes. */
function connectPg(
  config: Config,
  schema: string,
  max: number,
  onHostEvent?: NonNullable<Parameters<typeof PgDb.connect>[2]>['onHostEvent'],
): PgDb {
  return PgDb.connect(config.databaseUrl!, max, {
    // A request fails (the API answers 503) instead of hanging while the database is away.
    connectionTimeoutMillis: config.dbConnectTimeoutMs,
    schema,
    pooler: config.dbPooler,
    listenUrl: config.listenUrl,
    onHostEvent,
  });
}

/**
 * After the migration that repairs rows stored past the payload limits ran: a warning naming the
 * alarms it failed (the first 20 ids) and the count on `chronos_stored_rows_repaired_total`.
 */
export async function reportStoredRepairs(
  db: Db,
  applied: readonly string[],
  logger: Logger,
  metrics: LoopMetrics | undefined,
): Promise<void> {
  if (!applied.includes(STORED_LIMITS_MIGRATION)) return;
  const ids = await alarmsRepairedByLimits(db);
  if (ids.length === 0) return;
  metrics?.storedRepairs.inc(ids.length);
  logger.warn(
    { count: ids.length, alarms: ids.slice(0, 20) },
    `${ids.length} alarm(s) were stored past the payload limits (64 KiB or 64 levels as stored): ` +
      'each was failed if live, its payload replaced by {} and its last_error says what was there',
  );
}

/** Says once how statements and notifications travel when a pooler is in the way. */
function logPooling(db: PgDb, config: Config, logger: Logger): void {
  if (db.named) return;
  const listening = db.listening === 'listenUrl';
  logger.info(
    { pooler: config.dbPooler, listen: db.listening },
    listening
      ? 'CHRONOS_DB_POOLER=transaction: statements are sent unnamed; LISTEN goes through CHRONOS_LISTEN_URL'
      : `CHRONOS_DB_POOLER=transaction and no CHRONOS_LISTEN_URL: statements are sent unnamed and nothing LISTENs; ` +
          `the dispatcher polls every ${config.pollIntervalMs} ms and a revoked key may still be accepted for up to 30 s by an instance that cached it`,
  );
}

/**
 * The embedded store's code, which needs PGlite: an optional peer dependency of the library, so
 * an application that never uses `dataDir` does not install it. Missing, it is named.
 */
async function importEmbedded(): Promise<typeof import('./store/driver/embedded.js')> {
  try {
    return await import('./store/driver/embedded.js');
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (
      code === 'ERR_MODULE_NOT_FOUND' &&
      String((error as Error).message).includes('@electric-sql/pglite')
    ) {
      throw new Error(
        'the embedded store (dataDir, or no DATABASE_URL) needs the package @electric-sql/pglite, an optional ' +
          'peer dependency of chronos-timers that is not installed: npm install @electric-sql/pglite',
        { cause: error },
      );
    }
    throw error;
  }
}
