/**
 * Issue 45's probes on the HTTP server itself, over a real socket where `inject` would skip the
 * listener: slow bodies and headers closed after `CHRONOS_REQUEST_TIMEOUT` (made 1 s here), a
 * refused caller's body left unread, a pipelined burst served at a bounded depth, 414 and 431 as
 * problem+json, and the small leaks (no secret-shaped value echoed, NUL refused on its parameter,
 * `/readyz` 503 on a read-only database).
 */
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { PIPELINE_DEPTH } from '../../packages/chronos-timers-server/src/http/app.js';
import { describeEachBackend } from '../support/backends.js';
import { call, isProblem, OPERATOR_TOKEN, openTestApp, type TestApp } from './support.js';

/** Everything the server sends on a socket until it closes it. */
function untilClosed(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', () => {});
    socket.on('close', () => resolve(text));
  });
}

function opened(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' }, () => resolve(socket));
    socket.once('error', reject);
  });
}

describeEachBackend('HTTP: hostile clients (issue 45)', ({ kind, t }) => {
  let h: TestApp;
  let port: number;
  beforeEach(async () => {
    h = await openTestApp(t.db, { CHRONOS_REQUEST_TIMEOUT: '1s' });
    let running = 0;
    const seen = { max: 0 };
    h.app.decorate('handlersSeen', seen);
    // A handler that takes several turns of the event loop, so pipelined requests would overlap.
    h.app.get('/test/slow', async (request) => {
      running += 1;
      seen.max = Math.max(seen.max, running);
      for (let i = 0; i < 5; i += 1) await new Promise((resolve) => setImmediate(resolve));
      running -= 1;
      return { n: Number((request.query as { n: string }).n) };
    });
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    port = (h.app.server.address() as AddressInfo).port;
  });
  afterEach(async () => {
    await h.close();
  });

  it('sockets dribbling a body, or their headers, are answered 408 problem+json and closed after CHRONOS_REQUEST_TIMEOUT', async () => {
    const sockets = await Promise.all([1, 2, 3, 4].map(() => opened(port)));
    const answers = sockets.map(untilClosed);
    const dribbles = sockets.map((socket, i) => {
      if (i === 3) {
        socket.write('POST /v1/alarms HTTP/1.1\r\nHost: x\r\nAuthor');
        return setInterval(() => socket.writable && socket.write('i'), 100);
      }
      socket.write(
        `POST /v1/alarms HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.ownerKey}\r\n` +
          'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
      );
      return setInterval(() => socket.writable && socket.write('1\r\n \r\n'), 100);
    });
    try {
      const texts = await Promise.all(answers);
      for (const text of texts) {
        expect(text).toMatch(/^HTTP\/1\.1 408 /);
        expect(text).toMatch(/content-type: application\/problem\+json/i);
        expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toMatchObject({ status: 408 });
      }
    } finally {
      dribbles.forEach(clearInterval);
      sockets.forEach((socket) => socket.destroy());
    }
  });

  it("a refused caller's body is not read: 401 at once, Connection: close, and the socket closes", async () => {
    const socket = await opened(port);
    const answer = untilClosed(socket);
    // A chunked body that never ends: only closing the connection ends this.
    socket.write(
      'POST /v1/alarms HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer chronos_wrong\r\n' +
        'Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n',
    );
    const text = await answer;
    expect(text).toMatch(/^HTTP\/1\.1 401 /);
    expect(text).toMatch(/connection: close/i);
    expect(text).toMatch(/content-type: application\/problem\+json/i);
  });

  it(`1,000 pipelined GETs on one socket are answered in order, at most ${PIPELINE_DEPTH} handled at once`, async () => {
    const socket = await opened(port);
    const answer = untilClosed(socket);
    const requests = Array.from(
      { length: 1_000 },
      (_, n) =>
        `GET /test/slow?n=${n} HTTP/1.1\r\nHost: x\r\n${n === 999 ? 'Connection: close\r\n' : ''}\r\n`,
    );
    socket.write(requests.join(''));
    const text = await answer;
    const numbers = [...text.matchAll(/\{"n":(\d+)\}/g)].map((m) => Number(m[1]));
    expect(numbers).toEqual(Array.from({ length: 1_000 }, (_, n) => n));
    const seen = (h.app as unknown as { handlersSeen: { max: number } }).handlersSeen;
    expect(seen.max).toBeGreaterThan(1);
    expect(seen.max).toBeLessThanOrEqual(PIPELINE_DEPTH);
  });

  it('431 (headers too large) and 414 (a path segment too long) answer problem+json', async () => {
    const socket = await opened(port);
    const answer = untilClosed(socket);
    socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    const text = await answer;
    expect(text).toMatch(/^HTTP\/1\.1 431 /);
    expect(text).toMatch(/content-type: application\/problem\+json/i);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toMatchObject({ status: 431 });

    const long = await call(h.app, 'GET', `/v1/alarms/${'a'.repeat(3_000)}`, { headers: h.auth });
    expect(isProblem(long, 414), long.text).toBe(true);
    expect(long.text).not.toContain('aaaaaaaaaa');
  });

  it('refusals echo no secret-shaped value: an unknown query parameter, an id that is not a UUID', async () => {
    const unknown = await call(h.app, 'GET', `/v1/alarms?api_key=${h.ownerKey}`, { headers: h.auth });
    expect(isProblem(unknown, 400), unknown.text).toBe(true);
    expect(unknown.body.errors[0].path).toBe('api_key');
    expect(unknown.text).not.toContain(h.ownerKey);
    expect(unknown.text).not.toContain(h.ownerKey.slice(0, 12));

    for (const path of [`/v1/wakes/${OPERATOR_TOKEN}`, `/v1/alarms/${OPERATOR_TOKEN}`]) {
      const missing = await call(h.app, 'GET', path, { headers: h.auth });
      expect(isProblem(missing, 404), missing.text).toBe(true);
      expect(missing.text).not.toContain(OPERATOR_TOKEN);
    }
  });

  it('a NUL in a query parameter is a 400 on that parameter, not the database text', async () => {
    const answers = [
      await call(h.app, 'GET', '/v1/wakes?conversation_id=%00', { headers: h.auth }),
      await call(h.app, 'GET', '/v1/alarms?q=a%00b', { headers: h.auth }),
      await call(h.app, 'POST', '/v1/conversations/a%00b/replies', { headers: h.auth, body: {} }),
    ];
    for (const [i, answer] of answers.entries()) {
      expect(isProblem(answer, 400), answer.text).toBe(true);
      const path = i === 1 ? 'q' : 'conversation_id';
      expect(answer.body.errors).toEqual([{ path, message: expect.stringMatching(/NUL/) }]);
      expect(answer.text).not.toMatch(/0x00|invalid byte sequence|UTF8/i);
    }
  });

  it('/readyz answers 503 while the database is read-only', async () => {
    // One session is read-only: PGlite's only one, or a one-connection pool on PostgreSQL.
    const db = kind === 'pglite' ? t.db : t.openPool(1);
    const other = kind === 'pglite' ? h : await openTestApp(db);
    try {
      await db.exec('SET default_transaction_read_only = on');
      const answer = await call(other.app, 'GET', '/readyz');
      expect(answer.status).toBe(503);
      expect(answer.body).toMatchObject({ status: 'not ready', reason: 'the database is read-only' });
    } finally {
      await db.exec('SET default_transaction_read_only = off');
      // (The extra pool is the test database's to close.)
      if (other !== h) await other.close();
    }
  });
});
