/**
 * The only source of "now" in src/.
 *
 * Due-ness is never decided here: the database's `now()` decides it (I5). This clock serves
 * in-process maths — backoff, the next cron occurrence — and sleeping. Tests pass a TestClock
 * and advance it instead of sleeping.
 */

export interface Clock {
  now(): Date;
  /** Resolves after `ms`, or early (without throwing) when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => new Date(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      const timer = setTimeout(done, Math.max(0, ms));
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      }
      signal?.addEventListener('abort', done, { once: true });
    }),
};

const RealDate = Date;

/**
 * Test only: moves this process's wall clock `offsetMs` away from the host's, as on a host whose
 * clock is wrong (`CHRONOS_TEST_CLOCK_OFFSET`, used by the clock-skew scenario). It replaces the
 * global `Date`, so every reading of the wall clock in the process — this module's, the logger's,
 * the libraries' — is shifted; timers and `performance.now()` are not (a wrong wall clock does not
 * make time pass faster). Calling it again replaces the offset; 0 restores the real clock.
 */
export function shiftProcessClock(offsetMs: number): void {
  if (offsetMs === 0) {
    globalThis.Date = RealDate;
    return;
  }
  class ShiftedDate extends RealDate {
    constructor(...args: unknown[]) {
      if (args.length === 0) super(RealDate.now() + offsetMs);
      else super(...(args as ConstructorParameters<DateConstructor>));
    }

    static override now(): number {
      return RealDate.now() + offsetMs;
    }

    // Dates made before the shift (or by code holding the real constructor) are still Dates.
    static override [Symbol.hasInstance](value: unknown): boolean {
      return value instanceof RealDate;
    }
  }
  globalThis.Date = ShiftedDate as DateConstructor;
}

/**
 * A clock that moves only when told to. Sleepers wake when `advance()` passes their deadline or
 * their signal aborts.
 */
export class TestClock implements Clock {
  #now: number;
  #sleepers = new Set<{ until: number; wake: () => void }>();

  constructor(start: Date = new Date()) {
    this.#now = start.getTime();
  }

  now(): Date {
    return new Date(this.#now);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      const sleeper = {
        until: this.#now + Math.max(0, ms),
        wake: () => {
          this.#sleepers.delete(sleeper);
          signal?.removeEventListener('abort', sleeper.wake);
          resolve();
        },
      };
      if (sleeper.until <= this.#now) return resolve();
      this.#sleepers.add(sleeper);
      signal?.addEventListener('abort', sleeper.wake, { once: true });
    });
  }

  /** Moves time forward and wakes every sleeper whose deadline has passed. */
  advance(ms: number): void {
    this.#now += ms;
    for (const sleeper of [...this.#sleepers]) if (sleeper.until <= this.#now) sleeper.wake();
  }

  set(to: Date): void {
    this.advance(to.getTime() - this.#now);
  }

  get sleeping(): number {
    return this.#sleepers.size;
  }
}
