/**
 * The in-process receiver: calls the library user's handler. A handler that throws (or rejects)
 * is a failed delivery, retried with backoff up to the alarm's ceiling.
 */
import type { ClaimedAlarm } from '../types.js';
import type { Delivery, Fire, Receiver } from './receiver.js';

/** What a library handler receives (contract §9). */
export interface TimerFire {
  key: string;
  alarmId: string;
  /** The payload parsed; numbers beyond double precision lose digits here, use `payloadText`. */
  payload: unknown;
  /** The payload as stored, verbatim. */
  payloadText: string;
  scheduledFor: Date;
  firedAt: Date;
  latenessMs: number;
  attempt: number;
  /** Stable across retries of this fire: deduplicate on it. */
  wakeId: string;
  signal: AbortSignal;
}

export type TimerHandler = (fire: TimerFire) => unknown;

export class HandlerReceiver implements Receiver<ClaimedAlarm> {
  readonly name = 'handler';

  constructor(private readonly handler: TimerHandler) {}

  deliver(fire: Fire<ClaimedAlarm>, signal: AbortSignal): Delivery | Promise<Delivery> {
    let result: unknown;
    try {
      result = this.handler({
        key: fire.alarm.idempotencyKey,
        alarmId: fire.alarm.id,
        payload: fire.alarm.payload.parse(),
        payloadText: fire.alarm.payload.text,
        scheduledFor: fire.scheduledFor,
        firedAt: fire.firedAt,
        latenessMs: fire.latenessMs,
        attempt: fire.attempt,
        wakeId: fire.wakeId,
        signal,
      });
    } catch (error) {
      return threw(error);
    }
    // A handler that returned (not a promise) has answered: no promise is made for it.
    if (!isThenable(result)) return DELIVERED;
    return Promise.resolve(result).then(() => DELIVERED, threw);
  }
}

const DELIVERED: Delivery = { ok: true };

function threw(error: unknown): Delivery {
  const message = error instanceof Error ? error.message : String(error);
  return { ok: false, retryable: true, error: `handler threw: ${message}` };
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
