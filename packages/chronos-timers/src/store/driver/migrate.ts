/**
 * Forward-only migrations: the `.sql` files of a directory applied in lexical order, each
 * recorded in `<schema>.chronos_schema_migrations`, so Chronos shares a database with other
 * services without touching their tables (contract §2).
 *
 * All pending files run in one transaction under an advisory lock: two instances starting at
 * once apply them once, and a failing file leaves nothing half-applied. Re-running is a no-op.
 * The files name no schema: they run with `search_path` set to Chronos's schema for that
 * transaction only (`SET LOCAL`), so the caller's session settings are left as they were.
 *
 * **Moving in.** Before the schema existed, Chronos kept its tables (`alarms`, `wakes`,
 * `wake_attempts`, `api_keys`) and its ledger in the connection's default schema. When the
 * schema has no ledger yet and the default schema holds a Chronos ledger, those tables are moved
 * into the schema (`ALTER TABLE … SET SCHEMA`: rows, indexes and constraints move with them, in
 * the same transaction) before the pending files run. A database where another service has
 * tables of the same names but no Chronos ledger is left as it is.
 */
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { sql, type Db, type Executor } from './db.js';

/** Found from this module's own location, whatever the working directory. */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/', import.meta.url));

// hashtext('chronos_schema_migrations'), fixed so every version of Chronos takes the same lock.
const MIGRATION_LOCK = 0x6368726f;

/** Chronos's tables as they were before the schema: what the move carries over. */
const LEGACY_TABLES = ['alarms', 'wakes', 'wake_attempts', 'api_keys', 'chronos_schema_migrations'];

const lock = sql('migrations_lock', 'SELECT pg_advisory_xact_lock($1::int8)');
const applied = sql(
  'migrations_applied',
  'SELECT version FROM chronos.chronos_schema_migrations ORDER BY version',
);
const record = sql(
  'migrations_record',
  'INSERT INTO chronos.chronos_schema_migrations (version) VALUES ($1)',
);
const ledgerExists = sql(
  'migrations_ledger_exists',
  "SELECT to_regclass('chronos.chronos_schema_migrations') IS NOT NULL AS present",
);
// The schema of a Chronos ledger found by the session's own search_path (a deployment made
// before Chronos had a schema), if it holds Chronos's first migration.
const legacyLedger = sql(
  'migrations_legacy_ledger',
  `SELECT n.nspname AS schema FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.oid = to_regclass('chronos_schema_migrations') AND n.nspname <> $1`,
);
const legacyFirst = (schema: string) =>
  sql(
    `migrations_legacy_first_${schema}`,
    `SELECT EXISTS (SELECT 1 FROM ${quote(schema)}.chronos_schema_migrations WHERE version = '0001_init') AS chronos`,
  );

export async function migrationFiles(dir = MIGRATIONS_DIR): Promise<string[]> {
  return (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
}

/** Applies pending migrations; returns the versions applied by this call. */
export async function migrate(db: Db, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = await migrationFiles(dir);
  const schema = db.schema;
  return db.transaction(async (tx) => {
    await tx.query(lock, [MIGRATION_LOCK]);
    await tx.exec(`CREATE SCHEMA IF NOT EXISTS ${quote(schema)}`);
    const [ledger] = await tx.query<{ present: boolean }>(ledgerExists);
    if (!ledger?.present) await moveIn(tx, schema);
    await tx.exec(`SET LOCAL search_path TO ${quote(schema)}`);
    await tx.exec(`CREATE TABLE IF NOT EXISTS chronos_schema_migrations (
      version    TEXT PRIMARY KEY,
      applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )`);
    const done = new Set((await tx.query<{ version: string }>(applied)).map((r) => r.version));
    const pending = files.filter((f) => !done.has(versionOf(f)));
    for (const file of pending) {
      await tx.exec(await readFile(join(dir, file), 'utf8'));
      await tx.query(record, [versionOf(file)]);
    }
    return pending.map(versionOf);
  });
}

/** Moves a deployment made before the schema existed into it (see the module comment). */
async function moveIn(tx: Executor, schema: string): Promise<void> {
  const [found] = await tx.query<{ schema: string }>(legacyLedger, [schema]);
  if (!found) return;
  const [first] = await tx.query<{ chronos: boolean }>(legacyFirst(found.schema));
  if (!first?.chronos) return;
  for (const table of LEGACY_TABLES) {
    await tx.exec(`ALTER TABLE IF EXISTS ${quote(found.schema)}.${table} SET SCHEMA ${quote(schema)}`);
  }
}

/** The versions not yet applied (empty when the schema is current). */
export async function pendingMigrations(db: Executor, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = await migrationFiles(dir);
  const [row] = await db.query<{ present: boolean }>(ledgerExists);
  if (!row?.present) return files.map(versionOf);
  const done = new Set((await db.query<{ version: string }>(applied)).map((r) => r.version));
  return files.map(versionOf).filter((v) => !done.has(v));
}

function versionOf(file: string): string {
  return file.replace(/\.sql$/, '');
}

function quote(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}
