/**
 * Ids for new rows, made in process: UUIDs of version 7 (RFC 9562), whose first 48 bits are the
 * creation time in milliseconds. Rows written together get ids that sort together, so inserting a
 * batch appends to the right edge of the primary key's index instead of touching a random page
 * per row. Within one millisecond a counter (the 12 `rand_a` bits) keeps them in order. Nothing
 * relies on the time they carry: it is a locality hint, not a clock.
 */
import { randomFillSync } from 'node:crypto';

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const pool = Buffer.alloc(8 * 1024);
let poolAt = pool.length;
let lastMs = -1;
let counter = 0;

export function newRowId(now: number = Date.now()): string {
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
  const at = poolAt;
  poolAt += 8;
  const hi = Math.floor(ms / 0x10000);
  const lo = ms % 0x10000;
  return (
    HEX[(hi >>> 24) & 0xff]! +
    HEX[(hi >>> 16) & 0xff]! +
    HEX[(hi >>> 8) & 0xff]! +
    HEX[hi & 0xff]! +
    '-' +
    HEX[(lo >>> 8) & 0xff]! +
    HEX[lo & 0xff]! +
    '-' +
    HEX[0x70 | (counter >>> 8)]! +
    HEX[counter & 0xff]! +
    '-' +
    HEX[0x80 | (b[at]! & 0x3f)]! +
    HEX[b[at + 1]!]! +
    '-' +
    HEX[b[at + 2]!]! +
    HEX[b[at + 3]!]! +
    HEX[b[at + 4]!]! +
    HEX[b[at + 5]!]! +
    HEX[b[at + 6]!]! +
    HEX[b[at + 7]!]!
  );
}
