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
 * One page of a list kept in time order: asks `rows` for one row more than the page holds, after
 * the position the request gives, and turns them into a page whose cursor is that of its last
 * item, when there is more.
 */
export async function timePage<R extends { cursor: TimeCursor }, T>(
  request: PageRequest,
  rows: (limit: number, after: TimeCursor | undefined) => Promise<readonly R[]>,
  item: (row: R) => T,
): Promise<Page<T>> {
  const limit = request.limit ?? PAGE_LIMIT.default;
  const found = await rows(limit + 1, request.after);
  const items = found.slice(0, limit);
  const last = items[items.length - 1];
  return {
    items: items.map(item),
    nextCursor: found.length > limit && last !== undefined ? timeCursor.encode(last.cursor) : null,
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
