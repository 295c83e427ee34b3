/**
 * Scenario: kill -9. Three `chronos serve` processes share one PostgreSQL; alarms fall due over
 * a stretch of time while one instance after another is killed with SIGKILL and started again.
 *
 * Proves I2 and I3 under crashes: no alarm lost, none early, and duplicates only for wakes a
 * killed instance had in flight — each duplicate's first delivery reached the router within a
 * lease before a kill, and the repeat came from another instance after that lease lapsed.
 */
import { expect, it } from 'vitest';
import {
  allDelivered,
  allSettled,
  errorLines,
  fencedLines,
  serveEnv,
  startFleet,
  useScenario,
} from './support/fleet.js';
import { type Instance } from './support/instance.js';
import { alarmsByStatus, loadAlarms, owners, wakesClaimedAgain } from './support/rows.js';
import { sized, sleep, startReport } from './support/scenario.js';
import { describePostgresOnly } from '../support/backends.js';

const SIZE = sized(
  { alarms: 1_500, spreadMs: 6_000, killEveryMs: 2_000, leaseMs: 2_000 },
  { alarms: 10_000, spreadMs: 20_000, killEveryMs: 5_000, leaseMs: 4_000 },
);
const CONCURRENCY = 200;

describePostgresOnly('three chronos serve processes on one database', 'scenario: kill -9', () => {
  // A router that takes 20–100 ms to answer, as a real one does: wakes are in flight at a kill.
  const scenario = useScenario(() => ({ status: 200, delayMs: 20 + Math.floor(Math.random() * 80) }));

  it(`3 instances, one SIGKILLed every ${SIZE.killEveryMs / 1000} s and restarted: no alarm lost, none early, duplicates only for wakes in flight at a kill`, async () => {
    const report = startReport('kill-9', 'test/scenarios/kill.test.ts');
    const fleet = await startFleet(
      3,
      serveEnv(scenario.t.url!, scenario.router, {
        CHRONOS_LEASE: `${SIZE.leaseMs}ms`,
        CHRONOS_DELIVERY_TIMEOUT: '1500ms',
        CHRONOS_CONCURRENCY: String(CONCURRENCY),
      }),
    );
    const due = await loadAlarms(scenario.t.db, {
      count: SIZE.alarms,
      firstDueInMs: 2_000,
      spreadMs: SIZE.spreadMs,
      owners: owners(20),
    });
    const firstDue = Math.min(...due.values());

    // Kill on schedule; each victim restarts in the background while the others carry on.
    const kills: {
      at: number;
      afterFirstDueMs: number;
      instance: string;
      pid: number;
      restartMs?: number;
    }[] = [];
    const restarts = new Map<Instance, Promise<void>>();
    // One kill every killEveryMs while alarms fall due, the last at the last due instant.
    for (let k = 1; k <= Math.floor(SIZE.spreadMs / SIZE.killEveryMs); k++) {
      await sleep(firstDue + k * SIZE.killEveryMs - Date.now());
      const victim = fleet[(k - 1) % fleet.length]!;
      await restarts.get(victim); // still starting from its last kill: wait for it
      const ended = await victim.kill();
      const kill = {
        at: ended.endedAt!,
        afterFirstDueMs: Math.round(ended.endedAt! - firstDue),
        instance: victim.name,
        pid: ended.pid,
      } as (typeof kills)[number];
      kills.push(kill);
      restarts.set(
        victim,
        victim.start().then(() => void (kill.restartMs = Date.now() - kill.at)),
      );
    }
    await Promise.all(restarts.values());

    await allDelivered(scenario.router, due, SIZE.spreadMs + 4 * SIZE.leaseMs + 60_000);
    // A duplicate comes after its lease lapses: wait until every row is settled, then count.
    await allSettled(scenario.t.db, due, 4 * SIZE.leaseMs + 30_000);
    const tally = await scenario.router.tally(due, scenario.t.db);

    // Each duplicate's first delivery arrived within a lease before some kill (it was in flight
    // in the killed process); the repeat is the lease lapsing and another instance firing it.
    const delivered = scenario.router.deliveredByAlarm();
    const claimedAgain = await wakesClaimedAgain(scenario.t.db);
    const unexplained: string[] = [];
    const duplicatedWakes: string[] = [];
    for (const receipts of delivered.values()) {
      const byWake = new Map<string, number[]>();
      for (const r of receipts) byWake.set(r.wakeId, [...(byWake.get(r.wakeId) ?? []), r.receivedAt]);
      for (const [wakeId, list] of byWake) {
        if (list.length < 2) continue;
        duplicatedWakes.push(wakeId);
        const first = Math.min(...list);
        const nearKill = kills.some((k) => first >= k.at - SIZE.leaseMs - 1_000 && first <= k.at + 1_000);
        if (!nearKill || !claimedAgain.has(wakeId)) unexplained.push(wakeId);
      }
    }

    Object.assign(report, {
      instances: 3,
      leaseMs: SIZE.leaseMs,
      concurrency: CONCURRENCY,
      alarmsDueOverMs: SIZE.spreadMs,
      kills,
      tally,
      wakesClaimedAgain: claimedAgain.size,
      duplicatesUnexplained: unexplained.length,
      fencedOutcomes: fencedLines(fleet),
      errorLogLines: errorLines(fleet).length,
      statuses: await alarmsByStatus(scenario.t.db),
    });
    await report.finish();

    expect(kills.length).toBeGreaterThanOrEqual(3);
    expect(tally.lost).toBe(0);
    expect(tally.failed).toBe(0);
    expect(tally.delivered).toBe(SIZE.alarms);
    expect(tally.early).toBe(0);
    expect(tally.earlyByDatabase).toBe(0);
    expect(unexplained, 'duplicates not explained by a kill').toEqual([]);
    expect(tally.duplicated).toBeLessThanOrEqual(kills.length * CONCURRENCY);
    expect(await alarmsByStatus(scenario.t.db)).toEqual({ fired: SIZE.alarms });
  }, 240_000);
});
