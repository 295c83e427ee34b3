/**
 * One signed JSON POST, classified as a Delivery. Shared by every outgoing webhook: wakes and
 * nudges to the router, escalations and receipts to the fallback URL.
 *
 * What it guarantees:
 * - it settles and never throws: every failure is a `Delivery` with `ok: false`;
 * - it gives up after `timeoutMs` or when `signal` aborts, whichever comes first, and the
 *   request is cancelled (the connection is dropped), so a hung receiver holds nothing;
 * - 2xx is success; 408, 429, 5xx, timeouts and connection errors are retryable (with the
 *   receiver's `Retry-After` in `retryAfterMs` when it sent one); anything else (other 4xx, and
 *   3xx: redirects are not followed) is a failure that trying again cannot mend;
 * - `error` says what happened in one line (`router answered 503 Service Unavailable`,
 *   `router timed out after 10000 ms`, `router unreachable: ECONNREFUSED`) and never carries a
 *   secret, a header or the URL (which may hold a token).
 *
 * What it does not do: retry by itself (the caller records the failure and decides), or follow
 * redirects. Connections are kept alive in the undici `Dispatcher` passed in (an `Agent` from
 * `createDeliveryAgent`), or undici's global one.
 */
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { Agent, buildConnector, getGlobalDispatcher, type Dispatcher } from 'undici';
import type { Delivery } from 'chronos-timers/internal';
import { webhookHeaders } from './signing.js';

export interface SignedPost {
  url: string;
  /** The `webhook-id`: what the receiver deduplicates on (a wake id, `<wake id>:nudge`, …). */
  msgId: string;
  /** The JSON text sent, exactly as signed. */
  body: string;
  /** `whsec_…` secrets: one, or two during a rotation; none sends the request unsigned. */
  secrets: readonly string[];
  /** The whole request (connect, send, answer) is given up after this long. */
  timeoutMs: number;
  /** Aborts the request early (the dispatcher's lease deadline, shutdown). */
  signal?: AbortSignal;
  /** Names the other side in error texts: "router" (default), "fallback". */
  target?: string;
  /** Keep-alive connection pool; undici's global dispatcher when absent. */
  dispatcher?: Dispatcher;
  /** Unix milliseconds now: the `webhook-timestamp` and the base of a `Retry-After` date. */
  now?: () => number;
  /** Extra request headers (never logged, never put in an error). */
  headers?: Record<string, string>;
}

/**
 * How an attempt ended, beside the Delivery: `answered` (an HTTP answer came, 2xx or not),
 * `timeout`, `unreachable` (no connection could be made: refused, no such host, connect
 * timeout) or `connection` (the connection broke before an answer).
 */
export type PostKind = 'answered' | 'timeout' | 'unreachable' | 'connection';

export type SignedDelivery = Delivery & { kind: PostKind };

/**
 * What a delivery pool looks like: keep-alive, at most `connections` sockets per origin, each
 * carrying up to `pipelining` requests at once (default 1).
 */
export function createDeliveryAgent(options: {
  connections: number;
  pipelining?: number;
  keepAliveTimeoutMs?: number;
}): Agent {
  // Shorter than any delivery timeout worth having: a router that drops packets is found
  // unreachable (an outage: held, not spent) rather than timed out.
  const connect = buildConnector({ timeout: 5_000 });
  return new Agent({
    connections: options.connections,
    pipelining: options.pipelining ?? 1,
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 4_000,
    connect: (connectOptions, callback) =>
      connect(connectOptions, (error, socket) => {
        if (socket) coalesceWrites(socket);
        (callback as (e: Error | null, s: Socket | null) => void)(error, socket);
      }),
  });
}

/**
 * Makes the writes one tick makes to `socket` leave in one system call: the first write of a tick
 * corks the socket, and it is uncorked when the tick ends. undici writes each request by itself
 * (its head and body corked together), so the requests pipelined on a connection at once (a
 * claimed batch) would otherwise cost a `writev` each.
 */
export function coalesceWrites(socket: Socket): void {
  const write = socket.write;
  let corked = false;
  const uncork = () => {
    corked = false;
    socket.uncork();
  };
  socket.write = function (this: Socket, ...args: Parameters<Socket['write']>) {
    if (!corked) {
      corked = true;
      socket.cork();
      process.nextTick(uncork);
    }
    return write.apply(this, args);
  } as Socket['write'];
}

const USER_AGENT = 'chronos-webhooks/1';
const SNIPPET_CHARS = 200;

// Failures before a connection exists: the other side is not there (yet).
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** POSTs `body` signed per Standard Webhooks and says what came of it. Never throws. */
export function postSigned(post: SignedPost): Promise<SignedDelivery> {
  const target = post.target ?? 'router';
  const now = post.now ?? Date.now;
  const failed = (kind: PostKind, error: string): SignedDelivery => ({
    ok: false,
    retryable: true,
    error,
    kind,
    ...(kind === 'unreachable' && { unreachable: true }),
  });
  if (post.signal?.aborted)
    return Promise.resolve(failed('timeout', `${target} request aborted before it was sent`));

  // undici's dispatch API rather than request(): no response stream, no AbortController of our
  // own, and a good part less CPU a request (bench/README.md, "Webhook delivery").
  return new Promise<SignedDelivery>((resolve) => {
    const startedAt = performance.now();
    let controller: Dispatcher.DispatchController | null = null;
    let settled = false;
    let status = 0;
    let retryAfter: string | undefined;
    const chunks: Buffer[] = [];
    let kept = 0;

    const settle = (delivery: SignedDelivery) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      post.signal?.removeEventListener('abort', onAbort);
      // A request still queued or under way is cut off: its answer would come to nobody.
      controller?.abort(new Error('abandoned'));
      resolve(delivery);
    };
    const timer = setTimeout(
      () => settle(failed('timeout', `${target} timed out after ${post.timeoutMs} ms`)),
      post.timeoutMs,
    );
    const onAbort = () => {
      const elapsedMs = Math.round(performance.now() - startedAt);
      settle(failed('timeout', `${target} timed out after ${elapsedMs} ms (delivery aborted)`));
    };
    post.signal?.addEventListener('abort', onAbort, { once: true });

    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        if (settled) c.abort(new Error('abandoned'));
      },
      onResponseStart(_c, statusCode, responseHeaders) {
        status = statusCode;
        retryAfter = header(responseHeaders['retry-after']);
      },
      onResponseData(_c, chunk) {
        if ((status < 200 || status >= 300) && kept < 4 * SNIPPET_CHARS) {
          chunks.push(chunk);
          kept += chunk.length;
        }
      },
      onResponseEnd() {
        controller = null;
        settle(classify(target, status, retryAfter, chunks, now));
      },
      onResponseError(_c, error) {
        controller = null;
        // An answer cut short still says what the router thought.
        if (status !== 0) return settle(classify(target, status, retryAfter, chunks, now));
        const code = errorCode(error);
        if (code && UNREACHABLE.has(code))
          return settle(failed('unreachable', `${target} unreachable: ${code}`));
        // undici's own messages ("other side closed") name no host, header or URL; system errors do.
        const detail = code?.startsWith('UND_ERR') && error.message ? ` (${error.message})` : '';
        if (code) return settle(failed('connection', `${target} connection failed: ${code}${detail}`));
        settle(failed('connection', `${target} request failed: ${error.name}`));
      },
    };
    try {
      const url = parsedUrl(post.url);
      // Object.assign, not spreads: a literal of spreads costs microseconds a request on Node 20.
      const headers: Record<string, string> = Object.assign(
        {},
        post.headers,
        webhookHeaders(post.secrets, post.msgId, post.body, Math.floor(now() / 1000)),
        { 'content-type': 'application/json', 'user-agent': USER_AGENT },
      );
      (post.dispatcher ?? getGlobalDispatcher()).dispatch(
        {
          origin: url.origin,
          path: url.path,
          method: 'POST',
          headers,
          body: post.body,
          // The timer above bounds the whole exchange; undici's own timeouts would only be longer.
          headersTimeout: post.timeoutMs + 1_000,
          // Each message may be sent twice (receivers deduplicate on its webhook-id), and none
          // holds the connection longer than its answer takes: both let undici pipeline POSTs
          // when the pool allows it, and send again those queued behind an answer cut off.
          idempotent: true,
          blocking: false,
          bodyTimeout: post.timeoutMs + 1_000,
        },
        handler,
      );
    } catch (error) {
      // A malformed URL or secret: nothing was sent. The name only; a message could quote either.
      settle(failed('connection', `${target} request not sent: ${(error as Error).name}`));
    }
  });
}

function classify(
  target: string,
  status: number,
  retryAfter: string | undefined,
  chunks: Buffer[],
  now: () => number,
): SignedDelivery {
  if (status >= 200 && status < 300) return { ok: true, statusCode: status, kind: 'answered' };
  const reason = STATUS_CODES[status];
  const snippet = snippetOf(chunks);
  const error =
    `${target} answered ${status}${reason ? ` ${reason}` : ''}` +
    (status >= 300 && status < 400 ? ' (redirects are not followed)' : '') +
    (snippet ? `: ${snippet}` : '');
  const retryable = status === 408 || status === 429 || status >= 500;
  const delivery: SignedDelivery = { ok: false, retryable, error, statusCode: status, kind: 'answered' };
  const retryAfterMs = retryable ? parseRetryAfter(retryAfter, now()) : undefined;
  if (retryAfterMs !== undefined) delivery.retryAfterMs = retryAfterMs;
  return delivery;
}

const urls = new Map<string, { origin: string; path: string }>();

/** Origin and path of a URL; the few URLs a process posts to are parsed once. */
function parsedUrl(raw: string): { origin: string; path: string } {
  let parsed = urls.get(raw);
  if (!parsed) {
    const url = new URL(raw);
    parsed = { origin: url.origin, path: `${url.pathname}${url.search}` };
    if (urls.size > 64) urls.clear();
    urls.set(raw, parsed);
  }
  return parsed;
}

/**
 * A `Retry-After` value in milliseconds from `nowMs`: delay-seconds (`120`) or an HTTP-date
 * (`Wed, 21 Oct 2026 07:28:00 GMT`). Undefined when absent or unreadable; 0 for a date past.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) {
    const seconds = Number(text);
    return Number.isSafeInteger(seconds * 1000) ? seconds * 1000 : undefined;
  }
  // An HTTP-date always names its zone (GMT); anything else Date.parse might guess at is refused.
  if (!/GMT$|UTC$|[+-]\d{4}$/.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The first characters of an error answer, on one line: often the receiver says why. */
function snippetOf(chunks: Buffer[]): string {
  const text = Buffer.concat(chunks).toString('utf8').replace(/\s+/g, ' ').trim();
  return text.length > SNIPPET_CHARS ? `${text.slice(0, SNIPPET_CHARS)}…` : text;
}

function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string') return e.code;
  // Happy-eyeballs connects fail with an AggregateError, one error per address tried.
  if (Array.isArray(e.errors)) for (const inner of e.errors) if (errorCode(inner)) return errorCode(inner);
  return e.cause !== undefined && e.cause !== error ? errorCode(e.cause) : undefined;
}
