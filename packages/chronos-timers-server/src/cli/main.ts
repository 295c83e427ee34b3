/**
 * The `chronos` executable (bin/chronos.js loads this).
 */
import { setFlagsFromString } from 'node:v8';
import { startEmbeddedAhead } from 'chronos-timers/internal';

// The embedded store is PostgreSQL compiled to WebAssembly. V8 runs it with its baseline compiler
// (Liftoff) and, by default, recompiles the busiest functions with its optimising one in the
// background: seconds of CPU and ~40 MB resident for a few per cent of speed on the statements
// Chronos sends (bench/README.md, "Embedded store start"). A command process keeps the baseline.
// Set here, before any WebAssembly is compiled; a library's host process is left as it is.
setFlagsFromString('--liftoff-only');

// `chronos serve` on the embedded store (no DATABASE_URL): PGlite compiles, and a new store's
// template unzips, while the commands load. Not for `serve --help` or a wrong argument, which
// open nothing. CHRONOS_DATA_DIR's default is config.ts's; were they to differ, the template
// would be unzipped for nothing and dropped when the store opens.
const [command, ...args] = process.argv.slice(2);
if (command === 'serve' && args.length === 0 && !process.env.DATABASE_URL?.trim()) {
  startEmbeddedAhead(process.env.CHRONOS_DATA_DIR?.trim() || './.chronos');
}
const { runCli } = await import('./cli.js');

const io = {
  env: process.env,
  out: (line: string) => process.stdout.write(`${line}\n`),
  err: (line: string) => process.stderr.write(`${line}\n`),
};

const code = await runCli(process.argv.slice(2), io);
process.exitCode = code;
// Whatever a library left open (a socket, a timer) must not keep a finished command alive.
setTimeout(() => process.exit(code), 2_000).unref();
