/**
 * Rows in PostgreSQL's binary `COPY` format (the protocol docs, "COPY": "Binary Format"), written
 * straight into one growing buffer: no text to escape on this side, no date or UUID to parse on
 * the server's. A batch of new timers goes to the database this way (store/alarm-copy.ts, `copyParts`).
 *
 * The format: a header; then per row a field count (int16) and per field its length (int32, -1
 * for NULL) and its bytes in the type's binary form; then -1 (int16). Types written here: uuid
 * (16 bytes), text (UTF-8), timestamptz (int64 microseconds since 2000-01-01 UTC), int4, bool
 * (one byte) and jsonb (version byte 1, then the JSON text).
 */

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
/** Milliseconds from the Unix epoch to PostgreSQL's, 2000-01-01T00:00:00Z. */
const PG_EPOCH_MS = 946_684_800_000;
const TWO_32 = 0x1_0000_0000;

/** Room kept at the start of each buffer for the CopyData message's type and length. */
const FRAME = 5;
const COPY_DATA = 0x64; // 'd'

export class CopyRows {
  #buffer: Buffer;
  #at = FRAME;

  constructor(initialBytes = 64 * 1024) {
    this.#buffer = Buffer.allocUnsafe(Math.max(initialBytes, 64));
  }

  /**
   * The bytes written since the last take, as one CopyData message of the protocol (type and
   * length in front), ready for the socket as they are; the writer goes on in a new buffer of
   * the same size (the bytes taken are the caller's, never copied).
   */
  take(): Buffer {
    const out = this.#buffer.subarray(0, this.#at);
    out[0] = COPY_DATA;
    out.writeInt32BE(this.#at - 1, 1);
    this.#buffer = Buffer.allocUnsafe(this.#buffer.length);
    this.#at = FRAME;
    return out;
  }

  /** Bytes written since the last take. */
  get size(): number {
    return this.#at - FRAME;
  }

  /** The bytes written since the last take, without the message's frame (fields to `raw()`). */
  takeFields(): Buffer {
    const out = this.#buffer.subarray(FRAME, this.#at);
    this.#buffer = Buffer.allocUnsafe(this.#buffer.length);
    this.#at = FRAME;
    return out;
  }

  /** Bytes written before (fields encoded once, by another CopyRows), as they are. */
  raw(bytes: Uint8Array): this {
    this.#room(bytes.length);
    this.#buffer.set(bytes, this.#at);
    this.#at += bytes.length;
    return this;
  }

  /** The header every binary COPY stream starts with. */
  header(): this {
    this.#room(SIGNATURE.length + 8);
    this.#at += SIGNATURE.copy(this.#buffer, this.#at);
    this.#buffer.writeInt32BE(0, this.#at); // flags: no OIDs
    this.#buffer.writeInt32BE(0, this.#at + 4); // no header extension
    this.#at += 8;
    return this;
  }

  /** The end of the stream. */
  trailer(): this {
    this.#room(2);
    this.#buffer.writeInt16BE(-1, this.#at);
    this.#at += 2;
    return this;
  }

  /** A new row of `fields` fields. */
  row(fields: number): this {
    this.#room(2);
    this.#buffer[this.#at] = fields >>> 8;
    this.#buffer[this.#at + 1] = fields;
    this.#at += 2;
    return this;
  }

  null(): this {
    this.#room(4);
    int32(this.#buffer, this.#at, -1);
    this.#at += 4;
    return this;
  }

  /** A UUID given as its 16 bytes, at `at` in `bytes` (row-id.ts makes them so). */
  uuid(bytes: Uint8Array, at: number): this {
    this.#room(20);
    const b = this.#buffer;
    let o = this.#at;
    int32(b, o, 16);
    o += 4;
    for (let i = 0; i < 16; i++) b[o + i] = bytes[at + i]!;
    this.#at = o + 16;
    return this;
  }

  text(value: string): this {
    return this.#utf8(value, null);
  }

  /** A JSON text as jsonb (which the server parses and stores in its own form). */
  jsonb(json: string): this {
    return this.#utf8(json, 1);
  }

  /** A field of `value` in UTF-8, after a version byte when given (jsonb's). */
  #utf8(value: string, version: number | null): this {
    const head = version === null ? 4 : 5;
    const n = value.length;
    // UTF-8 takes at most three bytes per UTF-16 code unit.
    this.#room(head + n * 3);
    const b = this.#buffer;
    const start = this.#at + head;
    // A short ASCII text is copied here, a code unit a byte: a call to the encoder for each of a
    // batch's keys was a visible share of what a cold batch spent (bench/README.md, "Bulk
    // scheduling"; the figure in "Figures from the store's comments").
    let length = 0;
    if (n <= 64) {
      while (length < n) {
        const c = value.charCodeAt(length);
        if (c > 0x7f) break;
        b[start + length++] = c;
      }
    }
    if (length < n) length = b.write(value, start, 'utf8');
    int32(b, this.#at, length + head - 4);
    if (version !== null) b[this.#at + 4] = version;
    this.#at = start + length;
    return this;
  }

  /** An instant, in epoch milliseconds, as timestamptz; NULL for null. */
  timestamptz(ms: number | null): this {
    if (ms === null) return this.null();
    this.#room(12);
    const us = (ms - PG_EPOCH_MS) * 1000;
    // An int64 as two halves: µs since 2000 stay well inside 2^53.
    const hi = Math.floor(us / TWO_32);
    const b = this.#buffer;
    const at = this.#at;
    int32(b, at, 8);
    int32(b, at + 4, hi);
    int32(b, at + 8, us - hi * TWO_32);
    this.#at = at + 12;
    return this;
  }

  int4(value: number): this {
    this.#room(8);
    int32(this.#buffer, this.#at, 4);
    int32(this.#buffer, this.#at + 4, value);
    this.#at += 8;
    return this;
  }

  bool(value: boolean): this {
    this.#room(5);
    int32(this.#buffer, this.#at, 1);
    this.#buffer[this.#at + 4] = value ? 1 : 0;
    this.#at += 5;
    return this;
  }

  #room(bytes: number): void {
    if (this.#at + bytes <= this.#buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.#buffer.length * 2, this.#at + bytes));
    this.#buffer.copy(grown, 0, 0, this.#at);
    this.#buffer = grown;
  }
}

/**
 * `value`'s low 32 bits, big-endian, at `at` (a signed or unsigned 32-bit value alike): stored
 * byte by byte, without the range checks of `writeInt32BE`, which were most of what a cold batch
 * spent encoding its rows. Every caller has made room first.
 */
function int32(b: Buffer, at: number, value: number): void {
  b[at] = value >>> 24;
  b[at + 1] = value >>> 16;
  b[at + 2] = value >>> 8;
  b[at + 3] = value;
}
