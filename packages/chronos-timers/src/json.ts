/**
 * JSON that passes through verbatim (I4).
 *
 * JavaScript numbers lose digits past 2^53, so a payload is never parsed into a value on its way
 * through Chronos: it is taken from the request as its own text, stored as JSONB, read back as
 * text, and spliced into responses and webhook bodies as text. `RawJson` marks such text;
 * `stringifyJson` writes it out unchanged.
 */

export class RawJson {
  /**
   * `stored`, when known, is the text PostgreSQL's JSONB gives back for `text` (its keys sorted,
   * its spacing): what every read of the stored payload shows.
   */
  constructor(
    readonly text: string,
    readonly stored?: string,
  ) {}
  /** A lossy view for places that need a value (validation, logs); never for output. */
  parse(): unknown {
    return JSON.parse(this.text);
  }
}

// Random per process (no caller can forge a marker), and compiled once: building the RegExp on
// every call was most of an HTTP answer's serialisation (bench/README.md, "HTTP").
const NONCE = Math.random().toString(36).slice(2);
const MARKER = new RegExp(`"\\\\u0000raw:${NONCE}:(\\d+)\\\\u0000"`, 'g');

/** JSON.stringify, except that every RawJson inside `value` is written as its own text. */
export function stringifyJson(value: unknown, space?: number): string {
  const raws: string[] = [];
  const marker = (i: number) => `\u0000raw:${NONCE}:${i}\u0000`;
  const out = JSON.stringify(
    value,
    (_key, v: unknown) => {
      if (v instanceof RawJson) {
        raws.push(v.text);
        return marker(raws.length - 1);
      }
      return v;
    },
    space,
  );
  if (raws.length === 0) return out;
  return out.replace(MARKER, (_m, i: string) => {
    return raws[Number(i)] as string;
  });
}

/**
 * The raw text of member `key` of the top-level object in `text` (the last one, as JSON.parse
 * keeps the last duplicate), or undefined when absent. `text` must already be valid JSON.
 */
export function rawMember(text: string, key: string): string | undefined {
  let i = skipSpace(text, 0);
  if (text[i] !== '{') return undefined;
  i = skipSpace(text, i + 1);
  let found: string | undefined;
  while (i < text.length && text[i] !== '}') {
    const keyEnd = skipString(text, i);
    const name = JSON.parse(text.slice(i, keyEnd)) as string;
    i = skipSpace(text, keyEnd);
    i = skipSpace(text, i + 1); // ':'
    const valueEnd = skipValue(text, i);
    if (name === key) found = text.slice(i, valueEnd);
    i = skipSpace(text, valueEnd);
    if (text[i] === ',') i = skipSpace(text, i + 1);
  }
  return found;
}

/** The raw texts of the elements of the top-level array in `text` (empty when it is not one). */
export function rawElements(text: string): string[] {
  let i = skipSpace(text, 0);
  if (text[i] !== '[') return [];
  i = skipSpace(text, i + 1);
  const out: string[] = [];
  while (i < text.length && text[i] !== ']') {
    const end = skipValue(text, i);
    out.push(text.slice(i, end));
    i = skipSpace(text, end);
    if (text[i] === ',') i = skipSpace(text, i + 1);
  }
  return out;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t'))
    i++;
  return i;
}

function skipString(text: string, i: number): number {
  i++; // opening quote
  while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
  return i + 1;
}

function skipValue(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return skipString(text, i);
  if (c === '{' || c === '[') {
    let depth = 0;
    while (i < text.length) {
      const ch = text[i];
      if (ch === '"') {
        i = skipString(text, i);
        continue;
      }
      if (ch === '{' || ch === '[') depth++;
      else if (ch === '}' || ch === ']') {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
    return i;
  }
  while (i < text.length && !',}] \n\r\t'.includes(text[i] as string)) i++;
  return i;
}

/**
 * The text PostgreSQL's JSONB gives back for `JSON.stringify(value)`, made here without asking
 * it; undefined for a value whose rendering is not certain here, which is then read back from the
 * database instead. JSONB writes `{"k": v, "k2": v2}` and `[a, b]`, sorts an object's keys by
 * their length in UTF-8 bytes then by those bytes, escapes a string as JSON.stringify does, and
 * writes a number as PostgreSQL's numeric does: the same digits as JavaScript's shortest form,
 * unless that form has an exponent (`1e+21`), which is left to the database. Only plain objects,
 * arrays, strings (well formed), finite numbers, booleans and null are rendered here: `toJSON`,
 * `undefined` members and the like are left to the database too.
 */
export function jsonbText(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return value.isWellFormed() ? JSON.stringify(value) : undefined;
    case 'number': {
      if (!Number.isFinite(value)) return undefined;
      const text = String(value);
      return text.includes('e') ? undefined : text;
    }
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) {
          const element = jsonbText(value[i]);
          if (element === undefined) return undefined;
          out += i === 0 ? element : `, ${element}`;
        }
        return `${out}]`;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return undefined;
      const keys = Object.keys(value);
      if (keys.length > 1) sortKeys(keys, isAscii(keys) ? byLengthThenCode : byUtf8);
      let out = '{';
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!;
        const member = jsonbText((value as Record<string, unknown>)[key]);
        if (member === undefined || !key.isWellFormed()) return undefined;
        out += `${i === 0 ? '' : ', '}${JSON.stringify(key)}: ${member}`;
      }
      return `${out}}`;
    }
    default:
      return undefined;
  }
}

// JSONB's order of keys: shorter first (in UTF-8 bytes), then bytewise. For ASCII keys a string's
// length and JavaScript's comparison agree with the bytes'.
function isAscii(keys: readonly string[]): boolean {
  for (const key of keys) {
    for (let i = 0; i < key.length; i++) if (key.charCodeAt(i) > 0x7f) return false;
  }
  return true;
}

// In place, by insertion when there are few: a payload mostly has a few keys, and
// Array.prototype.sort allocated more per payload than the rest of reading a timer.
function sortKeys(keys: string[], order: (a: string, b: string) => number): void {
  if (keys.length > 16) {
    keys.sort(order);
    return;
  }
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    let j = i - 1;
    while (j >= 0 && order(keys[j]!, key) > 0) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = key;
  }
}

function byLengthThenCode(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

function byUtf8(a: string, b: string): number {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length - y.length || Buffer.compare(x, y);
}

/**
 * A canonical form of a JSON text, for telling whether two texts say the same thing: no
 * whitespace, object keys sorted (by UTF-16 code unit; a duplicate key keeps its last value, as
 * JSON.parse does), strings re-escaped alike, numbers left as written, digit for digit (I4).
 * `text` must already be valid JSON.
 */
export function canonicalJson(text: string): string {
  const start = skipSpace(text, 0);
  return canonicalValue(text.slice(start, skipValue(text, start)));
}

function canonicalValue(raw: string): string {
  const c = raw[0];
  if (c === '"') return JSON.stringify(JSON.parse(raw));
  if (c === '[') return `[${rawElements(raw).map(canonicalValue).join(',')}]`;
  if (c !== '{') return raw;
  const members = new Map<string, string>();
  let i = skipSpace(raw, 1);
  while (i < raw.length && raw[i] !== '}') {
    const keyEnd = skipString(raw, i);
    const name = JSON.parse(raw.slice(i, keyEnd)) as string;
    i = skipSpace(raw, skipSpace(raw, keyEnd) + 1); // past ':'
    const valueEnd = skipValue(raw, i);
    members.set(name, canonicalValue(raw.slice(i, valueEnd)));
    i = skipSpace(raw, valueEnd);
    if (raw[i] === ',') i = skipSpace(raw, i + 1);
  }
  const names = [...members.keys()].sort();
  return `{${names.map((name) => `${JSON.stringify(name)}:${members.get(name)}`).join(',')}}`;
}

/**
 * Where and why `text` is not valid JSON, in a person's terms (`line 3, column 14: expected ","
 * or "}" after a property value`), for a hand-edited file; null when it is valid. JSON.parse
 * says less, and on Node 20 often no position at all.
 */
export function jsonSyntaxError(text: string): { line: number; column: number; message: string } | null {
  let i = 0;
  const fail = (message: string): never => {
    throw new JsonSyntax(i, message);
  };
  const space = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const shown = (c: string) => (c === '\n' ? 'a line break' : JSON.stringify(c));
  const string = () => {
    i++; // opening quote
    while (i < text.length && text[i] !== '"') {
      const code = text.charCodeAt(i);
      if (code < 0x20)
        fail('expected a closing " before the end of the line (a string cannot hold a line break)');
      if (text[i] === '\\') {
        const escape = text[i + 1];
        if (escape === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) fail('expected 4 hex digits after \\u');
          i += 6;
          continue;
        }
        if (escape === undefined || !'"\\/bfnrt'.includes(escape))
          fail('expected an escape such as \\" or \\n after \\');
        i += 2;
        continue;
      }
      i++;
    }
    if (i >= text.length) fail('expected a closing " (the text ends inside a string)');
    i++;
  };
  const value = (): void => {
    space();
    const c = text[i];
    if (c === undefined) return fail('expected a value, got the end of the text (is the file complete?)');
    if (c === '{') {
      i++;
      space();
      if (text[i] === '}') return void i++;
      for (;;) {
        space();
        if (text[i] === '}') fail('expected a property name, got "}" (JSON allows no trailing comma)');
        if (text[i] !== '"')
          fail(
            `expected a "quoted" property name, got ${text[i] === undefined ? 'the end of the text' : shown(text[i]!)}`,
          );
        string();
        space();
        if (text[i] !== ':') fail('expected ":" after the property name');
        i++;
        value();
        space();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') return void i++;
        fail(
          `expected "," or "}" after a property value, got ${text[i] === undefined ? 'the end of the text' : shown(text[i]!)}`,
        );
      }
    }
    if (c === '[') {
      i++;
      space();
      if (text[i] === ']') return void i++;
      for (;;) {
        space();
        if (text[i] === ']') fail('expected a value, got "]" (JSON allows no trailing comma)');
        value();
        space();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') return void i++;
        fail(
          `expected "," or "]" after an array element, got ${text[i] === undefined ? 'the end of the text' : shown(text[i]!)}`,
        );
      }
    }
    if (c === '"') return string();
    const literal = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y;
    literal.lastIndex = i;
    const match = literal.exec(text);
    if (match && !/[A-Za-z0-9_$.]/.test(text[i + match[0].length] ?? '')) {
      i += match[0].length;
      return;
    }
    if (c === '}' || c === ']') fail(`expected a value, got ${shown(c)}`);
    if (c === '/') fail('expected a value, got "/" (JSON has no comments)');
    if (c === "'") fail('expected a value, got "\'" (JSON strings take double quotes)');
    fail(`expected a value (a string, number, object, array, true, false or null), got ${shown(c)}`);
  };
  try {
    value();
    space();
    if (i < text.length) fail(`expected the end of the text after the JSON value, got ${shown(text[i]!)}`);
    return null;
  } catch (error) {
    if (!(error instanceof JsonSyntax)) throw error;
    const before = text.slice(0, error.at);
    const line = before.split('\n').length;
    return { line, column: error.at - before.lastIndexOf('\n'), message: error.message };
  }
}

class JsonSyntax extends Error {
  constructor(
    readonly at: number,
    message: string,
  ) {
    super(message);
  }
}

/** What PostgreSQL's JSONB makes of a JSON text, measured without asking it (see `storedForm`). */
export interface StoredForm {
  /** The length in UTF-8 bytes of `jsonb::text` (exact; an upper bound when a key is repeated). */
  bytes: number;
  /** How deeply objects and arrays nest (`{}` is 1, a scalar 0). */
  depth: number;
  /** Set when a number cannot be stored as PostgreSQL's numeric at all (`1e-20000`). */
  badNumber?: string;
}

/** Digits after the point PostgreSQL's numeric can hold (NUMERIC_DSCALE_MAX). */
const NUMERIC_SCALE_MAX = 16_383;
const NUMBER = /-?(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?/y;

/**
 * The size and depth of the text PostgreSQL gives back for `text` stored as JSONB, in one pass
 * without recursion (a payload nested 60,000 deep is measured, not overflowed). JSONB writes
 * `{"k": v, "k2": v2}` and `[a, b]`, re-escapes strings (`\/` as `/`, `\u00e9` as `é`, controls
 * other than \b \f \n \r \t as `\u00XX`), and writes a number as numeric does: every digit, no
 * exponent (`1e3` → `1000`, `1e-3` → `0.001`, `1.50` → `1.50`, `-0` → `0`), so `1e99999` is
 * 100,000 bytes. Exact, except that a key repeated in one object is counted each time (JSONB keeps
 * the last): then an upper bound. `text` must already be valid JSON.
 */
export function storedForm(text: string): StoredForm {
  let bytes = 0;
  let depth = 0;
  let deepest = 0;
  let badNumber: string | undefined;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) {
      i++;
    } else if (c === 0x7b || c === 0x5b) {
      // { [
      bytes += 1;
      depth++;
      if (depth > deepest) deepest = depth;
      i++;
    } else if (c === 0x7d || c === 0x5d) {
      bytes += 1;
      depth--;
      i++;
    } else if (c === 0x2c || c === 0x3a) {
      // ", " and ": "
      bytes += 2;
      i++;
    } else if (c === 0x22) {
      i++;
      bytes += 2; // the quotes
      while (i < n) {
        const u = text.charCodeAt(i);
        if (u === 0x22) break;
        if (u === 0x5c) {
          const e = text.charCodeAt(i + 1);
          if (e === 0x75) {
            bytes += escapedUnitBytes(parseInt(text.slice(i + 2, i + 6), 16));
            i += 6;
          } else {
            bytes += e === 0x2f ? 1 : 2; // \/ is written as /
            i += 2;
          }
        } else {
          bytes += escapedUnitBytes(u);
          i++;
        }
      }
      i++; // closing quote
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(text);
      if (!m) return { bytes: Infinity, depth: deepest, badNumber: text.slice(i, i + 20) };
      const size = numericBytes(
        m[0].startsWith('-'),
        m[1]!,
        m[2] ?? '',
        m[3] === undefined ? 0 : Number(m[3]),
      );
      if (size === undefined) badNumber ??= m[0].length > 40 ? `${m[0].slice(0, 40)}…` : m[0];
      else bytes += size;
      i += m[0].length;
    } else {
      // true, false, null: written as they are
      let j = i;
      while (j < n && text.charCodeAt(j) >= 0x61 && text.charCodeAt(j) <= 0x7a) j++;
      bytes += j - i;
      i = j === i ? i + 1 : j;
    }
  }
  return badNumber === undefined ? { bytes, depth: deepest } : { bytes, depth: deepest, badNumber };
}

// The UTF-8 bytes JSONB writes for one UTF-16 unit of a string: escapes for the quote, the
// backslash and controls; a surrogate pair is 4 bytes, counted on its high half.
function escapedUnitBytes(u: number): number {
  if (u === 0x22 || u === 0x5c || u === 0x08 || u === 0x09 || u === 0x0a || u === 0x0c || u === 0x0d)
    return 2;
  if (u < 0x20) return 6;
  if (u < 0x80) return 1;
  if (u < 0x800) return 2;
  if (u >= 0xd800 && u <= 0xdbff) return 4;
  if (u >= 0xdc00 && u <= 0xdfff) return 0;
  return 3;
}

/** The length of numeric's text for a JSON number; undefined when numeric cannot hold it. */
function numericBytes(negative: boolean, int: string, frac: string, exponent: number): number | undefined {
  if (!Number.isFinite(exponent) || Math.abs(exponent) > 100_000_000) return undefined;
  const digits = int.length + frac.length;
  let zeros = 0;
  while (zeros < int.length && int.charCodeAt(zeros) === 0x30) zeros++;
  if (zeros === int.length) {
    let k = 0;
    while (k < frac.length && frac.charCodeAt(k) === 0x30) k++;
    zeros += k;
  }
  const scale = Math.max(0, frac.length - exponent);
  if (scale > NUMERIC_SCALE_MAX) return undefined;
  const zero = zeros === digits;
  const point = int.length + exponent; // where the point falls in int + frac
  const intLength = zero || point <= zeros ? 1 : point - zeros;
  return intLength + (scale > 0 ? 1 + scale : 0) + (negative && !zero ? 1 : 0);
}
