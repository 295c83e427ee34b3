/**
 * RFC 5545 recurrence rules (`rrule`, contract §3a): reading one, refusing it with the part at
 * fault named, and the next occurrence after an instant in the alarm's zone.
 *
 * Guarantees:
 * - The rule is read by our own parser first, part by part (`FREQ` … `WKST`), so every refusal
 *   names the part and says what to send; rrule-temporal only ever sees a rule that parsed. A
 *   leading `RRULE:` is accepted and not stored; part names and values are stored upper case.
 * - Occurrences are wall-clock times in the zone, from the start (DTSTART: `starts_at`, or the
 *   creation instant to the whole second); the parts a rule leaves out take the start's values.
 *   The start itself is an occurrence only when it matches the rule (as rrule.js and dateutil).
 * - §3's DST policy, exactly as cron applies it: a wall-clock time in a spring-forward gap fires
 *   at the first instant after the gap (several such times fire once, together); a wall-clock
 *   time that occurs twice fires once, at its first occurrence.
 * - `next(after)` is strictly after `after`, never before the start, and null when the rule has
 *   no occurrence left (`COUNT`, `UNTIL`).
 *
 * What rrule-temporal does and what we do: rrule-temporal expands the rule (BYxxx, BYSETPOS,
 * COUNT, WKST) well, but in a zone with DST it omits a generated time that falls in a gap (RFC
 * 5545's reading; §3 says fire at the end of the gap), and it takes part values it cannot use
 * (`BYHOUR=25`, unknown parts) without a word. So it runs here on the wall clock in UTC, which
 * has no DST, and each wall-clock time it yields is mapped to an instant by `wallClockToInstant`,
 * the mapping cron uses. `UNTIL` is taken out of the rule and applied here: a `…Z` UNTIL bounds
 * instants, a local or date UNTIL bounds wall-clock times (a date includes its whole day).
 * rrule.test.ts shows the gap and the unchecked parts, and property-tests this door against the
 * `rrule` package.
 */
import { RRuleTemporal } from 'rrule-temporal';
import { invalidInput } from '../errors.js';
import { wallClockToInstant, zoneOffsetMs } from './time-zone.js';

export const RRULE_EXPECTED =
  'an RFC 5545 recurrence rule like "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0"';

export const RRULE_FREQS = ['MINUTELY', 'HOURLY', 'DAILY', 'WEEKLY', 'MONTHLY', 'YEARLY'] as const;
type Freq = (typeof RRULE_FREQS)[number];

const PART_ORDER = [
  'FREQ',
  'INTERVAL',
  'COUNT',
  'UNTIL',
  'BYMONTH',
  'BYWEEKNO',
  'BYYEARDAY',
  'BYMONTHDAY',
  'BYDAY',
  'BYHOUR',
  'BYMINUTE',
  'BYSECOND',
  'BYSETPOS',
  'WKST',
] as const;
type PartName = (typeof PART_ORDER)[number];

const WEEKDAYS = ['MO', 'TU', 'WE', 'TH', 'FR', 'SA', 'SU'] as const;
const WEEKDAY_NAMES: Record<string, string> = {
  MO: 'Monday',
  TU: 'Tuesday',
  WE: 'Wednesday',
  TH: 'Thursday',
  FR: 'Friday',
  SA: 'Saturday',
  SU: 'Sunday',
};
const MONTH_NAMES = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];
/** The most days each month can have (February in a leap year). */
const MONTH_DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** How far ahead the first occurrence must be: a rule that waits longer is almost always a mistake. */
const HORIZON_YEARS = 8;

/** A rule as read: the text to store and what evaluating it needs. */
export interface ParsedRrule {
  /** As stored and shown: without `RRULE:`, parts upper case, in the order given. */
  readonly text: string;
  readonly freq: Freq;
  /** The rule without UNTIL, for rrule-temporal. */
  readonly libraryRule: string;
  readonly until: Until | null;
  readonly count: number | null;
}

/** UNTIL: an instant (`…Z`), or a wall-clock bound (local date-time; a date's whole day). */
type Until = { kind: 'instant'; ms: number } | { kind: 'wall'; ms: number };

/** Reads `value` as a rule, or throws `invalid_input` on `path` naming the part at fault. */
export function parseRrule(value: unknown, path = 'rrule'): ParsedRrule {
  if (typeof value !== 'string') throw invalidInput(path, RRULE_EXPECTED, value);
  const refuse = (hint: string) => invalidInput(path, RRULE_EXPECTED, value, hint);
  let body = value.trim();
  if (/^RRULE:/i.test(body)) body = body.slice(6).trim();
  if (/^DTSTART/i.test(body) || /\n/.test(body)) {
    throw refuse('send the RRULE line alone, without DTSTART (give the start as "starts_at")');
  }
  if (body === '') throw refuse('it is empty; start with FREQ, like "FREQ=DAILY;BYHOUR=9;BYMINUTE=0"');
  const parts = new Map<PartName, string>();
  const order: string[] = [];
  for (const raw of body.split(';')) {
    if (raw.trim() === '') {
      if (raw === '' && order.length > 0) continue; // a trailing ";"
      throw refuse('parts are NAME=VALUE separated by ";", with nothing empty between them');
    }
    const eq = raw.indexOf('=');
    if (eq < 0) throw refuse(`"${raw}" is not NAME=VALUE`);
    const name = raw.slice(0, eq).trim().toUpperCase();
    const partValue = raw
      .slice(eq + 1)
      .trim()
      .toUpperCase();
    if (name === 'SECONDLY' || (name === 'FREQ' && partValue === 'SECONDLY')) {
      throw refuse('FREQ=SECONDLY is not taken; FREQ is one of MINUTELY HOURLY DAILY WEEKLY MONTHLY YEARLY');
    }
    if (!(PART_ORDER as readonly string[]).includes(name)) {
      const known =
        name === 'DTSTART' || name === 'TZID'
          ? ' (give the start as "starts_at", the zone as "timezone")'
          : '';
      throw refuse(
        `"${name}" is not a rule part Chronos takes${known}; the parts are ${PART_ORDER.join(' ')}`,
      );
    }
    if (parts.has(name as PartName)) throw refuse(`${name} is given twice; give it once`);
    if (partValue === '') throw refuse(`${name} has no value`);
    parts.set(name as PartName, partValue);
    order.push(`${name}=${partValue}`);
  }

  const freqText = parts.get('FREQ');
  if (freqText === undefined) {
    throw refuse('FREQ is missing; begin with one of FREQ=MINUTELY HOURLY DAILY WEEKLY MONTHLY YEARLY');
  }
  if (!(RRULE_FREQS as readonly string[]).includes(freqText)) {
    throw refuse(`FREQ=${freqText}: FREQ is one of ${RRULE_FREQS.join(' ')}`);
  }
  const freq = freqText as Freq;

  const integer = (name: PartName, min: number, max: number, what: string): number | null => {
    const text = parts.get(name);
    if (text === undefined) return null;
    if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
      throw refuse(`${name}=${text}: ${what}`);
    }
    return Number(text);
  };
  integer('INTERVAL', 1, 100_000, 'INTERVAL is a whole number from 1, like INTERVAL=2 for every other one');
  const count = integer('COUNT', 1, 1_000_000, 'COUNT is how many occurrences in all, a whole number from 1');
  if (parts.has('COUNT') && parts.has('UNTIL')) {
    throw refuse('COUNT and UNTIL are both given; RFC 5545 allows one of them (or send "ends_at")');
  }
  const untilText = parts.get('UNTIL');
  const until = untilText === undefined ? null : parseUntil(untilText, refuse);

  const list = (name: PartName, min: number, max: number, signed: boolean, what: string): number[] | null => {
    const text = parts.get(name);
    if (text === undefined) return null;
    return text.split(',').map((item) => {
      const ok = signed ? /^[+-]?\d{1,3}$/.test(item) : /^\d{1,3}$/.test(item);
      const n = Number(item);
      if (!ok || Math.abs(n) < min || Math.abs(n) > max) throw refuse(`${name}=${text}: ${what}`);
      return n;
    });
  };
  const months = list('BYMONTH', 1, 12, false, 'months are 1 (January) to 12 (December)');
  const weekNos = list(
    'BYWEEKNO',
    1,
    53,
    true,
    'week numbers are 1 to 53, or -1 to -53 from the end of the year',
  );
  list('BYYEARDAY', 1, 366, true, 'days of the year are 1 to 366, or -1 to -366 from its end');
  const monthDays = list('BYMONTHDAY', 1, 31, true, 'days of the month are 1 to 31, or -1 (the last) to -31');
  list('BYHOUR', 0, 23, false, 'hours are 0 to 23');
  list('BYMINUTE', 0, 59, false, 'minutes are 0 to 59');
  list('BYSECOND', 0, 59, false, 'seconds are 0 to 59');
  list('BYSETPOS', 1, 366, true, 'positions are 1 to 366 or -1 to -366, like BYSETPOS=-1 for the last');
  const wkst = parts.get('WKST');
  if (wkst !== undefined && !(WEEKDAYS as readonly string[]).includes(wkst)) {
    throw refuse(`WKST=${wkst}: the week starts on one of ${WEEKDAYS.join(' ')}`);
  }

  const byDay = parts.get('BYDAY');
  const ordinals: { n: number; day: string }[] = [];
  if (byDay !== undefined) {
    for (const item of byDay.split(',')) {
      const match = /^([+-]?\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)$/.exec(item);
      if (match === null) {
        throw refuse(
          `BYDAY=${byDay}: days are MO TU WE TH FR SA SU, optionally with a position like 1MO or -1FR`,
        );
      }
      if (match[1] === undefined) continue;
      const n = Number(match[1]);
      const limit = freq === 'YEARLY' && months === null ? 53 : 5;
      if (n === 0 || Math.abs(n) > limit) {
        throw refuse(
          `BYDAY=${item}: a position is 1 to ${limit} or -1 to -${limit}${limit === 5 ? ' within a month' : ' within a year'}; -1${match[2]} is the last ${WEEKDAY_NAMES[match[2]!]}`,
        );
      }
      if (freq !== 'MONTHLY' && freq !== 'YEARLY') {
        throw refuse(
          `BYDAY=${item}: a position such as ${item} needs FREQ=MONTHLY or FREQ=YEARLY; with FREQ=${freq} write the day alone (${match[2]})`,
        );
      }
      if (freq === 'YEARLY' && weekNos !== null) {
        throw refuse(
          `BYDAY=${item}: a position cannot be combined with BYWEEKNO; write the day alone (${match[2]})`,
        );
      }
      ordinals.push({ n, day: match[2]! });
    }
  }
  if (parts.has('BYMONTHDAY') && freq === 'WEEKLY') {
    throw refuse(
      'BYMONTHDAY cannot be used with FREQ=WEEKLY; use FREQ=MONTHLY, or BYDAY for days of the week',
    );
  }
  if (parts.has('BYYEARDAY') && (freq === 'DAILY' || freq === 'WEEKLY' || freq === 'MONTHLY')) {
    throw refuse(`BYYEARDAY cannot be used with FREQ=${freq}; use FREQ=YEARLY`);
  }
  if (parts.has('BYWEEKNO') && freq !== 'YEARLY') {
    throw refuse(`BYWEEKNO needs FREQ=YEARLY, not FREQ=${freq}`);
  }
  if (parts.has('BYSETPOS') && ![...parts.keys()].some((k) => k.startsWith('BY') && k !== 'BYSETPOS')) {
    throw refuse(
      'BYSETPOS picks among the occurrences another BYxxx part makes (like BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1); add one',
    );
  }

  // What never occurs, said in the person's terms before anything is expanded.
  if (months !== null && monthDays !== null) {
    const fits = months.some((m) => monthDays.some((d) => Math.abs(d) <= MONTH_DAYS[m - 1]!));
    if (!fits) {
      const d = monthDays[0]!;
      throw refuse(
        `BYMONTHDAY=${parts.get('BYMONTHDAY')} never occurs in ${months.map((m) => MONTH_NAMES[m - 1]).join(', ')} (at most ${Math.max(...months.map((m) => MONTH_DAYS[m - 1]!))} days); use BYMONTHDAY=-1 for the last day${d > 0 ? '' : ''}`,
      );
    }
  }
  const fifth = ordinals.find((o) => Math.abs(o.n) === 5);
  if (fifth !== undefined && months !== null && months.every((m) => m === 2)) {
    const item = `${fifth.n}${fifth.day}`;
    throw refuse(
      `BYDAY=${item} never occurs in February but in a leap year whose February begins on a ${WEEKDAY_NAMES[fifth.day]} (once in 28 years); use ${fifth.n > 0 ? '-1' : '1'}${fifth.day} for the ${fifth.n > 0 ? 'last' : 'first'} ${WEEKDAY_NAMES[fifth.day]}`,
    );
  }

  const libraryRule = order.filter((p) => !p.startsWith('UNTIL=')).join(';');
  return { text: order.join(';'), freq, libraryRule, until, count };
}

function parseUntil(text: string, refuse: (hint: string) => Error): Until {
  const match = /^(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})(Z)?)?$/.exec(text);
  const bad = () =>
    refuse(`UNTIL=${text}: UNTIL is a date like 20270331, or a UTC time like 20270331T170000Z`);
  if (match === null) throw bad();
  const [, y, mo, d, h, mi, s, z] = match;
  const hasTime = h !== undefined;
  const ms = Date.UTC(
    Number(y),
    Number(mo) - 1,
    Number(d),
    Number(h ?? 23),
    Number(mi ?? 59),
    Number(s ?? 59),
  );
  const check = new Date(ms);
  if (
    check.getUTCMonth() !== Number(mo) - 1 ||
    check.getUTCDate() !== Number(d) ||
    Number(h ?? 0) > 23 ||
    Number(mi ?? 0) > 59 ||
    Number(s ?? 0) > 59
  ) {
    throw bad();
  }
  return hasTime && z !== undefined ? { kind: 'instant', ms } : { kind: 'wall', ms: hasTime ? ms : ms + 999 };
}

/** A rule bound to its zone and start: its occurrences as instants. */
export class RruleSchedule {
  readonly #rule: RRuleTemporal;
  readonly #startMs: number;

  constructor(
    readonly parsed: ParsedRrule,
    readonly timeZone: string,
    /** The DTSTART instant, to the whole second. */
    readonly start: Date,
  ) {
    this.#startMs = start.getTime() - mod(start.getTime(), 1000);
    const wall = this.#startMs + zoneOffsetMs(this.#startMs, timeZone);
    const dtstart = {
      timeZoneId: 'UTC',
      toString: () => `${new Date(wall).toISOString().slice(0, 19)}+00:00[UTC]`,
    };
    this.#rule = new RRuleTemporal({ rruleString: parsed.libraryRule, dtstart, tzid: 'UTC' });
  }

  /**
   * The first occurrence strictly after `after` (and not before the start), or null when none is
   * left. Throws a RangeError when the expansion gives up (a rule with no occurrence in reach).
   */
  next(after: Date): Date | null {
    const afterMs = Math.max(after.getTime(), this.#startMs - 1);
    const until = this.parsed.until;
    // Every wall-clock time before the one `after` reads maps to an instant at or before it (the
    // mapping never goes back in time), so the search starts there, as cron's does.
    let wallMs = afterMs + zoneOffsetMs(afterMs, this.timeZone);
    for (let step = 0; step < 10_000; step++) {
      const candidate = this.#rule.next(new Date(wallMs), false);
      if (candidate === null) return null;
      const candidateWall = candidate.epochMilliseconds;
      if (until?.kind === 'wall' && candidateWall > until.ms) return null;
      const instantMs = wallClockToInstant(candidateWall, this.timeZone);
      if (until?.kind === 'instant' && instantMs > until.ms) return null;
      if (instantMs > afterMs) return new Date(instantMs);
      wallMs = candidateWall;
    }
    throw new RangeError(`rrule ${this.parsed.text}: no occurrence after ${after.toISOString()}`);
  }

  /** The first `n` occurrences from the start (fewer when the rule ends). */
  first(n: number): Date[] {
    const out: Date[] = [];
    let last = new Date(this.#startMs - 1);
    while (out.length < n) {
      const next = this.next(last);
      if (next === null) break;
      out.push(next);
      last = next;
    }
    return out;
  }
}

/**
 * `value` read and bound to its zone and start, checked to occur at all (within
 * HORIZON_YEARS of the start): else `invalid_input` on `path`.
 */
export function compileRrule(value: unknown, timeZone: string, start: Date, path = 'rrule'): RruleSchedule {
  const parsed = parseRrule(value, path);
  const schedule = new RruleSchedule(parsed, timeZone, start);
  let first: Date | null;
  try {
    first = schedule.next(new Date(start.getTime() - 1));
  } catch {
    first = null;
  }
  const horizon = new Date(start);
  horizon.setUTCFullYear(horizon.getUTCFullYear() + HORIZON_YEARS);
  if (first === null || first > horizon) {
    const why =
      first === null
        ? parsed.until !== null || parsed.count !== null
          ? 'it has no occurrence between its start and its end (UNTIL)'
          : 'it never occurs: its parts rule each other out'
        : `its first occurrence is ${first.toISOString()}, more than ${HORIZON_YEARS} years away: its parts almost rule each other out`;
    const what =
      first === null && parsed.until !== null
        ? 'move UNTIL later, or drop it'
        : 'check BYMONTH, BYMONTHDAY, BYDAY and BYSETPOS together';
    throw invalidInput(path, RRULE_EXPECTED, value, `${why}; ${what}`);
  }
  return schedule;
}

function mod(a: number, b: number): number {
  return ((a % b) + b) % b;
}
