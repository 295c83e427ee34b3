import { Cron } from 'croner';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ChronosError } from '../errors.js';
import { minIntervalMs, parseCron } from './cron.js';

function errorOf(fn: () => unknown): ChronosError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ChronosError);
    return error as ChronosError;
  }
  throw new Error('expected a ChronosError, but nothing was thrown');
}

/** The next `count` occurrences after `from`, as ISO strings. */
function occurrences(expr: string, timeZone: string, from: string, count = 1): string[] {
  const schedule = parseCron(expr, timeZone);
  const out: string[] = [];
  let at = new Date(from);
  for (let i = 0; i < count; i++) {
    at = schedule.next(at);
    out.push(at.toISOString());
  }
  return out;
}

describe('parseCron: what it accepts', () => {
  it('reads a 5-field expression in UTC by default zone name', () => {
    const schedule = parseCron('0 9 * * *', 'UTC');
    expect(schedule.expr).toBe('0 9 * * *');
    expect(schedule.timeZone).toBe('UTC');
    expect(schedule.next(new Date('2027-03-14T08:00:00Z')).toISOString()).toBe('2027-03-14T09:00:00.000Z');
  });

  it('stores the expression with its whitespace collapsed', () => {
    expect(parseCron('  0   9 * *\tMON-FRI ', 'UTC').expr).toBe('0 9 * * MON-FRI');
  });

  it('reads ranges, lists, steps and day and month names', () => {
    // 2027-03-12 is a Friday.
    expect(occurrences('0 9 * * MON-FRI', 'UTC', '2027-03-12T10:00:00Z', 2)).toEqual([
      '2027-03-15T09:00:00.000Z',
      '2027-03-16T09:00:00.000Z',
    ]);
    expect(occurrences('*/20 8-9 * * *', 'UTC', '2027-03-14T00:00:00Z', 7)).toEqual([
      '2027-03-14T08:00:00.000Z',
      '2027-03-14T08:20:00.000Z',
      '2027-03-14T08:40:00.000Z',
      '2027-03-14T09:00:00.000Z',
      '2027-03-14T09:20:00.000Z',
      '2027-03-14T09:40:00.000Z',
      '2027-03-15T08:00:00.000Z',
    ]);
    expect(occurrences('15,45 12 1 JAN,jul *', 'UTC', '2027-02-01T00:00:00Z', 3)).toEqual([
      '2027-07-01T12:15:00.000Z',
      '2027-07-01T12:45:00.000Z',
      '2028-01-01T12:15:00.000Z',
    ]);
  });

  it('reads 7 as well as 0 for Sunday', () => {
    // 2027-03-14 is a Sunday.
    expect(occurrences('0 0 * * 7', 'UTC', '2027-03-10T00:00:00Z')).toEqual(['2027-03-14T00:00:00.000Z']);
    expect(occurrences('0 0 * * 0', 'UTC', '2027-03-10T00:00:00Z')).toEqual(['2027-03-14T00:00:00.000Z']);
  });

  it('fires on either a matching day of month or a matching weekday when both are restricted', () => {
    // The 1st, and every Monday: 2027-03-01 is a Monday, 2027-03-08 the next.
    expect(occurrences('0 0 1 * MON', 'UTC', '2027-02-27T00:00:00Z', 3)).toEqual([
      '2027-03-01T00:00:00.000Z',
      '2027-03-08T00:00:00.000Z',
      '2027-03-15T00:00:00.000Z',
    ]);
  });

  it('fires on 29 February only in leap years', () => {
    expect(occurrences('0 0 29 2 *', 'UTC', '2027-01-01T00:00:00Z')).toEqual(['2028-02-29T00:00:00.000Z']);
  });

  it.each([
    ['@yearly', '2028-01-01T00:00:00.000Z'],
    ['@annually', '2028-01-01T00:00:00.000Z'],
    ['@monthly', '2027-04-01T00:00:00.000Z'],
    ['@weekly', '2027-03-14T00:00:00.000Z'],
    ['@daily', '2027-03-11T00:00:00.000Z'],
    ['@midnight', '2027-03-11T00:00:00.000Z'],
    ['@hourly', '2027-03-10T13:00:00.000Z'],
  ])('reads the descriptor %s', (descriptor, next) => {
    expect(occurrences(descriptor, 'UTC', '2027-03-10T12:34:56.789Z')).toEqual([next]);
    expect(parseCron(descriptor, 'UTC').expr).toBe(descriptor);
  });

  it('reads descriptors in any case and stores them in lower case', () => {
    expect(parseCron('@Daily', 'UTC').expr).toBe('@daily');
  });

  it('evaluates descriptors in the schedule zone', () => {
    expect(occurrences('@daily', 'Europe/Paris', '2027-03-10T12:00:00Z')).toEqual([
      '2027-03-10T23:00:00.000Z',
    ]);
  });
});

describe('parseCron: what it refuses', () => {
  const expected =
    'cron: expected a 5-field cron expression like "0 9 * * MON-FRI", a descriptor like "@daily", or "@every 15m"';

  it.each([
    ['0 0 9 * * MON-FRI', 'no seconds field'],
    ['0 0 9 * * MON-FRI 2027', 'neither a seconds nor a year field'],
    ['0 9 * *', 'it has 4 fields'],
    ['daily', 'as cron that is probably "0 0 * * *"'],
    ['@reboot', 'the descriptors are @yearly @annually @monthly @weekly @daily @midnight @hourly'],
    ['@daily 0', 'the descriptors are'],
    ['61 * * * *', 'minute'],
    ['0 24 * * *', 'hour'],
    ['0 0 32 * *', 'day'],
    ['0 0 * 13 *', 'month'],
    ['0 0 * * FUNDAY', ''],
    ['0 0 30 2 *', 'never fire'],
    ['0 0 31 4,6,9,11 *', 'never fire'],
  ])('refuses %j, saying what to send instead', (expr, hint) => {
    const error = errorOf(() => parseCron(expr, 'UTC'));
    expect(error.code).toBe('invalid_input');
    expect(error.message.startsWith(`${expected}, got ${JSON.stringify(expr)}`)).toBe(true);
    expect(error.message).toContain(hint);
    expect(error.errors).toEqual([{ path: 'cron', message: error.message }]);
  });

  it('says to drop the seconds field, and suggests nothing the minimum interval would refuse', () => {
    const sixFields = errorOf(() => parseCron('*/30 * * * * *', 'UTC')).message;
    expect(sixFields).toContain('Chronos takes no seconds field: drop the first one');
    // No suggestion that the default minimum interval (60 s) would then refuse.
    expect(sixFields).not.toContain('@every 30s');
  });

  it.each([
    ['', 'got ""'],
    ['   ', 'got "   "'],
    [undefined, 'got nothing'],
    [null, 'got null'],
    [15, 'got 15'],
    [['0', '9', '*', '*', '*'], 'got an array'],
  ])('refuses %j, which is not an expression', (expr, got) => {
    const error = errorOf(() => parseCron(expr, 'UTC'));
    expect(error.message).toContain(expected);
    expect(error.message).toContain(got);
  });

  it('refuses an unknown time zone on the timezone path', () => {
    const error = errorOf(() => parseCron('0 9 * * *', 'CEST'));
    expect(error.errors[0]?.path).toBe('timezone');
    expect(error.message).toContain('did you mean "Europe/Paris"');
  });
});

describe('next', () => {
  it('returns an occurrence strictly after the given instant', () => {
    const schedule = parseCron('0 9 * * *', 'UTC');
    expect(schedule.next(new Date('2027-03-14T09:00:00.000Z')).toISOString()).toBe(
      '2027-03-15T09:00:00.000Z',
    );
    expect(schedule.next(new Date('2027-03-14T08:59:59.999Z')).toISOString()).toBe(
      '2027-03-14T09:00:00.000Z',
    );
    expect(schedule.next(new Date('2027-03-14T09:00:00.001Z')).toISOString()).toBe(
      '2027-03-15T09:00:00.000Z',
    );
  });

  it('ignores the anchor for expressions and descriptors', () => {
    const schedule = parseCron('0 9 * * *', 'UTC');
    const after = new Date('2027-03-14T10:00:00Z');
    expect(schedule.next(after, new Date('2020-01-01T00:17:00Z'))).toEqual(schedule.next(after));
  });

  it('moves from one year to the next', () => {
    expect(occurrences('59 23 31 12 *', 'UTC', '2027-12-31T23:59:00Z')).toEqual(['2028-12-31T23:59:00.000Z']);
  });

  it('never starts a timer', () => {
    vi.useFakeTimers();
    parseCron('* * * * *', 'Europe/Paris').next(new Date('2027-03-14T00:00:00Z'));
    parseCron('@every 1s', 'UTC').next(new Date('2027-03-14T00:00:00Z'));
    expect(vi.getTimerCount()).toBe(0);
  });

  afterEach(() => {
    vi.useRealTimers();
  });
});

describe('DST: a local time that does not exist fires at the first instant after the gap', () => {
  it('fires 02:30 in Europe/Paris at 03:00 CEST (01:00Z) on 2027-03-28', () => {
    expect(occurrences('30 2 * * *', 'Europe/Paris', '2027-03-27T12:00:00Z', 2)).toEqual([
      '2027-03-28T01:00:00.000Z',
      '2027-03-29T00:30:00.000Z',
    ]);
  });

  it('fires 02:30 in America/New_York at 03:00 EDT (07:00Z) on 2027-03-14', () => {
    expect(occurrences('30 2 * * *', 'America/New_York', '2027-03-13T12:00:00Z', 2)).toEqual([
      '2027-03-14T07:00:00.000Z',
      '2027-03-15T06:30:00.000Z',
    ]);
  });

  it('fires 02:30 in Australia/Sydney at 03:00 AEDT on 2027-10-03, in the southern spring', () => {
    expect(occurrences('30 2 * * *', 'Australia/Sydney', '2027-10-02T00:00:00Z', 2)).toEqual([
      '2027-10-02T16:00:00.000Z',
      '2027-10-03T15:30:00.000Z',
    ]);
  });

  it('fires 02:15 in Australia/Lord_Howe, which springs forward by half an hour, at 02:30', () => {
    expect(occurrences('15 2 * * *', 'Australia/Lord_Howe', '2027-10-02T00:00:00Z', 2)).toEqual([
      '2027-10-02T15:30:00.000Z',
      '2027-10-03T15:15:00.000Z',
    ]);
  });

  it('fires 00:30 in America/Santiago, whose gap starts at midnight, at 01:00', () => {
    expect(occurrences('30 0 * * *', 'America/Santiago', '2027-09-04T12:00:00Z', 2)).toEqual([
      '2027-09-05T04:00:00.000Z',
      '2027-09-06T03:30:00.000Z',
    ]);
  });

  it('fires once for several times in the same gap', () => {
    expect(occurrences('0,30 2 * * *', 'Europe/Paris', '2027-03-27T12:00:00Z', 2)).toEqual([
      '2027-03-28T01:00:00.000Z',
      '2027-03-29T00:00:00.000Z',
    ]);
  });

  it('holds for expressions with a wildcard or step in the hour and minute fields too', () => {
    expect(occurrences('30 * * * *', 'Europe/Paris', '2027-03-28T00:00:00Z', 3)).toEqual([
      '2027-03-28T00:30:00.000Z', // 01:30 CET
      '2027-03-28T01:00:00.000Z', // 02:30 does not exist: 03:00 CEST
      '2027-03-28T01:30:00.000Z', // 03:30 CEST
    ]);
    expect(occurrences('*/15 * * * *', 'Europe/Paris', '2027-03-28T00:40:00Z', 3)).toEqual([
      '2027-03-28T00:45:00.000Z', // 01:45 CET
      '2027-03-28T01:00:00.000Z', // 02:00 … 02:45 and 03:00 CEST, once
      '2027-03-28T01:15:00.000Z',
    ]);
  });
});

describe('DST: a local time that occurs twice fires once, at its first occurrence', () => {
  it('fires 02:30 in Europe/Paris at 00:30Z on 2027-10-31, and not again at 01:30Z', () => {
    expect(occurrences('30 2 * * *', 'Europe/Paris', '2027-10-30T12:00:00Z', 2)).toEqual([
      '2027-10-31T00:30:00.000Z',
      '2027-11-01T01:30:00.000Z',
    ]);
  });

  it('does not fire on the second pass when asked from between the two', () => {
    expect(occurrences('30 2 * * *', 'Europe/Paris', '2027-10-31T00:30:00Z')).toEqual([
      '2027-11-01T01:30:00.000Z',
    ]);
    expect(occurrences('30 2 * * *', 'Europe/Paris', '2027-10-31T01:10:00Z')).toEqual([
      '2027-11-01T01:30:00.000Z',
    ]);
    expect(occurrences('30 2 * * *', 'Europe/Paris', '2027-10-31T01:30:00Z')).toEqual([
      '2027-11-01T01:30:00.000Z',
    ]);
  });

  it('fires 01:30 in America/New_York once, at 01:30 EDT (05:30Z), on 2027-11-07', () => {
    expect(occurrences('30 1 * * *', 'America/New_York', '2027-11-06T12:00:00Z', 2)).toEqual([
      '2027-11-07T05:30:00.000Z',
      '2027-11-08T06:30:00.000Z',
    ]);
  });

  it('fires 02:30 in Australia/Sydney once, at 02:30 AEDT, on 2027-04-04, in the southern autumn', () => {
    expect(occurrences('30 2 * * *', 'Australia/Sydney', '2027-04-03T00:00:00Z', 2)).toEqual([
      '2027-04-03T15:30:00.000Z',
      '2027-04-04T16:30:00.000Z',
    ]);
  });

  it('holds for expressions with a wildcard in the hour or minute field too', () => {
    // 02:00 CEST, then 03:00 CET: 02:00 CET is the second pass of 02:00.
    expect(occurrences('0 * * * *', 'Europe/Paris', '2027-10-30T23:30:00Z', 3)).toEqual([
      '2027-10-31T00:00:00.000Z',
      '2027-10-31T02:00:00.000Z',
      '2027-10-31T03:00:00.000Z',
    ]);
    expect(occurrences('* * * * *', 'Europe/Paris', '2027-10-31T00:58:30Z', 2)).toEqual([
      '2027-10-31T00:59:00.000Z', // 02:59 CEST
      '2027-10-31T02:00:00.000Z', // 03:00 CET
    ]);
  });
});

describe('DST: ordinary schedules keep local time across the change', () => {
  it('fires "0 9 * * MON-FRI" in Europe/Paris at 08:00Z in winter and 07:00Z in summer', () => {
    expect(occurrences('0 9 * * MON-FRI', 'Europe/Paris', '2027-01-08T12:00:00Z')).toEqual([
      '2027-01-11T08:00:00.000Z',
    ]);
    expect(occurrences('0 9 * * MON-FRI', 'Europe/Paris', '2027-07-08T12:00:00Z')).toEqual([
      '2027-07-09T07:00:00.000Z',
    ]);
    expect(occurrences('0 9 * * MON-FRI', 'Europe/Paris', '2027-03-26T12:00:00Z', 2)).toEqual([
      '2027-03-29T07:00:00.000Z',
      '2027-03-30T07:00:00.000Z',
    ]);
  });
});

describe('DST: agreement with croner on fixed-time expressions', () => {
  // croner's own zone-aware search follows the contract for expressions with no wildcard or step
  // in the minute and hour fields, so there the two must agree at every instant around a change.
  const cases: [string, string, string][] = [
    ['Europe/Paris', '2027-03-27T12:00:00Z', '2027-03-29T00:00:00Z'],
    ['Europe/Paris', '2027-10-30T12:00:00Z', '2027-11-01T00:00:00Z'],
    ['America/New_York', '2027-03-13T12:00:00Z', '2027-03-15T00:00:00Z'],
    ['America/New_York', '2027-11-06T12:00:00Z', '2027-11-08T00:00:00Z'],
    ['Australia/Sydney', '2027-04-03T00:00:00Z', '2027-04-05T00:00:00Z'],
    ['Australia/Sydney', '2027-10-02T00:00:00Z', '2027-10-04T00:00:00Z'],
    ['Australia/Lord_Howe', '2027-10-02T00:00:00Z', '2027-10-04T00:00:00Z'],
  ];
  const expressions = ['30 2 * * *', '0,30 1-3 * * *', '15 2,14 * * *', '0 9 * * MON-FRI', '45 1 * * SUN'];

  it.each(cases)('agrees in %s from %s to %s', (timeZone, from, to) => {
    for (const expr of expressions) {
      const ours = parseCron(expr, timeZone);
      const croner = new Cron(expr, {
        timezone: timeZone,
        mode: '5-part',
        fixedTimeRule: 'no-wildcard',
        paused: true,
      });
      for (let ms = Date.parse(from); ms < Date.parse(to); ms += 7 * 60_000 + 13_000) {
        const after = new Date(ms);
        expect(ours.next(after).toISOString(), `${expr} after ${after.toISOString()}`).toBe(
          croner.nextRun(after)?.toISOString(),
        );
      }
    }
  });
});

describe('@every', () => {
  it('reads a duration of at least one second', () => {
    expect(parseCron('@every 1h30m', 'UTC').expr).toBe('@every 1h30m');
    expect(parseCron('@every 1s', 'UTC').expr).toBe('@every 1s');
    expect(parseCron('@EVERY 90s', 'UTC').expr).toBe('@every 90s');
  });

  it('without an anchor, fires one interval after the given instant', () => {
    const schedule = parseCron('@every 1h30m', 'UTC');
    expect(schedule.next(new Date('2027-03-14T09:00:00.250Z')).toISOString()).toBe(
      '2027-03-14T10:30:00.250Z',
    );
  });

  it('with an anchor, fires on the grid anchor + k × interval', () => {
    const schedule = parseCron('@every 1h30m', 'UTC');
    const anchor = new Date('2027-03-14T09:00:00Z');
    expect(schedule.next(new Date('2027-03-14T09:00:00Z'), anchor).toISOString()).toBe(
      '2027-03-14T10:30:00.000Z',
    );
    expect(schedule.next(new Date('2027-03-14T10:29:59.999Z'), anchor).toISOString()).toBe(
      '2027-03-14T10:30:00.000Z',
    );
    expect(schedule.next(new Date('2027-03-14T10:30:00Z'), anchor).toISOString()).toBe(
      '2027-03-14T12:00:00.000Z',
    );
  });

  it('does not catch up: with an anchor far in the past, the next is the first grid point after the instant', () => {
    const schedule = parseCron('@every 1h30m', 'UTC');
    const anchor = new Date('2020-01-01T00:00:00Z');
    // 2027-03-14T00:00Z is 63 072 h (42 048 intervals) after the anchor, so the grid passes 09:00 and 10:30.
    expect(schedule.next(new Date('2027-03-14T10:00:00Z'), anchor).toISOString()).toBe(
      '2027-03-14T10:30:00.000Z',
    );
    expect(schedule.next(new Date('2027-03-14T10:30:00Z'), anchor).toISOString()).toBe(
      '2027-03-14T12:00:00.000Z',
    );
  });

  it('with an anchor in the future, fires first at the anchor', () => {
    const schedule = parseCron('@every 15m', 'UTC');
    const anchor = new Date('2027-03-14T12:00:00Z');
    expect(schedule.next(new Date('2027-03-14T09:00:00Z'), anchor).toISOString()).toBe(
      '2027-03-14T12:00:00.000Z',
    );
  });

  it('counts real time, untouched by DST', () => {
    const schedule = parseCron('@every 1h', 'Europe/Paris');
    const anchor = new Date('2027-10-30T23:00:00Z');
    expect(schedule.next(new Date('2027-10-31T00:30:00Z'), anchor).toISOString()).toBe(
      '2027-10-31T01:00:00.000Z',
    );
    expect(schedule.next(new Date('2027-10-31T01:00:00Z'), anchor).toISOString()).toBe(
      '2027-10-31T02:00:00.000Z',
    );
  });

  it.each([
    ['@every', 'one duration'],
    ['@every 1h 30m', 'one duration without spaces'],
    ['@every soon', '"soon" is not a duration'],
    ['@every 15', '"15" is not a duration'],
  ])('refuses %j on the cron path', (expr, hint) => {
    const error = errorOf(() => parseCron(expr, 'UTC'));
    expect(error.errors[0]?.path).toBe('cron');
    expect(error.message).toContain('cron: expected');
    expect(error.message).toContain(`got ${JSON.stringify(expr)}`);
    expect(error.message).toContain(hint);
  });

  it.each(['@every 500ms', '@every 0s', '@every 3651d'])('refuses the interval in %j', (expr) => {
    const error = errorOf(() => parseCron(expr, 'UTC'));
    expect(error.message).toBe(
      `cron: expected an "@every" interval from 1s to 3650d, got ${JSON.stringify(expr)}`,
    );
  });
});

describe('minIntervalMs', () => {
  const from = new Date('2027-03-14T00:00:00Z');

  it('is a minute for "* * * * *"', () => {
    expect(minIntervalMs(parseCron('* * * * *', 'UTC'), from)).toBe(60_000);
  });

  it('is an hour for "0 9,10 * * *"', () => {
    expect(minIntervalMs(parseCron('0 9,10 * * *', 'UTC'), from)).toBe(3_600_000);
    expect(minIntervalMs(parseCron('0 9,10 * * *', 'America/New_York'), from)).toBe(3_600_000);
  });

  it('is a day for "@daily"', () => {
    expect(minIntervalMs(parseCron('@daily', 'UTC'), from)).toBe(86_400_000);
  });

  it('is the interval for "@every"', () => {
    expect(minIntervalMs(parseCron('@every 1h30m', 'UTC'), from)).toBe(5_400_000);
  });

  it('sees the shorter gap a DST change makes within the next 100 occurrences', () => {
    // 30 * * * * in Paris fires at 03:00 and 03:30 CEST on the spring-forward night.
    expect(minIntervalMs(parseCron('30 * * * *', 'Europe/Paris'), new Date('2027-03-27T23:00:00Z'))).toBe(
      1_800_000,
    );
  });
});
