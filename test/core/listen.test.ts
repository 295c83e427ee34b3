/**
 * A PostgreSQL store LISTENs on one connection of its own, shared by every listener and channel
 * (store/driver/db.ts, `PgListener`): made by the first listen(), kept until close(), so a worker
 * started again listens at once, with no connection to make. Each listener hears its own channel
 * only; the last listener of a channel unlistens it; a lost connection is made again, listens on
 * every channel again, and tells every listener '' (re-poll: something may have been missed).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PgDb, sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describePostgresOnly } from '../support/backends.js';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';

const listeners = sql(
  'test_listen_backends',
  `SELECT pid, query FROM pg_stat_activity
   WHERE datname = current_database() AND (query LIKE 'LISTEN %' OR query LIKE 'UNLISTEN %')`,
);
const notify = sql('test_listen_notify', 'SELECT pg_notify($1, $2)');
const kill = sql('test_listen_kill', 'SELECT pg_terminate_backend($1::int)');

/** Waits, turn by turn, until `predicate` holds (a reconnection takes its 100 ms backoff). */
async function until(predicate: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describePostgresOnly('PGlite has no connections', 'a PostgreSQL store’s LISTEN connection', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await t.close();
  });

  it('is one for every listener, kept between them, and made again with every channel when lost', async () => {
    const db = PgDb.connect(t.url!, 2);
    try {
      const heard = { a: [] as string[], b: [] as string[], a2: [] as string[] };
      const stopA = await db.listen('test_a', (p) => heard.a.push(p));
      const stopB = await db.listen('test_b', (p) => heard.b.push(p));
      const stopA2 = await db.listen('test_a', (p) => heard.a2.push(p));
      const backends = async () =>
        (await t.db.query<{ pid: number; query: string }>(listeners)).map((r) => r.pid);
      const [pid] = await backends();
      expect(await backends()).toEqual([pid]);

      await t.db.query(notify, ['test_a', 'one']);
      await t.db.query(notify, ['test_b', 'two']);
      await until(
        () => heard.a.length === 1 && heard.b.length === 1 && heard.a2.length === 1,
        'both channels heard',
      );
      expect(heard).toEqual({ a: ['one'], b: ['two'], a2: ['one'] });

      // One of a channel's listeners gone: the other still hears it. Both gone: it is unlistened.
      await stopA();
      await t.db.query(notify, ['test_a', 'three']);
      await until(() => heard.a2.length === 2, 'the remaining listener of test_a');
      expect(heard.a).toEqual(['one']);
      await stopA2();
      await stopB();
      // Kept without listeners; the next listen() uses it (the same backend), unlistened channels
      // stay silent.
      const stopC = await db.listen('test_b', (p) => heard.b.push(p));
      expect(await backends()).toEqual([pid]);
      await t.db.query(notify, ['test_a', 'unheard']);
      await t.db.query(notify, ['test_b', 'four']);
      await until(() => heard.b.length === 2, 'test_b heard again');
      expect(heard.a2).toEqual(['one', 'three']);

      // Lost: made again (another backend), listening on its channel, and the listener told ''.
      await t.db.query(kill, [pid]);
      await until(() => heard.b.length === 3, 'the listener told after the reconnection');
      expect(heard.b[2]).toBe('');
      const [again] = await backends();
      expect(again).not.toBe(pid);
      await t.db.query(notify, ['test_b', 'five']);
      await until(() => heard.b.length === 4, 'test_b heard on the new connection');
      expect(heard.b[3]).toBe('five');
      await stopC();
    } finally {
      await db.close();
    }
    // Closed: nothing listens any more.
    await until(async () => (await t.db.query(listeners)).length === 0, 'the LISTEN connection closed');
  });
});
