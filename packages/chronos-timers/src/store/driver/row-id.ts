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
 * in memory for as long as the caller keeps one of its ids. With `bytes`, also the ids' 16 bytes
 * each, one after the other, as a binary `COPY` sends a uuid (store/alarm-copy.ts, `copyParts`).
 */
export function newRowIds(
  n: number,
  now: number = Date.now(),
  { literal: withLiteral = true, bytes: withBytes = false } = {},
): { ids: string[]; literal: string; bytes: Buffer | null } {
  const size = 2 + n * 37 - (n > 0 ? 1 : 0);
  const t = size <= scratch.length ? scratch : Buffer.allocUnsafe(size);
  const raw = withBytes ? Buffer.allocUnsafe(n * 16) : n <= 1_000 ? rawScratch : Buffer.allocUnsafe(n * 16);
  t[0] = OPEN;
  for (let k = 0; k < n; k++) {
    writeId(raw, k * 16, now);
    writeHex(t, 1 + k * 37, raw, k * 16);
  }
  t[size - 1] = CLOSE;
  // Not made when the caller has no use for it (a batch that is copied, store/alarm-copy.ts).
  const literal = withLiteral ? t.toString('latin1', 0, size) : '';
  const ids = new Array<string>(n);
  const sliced = t as unknown as Latin1Slicer;
  for (let k = 0; k < n; k++) ids[k] = sliced.latin1Slice(1 + k * 37, 37 + k * 37);
  return { ids, literal, bytes: withBytes ? raw : null };
}

/** Writes the next id's 16 bytes at `at` in `raw`. */
function writeId(raw: Buffer, at: number, now: number): void {
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
  raw[at] = hi >>> 24;
  raw[at + 1] = hi >>> 16;
  raw[at + 2] = hi >>> 8;
  raw[at + 3] = hi;
  raw[at + 4] = lo >>> 8;
  raw[at + 5] = lo;
  raw[at + 6] = 0x70 | (counter >>> 8);
  raw[at + 7] = counter;
  raw[at + 8] = 0x80 | (b[r]! & 0x3f);
  for (let i = 9; i < 16; i++) raw[at + i] = b[r + i - 8]!;
}

/** The id of 16 bytes at `from` in `raw`, as canonical text at `at` in `t`, then a comma. */
function writeHex(t: Buffer, at: number, raw: Buffer, from: number): void {
  let o = at;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) t[o++] = DASH;
    const byte = raw[from + i]!;
    t[o] = DIGITS[byte >>> 4]!;
    t[o + 1] = DIGITS[byte & 0xf]!;
    o += 2;
  }
  t[o] = COMMA;
}

/**
 * `Buffer#latin1Slice`, what `toString('latin1', start, end)` calls once it has read its
 * arguments: Node's own (every Buffer has it, Node 18 to 24), not in its typings. Called directly,
 * a fresh process's batch makes its ids much faster: toString's argument handling, run by the
 * interpreter, was most of the time an id took (bench/README.md, "Figures from the store's
 * comments"). row-id.test.ts holds that it is there.
 */
interface Latin1Slicer {
  latin1Slice(start: number, end: number): string;
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
const rawScratch = Buffer.alloc(1_000 * 16);
