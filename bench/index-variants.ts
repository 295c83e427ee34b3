/**
 * What migration 0016 saves a scheduled library timer (issue 18, bulk scheduling): batches of
 * `--rows` rows shaped as `scheduleMany` writes them (one owner, a key each, due an hour ahead)
 * are inserted by PostgreSQL alone from a table it filled first — no client, nothing on the
 * socket — on the indexes of 0015 and of 0016, and on each of 0016's two changes alone:
 *
 * - `0015`: the indexed text columns in the database's collation, alarms_owner_idx on every row;
 * - `collation C`: owner, key and queue compared as bytes (0016's first change);
 * - `owner index without library`: alarms_owner_idx leaving library timers out (its second);
 * - `0016`: both.
 *
 * The variants take turns, `--rounds` times, five inserts each after TRUNCATE and CHECKPOINT, so
 * the machine's drift falls on all of them alike; the figure is each variant's median.
 *
 *   npx tsx bench/index-variants.ts [--rows=5000] [--rounds=6]
 *
 * Result: bench/results/index-variants.json.
 */
import pg from 'pg';
import { createChronos } from '../packages/chronos-timers/src/index.js';
import { createEmptyPostgres, libraryRows, log, numberArg, timedInserts, writeResult } from './support.js';

const ROWS = numberArg('rows', 5_000);
const ROUNDS = numberArg('rounds', 6);

const collation = (name: string) =>
  `ALTER TABLE chronos.alarms ALTER COLUMN owner_did TYPE text COLLATE "${name}",
     ALTER COLUMN idempotency_key TYPE text COLLATE "${name}", ALTER COLUMN queue TYPE text COLLATE "${name}"`;
const ownerIndex = (where: string) =>
  `DROP INDEX chronos.alarms_owner_idx;
   CREATE INDEX alarms_owner_idx ON chronos.alarms (owner_did, created_at DESC) ${where}`;
const EVERY_ROW = ownerIndex('');
const NOT_LIBRARY = ownerIndex(`WHERE source <> 'library'`);
const VARIANTS: Record<string, string[]> = {
  '0015': [collation('default'), EVERY_ROW],
  'collation C': [collation('C'), EVERY_ROW],
  'owner index without library': [collation('default'), NOT_LIBRARY],
  '0016': [collation('C'), NOT_LIBRARY],
};

const bench = await createEmptyPostgres('index_variants');
const chronos = await createChronos({ databaseUrl: bench.url! });
await chronos.migrate();
await chronos.close();
const c = new pg.Client({ connectionString: bench.url! });
await c.connect();
const { create, insert } = libraryRows('index_variant_rows', ROWS);
await c.query(create);

const ms: Record<string, number[]> = {};
try {
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, statements] of Object.entries(VARIANTS)) {
      await c.query('TRUNCATE chronos.alarms');
      for (const statement of statements) await c.query(statement);
      (ms[name] ??= []).push(...(await timedInserts(c, insert)));
    }
    log(`round ${round} of ${ROUNDS} done`);
  }
  const results = Object.entries(ms).map(([variant, all]) => {
    const sorted = [...all].sort((a, b) => a - b);
    const median = sorted[sorted.length >> 1]!;
    return {
      variant,
      medianMs: Math.round(median * 100) / 100,
      usPerRow: Math.round((median * 10_000) / ROWS) / 10,
      minMs: Math.round(sorted[0]! * 100) / 100,
    };
  });
  for (const r of results)
    log(`${r.variant}: median ${r.medianMs} ms (${r.usPerRow} µs a row), min ${r.minMs} ms`);
  await writeResult('index-variants', { rows: ROWS, rounds: ROUNDS, results });
} finally {
  await c.end();
  await bench.drop();
}
