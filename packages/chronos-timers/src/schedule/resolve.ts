/**
 * Turns a user's schedule (`at`, `in_seconds` or `cron`, with an optional `timezone`) into the
 * schedule columns of an alarm row, and lists upcoming fire times for display.
 *
 * Guarantees: exactly one of the three is accepted; every refusal is an `invalid_input` error on
 * the offending field, shaped `path: expected X, got Y; hint`. An `at` slightly in the past
 * (within `pastToleranceMs`) is accepted and due at once; one further back is refused, because it
 * is almost always a time zone mistake. Times are kept to the millisecond; finer fractions of an
 * `at` are rounded up, so that an alarm never fires before the time it was given.
 * `null` counts as absent for every field. Nothing here reads the clock: `now` is an argument.
 */
import { ChronosError, describeValue, invalidInput, oneOfMessage } from '../errors.js';
import { minIntervalMs, parseCron } from './cron.js';
import { formatDuration, MAX_IN_SECONDS } from './duration.js';
import { dueAt, occurrenceAfter, type RecurrenceFields } from './next-occurrence.js';
import { compileRrule } from './rrule.js';
import { assertTimeZone, formatLocal } from './time-zone.js';

/** A schedule as the core names its fields (each door names them its own way). */
export interface ScheduleInput {
  at?: unknown;
  inSeconds?: unknown;
  cron?: unknown;
  rrule?: unknown;
  timezone?: unknown;
  startsAt?: unknown;
  endsAt?: unknown;
  jitterSeconds?: unknown;
}

export interface ResolvedSchedule {
  kind: 'once' | 'cron' | 'rrule';
  /** The `at` (or `now + in_seconds`) instant for `once`; null for `cron`. */
  fireAt: Date | null;
  /** The normalised expression for `cron`; `''` for `once`. */
  cronExpr: string;
  timezone: string;
  /** The first occurrence, without jitter (the store adds it once the alarm has its id). */
  nextFireAt: Date;
  /** The rule as stored, for `rrule` (each of these is absent when not set). */
  rrule?: string;
  /** The rule's DTSTART: `startsAt`, else `now` to the whole second. */
  rruleStart?: Date;
  startsAt?: Date;
  endsAt?: Date;
  jitterSeconds?: number;
}

export interface ResolveOptions {
  /** How far in the past an `at` may be and still be accepted (due at once). Default 60 000. */
  pastToleranceMs?: number;
  /** The operator's minimum gap between cron occurrences; 0 (the default) for no limit. */
  minCronIntervalMs?: number;
  /** The grid origin for `@every`; without one the first occurrence is `now + interval`. */
  anchor?: Date;
}

const AT_EXPECTED =
  'an RFC 3339 time with an offset, like "2027-03-14T09:00:00Z" or "2027-03-14T10:00:00+01:00"';

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

const has = (value: unknown): boolean => value !== undefined && value !== null;

/** The schedule columns for `input`, or an `invalid_input` error naming the field at fault. */
export function resolveSchedule(
  input: ScheduleInput,
  now: Date,
  options: ResolveOptions = {},
): ResolvedSchedule {
  // Counted without an array: this runs for every timer of a batch.
  const count =
    Number(has(input.at)) + Number(has(input.inSeconds)) + Number(has(input.cron)) + Number(has(input.rrule));
  // Refusals are spelt by functions of their own: this one, run for every timer of a batch, stays
  // small, and no closure of its keeps `input` on the heap at every call.
  if (count !== 1) throw notOneSchedule(input);
  const timezone =
    input.timezone === undefined || input.timezone === null
      ? 'UTC'
      : assertTimeZone(input.timezone, 'timezone');

  if (!has(input.cron) && !has(input.rrule)) {
    for (const field of ['startsAt', 'endsAt', 'jitterSeconds'] as const) {
      if (has(input[field])) throw recurringOnly(field, input[field]);
    }
  }

  if (has(input.at)) {
    const at = parseAt(input.at);
    const toleranceMs = options.pastToleranceMs ?? 60_000;
    const lateMs = now.getTime() - at.getTime();
    if (lateMs > toleranceMs) throw inThePast(input.at, lateMs, now);
    return { kind: 'once', fireAt: at, cronExpr: '', timezone, nextFireAt: at };
  }

  if (has(input.inSeconds)) {
    const seconds = input.inSeconds;
    if (
      typeof seconds !== 'number' ||
      !Number.isInteger(seconds) ||
      seconds < 1 ||
      seconds > MAX_IN_SECONDS
    ) {
      throw invalidInput(
        'inSeconds',
        `an integer number of seconds from 1 to ${MAX_IN_SECONDS}`,
        seconds,
        typeof seconds === 'number' && Number.isFinite(seconds) && !Number.isInteger(seconds)
          ? 'round it to whole seconds'
          : undefined,
      );
    }
    const fireAt = new Date(now.getTime() + seconds * 1000);
    return { kind: 'once', fireAt, cronExpr: '', timezone, nextFireAt: fireAt };
  }

  return resolveRecurring(input, timezone, now, options);
}

/** A cron or rrule schedule with its window and jitter, checked (see resolveSchedule). */
function resolveRecurring(
  input: ScheduleInput,
  timezone: string,
  now: Date,
  options: ResolveOptions,
): ResolvedSchedule {
  const toleranceMs = options.pastToleranceMs ?? 60_000;
  const startsAt = has(input.startsAt) ? parseAt(input.startsAt, 'startsAt') : undefined;
  const endsAt = has(input.endsAt) ? parseAt(input.endsAt, 'endsAt') : undefined;
  if (endsAt !== undefined) {
    if (startsAt !== undefined && endsAt.getTime() <= startsAt.getTime()) {
      throw invalidInput('endsAt', `a time after starts_at (${startsAt.toISOString()})`, input.endsAt);
    }
    if (Number.isFinite(toleranceMs) && now.getTime() - endsAt.getTime() > toleranceMs) {
      throw invalidInput(
        'endsAt',
        'a time in the future (the window would already be over)',
        input.endsAt,
        `server time is ${now.toISOString()}; check the time zone offset`,
      );
    }
  }
  const jitterSeconds = has(input.jitterSeconds) ? (input.jitterSeconds as number) : undefined;
  const minimumMs = options.minCronIntervalMs ?? 0;

  let fields: Omit<RecurrenceFields, 'id' | 'scheduledFor'>;
  let first: Date | null;
  let field: 'cron' | 'rrule';
  if (has(input.rrule)) {
    field = 'rrule';
    const start = startsAt ?? new Date(Math.floor(now.getTime() / 1000) * 1000);
    const schedule = compileRrule(input.rrule, timezone, start);
    fields = {
      kind: 'rrule',
      cronExpr: '',
      rrule: schedule.parsed.text,
      rruleStart: start,
      timezone,
      startsAt,
      endsAt,
    };
    // The creation instant to the whole second is the DTSTART: an occurrence when it matches the
    // rule (due at once), though it is up to a second before now. A given starts_at in the past
    // is not caught up on: its first occurrence is the first after now.
    const from = startsAt === undefined ? start.getTime() - 1 : Math.max(now.getTime(), start.getTime() - 1);
    first = occurrenceAfter(fields, new Date(from));
    // A batch of one rule shares its start (now): its first 1,000 occurrences are read once.
    const gapKey = `${timezone}\u0000${start.getTime()}\u0000${fields.rrule}\u0000${endsAt?.getTime() ?? ''}`;
    let sample = sampleCache.get(gapKey);
    if (sample === undefined) {
      sample = firstOccurrences(fields, first, 1_000);
      if (sampleCache.size > 100) sampleCache.clear();
      sampleCache.set(gapKey, sample);
    }
    const gap = smallestGap(sample);
    if (minimumMs > 0 && gap < minimumMs) {
      throw invalidInput(
        'rrule',
        `a rule that fires at most once every ${formatDuration(minimumMs)}`,
        input.rrule,
        `${gapHint(schedule.parsed.freq, sample)}; the operator sets that minimum with CHRONOS_MIN_CRON_INTERVAL`,
      );
    }
    if (jitterSeconds !== undefined) checkJitter(jitterSeconds, gap);
  } else {
    field = 'cron';
    const schedule = parseCron(input.cron, timezone);
    if (minimumMs > 0) {
      const intervalMs = minIntervalMs(schedule, now);
      if (intervalMs < minimumMs) {
        throw invalidInput(
          'cron',
          `a schedule that fires at most once every ${formatDuration(minimumMs)}`,
          input.cron,
          `this one fires as often as every ${formatDuration(intervalMs)}; the operator sets that minimum with CHRONOS_MIN_CRON_INTERVAL`,
        );
      }
    }
    fields = { kind: 'cron', cronExpr: schedule.expr, timezone, startsAt, endsAt };
    const anchor = startsAt ?? options.anchor;
    first = occurrenceAfter(fields, now, anchor);
    if (jitterSeconds !== undefined) {
      checkJitter(
        jitterSeconds,
        smallestGap(firstOccurrences(fields, first, 1_000, anchor ?? first ?? undefined)),
      );
    }
  }
  if (first === null) {
    throw invalidInput(
      endsAt !== undefined ? 'endsAt' : field,
      endsAt !== undefined
        ? `a time after the schedule's first occurrence`
        : 'a schedule with an occurrence still to come',
      endsAt !== undefined ? input.endsAt : input[field],
      endsAt !== undefined
        ? `no occurrence of the ${field} falls between ${(startsAt ?? now).toISOString()} and ${endsAt.toISOString()}`
        : 'its last occurrence (COUNT or UNTIL) is already past',
    );
  }
  const resolved: ResolvedSchedule = {
    kind: fields.kind as 'cron' | 'rrule',
    fireAt: null,
    cronExpr: fields.cronExpr,
    timezone,
    nextFireAt: first,
  };
  if (fields.rrule !== undefined) resolved.rrule = fields.rrule;
  if (fields.rruleStart) resolved.rruleStart = fields.rruleStart;
  if (startsAt !== undefined) resolved.startsAt = startsAt;
  if (endsAt !== undefined) resolved.endsAt = endsAt;
  if (jitterSeconds !== undefined) resolved.jitterSeconds = jitterSeconds;
  return resolved;
}

const sampleCache = new Map<string, Date[]>();

/** Up to `n` raw occurrences from `first` on. */
function firstOccurrences(
  fields: Omit<RecurrenceFields, 'id' | 'scheduledFor'>,
  first: Date | null,
  n: number,
  anchor?: Date,
): Date[] {
  const out: Date[] = [];
  for (let at = first; at !== null && out.length < n; at = occurrenceAfter(fields, at, anchor)) out.push(at);
  return out;
}

function smallestGap(times: readonly Date[]): number {
  let smallest = Number.POSITIVE_INFINITY;
  for (let i = 1; i < times.length; i++) {
    smallest = Math.min(smallest, times[i]!.getTime() - times[i - 1]!.getTime());
  }
  return smallest;
}

function gapHint(freq: string, sample: readonly Date[]): string {
  let at = 1;
  for (let i = 2; i < sample.length; i++) {
    if (sample[i]!.getTime() - sample[i - 1]!.getTime() < sample[at]!.getTime() - sample[at - 1]!.getTime())
      at = i;
  }
  const gap = sample[at]!.getTime() - sample[at - 1]!.getTime();
  const parts =
    freq === 'MINUTELY'
      ? 'FREQ=MINUTELY with a larger INTERVAL, or BYMINUTE'
      : 'BYHOUR, BYMINUTE and BYSECOND';
  return `it fires ${sample[at - 1]!.toISOString()} and again ${formatDuration(gap)} later; check ${parts}`;
}

function checkJitter(jitterSeconds: number, gapMs: number): void {
  if (Number.isFinite(gapMs) && jitterSeconds * 1000 >= gapMs) {
    throw invalidInput(
      'jitterSeconds',
      `fewer seconds than the shortest gap between two occurrences (${formatDuration(gapMs)})`,
      jitterSeconds,
      'jitter only spreads an occurrence within its own gap; use a smaller value',
    );
  }
}

function recurringOnly(field: 'startsAt' | 'endsAt' | 'jitterSeconds', value: unknown): ChronosError {
  return invalidInput(field, 'no value for a one-shot alarm (it is for "cron" and "rrule" only)', value);
}

function notOneSchedule(input: ScheduleInput): ChronosError {
  const names = ['at', 'inSeconds', 'cron', 'rrule'] as const;
  const message = oneOfMessage(
    'body',
    names,
    names.filter((key) => has(input[key])),
    true,
  );
  return new ChronosError('invalid_input', message, { errors: [{ path: '', message }] });
}

function inThePast(at: unknown, lateMs: number, now: Date): ChronosError {
  const message =
    `at: expected a time in the future, got ${describeValue(at)} which is ${formatAgo(lateMs)} ago ` +
    `(server time is ${now.toISOString()}); check the time zone offset`;
  return new ChronosError('invalid_input', message, { errors: [{ path: 'at', message }] });
}

/** What the fire times of a schedule are made from: its columns, and the alarm's id for jitter. */
export type FireTimesOf = Pick<ResolvedSchedule, 'kind' | 'cronExpr' | 'timezone' | 'nextFireAt'> &
  Partial<Pick<RecurrenceFields, 'id' | 'rrule' | 'rruleStart' | 'startsAt' | 'endsAt' | 'jitterSeconds'>>;

/**
 * The due instants from `nextFireAt` on, in order, until the schedule ends (one for `once`).
 * `@every` is anchored on `nextFireAt`. Each is the occurrence with its jitter (given the id).
 * Take what you need and stop.
 */
export function* fireTimes(schedule: FireTimesOf): Generator<Date, void, undefined> {
  yield schedule.nextFireAt;
  if (schedule.kind === 'once') return;
  const fields = {
    kind: schedule.kind,
    cronExpr: schedule.cronExpr,
    timezone: schedule.timezone,
    rrule: schedule.rrule,
    rruleStart: schedule.rruleStart ?? null,
    startsAt: schedule.startsAt ?? null,
    endsAt: schedule.endsAt ?? null,
  };
  const id = schedule.id ?? '';
  // The jitter is less than the gap to the next occurrence: the next one follows the due instant.
  for (let last: Date | null = schedule.nextFireAt; ;) {
    last = occurrenceAfter(fields, last, schedule.nextFireAt);
    if (last === null) return;
    const due = dueAt({ id, jitterSeconds: schedule.jitterSeconds }, last);
    yield due;
    last = due;
  }
}

/**
 * The next `count` fire times from `nextFireAt` on (one for `once`), in UTC and in the schedule's
 * zone. `@every` is anchored on `nextFireAt`.
 */
export function nextFires(schedule: FireTimesOf, count = 3): { utc: string; local: string }[] {
  const fires: { utc: string; local: string }[] = [];
  if (count < 1) return fires;
  for (const instant of fireTimes(schedule)) {
    fires.push({ utc: instant.toISOString(), local: formatLocal(instant, schedule.timezone) });
    if (fires.length >= count) break;
  }
  return fires;
}

function parseAt(value: unknown, path = 'at'): Date {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw invalidInput(path, AT_EXPECTED, value);
    return new Date(value.getTime());
  }
  return parseAtText(value, path);
}

/** An `at` given as text (RFC 3339): apart from `parseAt`, which a batch of Dates runs small. */
function parseAtText(value: unknown, path: string): Date {
  if (typeof value !== 'string') throw invalidInput(path, AT_EXPECTED, value);
  const match = RFC3339.exec(value);
  if (match === null) throw invalidInput(path, AT_EXPECTED, value, atHint(value));
  const [, year, month, day, hour, minute, second, fraction = '', zulu, sign, offsetHours, offsetMinutes] =
    match;
  const y = Number(year);
  const mo = Number(month);
  const d = Number(day);
  const h = Number(hour);
  const mi = Number(minute);
  const s = Number(second);
  const oh = Number(offsetHours ?? 0);
  const om = Number(offsetMinutes ?? 0);
  if (
    mo < 1 ||
    mo > 12 ||
    d < 1 ||
    d > daysInMonth(y, mo) ||
    h > 23 ||
    mi > 59 ||
    s > 59 ||
    oh > 23 ||
    om > 59
  ) {
    throw invalidInput(path, AT_EXPECTED, value, 'that date or time does not exist');
  }
  // Round sub-millisecond fractions up: an alarm must never fire before its time.
  const ms = Number(fraction.slice(0, 3).padEnd(3, '0')) + (/[1-9]/.test(fraction.slice(3)) ? 1 : 0);
  const offsetMs = zulu === undefined ? (sign === '-' ? -1 : 1) * (oh * 60 + om) * 60_000 : 0;
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  date.setUTCHours(h, mi, s, ms);
  return new Date(date.getTime() - offsetMs);
}

function atHint(value: string): string | undefined {
  if (/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?$/.test(value)) {
    return 'add "Z" for UTC or an offset like "+01:00"';
  }
  if (/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?[+-]\d{4}$/.test(value)) {
    return 'write the offset with a colon, like "+01:00"';
  }
  if (/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}$/.test(value)) {
    return `add the seconds and "Z" for UTC or an offset, like "${value}:00Z" or "${value}:00+01:00"`;
  }
  if (/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?:[Zz]|[+-]\d{2}:?\d{2})$/.test(value)) {
    return 'add the seconds, like "09:00:00"';
  }
  if (/^\d{4}-\d{2}-\d{2}$/.test(value)) return 'add a time and an offset, like "T09:00:00Z"';
  return undefined;
}

function daysInMonth(year: number, month: number): number {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
}

/** `lateMs` rounded to what a person reads at a glance: `3h`, `2d4h`, `1m30s`. */
function formatAgo(lateMs: number): string {
  const unit = lateMs >= 86_400_000 ? 3_600_000 : lateMs >= 3_600_000 ? 60_000 : 1_000;
  return formatDuration(Math.round(lateMs / unit) * unit);
}
