/**
 * Prometheus metrics, one registry per service (so several services can live in one process,
 * as they do in tests). Surfaces and loops record here; `/metrics` renders it.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

const LATENESS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600];

export class Metrics {
  readonly registry = new Registry();
  /** Sources read at scrape time (e.g. counts from the database); a failing one is skipped. */
  readonly #collectors: (() => Promise<void>)[] = [];

  readonly alarms = new Gauge({
    name: 'chronos_alarms',
    help: 'Alarms by status (read from the database at scrape time).',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });

  onScrape(collector: () => Promise<void>): void {
    this.#collectors.push(collector);
  }

  readonly deliveries = new Counter({
    name: 'chronos_deliveries_total',
    help: 'Delivery attempts by outcome: delivered, retry, failed, coalesced, fenced.',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly lateness = new Histogram({
    name: 'chronos_lateness_seconds',
    help: 'Delivered (or coalesced) time minus the due instant, by the database clock.',
    buckets: LATENESS_BUCKETS,
    registers: [this.registry],
  });

  readonly storedRepairs = new Counter({
    name: 'chronos_stored_rows_repaired_total',
    help: 'Alarms a migration found stored past the payload limits: failed if live, payload replaced by {}.',
    registers: [this.registry],
  });

  readonly claims = new Counter({
    name: 'chronos_claimed_total',
    help: 'Alarms claimed by this instance.',
    registers: [this.registry],
  });

  readonly claimSeconds = new Histogram({
    name: 'chronos_claim_duration_seconds',
    help: 'Duration of one claim statement.',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });

  readonly attemptSeconds = new Histogram({
    name: 'chronos_delivery_attempt_seconds',
    help: 'Duration of one delivery attempt.',
    labelNames: ['receiver'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly inFlight = new Gauge({
    name: 'chronos_deliveries_in_flight',
    help: 'Deliveries under way on this instance.',
    registers: [this.registry],
  });

  readonly webhookAttemptSeconds = new Histogram({
    name: 'chronos_webhook_attempt_seconds',
    help: 'Duration of one webhook POST to the router, by result: 2xx, 3xx, 4xx, 5xx, timeout, network.',
    labelNames: ['result'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly routerHeld = new Gauge({
    name: 'chronos_router_held',
    help: '1 while webhook deliveries are held because the router cannot be reached, else 0.',
    registers: [this.registry],
  });

  readonly retryQueueDepth = new Gauge({
    name: 'chronos_retry_queue_depth',
    help: 'Active alarms waiting to retry a failed delivery (failure_count > 0), read at scrape time.',
    registers: [this.registry],
  });

  readonly dbHostChanges = new Counter({
    name: 'chronos_db_host_changes_total',
    help: 'Times a multi-host DATABASE_URL moved to another host (a failover found a new primary).',
    registers: [this.registry],
  });

  readonly loopErrors = new Counter({
    name: 'chronos_loop_errors_total',
    help: 'Errors caught by a background loop (it logs, counts and carries on).',
    labelNames: ['loop'] as const,
    registers: [this.registry],
  });

  readonly httpSeconds = new Histogram({
    name: 'chronos_http_request_duration_seconds',
    help: 'HTTP requests by method, route pattern and status code, from arrival to the last byte sent.',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  // The tracker (src/tracker/tracker.ts): wakes by stage, sends per stage, time to ack.

  readonly wakesByStage = new Gauge({
    name: 'chronos_wakes',
    help: 'Wakes by stage: pending, delivered (no ack needed), awaiting_ack, nudged, escalated, acknowledged, failed (read at scrape time).',
    labelNames: ['stage'] as const,
    registers: [this.registry],
  });

  readonly trackerBacklog = new Gauge({
    name: 'chronos_tracker_backlog',
    help: 'Nudges, escalations and receipts due and not yet accepted: under way, waiting to retry, or unsent for want of a URL (read at scrape time).',
    labelNames: ['stage'] as const,
    registers: [this.registry],
  });

  readonly nudges = new Counter({
    name: 'chronos_nudges_total',
    help: 'alarm.nudge messages accepted by the router (or logged, with no router), by this instance.',
    registers: [this.registry],
  });

  readonly escalations = new Counter({
    name: 'chronos_escalations_total',
    help: 'wake.escalated messages accepted (2xx) by the fallback URL, by this instance.',
    registers: [this.registry],
  });

  readonly receipts = new Counter({
    name: 'chronos_receipts_total',
    help: 'wake.acknowledged receipts accepted (2xx) by the fallback URL, by this instance.',
    registers: [this.registry],
  });

  readonly trackerFailures = new Counter({
    name: 'chronos_tracker_failures_total',
    help: 'Tracker sends not accepted (retried later), by stage and result: 3xx, 4xx, 5xx, timeout, network.',
    labelNames: ['stage', 'result'] as const,
    registers: [this.registry],
  });

  readonly timeToAck = new Histogram({
    name: 'chronos_time_to_ack_seconds',
    help: 'From the fire to its acknowledgement, by whether the ack was inferred from a reply.',
    labelNames: ['inferred'] as const,
    buckets: [1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400],
    registers: [this.registry],
  });

  readonly wakesPruned = new Counter({
    name: 'chronos_wakes_pruned_total',
    help: 'Finished wakes deleted after the retention period, by this instance.',
    registers: [this.registry],
  });

  async render(): Promise<string> {
    await Promise.all(this.#collectors.map((collect) => collect().catch(() => undefined)));
    return this.registry.metrics();
  }
}
