import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Sink } from '../support/sink.js';
import {
  coalesceWrites,
  createDeliveryAgent,
  parseRetryAfter,
  postSigned,
  type SignedPost,
} from '../../packages/chronos-timers-server/src/receivers/http-post.js';

const SECRET = `whsec_${randomBytes(24).toString('base64')}`;

describe('postSigned', () => {
  let sink: Sink;
  const agent = createDeliveryAgent({ connections: 4 });
  const post = (overrides: Partial<SignedPost> = {}) =>
    postSigned({
      url: sink.url(),
      msgId: 'wake-1',
      body: '{"n":12345678901234567890}',
      secrets: [SECRET],
      timeoutMs: 2_000,
      dispatcher: agent,
      ...overrides,
    });

  beforeAll(async () => {
    sink = await Sink.start();
  });
  afterEach(async () => {
    await sink.up();
    sink.reset();
  });
  afterAll(async () => {
    await sink.close();
    await agent.close();
  });

  it('POSTs the body as given, signed, as JSON, and counts a 2xx as delivered', async () => {
    sink.answer({ status: 204 });
    expect(await post()).toEqual({ ok: true, statusCode: 204, kind: 'answered' });
    const [request] = sink.requests;
    expect(request!.method).toBe('POST');
    expect(request!.path).toBe('/wakes');
    expect(request!.body).toBe('{"n":12345678901234567890}');
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.headers['webhook-id']).toBe('wake-1');
    expect(() => new Webhook(SECRET).verify(request!.rawBody, request!.headers)).not.toThrow();
  });

  it('keeps the connection alive between requests', async () => {
    for (let i = 0; i < 5; i++) expect((await post()).ok).toBe(true);
    expect(sink.connections).toBe(1);
  });

  it.each([
    [408, 'Request Timeout'],
    [429, 'Too Many Requests'],
    [500, 'Internal Server Error'],
    [502, 'Bad Gateway'],
    [503, 'Service Unavailable'],
  ])('retries after a %i answer', async (status, reason) => {
    sink.answer({ status });
    expect(await post()).toEqual({
      ok: false,
      retryable: true,
      statusCode: status,
      error: `router answered ${status} ${reason}`,
      kind: 'answered',
    });
  });

  it.each([
    [400, 'Bad Request'],
    [401, 'Unauthorized'],
    [404, 'Not Found'],
    [410, 'Gone'],
    [422, 'Unprocessable Entity'],
  ])('does not retry after a %i answer', async (status, reason) => {
    sink.answer({ status });
    expect(await post()).toEqual({
      ok: false,
      retryable: false,
      statusCode: status,
      error: `router answered ${status} ${reason}`,
      kind: 'answered',
    });
  });

  it('does not follow a redirect, and says so', async () => {
    sink.answer({ status: 301, headers: { location: 'http://elsewhere.example/' } });
    expect(await post()).toMatchObject({
      ok: false,
      retryable: false,
      statusCode: 301,
      error: 'router answered 301 Moved Permanently (redirects are not followed)',
    });
  });

  it('adds the start of the answer’s body, on one line, to the error', async () => {
    sink.answer({ status: 400, body: 'unknown\n  user_id ' + 'x'.repeat(500) });
    const delivery = await post();
    expect(delivery.ok).toBe(false);
    if (delivery.ok) return;
    expect(delivery.error).toMatch(/^router answered 400 Bad Request: unknown user_id x+…$/);
    expect(delivery.error.length).toBeLessThan(260);
  });

  it('reads Retry-After in seconds and as an HTTP-date', async () => {
    sink.answer({ status: 429, headers: { 'retry-after': '7' } });
    expect(await post()).toMatchObject({ retryable: true, retryAfterMs: 7_000 });
    const now = Date.parse('2030-01-01T00:00:00Z');
    sink.answer({ status: 503, headers: { 'retry-after': 'Tue, 01 Jan 2030 00:01:30 GMT' } });
    expect(await post({ now: () => now })).toMatchObject({ retryable: true, retryAfterMs: 90_000 });
  });

  it('gives up on a hanging receiver after the timeout and drops the request', async () => {
    sink.always({ hang: true });
    const delivery = await post({ timeoutMs: 100 });
    expect(delivery).toEqual({
      ok: false,
      retryable: true,
      error: 'router timed out after 100 ms',
      kind: 'timeout',
    });
    await expect.poll(() => sink.requests[0]?.clientGone).toBe(true);
  });

  it('stops when the caller aborts', async () => {
    sink.always({ hang: true });
    const abort = new AbortController();
    const delivery = post({ signal: abort.signal });
    await sink.waitFor(1);
    abort.abort();
    expect(await delivery).toMatchObject({
      ok: false,
      retryable: true,
      error: expect.stringMatching(/^router timed out after \d+ ms \(delivery aborted\)$/),
    });
  });

  it('retries when the receiver closes the connection without answering', async () => {
    sink.answer({ close: true });
    expect(await post()).toMatchObject({
      ok: false,
      retryable: true,
      error: expect.stringMatching(/^router connection failed: UND_ERR_SOCKET/),
      kind: 'connection',
    });
  });

  it('retries when nothing listens, naming the error code only, and says the target was unreachable', async () => {
    await sink.down();
    // A fresh pool: a kept-alive socket the sink just dropped fails as UND_ERR_SOCKET instead.
    const fresh = createDeliveryAgent({ connections: 1 });
    const url = `${sink.url()}?token=s3cret`;
    const delivery = await post({ url, target: 'fallback', dispatcher: fresh });
    await fresh.close();
    expect(delivery).toEqual({
      ok: false,
      retryable: true,
      error: 'fallback unreachable: ECONNREFUSED',
      kind: 'unreachable',
      unreachable: true,
    });
  });

  it('settles without throwing when nothing can be sent (a malformed URL)', async () => {
    const delivery = await post({ url: 'not a url?token=s3cret' });
    expect(delivery).toEqual({
      ok: false,
      retryable: true,
      error: 'router request not sent: TypeError',
      kind: 'connection',
    });
  });

  it('is aborted before it is sent when the signal already fired', async () => {
    const abort = new AbortController();
    abort.abort();
    expect(await post({ signal: abort.signal })).toMatchObject({
      ok: false,
      retryable: true,
      kind: 'timeout',
    });
    expect(sink.received).toBe(0);
  });

  it('never puts the secret, a header or the URL in an error', async () => {
    sink.answer({ status: 500 });
    const url = `${sink.url()}?token=s3cret`;
    const results = [await post({ url, headers: { authorization: 'Bearer s3cret' } })];
    sink.answer({ close: true });
    results.push(await post({ url }));
    await sink.down();
    results.push(await post({ url }));
    for (const delivery of results) {
      expect(delivery.ok).toBe(false);
      if (delivery.ok) continue;
      for (const secret of ['s3cret', SECRET, SECRET.slice(6), '127.0.0.1', String(sink.port)]) {
        expect(delivery.error).not.toContain(secret);
      }
    }
  });
});

describe('coalesceWrites', () => {
  it('sends what one tick writes to a connection in one system call, and each later tick in its own', async () => {
    const received: Buffer[] = [];
    const server = createServer((peer) => peer.on('data', (chunk: Buffer) => received.push(chunk)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const socket: Socket = connect((server.address() as { port: number }).port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    coalesceWrites(socket);
    // Node hands a socket's buffered writes to the kernel through _writev (several) or _write (one).
    const calls: number[] = [];
    type Hand = (...args: unknown[]) => void;
    const { _writev, _write } = socket as unknown as { _writev: Hand; _write: Hand };
    Object.assign(socket, {
      _writev(chunks: unknown[], callback: unknown) {
        calls.push(chunks.length);
        _writev.call(socket, chunks, callback);
      },
      _write(chunk: unknown, encoding: unknown, callback: unknown) {
        calls.push(1);
        _write.call(socket, chunk, encoding, callback);
      },
    });
    try {
      for (const text of ['one ', 'two ', 'three ']) socket.write(text);
      await new Promise((resolve) => setImmediate(resolve));
      expect(calls).toEqual([3]);
      socket.write('four');
      await new Promise((resolve) => setImmediate(resolve));
      expect(calls).toEqual([3, 1]);
      // Nothing is held back: everything written arrives, in order.
      await expect.poll(() => Buffer.concat(received).toString()).toBe('one two three four');
    } finally {
      socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('over TLS', () => {
  // A router behind HTTPS, with a throwaway self-signed certificate for 127.0.0.1 (test/support/tls),
  // which this test alone accepts unverified. The pool's connections are TLS sockets, and
  // coalesceWrites wraps them as it wraps plain ones.
  const tls = (name: string) => readFileSync(new URL(`../support/tls/${name}`, import.meta.url));
  const rejectUnauthorized = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
  let sink: Sink;

  beforeAll(async () => {
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
    sink = await Sink.start({ tls: { key: tls('localhost.key'), cert: tls('localhost.crt') } });
  });
  afterAll(async () => {
    if (rejectUnauthorized === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    else process.env.NODE_TLS_REJECT_UNAUTHORIZED = rejectUnauthorized;
    await sink.close();
  });

  it('a pipelined burst arrives whole, each body signed and with its own id', async () => {
    const agent = createDeliveryAgent({ connections: 2, pipelining: 10 });
    try {
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          postSigned({
            url: sink.url(),
            msgId: `wake-${i}`,
            body: `{"n":${i}}`,
            secrets: [SECRET],
            timeoutMs: 5_000,
            dispatcher: agent,
          }),
        ),
      );
      expect(sink.url()).toMatch(/^https:/);
      expect(answers.every((a) => a.ok && a.kind === 'answered')).toBe(true);
      expect(sink.requests).toHaveLength(30);
      expect(sink.connections).toBeGreaterThan(0);
      expect(sink.connections).toBeLessThanOrEqual(2);
      for (const request of sink.requests) {
        expect(request.body).toBe(`{"n":${request.headers['webhook-id']!.slice('wake-'.length)}}`);
        expect(() => new Webhook(SECRET).verify(request.rawBody, request.headers)).not.toThrow();
      }
    } finally {
      await agent.close();
    }
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2030-01-01T00:00:00Z');
  it.each([
    ['0', 0],
    ['120', 120_000],
    [' 5 ', 5_000],
    ['Tue, 01 Jan 2030 00:00:10 GMT', 10_000],
    ['Mon, 31 Dec 2029 23:00:00 GMT', 0],
  ])('reads %j as %i ms', (value, ms) => {
    expect(parseRetryAfter(value, now)).toBe(ms);
  });
  it.each([undefined, '', 'soon', '-5', '1.5', '2030-01-01'])('ignores %j', (value) => {
    expect(parseRetryAfter(value, now)).toBeUndefined();
  });
});
