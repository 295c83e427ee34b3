/**
 * Ids for new rows, made in process: UUIDs of version 7 (RFC 9562), whose first 48 bits are the
 * creation time in milliseconds. Rows written together get ids that sort together, so inserting a
 * batch appends to the right edge of the primary key's index instead of touching a random page
 * per row. Within one millisecond a counter (the 12 `rand_a` bits) keeps them in order. Nothing
 * relies on the time they carry: it is a locality hint, not a clock.
 */
import { randomFillSync } from 'node:crypto';

const pool = Buffer.alloc(8 * 1024);
let poolAt = pool.length;
let lastMs = -1;
let counter = 0;

/**
 * `n` new ids, in order, and the PostgreSQL array literal that holds them (`{id1,id2,…}`), both
 * read out of one buffer the ids are written into as ASCII: built with `+`, an id was eighteen
 * intermediate strings, and the literal a join of them all (bench/README.md, "Bulk scheduling").
 * Each id is a string of its own, not a slice of the literal, which would keep the whole literal
 * in memory for as long as the caller keeps one of its ids.
 */
export function newRowIds(
  n: number,
  now: number = Date.now(),
  { literal: withLiteral = true } = {},
): { ids: string[]; literal: string } {
  const size = 2 + n * 37 - (n > 0 ? 1 : 0);
  const t = size <= scratch.length ? scratch : Buffer.allocUnsafe(size);
  t[0] = OPEN;
  for (let k = 0; k < n; k++) writeId(t, 1 + k * 37, now);
  t[size - 1] = CLOSE;
  // Not made when the caller has no use for it (a batch that is copied, alarms.ts).
  const literal = withLiteral ? t.toString('latin1', 0, size) : '';
  const ids = new Array<string>(n);
  for (let k = 0; k < n; k++) ids[k] = t.toString('latin1', 1 + k * 37, 37 + k * 37);
  return { ids, literal };
}

/** Writes the next id at `at` in `t`, followed by a comma. */
function writeId(t: Buffer, at: number, now: number): void {
  if (poolAt + 8 > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  if (now > lastMs) {
    lastMs = now;
    counter = pool[poolAt]! & 0x3f;
  } else if (++counter > 0xfff) {
    // 4,096 ids in one millisecond: borrow the next one.
    lastMs++;
    counter = 0;
  }
  const ms = lastMs;
  const b = pool;
  const r = poolAt;
  poolAt += 8;
  const hi = Math.floor(ms / 0x10000);
  const lo = ms % 0x10000;
  hex(t, at, (hi >>> 24) & 0xff);
  hex(t, at + 2, (hi >>> 16) & 0xff);
  hex(t, at + 4, (hi >>> 8) & 0xff);
  hex(t, at + 6, hi & 0xff);
  t[at + 8] = DASH;
  hex(t, at + 9, (lo >>> 8) & 0xff);
  hex(t, at + 11, lo & 0xff);
  t[at + 13] = DASH;
  hex(t, at + 14, 0x70 | (counter >>> 8));
  hex(t, at + 16, counter & 0xff);
  t[at + 18] = DASH;
  hex(t, at + 19, 0x80 | (b[r]! & 0x3f));
  hex(t, at + 21, b[r + 1]!);
  t[at + 23] = DASH;
  for (let i = 0; i < 6; i++) hex(t, at + 24 + 2 * i, b[r + 2 + i]!);
  t[at + 36] = COMMA;
}

const DIGITS = Buffer.from('0123456789abcdef', 'latin1');
const [OPEN, CLOSE, DASH, COMMA] = Buffer.from('{}-,', 'latin1') as unknown as [
  number,
  number,
  number,
  number,
];
// Large enough for a part of 1,000 ids.
const scratch = Buffer.alloc(1_000 * 37 + 1);

function hex(into: Buffer, at: number, byte: number): void {
  into[at] = DIGITS[byte >>> 4]!;
  into[at + 1] = DIGITS[byte & 0xf]!;
}
