import { afterAll, afterEach, beforeAll, expect, it, vi } from 'vitest';
import { CONNECTION_LIFETIME_S, PgDb, sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describePostgresOnly } from '../support/backends.js';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';

const backendPid = sql('test_backend_pid', 'SELECT pg_backend_pid() AS pid');

describePostgresOnly('PGlite has no connections to retire', 'a PostgreSQL store’s connections', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await t.close();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('retire after their lifetime, so no prepared plan outlives it', async () => {
    // Only the pool's timers are faked; the idle timeout is off, so the lifetime alone retires.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const db = PgDb.connect(t.url!, 1, { idleTimeoutMillis: 0 });
    try {
      const pid = async () => (await db.query<{ pid: number }>(backendPid))[0]!.pid;
      const first = await pid();
      vi.advanceTimersByTime(CONNECTION_LIFETIME_S * 1_000 - 1_000);
      expect(await pid()).toBe(first);
      vi.advanceTimersByTime(2_000);
      expect(await pid()).not.toBe(first);
      expect(CONNECTION_LIFETIME_S).toBe(600);
    } finally {
      await db.close();
    }
  });
});
