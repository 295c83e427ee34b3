/**
 * Pages of a list, once for every list: the page size (`PAGE_LIMIT`) and the opaque cursors that
 * carry a page's end to the next request. A cursor is a keyset position, never an offset, so a
 * page is stable while rows are added. A caller's page parameters are read in wire/list-query.ts.
 */
import { isUuid } from './owner.js';
import type { TimeCursor } from '../types.js';

/** A page of a keyset-paginated list. */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export const PAGE_LIMIT = { min: 1, max: 200, default: 50 } as const;

/** Which page of a list to read: how many items (default `PAGE_LIMIT.default`), after which one. */
export interface PageRequest {
  limit?: number;
  /** The position a previous page ended at (its `nextCursor`, decoded); absent: the first page. */
  after?: TimeCursor;
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

/** A cursor that carries the last row's creation time itself (the row may be gone by the next page). */
export const timeCursor = {
  encode: (cursor: TimeCursor): string =>
    Buffer.from(`${cursor.createdUs}.${cursor.id}`).toString('base64url'),
  /** The position a cursor carries, or undefined when it is no cursor this list gave. */
  decode(text: string): TimeCursor | undefined {
    const match = /^(\d{1,19})\.(.+)$/.exec(Buffer.from(text, 'base64url').toString());
    if (!match || !isUuid(match[2])) return undefined;
    return { createdUs: match[1]!, id: match[2] };
  },
};
