/**
 * A database outage: requests answer 503 promptly (with Retry-After) instead of hanging, nothing
 * is written, and the server recovers by itself when the database returns.
 *
 * The outage is a TCP proxy between the service and PostgreSQL that the test takes down (new
 * connections refused, open ones cut) or makes hang (connections accepted, never answered) —
 * the shared PostgreSQL server itself keeps running.
 */
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, beforeEach, expect } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import type { ChronosApp } from '../../packages/chronos-timers-server/src/http/app.js';
import { createApp } from '../../packages/chronos-timers-server/src/server.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import { OWNER } from '../support/harness.js';
import { call, isProblem, snapshot } from './support.js';

class TcpProxy {
  #server: Server | null = null;
  readonly #sockets = new Set<Socket>();
  port = 0;
  mode: 'forward' | 'hang' = 'forward';

  constructor(private readonly target: { host: string; port: number }) {}

  async up(): Promise<void> {
    const server = createServer((client) => {
      this.#sockets.add(client);
      client.on('close', () => this.#sockets.delete(client));
      client.on('error', () => {});
      if (this.mode === 'hang') return;
      const upstream = connect(this.target.port, this.target.host);
      this.#sockets.add(upstream);
      upstream.on('close', () => this.#sockets.delete(upstream));
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.#server = server;
  }

  /** Refuses new connections and cuts the open ones. */
  async down(): Promise<void> {
    const server = this.#server;
    this.#server = null;
    for (const socket of this.#sockets) socket.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

describeEachBackend('HTTP: database outage', ({ t, kind }) => {
  let proxy: TcpProxy;
  let service: ChronosService;
  let app: ChronosApp;
  let key: string;

  beforeEach(async () => {
    if (kind !== 'postgres') return;
    const target = new URL(t.url!);
    proxy = new TcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    await proxy.up();
    const through = new URL(t.url!);
    through.hostname = '127.0.0.1';
    through.port = String(proxy.port);
    service = await ChronosService.open(
      loadConfig({
        DATABASE_URL: through.toString(),
        CHRONOS_DB_CONNECT_TIMEOUT: '300ms',
        CHRONOS_CREATE_RATE: '0',
      }),
      { logger: silentLogger },
    );
    app = await createApp(service);
    key = (await service.keys.create(OWNER.did)).key;
  });
  afterEach(async () => {
    if (kind !== 'postgres') return;
    await app.close();
    await service.close();
    await proxy.down();
  });

  const create = () =>
    call(app, 'POST', '/v1/alarms', {
      headers: { authorization: `Bearer ${key}` },
      body: { in_seconds: 600 },
    });

  postgresOnly(
    kind,
    'the outage is a proxy in front of a PostgreSQL server',
    'a request during an outage answers 503 at once, and the server recovers',
    async () => {
      expect((await create()).status).toBe(201);

      await proxy.down();
      const before = await snapshot(t.db);
      const started = performance.now();
      const refused = await create();
      const tookMs = performance.now() - started;
      expect(isProblem(refused, 503), refused.text).toBe(true);
      expect(refused.body.code).toBe('unavailable');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect(tookMs).toBeLessThan(2_000);
      const list = await call(app, 'GET', '/v1/alarms', { headers: { authorization: `Bearer ${key}` } });
      expect(list.status).toBe(503);
      const readyz = await call(app, 'GET', '/readyz');
      expect(readyz.status).toBe(503);
      // Neither the address nor the driver's text (issue 45): they go to the log.
      expect(readyz.body.reason).toBe('database unreachable');
      expect(readyz.text).not.toMatch(/ECONNREFUSED|timeout|terminated/i);
      expect((await call(app, 'GET', '/healthz')).status).toBe(200);
      expect(await snapshot(t.db)).toEqual(before);

      await proxy.up();
      expect((await create()).status).toBe(201);
      expect((await call(app, 'GET', '/readyz')).status).toBe(200);
    },
  );

  postgresOnly(
    kind,
    'the outage is a proxy in front of a PostgreSQL server',
    'a database that accepts connections but never answers is a 503 after the connect timeout, not a hang',
    async () => {
      expect((await create()).status).toBe(201);
      await proxy.down();
      proxy.mode = 'hang';
      await proxy.up();
      const started = performance.now();
      const refused = await create();
      expect(refused.status).toBe(503);
      expect(performance.now() - started).toBeLessThan(2_000);

      await proxy.down();
      proxy.mode = 'forward';
      await proxy.up();
      expect((await create()).status).toBe(201);
    },
  );
});
