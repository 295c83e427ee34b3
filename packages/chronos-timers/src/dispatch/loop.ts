/**
 * The background loop every poller of Chronos runs on — the dispatcher's claims, the tracker's
 * stages, a library worker's pruner: look, then sleep until the look says, or until poked.
 *
 * A look is the owner's: it does one round of work and resolves with how long to sleep before
 * the next (0: look again at once, more is due). The loop owns the rest, once for all of them:
 * start and stop, the wake-up (a poke cuts a sleep short), and what a failed look costs — it is
 * logged, counted in `chronos_loop_errors_total{loop}`, and tried again after a backoff that
 * doubles while looks keep failing. River keeps the same split: a maintenance service a file, on
 * one base service that starts, stops and loops them.
 */
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { LoopMetrics } from '../loop-metrics.js';

/** The first wait after a failed look, doubled at each failure that follows, up to the most. */
const ERROR_DELAY_MS = 100;
const ERROR_DELAY_MAX_MS = 5_000;

export interface LoopOptions {
  /** The `loop` label its failures are counted under. */
  name: 'dispatcher' | 'tracker';
  /** The log line of a failed look. */
  errorMessage: string;
  /** One round of work; resolves with the milliseconds to sleep before the next (0: none). */
  look: () => Promise<number>;
  clock: Clock;
  logger: Logger;
  metrics?: LoopMetrics;
}

export class Loop {
  readonly #options: LoopOptions;
  #running: Promise<void> | null = null;
  #stopping = false;
  #wake = new AbortController();

  constructor(options: LoopOptions) {
    this.#options = options;
  }

  /** Started and not yet stopped. */
  get running(): boolean {
    return this.#running !== null;
  }

  /** stop() was called: the look under way is the last. */
  get stopping(): boolean {
    return this.#stopping;
  }

  /** Starts looking, at once; a second start() while running does nothing. */
  start(): void {
    if (this.#running) return;
    this.#stopping = false;
    this.#running = this.#run();
  }

  /** Cuts the sleep under way short, or the next one if a look is under way. */
  poke(): void {
    this.#wake.abort();
  }

  /** Resolves once the look under way (if any) has ended; no look starts after it. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.poke();
    await this.#running;
    this.#running = null;
  }

  async #run(): Promise<void> {
    const { look, logger, metrics, name, errorMessage } = this.#options;
    let errorDelayMs = ERROR_DELAY_MS;
    while (!this.#stopping) {
      // Re-armed before looking, not before sleeping: a poke that lands while the look runs (a
      // NOTIFY or an ack for a row it may not have seen) must cut the sleep after it short.
      if (this.#wake.signal.aborted) this.#wake = new AbortController();
      try {
        const waitMs = await look();
        errorDelayMs = ERROR_DELAY_MS;
        if (waitMs > 0) await this.#sleep(waitMs);
      } catch (error) {
        metrics?.loopErrors.inc({ loop: name });
        logger.error({ err: error }, errorMessage);
        await this.#sleep(errorDelayMs);
        errorDelayMs = Math.min(errorDelayMs * 2, ERROR_DELAY_MAX_MS);
      }
    }
  }

  /** Sleeps for `ms` or until poked; a poke since the loop last re-armed returns at once. */
  async #sleep(ms: number): Promise<void> {
    if (this.#stopping) return;
    await this.#options.clock.sleep(ms, this.#wake.signal);
  }
}
