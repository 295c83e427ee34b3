/**
 * What a delivery's result does to its alarm: pure, with `now` (the database clock's estimate)
 * and the random source passed in.
 *
 * - delivered: a once alarm becomes `fired`; a cron alarm advances to its first occurrence
 *   after now (no catching up) with `failure_count` reset.
 * - a retryable failure below the ceiling: `failure_count` + 1, `last_error`, due again after a
 *   backoff; the occurrence (and its wake) stay the same.
 * - at the ceiling, or not retryable: a once alarm becomes `failed`; a cron alarm skips this
 *   occurrence and advances (skip-and-advance), staying `active`.
 * - coalesced (an unacknowledged wake absorbed the fire): the alarm advances as if delivered.
 */
import { parseCron, type CronSchedule } from '../schedule/cron.js';
import type { Claim, Outcome } from '../store/claims.js';
import type { Alarm } from '../types.js';
import type { Delivery } from '../receivers/receiver.js';
import { retryDelayMs, type RetryPolicy } from './retry-policy.js';

export interface OutcomeTimes {
  startedAt: Date;
  finishedAt: Date;
  latenessMs: number;
}

const cronCache = new Map<string, CronSchedule>();

/** The first occurrence of a cron alarm strictly after `now` (anchored on its occurrence in hand). */
export function nextOccurrence(
  alarm: Pick<Alarm, 'cronExpr' | 'timezone' | 'scheduledFor'>,
  now: Date,
): Date {
  const cacheKey = `${alarm.timezone}\u0000${alarm.cronExpr}`;
  let schedule = cronCache.get(cacheKey);
  if (!schedule) {
    schedule = parseCron(alarm.cronExpr, alarm.timezone);
    if (cronCache.size > 1_000) cronCache.clear();
    cronCache.set(cacheKey, schedule);
  }
  return schedule.next(now, alarm.scheduledFor);
}

export function decideOutcome(
  claim: Claim,
  delivery: Delivery | 'coalesced',
  times: OutcomeTimes,
  policy: RetryPolicy,
  random: () => number = Math.random,
): Outcome {
  const { alarm } = claim;
  const now = times.finishedAt;
  const base = {
    alarmId: alarm.id,
    leaseToken: claim.leaseToken,
    wakeId: claim.wakeId,
    attempt: claim.attempt,
    startedAt: times.startedAt,
    finishedAt: times.finishedAt,
    latenessMs: times.latenessMs,
    lastError: alarm.lastError,
    statusCode: delivery !== 'coalesced' ? (delivery.statusCode ?? null) : null,
  };
  const advance = () => {
    const next = nextOccurrence(alarm, now);
    return { status: 'active' as const, nextFireAt: next, scheduledFor: next, failureCount: 0 };
  };

  if (delivery === 'coalesced') {
    return { ...base, result: 'coalesced', ...advance(), lastFiredAt: times.startedAt };
  }
  if (delivery.ok) {
    const after =
      alarm.kind === 'once'
        ? {
            status: 'fired' as const,
            nextFireAt: alarm.nextFireAt,
            scheduledFor: alarm.scheduledFor,
            failureCount: alarm.failureCount,
          }
        : advance();
    return { ...base, result: 'delivered', ...after, lastFiredAt: times.startedAt };
  }

  const failureCount = alarm.failureCount + 1;
  const lastError = delivery.error.slice(0, 1_000);
  if (delivery.retryable && failureCount < alarm.maxFailures) {
    const delay = retryDelayMs(failureCount, policy, random, delivery.retryAfterMs);
    return {
      ...base,
      result: 'retry',
      status: 'active',
      nextFireAt: new Date(now.getTime() + delay),
      scheduledFor: alarm.scheduledFor,
      failureCount,
      lastError,
      lastFiredAt: null,
    };
  }
  if (alarm.kind === 'once') {
    return {
      ...base,
      result: 'failed',
      status: 'failed',
      nextFireAt: alarm.nextFireAt,
      scheduledFor: alarm.scheduledFor,
      failureCount,
      lastError,
      lastFiredAt: null,
    };
  }
  return { ...base, result: 'failed', ...advance(), lastError, lastFiredAt: null };
}
