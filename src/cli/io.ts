/**
 * What a command is given: its arguments' environment and where to write. Commands return an
 * exit code; they never call `process.exit` (so tests run them in process).
 */
import { ChronosError } from '../errors.js';

export interface CliIo {
  env: Record<string, string | undefined>;
  out(line: string): void;
  err(line: string): void;
}

export interface Command {
  name: string;
  /** One line for `chronos help`. */
  summary: string;
  /** The usage lines shown on a usage error. */
  usage: string;
  run(args: string[], io: CliIo): Promise<number>;
}

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** A mistake in the command line itself: answered with the usage and exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The one stderr line for an error: its message, without a stack for errors we expect. */
export function describeError(error: unknown): string {
  if (error instanceof ChronosError) return error.message.split('\n').join('; ');
  if (error instanceof Error) return error.message;
  return String(error);
}
