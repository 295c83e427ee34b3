/**
 * What a command is given: its arguments' environment and where to write. Commands return an
 * exit code; they never call `process.exit` (so tests run them in process).
 */
import { ChronosError, parseOwner } from 'chronos-timers/internal';

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

/** `--owner <did>`, required: `whose` says what it owns, `hint` where to find it. */
export function requireOwner(
  values: Record<string, string | boolean | undefined>,
  whose: string,
  hint = '',
): string {
  if (typeof values.owner !== 'string') {
    throw new UsageError(
      `--owner <did> is required: the owner whose ${whose}, e.g. --owner did:matrix:<user uuid>:<name>${hint}`,
    );
  }
  return parseOwner(values.owner, 'owner').did;
}

/** One page of a list, as the store answered it (JSON text): every owner's carries `owners`. */
export interface ListPage<T> {
  items: T[];
  nextCursor: string | null;
  owners?: Record<string, string>;
}

/**
 * A list page printed as a table, with an OWNER column when it is every owner's page (the
 * operator's view), `empty` when it holds nothing, and the command for the next page: `command`
 * with the flags the caller gave (`flags`, name to value) and the cursor.
 */
export function printListPage<T extends { id: string }>(
  io: CliIo,
  page: ListPage<T>,
  view: {
    empty: string;
    header: string[];
    row: (item: T) => string[];
    command: string;
    flags: Record<string, unknown>;
  },
): number {
  if (page.items.length === 0) {
    io.out(view.empty);
    return EXIT_OK;
  }
  const owners = page.owners;
  const [first, ...rest] = view.header;
  table(io, [
    [first!, ...(owners ? ['OWNER'] : []), ...rest],
    ...page.items.map((item) => {
      const [id, ...cells] = view.row(item);
      return [id!, ...(owners ? [owners[item.id] ?? '-'] : []), ...cells];
    }),
  ]);
  if (page.nextCursor) {
    const flags = Object.entries(view.flags).flatMap(([name, value]) =>
      typeof value === 'string' ? [`--${name} ${value}`] : [],
    );
    io.out(`More: ${[view.command, ...flags, `--cursor ${page.nextCursor}`].join(' ')}`);
  }
  return EXIT_OK;
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
