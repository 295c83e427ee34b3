/**
 * A real HTTP receiver on 127.0.0.1 for tests (and benchmarks): it records every request with its
 * headers and raw body, and answers as told, request by request.
 *
 * Answers: a status with optional headers (`Retry-After`) and body, after an optional delay; a
 * hang (never answers; the request stays open until the client gives up or the sink closes); or
 * a close (the connection is destroyed without an answer). `down()` stops listening, so new
 * connections are refused (ECONNREFUSED), and `up()` listens again on the same port.
 *
 * Nothing here waits on a timer: `waitFor(n)` resolves on the n-th request's arrival.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';

export interface SinkRequest {
  /** 0 for the first request the sink received. */
  index: number;
  method: string;
  /** The path and query, e.g. `/wakes`. */
  path: string;
  /** Lower-cased names; a repeated header is joined with ", " as node does. */
  headers: Record<string, string>;
  rawBody: Buffer;
  /** The raw body decoded as UTF-8. */
  body: string;
  /** `Date.now()` when the body had fully arrived. */
  receivedAt: number;
  /** What the sink answered (or did). */
  answer: SinkAnswer;
  /** True once the client dropped the connection before an answer was sent (a hang cut short). */
  clientGone: boolean;
}

export type SinkAnswer =
  | { status: number; headers?: Record<string, string>; body?: string; delayMs?: number }
  | { hang: true }
  | { close: true };

/** Decides the answer to one request; may be async. */
export type Responder = (request: SinkRequest) => SinkAnswer | Promise<SinkAnswer>;

export interface SinkOptions {
  /** Port to listen on; 0 (default) picks a free one. */
  port?: number;
  /** The answer when no queued answer is left: 200 by default. */
  respond?: Responder;
  /** Keep request records (default true); a benchmark may only count. */
  record?: boolean;
  /** Serve HTTPS with this key and certificate (PEM) instead of plain HTTP. */
  tls?: { key: Buffer; cert: Buffer };
}

export const OK: SinkAnswer = { status: 200 };

export class Sink {
  /** Every request received, in arrival order (when recording). */
  readonly requests: SinkRequest[] = [];
  /** Requests received, recorded or not. */
  received = 0;
  /** TCP connections accepted (keep-alive reuses them). */
  connections = 0;
  /** The default answer; replace it to change behaviour for every later request. */
  respond: Responder;

  readonly #server: Server;
  readonly #record: boolean;
  readonly #queue: SinkAnswer[] = [];
  readonly #sockets = new Set<Socket>();
  readonly #hung = new Set<ServerResponse>();
  readonly #waiters = new Set<{ n: number; resolve: () => void }>();
  #port: number;
  #listening = false;
  readonly #scheme: 'http' | 'https';

  private constructor(options: SinkOptions) {
    this.respond = options.respond ?? (() => OK);
    this.#record = options.record ?? true;
    this.#port = options.port ?? 0;
    const handle = (req: IncomingMessage, res: ServerResponse) => void this.#handle(req, res);
    this.#scheme = options.tls ? 'https' : 'http';
    this.#server = options.tls ? createHttpsServer(options.tls, handle) : createServer(handle);
    this.#server.keepAliveTimeout = 60_000;
    this.#server.on('connection', (socket) => {
      this.connections++;
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
  }

  static async start(options: SinkOptions = {}): Promise<Sink> {
    const sink = new Sink(options);
    await sink.up();
    return sink;
  }

  /** The sink's base URL plus `path` (default `/wakes`). */
  url(path = '/wakes'): string {
    return `${this.#scheme}://127.0.0.1:${this.#port}${path}`;
  }

  get port(): number {
    return this.#port;
  }

  /** Requests left hanging right now. */
  get hanging(): number {
    return this.#hung.size;
  }

  /** Queues answers for the next requests, in order; the default `respond` takes over after. */
  answer(...answers: SinkAnswer[]): this {
    this.#queue.push(...answers);
    return this;
  }

  /** Answers every later request with `answer` (clears the queue). */
  always(answer: SinkAnswer): this {
    this.#queue.length = 0;
    this.respond = () => answer;
    return this;
  }

  /** Requests carrying `webhook-id` = `id`. */
  withId(id: string): SinkRequest[] {
    return this.requests.filter((r) => r.headers['webhook-id'] === id);
  }

  /** Each request's body parsed (lossy for big numbers: compare `body` for verbatim checks). */
  bodies<T = Record<string, unknown>>(): T[] {
    return this.requests.map((r) => JSON.parse(r.body) as T);
  }

  /** Resolves once `n` requests in all have been received. */
  waitFor(n: number): Promise<void> {
    if (this.received >= n) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.add({ n, resolve }));
  }

  /** Listens (again) on the sink's port. */
  async up(): Promise<void> {
    if (this.#listening) return;
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#port, '127.0.0.1', () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    this.#port = (this.#server.address() as AddressInfo).port;
    this.#listening = true;
  }

  /** Stops listening and drops every open connection: new requests are refused (ECONNREFUSED). */
  async down(): Promise<void> {
    if (!this.#listening) return;
    this.#listening = false;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#releaseHung();
    for (const socket of this.#sockets) socket.destroy();
    await closed;
  }

  async close(): Promise<void> {
    await this.down();
  }

  /** Clears the records, the queue and the counters; the default answer goes back to 200. */
  reset(): void {
    this.requests.length = 0;
    this.received = 0;
    this.connections = 0;
    this.#queue.length = 0;
    this.respond = () => OK;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const rawBody = Buffer.concat(chunks);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    const request: SinkRequest = {
      index: this.received,
      method: req.method ?? '',
      path: req.url ?? '',
      headers,
      rawBody,
      body: rawBody.toString('utf8'),
      receivedAt: Date.now(),
      answer: OK,
      clientGone: false,
    };
    this.received++;
    if (this.#record) this.requests.push(request);
    const answer = this.#queue.shift() ?? (await this.respond(request));
    request.answer = answer;
    for (const waiter of [...this.#waiters]) {
      if (this.received >= waiter.n) {
        this.#waiters.delete(waiter);
        waiter.resolve();
      }
    }
    res.on('close', () => {
      if (!res.writableFinished) request.clientGone = true;
      this.#hung.delete(res);
    });

    if ('close' in answer) {
      req.socket.destroy();
      return;
    }
    if ('hang' in answer) {
      this.#hung.add(res);
      return;
    }
    if (answer.delayMs) await new Promise((resolve) => setTimeout(resolve, answer.delayMs));
    if (res.destroyed) return;
    res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers });
    res.end(answer.body ?? '');
  }

  #releaseHung(): void {
    for (const res of this.#hung) res.destroy();
    this.#hung.clear();
  }
}
