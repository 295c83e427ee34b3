/**
 * Statement cost: the CPU a PostgreSQL backend spends on the dispatcher's two statements — the
 * claim and the recording of outcomes — per alarm, by batch size. Where the drain's database CPU
 * goes, measured without the noise of a whole drain.
 *
 * One connection per variant (so one backend, whose CPU time is read from
 * `/proc/<pid>/schedstat` in nanoseconds: the server must run on this machine). Each iteration
 * loads `--batch` alarms due now, claims them (`alarmsClaimDue`), and records every one delivered
 * (`alarmsRecordOutcomes`); each step is timed on the backend alone. Two baselines are timed the
 * same way: `SELECT 1` (a round trip) and a one-row `UPDATE` (a round trip and a commit).
 *
 * `--variants` compares schema changes in one run, iterations interleaved so drift in the
 * machine's load falls on every variant alike: a JSON object of name → SQL run after migrating
 * that variant's own database, e.g.
 *
 *   npx tsx bench/statement-cost.ts --batch=200 --iterations=40 \
 *     --variants='{"as is":"","no attempt FK":"ALTER TABLE chronos.wake_attempts DROP CONSTRAINT wake_attempts_wake_id_fkey"}'
 *
 * `--library` times a library worker's statements instead of `chronos serve`'s: the claim without
 * history and, finished timers kept for no time, the fired one-shots deleted (the head-to-head's
 * fastest settings); its results go to `statement-cost-library-b<batch>.json`.
 *
 * The first five iterations warm up (custom plans, then the generic plan) and are not counted.
 */
import { decideOutcome } from '../packages/chronos-timers/src/dispatch/outcome.js';
import { alarmsClaimDue, alarmsRecordOutcomes } from '../packages/chronos-timers/src/store/claims.js';
import { PgDb, sql } from '../packages/chronos-timers/src/store/driver/db.js';
import {
  createPostgres,
  loadDueAlarms,
  log,
  numberArg,
  percentile,
  threadCpuUs,
  writeResult,
} from './support.js';

const BATCH = numberArg('batch', 200);
const ITERATIONS = numberArg('iterations', 40);
const WARM_UP = 5;
const LIBRARY = process.argv.includes('--library');
const variantsArg = process.argv.find((a) => a.startsWith('--variants='))?.slice('--variants='.length);
const variants: Record<string, string> = variantsArg ? JSON.parse(variantsArg) : { 'as is': '' };

const backendPid = sql('bench_backend_pid', 'SELECT pg_backend_pid() AS pid');
const selectOne = sql('bench_select_one', 'SELECT 1');
const updateOne = sql(
  'bench_update_one',
  `UPDATE chronos.alarms SET label = 'touched' WHERE id = (SELECT id FROM chronos.alarms ORDER BY id LIMIT 1)`,
);

interface Variant {
  name: string;
  db: PgDb;
  pid: number;
  drop: () => Promise<void>;
  samples: Record<'load' | 'claim' | 'record' | 'selectOne' | 'updateOne', number[]>;
}

async function open(name: string, extraSql: string): Promise<Variant> {
  const bench = await createPostgres('statement_cost');
  if (extraSql) await bench.db.exec(extraSql);
  // One connection: every statement below runs on the one backend whose CPU is read.
  const db = PgDb.connect(bench.url!, 1);
  const [row] = await db.query<{ pid: number }>(backendPid);
  const samples = { load: [], claim: [], record: [], selectOne: [], updateOne: [] };
  return {
    name,
    db,
    pid: row!.pid,
    samples,
    drop: async () => {
      await db.close();
      await bench.drop();
    },
  };
}

/** Runs `fn` and returns the backend's CPU for it, in µs. */
async function timed(v: Variant, fn: () => Promise<unknown>): Promise<number> {
  const before = threadCpuUs(v.pid);
  await fn();
  return threadCpuUs(v.pid) - before;
}

async function iterate(v: Variant, i: number): Promise<void> {
  const { samples } = v;
  samples.load.push((await timed(v, () => loadDueAlarms(v.db, BATCH, `cost-${i}-`))) / BATCH);
  let claims: Awaited<ReturnType<typeof alarmsClaimDue>> = [];
  samples.claim.push(
    (await timed(v, async () => (claims = await alarmsClaimDue(v.db, 'default', BATCH, 30_000, !LIBRARY)))) /
      BATCH,
  );
  if (claims.length !== BATCH) throw new Error(`${v.name}: claimed ${claims.length} of ${BATCH}`);
  const now = new Date();
  const times = { startedAt: now, finishedAt: now, latenessMs: 1 };
  const outcomes = claims.map((c) => decideOutcome(c, { ok: true }, times, { baseMs: 1_000, maxMs: 60_000 }));
  const mode = LIBRARY ? { history: false, deleteFired: true } : undefined;
  samples.record.push((await timed(v, () => alarmsRecordOutcomes(v.db, outcomes, mode))) / BATCH);
  samples.selectOne.push(await timed(v, () => v.db.query(selectOne)));
  samples.updateOne.push(await timed(v, () => v.db.query(updateOne)));
}

const opened: Variant[] = [];
try {
  for (const [name, extraSql] of Object.entries(variants)) opened.push(await open(name, extraSql));
  for (let i = 0; i < ITERATIONS + WARM_UP; i++) for (const v of opened) await iterate(v, i);
  const results = opened.map((v) => {
    const p50 = (xs: number[]) => Math.round(percentile(xs.slice(WARM_UP), 50) * 10) / 10;
    const row = {
      variant: v.name,
      sql: variants[v.name],
      claimUsPerAlarm: p50(v.samples.claim),
      recordUsPerAlarm: p50(v.samples.record),
      loadUsPerAlarm: p50(v.samples.load),
      selectOneUs: p50(v.samples.selectOne),
      updateOneUs: p50(v.samples.updateOne),
    };
    log(
      `${v.name}: batch ${BATCH}, backend CPU p50 — claim ${row.claimUsPerAlarm} µs/alarm, record ` +
        `${row.recordUsPerAlarm} µs/alarm, load ${row.loadUsPerAlarm} µs/alarm; SELECT 1 ${row.selectOneUs} µs, ` +
        `one-row UPDATE ${row.updateOneUs} µs`,
    );
    return row;
  });
  const path = await writeResult(`statement-cost${LIBRARY ? '-library' : ''}-b${BATCH}`, {
    batch: BATCH,
    statements: LIBRARY
      ? 'library worker: no history, fired one-shots deleted'
      : 'chronos serve: with history',
    iterations: ITERATIONS,
    results,
  });
  log(`wrote ${path}`);
} finally {
  for (const v of opened) await v.drop();
}
