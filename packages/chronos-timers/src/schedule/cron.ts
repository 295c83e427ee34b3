/**
 * Cron schedules: the next occurrence of a 5-field expression, a descriptor or `@every` in a zone.
 *
 * Guarantees (contract §3):
 * - `next(after)` is strictly after `after`, to the millisecond.
 * - A local time that does not exist (spring forward) fires at the first instant after the gap;
 *   several such times (`*\/15` in the gap) fire once, together, at that instant.
 * - A local time that occurs twice (fall back) fires once, at its first occurrence.
 * - `@every` counts real elapsed time, not the wall clock: occurrences are `anchor + k·interval`
 *   for k = 0, 1, 2, …, and `next` returns the first one after `after` without catching up.
 *
 * The DST rules hold for every expression, including ones with a wildcard or step in the minute
 * or hour field. So an hourly `0 * * * *` in Europe/Paris fires at 02:00 CEST and next at
 * 03:00 CET when the clock falls back (two real hours), and `30 * * * *` fires at 03:00 CEST on
 * the spring-forward night, where 02:30 does not exist. Use `@every 1h` for real-time regularity.
 *
 * What croner does and what we do: croner parses and matches the fields. Its own DST handling,
 * even with `fixedTimeRule: 'no-wildcard'`, follows the contract only for "fixed-time"
 * expressions (no `*` or step in the minute and hour fields); for the others it fires on both
 * passes of a repeated hour and skips times in a gap, which the contract forbids. It also moves a
 * time in a gap only when the end of the gap falls on the same local day. So croner matches the
 * local wall clock here (it runs in UTC, which has no DST), and this module maps each matching
 * wall-clock time to an instant by the contract's rule, for every expression alike. The tests
 * check the result against croner's own zone-aware answer for fixed-time expressions.
 *
 * Accepted syntax beyond POSIX: names (`MON-FRI`, `JAN`), `7` for Sunday, and croner's `L`, `W`,
 * `#` and `?`. Day of month and day of week combine with OR when both are restricted, as in
 * Vixie cron. Seconds (6 fields) and years (7 fields) are refused. Nothing here reads the clock
 * or starts a timer: croner is constructed paused, without a callback.
 */
import { Cron } from 'croner';
import { invalidInput } from '../errors.js';
import { looksLikeProse, suggestCron } from './cron-prose.js';
import { formatDuration, MAX_IN_SECONDS, parseDuration } from './duration.js';
import { assertTimeZone, wallClockToInstant, zoneOffsetMs } from './time-zone.js';

export interface CronSchedule {
  /** The expression as stored: whitespace collapsed, descriptors in lower case. */
  readonly expr: string;
  readonly timeZone: string;
  /**
   * The first occurrence strictly after `after`. `anchor` matters only for `@every`: occurrences
   * are then `anchor + k·interval` (k ≥ 0); without one, the next is `after + interval`.
   */
  next(after: Date, anchor?: Date): Date;
}

const EXPECTED =
  'a 5-field cron expression like "0 9 * * MON-FRI", a descriptor like "@daily", or "@every 15m"';

const DESCRIPTORS: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

const MIN_EVERY_MS = 1_000;
/** The same ceiling as `in_seconds`. */
const MAX_EVERY_MS = MAX_IN_SECONDS * 1000;

/** Parses `expr` for `timeZone`, or throws `invalid_input` on path `cron` (or `timezone`). */
export function parseCron(expr: unknown, timeZone: string): CronSchedule {
  assertTimeZone(timeZone);
  if (typeof expr !== 'string') throw invalidInput('cron', EXPECTED, expr);
  const parts = expr.trim().split(/\s+/);
  const first = parts[0] ?? '';
  if (first === '') throw invalidInput('cron', EXPECTED, expr);

  if (first.startsWith('@')) {
    const descriptor = first.toLowerCase();
    if (descriptor === '@every') return parseEvery(expr, parts, timeZone);
    const fields = DESCRIPTORS[descriptor];
    if (fields === undefined || parts.length > 1) {
      throw invalidInput('cron', EXPECTED, expr, `the descriptors are ${Object.keys(DESCRIPTORS).join(' ')}`);
    }
    return new WallClockSchedule(descriptor, timeZone, compile(fields, expr));
  }

  if (looksLikeProse(expr)) {
    const suggestion = suggestCron(expr);
    if (parts.length !== 5 || suggestion !== undefined) {
      throw invalidInput('cron', EXPECTED, expr, proseHint(suggestion));
    }
  }
  if (parts.length !== 5) throw invalidInput('cron', EXPECTED, expr, fieldCountHint(parts.length));
  const normalized = parts.join(' ');
  return new WallClockSchedule(normalized, timeZone, compile(normalized, expr));
}

/**
 * The smallest gap between consecutive occurrences among the next 100 after `from` (for `@every`,
 * the interval). Used to enforce the operator's minimum cron interval.
 */
export function minIntervalMs(schedule: CronSchedule, from: Date): number {
  if (schedule instanceof EverySchedule) return schedule.intervalMs;
  let previous = schedule.next(from);
  let smallest = Number.POSITIVE_INFINITY;
  for (let i = 1; i < 100; i++) {
    const current = schedule.next(previous);
    smallest = Math.min(smallest, current.getTime() - previous.getTime());
    previous = current;
  }
  return smallest;
}

class EverySchedule implements CronSchedule {
  constructor(
    readonly expr: string,
    readonly timeZone: string,
    readonly intervalMs: number,
  ) {}

  next(after: Date, anchor?: Date): Date {
    const afterMs = after.getTime();
    if (anchor === undefined) return new Date(afterMs + this.intervalMs);
    const anchorMs = anchor.getTime();
    if (anchorMs > afterMs) return new Date(anchorMs);
    const steps = Math.floor((afterMs - anchorMs) / this.intervalMs) + 1;
    return new Date(anchorMs + steps * this.intervalMs);
  }
}

class WallClockSchedule implements CronSchedule {
  constructor(
    readonly expr: string,
    readonly timeZone: string,
    /** Matches local wall-clock times, represented as if they were UTC instants. */
    private readonly wallClock: Cron,
  ) {}

  next(after: Date, _anchor?: Date): Date {
    const afterMs = after.getTime();
    if (Number.isNaN(afterMs)) throw new RangeError(`cron ${this.expr}: next() needs a valid Date`);
    // Every wall-clock time before the one `after` reads maps to an instant at or before `after`
    // (the mapping below never goes back in time), so the search starts there.
    let wallMs = afterMs + zoneOffsetMs(afterMs, this.timeZone);
    // Only wall-clock times in a repeated hour can map to instants at or before `after`: a few
    // hundred steps at most, even for `* * * * *` across a two-hour fall back.
    for (let step = 0; step < 10_000; step++) {
      const candidate = this.wallClock.nextRun(new Date(wallMs));
      if (candidate === null) break;
      const instantMs = wallClockToInstant(candidate.getTime(), this.timeZone);
      if (instantMs > afterMs) return new Date(instantMs);
      wallMs = candidate.getTime();
    }
    // croner stops at the year 3000.
    throw new RangeError(`cron ${this.expr}: no occurrence after ${after.toISOString()}`);
  }
}

function parseEvery(expr: string, parts: string[], timeZone: string): EverySchedule {
  const text = parts[1];
  if (parts.length !== 2 || text === undefined) {
    throw invalidInput(
      'cron',
      EXPECTED,
      expr,
      'write "@every" and one duration without spaces, e.g. "@every 1h30m"',
    );
  }
  let intervalMs: number;
  try {
    intervalMs = parseDuration(text, 'cron');
  } catch {
    throw invalidInput('cron', EXPECTED, expr, `"${text}" is not a duration such as "90s", "15m" or "1h30m"`);
  }
  if (intervalMs < MIN_EVERY_MS || intervalMs > MAX_EVERY_MS) {
    throw invalidInput(
      'cron',
      `an "@every" interval from ${formatDuration(MIN_EVERY_MS)} to ${formatDuration(MAX_EVERY_MS)}`,
      expr,
    );
  }
  return new EverySchedule(`@every ${text}`, timeZone, intervalMs);
}

/** A paused croner job matching `fields` on the wall clock (UTC has no DST), never started. */
function compile(fields: string, expr: string): Cron {
  let cron: Cron;
  try {
    cron = new Cron(fields, { timezone: 'UTC', mode: '5-part', paused: true });
  } catch (error) {
    const reason = error instanceof Error ? error.message.replace(/^CronPattern:\s*/, '') : String(error);
    throw invalidInput('cron', EXPECTED, expr, reason);
  }
  // croner searches up to the year 3000, so a null here means the fields match no date at all.
  if (cron.nextRun(new Date(Date.UTC(2000, 0, 1))) === null) {
    throw invalidInput(
      'cron',
      EXPECTED,
      expr,
      'it matches no date (like 30 February), so it would never fire',
    );
  }
  return cron;
}

function proseHint(suggestion: string | undefined): string {
  if (suggestion !== undefined) return `it reads as English; as cron that is probably "${suggestion}"`;
  return (
    'it reads as English; cron is five fields, minute hour day-of-month month day-of-week: ' +
    '"0 9 * * 1" is 09:00 every Monday, "*/5 * * * *" every five minutes'
  );
}

function fieldCountHint(count: number): string {
  if (count === 6) {
    return 'it has 6 fields; Chronos takes no seconds field: drop the first one (a schedule fires at most once a minute by default)';
  }
  if (count === 7) return 'it has 7 fields; Chronos takes neither a seconds nor a year field';
  return `it has ${count} field${count === 1 ? '' : 's'}: minute hour day-of-month month day-of-week`;
}
