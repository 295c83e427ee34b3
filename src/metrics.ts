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

  readonly loopErrors = new Counter({
    name: 'chronos_loop_errors_total',
    help: 'Errors caught by a background loop (it logs, counts and carries on).',
    labelNames: ['loop'] as const,
    registers: [this.registry],
  });

  async render(): Promise<string> {
    await Promise.all(this.#collectors.map((collect) => collect().catch(() => undefined)));
    return this.registry.metrics();
  }
}
