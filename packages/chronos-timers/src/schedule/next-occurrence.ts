/**
 * The next occurrence of a cron alarm after an instant, anchored on the occurrence it had in hand
 * (so `@every` keeps its grid). Parsed schedules are cached by zone and expression. Pure but for
 * that cache: `now` is an argument.
 */
import type { Alarm } from '../types.js';
import { parseCron, type CronSchedule } from './cron.js';

const cronCache = new Map<string, CronSchedule>();

/** The first occurrence of a cron alarm strictly after `now`. */
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
