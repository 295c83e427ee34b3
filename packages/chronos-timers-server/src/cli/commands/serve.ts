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
import { loadConfig } from 'chronos-timers/internal';
import { createLogger } from 'chronos-timers/internal';
import { startServer } from '../../server.js';
import { readArgs } from '../args.js';
import { EXIT_FAILURE, EXIT_OK, type Command } from '../io.js';

export const serveCommand: Command = {
  name: 'serve',
  summary: 'run the HTTP API and the dispatcher (what `npm start` runs)',
  usage: 'usage: chronos serve   (configured by environment variables: see README.md)',
  help: `Runs the HTTP API (/v1), MCP over HTTP (/mcp), the dispatcher and the tracker in one process, on
PostgreSQL when DATABASE_URL is set, on the embedded store in CHRONOS_DATA_DIR (./.chronos) otherwise.
Main settings: PORT (8080), CHRONOS_ROUTER_URL, CHRONOS_WEBHOOK_SECRET, CHRONOS_FALLBACK_URL,
CHRONOS_OPERATOR_TOKEN, CHRONOS_SCHEMA. Every variable, its default and meaning: README.md.
SIGTERM or SIGINT stops it gracefully; a second signal exits at once.`,
  async run(args, io) {
    readArgs(args, {});
    const config = loadConfig(io.env);
    const logger = createLogger(config.logLevel, config.logFormat);
    // Listening for the signal before starting: once /readyz answers, a SIGTERM must already
    // mean "stop gracefully" (one that lands while starting stops the server as soon as it runs).
    const stopping = new Promise<NodeJS.Signals>((resolve) => {
      process.once('SIGTERM', resolve);
      process.once('SIGINT', resolve);
    });
    const server = await startServer(config, { logger, env: io.env });
    const signal = await stopping;
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
