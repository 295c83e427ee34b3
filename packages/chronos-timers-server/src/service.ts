/**
 * The server's composition root, for `chronos serve`: the library's `ChronosCore` (store,
 * services, the router's dispatcher, retention) with what only a server runs — the tracker
 * (nudges, escalations, receipts, heads-ups, retention), the router's webhook receiver,
 * Prometheus metrics and the schedules file's watcher. HTTP, MCP and the CLI are built on a
 * ChronosService (`server.ts`, `cli/`) and none of them reaches the store but through it.
 *
 * - `start()` runs what `chronos serve` runs: the dispatcher of the queue `router` (wakes to the
 *   router), the tracker, the watch for revoked keys, and the schedules file's watcher when
 *   `CHRONOS_SCHEDULES_FILE` is set.
 */
import type { Clock } from 'chronos-timers/internal';
import type { Config } from 'chronos-timers/internal';
import { ChronosCore, type CoreOptions, type CoreParts } from 'chronos-timers/internal';
import type { Logger } from 'chronos-timers/internal';
import { Metrics } from './metrics.js';
import { LogReceiver } from 'chronos-timers/internal';
import type { Receiver } from 'chronos-timers/internal';
import { SchedulesFileWatcher } from './schedules-file/watcher.js';
import { alarmsCountByStatus } from 'chronos-timers/internal';
import { deliveryRetryQueueDepth } from 'chronos-timers/internal';
import { Tracker } from './tracker/tracker.js';

export { ChronosCore, LOOP_CONNECTIONS, reportStoredRepairs } from 'chronos-timers/internal';
export type { CoreOptions, CoreParts, DatabaseStatus, Transaction } from 'chronos-timers/internal';

export interface ServiceOptions extends Omit<CoreOptions, 'metrics' | 'receiver'> {
  /** Overrides the receiver chosen from the config (tests). */
  receiver?: Receiver;
  /** Prometheus metrics for `/metrics` (the default). */
  metrics?: boolean;
}

export class ChronosService extends ChronosCore {
  /** Nudges, escalations, ack receipts and retention of wakes (contract §7); schedules-file heads-ups. */
  readonly tracker: Tracker;
  /** The watcher of `CHRONOS_SCHEDULES_FILE` while started; null otherwise. */
  schedulesFileWatcher: SchedulesFileWatcher | null = null;
  readonly #metrics: Metrics | undefined;

  private constructor(parts: CoreParts, metrics: Metrics | undefined) {
    super(parts);
    const { config, logger, clock } = this;
    this.#metrics = metrics;
    this.tracker = new Tracker({
      db: this.loopsDb,
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
    if (metrics) this.#collectAtScrape(metrics);
  }

  /**
   * Opens the store — the options' own, `DATABASE_URL`, or the embedded store in `dataDir` —
   * in the configured schema, and applies migrations (unless `migrate: false`).
   */
  static async open(config: Config, options: ServiceOptions = {}): Promise<ChronosService> {
    const metrics = (options.metrics ?? true) ? new Metrics() : undefined;
    const parts = await ChronosCore.openParts(config, {
      ...options,
      metrics,
      receiver: options.receiver ?? ((logger, clock) => createReceiver(config, logger, clock, metrics)),
    });
    return new ChronosService(parts, metrics);
  }

  /** Prometheus metrics, for `/metrics`; a service opened with `metrics: false` has none. */
  get metrics(): Metrics {
    if (!this.#metrics) throw new Error('this ChronosService was opened with metrics: false');
    return this.#metrics;
  }

  protected override headsUpsWritten(): void {
    this.tracker.poke();
  }

  /** The figures read from the database when `/metrics` is scraped. */
  #collectAtScrape(metrics: Metrics): void {
    metrics.onScrape(async () => {
      const counts = await alarmsCountByStatus(this.db);
      for (const [status, n] of Object.entries(counts)) metrics.alarms.set({ status }, n);
    });
    metrics.onScrape(async () => {
      metrics.retryQueueDepth.set(await deliveryRetryQueueDepth(this.db));
    });
    // Failovers seen by a multi-host DATABASE_URL (issue 16).
    let hostChanges = 0;
    metrics.onScrape(async () => {
      const changes = this.databaseStatus()?.changes ?? 0;
      metrics.dbHostChanges.inc(changes - hostChanges);
      hostChanges = changes;
    });
  }

  /** Starts what `chronos serve` runs: the router's dispatcher, the tracker, the key watch. */
  override async start(): Promise<void> {
    if (this.started) return;
    await super.start();
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
  override async stop(): Promise<void> {
    if (!this.started) return;
    await this.schedulesFileWatcher?.stop();
    this.schedulesFileWatcher = null;
    await Promise.all([super.stop(), this.tracker.stop(this.config.shutdownGraceMs)]);
  }

  /** Stops the loops and closes the store (an application's own pool or PGlite is left open). */
  override async close(): Promise<void> {
    await this.stop();
    await this.tracker.close();
    await super.close();
  }
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
