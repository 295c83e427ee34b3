/**
 * The process `chronos mcp` runs: MCP over stdio for one owner (`CHRONOS_API_KEY` or
 * `CHRONOS_OWNER_DID`), on PostgreSQL (`DATABASE_URL`) or the embedded store.
 *
 * - PostgreSQL: opens it (applying migrations) and serves MCP; delivering is left to the
 *   `chronos serve` instances on that database (an MCP client's environment is rarely the
 *   server's: no router URL, no secret).
 * - Embedded store held by a running `chronos serve`: relays to it over its control socket
 *   (control/mcp-relay.ts), since the store is one process's; the server fires the alarms.
 * - Embedded store that no process holds: opens it, serves MCP, and runs the dispatcher and the
 *   tracker itself (contract §8), so what it schedules fires; it opens a control socket like
 *   `chronos serve` does, so `chronos keys …` and further `chronos mcp` processes work meanwhile.
 * - No embedded store at that path, the directory absent or empty (contract §8): a new store is
 *   made there, said on stderr and in the instructions, and served as above — the first thing an
 *   agent developer does is add `npx chronos mcp` to a client's configuration. A directory that
 *   holds other files but no store is refused, naming the path: that is a mistaken path, not a
 *   first start.
 * - Held by a process without a control socket (a library user): refused, naming it.
 *
 * It says which store it opened twice: on stderr, and in the MCP server's instructions (MCP
 * clients rarely show stderr). stdout carries the protocol alone. SIGTERM/SIGINT or the end of
 * stdin stop it.
 */
import { readdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pino } from 'pino';
import type { Config } from 'chronos-timers/internal';
import { keyStoreHint } from 'chronos-timers/internal';
import { controlSocketPath, type ControlServer } from './control/control-socket.js';
import { relayStdio } from './control/mcp-relay.js';
import { holderOf, storeExists } from './control/store-holder.js';
import type { KeyService } from 'chronos-timers/internal';
import { parseOwner, type Owner } from 'chronos-timers/internal';
import { ChronosError, isChronosError } from 'chronos-timers/internal';
import type { Logger } from 'chronos-timers/internal';
import { serveStdio, type StdioStreams } from './mcp/stdio.js';
import { MCP_PATH } from './mcp/streamable.js';
import { startStoreControl } from './server.js';
import { ChronosService } from './service.js';

export type { StdioStreams };

export interface McpStdioOptions {
  streams: StdioStreams;
  /** Defaults to a logger on stderr. */
  logger?: Logger;
  signal?: AbortSignal;
}

export async function serveMcpStdio(config: Config, options: McpStdioOptions): Promise<void> {
  const named = namedOwner(config);
  const logger = options.logger ?? stderrLogger(config.logLevel);
  const { streams, signal } = options;
  const dir = resolve(config.dataDir);
  let created = false;
  if (!config.databaseUrl) {
    const holder = await holderOf(dir);
    if (holder) return relay(holder, dir, config, streams, logger, signal);
    if (!storeExists(dir)) {
      if (!(await isEmptyOrAbsent(dir))) {
        throw new ChronosError(
          'not_found',
          `CHRONOS_DATA_DIR: there is no embedded store at ${dir}, and the directory holds other files; ` +
            'set CHRONOS_DATA_DIR to the absolute path of your store (or of an empty or absent directory ' +
            'for a new one), or DATABASE_URL',
        );
      }
      created = true;
      logger.info(
        { dataDir: dir },
        `chronos mcp: there was no embedded store at ${dir}; making a new one there`,
      );
    }
  }
  const embedded = !config.databaseUrl;
  const socketPath = embedded ? controlSocketPath(dir) : undefined;
  let service: ChronosService;
  try {
    service = await ChronosService.open(config, {
      logger,
      lock: socketPath ? { controlSocket: socketPath } : undefined,
    });
  } catch (error) {
    // Taken between our look and our open: a server that just started.
    const holder = embedded ? await holderOf(dir) : null;
    if (isChronosError(error, 'locked') && holder) return relay(holder, dir, config, streams, logger, signal);
    throw error;
  }
  let control: ControlServer | null = null;
  try {
    const owner = await ownerOf(config, named, service.keys);
    const store = embedded
      ? `the embedded store ${dir}`
      : `PostgreSQL (DATABASE_URL, schema ${service.schema})`;
    let about = created ? `Chronos made a new store, ${store}.` : `Chronos opened ${store}.`;
    if (socketPath) {
      control = await startStoreControl(service, socketPath, logger);
      // Nobody else holds this store, so nobody else would fire what is scheduled here.
      await service.start();
      about +=
        ' This process also fires the alarms while it runs' +
        (config.routerUrl ? '.' : ' (no CHRONOS_ROUTER_URL: wakes are written to its log).');
    }
    logger.info({ owner: owner.did, store }, `chronos mcp: serving MCP over stdio; ${about}`);
    await serveStdio(service, owner, streams, signal, { about });
  } finally {
    await control?.close();
    await service.close();
  }
}

async function relay(
  holder: NonNullable<Awaited<ReturnType<typeof holderOf>>>,
  dir: string,
  config: Config,
  streams: StdioStreams,
  logger: Logger,
  signal: AbortSignal | undefined,
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
    path: MCP_PATH,
    holderPid: holder.pid,
    keyHint: keyStoreHint(config, true),
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
      'CHRONOS_API_KEY: the API key is unknown or revoked; create one with `chronos keys create --owner <did>` ' +
        `(${keyStoreHint(config, true)})`,
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

/**
 * True when `dir` is absent or holds nothing but what an interrupted first open leaves (its
 * lock file, a half-copied store): a place for a new store.
 */
async function isEmptyOrAbsent(dir: string): Promise<boolean> {
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw error;
  }
  return entries.every(
    (name) => name === 'chronos.lock' || name === 'control.sock' || name.startsWith('pgdata.partial-'),
  );
}
