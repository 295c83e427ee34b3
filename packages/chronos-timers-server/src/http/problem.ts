/**
 * Errors → RFC 9457 problem details (`application/problem+json`).
 *
 * The status comes from the error's code alone (the store has turned driver errors into codes:
 * the database being away is `unavailable`, a 503 with `Retry-After`). A request refused for its
 * input says what to send instead (`errors[].message`), its fields named as the caller wrote
 * them; a quota names the limit and when to retry. Anything else is a bland 500 that names the
 * request id, and is logged with its cause — never its details in the answer.
 */
import type { ErrorCode, FieldError } from 'chronos-timers/internal';
import { isChronosError } from 'chronos-timers/internal';
import { inWireNames, LIMITS } from 'chronos-timers/internal';

export const PROBLEM_TYPE = 'application/problem+json';

const STATUS: Record<ErrorCode, number> = {
  invalid_input: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  too_large: 413,
  quota: 429,
  lease_lost: 409,
  unavailable: 503,
  locked: 503,
};

const TITLE: Record<ErrorCode | 'internal', string> = {
  invalid_input: 'Invalid input',
  unauthorized: 'Unauthorized',
  forbidden: 'Forbidden',
  not_found: 'Not found',
  conflict: 'Conflict',
  too_large: 'Request body too large',
  quota: 'Quota exceeded',
  lease_lost: 'Conflict',
  unavailable: 'Service unavailable',
  locked: 'Service unavailable',
  internal: 'Internal server error',
};

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** The stable error code (the last segment of `type`). */
  code: ErrorCode | 'internal';
  errors?: FieldError[];
  /** For 429: the quota that was hit (`max_active_alarms` or `create_rate`). */
  limit?: string;
  request_id?: string;
}

export interface ProblemAnswer {
  problem: Problem;
  headers: Record<string, string>;
  /** Whether the error is ours (to be logged with its cause) rather than the caller's. */
  internal: boolean;
}

export function problemType(code: string): string {
  return `urn:chronos:problem:${code}`;
}

function problem(code: ErrorCode | 'internal', status: number, detail: string): Problem {
  return { type: problemType(code), title: TITLE[code], status, detail, code };
}

/** The problem answer for any error thrown while handling a request. */
export function toProblem(error: unknown, requestId?: string): ProblemAnswer {
  // The core names fields its own way (`inSeconds`); the caller wrote them the wire's way.
  const answer = classify(inWireNames(error));
  if (requestId) answer.problem.request_id = requestId;
  return answer;
}

function classify(error: unknown): ProblemAnswer {
  if (isChronosError(error)) {
    const status = STATUS[error.code];
    const body = problem(error.code, status, error.publicMessage ?? error.message);
    const headers: Record<string, string> = {};
    if (error.code === 'invalid_input') {
      body.errors = error.errors.length > 0 ? error.errors : [{ path: '', message: error.message }];
    }
    if (error.code === 'quota') {
      if (error.limit) body.limit = error.limit;
      headers['retry-after'] = String(Math.max(1, Math.ceil(error.retryAfterSeconds ?? 60)));
    }
    if (error.code === 'unauthorized') headers['www-authenticate'] = 'Bearer realm="chronos"';
    if (status === 503) headers['retry-after'] = '1';
    return { problem: body, headers, internal: false };
  }
  const framework = frameworkProblem(error);
  if (framework) return { problem: framework, headers: {}, internal: false };
  return {
    problem: problem('internal', 500, 'an unexpected error occurred; it has been logged with the request id'),
    headers: {},
    internal: true,
  };
}

/** Fastify's own refusals (body too large, bad Content-Length, …) in the same shape. */
function frameworkProblem(error: unknown): Problem | null {
  const e = error as { code?: unknown; statusCode?: unknown; message?: unknown };
  if (typeof e?.statusCode !== 'number' || e.statusCode < 400 || e.statusCode >= 500) return null;
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || e.statusCode === 413) {
    return problem(
      'too_large',
      413,
      `body: expected at most ${LIMITS.bodyBytes} bytes (128 KiB); send a smaller payload (at most 64 KiB) or wake_message (at most 16 KiB)`,
    );
  }
  // Neither echoes the URL (it may carry what was pasted there by mistake).
  if (e.statusCode === 414 || e.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    const detail = 'url: expected path segments of at most 2000 characters; send a shorter URL';
    return {
      ...problem('invalid_input', 414, detail),
      title: 'URI Too Long',
      errors: [{ path: 'url', message: detail }],
    };
  }
  if (e.code === 'FST_ERR_BAD_URL') {
    const detail = 'url: expected valid percent-encoding (%XX with two hex digits); send a well-formed URL';
    return { ...problem('invalid_input', 400, detail), errors: [{ path: 'url', message: detail }] };
  }
  const code: ErrorCode =
    e.statusCode === 404 ? 'not_found' : e.statusCode === 401 ? 'unauthorized' : 'invalid_input';
  const body = problem(code, e.statusCode, typeof e.message === 'string' ? e.message : 'bad request');
  if (code === 'invalid_input') body.errors = [{ path: '', message: body.detail }];
  return body;
}
