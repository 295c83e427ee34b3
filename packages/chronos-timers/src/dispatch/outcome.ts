/**
 * What a delivery's result does to its alarm: pure, with `now` (the database clock's estimate)
 * and the random source passed in.
 *
 * - delivered: a once alarm becomes `fired`; a cron or rrule alarm advances to its first
 *   occurrence after now (no catching up, jitter applied) with `failure_count` reset, or becomes
 *   `fired` when none is left (COUNT, UNTIL, past `ends_at`).
 * - a retryable failure below the ceiling: `failure_count` + 1, `last_error`, due again after a
 *   backoff; the occurrence (and its wake) stay the same.
 * - an unreachable target (no connection at all: an outage): due again after a backoff with
 *   `failure_count` unchanged — an outage delays wakes instead of spending their retries.
 * - at the ceiling, or not retryable: a once alarm becomes `failed`; a cron alarm skips this
 *   occurrence and advances (skip-and-advance), staying `active`.
 * - coalesced (an unacknowledged wake absorbed the fire): the alarm advances as if delivered.
 * - expired (contract §3a: claimed past its deadline, due + `expires_after_seconds`): nothing is
 *   sent; a once alarm becomes `expired`, a recurring one skips the occurrence and advances. A
 *   retry that would start past the deadline expires the occurrence at once.
 */
import { nextOccurrence } from '../schedule/next-occurrence.js';
import type { Claim, Outcome } from '../store/claims.js';
import type { ClaimedAlarm } from '../types.js';
import type { Delivery } from '../receivers/receiver.js';
import { retryDelayMs, type RetryPolicy } from './retry-policy.js';
import { capLastError } from '../store/last-error.js';

export interface OutcomeTimes {
  startedAt: Date;
  finishedAt: Date;
  latenessMs: number;
}

/** The alarm's state after an outcome. */
interface After {
  status: Outcome['status'];
  nextFireAt: Date;
  scheduledFor: Date;
  failureCount: number;
}

/** The instant after which the occurrence in hand is given up, or null when it never is. */
export function expiryDeadline(
  alarm: Pick<ClaimedAlarm, 'scheduledFor' | 'expiresAfterSeconds' | 'trigger'>,
): Date | null {
  // A manual fire is an operator's explicit "now": it is delivered whenever it is claimed.
  if (!alarm.expiresAfterSeconds || alarm.trigger === 'manual') return null;
  return new Date(alarm.scheduledFor.getTime() + alarm.expiresAfterSeconds * 1000);
}

/** True when a claim made at `now` is past its occurrence's deadline: it must not be delivered. */
export function isExpired(
  alarm: Pick<ClaimedAlarm, 'scheduledFor' | 'expiresAfterSeconds' | 'trigger'>,
  now: Date,
): boolean {
  const deadline = expiryDeadline(alarm);
  return deadline !== null && now.getTime() > deadline.getTime();
}

export function decideOutcome(
  claim: Claim<ClaimedAlarm>,
  delivery: Delivery | 'coalesced' | 'expired',
  times: OutcomeTimes,
  policy: RetryPolicy,
  random: () => number = Math.random,
): Outcome {
  const { alarm } = claim;
  if (delivery === 'coalesced') {
    return outcome(claim, times, null, 'coalesced', advance(alarm, times), alarm.lastError, times.startedAt);
  }
  if (delivery === 'expired') {
    const after = alarm.kind === 'once' ? stay(alarm, 'expired', alarm.failureCount) : advance(alarm, times);
    return outcome(claim, times, null, 'expired', after, alarm.lastError, null);
  }
  const statusCode = delivery.statusCode ?? null;
  if (delivery.ok) {
    const after = alarm.kind === 'once' ? stay(alarm, 'fired', alarm.failureCount) : advance(alarm, times);
    return outcome(claim, times, statusCode, 'delivered', after, alarm.lastError, times.startedAt);
  }

  // A target that could not be reached at all is an outage, not this wake's failure: it is tried
  // again (the receiver holds deliveries meanwhile) without spending a retry.
  const spent = delivery.unreachable ? 0 : 1;
  const failureCount = alarm.failureCount + spent;
  const lastError = capLastError(delivery.error);
  if (delivery.retryable && (spent === 0 || failureCount < alarm.maxFailures)) {
    // An outage's retries back off by the attempts made, as the failures that count do.
    const delay = retryDelayMs(
      spent ? failureCount : Math.max(1, claim.attempt),
      policy,
      random,
      delivery.retryAfterMs,
    );
    const retryAt = new Date(times.finishedAt.getTime() + delay);
    const deadline = expiryDeadline(alarm);
    if (deadline !== null && retryAt.getTime() > deadline.getTime()) {
      // No attempt may start past the deadline: the occurrence is given up now.
      const after = alarm.kind === 'once' ? stay(alarm, 'expired', failureCount) : advance(alarm, times);
      return outcome(claim, times, statusCode, 'expired', after, lastError, null);
    }
    const after: After = {
      status: 'active',
      nextFireAt: retryAt,
      scheduledFor: alarm.scheduledFor,
      failureCount,
    };
    return outcome(claim, times, statusCode, 'retry', after, lastError, null);
  }
  const after = alarm.kind === 'once' ? stay(alarm, 'failed', failureCount) : advance(alarm, times);
  return outcome(claim, times, statusCode, 'failed', after, lastError, null);
}

/**
 * A cron alarm moves to its first occurrence after the outcome, with its failures reset — or,
 * after a manual fire, back to the scheduled occurrence the manual fire stepped in front of.
 */
function advance(alarm: ClaimedAlarm, times: OutcomeTimes): After {
  const next = alarm.heldOccurrence ?? nextOccurrence(alarm, times.finishedAt);
  // None left (COUNT, UNTIL, ends_at): the alarm is done, as a one-shot is once delivered.
  if (next === null) return stay(alarm, 'fired', 0);
  return { status: alarm.status, nextFireAt: next, scheduledFor: next, failureCount: 0 };
}

function stay(alarm: ClaimedAlarm, status: Outcome['status'], failureCount: number): After {
  return { status, nextFireAt: alarm.nextFireAt, scheduledFor: alarm.scheduledFor, failureCount };
}

// One literal of fixed shape: object spreads here cost microseconds per fire.
function outcome(
  claim: Claim<ClaimedAlarm>,
  times: OutcomeTimes,
  statusCode: number | null,
  result: Outcome['result'],
  after: After,
  lastError: string,
  lastFiredAt: Date | null,
): Outcome {
  return {
    alarmId: claim.alarm.id,
    row: claim.row,
    leaseToken: claim.leaseToken,
    wakeId: claim.wakeId,
    attempt: claim.attempt,
    result,
    status: after.status,
    nextFireAt: after.nextFireAt,
    scheduledFor: after.scheduledFor,
    failureCount: after.failureCount,
    lastError,
    lastFiredAt,
    startedAt: times.startedAt,
    finishedAt: times.finishedAt,
    latenessMs: times.latenessMs,
    statusCode,
  };
}
