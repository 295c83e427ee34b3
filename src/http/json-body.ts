/**
 * Request bodies in, JSON answers out, without losing a digit (I4).
 *
 * A body is read as text and kept beside its parsed value, so the raw text of `payload` can be
 * handed to the service and stored as sent. Answers are written with `stringifyJson`, which
 * splices stored payload text in verbatim; fastify's own serializer would go through numbers.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { invalidFields } from '../errors.js';
import { rawMember, stringifyJson } from '../json.js';

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
