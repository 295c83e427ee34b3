/**
 * Rate-limits log lines under a storm: at most `limit` lines of one kind per window of
 * `windowMs`; past that they are counted, and once the window has ended one summary says how
 * many were left out. Pure: time comes from the clock passed in (src/clock.ts), and the caller
 * writes the lines.
 */
import type { Clock } from '../clock.js';

export interface LogLimits {
  /** Lines of one kind written per window; 20 unless told. */
  limit?: number;
  /** The window's length; 10 s unless told. */
  windowMs?: number;
}

/** A window that ended with lines left out: `suppressed` lines of `kind` in `windowMs`. */
export interface Suppressed<K extends string> {
  kind: K;
  suppressed: number;
  windowMs: number;
}

interface Window {
  startedAt: number;
  written: number;
  suppressed: number;
}

export class LogLimiter<K extends string> {
  readonly limit: number;
  readonly windowMs: number;
  readonly #clock: Pick<Clock, 'now'>;
  readonly #windows = new Map<K, Window>();

  constructor(clock: Pick<Clock, 'now'>, limits: LogLimits = {}) {
    this.#clock = clock;
    this.limit = limits.limit ?? 20;
    this.windowMs = limits.windowMs ?? 10_000;
  }

  /**
   * Whether a line of `kind` may be written now (if not, it is counted), and the summary of this
   * kind's previous window when that window ended with lines left out (to be written first).
   */
  admit(kind: K): { write: boolean; summary: Suppressed<K> | null } {
    const now = this.#clock.now().getTime();
    let summary: Suppressed<K> | null = null;
    let window = this.#windows.get(kind);
    if (!window || now - window.startedAt >= this.windowMs) {
      if (window && window.suppressed > 0) summary = this.#summary(kind, window);
      window = { startedAt: now, written: 0, suppressed: 0 };
      this.#windows.set(kind, window);
    }
    if (window.written < this.limit) {
      window.written++;
      return { write: true, summary };
    }
    window.suppressed++;
    return { write: false, summary };
  }

  /**
   * The summaries of the windows that have ended with lines left out, each given once; with
   * `all`, also those of windows still open (when stopping).
   */
  ended(all = false): Suppressed<K>[] {
    const now = this.#clock.now().getTime();
    const out: Suppressed<K>[] = [];
    for (const [kind, window] of this.#windows) {
      if (window.suppressed === 0) continue;
      if (!all && now - window.startedAt < this.windowMs) continue;
      out.push(this.#summary(kind, window));
      this.#windows.delete(kind);
    }
    return out;
  }

  #summary(kind: K, window: Window): Suppressed<K> {
    return { kind, suppressed: window.suppressed, windowMs: this.windowMs };
  }
}
