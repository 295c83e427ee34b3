import fc from 'fast-check';
import { RRule } from 'rrule';
import { RRuleTemporal } from 'rrule-temporal';
import { describe, expect, it } from 'vitest';
import { ChronosError } from '../errors.js';
import { dueAt, jitterOffsetMs, nextDue } from './next-occurrence.js';
import { nextFires, resolveSchedule } from './resolve.js';
import { compileRrule, parseRrule } from './rrule.js';
import { formatLocal, wallClockToInstant } from './time-zone.js';

function refusal(fn: () => unknown): ChronosError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ChronosError);
    return error as ChronosError;
  }
  throw new Error('expected a refusal');
}

const iso = (dates: readonly Date[]) => dates.map((d) => d.toISOString());

describe('parseRrule: reading a rule', () => {
  it('accepts a leading RRULE: and does not store it; upper-cases parts', () => {
    expect(parseRrule('RRULE:freq=weekly;interval=2;byday=tu;byhour=9;byminute=0').text).toBe(
      'FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0',
    );
  });

  it.each([
    ['FREQ=DAILY;BYHOUR=25', 'BYHOUR=25: hours are 0 to 23'],
    ['FREQ=DAILY;FOO=1', '"FOO" is not a rule part'],
    ['FREQ=SECONDLY', 'FREQ=SECONDLY is not taken'],
    ['FREQ=FORTNIGHTLY', 'FREQ=FORTNIGHTLY: FREQ is one of MINUTELY HOURLY DAILY WEEKLY MONTHLY YEARLY'],
    ['BYDAY=MO', 'FREQ is missing'],
    ['FREQ=DAILY;COUNT=2;UNTIL=20270101', 'COUNT and UNTIL are both given'],
    ['FREQ=MONTHLY;BYMONTH=2;BYDAY=5FR', 'BYDAY=5FR never occurs in February'],
    ['FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30', 'BYMONTHDAY=30 never occurs in February'],
    ['FREQ=WEEKLY;BYDAY=1MO', 'needs FREQ=MONTHLY or FREQ=YEARLY'],
    ['FREQ=MONTHLY;BYDAY=6FR', 'BYDAY=6FR: a position is 1 to 5'],
    ['FREQ=DAILY;BYSETPOS=1', 'BYSETPOS picks among'],
    ['FREQ=DAILY;UNTIL=2027-01-01', 'UNTIL is a date like 20270331'],
    ['DTSTART:20270101T090000Z\nRRULE:FREQ=DAILY', 'without DTSTART'],
    ['FREQ=DAILY;INTERVAL=0', 'INTERVAL is a whole number from 1'],
  ])('refuses %j naming the part: %s', (rule, part) => {
    const error = refusal(() => compileRrule(rule, 'UTC', new Date('2027-01-01T00:00:00Z')));
    expect(error.errors).toHaveLength(1);
    expect(error.errors[0]!.path).toBe('rrule');
    expect(error.message).toContain(part);
  });

  it('suggests -1FR for a fifth Friday of February', () => {
    const error = refusal(() => parseRrule('FREQ=YEARLY;BYMONTH=2;BYDAY=5FR'));
    expect(error.message).toContain('use -1FR for the last Friday');
  });

  it('refuses a rule that never occurs, and one whose UNTIL is already past', () => {
    expect(
      refusal(() =>
        compileRrule('FREQ=YEARLY;BYYEARDAY=366;BYMONTH=1', 'UTC', new Date('2027-01-01T00:00:00Z')),
      ).message,
    ).toContain('it never occurs');
    expect(
      refusal(() => compileRrule('FREQ=DAILY;UNTIL=20200101', 'UTC', new Date('2027-01-01T00:00:00Z')))
        .message,
    ).toContain('no occurrence between its start and its end');
  });

  it('rrule-temporal itself takes an out-of-range BYHOUR without a word (why we parse first)', () => {
    const dtstart = { timeZoneId: 'UTC', toString: () => '2027-01-01T00:00:00+00:00[UTC]' };
    expect(() => new RRuleTemporal({ rruleString: 'FREQ=DAILY;BYHOUR=25', dtstart })).not.toThrow();
  });
});

describe('RruleSchedule: occurrences in the zone', () => {
  it('every other Tuesday at 09:00 Paris, from the start, across the spring change', () => {
    const s = compileRrule(
      'FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
      'Europe/Paris',
      new Date('2027-03-01T10:00:00Z'),
    );
    expect(iso(s.first(3))).toEqual([
      '2027-03-02T08:00:00.000Z',
      '2027-03-16T08:00:00.000Z',
      '2027-03-30T07:00:00.000Z',
    ]);
  });

  it('parts left out take the start: FREQ=DAILY fires at the start time of day, the start included', () => {
    const s = compileRrule('FREQ=DAILY;COUNT=3', 'UTC', new Date('2027-01-01T10:20:30.456Z'));
    expect(iso(s.first(5))).toEqual([
      '2027-01-01T10:20:30.000Z',
      '2027-01-02T10:20:30.000Z',
      '2027-01-03T10:20:30.000Z',
    ]);
    expect(s.next(new Date('2027-01-03T10:20:30.000Z'))).toBeNull();
  });

  it('the start is an occurrence only when it matches the rule', () => {
    // 2027-01-01 is a Friday: a Monday rule starts on the 4th.
    const s = compileRrule('FREQ=WEEKLY;BYDAY=MO', 'UTC', new Date('2027-01-01T09:00:00Z'));
    expect(iso(s.first(1))).toEqual(['2027-01-04T09:00:00.000Z']);
  });

  it('dst-gap: 02:30 Paris on the spring-forward night fires at 03:00 CEST (rrule-temporal skips it)', () => {
    const rule = 'FREQ=DAILY;BYHOUR=2;BYMINUTE=30;BYSECOND=0';
    const s = compileRrule(rule, 'Europe/Paris', new Date('2027-03-26T10:00:00Z'));
    expect(s.first(3).map((d) => formatLocal(d, 'Europe/Paris'))).toEqual([
      '2027-03-27T02:30:00.000+01:00',
      '2027-03-28T03:00:00.000+02:00',
      '2027-03-29T02:30:00.000+02:00',
    ]);
    // The library, given the zone, omits the 28th (RFC 5545's reading); §3 says fire after the gap.
    const dtstart = { timeZoneId: 'Europe/Paris', toString: () => '2027-03-26T11:00:00+01:00[Europe/Paris]' };
    const lib: string[] = [];
    new RRuleTemporal({ rruleString: rule, dtstart }).all((d, i) => (lib.push(d.toString()), i < 1));
    expect(lib).toEqual([
      '2027-03-27T02:30:00+01:00[Europe/Paris]',
      '2027-03-29T02:30:00+02:00[Europe/Paris]',
    ]);
  });

  it('dst-overlap: 02:30 Paris on the fall-back night fires once, at its first occurrence', () => {
    const s = compileRrule(
      'FREQ=DAILY;BYHOUR=2;BYMINUTE=30;BYSECOND=0',
      'Europe/Paris',
      new Date('2027-10-30T10:00:00Z'),
    );
    expect(iso(s.first(2))).toEqual(['2027-10-31T00:30:00.000Z', '2027-11-01T01:30:00.000Z']);
    expect(s.next(new Date('2027-10-31T00:30:00.010Z'))?.toISOString()).toBe('2027-11-01T01:30:00.000Z');
  });

  it('the last Friday of each month at 17:00 New York', () => {
    const s = compileRrule(
      'FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0',
      'America/New_York',
      new Date('2027-01-01T00:00:00Z'),
    );
    expect(s.first(3).map((d) => formatLocal(d, 'America/New_York'))).toEqual([
      '2027-01-29T17:00:00.000-05:00',
      '2027-02-26T17:00:00.000-05:00',
      '2027-03-26T17:00:00.000-04:00',
    ]);
  });

  it('UNTIL in UTC bounds instants; a date UNTIL includes its whole local day', () => {
    const s = compileRrule(
      'FREQ=DAILY;BYHOUR=23;BYMINUTE=0;BYSECOND=0;UNTIL=20270103',
      'Europe/Paris',
      new Date('2027-01-01T00:00:00Z'),
    );
    expect(s.first(10).map((d) => formatLocal(d, 'Europe/Paris'))).toEqual([
      '2027-01-01T23:00:00.000+01:00',
      '2027-01-02T23:00:00.000+01:00',
      '2027-01-03T23:00:00.000+01:00',
    ]);
    const z = compileRrule(
      'FREQ=DAILY;BYHOUR=23;BYMINUTE=0;BYSECOND=0;UNTIL=20270102T220000Z',
      'Europe/Paris',
      new Date('2027-01-01T00:00:00Z'),
    );
    expect(z.first(10)).toHaveLength(2);
  });
});

describe('resolveSchedule: rrule, windows and jitter', () => {
  const now = new Date('2027-03-14T09:00:00.250Z');

  it('resolves kind rrule from now to the whole second', () => {
    const r = resolveSchedule({ rrule: 'RRULE:FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0' }, now);
    expect(r).toMatchObject({
      kind: 'rrule',
      rrule: 'FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
      cronExpr: '',
      fireAt: null,
    });
    expect(r.rruleStart?.toISOString()).toBe('2027-03-14T09:00:00.000Z');
    // The start matches the rule: it is the first occurrence, due at once (RFC 5545's DTSTART).
    expect(r.nextFireAt.toISOString()).toBe('2027-03-14T09:00:00.000Z');
    const later = resolveSchedule(
      { rrule: 'FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0' },
      new Date('2027-03-14T09:00:01.250Z'),
    );
    expect(later.nextFireAt.toISOString()).toBe('2027-03-15T09:00:00.000Z');
  });

  it('refuses a rule more frequent than the minimum interval, on rrule', () => {
    const error = refusal(() =>
      resolveSchedule({ rrule: 'FREQ=MINUTELY;INTERVAL=5' }, now, { minCronIntervalMs: 600_000 }),
    );
    expect(error.errors[0]!.path).toBe('rrule');
    expect(error.message).toContain('at most once every 10m');
  });

  it('starts_at and ends_at bound the occurrences', () => {
    const r = resolveSchedule(
      {
        rrule: 'FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
        startsAt: '2027-04-01T00:00:00Z',
        endsAt: '2027-04-03T12:00:00Z',
      },
      now,
    );
    expect(nextFires(r, 10).map((f) => f.utc)).toEqual([
      '2027-04-01T09:00:00.000Z',
      '2027-04-02T09:00:00.000Z',
      '2027-04-03T09:00:00.000Z',
    ]);
    const c = resolveSchedule(
      { cron: '0 9 * * *', startsAt: '2027-04-01T00:00:00Z', endsAt: '2027-04-02T12:00:00Z' },
      now,
    );
    expect(nextFires(c, 10).map((f) => f.utc)).toEqual([
      '2027-04-01T09:00:00.000Z',
      '2027-04-02T09:00:00.000Z',
    ]);
  });

  it.each([
    [{ inSeconds: 60, startsAt: '2027-04-01T00:00:00Z' }, 'startsAt'],
    [{ at: '2027-04-01T00:00:00Z', jitterSeconds: 5 }, 'jitterSeconds'],
    [{ cron: '@daily', startsAt: '2027-04-02T00:00:00Z', endsAt: '2027-04-01T00:00:00Z' }, 'endsAt'],
    [{ cron: '@daily', endsAt: '2027-03-14T08:00:00Z' }, 'endsAt'],
    [{ cron: '0 9 * * *', jitterSeconds: 3600 }, 'jitterSeconds'], // fine: a day apart
    [{ cron: '*/5 * * * *', jitterSeconds: 300 }, 'jitterSeconds'],
    [{ rrule: 'FREQ=HOURLY', jitterSeconds: 3600 }, 'jitterSeconds'],
    [{ cron: '0 9 * * *', startsAt: '2027-04-01T10:00:00Z', endsAt: '2027-04-01T11:00:00Z' }, 'endsAt'],
  ])('%j is refused on %s (but for a day-apart jitter)', (input, path) => {
    if ((input as { jitterSeconds?: number }).jitterSeconds === 3600 && 'cron' in input) {
      expect(resolveSchedule(input, now).jitterSeconds).toBe(3600);
      return;
    }
    const error = refusal(() => resolveSchedule(input, now));
    expect(error.errors[0]!.path).toBe(path);
  });
});

describe('jitter', () => {
  const id = '0190f3c2-7a1b-7c3d-8e4f-5a6b7c8d9e0f';
  const occurrence = new Date('2027-03-15T09:00:00.000Z');

  it('is stable for one alarm and occurrence, in [0, jitter), and differs between alarms', () => {
    const a = jitterOffsetMs(id, occurrence, 60);
    expect(jitterOffsetMs(id, occurrence, 60)).toBe(a);
    expect(jitterOffsetMs(id.toUpperCase(), occurrence, 60)).toBe(a);
    const offsets = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const other = `0190f3c2-7a1b-7c3d-8e4f-${String(i).padStart(12, '0')}`;
      const o = jitterOffsetMs(other, occurrence, 60);
      expect(o).toBeGreaterThanOrEqual(0);
      expect(o).toBeLessThan(60_000);
      offsets.add(Math.floor(o / 6_000));
    }
    expect(offsets.size).toBe(10); // spread over the whole window
  });

  it('advances to the next jittered occurrence, never early, without catching up', () => {
    const alarm = {
      id,
      kind: 'rrule' as const,
      cronExpr: '',
      rrule: 'FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
      rruleStart: new Date('2027-03-14T00:00:00Z'),
      timezone: 'UTC',
      jitterSeconds: 600,
      scheduledFor: dueAt({ id, jitterSeconds: 600 }, occurrence),
    };
    const next = nextDue(alarm, new Date(alarm.scheduledFor.getTime() + 5));
    expect(next?.toISOString()).toBe(dueAt(alarm, new Date('2027-03-16T09:00:00Z')).toISOString());
    expect(next!.getTime()).toBeGreaterThanOrEqual(Date.parse('2027-03-16T09:00:00Z'));
    // Three days down: the next after now, once.
    const late = nextDue(alarm, new Date('2027-03-18T12:00:00Z'));
    expect(late?.toISOString()).toBe(dueAt(alarm, new Date('2027-03-19T09:00:00Z')).toISOString());
  });
});

// ---- Against a second implementation -----------------------------------------------------------

const ZONES = [
  'UTC',
  'Europe/Paris',
  'America/New_York',
  'Australia/Sydney',
  'Asia/Kolkata',
  'America/Sao_Paulo',
];
const DAYS = ['MO', 'TU', 'WE', 'TH', 'FR', 'SA', 'SU'];

const ruleArb = fc
  .record({
    freq: fc.constantFrom('HOURLY', 'DAILY', 'WEEKLY', 'MONTHLY', 'YEARLY'),
    interval: fc.integer({ min: 1, max: 3 }),
    byDay: fc.option(fc.subarray(DAYS, { minLength: 1, maxLength: 3 }), { nil: undefined }),
    ordinal: fc.option(fc.constantFrom(1, 2, -1), { nil: undefined }),
    byMonthDay: fc.option(fc.subarray([1, 10, 15, 28, -1], { minLength: 1, maxLength: 2 }), {
      nil: undefined,
    }),
    byMonth: fc.option(fc.subarray([1, 3, 6, 10, 11], { minLength: 1, maxLength: 3 }), { nil: undefined }),
    byHour: fc.option(fc.subarray([0, 1, 2, 3, 9, 17, 23], { minLength: 1, maxLength: 2 }), {
      nil: undefined,
    }),
    byMinute: fc.option(fc.subarray([0, 15, 30], { minLength: 1, maxLength: 2 }), { nil: undefined }),
    bySetPos: fc.option(fc.constantFrom(1, -1), { nil: undefined }),
    count: fc.option(fc.integer({ min: 1, max: 30 }), { nil: undefined }),
  })
  .map((r) => {
    const parts = [`FREQ=${r.freq}`];
    if (r.interval > 1) parts.push(`INTERVAL=${r.interval}`);
    if (r.count !== undefined) parts.push(`COUNT=${r.count}`);
    if (r.byMonth && r.freq !== 'HOURLY') parts.push(`BYMONTH=${r.byMonth.join(',')}`);
    if (r.byMonthDay && (r.freq === 'MONTHLY' || r.freq === 'YEARLY') && !r.byDay) {
      parts.push(`BYMONTHDAY=${r.byMonthDay.join(',')}`);
    }
    if (r.byDay) {
      const ordinal = r.ordinal !== undefined && r.freq === 'MONTHLY' ? String(r.ordinal) : '';
      parts.push(`BYDAY=${r.byDay.map((d) => ordinal + d).join(',')}`);
    }
    if (r.byHour && r.freq !== 'HOURLY') parts.push(`BYHOUR=${r.byHour.join(',')}`);
    if (r.byMinute) parts.push(`BYMINUTE=${r.byMinute.join(',')}`);
    parts.push('BYSECOND=0');
    if (r.bySetPos !== undefined && r.byDay && r.freq === 'MONTHLY' && r.ordinal === undefined) {
      parts.push(`BYSETPOS=${r.bySetPos}`);
    }
    return parts.join(';');
  });

const startArb = fc
  .integer({ min: Date.UTC(2026, 0, 1) / 1000, max: Date.UTC(2030, 0, 1) / 1000 })
  .map((s) => new Date(s * 1000));

describe('property: the same occurrences as the rrule package', () => {
  it('over random rules, zones and starts (rrule.js on the wall clock, §3 mapping to instants)', () => {
    let refused = 0;
    let compared = 0;
    fc.assert(
      fc.property(ruleArb, fc.constantFrom(...ZONES), startArb, (rule, zone, start) => {
        let ours;
        try {
          ours = compileRrule(rule, zone, start);
        } catch (error) {
          // Refused only when it has no occurrence within reach; rrule.js agrees there is none soon.
          expect(error).toBeInstanceOf(ChronosError);
          refused++;
          return;
        }
        const n = 20;
        const got = ours.first(n);
        // rrule.js, floating (no TZID): DTSTART and its results are wall-clock times as UTC fields.
        const wallStart = start.getTime() + (formatLocalOffsetMs(start, zone) ?? 0);
        const theirs = new RRule({ ...RRule.parseString(rule), dtstart: new Date(wallStart) }).all(
          (_d, i) => i < n + 5,
        );
        // Each wall-clock time fires at the instant §3 gives it; a gap's times fire once, together.
        const expected: number[] = [];
        for (const wall of theirs) {
          const at = wallClockToInstant(wall.getTime(), zone);
          if (at < start.getTime()) continue; // the start's own wall time read in an overlap's second pass
          if (expected.length > 0 && at <= expected[expected.length - 1]!) continue;
          expected.push(at);
        }
        expect(iso(got)).toEqual(iso(expected.slice(0, got.length).map((ms) => new Date(ms))));
        if (got.length < n) expect(expected.length).toBe(got.length);
        compared += got.length;
      }),
      { numRuns: 150, seed: 48 },
    );
    // The comparison is not vacuous: most rules are read and many occurrences compared.
    expect(refused).toBeLessThan(30);
    expect(compared).toBeGreaterThan(1_500);
  });
});

function formatLocalOffsetMs(instant: Date, zone: string): number {
  const local = formatLocal(instant, zone);
  const match = /([+-])(\d{2}):(\d{2})$/.exec(local)!;
  return (match[1] === '-' ? -1 : 1) * (Number(match[2]) * 60 + Number(match[3])) * 60_000;
}
