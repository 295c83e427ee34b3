/**
 * The library on a test database, and the caller's transaction in the form each backend gives
 * it (a node-postgres client inside BEGIN, or a PGlite transaction), so one test runs on both.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  createChronos,
  type Chronos,
  type ChronosOptions,
} from '../../packages/chronos-timers/src/library.js';
import { LiteDb, PgDb, sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import type { TestDatabase } from './databases.js';

export async function libraryOn(t: TestDatabase, options: Partial<ChronosOptions> = {}): Promise<Chronos> {
  if (t.db instanceof PgDb) return createChronos({ pool: t.db.pool, pollIntervalMs: 50, ...options });
  if (t.db instanceof LiteDb) return createChronos({ pglite: t.db.lite, pollIntervalMs: 50, ...options });
  throw new Error('unknown backend');
}

/** Runs `fn` on a transaction of the caller's own; commits, or rolls back when `rollback`. */
export async function inCallerTransaction<T>(
  t: Pick<TestDatabase, 'db'>,
  fn: (tx: unknown) => Promise<T>,
  options: { rollback?: boolean } = {},
): Promise<T> {
  if (t.db instanceof PgDb) {
    const client = await t.db.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query(options.rollback ? 'ROLLBACK' : 'COMMIT');
      return result;
    } finally {
      client.release();
    }
  }
  if (t.db instanceof LiteDb) {
    return t.db.lite.transaction(async (tx) => {
      const result = await fn(tx);
      if (options.rollback) await tx.rollback();
      return result;
    });
  }
  throw new Error('unknown backend');
}

const createOrders = `CREATE TABLE IF NOT EXISTS app_orders (id INT PRIMARY KEY, state TEXT NOT NULL)`;
const countOrders = sql('test_count_orders', 'SELECT count(*)::int AS n FROM app_orders');

/** An application table for the caller's own state change. */
export async function appOrders(t: TestDatabase): Promise<{ count(): Promise<number> }> {
  await t.db.exec(createOrders);
  await t.db.exec('TRUNCATE app_orders');
  return {
    count: async () => (await t.db.query<{ n: number }>(countOrders))[0]!.n,
  };
}

/** The caller's own write, on its transaction. */
export async function insertOrder(tx: unknown, id: number): Promise<void> {
  const text = 'INSERT INTO app_orders (id, state) VALUES ($1, $2)';
  await (tx as { query(text: string, values: unknown[]): Promise<unknown> }).query(text, [id, 'placed']);
}

/**
 * Opens the embedded store in `dir` from a second process through the library, as another
 * application would: exit status 0 when it opened, 3 when it was refused (its message on stderr).
 */
export function openFromAnotherProcess(dir: string): { status: number | null; stderr: string } {
  const script = `import { createChronos } from './packages/chronos-timers/src/index.ts';
    try { await createChronos({ dataDir: ${JSON.stringify(dir)} }); process.exit(0); }
    catch (e) { console.error(e.message); process.exit(3); }`;
  return spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: fileURLToPath(new URL('../../', import.meta.url)),
    encoding: 'utf8',
  });
}
