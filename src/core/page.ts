/**
 * Pages of a list, once for every list: the page size (`limit`, 1–200, default 50) and the
 * opaque cursors that carry a page's end to the next request. A cursor is a keyset position,
 * never an offset, so a page is stable while rows are added; a bad one is refused by name.
 */
import { invalidInput } from '../errors.js';
import { isUuid } from './owner.js';
import type { TimeCursor } from '../types.js';

/** A page of a keyset-paginated list. */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export const PAGE_LIMIT = { min: 1, max: 200, default: 50 } as const;

export function parseLimit(value: unknown, fallback: number = PAGE_LIMIT.default): number {
  if (value === undefined || value === '') return fallback;
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'string' && /^\d+$/.test(value)
        ? Number(value)
        : NaN;
  if (!Number.isInteger(n) || n < PAGE_LIMIT.min || n > PAGE_LIMIT.max) {
    throw invalidInput('limit', `a whole number from ${PAGE_LIMIT.min} to ${PAGE_LIMIT.max}`, value);
  }
  return n;
}

/**
 * Takes one row more than the page holds (`limit + 1` asked of the store) and turns the rows
 * into a page whose cursor is that of its last item, when there is more.
 */
export function toPage<R, T>(
  rows: readonly R[],
  limit: number,
  item: (row: R) => T,
  cursor: (row: R) => string,
): Page<T> {
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return {
    items: items.map(item),
    nextCursor: rows.length > limit && last !== undefined ? cursor(last) : null,
  };
}

const CURSOR_EXPECTED = 'the next_cursor of a previous page';

/** A cursor that carries the last row's creation time itself (the row may be gone by the next page). */
export const timeCursor = {
  encode: (cursor: TimeCursor): string =>
    Buffer.from(`${cursor.createdUs}.${cursor.id}`).toString('base64url'),
  parse(value: unknown): TimeCursor | undefined {
    if (value === undefined || value === '' || value === null) return undefined;
    const text = typeof value === 'string' ? Buffer.from(value, 'base64url').toString() : '';
    const match = /^(\d{1,19})\.(.+)$/.exec(text);
    if (!match || !isUuid(match[2])) throw invalidInput('cursor', CURSOR_EXPECTED, value);
    return { createdUs: match[1]!, id: match[2] };
  },
};

/** `value` as one of `allowed` (a status filter), or undefined when absent. */
export function parseOneOf<T extends string>(
  path: string,
  allowed: readonly T[],
  value: unknown,
): T | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  throw invalidInput(path, `one of ${allowed.join(', ')}`, value);
}
