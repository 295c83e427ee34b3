/**
 * The composition root: builds the store, the loops and the shared services from a Config.
 * Surfaces (HTTP, MCP, CLI) are built on top of a ChronosService; loops never import surfaces.
 */
import { AlarmService } from './alarm-service.js';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import { Dispatcher } from './dispatch/dispatcher.js';
import { createLogger, type Logger } from './logger.js';
import { Metrics } from './metrics.js';
import { LogReceiver } from './receivers/log.js';
import type { Receiver } from './receivers/receiver.js';
import { alarmsCountByStatus } from './store/alarms.js';
import { DbClock } from './store/db-clock.js';
import { PgDb, type Db } from './store/db.js';
import { openEmbedded, type LockInfo } from './store/embedded.js';
import { migrate, pendingMigrations } from './store/migrate.js';

export interface ServiceOptions {
  clock?: Clock;
  logger?: Logger;
  /** An already open database (tests); otherwise opened from the config. */
  db?: Db;
  /** Overrides the receiver chosen from the config (tests). */
  receiver?: Receiver;
  /** Extra fields for the embedded store's lock file. */
  lock?: Partial<LockInfo>;
}

export class ChronosService {
  readonly alarms: AlarmService;
  readonly dispatcher: Dispatcher;
  readonly metrics = new Metrics();
  readonly dbClock: DbClock;
  #started = false;

  private constructor(
    readonly config: Config,
    readonly db: Db,
    readonly logger: Logger,
    readonly clock: Clock,
    receiver: Receiver,
  ) {
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
    });
    this.dispatcher = new Dispatcher({
      db,
      receiver,
      clock,
      logger: logger.child({ loop: 'dispatcher' }),
      metrics: this.metrics,
      leaseMs: config.leaseMs,
      batchSize: config.batchSize,
      concurrency: config.concurrency,
      pollIntervalMs: config.pollIntervalMs,
      deliveryTimeoutMs: config.deliveryTimeoutMs,
      retry: { baseMs: config.retryBaseMs, maxMs: config.retryMaxMs },
    });
    this.metrics.onScrape(async () => {
      const counts = await alarmsCountByStatus(this.db);
      for (const [status, n] of Object.entries(counts)) this.metrics.alarms.set({ status }, n);
    });
  }

  /** Opens the database (embedded when no DATABASE_URL) and applies migrations. */
  static async open(config: Config, options: ServiceOptions = {}): Promise<ChronosService> {
    const logger = options.logger ?? createLogger(config.logLevel);
    const db =
      options.db ??
      (config.databaseUrl
        ? PgDb.connect(config.databaseUrl, 20)
        : await openEmbedded(config.dataDir, { lock: options.lock }));
    try {
      const applied = await migrate(db);
      if (applied.length > 0) logger.info({ applied }, 'migrations applied');
      const receiver = options.receiver ?? createReceiver(config, logger);
      return new ChronosService(config, db, logger, options.clock ?? systemClock, receiver);
    } catch (error) {
      if (!options.db) await db.close();
      throw error;
    }
  }

  /** Starts the background loops. */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    await this.dispatcher.start();
  }

  /** Stops claiming, lets deliveries finish within the grace period, releases the rest. */
  async stop(): Promise<void> {
    if (!this.#started) return;
    this.#started = false;
    await this.dispatcher.stop(this.config.shutdownGraceMs);
  }

  /** Stops the loops and closes the database. */
  async close(): Promise<void> {
    await this.stop();
    await this.db.close();
  }

  /** Ready when the database answers and every migration is applied. */
  async readiness(): Promise<{ ready: boolean; reason?: string }> {
    try {
      const pending = await pendingMigrations(this.db);
      return pending.length === 0
        ? { ready: true }
        : { ready: false, reason: `migrations pending: ${pending.join(', ')}` };
    } catch (error) {
      return { ready: false, reason: `database unreachable: ${(error as Error).message}` };
    }
  }
}

function createReceiver(config: Config, logger: Logger): Receiver {
  if (!config.routerUrl) {
    logger.warn('CHRONOS_ROUTER_URL is not set: wakes are written to the log instead of delivered');
  }
  return new LogReceiver(logger.child({ receiver: 'log' }));
}
