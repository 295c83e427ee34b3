/**
 * What each index on `alarms` costs a scheduled timer (issue 18, bulk scheduling): 50,000 rows
 * shaped as `scheduleMany` writes them (one owner, a key each, due an hour ahead) are inserted by
 * PostgreSQL alone from a table it filled first — no client, nothing on the socket — with every
 * index, then with each index but the primary key and the idempotency key's left out in turn.
 * Five inserts each, after TRUNCATE and CHECKPOINT; two rounds. The difference of the medians is
 * that index's share of the insert.
 *
 *   npx tsx bench/index-cost.ts
 *
 * Result: bench/results/index-cost.json.
 */
import pg from 'pg';
import { createChronos } from '../packages/chronos-timers/src/index.js';
import { createEmptyPostgres, libraryRows, log, timedInserts, writeResult } from './support.js';

const ROWS = 50_000;
const bench = await createEmptyPostgres('index_cost');
const chronos = await createChronos({ databaseUrl: bench.url! });
await chronos.migrate();
await chronos.close();
const c = new pg.Client({ connectionString: bench.url! });
await c.connect();
const indexes = (
  await c.query<{ def: string; name: string }>(
    `SELECT pg_get_indexdef(indexrelid) AS def, indexrelid::regclass::text AS name
     FROM pg_index WHERE indrelid = 'chronos.alarms'::regclass ORDER BY 2`,
  )
).rows;
const { create, insert } = libraryRows('index_cost_rows', ROWS);
await c.query(create);

async function time(): Promise<number> {
  const ms = await timedInserts(c, insert);
  ms.sort((a, b) => a - b);
  return Math.round((ms[2]! * 1000 * 10) / ROWS) / 10;
}

const results: { round: number; without: string | null; usPerRow: number }[] = [];
try {
  for (let round = 1; round <= 2; round++) {
    const all = await time();
    results.push({ round, without: null, usPerRow: all });
    log(`round ${round}: every index ${all} µs a row`);
    for (const index of indexes.filter((i) => !/pkey|idempotency/.test(i.name))) {
      await c.query(`DROP INDEX ${index.name}`);
      const usPerRow = await time();
      await c.query(index.def);
      results.push({ round, without: index.name, usPerRow });
      log(`round ${round}: without ${index.name} ${usPerRow} µs a row`);
    }
  }
  await writeResult('index-cost', { rows: ROWS, indexes: indexes.map((i) => i.def), results });
} finally {
  await c.end();
  await bench.drop();
}
