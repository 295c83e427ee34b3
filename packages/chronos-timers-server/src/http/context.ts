/**
 * What a route knows about its request: the authenticated caller, and a query string checked
 * for unknown parameters (a misspelt `?stauts=` is refused, not silently ignored).
 */
import type { FastifyRequest } from 'fastify';
import { invalidFields } from 'chronos-timers/internal';
import type { Caller, EveryOwnerCaller } from 'chronos-timers/internal';
import type { Owner } from 'chronos-timers/internal';
import { traceparentOf, type Span } from 'chronos-timers/internal';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | EveryOwnerCaller | null;
    /** The request's server span (a no-op one without a tracer provider). */
    span: Span | null;
  }
  interface FastifyContextConfig {
    /** The operator token may name no owner here: it then reads every owner's records. */
    everyOwner?: boolean;
  }
}

/** The route config of a list or figure the operator may read across every owner. */
export const EVERY_OWNER = { config: { everyOwner: true } } as const;

/** How a route writes: from the API, in the trace of this request. */
export function writeOf(request: FastifyRequest): { source: 'api'; trace: string } {
  return { source: 'api', trace: traceparentOf(request.span ?? undefined) };
}

export function callerOf(request: FastifyRequest): Caller {
  const caller = request.caller;
  if (!caller) throw new Error('route registered outside the authenticated scope');
  if (caller.owner === null) throw new Error('a route for one owner was reached with every owner');
  return caller;
}

/** Whose records a route marked EVERY_OWNER reads: one owner's, or every owner's (null). */
export function scopeOf(request: FastifyRequest): Owner | null {
  if (!request.caller) throw new Error('route registered outside the authenticated scope');
  return request.caller.owner;
}

/** The query parameters, when every one is among `allowed`; 400 naming the others otherwise. */
export function checkQuery(request: FastifyRequest, allowed: readonly string[]): Record<string, unknown> {
  const query = (request.query ?? {}) as Record<string, unknown>;
  const unknown = Object.keys(query).filter((name) => !allowed.includes(name));
  if (unknown.length > 0) {
    throw invalidFields(
      unknown.map((name) => ({
        path: name,
        // Not its value: a key pasted as `?api_key=` must not come back in the answer.
        message: `${name}: unknown query parameter; send only ${allowed.join(', ')}`,
      })),
    );
  }
  // PostgreSQL text holds no NUL: refused here, on the parameter that carried it.
  const withNul = Object.keys(query).filter((name) => containsNul(query[name]));
  if (withNul.length > 0) {
    throw invalidFields(
      withNul.map((name) => ({
        path: name,
        message: `${name}: expected text without NUL characters (U+0000, %00), got text containing one`,
      })),
    );
  }
  return query;
}

function containsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  return Array.isArray(value) && value.some(containsNul);
}
