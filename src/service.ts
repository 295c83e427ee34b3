/**
 * The composition root, for `chronos serve` and the library alike: opens the store, builds the
 * services (alarms, wakes, keys), and the loops that deliver (a dispatcher per queue, the
 * tracker). Doors are built on top of a ChronosService — HTTP, MCP and the CLI by `server.ts`
 * and `cli/`, the library by `library.ts` — and none of them reaches the store but through it.
 *
 * - `start()` runs what `chronos serve` runs: the dispatcher of the queue `router` (wakes to the
 *   router), the tracker, the watch for revoked keys, and the schedules file's watcher when
 *   `CHRONOS_SCHEDULES_FILE` is set.
 * - `worker(queue, receiver)` makes a dispatcher for another queue (the library's `work()`).
 */
import type pg from 'pg';
import type { PGlite } from '@electric-sql/pglite';
import { shiftProcessClock, systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import { AlarmService } from './core/alarm-service.js';
import { KeyService } from './core/key-service.js';
import { WakeService } from './core/wake-service.js';
import { FireStatsService } from './core/fire-stats-service.js';
import { SchedulesFileService } from './core/schedules-file-service.js';
import { SchedulesFileWatcher } from './schedules-file/watcher.js';
import { scheduleChangedBody } from './wire/schedules-file.js';
import { Dispatcher, type DispatcherDelivery, type DispatcherSettings } from './dispatch/dispatcher.js';
import { createLogger, type Logger } from './logger.js';
import type { Metrics } from './metrics.js';
import { LogReceiver } from './receivers/log.js';
import type { Receiver } from './receivers/receiver.js';
import { alarmsCountByStatus } from './store/alarms.js';
import { DbClock } from './store/db-clock.js';
import { deliveryRetryQueueDepth } from './store/delivery-stats.js';
import {
  executorOf,
  LiteDb,
  PgDb,
  schemaName,
  type DatabaseStatus,
  type Db,
  type Executor,
} from './store/db.js';
import type { LockInfo } from './store/embedded.js';
import { migrate, pendingMigrations } from './store/migrate.js';
import { hostEventLog } from './store/multi-host.js';
import { readOnlyReason, serverSettingsWarning } from './store/server-settings.js';
import { Tracker } from './tracker/tracker.js';
import { ROUTER_QUEUE } from './types.js';

/**
 * Alarms per statement when a large batch is written on a caller's transaction (PostgreSQL): the
 * part size that wrote batches fastest, small and large alike (bench/README.md, "Bulk
 * scheduling").
 */
const INSERT_CHUNK = 1_000;

export type { DatabaseStatus } from './store/db.js';

/** A caller's open transaction, as the services take it (`tx` of the library's calls). */
export type Transaction = Executor;

export interface ServiceOptions {
  clock?: Clock;
  logger?: Logger;
  /** An already open database (tests); otherwise opened from the config or the options below. */
  db?: Db;
  /** A node-postgres pool of the application's own (not ended by close()). */
  pool?: pg.Pool;
  /** A PGlite instance of the application's own (not closed by close()). */
  pglite?: PGlite;
  /** Overrides the receiver chosen from the config (tests). */
  receiver?: Receiver;
  /** Extra fields for the embedded store's lock file. */
  lock?: Partial<LockInfo>;
  /** Apply migrations while opening (the default); the library migrates when asked. */
  migrate?: boolean;
  /**
   * Prometheus metrics for `/metrics` (the default). The library goes without: it has no
   * `/metrics`, and prom-client is then not loaded.
   */
  metrics?: boolean;
}

export class ChronosService {
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
  /** Nudges, escalations, ack receipts and retention of wakes (contract §7); schedules-file heads-ups. */
  readonly tracker: Tracker;
  /** Reconciles alarms with a schedules file (contract §13): the watcher and `chronos schedules`. */
  readonly schedulesFile: SchedulesFileService;
  /** The watcher of `CHRONOS_SCHEDULES_FILE` while started; null otherwise. */
  schedulesFileWatcher: SchedulesFileWatcher | null = null;
  /** Where the router's fires go: its webhook, or the log when no router is configured. */
  readonly receiver: Receiver;
  /**
   * The store itself, for tests and benchmarks that set rows up as a crash would leave them. No
   * door uses it: they go through the services above.
   */
  readonly db: Db;
  readonly #db: Db;
  readonly #metrics: Metrics | undefined;
  #unwatchKeys: (() => Promise<void>) | null = null;
  #started = false;

  private constructor(
    readonly config: Config,
    db: Db,
    readonly logger: Logger,
    readonly clock: Clock,
    receiver: Receiver,
    metrics: Metrics | undefined,
  ) {
    this.#db = db;
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
    this.tracker = new Tracker({
      db,
      clock,
      logger: logger.child({ loop: 'tracker' }),
      metrics,
      nudgeAfterMs: config.nudgeAfterMs,
      escalateAfterMs: config.escalateAfterMs,
      retentionMs: config.retentionMs,
      alarmRetentionMs: config.alarmRetentionMs,
      routerUrl: config.routerUrl,
      fallbackUrl: config.fallbackUrl,
      secrets: config.webhookSecrets,
      timeoutMs: config.deliveryTimeoutMs,
      leaseMs: config.leaseMs,
      intervalMs: config.trackerIntervalMs,
      retry: { baseMs: config.retryBaseMs, maxMs: config.retryMaxMs },
    });
    // The receipt is owed by the row; this only makes a running tracker send it now.
    this.wakes.onAcknowledged((acked) => this.tracker.acknowledged(acked));
    this.schedulesFile = new SchedulesFileService({
      db,
      alarms: this.alarms,
      dbClock: this.dbClock,
      minCronIntervalMs: config.minCronIntervalMs,
      headsUpBody: scheduleChangedBody,
      // The heads-ups are owed by their rows; this only makes a running tracker send them now.
      onHeadsUps: () => this.tracker.poke(),
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
    if (metrics) this.#collectAtScrape(metrics);
  }

  /** Prometheus metrics, for `/metrics`; a service opened with `metrics: false` (the library) has none. */
  get metrics(): Metrics {
    if (!this.#metrics) throw new Error('this ChronosService was opened with metrics: false');
    return this.#metrics;
  }

  /** The figures read from the database when `/metrics` is scraped. */
  #collectAtScrape(metrics: Metrics): void {
    metrics.onScrape(async () => {
      const counts = await alarmsCountByStatus(this.#db);
      for (const [status, n] of Object.entries(counts)) metrics.alarms.set({ status }, n);
    });
    metrics.onScrape(async () => {
      metrics.retryQueueDepth.set(await deliveryRetryQueueDepth(this.#db));
    });
    // Failovers seen by a multi-host DATABASE_URL (issue 16).
    let hostChanges = 0;
    metrics.onScrape(async () => {
      const changes = this.databaseStatus()?.changes ?? 0;
      metrics.dbHostChanges.inc(changes - hostChanges);
      hostChanges = changes;
    });
  }

  /**
   * Opens the store — the options' own, `DATABASE_URL`, or the embedded store in `dataDir` —
   * in the configured schema, and applies migrations (unless `migrate: false`).
   */
  static async open(config: Config, options: ServiceOptions = {}): Promise<ChronosService> {
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
    try {
      if (options.migrate ?? true) {
        const applied = await migrate(db);
        if (applied.length > 0) logger.info({ applied, schema }, 'migrations applied');
      }
      // The embedded store runs single-user: PostgreSQL's autovacuum never runs there, and
      // PGlite plans every statement anew.
      const warning = db.kind === 'postgres' ? await serverSettingsWarning(db) : null;
      if (warning) logger.warn(warning);
      if (db instanceof PgDb) logPooling(db, config, logger);
      const clock = options.clock ?? systemClock;
      // Loaded only when used: a library worker needs neither prom-client nor the webhook client.
      const metrics = (options.metrics ?? true) ? new (await import('./metrics.js')).Metrics() : undefined;
      const receiver = options.receiver ?? (await createReceiver(config, logger, clock, metrics));
      return new ChronosService(config, db, logger, clock, receiver, metrics);
    } catch (error) {
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
  get pglite(): PGlite | null {
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
      db: this.#db,
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
   * Retention alone for `queues` (a library worker's own): their finished alarms and wakes are
   * deleted after the configured periods, one pass a minute; nothing is sent. Started by its owner.
   */
  pruner(queues: readonly string[]): Tracker {
    const { config } = this;
    return new Tracker({
      db: this.#db,
      clock: this.clock,
      logger: this.logger.child({ loop: 'pruner' }),
      nudgeAfterMs: config.nudgeAfterMs,
      escalateAfterMs: config.escalateAfterMs,
      retentionMs: config.retentionMs,
      alarmRetentionMs: config.alarmRetentionMs,
      intervalMs: Math.max(config.trackerIntervalMs, 60_000),
      pruneOnly: { queues },
    });
  }

  /** Starts what `chronos serve` runs: the router's dispatcher, the tracker, the key watch. */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    this.#unwatchKeys = await this.keys.watch();
    await this.dispatcher.start();
    await this.tracker.start();
    if (this.config.schedulesFile) {
      this.schedulesFileWatcher = new SchedulesFileWatcher({
        path: this.config.schedulesFile,
        service: this.schedulesFile,
        clock: this.clock,
        logger: this.logger.child({ component: 'schedules-file' }),
      });
      await this.schedulesFileWatcher.start();
    }
  }

  /** Stops claiming, lets deliveries finish within the grace period, releases the rest. */
  async stop(): Promise<void> {
    if (!this.#started) return;
    this.#started = false;
    await this.schedulesFileWatcher?.stop();
    this.schedulesFileWatcher = null;
    await Promise.all([
      this.dispatcher.stop(this.config.shutdownGraceMs),
      this.tracker.stop(this.config.shutdownGraceMs),
    ]);
    await this.#unwatchKeys?.();
    this.#unwatchKeys = null;
  }

  /** Stops the loops and closes the store (an application's own pool or PGlite is left open). */
  async close(): Promise<void> {
    await this.stop();
    await this.receiver.close?.();
    await this.tracker.close();
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

async function openStore(
  config: Config,
  options: ServiceOptions,
  schema: string,
  logger: Logger,
): Promise<Db> {
  const reach = { pooler: config.dbPooler, listenUrl: config.listenUrl };
  if (options.pool) return new PgDb(options.pool, false, schema, reach);
  if (options.pglite) return new LiteDb(options.pglite, undefined, schema);
  if (config.databaseUrl) {
    const hostLog = {
      DATABASE_URL: hostEventLog(logger, 'DATABASE_URL'),
      CHRONOS_LISTEN_URL: hostEventLog(logger, 'CHRONOS_LISTEN_URL'),
    };
    return PgDb.connect(config.databaseUrl, 20, {
      // A request fails (the API answers 503) instead of hanging while the database is away.
      connectionTimeoutMillis: config.dbConnectTimeoutMs,
      schema,
      ...reach,
      onHostEvent: (event, url) => hostLog[url](event),
    });
  }
  // PGlite is loaded only for the embedded store.
  const { openEmbedded } = await import('./store/embedded.js');
  return openEmbedded(config.dataDir, {
    lock: options.lock,
    schema,
    sharedBuffersMB: config.embeddedSharedBuffersMB,
  });
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

async function createReceiver(
  config: Config,
  logger: Logger,
  clock: Clock,
  metrics: Metrics | undefined,
): Promise<Receiver> {
  if (!config.routerUrl) {
    logger.warn('CHRONOS_ROUTER_URL is not set: wakes are written to the log instead of delivered');
    return new LogReceiver(logger.child({ receiver: 'log' }));
  }
  if (config.webhookSecrets.length === 0) {
    logger.warn(
      'CHRONOS_WEBHOOK_SECRET is not set: wakes are POSTed to the router unsigned (no webhook-signature header)',
    );
  }
  const { WebhookReceiver } = await import('./receivers/webhook.js');
  return new WebhookReceiver({
    url: config.routerUrl,
    secrets: config.webhookSecrets,
    timeoutMs: config.deliveryTimeoutMs,
    concurrency: config.concurrency,
    pipelining: config.routerPipelining,
    clock,
    metrics,
    logger: logger.child({ receiver: 'webhook' }),
  });
}
