/**
 * Prepared once per test run: a migrated PostgreSQL template database (each test file copies
 * it) and a migrated PGlite data directory dump (each test file loads it). Migrating once is
 * what keeps PGlite's seconds-long first initialisation out of every test file.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import type { TestProject } from 'vitest/node';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { LiteDb, PgDb } from '../../packages/chronos-timers/src/store/driver/db.js';
import { migrate } from '../../packages/chronos-timers/src/store/driver/migrate.js';
import { liteTemplateFile, pgTemplateName, TEST_DATABASE_URL, TMP_DIR, withDatabase } from './env.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgres: boolean;
    runId: number;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  await mkdir(TMP_DIR, { recursive: true });
  const runId = process.pid;
  const template = pgTemplateName(runId);
  const postgres = await preparePostgres(template);
  project.provide('postgres', postgres);
  project.provide('runId', runId);
  await preparePglite(liteTemplateFile(runId));
  return async () => {
    await rm(liteTemplateFile(runId), { force: true });
    if (postgres) await dropDatabase(template);
  };
}

async function dropDatabase(name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

async function preparePostgres(template: string): Promise<boolean> {
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
    await admin.query(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${template}`);
  } finally {
    await admin.end();
  }
  const db = PgDb.connect(withDatabase(TEST_DATABASE_URL, template), 1);
  try {
    await migrate(db);
  } finally {
    await db.close();
  }
  return true;
}

async function preparePglite(file: string): Promise<void> {
  const lite = await PGlite.create();
  await migrate(new LiteDb(lite));
  const dump = await lite.dumpDataDir('gzip');
  await writeFile(file, Buffer.from(await dump.arrayBuffer()));
  await lite.close();
}
