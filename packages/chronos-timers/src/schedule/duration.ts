/**
 * Go-style compound durations: `250ms`, `30s`, `15m`, `1h30m`, `1d`.
 *
 * Guarantees: `parseDuration` returns a whole, safe number of milliseconds or throws an
 * `invalid_input` error naming the field. Units are `d`, `h`, `m`, `s`, `ms`, each at most once
 * and from the largest to the smallest (`1h30m`, not `30m1h`), with integer amounts and no spaces.
 * That is stricter than Go, which also takes fractions (`1.5h`), signs and any order; the strict
 * form catches typos and leaves one spelling per value. Zero is accepted: callers check minimums.
 */
import { invalidInput } from '../errors.js';

/**
 * The longest wait a schedule states, ten years: an `in_seconds`, and an `@every` interval; it
 * keeps every occurrence a representable Date.
 */
export const MAX_IN_SECONDS = 315_360_000;

const UNIT_MS = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000, ms: 1 } as const;

const DURATION = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$/;

const EXPECTED = 'a duration such as "30s", "15m" or "1h30m"';

/** Milliseconds in `text`; `path` names the field in the error when `text` is not a duration. */
export function parseDuration(text: string, path: string): number {
  const match = typeof text === 'string' ? DURATION.exec(text) : null;
  if (text === '' || match === null) {
    throw invalidInput(path, EXPECTED, text, durationHint(text));
  }
  const [, d, h, m, s, ms] = match;
  const total =
    amount(d) * UNIT_MS.d +
    amount(h) * UNIT_MS.h +
    amount(m) * UNIT_MS.m +
    amount(s) * UNIT_MS.s +
    amount(ms);
  if (!Number.isSafeInteger(total)) {
    throw invalidInput(path, EXPECTED, text, 'that is too long');
  }
  return total;
}

/** `5400000` → `"1h30m"`, `250` → `"250ms"`, `0` → `"0s"`: the inverse of `parseDuration`, for messages. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  let rest = Math.round(Math.abs(ms));
  if (rest === 0) return '0s';
  let text = '';
  for (const unit of ['d', 'h', 'm', 's', 'ms'] as const) {
    const count = Math.floor(rest / UNIT_MS[unit]);
    if (count > 0) {
      text += `${count}${unit}`;
      rest -= count * UNIT_MS[unit];
    }
  }
  return ms < 0 ? `-${text}` : text;
}

function amount(digits: string | undefined): number {
  return digits === undefined ? 0 : Number(digits);
}

function durationHint(text: unknown): string | undefined {
  if (typeof text !== 'string') return undefined;
  if (/^\d+$/.test(text)) return `add a unit, e.g. "${text}s"`;
  if (/\s/.test(text)) return 'write it without spaces';
  if (/\d[.,]\d/.test(text)) return 'use whole numbers, e.g. "1h30m" rather than "1.5h"';
  return 'units are d, h, m, s and ms, largest first';
}
