/**
 * The HTTP API (contract §5) as one Fastify app over a ChronosService.
 *
 * - `/v1/*` needs `Authorization: Bearer …` (checked before the body is read); everything else
 *   (`/healthz`, `/readyz`, `/metrics`, `/openapi.json`, the dashboard page at `/ui`) needs nothing.
 * - `/mcp` (MCP over Streamable HTTP) is mounted beside it by `src/server.ts`, with the same
 *   authentication (`authenticator`).
 * - Bodies are read as text (at most 128 KiB, 413 beyond) and parsed as JSON whatever their
 *   Content-Type; answers are serialised so payloads pass through verbatim.
 * - Every error answers `application/problem+json` (problem.ts).
 * - One log line per request, with its request id (from `X-Request-Id` when the caller sent a
 *   sane one, echoed back), never a header; and a latency histogram by route.
 *
 * Not here: listening, signals and shutdown order (the `serve` command owns those).
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, {
  LogController,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { LIMITS } from 'chronos-timers/internal';
import type { Logger } from 'chronos-timers/internal';
import type { ChronosService } from '../service.js';
import { Authenticator } from 'chronos-timers/internal';
import './context.js';
import { decodeBody, parseJsonBody } from './json-body.js';
import { contextOf, SpanKind, SpanStatusCode, startSpan } from 'chronos-timers/internal';
import { PROBLEM_TYPE, problemType, toProblem } from './problem.js';
import { KEY_PATTERN, KEY_PREFIX } from 'chronos-timers/internal';
import { keyStoreHint } from 'chronos-timers/internal';
import { registerAlarmRoutes } from './routes/alarms.js';
import { registerDashboardRoutes } from './routes/dashboard.js';
import { registerOperationRoutes } from './routes/operations.js';
import { registerStatsRoutes } from './routes/stats.js';
import { registerWakeRoutes } from './routes/wakes.js';

export type AppService = Pick<
  ChronosService,
  'alarms' | 'wakes' | 'fireStats' | 'keys' | 'metrics' | 'readiness' | 'logger' | 'config' | 'dbClock'
>;

export interface AppOptions {
  /** Defaults to the service's logger. */
  logger?: Logger;
  /** Defaults to `config.operatorToken`. */
  operatorToken?: string;
}

export interface ChronosApp extends FastifyInstance {
  /** Makes `/readyz` answer 503 (before closing, so load balancers drain this instance). */
  markClosing(): void;
  /** The app's own authentication, for routes added beside `/v1` (e.g. MCP at `/mcp`). */
  authenticator: Authenticator;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
// A key pasted into a URL by mistake must not reach the logs either.
const KEY_IN_TEXT = new RegExp(KEY_PATTERN, 'g');
const QUIET_ROUTES = new Set(['/healthz', '/readyz', '/metrics', '/ui/dashboard.css', '/ui/dashboard.js']);

/** Replaces anything key-shaped, and the operator token, in text bound for a log line. */
function scrubber(operatorToken: string | undefined): (text: string) => string {
  return (text) => {
    const scrubbed = text.replace(KEY_IN_TEXT, `${KEY_PREFIX}[redacted]`);
    return operatorToken ? scrubbed.replaceAll(operatorToken, '[redacted]') : scrubbed;
  };
}

function requestIdOf(req: IncomingMessage, scrub: (text: string) => string): string {
  const given = req.headers['x-request-id'];
  // A credential sent here by mistake would be echoed and logged with every line of the request.
  return typeof given === 'string' && REQUEST_ID.test(given) && scrub(given) === given ? given : randomUUID();
}

export async function buildApp(service: AppService, options: AppOptions = {}): Promise<ChronosApp> {
  const logger = (options.logger ?? service.logger).child({ component: 'http' });
  const operatorToken = options.operatorToken ?? service.config.operatorToken;
  const scrub = scrubber(operatorToken);
  const app = Fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: (req) => requestIdOf(req, scrub),
    bodyLimit: LIMITS.bodyBytes,
    // Conversation ids run to 200 characters (percent-encoded, more).
    routerOptions: { maxParamLength: 2_000 },
    return503OnClosing: true,
    ...timeoutOptions(service.config),
    clientErrorHandler: answerClientError,
    frameworkErrors: (error, request, reply) => {
      sendProblem(error, request, reply);
    },
  }) as unknown as ChronosApp;
  const state = { closing: false };
  app.decorate('markClosing', () => {
    state.closing = true;
  });
  app.decorateRequest('caller', null);
  app.decorateRequest('span', null);

  app.removeAllContentTypeParsers();
  // Read as bytes and decoded strictly: a body that is not UTF-8 is refused, never altered (I4).
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(decodeBody(body as Buffer)));
    } catch (error) {
      done(error as Error, undefined);
    }
  });

  app.addHook('onRequest', async (request, reply) => {
    await admitOnSocket(request.raw, reply.raw);
    reply.header('x-request-id', request.id);
    const traceparent = request.headers.traceparent;
    request.span = startSpan(
      `${request.method} ${request.routeOptions.url ?? 'unmatched'}`,
      { 'http.request.method': request.method, 'http.route': request.routeOptions.url ?? '' },
      contextOf(typeof traceparent === 'string' ? traceparent : undefined),
      SpanKind.SERVER,
    );
  });

  app.addHook('onResponse', async (request, reply) => {
    request.span?.setAttribute('http.response.status_code', reply.statusCode);
    if (reply.statusCode >= 500) request.span?.setStatus({ code: SpanStatusCode.ERROR });
    request.span?.end();
    const route = request.routeOptions.url ?? 'unmatched';
    const seconds = reply.elapsedTime / 1000;
    service.metrics.httpSeconds.observe(
      { method: request.method, route, status_code: String(reply.statusCode) },
      seconds,
    );
    const line = {
      method: request.method,
      url: scrub(request.url),
      route,
      statusCode: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 10) / 10,
      owner: request.caller?.owner?.did ?? (request.caller ? 'every owner' : undefined),
      via: request.caller?.via,
    };
    if (QUIET_ROUTES.has(route)) request.log.debug(line, 'request completed');
    else request.log.info(line, 'request completed');
  });

  app.setErrorHandler((error, request, reply) => sendProblem(error, request, reply));
  app.setNotFoundHandler((request, reply) => {
    const error = Object.assign(
      new Error(
        `no route ${request.method} ${request.url.split('?')[0]}; the API is described at /openapi.json`,
      ),
      { statusCode: 404 },
    );
    return sendProblem(error, request, reply);
  });

  registerOperationRoutes(app, service, state);
  registerDashboardRoutes(app);

  const auth = new Authenticator(service.keys, operatorToken, keyStoreHint(service.config, false));
  app.decorate('authenticator', auth);
  await app.register(
    async (v1) => {
      v1.addHook('onRequest', async (request) => {
        const everyOwner = request.routeOptions.config.everyOwner === true;
        request.caller = await auth.authenticate(request.headers, { everyOwner });
      });
      registerAlarmRoutes(v1, service.alarms);
      registerWakeRoutes(v1, service.wakes, service.alarms);
      registerStatsRoutes(v1, service.fireStats);
    },
    { prefix: '/v1' },
  );

  return app;
}

function sendProblem(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const { problem, headers, internal } = toProblem(error, request.id);
  if (internal) {
    request.log.error({ err: error }, 'request failed with an unexpected error');
  } else if (problem.status === 503) {
    request.log.warn(
      { err: { message: (error as Error)?.message } },
      'request refused: database unavailable',
    );
  }
  // A refused caller's body is not read: the connection closes once the answer is out.
  if (problem.status === 401) reply.header('connection', 'close');
  return reply.code(problem.status).headers(headers).type(PROBLEM_TYPE).send(JSON.stringify(problem));
}

/**
 * The server's timeouts (Fastify's options, Node's `http` server options): a request must arrive
 * whole within `CHRONOS_REQUEST_TIMEOUT` (its headers within 10 s, or sooner when that is
 * shorter), a connection that moves no byte for `CHRONOS_IDLE_TIMEOUT` is closed, and an idle
 * keep-alive connection waits `CHRONOS_KEEP_ALIVE_TIMEOUT` for its next request. Node checks the
 * first two every `connectionsCheckingInterval`: a quarter of the request timeout, at most 1 s.
 */
function timeoutOptions(config: AppService['config']) {
  const requestTimeout = config.requestTimeoutMs;
  return {
    requestTimeout,
    connectionTimeout: config.idleTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    http: {
      headersTimeout: Math.min(10_000, requestTimeout),
      connectionsCheckingInterval: Math.max(25, Math.min(1_000, Math.floor(requestTimeout / 4))),
    },
  };
}

/** Handlers running at once for the requests pipelined on one connection; the next wait their turn. */
export const PIPELINE_DEPTH = 8;

interface SocketGate {
  running: number;
  waiting: (() => void)[];
}
const gates = new WeakMap<Socket, SocketGate>();

/**
 * Waits until this request's connection has fewer than PIPELINE_DEPTH requests being handled;
 * in the order they came. While some wait the socket is paused (no more is read from it), so a
 * burst of pipelined requests costs at most PIPELINE_DEPTH handlers and database connections.
 */
async function admitOnSocket(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const socket = req.socket;
  let gate = gates.get(socket);
  if (!gate) {
    gate = { running: 0, waiting: [] };
    gates.set(socket, gate);
  }
  const current = gate;
  res.once('close', () => {
    current.running -= 1;
    const next = current.waiting.shift();
    if (next) next();
    if (current.waiting.length === 0 && typeof socket.isPaused === 'function' && socket.isPaused()) {
      socket.resume();
    }
  });
  if (current.running < PIPELINE_DEPTH) {
    current.running += 1;
    return;
  }
  await new Promise<void>((resolve) => {
    current.waiting.push(() => {
      current.running += 1;
      resolve();
    });
    // (`inject`'s stand-in socket cannot pause.)
    if (typeof socket.pause === 'function') socket.pause();
  });
}

/** 408, 431 and malformed requests, which Node refuses before any route: problem+json too, then closed. */
function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, path, detail] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'body', 'the request did not arrive whole in time (CHRONOS_REQUEST_TIMEOUT); send it at once']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'headers', 'the request headers are too large: expected at most 16 KiB in all']
        : [400, '', 'the request is not well-formed HTTP/1.1'];
  const title = STATUS_CODES[status] ?? 'Bad Request';
  const body = JSON.stringify({
    type: problemType('invalid_input'),
    title,
    status,
    detail,
    code: 'invalid_input',
    errors: [{ path, message: detail }],
  });
  // Not in the middle of an answer already under way (Node itself writes only then).
  const pending = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (socket.writable && !pending?.headersSent) {
    socket.end(
      `HTTP/1.1 ${status} ${title}\r\nContent-Type: ${PROBLEM_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      () => socket.destroy(),
    );
  } else {
    socket.destroy();
  }
}
