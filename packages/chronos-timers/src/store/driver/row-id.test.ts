import { expect, it } from 'vitest';
import { newRowIds } from './row-id.js';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

it('makes version-7 UUIDs carrying the millisecond, in order within one, all different', () => {
  const ms = Date.UTC(2026, 11, 2, 1, 2, 3, 456);
  const ids = Array.from({ length: 5_000 }, () => newRowIds(1, ms).ids[0]!);
  for (const id of ids) expect(id).toMatch(V7);
  // The first 48 bits are the time (the counter can carry into the next millisecond).
  expect(parseInt(ids[0]!.replace(/-/g, '').slice(0, 12), 16)).toBe(ms);
  expect([...ids].sort()).toEqual(ids);
  expect(new Set(ids).size).toBe(ids.length);
  // A later millisecond sorts after.
  const later = newRowIds(1, ms + 10).ids[0]!;
  expect(later > ids[ids.length - 1]!).toBe(true);
  expect(parseInt(later.replace(/-/g, '').slice(0, 12), 16)).toBe(ms + 10);
});

it('makes a batch of ids and the array literal that holds them, alike', () => {
  const ms = Date.UTC(2026, 11, 3, 16, 0, 0, 0);
  for (const n of [0, 1, 2, 1_000, 1_001]) {
    const { ids, literal } = newRowIds(n, ms);
    expect(ids).toHaveLength(n);
    for (const id of ids) expect(id).toMatch(V7);
    expect(literal).toBe(`{${ids.join(',')}}`);
    expect(new Set(ids).size).toBe(n);
    expect([...ids].sort()).toEqual(ids);
  }
});

it('reads ids with Buffer#latin1Slice, which this Node has and which toString uses', () => {
  const buffer = Buffer.from('{0123-abcd}', 'latin1') as unknown as {
    latin1Slice?: (s: number, e: number) => string;
  };
  expect(typeof buffer.latin1Slice).toBe('function');
  expect(buffer.latin1Slice!(1, 10)).toBe('0123-abcd');
});
