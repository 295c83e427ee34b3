import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isoTime } from './iso-time.js';

/** The whole range a `Date` holds: ±100,000,000 days around the epoch. */
const MAX_MS = 8.64e15;
/** The years it writes itself, 1000–9999; the rest it hands to toISOString. */
const OWN_FROM = Date.UTC(1000, 0, 1);
const OWN_UNTIL = Date.UTC(10000, 0, 1) - 1;

describe('isoTime', () => {
  it('writes what toISOString writes, for any millisecond of the years it writes itself', () => {
    fc.assert(
      fc.property(fc.integer({ min: OWN_FROM, max: OWN_UNTIL }), (ms) => {
        const date = new Date(ms);
        expect(isoTime(date)).toBe(date.toISOString());
      }),
      { numRuns: 20_000 },
    );
  });

  it('writes what toISOString writes, for any millisecond a Date holds', () => {
    fc.assert(
      fc.property(fc.integer({ min: -MAX_MS, max: MAX_MS }), (ms) => {
        const date = new Date(ms);
        expect(isoTime(date)).toBe(date.toISOString());
      }),
      { numRuns: 2_000 },
    );
  });

  it('agrees at the edges: leap days, year ends, the epoch, the years it hands over', () => {
    const samples = [
      '1970-01-01T00:00:00.000Z',
      '1969-12-31T23:59:59.999Z',
      '2000-02-29T12:00:00.001Z',
      '1900-02-28T23:59:59.999Z',
      '1900-03-01T00:00:00.000Z',
      '2100-03-01T00:00:00.000Z',
      '2024-12-31T23:59:59.999Z',
      '1000-01-01T00:00:00.000Z',
      '0999-12-31T23:59:59.999Z',
      '9999-12-31T23:59:59.999Z',
      '+010000-01-01T00:00:00.000Z',
      '-000001-06-15T10:20:30.400Z',
    ];
    for (const text of samples) {
      const date = new Date(text);
      expect(isoTime(date)).toBe(date.toISOString());
      expect(isoTime(date)).toBe(text);
    }
    // Across the years near the epoch, day by day.
    for (let ms = Date.UTC(1968, 0, 1); ms < Date.UTC(2033, 0, 1); ms += 86_400_000 + 3_600_001) {
      expect(isoTime(new Date(ms))).toBe(new Date(ms).toISOString());
    }
  });

  it('refuses an invalid date as toISOString does', () => {
    expect(() => isoTime(new Date(Number.NaN))).toThrow(RangeError);
  });
});
