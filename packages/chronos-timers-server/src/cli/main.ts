/**
 * The `chronos` executable (bin/chronos.js loads this).
 */
import { setFlagsFromString } from 'node:v8';
import { embeddedAheadDir, processEnv, startEmbeddedAhead } from 'chronos-timers/internal';

// The embedded store is PostgreSQL compiled to WebAssembly. V8 runs it with its baseline compiler
// (Liftoff) and, by default, recompiles the busiest functions with its optimising one in the
// background: seconds of CPU and ~40 MB resident for a few per cent of speed on the statements
// Chronos sends (bench/README.md, "Embedded store start"). A command process keeps the baseline.
// Set here, before any WebAssembly is compiled; a library's host process is left as it is.
setFlagsFromString('--liftoff-only');

// `chronos serve` on the embedded store (no DATABASE_URL): PGlite compiles, and a new store's
// template unzips, while the commands load. Which store, and whether at all, is config's to say
// (`embeddedAheadDir`), with the data directory's default the store itself uses.
const argv = process.argv.slice(2);
const env = processEnv();
const aheadDir = embeddedAheadDir(env, argv);
if (aheadDir !== null) startEmbeddedAhead(aheadDir);
const { runCli } = await import('./cli.js');

const io = {
  env,
  out: (line: string) => process.stdout.write(`${line}\n`),
  err: (line: string) => process.stderr.write(`${line}\n`),
};

const code = await runCli(argv, io);
process.exitCode = code;
// Whatever a library left open (a socket, a timer) must not keep a finished command alive.
setTimeout(() => process.exit(code), 2_000).unref();
