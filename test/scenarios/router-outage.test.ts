/**
 * Scenario: the router is down. The sink stops listening (connections refused) for a stretch
 * while alarms keep falling due, then listens again.
 *
 * What happens, and why: the first deliveries to hit the outage fail (`router unreachable:
 * ECONNREFUSED`) and count against their alarm's `max_failures`; after 3 such failures in a row
 * an instance *holds* — it stops claiming and probes the router with a TCP connect (backing off
 * to every 5 s) — so alarms falling due during the outage wait in the table, unattempted, and are
 * delivered late once a probe connects. An alarm whose ceiling the first failures reached (here,
 * those created with `max_failures: 1`) is `failed` with its `last_error`; every other alarm is
 * delivered after the router returns. Nothing is lost (I2).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../support/databases.js';
import { allDelivered, allSettled, errorLines, serveEnv, startFleet } from './support/fleet.js';
import { stopAll, type Instance } from './support/instance.js';
import { Router } from './support/router.js';
import { alarmsByStatus, alarmStates, loadAlarms, owners } from './support/rows.js';
import { sized, sleep, spread, startReport } from './support/scenario.js';

const SIZE = sized(
  { alarms: 400, fragile: 80, spreadMs: 8_000, outageFromMs: 1_500, outageMs: 4_000 },
  { alarms: 3_000, fragile: 300, spreadMs: 90_000, outageFromMs: 10_000, outageMs: 60_000 },
);

describe.skipIf(!postgresAvailable())('scenario: router outage', () => {
  let t: TestDatabase;
  let router: Router;
  let fleet: Instance[] = [];
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
    router = await Router.start();
  });
  afterAll(async () => {
    await stopAll(fleet);
    await router?.close();
    await t?.close();
  });

  it(`the router refuses connections for ${SIZE.outageMs / 1000} s: nothing lost; held alarms delivered late, the rest failed with last_error`, async () => {
    const report = startReport('router-outage', 'test/scenarios/router-outage.test.ts');
    fleet = await startFleet(2, serveEnv(t.url!, router, { CHRONOS_LEASE: '10s' }));
    const people = owners(10);
    const sturdy = await loadAlarms(t.db, {
      count: SIZE.alarms - SIZE.fragile,
      firstDueInMs: 2_000,
      spreadMs: SIZE.spreadMs,
      owners: people,
      label: 'sturdy',
    });
    // Alarms that give up at their first failure: the ones an outage can make `failed`.
    const fragile = await loadAlarms(t.db, {
      count: SIZE.fragile,
      firstDueInMs: 2_000,
      spreadMs: SIZE.spreadMs,
      owners: people,
      label: 'fragile',
      maxFailures: 1,
    });
    const due = new Map([...sturdy, ...fragile]);
    const firstDue = Math.min(...due.values());

    await sleep(firstDue + SIZE.outageFromMs - Date.now());
    const downAt = Date.now();
    await router.sink.down();
    // Sample each instance's hold while the router is away.
    const held: Record<string, number[]> = Object.fromEntries(fleet.map((i) => [i.name, []]));
    while (Date.now() < downAt + SIZE.outageMs) {
      for (const instance of fleet) held[instance.name]!.push(await instance.metric('chronos_router_held'));
      await sleep(Math.min(1_000, downAt + SIZE.outageMs - Date.now()));
    }
    await router.sink.up();
    const upAt = Date.now();

    await allSettled(t.db, due, SIZE.spreadMs + 120_000);
    const states = await alarmStates(t.db, [...due.keys()]);
    const failedIds = [...states].filter(([, s]) => s.status === 'failed').map(([id]) => id);
    const expectDelivered = new Map([...due].filter(([id]) => !failedIds.includes(id)));
    await allDelivered(router, expectDelivered, 30_000);
    const tally = await router.tally(due, t.db);

    const dueDuringOutage = [...due].filter(([, at]) => at >= downAt && at < upAt);
    const delivered = router.deliveredByAlarm();
    const deliveredAfter = dueDuringOutage
      .filter(([id]) => delivered.has(id))
      .map(([id, at]) => Math.min(...delivered.get(id)!.map((r) => r.receivedAt)) - at);
    const attemptedDuringOutage = [...states].filter(([, s]) => s.failureCount > 0 || s.status === 'failed');
    const errors = new Set(failedIds.map((id) => states.get(id)!.lastError));

    Object.assign(report, {
      instances: 2,
      alarms: SIZE.alarms,
      alarmsWithMaxFailures1: SIZE.fragile,
      outageMs: Math.round(upAt - downAt),
      alarmsDueDuringOutage: dueDuringOutage.length,
      alarmsAttemptedDuringOutage: attemptedDuringOutage.length,
      failedWithLastError: failedIds.length,
      failedAmongMaxFailures1: failedIds.filter((id) => fragile.has(id)).length,
      lastErrors: [...errors],
      heldSamples: held,
      latenessOfAlarmsDueDuringOutageMs: spread(deliveredAfter),
      tally,
      errorLogLines: errorLines(fleet).length,
      statuses: await alarmsByStatus(t.db),
    });
    await report.finish();

    expect(tally.lost).toBe(0);
    expect(tally.early).toBe(0);
    expect(tally.earlyByDatabase).toBe(0);
    expect(tally.delivered + tally.failed).toBe(SIZE.alarms);
    // Every failure is visible, says why, and reached its alarm's ceiling.
    for (const id of failedIds) {
      const state = states.get(id)!;
      expect(state.lastError).toMatch(/^router (unreachable|connection failed)/);
      expect(state.failureCount).toBeGreaterThanOrEqual(1);
    }
    // Each instance held deliveries while the router was away.
    for (const samples of Object.values(held)) expect(samples).toContain(1);
    // Everything not failed that fell due during the outage was delivered after the router came back.
    for (const [id] of dueDuringOutage) {
      if (failedIds.includes(id)) continue;
      const first = Math.min(...delivered.get(id)!.map((r) => r.receivedAt));
      expect(first).toBeGreaterThanOrEqual(upAt);
    }
  }, 300_000);
});
