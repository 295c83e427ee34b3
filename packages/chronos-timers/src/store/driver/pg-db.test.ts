import pg from 'pg';
import { expect, it } from 'vitest';
import { PgDb } from './db.js';

it('gives a pool one listener for its idle clients’ errors, however many stores are opened on it', async () => {
  // Never connected: the pool opens no connection until a query.
  const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
  const before = pool.listenerCount('error');
  for (let i = 0; i < 12; i++) new PgDb(pool, false);
  expect(pool.listenerCount('error')).toBe(before + 1);
  // An idle client's error does not crash the process.
  expect(() => pool.emit('error', new Error('terminated'), {} as pg.PoolClient)).not.toThrow();
  await pool.end();
});
