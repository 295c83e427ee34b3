/**
 * What a dispatcher hands a fire to: the router's webhook, an in-process handler, or the log.
 */
import type { Alarm, ClaimedAlarm, Trigger } from '../types.js';

/** `A`: the whole alarm (what `chronos serve`'s claims read), or a library worker's `ClaimedAlarm`. */
export interface Fire<A extends ClaimedAlarm = Alarm> {
  alarm: A;
  /** Stable across retries of the same occurrence: the receiver's deduplication key (I3). */
  wakeId: string;
  /** 1 for the first attempt at this wake. */
  attempt: number;
  fireCount: number;
  /** What brought this wake: the schedule, or a "fire now". */
  trigger: Trigger;
  /** The W3C traceparent to carry (the deliver span's, or the creating request's), or ''. */
  traceparent: string;
  scheduledFor: Date;
  /** When this attempt started, by the database clock. */
  firedAt: Date;
  latenessMs: number;
}

export type Delivery =
  | { ok: true; statusCode?: number }
  | {
      ok: false;
      /** Recorded in `last_error`: says what happened, never a secret. */
      error: string;
      /** False when trying again cannot help (a 4xx other than 408/429): the occurrence fails now. */
      retryable: boolean;
      /**
       * True when the target could not be reached at all (no connection: refused, no such host):
       * an outage, so the attempt does not count against the alarm's `max_failures`.
       */
      unreachable?: boolean;
      statusCode?: number;
      retryAfterMs?: number;
    };

/** `A`: what of the alarm it reads; one that reads only a `ClaimedAlarm` can take any claim's fire. */
export interface Receiver<A extends ClaimedAlarm = Alarm> {
  readonly name: string;
  /**
   * Must settle; `signal` aborts when the lease would otherwise be outlived. Never throws. A
   * property, not a method, so that TypeScript checks what of the alarm it needs. A receiver that
   * knows the answer at once (an in-process handler that returned) gives it as it is: the
   * dispatcher then finishes the delivery without a promise.
   */
  deliver: (fire: Fire<A>, signal: AbortSignal) => Delivery | Promise<Delivery>;
  /**
   * Optional: how long the dispatcher should wait before claiming more (the receiver's target is
   * known to be unreachable), 0 to claim now. Held wakes are not attempted, so an outage delays
   * them instead of spending their retries; they are not lost.
   */
  holdMs?(): number;
  /** Optional: releases what the receiver holds (kept-alive connections); the service calls it on close. */
  close?(): Promise<void>;
}
