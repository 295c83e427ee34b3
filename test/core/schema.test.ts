/**
 * Chronos in its own schema (contract §2): beside other services' tables of the same names, in a
 * schema of the operator's choosing, and moved into it from a deployment made before it existed.
 * Each case starts from an empty database (PostgreSQL) or an empty PGlite, not the test template.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { createChronos } from '../../packages/chronos-timers/src/library.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import { LiteDb, PgDb, sql, type Db } from '../../packages/chronos-timers/src/store/driver/db.js';
import {
  migrate,
  migrationFiles,
  MIGRATIONS_DIR,
} from '../../packages/chronos-timers/src/store/driver/migrate.js';
import type { TimerFire } from '../../packages/chronos-timers/src/receivers/handler.js';
import { describeEachBackend } from '../support/backends.js';
import { OWNER, RecordingReceiver, until } from '../support/harness.js';
import { inCallerTransaction } from '../support/library.js';
import { TEST_DATABASE_URL, withDatabase } from '../support/env.js';

interface Fresh {
  /** A store on the empty database in `schema`. */
  open(schema?: string): Promise<Db>;
  /** Statements with no schema of Chronos's: the other services' side. */
  raw(text: string): Promise<Record<string, unknown>[]>;
  /** A script of several statements. */
  script(text: string): Promise<void>;
  /** The library on it. */
  library(schema?: string): ReturnType<typeof createChronos>;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const clean of cleanups.splice(0).reverse()) await clean();
});

async function freshDatabase(kind: 'postgres' | 'pglite'): Promise<Fresh> {
  if (kind === 'pglite') {
    const lite = await PGlite.create();
    cleanups.push(() => lite.close());
    return {
      open: async (schema) => new LiteDb(lite, undefined, schema),
      raw: async (text) => (await lite.query<Record<string, unknown>>(text)).rows,
      script: async (text) => void (await lite.exec(text)),
      library: (schema) => createChronos({ pglite: lite, schema }),
    };
  }
  const name = `chronos_fresh_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = withDatabase(TEST_DATABASE_URL, name);
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  cleanups.push(async () => {
    await pool.end();
    const drop = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await drop.connect();
    await drop.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await drop.end();
  });
  return {
    open: async (schema) => new PgDb(pool, false, schema),
    raw: async (text) => (await pool.query(text)).rows as Record<string, unknown>[],
    script: async (text) => void (await pool.query(text)),
    library: (schema) => createChronos({ pool, schema }),
  };
}

// Other services' tables with Chronos's names, in the default schema (the seed's router and gateway).
const NEIGHBOURS = `
  CREATE TABLE public.alarms (id SERIAL PRIMARY KEY, what TEXT NOT NULL);
  CREATE TABLE public.wakes (id SERIAL PRIMARY KEY, who TEXT NOT NULL);
  CREATE TABLE public.api_keys (token TEXT PRIMARY KEY);
  CREATE TABLE public.schema_migrations (version TEXT PRIMARY KEY);
  INSERT INTO public.alarms (what) VALUES ('the router''s own');
  INSERT INTO public.wakes (who) VALUES ('the gateway''s own');
  INSERT INTO public.api_keys VALUES ('gateway-token');
  INSERT INTO public.schema_migrations VALUES ('20240101_router');`;

const neighbourState = `SELECT
  (SELECT json_agg(a ORDER BY id)::text FROM public.alarms a) AS alarms,
  (SELECT json_agg(w ORDER BY id)::text FROM public.wakes w) AS wakes,
  (SELECT json_agg(k)::text FROM public.api_keys k) AS keys,
  (SELECT json_agg(m)::text FROM public.schema_migrations m) AS migrations,
  (SELECT string_agg(column_name, ',' ORDER BY ordinal_position) FROM information_schema.columns
    WHERE table_schema = 'public' AND table_name = 'alarms') AS alarm_columns`;

const tablesIn = (schema: string) =>
  `SELECT string_agg(table_name, ',' ORDER BY table_name) AS tables FROM information_schema.tables
   WHERE table_schema = '${schema}'`;

describeEachBackend('Chronos in its own schema', ({ kind }) => {
  it('migrates and runs beside other services’ alarms, wakes, api_keys and schema_migrations, leaving them as they were', async () => {
    const fresh = await freshDatabase(kind);
    await fresh.script(NEIGHBOURS);
    const before = await fresh.raw(neighbourState);

    const db = await fresh.open();
    const applied = await migrate(db);
    expect(applied).toEqual((await migrationFiles()).map((f) => f.replace(/\.sql$/, '')));
    expect(await fresh.raw(neighbourState)).toEqual(before);
    expect((await fresh.raw(tablesIn('chronos')))[0]!.tables).toBe(
      'alarms,api_keys,chronos_schema_migrations,schedule_changes,schedule_file_entries,wake_attempts,wakes',
    );

    // It runs: a key, an alarm, a fire — and the neighbours still have only their own rows.
    const service = await ChronosService.open(loadConfig({}), {
      db,
      logger: silentLogger,
      receiver: new RecordingReceiver(),
    });
    await service.keys.create(OWNER.did, 'beside');
    const { alarm } = await service.alarms.create(OWNER, { at: new Date().toISOString() }, { source: 'api' });
    expect(await service.dispatcher.runOnce()).toBe(1);
    expect((await service.alarms.get(OWNER, alarm.id)).status).toBe('fired');
    expect(await fresh.raw(neighbourState)).toEqual(before);
  });

  it('lives in the schema it is given (CHRONOS_SCHEMA, the library’s `schema`), and two schemas do not meet', async () => {
    const fresh = await freshDatabase(kind);
    const ours = await fresh.library('billing_timers');
    await ours.migrate();
    const theirs = await fresh.library();
    await theirs.migrate();
    await ours.schedule(null, { key: 'k', at: new Date() });
    expect(await theirs.get('k')).toBeNull();
    expect((await ours.get('k'))?.status).toBe('active');
    expect((await fresh.raw(tablesIn('billing_timers')))[0]!.tables).toContain('alarms');
    // A batch in parts on the application's transaction (copied, on PostgreSQL) lands there too.
    const batch = Array.from({ length: 1_200 }, (_, i) => ({ key: `b:${i}`, inSeconds: 600 }));
    const made = await inCallerTransaction({ db: await fresh.open() }, (tx) => ours.scheduleMany(tx, batch));
    expect((await ours.get('b:1199'))?.id).toBe(made[1_199]!.id);
    expect(await theirs.get('b:1199')).toBeNull();

    const fires: TimerFire[] = [];
    const worker = ours.work((fire) => void fires.push(fire));
    await until(() => fires.length > 0, 'the timer in its own schema to fire');
    await worker.stop();
    expect(fires.map((f) => f.key)).toEqual(['k']);
    await Promise.all([ours.close(), theirs.close()]);

    expect(() => loadConfig({ CHRONOS_SCHEMA: 'Bad-Name' })).toThrow(
      /CHRONOS_SCHEMA: expected a schema name of lower-case letters/,
    );
  });

  it('moves a deployment made before the schema existed into it, with nothing lost, and it keeps firing', async () => {
    const fresh = await freshDatabase(kind);
    // The last layout before the schema: migrations 0001–0007 in the default schema, its ledger there.
    await fresh.raw(`CREATE TABLE chronos_schema_migrations (version TEXT PRIMARY KEY,
      applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`);
    for (const file of (await migrationFiles()).filter((f) => f < '0008')) {
      await fresh.script(await readFile(join(MIGRATIONS_DIR, file), 'utf8'));
      await fresh.raw(
        `INSERT INTO chronos_schema_migrations (version) VALUES ('${file.replace(/\.sql$/, '')}')`,
      );
    }
    const hash = 'a'.repeat(64);
    await fresh.raw(
      `INSERT INTO api_keys (id, owner_did, key_hash, label) VALUES ('key_old', '${OWNER.did}', '${hash}', 'old')`,
    );
    await fresh.raw(`INSERT INTO alarms (id, owner_did, user_id, label, kind, fire_at, next_fire_at, scheduled_for,
        payload, source, require_ack)
      VALUES ('11111111-2222-4333-8444-555555555555', '${OWNER.did}', '${OWNER.userId}', 'from before', 'once',
        now() - interval '1 minute', now() - interval '1 minute', now() - interval '1 minute',
        '{"big": 12345678901234567890}', 'api', true),
      ('66666666-2222-4333-8444-555555555555', 'did:matrix:00000000-0000-0000-0000-000000000000:lib',
        '00000000-0000-0000-0000-000000000000', '', 'once', now(), now() - interval '1 minute',
        now() - interval '1 minute', '{}', 'library', false)`);
    await fresh.raw(`INSERT INTO wakes (id, alarm_id, owner_did, user_id, scheduled_for, status)
      VALUES ('77777777-2222-4333-8444-555555555555', '11111111-2222-4333-8444-555555555555', '${OWNER.did}',
        '${OWNER.userId}', now() - interval '2 days', 'acknowledged')`);

    const db = await fresh.open();
    expect(await migrate(db)).toEqual(
      (await migrationFiles()).filter((f) => f >= '0008').map((f) => f.replace(/\.sql$/, '')),
    );
    expect((await fresh.raw(tablesIn('public')))[0]!.tables).toBeNull();
    const count = sql(
      'test_moved',
      `SELECT (SELECT count(*)::int FROM chronos.alarms) AS alarms,
      (SELECT count(*)::int FROM chronos.wakes) AS wakes, (SELECT count(*)::int FROM chronos.api_keys) AS keys,
      (SELECT string_agg(queue, ',' ORDER BY id) FROM chronos.alarms) AS queues`,
    );
    expect((await db.query(count))[0]).toEqual({ alarms: 2, wakes: 1, keys: 1, queues: 'router,default' });

    // Still firing: the agent's alarm through the service, the library's through a worker.
    const receiver = new RecordingReceiver();
    const service = await ChronosService.open(loadConfig({}), { db, logger: silentLogger, receiver });
    expect(await service.dispatcher.runOnce()).toBe(1);
    expect(receiver.fires[0]!.alarm).toMatchObject({ label: 'from before' });
    expect(receiver.fires[0]!.alarm.payload.text).toBe('{"big": 12345678901234567890}');
    const chronos = await fresh.library();
    const fires: TimerFire[] = [];
    const worker = chronos.work((fire) => void fires.push(fire));
    await until(() => fires.length > 0, 'the library timer from before to fire');
    await worker.stop();
    await chronos.close();
    // Migrating again is a no-op.
    expect(await migrate(db)).toEqual([]);
  });
});
