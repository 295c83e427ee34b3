/**
 * Request bodies in, JSON answers out, without losing a digit (I4).
 *
 * A body is read as text and kept beside its parsed value, so the raw text of `payload` can be
 * handed to the service and stored as sent. Answers are written with `stringifyJson`, which
 * splices stored payload text in verbatim; fastify's own serializer would go through numbers.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { invalidFields } from 'chronos-timers/internal';
import { rawMember, stringifyJson } from 'chronos-timers/internal';

export class JsonBody {
  constructor(
    /** The body as sent. */
    readonly text: string,
    /** The body parsed (undefined when empty); numbers past 2^53 have lost digits here. */
    readonly value: unknown,
  ) {}

  /** The raw JSON text of a top-level member, when the body is an object that has it. */
  rawMember(key: string): string | undefined {
    const value = this.value;
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, key)) {
      return undefined;
    }
    return rawMember(this.text, key);
  }
}

const EMPTY = new JsonBody('', undefined);

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A body's bytes as text; bytes that are not UTF-8 are a 400, never replaced by U+FFFD. */
export function decodeBody(bytes: Buffer): string {
  try {
    return UTF8.decode(bytes);
  } catch {
    const at = firstInvalidUtf8(bytes);
    throw invalidFields([
      {
        path: '',
        message: `body: expected JSON in UTF-8, got a byte sequence that is not UTF-8 at byte ${at} (0x${(bytes[at] ?? 0).toString(16).padStart(2, '0')})`,
      },
    ]);
  }
}

function firstInvalidUtf8(bytes: Buffer): number {
  let lo = 0;
  let hi = bytes.length;
  // The longest valid prefix, found by halving (TextDecoder says only that it failed).
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    let ok = true;
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, mid), { stream: true });
    } catch {
      ok = false;
    }
    if (ok) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Parses a request body as JSON whatever its Content-Type says (curl's -d sends a form type). */
export function parseJsonBody(text: string): JsonBody {
  if (text.trim() === '') return EMPTY;
  try {
    return new JsonBody(text, JSON.parse(text));
  } catch (error) {
    const reason = (error as Error).message.replace(/^JSON\.parse: /, '');
    throw invalidFields([
      {
        path: '',
        message: `body: expected a JSON object (Content-Type: application/json), got text that is not JSON (${reason})`,
      },
    ]);
  }
}

/** The parsed body of a request (empty when it had none). */
export function bodyOf(request: FastifyRequest): JsonBody {
  return request.body instanceof JsonBody ? request.body : EMPTY;
}

export function sendJson(reply: FastifyReply, status: number, value: unknown): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(stringifyJson(value));
}
