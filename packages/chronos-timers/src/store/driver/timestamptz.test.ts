import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { parseIsoTimestamptz, parseTimestamptz } from './timestamptz.js';

const pgParse = pg.types.getTypeParser(1184, 'text') as (text: string) => unknown;

describe('parseTimestamptz', () => {
  it('reads what PostgreSQL writes exactly as pg does', () => {
    const samples = [
      '2026-11-30 15:02:13.720123+00',
      '2026-11-30 15:02:13+00',
      '2026-11-30 15:02:13.7+00',
      '2026-11-30 15:02:13.72+00',
      '2026-11-30 15:02:13.999999+00',
      '2026-03-29 01:59:59.999+01',
      '2026-11-30 15:02:13.5-03',
      '2026-11-30 15:02:13.000001+05:30',
      '1883-11-18 12:03:58+00:03:58',
      '1883-11-18 12:03:58.25-00:09:21',
      '9999-12-31 23:59:59.999999+00',
      '1000-01-01 00:00:00+00',
    ];
    for (const text of samples) expect(parseIsoTimestamptz(text), text).toEqual(pgParse(text));
  });

  it('agrees with pg on random instants, offsets and fractions', () => {
    let seed = 7;
    const next = () => (seed = (seed * 48_271) % 2_147_483_647) / 2_147_483_647;
    for (let n = 0; n < 5_000; n++) {
      const ms = Math.floor(next() * 8e12) - 2e12;
      const iso = new Date(ms).toISOString(); // 2026-11-30T15:02:13.720Z
      const fraction = ['', `.${iso.slice(20, 23)}`, `.${iso.slice(20, 23)}${Math.floor(next() * 1000)}`][
        n % 3
      ];
      const offset = ['+00', '-03', '+05:30', '+13:45', '-00:09:21'][n % 5];
      const text = `${iso.slice(0, 10)} ${iso.slice(11, 19)}${fraction}${offset}`;
      expect(parseIsoTimestamptz(text), text).toEqual(pgParse(text));
    }
  });

  it('hands every other form to pg', () => {
    for (const text of [
      'infinity',
      '-infinity',
      '0044-03-15 12:00:00+00 BC',
      '0099-01-01 00:00:00+00',
      '12026-01-01 00:00:00+00',
    ]) {
      expect(parseIsoTimestamptz(text), text).toBeNull();
      expect(parseTimestamptz(text), text).toEqual(pgParse(text));
    }
  });
});
