/**
 * The schedule maths' one door for a recurring alarm (cron or rrule): the next due instant after
 * the occurrence in hand, with the window (`starts_at`, `ends_at`, contract §3a) and the jitter
 * applied, or null when none is left. Parsed schedules are cached by zone and expression. Pure
 * but for those caches: `now` is an argument.
 *
 * Jitter: an occurrence at instant `o` is due at `o + jitterOffsetMs(id, o, jitterSeconds)`, an
 * offset in [0, jitter_seconds) drawn from a hash of the alarm's id and `o` alone, so every
 * instance, a restart and a re-read agree on it. The jitter is less than the shortest gap between
 * occurrences (checked at create), so the occurrence in hand is the last one at or before its due
 * instant, and the next occurrence is the first one after that due instant.
 */
import { createHash } from 'node:crypto';
import type { Alarm } from '../types.js';
import { parseCron, type CronSchedule } from './cron.js';
import { parseRrule, RruleSchedule } from './rrule.js';

/** What the door reads of an alarm. */
export type RecurrenceFields = Pick<Alarm, 'id' | 'kind' | 'cronExpr' | 'timezone' | 'scheduledFor'> &
  Partial<Pick<Alarm, 'rrule' | 'rruleStart' | 'startsAt' | 'endsAt' | 'jitterSeconds'>>;

const cronCache = new Map<string, CronSchedule>();
const rruleCache = new Map<string, RruleSchedule>();

export function cachedCron(expr: string, timezone: string): CronSchedule {
  const cacheKey = `${timezone}\u0000${expr}`;
  let schedule = cronCache.get(cacheKey);
  if (!schedule) {
    schedule = parseCron(expr, timezone);
    if (cronCache.size > 1_000) cronCache.clear();
    cronCache.set(cacheKey, schedule);
  }
  return schedule;
}

export function cachedRrule(rule: string, timezone: string, start: Date): RruleSchedule {
  const cacheKey = `${timezone}\u0000${start.getTime()}\u0000${rule}`;
  let schedule = rruleCache.get(cacheKey);
  if (!schedule) {
    schedule = new RruleSchedule(parseRrule(rule), timezone, start);
    if (rruleCache.size > 1_000) rruleCache.clear();
    rruleCache.set(cacheKey, schedule);
  }
  return schedule;
}

/**
 * The raw occurrence (no jitter) of a recurring alarm strictly after `after`, within its window,
 * or null. `anchor` is @every's grid origin.
 */
export function occurrenceAfter(
  alarm: Omit<RecurrenceFields, 'id' | 'scheduledFor'>,
  after: Date,
  anchor?: Date,
): Date | null {
  const startsAt = alarm.startsAt ?? null;
  let from = after;
  if (startsAt !== null && startsAt.getTime() - 1 > after.getTime()) from = new Date(startsAt.getTime() - 1);
  let next: Date | null;
  if (alarm.kind === 'rrule') {
    const start = alarm.rruleStart ?? startsAt;
    if (!alarm.rrule || start === null) throw new Error(`an rrule alarm needs its rule and start`);
    next = cachedRrule(alarm.rrule, alarm.timezone, start).next(from);
  } else {
    next = cachedCron(alarm.cronExpr, alarm.timezone).next(from, anchor ?? startsAt ?? undefined);
  }
  if (next !== null && alarm.endsAt && next.getTime() > alarm.endsAt.getTime()) return null;
  return next;
}

/** The offset in [0, jitterSeconds · 1000) ms of the occurrence at `occurrence`, for alarm `id`. */
export function jitterOffsetMs(id: string, occurrence: Date, jitterSeconds: number | undefined): number {
  if (!jitterSeconds || jitterSeconds <= 0) return 0;
  const digest = createHash('sha256').update(`${id.toLowerCase()}\u0000${occurrence.getTime()}`).digest();
  // 48 bits, uniform enough for any range of at most 3,600,000 ms.
  return Math.floor((digest.readUIntBE(0, 6) / 2 ** 48) * jitterSeconds * 1000);
}

/** The due instant of a raw occurrence: with its jitter. */
export function dueAt(alarm: Pick<RecurrenceFields, 'id' | 'jitterSeconds'>, occurrence: Date): Date {
  return new Date(occurrence.getTime() + jitterOffsetMs(alarm.id, occurrence, alarm.jitterSeconds));
}

/**
 * The due instant of the first occurrence after the one in hand whose due instant is after `now`
 * (no catching up), or null when none is left (the alarm is then `fired`).
 */
export function nextDue(alarm: RecurrenceFields, now: Date): Date | null {
  const jitterMs = (alarm.jitterSeconds ?? 0) * 1000;
  if (jitterMs === 0) return occurrenceAfter(alarm, now, alarm.scheduledFor);
  const from = Math.max(alarm.scheduledFor.getTime(), now.getTime() - jitterMs);
  let occurrence = occurrenceAfter(alarm, new Date(from), alarm.scheduledFor);
  for (let step = 0; occurrence !== null && step < 10_000; step++) {
    const due = dueAt(alarm, occurrence);
    if (due.getTime() > now.getTime()) return due;
    occurrence = occurrenceAfter(alarm, occurrence, alarm.scheduledFor);
  }
  return null;
}

/** Back-compatible name: the next due instant of a recurring alarm after `now` (see nextDue). */
export function nextOccurrence(alarm: RecurrenceFields, now: Date): Date | null {
  return nextDue(alarm, now);
}
