/**
 * `chronos <command>`: the command table and its dispatch. A command is one module under
 * `commands/` exporting a `Command`; add it to COMMANDS and it appears in `chronos help`.
 *
 * Exit codes: 0 done, 1 failed (one line on stderr saying why), 2 the command line was wrong.
 */
import { VERSION, PACKAGE_NAME } from 'chronos-timers/internal';
import { alarmsCommand } from './commands/alarms.js';
import { keysCommand } from './commands/keys.js';
import { mcpCommand } from './commands/mcp.js';
import { migrateCommand } from './commands/migrate.js';
import { schedulesCommand } from './commands/schedules.js';
import { serveCommand } from './commands/serve.js';
import { wakesCommand } from './commands/wakes.js';
import {
  describeError,
  EXIT_FAILURE,
  EXIT_OK,
  EXIT_USAGE,
  UsageError,
  type CliIo,
  type Command,
} from './io.js';

export const COMMANDS: readonly Command[] = [
  serveCommand,
  migrateCommand,
  keysCommand,
  alarmsCommand,
  schedulesCommand,
  mcpCommand,
  wakesCommand,
];

const HELP_FLAGS = new Set(['--help', '-h', 'help']);
const VERSION_FLAGS = new Set(['--version', '-V', 'version']);

function help(io: CliIo): void {
  io.out('usage: chronos <command> [options]');
  io.out('');
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  for (const command of COMMANDS) io.out(`  ${command.name.padEnd(width)}  ${command.summary}`);
  io.out('');
  io.out('`chronos <command> --help` says more; `chronos --version` prints the version.');
  io.out(
    'Configuration is by environment variables (DATABASE_URL, CHRONOS_DATA_DIR, PORT, …): see README.md.',
  );
}

export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined || HELP_FLAGS.has(name)) {
    help(io);
    return name === undefined ? EXIT_USAGE : EXIT_OK;
  }
  if (VERSION_FLAGS.has(name)) {
    io.out(`${PACKAGE_NAME} ${VERSION}`);
    return EXIT_OK;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    io.err(`chronos: unknown command "${name}"; expected one of ${COMMANDS.map((c) => c.name).join(', ')}`);
    return EXIT_USAGE;
  }
  // `--help` anywhere (`chronos keys create --help`) answers before anything runs.
  if (args.some((arg) => arg === '--help' || arg === '-h')) {
    io.out(command.usage);
    if (command.help) io.out(`\n${command.help}`);
    return EXIT_OK;
  }
  try {
    return await command.run(args, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`chronos ${command.name}: ${error.message}`);
      io.err(command.usage);
      return EXIT_USAGE;
    }
    for (const line of describeError(error)) io.err(`chronos ${command.name}: ${line}`);
    return EXIT_FAILURE;
  }
}
