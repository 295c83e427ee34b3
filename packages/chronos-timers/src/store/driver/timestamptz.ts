/**
 * Reading `timestamptz` from node-postgres, fast.
 *
 * A claimed alarm carries eight timestamps, and pg's own parser (a regular expression and
 * several `parseInt`s per value) was a visible share of a worker's CPU in the drain benchmark
 * (bench/README.md, "Figures from the store's comments"). This one
 * reads the form PostgreSQL writes under `DateStyle = ISO` (`2026-11-30 15:02:13.720123+00`,
 * offset `±HH`, `±HH:MM` or `±HH:MM:SS`) by character codes, and hands anything else (BC dates,
 * infinity, years before 1000 or after 9999, another DateStyle) to pg's parser, so its answer is
 * always pg's answer: the same `Date`, milliseconds truncated.
 *
 * It is given per query (`types`), so an application's own pg settings are left alone.
 */
import pg from 'pg';

const TIMESTAMPTZ = 1184;
const pgParse = pg.types.getTypeParser(TIMESTAMPTZ, 'text') as (text: string) => Date | number | null;

const ZERO = 48;

/** Two or four digits at `at`, or NaN. */
function digits(text: string, at: number, count: number): number {
  let value = 0;
  for (let i = at; i < at + count; i++) {
    const d = text.charCodeAt(i) - ZERO;
    if (d < 0 || d > 9) return NaN;
    value = value * 10 + d;
  }
  return value;
}

export function parseTimestamptz(text: string): Date | number | null {
  const fast = parseIsoTimestamptz(text);
  return fast ?? pgParse(text);
}

/** The ISO form read by character codes, or null for any other form. */
export function parseIsoTimestamptz(s: string): Date | null {
  // YYYY-MM-DD HH:MM:SS at fixed places.
  if (s.length < 22 || s[4] !== '-' || s[7] !== '-' || s[10] !== ' ' || s[13] !== ':' || s[16] !== ':') {
    return null;
  }
  const year = digits(s, 0, 4);
  if (!(year >= 1000)) return null;
  const month = digits(s, 5, 2);
  const day = digits(s, 8, 2);
  const hour = digits(s, 11, 2);
  const minute = digits(s, 14, 2);
  const second = digits(s, 17, 2);
  let i = 19;
  let ms = 0;
  if (s[i] === '.') {
    // Milliseconds are the first three digits; the microseconds after them are dropped.
    for (let scale = 100, at = ++i; i < s.length; i++, scale = Math.trunc(scale / 10)) {
      const d = s.charCodeAt(i) - ZERO;
      if (d < 0 || d > 9) break;
      if (i - at < 3) ms += d * scale;
    }
  }
  const sign = s[i] === '+' ? 1 : s[i] === '-' ? -1 : 0;
  if (sign === 0) return null;
  let offset = digits(s, i + 1, 2) * 3_600;
  i += 3;
  for (let unit = 60; i < s.length && unit >= 1; unit /= 60) {
    if (s[i] !== ':') return null;
    offset += digits(s, i + 1, 2) * unit;
    i += 3;
  }
  if (i !== s.length) return null;
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, ms) - sign * offset * 1_000;
  return Number.isNaN(utc) ? null : new Date(utc);
}

/** node-postgres `types` for the store's queries: timestamptz read as above, the rest as pg reads it. */
export const STORE_TYPES = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === TIMESTAMPTZ && format !== 'binary') return parseTimestamptz;
    return pg.types.getTypeParser(oid, format);
  },
} as unknown as pg.CustomTypesConfig;
