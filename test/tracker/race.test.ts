import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import type { Tracker, TrackerPass } from '../../packages/chronos-timers-server/src/tracker/tracker.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import { OWNER } from '../support/harness.js';
import { Sink } from '../support/sink.js';
import {
  age,
  ageAck,
  closeTrackers,
  countById,
  ESCALATE_AFTER,
  fire,
  makeTracker,
  MINUTE,
  NUDGE_AFTER,
  RETENTION,
  wakeService,
} from './support.js';

const stageCounts = sql(
  'test_tracker_stage_counts',
  `SELECT count(*) FILTER (WHERE nudged_at IS NOT NULL AND nudge_lease_token IS NULL)::int AS nudged,
     count(*) FILTER (WHERE escalated_at IS NOT NULL)::int AS escalated,
     count(*) FILTER (WHERE receipt_sent_at IS NOT NULL)::int AS receipts,
     count(*)::int AS wakes
   FROM chronos.wakes`,
);

describeEachBackend('tracker: several instances at once', ({ t, kind }) => {
  let router: Sink;
  let fallback: Sink;
  const N = 8;

  beforeAll(async () => {
    // A little latency, so sends of different trackers overlap.
    router = await Sink.start({ respond: () => ({ status: 200, delayMs: 5 }) });
    fallback = await Sink.start({ respond: () => ({ status: 200, delayMs: 5 }) });
  });
  afterEach(async () => {
    await closeTrackers();
    router.reset();
    fallback.reset();
    router.respond = fallback.respond = () => ({ status: 200, delayMs: 5 });
  });
  afterAll(async () => {
    await router.close();
    await fallback.close();
  });

  /** N wakes due for each stage: escalation (and nudge), nudge only, receipt, pruning. */
  async function dueForEveryStage() {
    const ids = {
      escalate: [] as string[],
      nudge: [] as string[],
      receipt: [] as string[],
      prune: [] as string[],
    };
    const wakes = wakeService(t.db);
    for (let i = 0; i < N; i++) {
      const e = await fire(t.db, { label: `e${i}` });
      await age(t.db, e.wakeId, ESCALATE_AFTER + i * 1_000);
      ids.escalate.push(e.wakeId);
      const n = await fire(t.db, { label: `n${i}` });
      await age(t.db, n.wakeId, NUDGE_AFTER + i * 1_000);
      ids.nudge.push(n.wakeId);
      const r = await fire(t.db, { label: `r${i}` });
      await wakes.ack(OWNER, r.wakeId, `done ${i}`);
      ids.receipt.push(r.wakeId);
      const p = await fire(t.db, { require_ack: false });
      await ageAck(t.db, p.wakeId, 0);
      await age(t.db, p.wakeId, RETENTION + MINUTE);
      ids.prune.push(p.wakeId);
    }
    return ids;
  }

  const threeTrackers = (options: Parameters<typeof makeTracker>[2] = {}): Tracker[] =>
    [t.openPool(4), t.openPool(4), t.openPool(4)].map((pool) =>
      makeTracker(pool, { router, fallback }, { batchSize: 3, pruneBatchSize: 3, ...options }),
    );

  /** Every message the stages owe was sent `times` times, and nothing else was sent. */
  function expectEachStageOnce(ids: Awaited<ReturnType<typeof dueForEveryStage>>, times = 1) {
    const counts = countById(router, fallback);
    const expected = new Map<string, number>();
    for (const id of [...ids.escalate, ...ids.nudge]) expected.set(`${id}:nudge`, times);
    for (const id of ids.escalate) expected.set(`${id}:escalation`, times);
    for (const id of ids.receipt) expected.set(`${id}:receipt`, times);
    expect(Object.fromEntries(counts)).toEqual(Object.fromEntries(expected));
  }

  postgresOnly(
    kind,
    'three trackers need three connection pools',
    'three trackers racing runOnce() on separate pools send each stage of each wake exactly once',
    async () => {
      const ids = await dueForEveryStage();
      const trackers = threeTrackers();
      const passes: TrackerPass[] = [];
      for (let round = 0; round < 50; round++) {
        const results = await Promise.all(trackers.map((tracker) => tracker.runOnce()));
        passes.push(...results);
        const busy = results.some((p) => p.more || p.nudged + p.escalated + p.receipts + p.pruned > 0);
        if (!busy) break;
      }

      expectEachStageOnce(ids);
      const sum = (f: (p: TrackerPass) => number) => passes.reduce((n, p) => n + f(p), 0);
      expect(sum((p) => p.nudged)).toBe(2 * N);
      expect(sum((p) => p.escalated)).toBe(N);
      expect(sum((p) => p.receipts)).toBe(N);
      expect(sum((p) => p.pruned)).toBe(N);
      expect(sum((p) => p.failed)).toBe(0);
      // The work was shared: more than one tracker sent something.
      const senders = new Set(
        passes.flatMap((p, i) => (p.nudged + p.escalated + p.receipts > 0 ? [i % 3] : [])),
      );
      expect(senders.size).toBeGreaterThan(1);
      const [row] = await t.db.query(stageCounts);
      expect(row).toEqual({ nudged: 2 * N, escalated: N, receipts: N, wakes: 3 * N });
    },
  );

  postgresOnly(
    kind,
    'three trackers need three connection pools',
    'three trackers with their loops running send each stage exactly once, and failures are retried by whichever comes next',
    async () => {
      const ids = await dueForEveryStage();
      // The first answer to each message is a 503: the retry may be taken by any of the three.
      const seen = new Set<string>();
      const flaky = (request: { headers: Record<string, string> }) => {
        const id = request.headers['webhook-id']!;
        if (seen.has(id)) return { status: 200, delayMs: 5 };
        seen.add(id);
        return { status: 503 };
      };
      router.respond = fallback.respond = flaky;
      const trackers = threeTrackers({ intervalMs: 20, retry: { baseMs: 10, maxMs: 10 } });
      await Promise.all(trackers.map((tracker) => tracker.start()));
      await Promise.all([router.waitFor(2 * 2 * N), fallback.waitFor(2 * (N + N))]);
      // Every stage recorded and every finished wake pruned, as the database tells it.
      const done = { nudged: 2 * N, escalated: N, receipts: N, wakes: 3 * N };
      for (let turn = 0; ; turn++) {
        const [row] = await t.db.query(stageCounts);
        if (JSON.stringify(row) === JSON.stringify(done)) break;
        if (turn > 10_000) throw new Error(`the trackers did not finish: ${JSON.stringify(row)}`);
        await new Promise((resolve) => setImmediate(resolve));
      }
      await Promise.all(trackers.map((tracker) => tracker.stop()));

      const counts = countById(router, fallback);
      expect(counts.size).toBe(2 * N + N + N);
      // Each message twice: the 503, then the one accepted. Never a third time.
      for (const [id, n] of counts) expect([id, n]).toEqual([id, 2]);
      expectEachStageOnce(ids, 2);
    },
  );
});
