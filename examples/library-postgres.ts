/**
 * The library on PostgreSQL: an order and its expiry timer written in one transaction.
 * Run: DATABASE_URL=postgres://… npx tsx examples/library-postgres.ts
 */
import pg from 'pg';
import { createChronos } from '../packages/chronos-timers/src/index.js'; // in your application: from 'chronos-timers'

const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test',
});
const chronos = await createChronos({ pool });
await chronos.migrate();
await pool.query('CREATE TABLE IF NOT EXISTS orders (id INT PRIMARY KEY, state TEXT NOT NULL)');
const orderId = Math.floor(Math.random() * 1e9);

// 1. The order and its expiry timer commit together, or not at all.
const client = await pool.connect();
try {
  await client.query('BEGIN');
  await client.query(`INSERT INTO orders (id, state) VALUES ($1, 'placed')`, [orderId]);
  await chronos.schedule(client, {
    key: `order:${orderId}:expire`,
    at: new Date(), // due now, for the example; in real life e.g. { inSeconds: 3 * 86400 }
    payload: { orderId },
  });
  await client.query('COMMIT');
} catch (error) {
  await client.query('ROLLBACK');
  throw error;
} finally {
  client.release();
}

// 2. Rolled back: neither the order nor its timer exists, and nothing will ever fire.
const other = await pool.connect();
await other.query('BEGIN');
await other.query(`INSERT INTO orders (id, state) VALUES ($1, 'placed')`, [orderId + 1]);
await chronos.schedule(other, {
  key: `order:${orderId + 1}:expire`,
  at: new Date(),
  payload: { orderId: orderId + 1 },
});
await other.query('ROLLBACK');
other.release();
console.log('rolled back timer exists:', (await chronos.get(`order:${orderId + 1}:expire`)) !== null);

// 3. A worker calls the handler for each due timer (at least once: deduplicate on fire.key).
await new Promise<void>((resolve) => {
  const worker = chronos.work(async (fire) => {
    const { orderId: id } = fire.payload as { orderId: number };
    await pool.query(`UPDATE orders SET state = 'expired' WHERE id = $1 AND state = 'placed'`, [id]);
    console.log(`timer ${fire.key} fired ${fire.latenessMs} ms late`);
    void worker.stop().then(resolve);
  });
});
const { rows } = await pool.query('SELECT state FROM orders WHERE id = $1', [orderId]);
console.log(`order ${orderId} is ${rows[0].state}`);
await chronos.close();
await pool.end();
