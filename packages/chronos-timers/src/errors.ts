/**
 * Typed errors with stable codes.
 *
 * Every surface maps the code alone: HTTP to a status and a problem body, MCP to an `isError`
 * result, the CLI to one stderr line and a non-zero exit. Messages follow one shape:
 * `path: expected X, got Y` and, where there is one, a suggestion.
 */

export type ErrorCode =
  | 'invalid_input'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'too_large'
  | 'quota'
  | 'lease_lost'
  | 'unavailable'
  | 'locked';

export interface FieldError {
  /** Dot-separated field path; `""` for the body as a whole. */
  path: string;
  message: string;
}

export interface ChronosErrorOptions {
  errors?: FieldError[];
  /** For `quota`: the name of the limit that was hit (`max_active_alarms`, `create_rate`). */
  limit?: string;
  retryAfterSeconds?: number;
  cause?: unknown;
  /**
   * What an HTTP answer shows instead of `message`, when the message names what only the
   * operator should see (the database's address): the log and the library keep the message.
   */
  publicMessage?: string;
}

export class ChronosError extends Error {
  readonly code: ErrorCode;
  readonly errors: FieldError[];
  readonly limit: string | undefined;
  readonly retryAfterSeconds: number | undefined;
  readonly publicMessage: string | undefined;

  constructor(code: ErrorCode, message: string, options: ChronosErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ChronosError';
    this.code = code;
    this.errors = options.errors ?? [];
    this.limit = options.limit;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.publicMessage = options.publicMessage;
  }
}

/** A received value already put in words (`71691 bytes`): shown as it is, unquoted. */
export class Described {
  constructor(readonly text: string) {}
}

/** Renders a received value for an error message: short, quoted when a string. */
export function describeValue(value: unknown): string {
  if (value instanceof Described) return value.text;
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (typeof value === 'string') {
    const shown = value.length > 60 ? `${value.slice(0, 57)}...` : value;
    return JSON.stringify(shown);
  }
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return String(value);
  }
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? 'an invalid Date' : value.toISOString();
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

/**
 * `where: expected exactly (or at most) one of "a", "b" or "c", got "a" and "b"; send exactly one`:
 * the refusal of fields that exclude each other, `names` and `given` as the caller spells them.
 */
export function oneOfMessage(
  where: string,
  names: readonly string[],
  given: readonly string[],
  exactly: boolean,
): string {
  const quoted = names.map((name) => `"${name}"`);
  const list = `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]}`;
  const got = given.length === 0 ? 'none of them' : given.map((name) => `"${name}"`).join(' and ');
  const how = exactly ? 'exactly' : 'at most';
  return `${where}: expected ${how} one of ${list}, got ${got}; send ${how} one`;
}

/** `path: expected X, got Y[; hint]` as an `invalid_input` error carrying the one field error. */
export function invalidInput(path: string, expected: string, got: unknown, hint?: string): ChronosError {
  const message = `${path || 'body'}: expected ${expected}, got ${describeValue(got)}${hint ? `; ${hint}` : ''}`;
  return new ChronosError('invalid_input', message, { errors: [{ path, message }] });
}

/** An `invalid_input` error built from several field errors. */
export function invalidFields(errors: FieldError[]): ChronosError {
  const message = errors.map((e) => e.message).join('; ');
  return new ChronosError('invalid_input', message, { errors });
}

/**
 * An `invalid_input` error with its fields renamed by `rename` (a core path such as `inSeconds`
 * or `3.cron` to the caller's `in_seconds` or `alarms.3.cron`); a message that starts with the
 * old path starts with the new one. Any other error is returned as it is.
 */
export function renameFieldErrors(error: unknown, rename: (path: string) => string): unknown {
  if (!(error instanceof ChronosError) || error.code !== 'invalid_input') return error;
  return invalidFields(
    error.errors.map(({ path, message }) => {
      const to = rename(path);
      const lead = path || 'body';
      return {
        path: to,
        message: message.startsWith(`${lead}:`) ? `${to || 'body'}${message.slice(lead.length)}` : message,
      };
    }),
  );
}

export function notFound(what: string): ChronosError {
  return new ChronosError('not_found', `${what} not found`);
}

export function isChronosError(error: unknown, code?: ErrorCode): error is ChronosError {
  return error instanceof ChronosError && (code === undefined || error.code === code);
}
