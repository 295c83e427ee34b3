/**
 * `chronos mcp`: MCP over stdio for one owner (`CHRONOS_API_KEY` or `CHRONOS_OWNER_DID`); the
 * process itself is src/stdio-server.ts. See docs/mcp.md.
 */
import { loadConfig } from 'chronos-timers/internal';
import type { Logger } from 'chronos-timers/internal';
import type { StdioStreams } from '../../stdio-server.js';
import { readArgs } from '../args.js';
import { EXIT_OK, type CliIo, type Command } from '../io.js';

export const MCP_USAGE =
  'usage: chronos mcp   (the owner: CHRONOS_API_KEY=<key> or CHRONOS_OWNER_DID=<did>; store: DATABASE_URL or CHRONOS_DATA_DIR)';

export interface McpCommandOptions {
  streams?: StdioStreams;
  /** Defaults to a logger on stderr. */
  logger?: Logger;
}

export async function runMcpCommand(
  args: string[],
  io: CliIo,
  options: McpCommandOptions = {},
): Promise<number> {
  readArgs(args, {});
  const config = loadConfig(io.env);
  let streams = options.streams;
  if (streams === undefined) {
    streams = { stdin: process.stdin, stdout: process.stdout };
    // A library that writes to console.log would corrupt the protocol on stdout.
    console.log = console.info = console.debug = console.error;
  }
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  try {
    // Loaded here: `chronos serve` and the other commands need none of MCP.
    const { serveMcpStdio } = await import('../../stdio-server.js');
    await serveMcpStdio(config, { streams, logger: options.logger, signal: stop.signal });
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
  return EXIT_OK;
}

export const mcpCommand: Command = {
  name: 'mcp',
  summary: 'MCP server over stdio for one owner (CHRONOS_API_KEY or CHRONOS_OWNER_DID)',
  usage: MCP_USAGE,
  help: `MCP over stdio for one owner: CHRONOS_API_KEY=<key> (or CHRONOS_OWNER_DID=<did>).
On PostgreSQL (DATABASE_URL) it serves MCP; the chronos serve instances there deliver the wakes.
On the embedded store held by a running chronos serve it relays to that server; on one that no
process holds it opens it and delivers the wakes itself while it runs. stdout carries the
protocol; logs go to stderr. Configure it in your MCP client (see docs/mcp.md).`,
  run: (args, io) => runMcpCommand(args, io),
};
