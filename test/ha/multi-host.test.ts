/**
 * The multi-host client against real servers, without a failover manager: a listed host that is
 * down, one that accepts TCP but never answers, one that is read-only, and the test PostgreSQL
 * as the writable one. (The failover itself, with pg_auto_failover, is in failover.test.ts.)
 */
import { connect as connectTcp, createServer, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeHost } from '../../packages/chronos-timers/src/store/driver/connection-string.js';
import { PgDb, sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import {
  isFailoverError,
  MultiHost,
  type MultiHostEvent,
} from '../../packages/chronos-timers/src/store/driver/multi-host.js';
import { freePort } from '../cli/support.js';
import { PrivateCluster } from '../scenarios/support/cluster.js';
import { waitUntil } from '../scenarios/support/scenario.js';
import { describePostgresOnly } from '../support/backends.js';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';

describePostgresOnly('several real servers at once', 'multi-host connections', () => {
  let t: TestDatabase;
  let database: string;
  let primary: string;
  let readOnly: PrivateCluster;
  let silent: Server;
  let silentPort: number;
  const sockets = new Set<Socket>();
  const pools: pg.Pool[] = [];

  beforeAll(async () => {
    t = await createTestDatabase('postgres');
    const url = new URL(t.url!);
    database = url.pathname.slice(1);
    primary = `${url.hostname}:${url.port || 5432}`;
    // A read-only server holding a database of the same name, as a standby would.
    readOnly = await PrivateCluster.create();
    await readOnly.createDatabase(database);
    const admin = new pg.Client({ connectionString: readOnly.url() });
    await admin.connect();
    await admin.query('CREATE ROLE root SUPERUSER LOGIN');
    await admin.query(`ALTER DATABASE ${database} SET default_transaction_read_only = on`);
    await admin.end();
    // Accepts connections and never answers: a host that is there but hung.
    silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentPort = (silent.address() as { port: number }).port;
  }, 60_000);

  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end().catch(() => {})));
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent?.close(() => resolve()));
    await readOnly?.destroy();
    await t?.close();
  });

  const urlOf = (hosts: string[], query = 'target_session_attrs=read-write') =>
    `postgres://root@${hosts.join(',')}/${database}?${query}`;

  function poolFor(hosts: MultiHost, max = 4): pg.Pool {
    const pool = new pg.Pool({ ...hosts.poolConfig(), max, connectionTimeoutMillis: 10_000 });
    pool.on('error', () => {});
    hosts.watch(pool);
    pools.push(pool);
    return pool;
  }

  it('skips a listed host that is down and connects to the primary after it', async () => {
    const down = `127.0.0.1:${await freePort()}`;
    const events: MultiHostEvent[] = [];
    const hosts = MultiHost.fromUrl(urlOf([down, primary]), { onEvent: (e) => events.push(e) });
    const pool = poolFor(hosts);

    const { rows } = await pool.query<{ port: number }>('SELECT inet_server_port() AS port');

    expect(String(rows[0]!.port)).toBe(primary.split(':')[1]);
    expect(hosts.status()).toMatchObject({ host: primary, changes: 0, lastError: null });
    expect(events).toEqual([expect.objectContaining({ type: 'chosen', host: hosts.parsed.hosts[1] })]);
  });

  it('gives up on a host that never answers after connect_timeout and uses the next', async () => {
    const hosts = MultiHost.fromUrl(
      urlOf([`127.0.0.1:${silentPort}`, primary], 'target_session_attrs=read-write&connect_timeout=2'),
    );
    const started = Date.now();
    const pool = poolFor(hosts);

    await pool.query('SELECT 1');

    expect(hosts.status().host).toBe(primary);
    // libpq's minimum of 2 s for that one host, then the primary at once.
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
  });

  it("fails a request within the pool's connect timeout while a hung host holds up the probe", async () => {
    const hosts = MultiHost.fromUrl(
      urlOf([`127.0.0.1:${silentPort}`, primary], 'target_session_attrs=read-write&connect_timeout=10'),
    );
    const pool = new pg.Pool({ ...hosts.poolConfig(), max: 2, connectionTimeoutMillis: 1_000 });
    pool.on('error', () => {});
    pools.push(pool);
    const started = Date.now();

    const error = await pool.query('SELECT 1').then(
      () => null,
      (e: Error) => e,
    );

    expect(error?.message).toMatch(/timeout/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('passes over a read-only server for read-write, and takes it for any and read-only', async () => {
    const readOnlyHost = `127.0.0.1:${readOnly.port}`;
    const readWrite = MultiHost.fromUrl(urlOf([readOnlyHost, primary]));
    await poolFor(readWrite).query('SELECT 1');
    expect(readWrite.status().host).toBe(primary);

    for (const mode of ['any', 'read-only']) {
      const hosts = MultiHost.fromUrl(urlOf([readOnlyHost, primary], `target_session_attrs=${mode}`));
      await poolFor(hosts).query('SELECT 1');
      expect(hosts.status().host, mode).toBe(readOnlyHost);
    }
  });

  it('moves on from a host that answers a write with 25006 (read-only) to the next one', async () => {
    const readOnlyHost = `127.0.0.1:${readOnly.port}`;
    // `any` lands on the read-only server first, as libpq would.
    const hosts = MultiHost.fromUrl(urlOf([readOnlyHost, primary], 'target_session_attrs=any'));
    const pool = poolFor(hosts, 1);
    await pool.query('CREATE TABLE IF NOT EXISTS ha_probe (n int)').then(
      () => expect.unreachable('a read-only server accepted a write'),
      (error: unknown) => {
        expect((error as { code?: string }).code).toBe('25006');
        expect(isFailoverError(error)).toBe(true);
      },
    );
    expect(hosts.status().host).toBeNull();

    await pool.query('CREATE TABLE IF NOT EXISTS ha_probe (n int)');

    expect(hosts.status()).toMatchObject({ host: primary, changes: 1 });
  });

  it('says which hosts it tried and why when none qualifies, without the password', async () => {
    const down = `127.0.0.1:${await freePort()}`;
    const hosts = MultiHost.fromUrl(
      `postgres://root:hunter2@${down},127.0.0.1:${readOnly.port}/${database}?target_session_attrs=read-write`,
    );
    const pool = poolFor(hosts);

    const error = await pool.query('SELECT 1').then(
      () => null,
      (e: Error) => e,
    );

    expect(error?.message).toMatch(
      new RegExp(
        `^no listed host accepts read-write sessions: ${down} \\(.*ECONNREFUSED.*\\), 127\\.0\\.0\\.1:${readOnly.port} \\(read-only\\)$`,
      ),
    );
    expect(error?.message).not.toContain('hunter2');
    expect(hosts.status()).toMatchObject({ host: null, lastError: error?.message });
  });

  it('gives a dedicated connection (for LISTEN) to the current writable host', async () => {
    const hosts = MultiHost.fromUrl(urlOf([`127.0.0.1:${readOnly.port}`, primary]));
    const listener = await hosts.connect();
    try {
      const notified = new Promise<string>((resolve) =>
        listener.on('notification', (m) => resolve(m.payload ?? '')),
      );
      await listener.query('LISTEN ha_multi_host');
      await poolFor(hosts).query("SELECT pg_notify('ha_multi_host', 'hello')");
      expect(await notified).toBe('hello');
      expect(describeHost({ host: listener.host, port: listener.port })).toBe(primary);
    } finally {
      await listener.end();
    }
  });

  it('an idle pool whose host went away meanwhile tries the next host instead of failing once', async () => {
    // A proxy to the test PostgreSQL stands for a primary that dies while no connection is open.
    const sockets = new Set<Socket>();
    const proxy = createServer((client) => {
      const upstream = connectTcp(Number(primary.split(':')[1]), primary.split(':')[0]);
      for (const socket of [client, upstream]) {
        sockets.add(socket);
        socket.on('error', () => {});
        socket.on('close', () => sockets.delete(socket));
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const proxied = `127.0.0.1:${(proxy.address() as { port: number }).port}`;
    const events: MultiHostEvent[] = [];
    const hosts = MultiHost.fromUrl(urlOf([proxied, primary]), { onEvent: (e) => events.push(e) });
    const pool = new pg.Pool({ ...hosts.poolConfig(), max: 2, idleTimeoutMillis: 50 });
    pool.on('error', () => {});
    hosts.watch(pool);
    pools.push(pool);
    await pool.query('SELECT 1');
    expect(hosts.status().host).toBe(proxied);
    await waitUntil(() => pool.totalCount === 0, { timeoutMs: 5_000, what: 'the pool to go idle' });
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => proxy.close(() => resolve()));

    await pool.query('SELECT 1');

    expect(hosts.status()).toMatchObject({ host: primary, changes: 1 });
    expect(events.map((e) => e.type)).toEqual(['chosen', 'lost', 'chosen']);
  });

  it('the store on a multi-host URL writes and LISTENs on the writable host, and says which it is', async () => {
    const readOnlyHost = `127.0.0.1:${readOnly.port}`;
    const events: MultiHostEvent[] = [];
    const db = PgDb.connect(urlOf([readOnlyHost, primary]), 4, { onHostEvent: (e) => events.push(e) });
    const heard: string[] = [];
    try {
      const stop = await db.listen('ha_store_multi_host', (payload) => heard.push(payload));
      const write = sql('ha_store_write', 'CREATE TABLE IF NOT EXISTS ha_store (n int)');
      await db.transaction((tx) => tx.query(write));
      await waitUntil(
        async () => {
          await db.query(sql('ha_store_notify', "SELECT pg_notify('ha_store_multi_host', 'hello')"));
          return heard.includes('hello');
        },
        { timeoutMs: 10_000, what: 'the notification' },
      );
      await stop();
      expect(db.status()).toMatchObject({
        host: primary,
        hosts: [readOnlyHost, primary],
        targetSessionAttrs: 'read-write',
        changes: 0,
      });
      expect(events.filter((e) => e.type === 'chosen')).toHaveLength(1);
    } finally {
      await db.close();
    }
  });

  it('a one-host URL stays a plain pool, and the store reports that host', async () => {
    const db = PgDb.connect(t.url!, 2);
    try {
      await db.query(sql('ha_store_one', 'SELECT 1'));
      expect(db.status()).toMatchObject({ host: primary, hosts: [primary], changes: 0 });
      expect(db.pool.options.Client).toBeUndefined();
    } finally {
      await db.close();
    }
  });
});
