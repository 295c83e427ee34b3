/**
 * What works through a real PgBouncer 1.18 in transaction pooling mode, with node-postgres, and
 * what does not: unnamed statements (simple and extended protocol, with parameters, inside
 * transactions) work; a named prepared statement, which node-postgres prepares once per client
 * connection, meets server connections that never saw it or already have it; LISTEN stays on
 * a server connection that other clients then use, so notifications reach the wrong client.
 * The cost of going through PgBouncer is measured and printed (never asserted).
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PgDb, sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { MultiHost } from '../../packages/chronos-timers/src/store/driver/multi-host.js';
import { freePort } from '../cli/support.js';
import { PgBouncer } from '../scenarios/support/pgbouncer.js';
import { waitUntil } from '../scenarios/support/scenario.js';
import { describePostgresOnly } from '../support/backends.js';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';

// In CI a machine without pgbouncer is a failure (.ci/run installs it), not a skip.
if (!PgBouncer.available() && !process.env.CI) {
  console.warn(
    '\n!!! pgbouncer is not installed (apt-get install -y pgbouncer): the PgBouncer tests FAIL.\n',
  );
}

describePostgresOnly(
  'a real PgBouncer in front of the test PostgreSQL',
  'PgBouncer in transaction mode',
  () => {
    let t: TestDatabase;
    let database: string;
    let bouncer: PgBouncer;
    /** One server connection only: which client runs on it is then certain. */
    let single: PgBouncer;
    const clients: pg.Client[] = [];

    beforeAll(async () => {
      t = await createTestDatabase('postgres');
      const url = new URL(t.url!);
      database = url.pathname.slice(1);
      const server = {
        serverHost: url.hostname,
        serverPort: Number(url.port || 5432),
        users: [url.username],
      };
      bouncer = await PgBouncer.start({ ...server, poolSize: 2 });
      single = await PgBouncer.start({ ...server, poolSize: 1 });
      const direct = new pg.Client({ connectionString: t.url! });
      await direct.connect();
      await direct.query('CREATE TABLE ha_bouncer (n int PRIMARY KEY)');
      await direct.end();
    }, 60_000);

    afterAll(async () => {
      await Promise.all(clients.map((c) => c.end().catch(() => {})));
      await bouncer?.stop();
      await single?.stop();
      await t?.close();
    });

    async function connect(target: PgBouncer | string): Promise<pg.Client> {
      const client = new pg.Client({
        connectionString: typeof target === 'string' ? target : target.url(database),
      });
      client.on('error', () => {});
      await client.connect();
      clients.push(client);
      return client;
    }

    it('runs unnamed statements, with parameters and in transactions, from many clients over two server connections', async () => {
      const pool = new pg.Pool({ connectionString: bouncer.url(database), max: 10 });
      try {
        const sums = await Promise.all(
          Array.from({ length: 200 }, (_, i) =>
            pool.query<{ n: number }>('SELECT $1::int + 1 AS n', [i]).then((r) => r.rows[0]!.n),
          ),
        );
        expect(sums).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));

        await Promise.all(
          Array.from({ length: 50 }, async (_, i) => {
            const client = await pool.connect();
            try {
              await client.query('BEGIN');
              await client.query('INSERT INTO ha_bouncer (n) VALUES ($1)', [i]);
              await client.query('INSERT INTO ha_bouncer (n) VALUES ($1)', [1_000 + i]);
              await client.query(i % 5 === 0 ? 'ROLLBACK' : 'COMMIT');
            } finally {
              client.release();
            }
          }),
        );
        const { rows } = await pool.query<{ count: string }>('SELECT count(*) FROM ha_bouncer');
        expect(Number(rows[0]!.count)).toBe(2 * 40);
      } finally {
        await pool.end();
      }
    });

    it('breaks a named prepared statement: "does not exist" on another server connection', async () => {
      const holder = await connect(bouncer);
      const named = await connect(bouncer);
      const other = await connect(bouncer);
      // holder pins server connection X; `named` prepares n1 on the only free one, Y.
      await holder.query('BEGIN');
      await holder.query('SELECT 1');
      await named.query({ name: 'n1', text: 'SELECT $1::int AS n', values: [1] });
      // other pins Y; X comes free; node-postgres believes n1 is prepared and only binds it.
      await other.query('BEGIN');
      await other.query('SELECT 1');
      await holder.query('COMMIT');

      const error = await named.query({ name: 'n1', text: 'SELECT $1::int AS n', values: [2] }).then(
        () => null,
        (e: { code?: string; message: string }) => e,
      );
      await other.query('COMMIT');

      expect(error).toMatchObject({ code: '26000', message: 'prepared statement "n1" does not exist' });
    });

    it('breaks a named prepared statement: "already exists" when another client prepared the same name', async () => {
      const first = await connect(single);
      const second = await connect(single);
      await first.query({ name: 'n2', text: 'SELECT 1 AS n' });

      const error = await second.query({ name: 'n2', text: 'SELECT 1 AS n' }).then(
        () => null,
        (e: { code?: string; message: string }) => e,
      );

      expect(error).toMatchObject({ code: '42P05', message: 'prepared statement "n2" already exists' });
    });

    it('breaks LISTEN: the notification reaches whichever client holds the server connection, not the listener', async () => {
      const listener = await connect(single);
      const notifier = await connect(single);
      const heardByListener: string[] = [];
      const heardByNotifier: string[] = [];
      listener.on('notification', (m) => heardByListener.push(m.channel));
      notifier.on('notification', (m) => heardByNotifier.push(m.channel));

      await listener.query('LISTEN ha_bouncer_channel');
      // The one server connection now listens, for whoever uses it next.
      await notifier.query("NOTIFY ha_bouncer_channel, 'wake'");
      await waitUntil(() => heardByNotifier.length > 0, { timeoutMs: 5_000, what: 'the notification' });
      await listener.query('SELECT 1');

      expect(heardByNotifier).toEqual(['ha_bouncer_channel']);
      expect(heardByListener).toEqual([]);
      const { rows } = await notifier.query<{ channels: string[] }>(
        'SELECT array_agg(c) AS channels FROM pg_listening_channels() c',
      );
      expect(rows[0]!.channels).toEqual(['ha_bouncer_channel']);
      await notifier.query('UNLISTEN *');
    });

    it('runs the store with pooler "transaction": statements unnamed, so many clients share one server connection', async () => {
      const db = PgDb.connect(single.url(database), 8, { pooler: 'transaction' });
      const plusOne = sql('ha_bouncer_plus_one', 'SELECT $1::int + 1 AS n');
      try {
        const sums = await Promise.all(
          Array.from({ length: 100 }, (_, i) =>
            (i % 2 === 0
              ? db.query<{ n: number }>(plusOne, [i])
              : db.transaction((tx) => tx.query<{ n: number }>(plusOne, [i]))
            ).then((rows) => rows[0]!.n),
          ),
        );
        expect(sums).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
        expect(db.named).toBe(false);
      } finally {
        await db.close();
      }
    });

    it('LISTENs through the direct URL when given, and not at all without one (its callers poll)', async () => {
      const withDirect = PgDb.connect(bouncer.url(database), 2, { pooler: 'transaction', listenUrl: t.url! });
      const without = PgDb.connect(bouncer.url(database), 2, { pooler: 'transaction' });
      const heard: string[] = [];
      try {
        expect([withDirect.listening, without.listening]).toEqual(['listenUrl', 'none']);
        const stop = await withDirect.listen('ha_bouncer_direct', (payload) => heard.push(payload));
        const stopNothing = await without.listen('ha_bouncer_direct', () => expect.unreachable());
        await waitUntil(
          async () => {
            // NOTIFY through PgBouncer: committed by whichever server connection, heard directly.
            await without.query(sql('ha_bouncer_notify', "SELECT pg_notify('ha_bouncer_direct', 'due')"));
            return heard.includes('due');
          },
          { timeoutMs: 10_000, what: 'the notification on the direct connection' },
        );
        await stop();
        await stopNothing();
      } finally {
        await withDirect.close();
        await without.close();
      }
    });

    it('lets the multi-host client check a host through PgBouncer (by query: PgBouncer does not pass in_hot_standby on)', async () => {
      const down = `127.0.0.1:${await freePort()}`;
      const hosts = MultiHost.fromUrl(
        `postgres://root@${down},127.0.0.1:${bouncer.port}/${database}?target_session_attrs=read-write`,
      );
      const pool = new pg.Pool({ ...hosts.poolConfig(), max: 2 });
      hosts.watch(pool);
      try {
        const { rows } = await pool.query<{ n: number }>('SELECT $1::int AS n', [7]);
        expect(rows[0]!.n).toBe(7);
        expect(hosts.status().host).toBe(`127.0.0.1:${bouncer.port}`);
      } finally {
        await pool.end();
      }
    });

    it('measures what PgBouncer costs per statement (printed, not asserted)', async () => {
      const direct = await connect(t.url!);
      const through = await connect(bouncer);
      // Interleaved batches and the median batch, so a busy neighbour on the machine skews less.
      const batches = 15;
      const perBatch = 200;
      const variants = {
        directNamedUs: { client: direct, named: true },
        directUnnamedUs: { client: direct, named: false },
        pgbouncerUnnamedUs: { client: through, named: false },
      };
      const samples: Record<string, number[]> = {};
      for (let b = -1; b < batches; b++) {
        for (const [key, { client, named }] of Object.entries(variants)) {
          const started = process.hrtime.bigint();
          for (let i = 0; i < perBatch; i++) {
            await client.query(
              named
                ? { name: 'cost', text: 'SELECT $1::int AS n', values: [i] }
                : { text: 'SELECT $1::int AS n', values: [i] },
            );
          }
          // The first batch warms up (and prepares the named statement).
          if (b >= 0)
            (samples[key] ??= []).push(Number(process.hrtime.bigint() - started) / 1_000 / perBatch);
        }
      }
      const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
      const figures = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, Math.round(median(v))]));
      console.log(
        `[pgbouncer cost] one parameterised SELECT, µs per statement (median of ${batches} interleaved batches of ${perBatch}):`,
        figures,
      );
      expect(figures.pgbouncerUnnamedUs).toBeGreaterThan(0);
    });
  },
);
