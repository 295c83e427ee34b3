/**
 * A database per test file, copied from the run's migrated template: a PostgreSQL database
 * created `TEMPLATE chronos_test_template`, or a PGlite loaded from the template dump.
 */
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import {
  LiteDb,
  PgDb,
  sql,
  type BackendKind,
  type Db,
} from '../../packages/chronos-timers/src/store/driver/db.js';
import { liteTemplateFile, pgTemplateName, TEST_DATABASE_URL, TMP_DIR, withDatabase } from './env.js';

export interface TestDatabase {
  db: Db;
  /** For PostgreSQL: a URL other processes and pools can connect to. */
  url: string | null;
  /** Opens another, independent connection pool on the same database (PostgreSQL only). */
  openPool(max?: number): PgDb;
  /** Empties every Chronos table. */
  reset(): Promise<void>;
  /** Closes every connection and opens the same database again, as a restarted process would. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

const truncate = sql(
  'test_truncate',
  `TRUNCATE chronos.alarms, chronos.wakes, chronos.wake_attempts, chronos.api_keys,
     chronos.schedule_file_entries, chronos.schedule_changes`,
);

export function postgresAvailable(): boolean {
  return inject('postgres');
}

export async function createTestDatabase(kind: BackendKind): Promise<TestDatabase> {
  return kind === 'postgres' ? createPostgres() : createPglite();
}

async function createPostgres(): Promise<TestDatabase> {
  const name = `chronos_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name} TEMPLATE ${pgTemplateName(inject('runId'))}`);
  await admin.end();
  const url = withDatabase(TEST_DATABASE_URL, name);
  const pools: PgDb[] = [];
  const openPool = (max = 10) => {
    const pool = PgDb.connect(url, max);
    pools.push(pool);
    return pool;
  };
  const test: TestDatabase = {
    db: openPool(),
    url,
    openPool,
    reset: async () => {
      await test.db.query(truncate);
    },
    restart: async () => {
      await Promise.all(pools.splice(0).map((p) => p.close()));
      test.db = openPool();
    },
    close: async () => {
      await Promise.all(pools.map((p) => p.close()));
      const drop = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await drop.connect();
      await drop.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await drop.end();
    },
  };
  return test;
}

let liteTemplate: Blob | null = null;

async function createPglite(): Promise<TestDatabase> {
  liteTemplate ??= new Blob([await readFile(liteTemplateFile(inject('runId')))]);
  const dir = join(TMP_DIR, `lite-${process.pid}-${randomBytes(4).toString('hex')}`);
  const open = async () => {
    const lite = await PGlite.create(dir, existsSync(dir) ? {} : { loadDataDir: liteTemplate! });
    return new LiteDb(lite, () => lite.close());
  };
  const test: TestDatabase = {
    db: await open(),
    url: null,
    openPool: () => {
      throw new Error('PGlite has one connection; this case belongs in postgresOnly()');
    },
    reset: async () => {
      await test.db.query(truncate);
    },
    restart: async () => {
      await test.db.close();
      test.db = await open();
    },
    close: async () => {
      await test.db.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return test;
}
