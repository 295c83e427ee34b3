/**
 * The `chronos` executable (bin/chronos.js loads this).
 */
import { runCli } from './cli.js';

const io = {
  env: process.env,
  out: (line: string) => process.stdout.write(`${line}\n`),
  err: (line: string) => process.stderr.write(`${line}\n`),
};

const code = await runCli(process.argv.slice(2), io);
process.exitCode = code;
// Whatever a library left open (a socket, a timer) must not keep a finished command alive.
setTimeout(() => process.exit(code), 2_000).unref();
