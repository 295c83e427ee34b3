/**
 * Scenario: the router is down. The sink stops listening (connections refused) for a stretch
 * while alarms keep falling due, then listens again.
 *
 * What happens, and why: the first deliveries to hit the outage cannot connect (`router
 * unreachable: ECONNREFUSED`). That is an outage, not the wake's failure: it spends none of the
 * alarm's `max_failures`, and from that first refused connection the instance *holds* — it stops
 * claiming and probes the router with a TCP connect (backing off to every 5 s) — so alarms falling
 * due during the outage wait in the table, unattempted, and are delivered late once a probe
 * connects. Even alarms allowed a single attempt (`max_failures: 1`), including a burst sent just
 * as the router went, are delivered after it returns: an outage only delays. Nothing is lost (I2).
 */
import { expect, it } from 'vitest';
import { allDelivered, allSettled, errorLines, serveEnv, startFleet, useScenario } from './support/fleet.js';
import { alarmsByStatus, alarmStates, loadAlarms, owners } from './support/rows.js';
import { sized, sleep, spread, startReport } from './support/scenario.js';
import { describePostgresOnly } from '../support/backends.js';

const SIZE = sized(
  { alarms: 400, fragile: 80, burst: 10, spreadMs: 8_000, outageFromMs: 1_500, outageMs: 4_000 },
  { alarms: 3_000, fragile: 300, burst: 20, spreadMs: 90_000, outageFromMs: 10_000, outageMs: 60_000 },
);

describePostgresOnly('two chronos serve processes on one database', 'scenario: router outage', () => {
  const scenario = useScenario();

  it(`the router refuses connections for ${SIZE.outageMs / 1000} s: nothing lost, nothing failed; alarms due meanwhile delivered late`, async () => {
    const report = startReport('router-outage', 'test/scenarios/router-outage.test.ts');
    const fleet = await startFleet(2, serveEnv(scenario.t.url!, scenario.router, { CHRONOS_LEASE: '10s' }));
    const people = owners(10);
    const sturdy = await loadAlarms(scenario.t.db, {
      count: SIZE.alarms - SIZE.fragile,
      firstDueInMs: 2_000,
      spreadMs: SIZE.spreadMs,
      owners: people,
      label: 'sturdy',
    });
    // Alarms that give up at their first failure: an outage must not make them `failed`.
    const fragile = await loadAlarms(scenario.t.db, {
      count: SIZE.fragile,
      firstDueInMs: 2_000,
      spreadMs: SIZE.spreadMs,
      owners: people,
      label: 'fragile',
      maxFailures: 1,
    });
    // And a burst of them due together just as the router goes: claimed in one batch and sent
    // into the outage before the instance holds, so their one allowed attempt is refused.
    const burst = await loadAlarms(scenario.t.db, {
      count: SIZE.burst,
      firstDueInMs: 2_000 + SIZE.outageFromMs + 30,
      owners: people,
      label: 'burst',
      maxFailures: 1,
    });
    const due = new Map([...sturdy, ...fragile, ...burst]);
    const firstDue = Math.min(...due.values());

    await sleep(firstDue + SIZE.outageFromMs - Date.now());
    const downAt = Date.now();
    await scenario.router.sink.down();
    // Sample each instance's hold while the router is away.
    const held: Record<string, number[]> = Object.fromEntries(fleet.map((i) => [i.name, []]));
    while (Date.now() < downAt + SIZE.outageMs) {
      for (const instance of fleet) held[instance.name]!.push(await instance.metric('chronos_router_held'));
      await sleep(Math.min(1_000, downAt + SIZE.outageMs - Date.now()));
    }
    await scenario.router.sink.up();
    const upAt = Date.now();

    await allSettled(scenario.t.db, due, SIZE.spreadMs + 120_000);
    const states = await alarmStates(scenario.t.db, [...due.keys()]);
    const failedIds = [...states].filter(([, s]) => s.status === 'failed').map(([id]) => id);
    const expectDelivered = new Map([...due].filter(([id]) => !failedIds.includes(id)));
    await allDelivered(scenario.router, expectDelivered, 30_000);
    const tally = await scenario.router.tally(due, scenario.t.db);

    const dueDuringOutage = [...due].filter(([, at]) => at >= downAt && at < upAt);
    const delivered = scenario.router.deliveredByAlarm();
    const deliveredAfter = dueDuringOutage
      .filter(([id]) => delivered.has(id))
      .map(([id, at]) => Math.min(...delivered.get(id)!.map((r) => r.receivedAt)) - at);
    // A refused attempt spends nothing but leaves its last_error behind on the delivered alarm.
    const refused = [...states].filter(([, s]) => /^router unreachable/.test(s.lastError ?? ''));
    const errors = new Set(refused.map(([, s]) => s.lastError.replace(/:.*$/s, '')));

    Object.assign(report, {
      instances: 2,
      alarms: SIZE.alarms + SIZE.burst,
      alarmsWithMaxFailures1: SIZE.fragile + SIZE.burst,
      outageMs: Math.round(upAt - downAt),
      alarmsDueDuringOutage: dueDuringOutage.length,
      alarmsRefusedDuringOutage: refused.length,
      refusedAmongMaxFailures1: refused.filter(([id]) => fragile.has(id) || burst.has(id)).length,
      failed: failedIds.length,
      burstDueAtOutageStart: SIZE.burst,
      lastErrors: [...errors],
      heldSamples: held,
      latenessOfAlarmsDueDuringOutageMs: spread(deliveredAfter),
      tally,
      errorLogLines: errorLines(fleet).length,
      statuses: await alarmsByStatus(scenario.t.db),
    });
    await report.finish();

    expect(tally.lost).toBe(0);
    expect(tally.early).toBe(0);
    expect(tally.earlyByDatabase).toBe(0);
    // An outage only delays: nothing failed, not even the alarms allowed a single attempt.
    expect(failedIds).toEqual([]);
    expect(tally.delivered).toBe(SIZE.alarms + SIZE.burst);
    // Attempts the outage refused are visible and spent none of their alarm's max_failures.
    expect(refused.length).toBeGreaterThan(0);
    for (const [, state] of refused) expect(state.failureCount).toBe(0);
    // Each instance held deliveries while the router was away.
    for (const samples of Object.values(held)) expect(samples).toContain(1);
    // Everything that fell due during the outage was delivered after the router came back.
    for (const [id] of dueDuringOutage) {
      const first = Math.min(...delivered.get(id)!.map((r) => r.receivedAt));
      expect(first).toBeGreaterThanOrEqual(upAt);
    }
  }, 300_000);
});
