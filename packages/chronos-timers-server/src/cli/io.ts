/**
 * What a command is given: its arguments' environment and where to write. Commands return an
 * exit code; they never call `process.exit` (so tests run them in process).
 */
import { ChronosError } from 'chronos-timers/internal';

export interface CliIo {
  env: Record<string, string | undefined>;
  out(line: string): void;
  err(line: string): void;
}

export interface Command {
  name: string;
  /** One line for `chronos help`. */
  summary: string;
  /** The usage lines shown on a usage error and by `--help`. */
  usage: string;
  /** More for `--help`: what each part does. */
  help?: string;
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

export type Subcommand = (args: string[], io: CliIo) => Promise<number>;

/**
 * Runs the subcommand `args[0]` names (`keys create …`) with the rest of the arguments; a usage
 * error naming the choices when it names none or an unknown one.
 */
export function runSubcommand(
  subcommands: Record<string, Subcommand>,
  args: string[],
  io: CliIo,
): Promise<number> {
  const [sub, ...rest] = args;
  const fn = sub === undefined || !Object.hasOwn(subcommands, sub) ? undefined : subcommands[sub];
  if (!fn) {
    const names = Object.keys(subcommands).join(', ');
    throw new UsageError(
      sub === undefined
        ? `expected a subcommand: ${names}`
        : `unknown subcommand "${sub}"; expected one of ${names}`,
    );
  }
  return fn(rest, io);
}

/**
 * The stderr lines for an error: its message, without a stack for errors we expect; one line per
 * refused field or variable (a bad configuration names each variable on its own line).
 */
export function describeError(error: unknown): string[] {
  if (error instanceof ChronosError) {
    return error.errors.length > 1 ? error.errors.map((e) => e.message) : error.message.split('\n');
  }
  if (error instanceof Error) return [error.message];
  return [String(error)];
}

/** Rows as columns, each as wide as its widest cell, two spaces apart (the first row the header). */
export function table(io: CliIo, rows: string[][]): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const row of rows)
    io.out(
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    );
}
