/**
 * JSON that passes through verbatim (I4).
 *
 * JavaScript numbers lose digits past 2^53, so a payload is never parsed into a value on its way
 * through Chronos: it is taken from the request as its own text, stored as JSONB, read back as
 * text, and spliced into responses and webhook bodies as text. `RawJson` marks such text;
 * `stringifyJson` writes it out unchanged.
 */

export class RawJson {
  constructor(readonly text: string) {}
  /** A lossy view for places that need a value (validation, logs); never for output. */
  parse(): unknown {
    return JSON.parse(this.text);
  }
}

// Random per process (no caller can forge a marker), and compiled once: building the RegExp on
// every call cost ~40 µs, most of an HTTP answer's serialisation.
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
