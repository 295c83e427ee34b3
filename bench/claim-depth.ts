/**
 * Claim cost vs depth: how long the claim statement takes to claim the one due alarm while
 * 10k, 100k, 400k and 1M alarms wait in the future. Target (PostgreSQL): p50 ≤ 2 ms and flat;
 * the issue's stricter form is p50 ≤ 1 ms with 1M within 1.5× of 10k.
 *
 * Timed is `alarmsClaimDue` itself, as the dispatcher calls it (its default batch size; on
 * PostgreSQL a named statement prepared by node-postgres on a one-connection pool, so it is
 * re-executed and the plan cache may switch to a generic plan), client round trip and commit
 * included. Between claims the row is put back as it was (unclaimed, no wake), untimed.
 *
 * On PostgreSQL each depth is its own database, all four loaded first and then measured in
 * interleaved blocks (`--rounds` passes over the four, `--iterations` claims per depth in all), so
 * drift in the disk's flush time or the neighbours' load falls on every depth alike. PGlite grows
 * one store depth by depth. Per depth:
 *
 * - `claim`: plan_cache_mode at its default; `claimGeneric`: forced to the generic plan.
 * - `commitFloor`: a one-row UPDATE of a side table, timed in the same loop. A claim writes, so
 *   it waits for its WAL flush; on a VM disk that flush is most of the cost and it varies, so
 *   the floor shows how much of a claim is the disk rather than the statement; `claimOverFloor`
 *   is each claim minus the commit timed right after it.
 * - `serverExecution`: the statement's own execution time (`EXPLAIN (ANALYZE, TIMING OFF)`,
 *   generic plan, rolled back) — no commit, no round trip: the purest view of flatness.
 * - `idleClaim` (nothing due: what every poll costs) and `nextDue` (the probe before sleeping).
 *
 * The plan check: `EXPLAIN (ANALYZE, BUFFERS)` of the claim at every depth, prepared under
 * `force_generic_plan`, and prepared under the default after six executions; the select must be
 * an index scan on `alarms_claim_idx` (`alarms_due_idx` before migration 0008). Plans go to
 * `bench/results/claim-plan-postgres.txt`.
 *
 * Then two ageing checks at 1M: "churn" — 100k alarms fired ahead of the due one and no VACUUM
 * yet (autovacuum waits for 20% of a table to change by default), so the claim walks their dead
 * index entries; and "wakes" — 1M rows of fire history in `wakes`, which the claim probes.
 *
 *   npx tsx bench/claim-depth.ts [--backend=postgres|pglite|both] [--iterations=2000] [--rounds=10]
 *     [--quiet=<cpu pressure %>]
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { alarmsClaimDue, alarmsNextDueMs } from '../packages/chronos-timers/src/store/claims.js';
import { PgDb, sql, type BackendKind, type Db } from '../packages/chronos-timers/src/store/driver/db.js';
import {
  backendsFromArgs,
  createBench,
  loadDueAlarms,
  loadWaitingAlarms,
  log,
  numberArg,
  summarize,
  writeResult,
  writeText,
  waitForQuiet,
  type BenchDatabase,
  type Load,
  type Summary,
} from './support.js';

const DEPTHS = [10_000, 100_000, 400_000, 1_000_000];
const LEASE_MS = 30_000;
const CHURN = 100_000;
const WAKES = 1_000_000;
// Untimed claims at the start of each timed block.
const WARMUP = 20;

// Puts the due alarm back as it was before its claim: unclaimed, with no wake.
const resetClaim = sql(
  'bench_reset_claim',
  `WITH a AS (UPDATE chronos.alarms SET claimed_at = NULL, lease_token = NULL, wake_id = NULL WHERE id = $1 RETURNING id)
   DELETE FROM chronos.wakes WHERE alarm_id = (SELECT id FROM a)`,
);
const tick = sql('bench_tick', 'UPDATE bench_tick SET n = n + 1 WHERE id = 1');

interface ClaimTimes {
  claim: Summary;
  commitFloor: Summary;
  /** Each claim minus the one-row commit timed right after it: the claim's cost above the disk's. */
  claimOverFloor: Summary;
}

interface DepthResult extends ClaimTimes {
  depth: number;
  claimGeneric: Summary | null;
  serverExecution: Summary | null;
  idleClaim: Summary;
  nextDue: Summary;
  planUsesDueIndex: boolean | null;
  /** How node-postgres's prepared claim was planned over the timed loop (pg_prepared_statements). */
  preparedPlans: { generic_plans: string; custom_plans: string } | null;
}

/** Raw timings (ms), merged across blocks before they are summarised. */
interface Samples {
  claim: number[];
  floor: number[];
}

const emptySamples = (): Samples => ({ claim: [], floor: [] });

/** Times `iterations` claims of the one due alarm (after `WARMUP` untimed), each followed by a timed one-row commit. */
async function sampleClaims(
  db: Db,
  dueId: string,
  batch: number,
  iterations: number,
  into: Samples,
): Promise<void> {
  for (let i = 0; i < iterations + WARMUP; i++) {
    await db.query(resetClaim, [dueId]);
    let started = performance.now();
    const claims = await alarmsClaimDue(db, 'default', batch, LEASE_MS);
    const tookClaim = performance.now() - started;
    if (claims.length !== 1 || claims[0]!.alarm.id !== dueId) {
      throw new Error(`claim: expected the one due alarm ${dueId}, got ${claims.length} rows`);
    }
    started = performance.now();
    await db.query(tick);
    const tookTick = performance.now() - started;
    if (i >= WARMUP) {
      into.claim.push(tookClaim);
      into.floor.push(tookTick);
    }
  }
  await db.query(resetClaim, [dueId]);
}

function claimTimes(samples: Samples): ClaimTimes {
  return {
    claim: summarize(samples.claim),
    commitFloor: summarize(samples.floor),
    claimOverFloor: summarize(samples.claim.map((c, i) => c - samples.floor[i]!)),
  };
}

/** Times claims that find nothing due (the due alarm's lease is held) and the next-due probe. */
async function sampleIdle(db: Db, batch: number, iterations: number, into: Samples): Promise<void> {
  for (let i = 0; i < iterations + WARMUP; i++) {
    let started = performance.now();
    const claims = await alarmsClaimDue(db, 'default', batch, LEASE_MS);
    const tookIdle = performance.now() - started;
    if (claims.length !== 0) throw new Error(`idle claim: expected nothing due, got ${claims.length}`);
    started = performance.now();
    await alarmsNextDueMs(db, 'default');
    const tookNext = performance.now() - started;
    if (i >= WARMUP) {
      into.claim.push(tookIdle);
      into.floor.push(tookNext);
    }
  }
}

/** A one-connection store for timing: node-postgres prepares the claim on it once. */
function openTimed(bench: BenchDatabase, generic = false): { db: Db; close(): Promise<void> } {
  if (bench.kind === 'pglite') return { db: bench.db, close: async () => {} };
  const options = generic ? '-c plan_cache_mode=force_generic_plan' : undefined;
  const db = new PgDb(new pg.Pool({ connectionString: bench.url!, max: 1, options }), true);
  return { db, close: () => db.close() };
}

interface PreparedInfo {
  statement: string;
  generic_plans: string;
  custom_plans: string;
}

async function preparedClaim(db: Db): Promise<PreparedInfo | null> {
  if (!(db instanceof PgDb)) return null;
  const result = await db.pool.query<PreparedInfo>(
    `SELECT statement, generic_plans::text, custom_plans::text FROM pg_prepared_statements
     WHERE name = 'alarms_claim_due'`,
  );
  return result.rows[0] ?? null;
}

const usesDueIndex = (plan: string) =>
  /Index (Only )?Scan using alarms_claim_idx/.test(plan) && !/Seq Scan on alarms\b/.test(plan);

/**
 * EXPLAIN of the claim exactly as node-postgres prepared it (the text read back from
 * pg_prepared_statements), always rolled back: the plan under force_generic_plan and under the
 * default after six executions, then `samples` timed executions of the generic plan.
 */
async function explainClaim(url: string, claimText: string, batch: number, samples: number) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const parts: string[] = [];
  let ok = true;
  const execution: number[] = [];
  const execute = `EXECUTE bench_claim(${batch}, ${LEASE_MS}, 'default')`;
  const explain = async (options: string) => {
    await client.query('BEGIN');
    const result = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (${options}) ${execute}`);
    await client.query('ROLLBACK');
    return result.rows.map((r) => r['QUERY PLAN']).join('\n');
  };
  const record = async (label: string) => {
    const plan = await explain('ANALYZE, BUFFERS');
    const stats = await client.query<{ generic_plans: string; custom_plans: string }>(
      `SELECT generic_plans::text, custom_plans::text FROM pg_prepared_statements WHERE name = 'bench_claim'`,
    );
    const s = stats.rows[0];
    parts.push(`-- ${label} (generic_plans=${s?.generic_plans}, custom_plans=${s?.custom_plans})\n${plan}`);
    ok &&= usesDueIndex(plan);
  };
  try {
    await client.query(`SET plan_cache_mode = force_generic_plan`);
    await client.query(`PREPARE bench_claim(int, int, text) AS ${claimText}`);
    await record('plan_cache_mode = force_generic_plan, first execution');
    for (let i = 0; i < samples + 10; i++) {
      const plan = await explain('ANALYZE, TIMING OFF');
      const match = /Execution Time: ([\d.]+) ms/.exec(plan);
      if (i >= 10 && match) execution.push(Number(match[1]));
    }
    await client.query('DEALLOCATE bench_claim');
    await client.query(`SET plan_cache_mode = auto`);
    await client.query(`PREPARE bench_claim(int, int, text) AS ${claimText}`);
    for (let i = 0; i < 6; i++) {
      await client.query('BEGIN');
      await client.query(execute);
      await client.query('ROLLBACK');
    }
    await record('plan_cache_mode = auto, seventh execution');
  } finally {
    await client.end();
  }
  return { text: parts.join('\n\n'), usesDueIndex: ok, serverExecution: summarize(execution) };
}

/** A database (or PGlite store) with one due alarm, `depth` waiting ones and the side table for the floor. */
async function prepareStore(bench: BenchDatabase): Promise<string> {
  await bench.db.exec(
    'CREATE TABLE bench_tick (id int PRIMARY KEY, n int NOT NULL); INSERT INTO bench_tick VALUES (1, 0)',
  );
  const [dueId] = await loadDueAlarms(bench.db, 1, 'due-', 1_000);
  return dueId!;
}

async function loadDepth(bench: BenchDatabase, count: number, keyPrefix: string): Promise<number> {
  const started = performance.now();
  await loadWaitingAlarms(bench.db, count, { keyPrefix });
  await bench.db.exec('ANALYZE');
  return Math.round(performance.now() - started) / 1000;
}

/**
 * 100k alarms fired ahead of the due one, no VACUUM yet: their entries in alarms_claim_idx are
 * dead but still there, and a claim walks them. (Fired here by one UPDATE, which leaves the index
 * as the dispatcher's outcome recording does: `status` changes, so the update is not HOT.)
 */
async function measureChurn(bench: BenchDatabase, iterations: number, batch: number, dueId: string) {
  await loadDueAlarms(bench.db, CHURN, 'churn-', 600_000);
  await bench.db.exec(`ANALYZE chronos.alarms`);
  await bench.db.exec(
    `UPDATE chronos.alarms SET status = 'fired', last_fired_at = now(), updated_at = now()
     WHERE idempotency_key LIKE 'churn-%'`,
  );
  const timed = openTimed(bench);
  try {
    await timed.db.query(resetClaim, [dueId]);
    let started = performance.now();
    await alarmsClaimDue(timed.db, 'default', batch, LEASE_MS);
    const firstClaimMs = performance.now() - started;
    const before = emptySamples();
    await sampleClaims(timed.db, dueId, batch, iterations, before);
    const text = (await preparedClaim(timed.db))?.statement;
    const server = async () =>
      text ? (await explainClaim(bench.url!, text, batch, Math.min(iterations, 500))).serverExecution : null;
    const serverBeforeVacuum = await server();
    started = performance.now();
    await bench.db.exec('VACUUM chronos.alarms');
    const vacuumMs = performance.now() - started;
    const serverAfterVacuum = await server();
    const after = emptySamples();
    await sampleClaims(timed.db, dueId, batch, iterations, after);
    return {
      firedAhead: CHURN,
      firstClaimMs,
      beforeVacuum: claimTimes(before),
      serverBeforeVacuum,
      vacuumMs,
      afterVacuum: claimTimes(after),
      serverAfterVacuum,
    };
  } finally {
    await timed.close();
  }
}

/** 1M rows of history in `wakes` (the claim checks for the alarm's wake and opens one). */
async function measureWakes(bench: BenchDatabase, iterations: number, batch: number, dueId: string) {
  await bench.db.exec(
    `INSERT INTO chronos.wakes (id, alarm_id, owner_did, user_id, status, scheduled_for, fired_at, delivered_at, attempts)
     SELECT gen_random_uuid(), id, owner_did, user_id, 'delivered', next_fire_at, now(), now(), 1
     FROM chronos.alarms WHERE status = 'active' AND id <> '${dueId}' LIMIT ${WAKES};
     ANALYZE chronos.wakes`,
  );
  if (bench.kind === 'postgres') await bench.db.exec('CHECKPOINT');
  const timed = openTimed(bench);
  try {
    const samples = emptySamples();
    await sampleClaims(timed.db, dueId, batch, iterations, samples);
    const prepared = await preparedClaim(timed.db);
    let plan: string | null = null;
    let serverExecution: Summary | null = null;
    if (prepared) {
      const explained = await explainClaim(bench.url!, prepared.statement, batch, Math.min(iterations, 500));
      plan = `==== ${WAKES} wakes of history (1M waiting) ====\n${explained.text}`;
      serverExecution = explained.serverExecution;
    }
    return { wakes: WAKES, ...claimTimes(samples), serverExecution, plan };
  } finally {
    await timed.close();
  }
}

interface Store {
  depth: number;
  bench: BenchDatabase;
  dueId: string;
  claims: Samples;
  generic: Samples;
  idle: Samples;
}

/**
 * PostgreSQL: one database per depth, all loaded first, then measured in interleaved blocks
 * (`rounds` passes over the four), so the disk's and the neighbours' drift falls on every depth
 * alike instead of on whichever was measured last.
 */
async function runPostgres(iterations: number, rounds: number) {
  const batch = 200;
  const stores: Store[] = [];
  const loadSeconds: Record<number, number> = {};
  const loads: Load[] = [];
  const plans: string[] = [];
  const depths: DepthResult[] = [];
  let churn: Awaited<ReturnType<typeof measureChurn>>;
  let wakes: Awaited<ReturnType<typeof measureWakes>>;
  try {
    for (const depth of DEPTHS) {
      const bench = await createBench('postgres', `claim_${depth}`);
      stores.push({
        depth,
        bench,
        dueId: await prepareStore(bench),
        claims: emptySamples(),
        generic: emptySamples(),
        idle: emptySamples(),
      });
      loadSeconds[depth] = await loadDepth(bench, depth, `d${depth}`);
      log(`postgres: ${depth} waiting (loaded in ${loadSeconds[depth]} s)`);
    }
    // The loads' dirty pages written out before anything is timed (CHECKPOINT is server-wide).
    await stores[0]!.bench.db.exec('CHECKPOINT');

    const perBlock = Math.ceil(iterations / rounds);
    const timed = stores.map((s) => ({
      store: s,
      plain: openTimed(s.bench),
      generic: openTimed(s.bench, true),
    }));
    try {
      for (let round = 0; round < rounds; round++) {
        loads.push(await waitForQuiet());
        for (const t of timed) {
          await sampleClaims(t.plain.db, t.store.dueId, batch, perBlock, t.store.claims);
          await sampleClaims(t.generic.db, t.store.dueId, batch, perBlock, t.store.generic);
        }
      }
      // Idle: each due alarm's lease held by its own claim, so nothing is due.
      for (const t of timed) await alarmsClaimDue(t.generic.db, 'default', batch, LEASE_MS);
      for (let round = 0; round < rounds; round++) {
        for (const t of timed) await sampleIdle(t.plain.db, batch, perBlock, t.store.idle);
      }
      for (const t of timed) {
        await t.plain.db.query(resetClaim, [t.store.dueId]);
        const prepared = await preparedClaim(t.plain.db);
        const explained = await explainClaim(
          t.store.bench.url!,
          prepared!.statement,
          batch,
          Math.min(iterations, 500),
        );
        plans.push(`==== ${t.store.depth} waiting ====\n${explained.text}`);
        const result: DepthResult = {
          depth: t.store.depth,
          ...claimTimes(t.store.claims),
          claimGeneric: summarize(t.store.generic.claim),
          serverExecution: explained.serverExecution,
          idleClaim: summarize(t.store.idle.claim),
          nextDue: summarize(t.store.idle.floor),
          planUsesDueIndex: explained.usesDueIndex,
          preparedPlans: prepared && {
            generic_plans: prepared.generic_plans,
            custom_plans: prepared.custom_plans,
          },
        };
        depths.push(result);
        logDepth('postgres', result);
      }
    } finally {
      for (const t of timed) {
        await t.plain.close();
        await t.generic.close();
      }
    }
    const deepest = stores[stores.length - 1]!;
    for (const s of stores.slice(0, -1)) await s.bench.drop();
    await waitForQuiet();
    churn = await measureChurn(deepest.bench, iterations, batch, deepest.dueId);
    logChurn('postgres', churn);
    await waitForQuiet();
    wakes = await measureWakes(deepest.bench, iterations, batch, deepest.dueId);
    if (wakes.plan) plans.push(wakes.plan);
    log(
      `postgres: ${WAKES} wakes: claim p50 ${wakes.claim.p50} p99 ${wakes.claim.p99} | server p50 ${wakes.serverExecution?.p50}`,
    );
  } finally {
    for (const s of stores) await s.bench.drop();
  }
  await writeText('claim-plan-postgres.txt', `${plans.join('\n\n')}\n`);
  const { plan: _plan, ...wakesResult } = wakes;
  return {
    backend: 'postgres',
    batchSize: batch,
    leaseMs: LEASE_MS,
    iterations,
    rounds,
    loadSeconds,
    loads,
    depths,
    churn,
    wakes: wakesResult,
  };
}

/** PGlite: one store grown depth by depth (four 1M-row PGlite stores at once would be heavy). */
async function runPglite(iterations: number) {
  const batch = 25;
  const n = Math.min(iterations, 500);
  const bench = await createBench('pglite', 'claim_depth');
  const depths: DepthResult[] = [];
  const loadSeconds: Record<number, number> = {};
  const loads: Load[] = [];
  let churn: Awaited<ReturnType<typeof measureChurn>>;
  let wakes: Awaited<ReturnType<typeof measureWakes>>;
  try {
    const dueId = await prepareStore(bench);
    let loaded = 0;
    for (const depth of DEPTHS) {
      loadSeconds[depth] = await loadDepth(bench, depth - loaded, `d${depth}`);
      loaded = depth;
      log(`pglite: ${depth} waiting (loaded in ${loadSeconds[depth]} s)`);
      loads.push(await waitForQuiet());
      const claims = emptySamples();
      await sampleClaims(bench.db, dueId, batch, n, claims);
      const idle = emptySamples();
      await alarmsClaimDue(bench.db, 'default', batch, LEASE_MS);
      await sampleIdle(bench.db, batch, n, idle);
      await bench.db.query(resetClaim, [dueId]);
      const result: DepthResult = {
        depth,
        ...claimTimes(claims),
        claimGeneric: null,
        serverExecution: null,
        idleClaim: summarize(idle.claim),
        nextDue: summarize(idle.floor),
        planUsesDueIndex: null,
        preparedPlans: null,
      };
      depths.push(result);
      logDepth('pglite', result);
    }
    await waitForQuiet();
    churn = await measureChurn(bench, n, batch, dueId);
    logChurn('pglite', churn);
    await waitForQuiet();
    wakes = await measureWakes(bench, n, batch, dueId);
    log(`pglite: ${WAKES} wakes: claim p50 ${wakes.claim.p50} p99 ${wakes.claim.p99}`);
  } finally {
    await bench.drop();
  }
  const { plan: _plan, ...wakesResult } = wakes;
  return {
    backend: 'pglite',
    batchSize: batch,
    leaseMs: LEASE_MS,
    iterations: n,
    loadSeconds,
    loads,
    depths,
    churn,
    wakes: wakesResult,
  };
}

function logDepth(kind: BackendKind, r: DepthResult): void {
  log(
    `${kind}: depth ${r.depth}: claim p50 ${r.claim.p50} p99 ${r.claim.p99} ms` +
      ` (commit floor p50 ${r.commitFloor.p50}, claim − floor p50 ${r.claimOverFloor.p50})` +
      (r.claimGeneric ? ` | generic p50 ${r.claimGeneric.p50} p99 ${r.claimGeneric.p99}` : '') +
      (r.serverExecution ? ` | server p50 ${r.serverExecution.p50}` : '') +
      ` | idle p50 ${r.idleClaim.p50} | next-due p50 ${r.nextDue.p50}` +
      (r.planUsesDueIndex !== null ? ` | due index: ${r.planUsesDueIndex}` : ''),
  );
}

function logChurn(kind: BackendKind, c: Awaited<ReturnType<typeof measureChurn>>): void {
  log(
    `${kind}: ${CHURN} fired ahead, not vacuumed: first claim ${c.firstClaimMs.toFixed(1)} ms, ` +
      `then p50 ${c.beforeVacuum.claim.p50}` +
      (c.serverBeforeVacuum ? ` (server ${c.serverBeforeVacuum.p50})` : '') +
      `; after VACUUM p50 ${c.afterVacuum.claim.p50}` +
      (c.serverAfterVacuum ? ` (server ${c.serverAfterVacuum.p50})` : ''),
  );
}

const iterations = numberArg('iterations', 2_000);
const rounds = numberArg('rounds', 10);
for (const kind of backendsFromArgs()) {
  const result = kind === 'postgres' ? await runPostgres(iterations, rounds) : await runPglite(iterations);
  const path = await writeResult(`claim-depth-${kind}`, result);
  log(`wrote ${path}`);
}
