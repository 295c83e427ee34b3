/**
 * The running server's local door, so `chronos keys …` and `chronos migrate` work while a server
 * holds the embedded store (which one process may open at a time).
 *
 * The server listens on a unix socket — `<data dir>/control.sock`, or a path under the system's
 * temporary directory when that one is too long for a socket — and records its path in the
 * store's lock file (`controlSocket`). The socket is made readable and writable by its owner
 * only: whoever can use it could open the store's files anyway.
 *
 * The protocol is small JSON over HTTP/1.1, one route per operation of `StoreOps`
 * (store-ops.ts): `GET /status`, `GET /keys?owner=`, `POST /keys` `{owner, label}`,
 * `POST /keys/revoke` `{id}`, `POST /migrate`, `GET /alarms?owner=&status=&limit=&cursor=`
 * (every owner's without `owner`), `GET /alarm?owner=&id=`,
 * `POST /alarm/<pause|resume|cancel|fire|retry>` `{owner, id}`,
 * `GET /wakes?owner=&status=&alarm_id=&limit=&cursor=` (every owner's without `owner`),
 * `GET /wake?owner=&id=`, `GET /wake/attempts?owner=&id=`,
 * `POST /schedules/apply?dry_run=` (the body: a schedules file's text, up to 8 MiB),
 * `GET /schedules/export?owner=`. Alarms cross as the wire's JSON text, so payloads keep every
 * digit (I4). Errors answer `{code, message}`. Given an
 * MCP handler, it also serves `/mcp`, through which `chronos mcp` reaches the store
 * (src/mcp/socket.ts).
 */
import { createHash } from 'node:crypto';
import { chmod, rm } from 'node:fs/promises';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { systemClock } from 'chronos-timers/internal';
import { ChronosError, isChronosError, type ErrorCode } from 'chronos-timers/internal';
import type { Logger } from 'chronos-timers/internal';
import { MAX_SCHEDULES_FILE_BYTES } from 'chronos-timers/internal';
import { ALARM_ACTIONS, type AlarmAction, type KeyView, type StoreOps } from './store-ops.js';

/** A request body sent as it is (a schedules file's text), not as JSON. */
class RawBody {
  constructor(readonly text: string) {}
}

// sun_path is 108 bytes on Linux, 104 on macOS.
const MAX_SOCKET_PATH = 100;

export function controlSocketPath(dataDir: string): string {
  const path = join(resolve(dataDir), 'control.sock');
  if (Buffer.byteLength(path) <= MAX_SOCKET_PATH) return path;
  const digest = createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 16);
  return join(tmpdir(), `chronos-${digest}.sock`);
}

export interface ControlServer {
  readonly path: string;
  close(): Promise<void>;
}

/** Serves `store` (and `mcp` at `/mcp`) on the unix socket at `path` (replacing a stale socket file). */
export async function startControlServer(
  store: StoreOps,
  path: string,
  logger: Logger,
  mcp?: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
): Promise<ControlServer> {
  await rm(path, { force: true });
  const server: Server = createServer((req, res) => {
    if (mcp && req.url?.split('?')[0] === '/mcp') {
      mcp(req, res).catch((error: unknown) => {
        logger.error({ err: error }, 'control socket: MCP request failed');
        if (!res.headersSent) res.writeHead(500).end();
      });
      return;
    }
    handle(store, req).then(
      ({ status, body }) => {
        const text = typeof body === 'string' ? body : JSON.stringify(body);
        res.writeHead(status, { 'content-type': 'application/json' }).end(text);
      },
      (error: unknown) => {
        const code: ErrorCode | 'internal' = isChronosError(error) ? error.code : 'internal';
        if (!isChronosError(error)) logger.error({ err: error }, 'control socket: request failed');
        const message = isChronosError(error) ? error.message : 'unexpected error; see the server log';
        res
          .writeHead(code === 'internal' ? 500 : 400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ code, message }));
      },
    );
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen({ path, readableAll: false, writableAll: false }, () => {
      server.off('error', fail);
      ok();
    });
  });
  await chmod(path, 0o600);
  return {
    path,
    async close() {
      await new Promise<void>((ok) => server.close(() => ok()));
      server.closeAllConnections();
      await rm(path, { force: true });
    },
  };
}

async function handle(store: StoreOps, req: IncomingMessage): Promise<{ status: number; body: unknown }> {
  const url = new URL(req.url ?? '/', 'http://control');
  const route = `${req.method} ${url.pathname}`;
  const query = (name: string) => url.searchParams.get(name) ?? undefined;
  if (route === 'POST /schedules/apply') {
    const text = await readText(req, MAX_SCHEDULES_FILE_BYTES);
    return { status: 200, body: await store.schedules.apply(text, { dryRun: query('dry_run') === '1' }) };
  }
  if (route === 'GET /schedules/export')
    return { status: 200, body: await store.schedules.export(query('owner')) };
  const body = req.method === 'POST' ? await readJson(req) : {};
  const action = /^POST \/alarm\/([a-z]+)$/.exec(route)?.[1];
  if (action && (ALARM_ACTIONS as readonly string[]).includes(action)) {
    return {
      status: 200,
      body: await store.alarms.act(String(body.owner), String(body.id), action as AlarmAction),
    };
  }
  switch (route) {
    case 'GET /alarms':
      return {
        status: 200,
        body: await store.alarms.list(query('owner'), {
          status: query('status'),
          limit: query('limit'),
          cursor: query('cursor'),
        }),
      };
    case 'GET /wakes':
      return {
        status: 200,
        body: await store.wakes.list(query('owner'), {
          status: query('status'),
          alarm_id: query('alarm_id'),
          limit: query('limit'),
          cursor: query('cursor'),
        }),
      };
    case 'GET /wake':
      return { status: 200, body: await store.wakes.get(String(query('owner')), String(query('id'))) };
    case 'GET /wake/attempts':
      return { status: 200, body: await store.wakes.attempts(String(query('owner')), String(query('id'))) };
    case 'GET /alarm':
      return { status: 200, body: await store.alarms.get(String(query('owner')), String(query('id'))) };
    case 'GET /status':
      return { status: 200, body: { pid: process.pid } };
    case 'GET /keys':
      return { status: 200, body: { keys: await store.keys.list(query('owner')) } };
    case 'POST /keys':
      return {
        status: 201,
        body: await store.keys.create(body.owner as string, (body.label as string) ?? ''),
      };
    case 'POST /keys/revoke':
      return { status: 200, body: await store.keys.revoke(body.id as string) };
    case 'POST /migrate':
      return { status: 200, body: { applied: await store.migrate() } };
    default:
      throw new ChronosError('not_found', `no control route ${route}`);
  }
}

async function readText(req: IncomingMessage, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw new ChronosError('too_large', `control request over ${maxBytes / 1024} KiB`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const text = await readText(req, 64 * 1024);
  const value: unknown = text === '' ? {} : JSON.parse(text);
  if (typeof value !== 'object' || value === null)
    throw new ChronosError('invalid_input', 'expected an object');
  return value as Record<string, unknown>;
}

/**
 * The StoreOps of the server listening on `path`. A server still starting (lock taken, socket
 * not yet listening) is waited for up to `waitMs`.
 */
export function remoteStoreOps(path: string, holderPid: number, waitMs = 15_000): StoreOps {
  const call = async <T>(method: string, route: string, body?: unknown, raw = false): Promise<T> => {
    const deadline = systemClock.now().getTime() + waitMs;
    for (;;) {
      try {
        return await requestOnce<T>(path, method, route, body, raw);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        const notYet = code === 'ENOENT' || code === 'ECONNREFUSED';
        if (!notYet) throw error;
        if (systemClock.now().getTime() >= deadline) {
          throw new ChronosError(
            'unavailable',
            `the embedded store is held by process ${holderPid}, which does not answer on its control socket ${path}; ` +
              'wait until it has started, or stop it and try again',
          );
        }
        await systemClock.sleep(100);
      }
    }
  };
  const q = (params: Record<string, unknown>) =>
    new URLSearchParams(
      Object.entries(params).flatMap(([k, v]): [string, string][] =>
        v === undefined ? [] : [[k, String(v)]],
      ),
    ).toString();
  return {
    keys: {
      create: (owner, label) => call('POST', '/keys', { owner, label }),
      list: async (owner) => (await call<{ keys: KeyView[] }>('GET', `/keys?${q({ owner })}`)).keys,
      revoke: (id) => call('POST', '/keys/revoke', { id }),
    },
    alarms: {
      list: (owner, query) => call('GET', `/alarms?${q({ owner, ...query })}`, undefined, true),
      get: (owner, id) => call('GET', `/alarm?${q({ owner, id })}`, undefined, true),
      act: (owner, id, action) => call('POST', `/alarm/${action}`, { owner, id }, true),
    },
    wakes: {
      list: (owner, query) => call('GET', `/wakes?${q({ owner, ...query })}`, undefined, true),
      get: (owner, id) => call('GET', `/wake?${q({ owner, id })}`, undefined, true),
      attempts: (owner, id) => call('GET', `/wake/attempts?${q({ owner, id })}`, undefined, true),
    },
    schedules: {
      apply: (text, options) =>
        call(
          'POST',
          `/schedules/apply?${q({ dry_run: options.dryRun ? '1' : undefined })}`,
          new RawBody(text),
        ),
      export: (owner) => call('GET', `/schedules/export?${q({ owner })}`),
    },
    migrate: async () => (await call<{ applied: string[] }>('POST', '/migrate')).applied,
  };
}

function requestOnce<T>(
  socketPath: string,
  method: string,
  path: string,
  body: unknown,
  raw: boolean,
): Promise<T> {
  return new Promise<T>((ok, fail) => {
    const req = httpRequest(
      { socketPath, method, path, headers: { 'content-type': 'application/json' } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', fail);
        res.on('end', () => {
          try {
            const text = Buffer.concat(chunks).toString('utf8');
            const value = JSON.parse(text) as Record<string, unknown>;
            if ((res.statusCode ?? 500) >= 400) {
              const code = (typeof value.code === 'string' ? value.code : 'unavailable') as ErrorCode;
              fail(new ChronosError(code, String(value.message ?? 'the server refused the request')));
            } else {
              // Alarms pass as their JSON text, numbers and all (I4).
              ok((raw ? text : value) as T);
            }
          } catch (error) {
            fail(error);
          }
        });
      },
    );
    req.on('error', fail);
    // A server that holds the store but never answers must not hang the command.
    req.setTimeout(30_000, () =>
      req.destroy(new ChronosError('unavailable', `the server did not answer on ${socketPath} within 30 s`)),
    );
    req.end(body === undefined ? undefined : body instanceof RawBody ? body.text : JSON.stringify(body));
  });
}
