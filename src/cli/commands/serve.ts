/**
 * `chronos serve` (what `npm start` runs): the HTTP API and the dispatcher in one process, on
 * PostgreSQL when DATABASE_URL is set and on the embedded store otherwise.
 *
 * On the embedded store the server also listens on a control socket (its path recorded in the
 * store's lock file) so `chronos keys …` works while it runs. On an empty key table it logs how
 * to create a first key — never a key itself: no key or token is ever written to a log.
 *
 * SIGTERM or SIGINT: `/readyz` turns 503, the listener closes and requests under way finish,
 * the dispatcher stops claiming and lets deliveries finish within CHRONOS_SHUTDOWN_GRACE (then
 * gives the rest back), and the store is closed (releasing its lock). A second signal exits at
 * once.
 */
import type { AddressInfo } from 'node:net';
import { loadConfig, type Config } from '../../config.js';
import { ChronosError } from '../../errors.js';
import { buildApp, type ChronosApp } from '../../http/app.js';
import { createLogger, type Logger } from '../../logger.js';
import { startStoreControl } from '../../mcp/socket.js';
import { ChronosService } from '../../service.js';
import { controlSocketPath, type ControlServer } from '../../control/control-socket.js';
import { EXIT_FAILURE, EXIT_OK, UsageError, type Command } from '../io.js';

export interface RunningServer {
  /** Where the API listens, e.g. `http://127.0.0.1:8080`. */
  url: string;
  port: number;
  app: ChronosApp;
  service: ChronosService;
  control: ControlServer | null;
  /** The graceful shutdown described above; safe to call twice. */
  shutdown(): Promise<void>;
}

/** Opens the store, starts the API, the control socket and the loops. */
export async function startServer(config: Config, options: { logger?: Logger } = {}): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const socketPath = config.databaseUrl ? undefined : controlSocketPath(config.dataDir);
  const service = await ChronosService.open(config, {
    logger,
    lock: socketPath ? { controlSocket: socketPath } : undefined,
  });
  let control: ControlServer | null = null;
  let app: ChronosApp | null = null;
  try {
    if (socketPath) {
      control = await startStoreControl(service, socketPath, logger);
    }
    app = await buildApp(service);
    try {
      await app.listen({ port: config.port, host: config.host });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
        throw new ChronosError(
          'unavailable',
          `port ${config.port} on ${config.host} is already in use; stop what listens there or set PORT`,
        );
      }
      throw error;
    }
    await service.start();
  } catch (error) {
    await app?.close().catch(() => {});
    await control?.close().catch(() => {});
    await service.close().catch(() => {});
    throw error;
  }

  const port = (app.server.address() as AddressInfo).port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  logger.info(
    {
      url,
      store: config.databaseUrl ? 'postgresql' : 'embedded',
      dataDir: config.databaseUrl ? undefined : config.dataDir,
      controlSocket: control?.path,
    },
    `chronos is serving on ${url}`,
  );
  if ((await service.keys.count().catch(() => 1)) === 0) {
    logger.info(
      'no API keys yet: create one with `node bin/chronos.js keys create --owner did:matrix:<user uuid>:<name>` ' +
        '(it works while this server runs) and send it as "Authorization: Bearer <key>"',
    );
  }

  let closing: Promise<void> | null = null;
  const server: RunningServer = {
    url,
    port,
    app,
    service,
    control,
    shutdown() {
      closing ??= (async () => {
        logger.info('shutting down: finishing requests and deliveries under way');
        app.markClosing();
        await Promise.all([app.close(), service.stop()]);
        await control?.close();
        await service.close();
        logger.info('stopped');
      })();
      return closing;
    },
  };
  return server;
}

export const serveCommand: Command = {
  name: 'serve',
  summary: 'run the HTTP API and the dispatcher (what `npm start` runs)',
  usage: 'usage: chronos serve   (configured by environment variables: see README.md)',
  async run(args, io) {
    if (args.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(args[0])}`);
    const config = loadConfig(io.env);
    const logger = createLogger(config.logLevel);
    const server = await startServer(config, { logger });
    const signal = await new Promise<NodeJS.Signals>((resolve) => {
      process.once('SIGTERM', resolve);
      process.once('SIGINT', resolve);
    });
    logger.info({ signal }, `received ${signal}`);
    const again = (second: NodeJS.Signals) => {
      logger.warn({ signal: second }, 'second signal: exiting now');
      process.exit(EXIT_FAILURE);
    };
    process.once('SIGTERM', again);
    process.once('SIGINT', again);
    // A shutdown that hangs (a database that never answers) must not keep the process forever.
    const deadline = setTimeout(() => {
      logger.error('shutdown did not finish in time: exiting');
      process.exit(EXIT_FAILURE);
    }, config.shutdownGraceMs + 15_000);
    deadline.unref();
    try {
      await server.shutdown();
    } finally {
      clearTimeout(deadline);
      process.off('SIGTERM', again);
      process.off('SIGINT', again);
    }
    return EXIT_OK;
  },
};
