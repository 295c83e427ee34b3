/**
 * The process `chronos serve` runs (what `npm start` starts): the service, and its doors on the
 * network — the HTTP API at `/v1`, MCP over Streamable HTTP at `/mcp`, and, on the embedded
 * store, the control socket through which the CLI and `chronos mcp` reach the store it holds.
 * This is where the doors meet; none of them imports another.
 *
 * Start-up order: the port is checked first (a port in use is reported before any store is
 * opened or created), then the store is opened and migrated, the control socket opened, the API
 * listens, and the loops start. SIGTERM/SIGINT handling is the `serve` command's.
 */
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import type { FastifyReply } from 'fastify';
import type { Config } from 'chronos-timers/internal';
import { controlSocketPath, startControlServer, type ControlServer } from './control/control-socket.js';
import { localStoreOps } from './control/store-ops.js';
import { ChronosError } from 'chronos-timers/internal';
import { buildApp, type AppOptions, type ChronosApp } from './http/app.js';
import { callerOf } from './http/context.js';
import { bodyOf } from './http/json-body.js';
import { createLogger, type Logger } from 'chronos-timers/internal';
import { controlMcpHandler } from './mcp/socket.js';
import { answerMcpPost, jsonRpcError, MCP_PATH, STATELESS_METHODS } from './mcp/streamable.js';
import { ChronosService } from './service.js';
import { traceExportWanted, traceparentOf } from 'chronos-timers/internal';

/**
 * The API with MCP beside it: `/mcp` authenticated as `/v1` is (`Authorization: Bearer`, or the
 * operator token with `X-Chronos-Owner`), refused before any MCP handling. Stateless: every POST
 * is answered by a fresh MCP server and transport; with no session there is no stream to GET and
 * nothing to DELETE, so both answer 405, as in the SDK's stateless example.
 */
export async function createApp(service: ChronosService, options: AppOptions = {}): Promise<ChronosApp> {
  const app = await buildApp(service, options);
  app.route({
    method: ['POST', 'GET', 'DELETE'],
    url: MCP_PATH,
    onRequest: async (request) => {
      request.caller = await app.authenticator.authenticate(request.headers);
    },
    handler: async (request, reply) => {
      if (request.method !== 'POST') {
        return reply
          .code(405)
          .header('allow', 'POST')
          .type('application/json')
          .send(jsonRpcError(STATELESS_METHODS));
      }
      const body = bodyOf(request);
      takeOver(reply);
      await answerMcpPost(
        service,
        callerOf(request).owner,
        {
          req: request.raw,
          res: reply.raw,
          text: body.text,
          value: body.value,
          trace: traceparentOf(request.span ?? undefined),
        },
        request.log,
      );
    },
  });
  return app;
}

/** The MCP transport writes the answer itself: Fastify must not, but its headers (x-request-id) go too. */
function takeOver(reply: FastifyReply): void {
  reply.hijack();
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined) reply.raw.setHeader(name, value);
  }
}

/**
 * The control socket of a process holding the embedded store: the key commands, and MCP for
 * `chronos mcp` processes started meanwhile. `chronos serve` and `chronos mcp` both open it.
 */
export function startStoreControl(
  service: ChronosService,
  socketPath: string,
  logger: Logger,
): Promise<ControlServer> {
  return startControlServer(
    localStoreOps(service),
    socketPath,
    logger.child({ component: 'control' }),
    controlMcpHandler(service),
  );
}

export interface RunningServer {
  /** Where the API listens, e.g. `http://127.0.0.1:8080`. */
  url: string;
  port: number;
  app: ChronosApp;
  service: ChronosService;
  control: ControlServer | null;
  /** The graceful shutdown: readiness off, requests and deliveries finish, the store closes. Safe to call twice. */
  shutdown(): Promise<void>;
}

/** Opens the store, starts the API, the control socket and the loops. */
export async function startServer(
  config: Config,
  options: { logger?: Logger; env?: Record<string, string | undefined> } = {},
): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(config.logLevel, config.logFormat);
  await assertPortFree(config.host, config.port);
  const traces = await startTracing(options.env ?? {}, logger);
  const socketPath = config.databaseUrl ? undefined : controlSocketPath(config.dataDir);
  const service = await ChronosService.open(config, {
    logger,
    lock: socketPath ? { controlSocket: socketPath } : undefined,
  });
  let control: ControlServer | null = null;
  let app: ChronosApp | null = null;
  try {
    if (socketPath) control = await startStoreControl(service, socketPath, logger);
    app = await createApp(service);
    try {
      await app.listen({ port: config.port, host: config.host });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') throw portInUse(config);
      throw error;
    }
    await service.start();
  } catch (error) {
    await app?.close().catch(() => {});
    await control?.close().catch(() => {});
    await service.close().catch(() => {});
    await traces?.shutdown().catch(() => {});
    throw error;
  }

  const port = (app.server.address() as AddressInfo).port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  logger.info(
    {
      url,
      store: config.databaseUrl ? 'postgresql' : 'embedded',
      schema: service.schema,
      dataDir: config.databaseUrl ? undefined : config.dataDir,
      controlSocket: control?.path,
    },
    `chronos is serving on ${url}`,
  );
  if ((await service.keys.count().catch(() => 1)) === 0) {
    logger.info(
      'no API keys yet: create one with `npx chronos keys create --owner did:matrix:<user uuid>:<name>` ' +
        '(it works while this server runs) and send it as "Authorization: Bearer <key>"',
    );
  }

  let closing: Promise<void> | null = null;
  return {
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
        await traces
          ?.shutdown()
          .catch((error: unknown) => logger.warn({ err: error }, 'trace export: flush failed'));
        logger.info('stopped');
      })();
      return closing;
    },
  };
}

/** Exports traces over OTLP when the OTEL_* variables ask for it (tracing-export.ts); null otherwise. */
export async function startTracing(
  env: Record<string, string | undefined>,
  logger: Logger,
): Promise<{ shutdown(): Promise<void> } | null> {
  if (!traceExportWanted(env)) return null;
  // Loaded only now: a server that exports no traces never loads the SDK.
  const { startTraceExport } = await import('./tracing-export.js');
  const exporting = startTraceExport(env);
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  // The origin only: a URL may carry credentials.
  logger.info(
    { endpoint: endpoint ? originOf(endpoint) : 'the exporter default' },
    'exporting traces over OTLP',
  );
  return exporting;
}

function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'an unreadable URL';
  }
}

function portInUse(config: Config): ChronosError {
  return new ChronosError(
    'unavailable',
    `port ${config.port} on ${config.host} is already in use; stop what listens there or set PORT`,
  );
}

/** Refuses a port something else listens on, before a store is opened (or an embedded one created). */
async function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = createNetServer();
    probe.once('error', (error: NodeJS.ErrnoException) =>
      error.code === 'EADDRINUSE' ? reject(portInUse({ host, port } as Config)) : resolve(),
    );
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}
