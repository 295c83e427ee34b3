/**
 * What a route knows about its request: the authenticated caller, and a query string checked
 * for unknown parameters (a misspelt `?stauts=` is refused, not silently ignored).
 */
import type { FastifyRequest } from 'fastify';
import { describeValue, invalidFields } from '../errors.js';
import type { Caller } from '../core/authenticator.js';
import { traceparentOf, type Span } from '../tracing.js';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null;
    /** The request's server span (a no-op one without a tracer provider). */
    span: Span | null;
  }
}

/** How a route writes: from the API, in the trace of this request. */
export function writeOf(request: FastifyRequest): { source: 'api'; trace: string } {
  return { source: 'api', trace: traceparentOf(request.span ?? undefined) };
}

export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw new Error('route registered outside the authenticated scope');
  return request.caller;
}

/** The query parameters, when every one is among `allowed`; 400 naming the others otherwise. */
export function checkQuery(request: FastifyRequest, allowed: readonly string[]): Record<string, unknown> {
  const query = (request.query ?? {}) as Record<string, unknown>;
  const unknown = Object.keys(query).filter((name) => !allowed.includes(name));
  if (unknown.length > 0) {
    throw invalidFields(
      unknown.map((name) => ({
        path: name,
        message: `${name}: unknown query parameter (got ${describeValue(query[name])}); send only ${allowed.join(', ')}`,
      })),
    );
  }
  return query;
}
