/**
 * Prepared once per test run: a migrated PostgreSQL template database (each test file copies
 * it) and a migrated PGlite data directory dump (each test file loads it). Migrating once is
 * what keeps PGlite's seconds-long first initialisation out of every test file.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import type { TestProject } from 'vitest/node';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { LiteDb, PgDb } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { PG_TEMPLATE, TEST_DATABASE_URL, TMP_DIR, LITE_TEMPLATE_FILE, withDatabase } from './env.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgres: boolean;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  await mkdir(TMP_DIR, { recursive: true });
  const postgres = await preparePostgres();
  project.provide('postgres', postgres);
  await preparePglite();
  return async () => {};
}

async function preparePostgres(): Promise<boolean> {
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  try {
    await admin.connect();
  } catch (error) {
    const message = `PostgreSQL is not reachable at ${TEST_DATABASE_URL} (${(error as Error).message})`;
    if (process.env.CI)
      throw new Error(`${message}; in CI a missing database is a failure`, { cause: error });
    console.warn(
      `\n!!! ${message}.\n!!! The PostgreSQL leg of the suite is NOT running: only PGlite is tested.\n` +
        '!!! Start PostgreSQL or set TEST_DATABASE_URL.\n',
    );
    return false;
  }
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${PG_TEMPLATE} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${PG_TEMPLATE}`);
  } finally {
    await admin.end();
  }
  const db = withDatabase(TEST_DATABASE_URL, PG_TEMPLATE);
  const template = PgDb.connect(db, 1);
  try {
    await migrate(template);
  } finally {
    await template.close();
  }
  return true;
}

async function preparePglite(): Promise<void> {
  const lite = await PGlite.create();
  await migrate(new LiteDb(lite));
  const dump = await lite.dumpDataDir('gzip');
  await writeFile(LITE_TEMPLATE_FILE, Buffer.from(await dump.arrayBuffer()));
  await lite.close();
}
