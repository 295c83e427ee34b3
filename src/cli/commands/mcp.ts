/**
 * `chronos mcp`: the MCP server over stdio for one owner, given by `CHRONOS_API_KEY` (looked up
 * in the key store) or `CHRONOS_OWNER_DID`, on PostgreSQL (`DATABASE_URL`) or the embedded store.
 *
 * - PostgreSQL: opens it (applying migrations) and serves; any number of `chronos mcp` and
 *   `chronos serve` processes can share one database.
 * - Embedded store held by a running `chronos serve`: relays to it over its control socket
 *   (proxy.ts), since the store is one process's. This is the way to use MCP over stdio on the
 *   embedded store: the server also fires the alarms.
 * - Embedded store free: opens it and serves, and opens a control socket like `chronos serve`
 *   does, so `chronos keys …` and further `chronos mcp` processes work meanwhile. It warns that
 *   alarms fire only while `chronos serve` runs — which cannot start while this holds the store.
 * - Held by a process without a control socket (a library user): exits 1 naming it and what to
 *   do instead.
 *
 * It never dispatches: a `chronos mcp` started by an MCP client must not deliver wakes (perhaps
 * to a log, for want of CHRONOS_ROUTER_URL in the client's environment) in the server's stead.
 * stdout carries the protocol alone; logs go to stderr. SIGTERM/SIGINT or the end of stdin stop it.
 */
import { resolve } from 'node:path';
import { pino } from 'pino';
import { loadConfig, type Config } from '../../config.js';
import { ChronosError, isChronosError } from '../../errors.js';
import type { KeyService } from '../../core/key-service.js';
import type { Logger } from '../../logger.js';
import { parseOwner, type Owner } from '../../core/owner.js';
import { LogReceiver } from '../../receivers/log.js';
import { ChronosService } from '../../service.js';
import { isHeldByOther, readLock, type LockInfo } from '../../store/embedded.js';
import { controlSocketPath, type ControlServer } from '../../control/control-socket.js';
import { EXIT_OK, UsageError, type CliIo, type Command } from '../io.js';
import { startStoreControl } from '../../mcp/socket.js';
import { relayStdio } from '../../control/mcp-relay.js';
import { serveStdio, type StdioStreams } from '../../mcp/stdio.js';

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
  if (args.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(args[0])}`);
  const config = loadConfig(io.env);
  const named = namedOwner(config);
  const logger = options.logger ?? stderrLogger(config.logLevel);
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
    await serve(config, named, streams, logger, stop.signal);
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
  return EXIT_OK;
}

async function serve(
  config: Config,
  named: Owner | undefined,
  streams: StdioStreams,
  logger: Logger,
  signal: AbortSignal,
): Promise<void> {
  const dir = resolve(config.dataDir);
  if (!config.databaseUrl) {
    const holder = await readLock(dir);
    if (isHeldByOther(holder)) return relay(holder, dir, config, streams, logger, signal);
  }
  const socketPath = config.databaseUrl ? undefined : controlSocketPath(dir);
  let service: ChronosService;
  try {
    service = await ChronosService.open(config, {
      logger,
      // Never used (this process does not dispatch); given so that no router warning is logged.
      receiver: new LogReceiver(logger),
      lock: socketPath ? { controlSocket: socketPath } : undefined,
    });
  } catch (error) {
    // Taken between our look and our open: a server that just started.
    const holder = config.databaseUrl ? null : await readLock(dir);
    if (isChronosError(error, 'locked') && isHeldByOther(holder)) {
      return relay(holder, dir, config, streams, logger, signal);
    }
    throw error;
  }
  let control: ControlServer | null = null;
  try {
    const owner = await ownerOf(config, named, service.keys);
    if (socketPath) {
      control = await startStoreControl(service, socketPath, logger);
      logger.warn(
        `chronos mcp opened the embedded store ${dir} itself: alarms are kept, but they fire only while ` +
          '`chronos serve` runs, and it cannot start while this process holds the store. Start `chronos serve` ' +
          'first (chronos mcp then goes through it), or use DATABASE_URL.',
      );
    }
    logger.info(
      { owner: owner.did, store: config.databaseUrl ? 'postgresql' : dir },
      'chronos mcp: serving MCP over stdio',
    );
    await serveStdio(service, owner, streams, signal);
  } finally {
    await control?.close();
    await service.close();
  }
}

async function relay(
  holder: LockInfo,
  dir: string,
  config: Config,
  streams: StdioStreams,
  logger: Logger,
  signal: AbortSignal,
): Promise<void> {
  if (!holder.controlSocket) {
    throw new ChronosError(
      'locked',
      `the embedded store ${dir} is in use by process ${holder.pid} on ${holder.host}, which does not accept ` +
        'MCP connections (a library user, or an older chronos); stop it, or use DATABASE_URL so that both can ' +
        'share a PostgreSQL, or connect your MCP client to a running server at http://<host>:<port>/mcp',
    );
  }
  logger.info(
    { server: holder.pid, controlSocket: holder.controlSocket },
    `chronos mcp: the embedded store ${dir} is held by the Chronos server (process ${holder.pid}); relaying to it`,
  );
  const credentials: Record<string, string> = {};
  if (config.apiKey) credentials.authorization = `Bearer ${config.apiKey}`;
  if (config.ownerDid) credentials['x-chronos-owner'] = config.ownerDid;
  await relayStdio({
    socketPath: holder.controlSocket,
    holderPid: holder.pid,
    credentials,
    ...streams,
    logger,
    signal,
  });
}

/** The DID of CHRONOS_OWNER_DID, checked; refuses a configuration that names no owner. */
function namedOwner(config: Config): Owner | undefined {
  if (config.apiKey === undefined && config.ownerDid === undefined) {
    throw new ChronosError(
      'invalid_input',
      'CHRONOS_API_KEY or CHRONOS_OWNER_DID: expected the owner this MCP server acts for, got neither; set ' +
        'CHRONOS_API_KEY to a key from `chronos keys create --owner <did>`, or CHRONOS_OWNER_DID to the owner DID',
    );
  }
  return config.ownerDid === undefined ? undefined : parseOwner(config.ownerDid, 'CHRONOS_OWNER_DID');
}

async function ownerOf(config: Config, named: Owner | undefined, keys: KeyService): Promise<Owner> {
  if (config.apiKey === undefined) return named!;
  const key = await keys.authenticate(config.apiKey);
  if (!key) {
    throw new ChronosError(
      'unauthorized',
      'CHRONOS_API_KEY: the API key is unknown or revoked; create one with `chronos keys create --owner <did>`',
    );
  }
  if (named && named.did !== key.owner.did) {
    throw new ChronosError(
      'forbidden',
      'CHRONOS_OWNER_DID names another owner than the one CHRONOS_API_KEY belongs to; set only one of them',
    );
  }
  return key.owner;
}

/** stdout is the MCP channel: one stray line there breaks the protocol, so logs go to stderr. */
function stderrLogger(level: string): Logger {
  return pino(
    { level, base: { service: 'chronos', command: 'mcp' } },
    pino.destination({ fd: 2, sync: true }),
  );
}

export const mcpCommand: Command = {
  name: 'mcp',
  summary: 'MCP server over stdio for one owner (CHRONOS_API_KEY or CHRONOS_OWNER_DID)',
  usage: MCP_USAGE,
  run: (args, io) => runMcpCommand(args, io),
};
