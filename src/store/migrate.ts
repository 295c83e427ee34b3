/**
 * Forward-only migrations: the `.sql` files of a directory applied in lexical order, each
 * recorded in `chronos_schema_migrations` so Chronos can share a database with other services.
 *
 * All pending files run in one transaction under an advisory lock: two instances starting at
 * once apply them once, and a failing file leaves nothing half-applied. Re-running is a no-op.
 */
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { sql, type Db, type Executor } from './db.js';

/** Found from this module's own location, whatever the working directory. */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

// hashtext('chronos_schema_migrations'), fixed so every version of Chronos takes the same lock.
const MIGRATION_LOCK = 0x6368726f;

const lock = sql('migrations_lock', 'SELECT pg_advisory_xact_lock($1::int8)');
const ensureTable = `CREATE TABLE IF NOT EXISTS chronos_schema_migrations (
  version    TEXT PRIMARY KEY,
  applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`;
const applied = sql('migrations_applied', 'SELECT version FROM chronos_schema_migrations ORDER BY version');
const record = sql('migrations_record', 'INSERT INTO chronos_schema_migrations (version) VALUES ($1)');
const tableExists = sql(
  'migrations_table_exists',
  "SELECT to_regclass('chronos_schema_migrations') IS NOT NULL AS present",
);

export async function migrationFiles(dir = MIGRATIONS_DIR): Promise<string[]> {
  return (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
}

/** Applies pending migrations; returns the versions applied by this call. */
export async function migrate(db: Db, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = await migrationFiles(dir);
  return db.transaction(async (tx) => {
    await tx.query(lock, [MIGRATION_LOCK]);
    await tx.exec(ensureTable);
    const done = new Set((await tx.query<{ version: string }>(applied)).map((r) => r.version));
    const pending = files.filter((f) => !done.has(versionOf(f)));
    for (const file of pending) {
      await tx.exec(await readFile(join(dir, file), 'utf8'));
      await tx.query(record, [versionOf(file)]);
    }
    return pending.map(versionOf);
  });
}

/** The versions not yet applied (empty when the schema is current). */
export async function pendingMigrations(db: Executor, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = await migrationFiles(dir);
  const [row] = await db.query<{ present: boolean }>(tableExists);
  if (!row?.present) return files.map(versionOf);
  const done = new Set((await db.query<{ version: string }>(applied)).map((r) => r.version));
  return files.map(versionOf).filter((v) => !done.has(v));
}

function versionOf(file: string): string {
  return file.replace(/\.sql$/, '');
}
