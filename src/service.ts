/**
 * The composition root: builds the store, the loops and the shared services from a Config.
 * Surfaces (HTTP, MCP, CLI) are built on top of a ChronosService; loops never import surfaces.
 */
import { AlarmService } from './core/alarm-service.js';
import { shiftProcessClock, systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import { Dispatcher } from './dispatch/dispatcher.js';
import { KeyService } from './core/key-service.js';
import { createLogger, type Logger } from './logger.js';
import { Metrics } from './metrics.js';
import { LogReceiver } from './receivers/log.js';
import type { Receiver } from './receivers/receiver.js';
import { WebhookReceiver } from './receivers/webhook.js';
import { alarmsCountByStatus } from './store/alarms.js';
import { DbClock } from './store/db-clock.js';
import { deliveryRetryQueueDepth } from './store/delivery-stats.js';
import { PgDb, type Db } from './store/db.js';
import { openEmbedded, type LockInfo } from './store/embedded.js';
import { migrate, pendingMigrations } from './store/migrate.js';
import { serverSettingsWarning } from './store/server-settings.js';
import { Tracker } from './tracker/tracker.js';
import { WakeService } from './core/wake-service.js';

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
  /** API keys: create, revoke, authenticate (HTTP and the CLI). */
  readonly keys: KeyService;
  /** Wake records: list, ack, reported replies (HTTP, MCP; the tracker hooks onAcknowledged). */
  readonly wakes: WakeService;
  /** Nudges, escalations, ack receipts and retention of wakes (contract §7). */
  readonly tracker: Tracker;
  #unwatchKeys: (() => Promise<void>) | null = null;
  /** Where fires go: the router's webhook, or the log when no router is configured. */
  readonly receiver: Receiver;
  #started = false;

  private constructor(
    readonly config: Config,
    readonly db: Db,
    readonly logger: Logger,
    readonly clock: Clock,
    receiver: Receiver | undefined,
  ) {
    this.receiver = receiver ?? createReceiver(config, logger, clock, this.metrics);
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
    this.keys = new KeyService(db, { clock });
    this.wakes = new WakeService({
      db,
      replyWindowMs: config.replyWindowMs,
      logger: logger.child({ component: 'wakes' }),
    });
    this.tracker = new Tracker({
      db,
      clock,
      logger: logger.child({ loop: 'tracker' }),
      metrics: this.metrics,
      nudgeAfterMs: config.nudgeAfterMs,
      escalateAfterMs: config.escalateAfterMs,
      retentionMs: config.retentionMs,
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
    this.dispatcher = new Dispatcher({
      db,
      receiver: this.receiver,
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
    this.metrics.onScrape(async () => {
      this.metrics.retryQueueDepth.set(await deliveryRetryQueueDepth(this.db));
    });
  }

  /** Opens the database (embedded when no DATABASE_URL) and applies migrations. */
  static async open(config: Config, options: ServiceOptions = {}): Promise<ChronosService> {
    const logger = options.logger ?? createLogger(config.logLevel);
    if (config.testClockOffsetMs !== 0) {
      shiftProcessClock(config.testClockOffsetMs);
      logger.warn(
        { offsetMs: config.testClockOffsetMs },
        'CHRONOS_TEST_CLOCK_OFFSET is set: this process runs with its wall clock shifted (for tests only)',
      );
    }
    const db =
      options.db ??
      (config.databaseUrl
        ? PgDb.connect(config.databaseUrl, 20, {
            // A request fails (the API answers 503) instead of hanging while the database is away.
            connectionTimeoutMillis: config.dbConnectTimeoutMs,
          })
        : await openEmbedded(config.dataDir, { lock: options.lock }));
    try {
      const applied = await migrate(db);
      if (applied.length > 0) logger.info({ applied }, 'migrations applied');
      // The embedded store runs single-user: PostgreSQL's autovacuum never runs there, and
      // PGlite plans every statement anew.
      const warning = db.kind === 'postgres' ? await serverSettingsWarning(db) : null;
      if (warning) logger.warn(warning);
      return new ChronosService(config, db, logger, options.clock ?? systemClock, options.receiver);
    } catch (error) {
      if (!options.db) await db.close();
      throw error;
    }
  }

  /** Starts the background loops. */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    this.#unwatchKeys = await this.keys.watch();
    await this.dispatcher.start();
    await this.tracker.start();
  }

  /** Stops claiming, lets deliveries finish within the grace period, releases the rest. */
  async stop(): Promise<void> {
    if (!this.#started) return;
    this.#started = false;
    await Promise.all([
      this.dispatcher.stop(this.config.shutdownGraceMs),
      this.tracker.stop(this.config.shutdownGraceMs),
    ]);
    await this.#unwatchKeys?.();
    this.#unwatchKeys = null;
  }

  /** Stops the loops and closes the database. */
  async close(): Promise<void> {
    await this.stop();
    if (this.receiver instanceof WebhookReceiver) await this.receiver.close();
    await this.tracker.close();
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

function createReceiver(config: Config, logger: Logger, clock: Clock, metrics: Metrics): Receiver {
  if (!config.routerUrl) {
    logger.warn('CHRONOS_ROUTER_URL is not set: wakes are written to the log instead of delivered');
    return new LogReceiver(logger.child({ receiver: 'log' }));
  }
  if (config.webhookSecrets.length === 0) {
    logger.warn(
      'CHRONOS_WEBHOOK_SECRET is not set: wakes are POSTed to the router unsigned (no webhook-signature header)',
    );
  }
  return new WebhookReceiver({
    url: config.routerUrl,
    secrets: config.webhookSecrets,
    timeoutMs: config.deliveryTimeoutMs,
    concurrency: config.concurrency,
    clock,
    metrics,
    logger: logger.child({ receiver: 'webhook' }),
  });
}
