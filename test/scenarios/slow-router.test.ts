/**
 * Scenario: a slow router. For one owner the sink answers only after a delay longer than the
 * delivery timeout (15 s against 10 s at full size); every other owner is answered at once.
 *
 * Proves that a hung request holds one delivery slot for at most the delivery timeout and never
 * outlives its lease: each slow attempt is cut by Chronos (the sink sees the client go away), no
 * second attempt at a wake starts while the first is still open, and no outcome is fenced. With
 * fewer slow wakes than `CHRONOS_CONCURRENCY`, other owners' wakes are delivered while the slow
 * ones hang; with more, the rest wait for a slot — that is the limit, and its cost is measured.
 */
import { expect, it } from 'vitest';
import { allSettled, errorLines, fencedLines, serveEnv, startFleet, useScenario } from './support/fleet.js';
import { type Receipt } from './support/router.js';
import { alarmStates, loadAlarms, owners, wakeAttempts } from './support/rows.js';
import { sized, spread, startReport, waitUntil } from './support/scenario.js';
import { describePostgresOnly } from '../support/backends.js';

const SIZE = sized(
  { timeoutMs: 1_500, leaseMs: 4_000, slowAnswerMs: 4_000, concurrency: 20, others: 80 },
  { timeoutMs: 10_000, leaseMs: 30_000, slowAnswerMs: 15_000, concurrency: 20, others: 400 },
);

describePostgresOnly('whole chronos serve processes on a shared database', 'scenario: slow router', () => {
  const slowOwners = new Set<string>();
  const scenario = useScenario((request) => {
    const owner = (JSON.parse(request.body) as { owner_did: string }).owner_did;
    return slowOwners.has(owner) ? { status: 200, delayMs: SIZE.slowAnswerMs } : { status: 200 };
  });

  /** One phase: `slow` wakes of the slow owner due at once, other owners' wakes due over 2 timeouts. */
  async function phase(slow: number) {
    const [slowOwner] = owners(1, 'slow');
    slowOwners.add(slowOwner!);
    const slowDue = await loadAlarms(scenario.t.db, {
      count: slow,
      firstDueInMs: 2_000,
      owners: [slowOwner!],
      label: 'slow',
      maxFailures: 2,
    });
    const othersDue = await loadAlarms(scenario.t.db, {
      count: SIZE.others,
      firstDueInMs: 2_000,
      spreadMs: 2 * SIZE.timeoutMs,
      owners: owners(10, 'other'),
      label: 'other',
    });
    const all = new Map([...slowDue, ...othersDue]);
    await allSettled(scenario.t.db, all, 4 * SIZE.slowAnswerMs + 60_000);

    const receipts = scenario.router.receipts();
    const slowReceipts = receipts.filter((r) => slowDue.has(r.alarmId));
    const others = scenario.router.deliveredByAlarm();
    const firstCut = Math.min(...slowReceipts.map((r) => r.receivedAt)) + SIZE.timeoutMs;
    const otherLateness = [...othersDue].map(
      ([id, at]) => Math.min(...others.get(id)!.map((r) => r.receivedAt)) - at,
    );
    // Other wakes that fell due while every first slow attempt still hung, with time to spare.
    const dueWhileHung = [...othersDue].filter(([, at]) => at < firstCut - SIZE.timeoutMs / 2);
    const deliveredWhileHung = dueWhileHung.filter(([id]) =>
      others.get(id)!.some((r) => r.receivedAt < firstCut),
    ).length;
    return { slowDue, othersDue, slowReceipts, otherLateness, dueWhileHung, deliveredWhileHung };
  }

  it('a router answering after the timeout for one owner: every hung attempt cut in time, no lease outlived, other owners not held up below the concurrency limit', async () => {
    const report = startReport('slow-router', 'test/scenarios/slow-router.test.ts');
    const fleet = await startFleet(
      1,
      serveEnv(scenario.t.url!, scenario.router, {
        CHRONOS_DELIVERY_TIMEOUT: `${SIZE.timeoutMs}ms`,
        CHRONOS_LEASE: `${SIZE.leaseMs}ms`,
        CHRONOS_CONCURRENCY: String(SIZE.concurrency),
        CHRONOS_RETRY_BASE: '500ms',
      }),
    );
    const [instance] = fleet;

    const below = await phase(SIZE.concurrency / 2);
    const above = await phase(SIZE.concurrency * 2);

    const attempts = await wakeAttempts(scenario.t.db);
    const slowIds = new Set([...below.slowDue.keys(), ...above.slowDue.keys()]);
    const slowAttempts = attempts.filter((a) => slowIds.has(a.alarm_id));
    const states = await alarmStates(scenario.t.db, [...slowIds]);
    // Per wake, the sink's open intervals: a request is open from arrival until cut.
    const overlaps = overlapping([...below.slowReceipts, ...above.slowReceipts], SIZE.timeoutMs);
    const inFlight = await instance!.metric('chronos_deliveries_in_flight');

    Object.assign(report, {
      instances: 1,
      deliveryTimeoutMs: SIZE.timeoutMs,
      leaseMs: SIZE.leaseMs,
      slowRouterAnswersAfterMs: SIZE.slowAnswerMs,
      concurrency: SIZE.concurrency,
      belowLimit: {
        slowWakes: below.slowDue.size,
        otherWakes: below.othersDue.size,
        otherWakesDueWhileSlowHung: below.dueWhileHung.length,
        deliveredWhileSlowHung: below.deliveredWhileHung,
        otherLatenessMs: spread(below.otherLateness),
      },
      aboveLimit: {
        slowWakes: above.slowDue.size,
        otherWakes: above.othersDue.size,
        otherWakesDueWhileSlowHung: above.dueWhileHung.length,
        deliveredWhileSlowHung: above.deliveredWhileHung,
        otherLatenessMs: spread(above.otherLateness),
      },
      slowAttempts: slowAttempts.length,
      slowAttemptDurationMs: spread(slowAttempts.map((a) => a.duration_ms)),
      slowAttemptErrors: [...new Set(slowAttempts.map((a) => a.error.replace(/\d+ ms/, 'N ms')))],
      slowRequestsCutByChronos: [...below.slowReceipts, ...above.slowReceipts].filter(
        (r) => r.request.clientGone,
      ).length,
      slowRequestsAnswered: [...below.slowReceipts, ...above.slowReceipts].filter((r) => r.ok).length,
      overlappingAttemptsOfOneWake: overlaps,
      fencedOutcomes: fencedLines(fleet),
      deliveriesInFlightAtEnd: inFlight,
      errorLogLines: errorLines(fleet).length,
    });
    await report.finish();

    // Every slow attempt was abandoned by Chronos at its timeout, well inside its lease.
    expect(slowAttempts.length).toBe(2 * slowIds.size);
    for (const a of slowAttempts) {
      expect(a.error).toMatch(/^router timed out after/);
      expect(a.duration_ms).toBeLessThan(SIZE.leaseMs);
    }
    for (const r of [...below.slowReceipts, ...above.slowReceipts]) expect(r.request.clientGone).toBe(true);
    for (const state of states.values()) expect(state).toMatchObject({ status: 'failed', failureCount: 2 });
    expect(overlaps).toBe(0);
    expect(fencedLines(fleet)).toBe(0);
    // No worker stuck: every other wake delivered, nothing left in flight.
    for (const p of [below, above]) {
      expect(scenario.router.deliveredCount(p.othersDue.keys())).toBe(p.othersDue.size);
    }
    await waitUntil(async () => (await instance!.metric('chronos_deliveries_in_flight')) === 0, {
      timeoutMs: 10_000,
      what: 'no delivery in flight',
    });
    // Below the limit, the hung wakes held nobody else up.
    expect(below.dueWhileHung.length).toBeGreaterThan(0);
    expect(below.deliveredWhileHung).toBe(below.dueWhileHung.length);
  }, 300_000);
});

/** Pairs of requests for one wake whose open intervals overlap (a second attempt while the first hung). */
function overlapping(receipts: readonly Receipt[], timeoutMs: number): number {
  const byWake = new Map<string, number[]>();
  for (const r of receipts) byWake.set(r.webhookId, [...(byWake.get(r.webhookId) ?? []), r.receivedAt]);
  let n = 0;
  for (const times of byWake.values()) {
    times.sort((a, b) => a - b);
    for (let i = 1; i < times.length; i++) if (times[i]! < times[i - 1]! + timeoutMs) n++;
  }
  return n;
}
