/**
 * The library on the embedded store (PGlite): nothing to install. Your own writes go through
 * `chronos.pglite`, so they share the one embedded database.
 * Run: npx tsx examples/library-embedded.ts
 */
import { createChronos } from '../packages/chronos-timers/src/index.js'; // in your application: from 'chronos-timers'

const chronos = await createChronos({ dataDir: process.env.CHRONOS_DATA_DIR ?? './.chronos-example' });
await chronos.migrate();
const db = chronos.pglite!;
await db.exec('CREATE TABLE IF NOT EXISTS orders (id INT PRIMARY KEY, state TEXT NOT NULL)');
const orderId = Math.floor(Math.random() * 1e9);

await db.transaction(async (tx) => {
  await tx.query(`INSERT INTO orders (id, state) VALUES ($1, 'placed')`, [orderId]);
  await chronos.schedule(tx, { key: `order:${orderId}:expire`, at: new Date(), payload: { orderId } });
});

await new Promise<void>((resolve) => {
  const worker = chronos.work(async (fire) => {
    const { orderId: id } = fire.payload as { orderId: number };
    await db.query(`UPDATE orders SET state = 'expired' WHERE id = $1`, [id]);
    console.log(`timer ${fire.key} fired ${fire.latenessMs} ms late`);
    void worker.stop().then(resolve);
  });
});
const { rows } = await db.query<{ state: string }>('SELECT state FROM orders WHERE id = $1', [orderId]);
console.log(`order ${orderId} is ${rows[0]!.state}`);
await chronos.close();
