import { describe, expect, it } from 'vitest';
import { ChronosError } from '../errors.js';
import { nextFires, resolveSchedule } from './resolve.js';

function errorOf(fn: () => unknown): ChronosError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ChronosError);
    return error as ChronosError;
  }
  throw new Error('expected a ChronosError, but nothing was thrown');
}

const now = new Date('2027-03-14T09:00:00.000Z');

describe('resolveSchedule: exactly one of at, in_seconds and cron', () => {
  it.each([
    [{}, 'none of them'],
    [{ timezone: 'Europe/Paris' }, 'none of them'],
    [{ at: '2027-03-14T10:00:00Z', cron: '@daily' }, '"at" and "cron"'],
    [{ at: '2027-03-14T10:00:00Z', inSeconds: 60, cron: '@daily' }, '"at" and "inSeconds" and "cron"'],
  ])('refuses %j, naming the three and asking for exactly one', (input, got) => {
    const error = errorOf(() => resolveSchedule(input, now));
    expect(error.code).toBe('invalid_input');
    expect(error.message).toBe(
      `body: expected exactly one of "at", "inSeconds", "cron" or "rrule", got ${got}; send exactly one`,
    );
    expect(error.errors).toEqual([{ path: '', message: error.message }]);
  });

  it('counts null as absent', () => {
    expect(resolveSchedule({ at: null, inSeconds: 60, cron: null }, now).kind).toBe('once');
  });
});

describe('resolveSchedule: at', () => {
  it('reads an RFC 3339 time in UTC', () => {
    expect(resolveSchedule({ at: '2027-03-14T10:00:00Z' }, now)).toEqual({
      kind: 'once',
      fireAt: new Date('2027-03-14T10:00:00.000Z'),
      cronExpr: '',
      timezone: 'UTC',
      nextFireAt: new Date('2027-03-14T10:00:00.000Z'),
    });
  });

  it('reads an RFC 3339 time with an offset', () => {
    expect(resolveSchedule({ at: '2027-03-14T10:00:00+01:00' }, now).fireAt).toEqual(
      new Date('2027-03-14T09:00:00Z'),
    );
    expect(resolveSchedule({ at: '2027-03-14T05:30:00-04:30' }, now).fireAt).toEqual(
      new Date('2027-03-14T10:00:00Z'),
    );
  });

  it('reads a lower-case t and z, and a space between date and time', () => {
    expect(resolveSchedule({ at: '2027-03-14t10:00:00z' }, now).fireAt).toEqual(
      new Date('2027-03-14T10:00:00Z'),
    );
    expect(resolveSchedule({ at: '2027-03-14 10:00:00Z' }, now).fireAt).toEqual(
      new Date('2027-03-14T10:00:00Z'),
    );
  });

  it('keeps milliseconds and rounds finer fractions up, so that it never fires early', () => {
    expect(resolveSchedule({ at: '2027-03-14T10:00:00.5Z' }, now).fireAt?.toISOString()).toBe(
      '2027-03-14T10:00:00.500Z',
    );
    expect(resolveSchedule({ at: '2027-03-14T10:00:00.123Z' }, now).fireAt?.toISOString()).toBe(
      '2027-03-14T10:00:00.123Z',
    );
    expect(resolveSchedule({ at: '2027-03-14T10:00:00.123000Z' }, now).fireAt?.toISOString()).toBe(
      '2027-03-14T10:00:00.123Z',
    );
    expect(resolveSchedule({ at: '2027-03-14T10:00:00.123001Z' }, now).fireAt?.toISOString()).toBe(
      '2027-03-14T10:00:00.124Z',
    );
    expect(resolveSchedule({ at: '2027-03-14T10:00:00.9999Z' }, now).fireAt?.toISOString()).toBe(
      '2027-03-14T10:00:01.000Z',
    );
  });

  it('accepts a Date, as the library passes', () => {
    const at = new Date('2027-03-14T10:00:00.250Z');
    const resolved = resolveSchedule({ at }, now);
    expect(resolved.fireAt).toEqual(at);
    expect(resolved.fireAt).not.toBe(at);
  });

  it('accepts 29 February in a leap year', () => {
    expect(resolveSchedule({ at: '2028-02-29T00:00:00Z' }, now).fireAt).toEqual(
      new Date('2028-02-29T00:00:00Z'),
    );
  });

  const expected =
    'at: expected an RFC 3339 time with an offset, like "2027-03-14T09:00:00Z" or "2027-03-14T10:00:00+01:00"';

  it.each([
    ['2027-03-14T09:00:00', 'add "Z" for UTC or an offset like "+01:00"'],
    ['2027-03-14T09:00:00.000', 'add "Z" for UTC or an offset like "+01:00"'],
    ['2027-03-14T09:00:00+0100', 'write the offset with a colon, like "+01:00"'],
    ['2027-03-14T09:00Z', 'add the seconds'],
    ['2026-12-08T09:00', 'add the seconds and "Z" for UTC or an offset, like "2026-12-08T09:00:00Z"'],
    ['2027-03-14', 'add a time and an offset'],
    ['2027-02-30T09:00:00Z', 'that date or time does not exist'],
    ['2027-02-29T09:00:00Z', 'that date or time does not exist'],
    ['2027-13-01T09:00:00Z', 'that date or time does not exist'],
    ['2027-03-14T24:00:00Z', 'that date or time does not exist'],
    ['2027-03-14T09:60:00Z', 'that date or time does not exist'],
    ['2027-03-14T09:00:00+24:00', 'that date or time does not exist'],
    ['tomorrow', ''],
    ['', ''],
  ])('refuses %j, saying what was expected and how to fix it', (at, hint) => {
    const error = errorOf(() => resolveSchedule({ at }, now));
    expect(error.code).toBe('invalid_input');
    expect(error.message.startsWith(`${expected}, got ${JSON.stringify(at)}`)).toBe(true);
    expect(error.message).toContain(hint);
    expect(error.errors[0]?.path).toBe('at');
  });

  it('refuses values that are neither strings nor Dates, and invalid Dates', () => {
    expect(errorOf(() => resolveSchedule({ at: 1_900_000_000_000 }, now)).message).toBe(
      `${expected}, got 1900000000000`,
    );
    expect(errorOf(() => resolveSchedule({ at: new Date('nope') }, now)).message).toBe(
      `${expected}, got an invalid Date`,
    );
  });

  it('refuses a time more than a minute in the past, showing how long ago and the server time', () => {
    const error = errorOf(() => resolveSchedule({ at: '2027-03-14T06:00:00Z' }, now));
    expect(error.message).toBe(
      'at: expected a time in the future, got "2027-03-14T06:00:00Z" which is 3h ago ' +
        '(server time is 2027-03-14T09:00:00.000Z); check the time zone offset',
    );
    expect(error.errors).toEqual([{ path: 'at', message: error.message }]);
  });

  it('catches the usual time zone mistake: local time sent as UTC, an hour off', () => {
    const error = errorOf(() => resolveSchedule({ at: '2027-03-14T08:00:00.000Z' }, now));
    expect(error.message).toContain('which is 1h ago');
  });

  it('accepts a time within the tolerance in the past, due at once', () => {
    const resolved = resolveSchedule({ at: '2027-03-14T08:59:30Z' }, now);
    expect(resolved.nextFireAt).toEqual(new Date('2027-03-14T08:59:30Z'));
    expect(resolveSchedule({ at: '2027-03-14T08:59:00Z' }, now).nextFireAt).toEqual(
      new Date('2027-03-14T08:59:00Z'),
    );
    expect(() => resolveSchedule({ at: '2027-03-14T08:58:59.999Z' }, now)).toThrow(/which is 1m ago/);
  });

  it('takes the tolerance from the options', () => {
    expect(() => resolveSchedule({ at: '2027-03-14T08:59:59.999Z' }, now, { pastToleranceMs: 0 })).toThrow(
      /expected a time in the future/,
    );
    expect(resolveSchedule({ at: now }, now, { pastToleranceMs: 0 }).nextFireAt).toEqual(now);
    expect(resolveSchedule({ at: '2027-03-14T08:00:00Z' }, now, { pastToleranceMs: 3_600_000 }).kind).toBe(
      'once',
    );
  });
});

describe('resolveSchedule: in_seconds', () => {
  it('fires that many seconds after now', () => {
    expect(resolveSchedule({ inSeconds: 90 }, now)).toEqual({
      kind: 'once',
      fireAt: new Date('2027-03-14T09:01:30.000Z'),
      cronExpr: '',
      timezone: 'UTC',
      nextFireAt: new Date('2027-03-14T09:01:30.000Z'),
    });
  });

  it('accepts 1 to 315 360 000 seconds', () => {
    expect(resolveSchedule({ inSeconds: 1 }, now).nextFireAt).toEqual(new Date('2027-03-14T09:00:01Z'));
    expect(resolveSchedule({ inSeconds: 315_360_000 }, now).nextFireAt.getTime()).toBe(
      now.getTime() + 315_360_000_000,
    );
  });

  it.each([
    [0, 'got 0'],
    [-5, 'got -5'],
    [315_360_001, 'got 315360001'],
    [1.5, 'got 1.5; round it to whole seconds'],
    [Number.NaN, 'got NaN'],
    ['60', 'got "60"'],
    [true, 'got true'],
  ])('refuses %j', (inSeconds, got) => {
    const error = errorOf(() => resolveSchedule({ inSeconds }, now));
    expect(error.message).toBe(
      `inSeconds: expected an integer number of seconds from 1 to 315360000, ${got}`,
    );
    expect(error.errors[0]?.path).toBe('inSeconds');
  });
});

describe('resolveSchedule: timezone', () => {
  it('is validated and kept with at and in_seconds, to show local times', () => {
    expect(resolveSchedule({ inSeconds: 60, timezone: 'Europe/Paris' }, now).timezone).toBe('Europe/Paris');
    expect(resolveSchedule({ at: '2027-03-14T10:00:00Z', timezone: 'Asia/Tokyo' }, now).timezone).toBe(
      'Asia/Tokyo',
    );
  });

  it('refuses an unknown zone on the timezone path, with a suggestion', () => {
    const error = errorOf(() => resolveSchedule({ inSeconds: 60, timezone: 'CEST' }, now));
    expect(error.errors[0]?.path).toBe('timezone');
    expect(error.message).toContain('timezone: expected an IANA time zone');
    expect(error.message).toContain('got "CEST"');
    expect(error.message).toContain('did you mean "Europe/Paris"');
  });

  it('defaults to UTC when absent or null', () => {
    expect(resolveSchedule({ cron: '@daily', timezone: null }, now).timezone).toBe('UTC');
  });
});

describe('resolveSchedule: cron', () => {
  it('fires at the next occurrence after now, in UTC by default', () => {
    expect(resolveSchedule({ cron: '0 9 * * MON-FRI' }, now)).toEqual({
      kind: 'cron',
      fireAt: null,
      cronExpr: '0 9 * * MON-FRI',
      timezone: 'UTC',
      nextFireAt: new Date('2027-03-15T09:00:00.000Z'),
    });
  });

  it('evaluates the expression in the given zone', () => {
    const resolved = resolveSchedule({ cron: '0 9 * * MON-FRI', timezone: 'Europe/Paris' }, now);
    expect(resolved.nextFireAt).toEqual(new Date('2027-03-15T08:00:00.000Z'));
    expect(resolved.timezone).toBe('Europe/Paris');
  });

  it('stores the normalised expression', () => {
    expect(resolveSchedule({ cron: ' @Hourly ' }, now).cronExpr).toBe('@hourly');
  });

  it('fires "@every" one interval after now without an anchor, and on the grid with one', () => {
    expect(resolveSchedule({ cron: '@every 15m' }, now).nextFireAt).toEqual(new Date('2027-03-14T09:15:00Z'));
    const anchor = new Date('2027-03-14T08:50:00Z');
    expect(resolveSchedule({ cron: '@every 15m' }, now, { anchor }).nextFireAt).toEqual(
      new Date('2027-03-14T09:05:00Z'),
    );
  });

  it('refuses a bad expression on the cron path', () => {
    const error = errorOf(() => resolveSchedule({ cron: '0 0 9 * * *' }, now));
    expect(error.errors[0]?.path).toBe('cron');
    expect(error.message).toContain('cron: expected a 5-field cron expression');
    expect(error.message).toContain('got "0 0 9 * * *"');
  });

  it('refuses a schedule that fires more often than the operator allows, naming the minimum', () => {
    const error = errorOf(() => resolveSchedule({ cron: '* * * * *' }, now, { minCronIntervalMs: 300_000 }));
    expect(error.message).toBe(
      'cron: expected a schedule that fires at most once every 5m, got "* * * * *"; ' +
        'this one fires as often as every 1m; the operator sets that minimum with CHRONOS_MIN_CRON_INTERVAL',
    );
    expect(error.errors[0]?.path).toBe('cron');
    expect(() => resolveSchedule({ cron: '@every 30s' }, now, { minCronIntervalMs: 60_000 })).toThrow(
      /every 1m/,
    );
  });

  it('accepts a schedule exactly at the minimum, and any schedule when the minimum is 0', () => {
    expect(resolveSchedule({ cron: '*/5 * * * *' }, now, { minCronIntervalMs: 300_000 }).kind).toBe('cron');
    expect(resolveSchedule({ cron: '@every 1s' }, now, { minCronIntervalMs: 0 }).kind).toBe('cron');
  });
});

describe('nextFires', () => {
  it('lists one fire time for a once alarm, in UTC and local time', () => {
    const resolved = resolveSchedule({ at: '2027-03-14T10:00:00Z', timezone: 'Europe/Paris' }, now);
    expect(nextFires(resolved)).toEqual([
      { utc: '2027-03-14T10:00:00.000Z', local: '2027-03-14T11:00:00.000+01:00' },
    ]);
  });

  it('lists three fire times for a cron alarm by default, across a DST change', () => {
    const resolved = resolveSchedule(
      { cron: '30 2 * * *', timezone: 'Europe/Paris' },
      new Date('2027-03-26T12:00:00Z'),
    );
    expect(nextFires(resolved)).toEqual([
      { utc: '2027-03-27T01:30:00.000Z', local: '2027-03-27T02:30:00.000+01:00' },
      { utc: '2027-03-28T01:00:00.000Z', local: '2027-03-28T03:00:00.000+02:00' },
      { utc: '2027-03-29T00:30:00.000Z', local: '2027-03-29T02:30:00.000+02:00' },
    ]);
  });

  it('lists as many as asked', () => {
    const resolved = resolveSchedule({ cron: '@hourly' }, now);
    expect(nextFires(resolved, 5).map((f) => f.utc)).toEqual([
      '2027-03-14T10:00:00.000Z',
      '2027-03-14T11:00:00.000Z',
      '2027-03-14T12:00:00.000Z',
      '2027-03-14T13:00:00.000Z',
      '2027-03-14T14:00:00.000Z',
    ]);
    expect(nextFires(resolved, 0)).toEqual([]);
  });

  it('anchors "@every" on the next fire time', () => {
    const schedule = {
      kind: 'cron' as const,
      cronExpr: '@every 1h30m',
      timezone: 'UTC',
      nextFireAt: new Date('2027-03-14T10:00:00.250Z'),
    };
    expect(nextFires(schedule).map((f) => f.utc)).toEqual([
      '2027-03-14T10:00:00.250Z',
      '2027-03-14T11:30:00.250Z',
      '2027-03-14T13:00:00.250Z',
    ]);
  });
});
