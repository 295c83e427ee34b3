import { describe, expect, it } from 'vitest';
import { ChronosError } from '../errors.js';
import { formatDuration, parseDuration } from './duration.js';

function errorOf(fn: () => unknown): ChronosError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ChronosError);
    return error as ChronosError;
  }
  throw new Error('expected a ChronosError, but nothing was thrown');
}

describe('parseDuration', () => {
  it.each([
    ['250ms', 250],
    ['30s', 30_000],
    ['90s', 90_000],
    ['15m', 900_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
    ['1h30m', 5_400_000],
    ['1m30s', 90_000],
    ['1s500ms', 1_500],
    ['1d2h3m4s5ms', 93_784_005],
  ])('reads %s as %i milliseconds', (text, ms) => {
    expect(parseDuration(text, 'every')).toBe(ms);
  });

  it('accepts zero, leaving minimums to the caller', () => {
    expect(parseDuration('0s', 'every')).toBe(0);
    expect(parseDuration('0ms', 'every')).toBe(0);
  });

  it.each(['', '15', '1.5h', '1h 30m', ' 30s', '30m1h', '-5s', '+5s', '5S', '1w', 'abc', '1h1h', 'ms', 'h'])(
    'refuses %j with an invalid_input error naming the field, what was expected and what came',
    (text) => {
      const error = errorOf(() => parseDuration(text, 'retry.after'));
      expect(error.code).toBe('invalid_input');
      expect(error.message).toContain('retry.after: expected a duration such as "30s", "15m" or "1h30m"');
      expect(error.message).toContain(`got ${JSON.stringify(text)}`);
      expect(error.errors).toEqual([{ path: 'retry.after', message: error.message }]);
    },
  );

  it('suggests a unit when given a bare number', () => {
    expect(errorOf(() => parseDuration('15', 'every')).message).toContain('add a unit, e.g. "15s"');
  });

  it('suggests whole numbers when given a fraction', () => {
    expect(errorOf(() => parseDuration('1.5h', 'every')).message).toContain('"1h30m" rather than "1.5h"');
  });

  it('refuses a duration too long to count in milliseconds exactly', () => {
    expect(errorOf(() => parseDuration('999999999999999d', 'every')).message).toContain('too long');
  });
});

describe('formatDuration', () => {
  it.each([
    [5_400_000, '1h30m'],
    [250, '250ms'],
    [0, '0s'],
    [60_000, '1m'],
    [86_400_000, '1d'],
    [93_784_005, '1d2h3m4s5ms'],
    [-90_000, '-1m30s'],
  ])('writes %i ms as %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('writes what parseDuration reads back to the same value', () => {
    for (const ms of [1, 999, 1_000, 61_001, 3_599_999, 86_400_001, 315_360_000_000]) {
      expect(parseDuration(formatDuration(ms), 'x')).toBe(ms);
    }
  });
});
