/**
 * The dashboard's figures (contract §15), for one owner or — `owner` null, the operator's view —
 * for every owner: lateness of scheduled fires per minute over the last minutes, and fires due
 * per minute over the coming hours.
 *
 * Minutes are whole UTC minutes and every minute of the window is answered, those without fires
 * too (a chart needs no gaps filled). "Now" is the database's clock.
 *
 * Not guaranteed: upcoming fires are counted from at most UPCOMING_MAX_ALARMS alarms and
 * UPCOMING_MAX_FIRES fires (cron schedules expanded by the same maths that schedules them);
 * beyond either the answer says `truncated: true` and undercounts.
 */
import { invalidInput } from '../errors.js';
import { fireTimes } from '../schedule/resolve.js';
import type { DbClock } from '../store/driver/db-clock.js';
import type { Executor } from '../store/driver/db.js';
import { alarmsDueBefore, wakesLatenessByMinute } from '../store/fire-stats.js';
import type { Owner } from './owner.js';

const MINUTE_MS = 60_000;

export const LATENESS_MINUTES = { min: 1, max: 1_440, default: 60 } as const;
export const UPCOMING_HOURS = { min: 1, max: 48, default: 6 } as const;
export const UPCOMING_MAX_ALARMS = 10_000;
export const UPCOMING_MAX_FIRES = 100_000;

export interface LatenessStats {
  from: Date;
  to: Date;
  minutes: { minute: Date; fires: number; p50Ms: number | null; p99Ms: number | null }[];
}

export interface UpcomingStats {
  from: Date;
  to: Date;
  minutes: { minute: Date; fires: number }[];
  truncated: boolean;
}

export class FireStatsService {
  constructor(private readonly options: { db: Executor; dbClock: DbClock }) {}

  /** Scheduled fires of the last `minutes` (1–1440, default 60) with their p50 and p99 lateness. */
  async lateness(owner: Owner | null, query: { minutes?: unknown }): Promise<LatenessStats> {
    const minutes = wholeNumber('minutes', query.minutes, LATENESS_MINUTES);
    const now = await this.options.dbClock.now();
    const to = floorMinute(now);
    const from = new Date(to.getTime() - (minutes - 1) * MINUTE_MS);
    const rows = await wakesLatenessByMinute(this.options.db, owner?.did ?? null, from);
    const byMinute = new Map(rows.map((r) => [r.minute.getTime(), r]));
    return {
      from,
      to: new Date(to.getTime() + MINUTE_MS),
      minutes: minutesOf(from, minutes).map((minute) => {
        const row = byMinute.get(minute.getTime());
        return { minute, fires: row?.fires ?? 0, p50Ms: row?.p50Ms ?? null, p99Ms: row?.p99Ms ?? null };
      }),
    };
  }

  /** Fires due per minute over the next `hours` (1–48, default 6), from the current minute on. */
  async upcoming(owner: Owner | null, query: { hours?: unknown }): Promise<UpcomingStats> {
    const hours = wholeNumber('hours', query.hours, UPCOMING_HOURS);
    const from = floorMinute(await this.options.dbClock.now());
    const count = hours * 60;
    const to = new Date(from.getTime() + count * MINUTE_MS);
    const schedules = await alarmsDueBefore(this.options.db, owner?.did ?? null, to, UPCOMING_MAX_ALARMS + 1);
    let truncated = schedules.length > UPCOMING_MAX_ALARMS;
    const fires = new Array<number>(count).fill(0);
    let total = 0;
    for (const schedule of schedules.slice(0, UPCOMING_MAX_ALARMS)) {
      for (const at of fireTimes(schedule)) {
        if (at.getTime() >= to.getTime()) break;
        if (total >= UPCOMING_MAX_FIRES) {
          truncated = true;
          break;
        }
        // An alarm overdue (not yet claimed) counts in the current minute.
        const index = Math.max(0, Math.floor((at.getTime() - from.getTime()) / MINUTE_MS));
        fires[index]! += 1;
        total += 1;
      }
    }
    return {
      from,
      to,
      minutes: minutesOf(from, count).map((minute, i) => ({ minute, fires: fires[i]! })),
      truncated,
    };
  }
}

function floorMinute(date: Date): Date {
  return new Date(Math.floor(date.getTime() / MINUTE_MS) * MINUTE_MS);
}

function minutesOf(from: Date, count: number): Date[] {
  return Array.from({ length: count }, (_, i) => new Date(from.getTime() + i * MINUTE_MS));
}

function wholeNumber(
  path: string,
  value: unknown,
  range: { min: number; max: number; default: number },
): number {
  if (value === undefined || value === '') return range.default;
  const n = typeof value === 'string' && /^\d{1,6}$/.test(value) ? Number(value) : NaN;
  if (!(n >= range.min && n <= range.max)) {
    throw invalidInput(path, `a whole number from ${range.min} to ${range.max}`, value);
  }
  return n;
}
