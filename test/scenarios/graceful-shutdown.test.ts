/**
 * Scenario: SIGTERM during a burst. Instance A is delivering a burst of wakes (the router takes
 * 100–300 ms to answer each) when it is told to stop; among what it holds are wakes whose first
 * delivery the router never answers. Instance B runs beside it.
 *
 * Proves contract §10's shutdown: A stops claiming, the deliveries it has under way finish within
 * the grace period and are recorded (so none of them is sent again), the ones still hanging when
 * the grace period ends are cut and their leases given back, and B fires those at once — long
 * before their lease (30 s) would have lapsed. A exits 0.
 */
import { expect, it } from 'vitest';
import { allDelivered, allSettled, errorLines, fencedLines, serveEnv, useScenario } from './support/fleet.js';
import { Instance } from './support/instance.js';
import { alarmsByStatus, loadAlarms, owners } from './support/rows.js';
import { sized, spread, startReport, waitUntil } from './support/scenario.js';
import { describePostgresOnly } from '../support/backends.js';

const SIZE = sized(
  { burst: 1_500, burstOverMs: 6_000, stuck: 20, graceMs: 2_000, timeoutMs: 10_000 },
  { burst: 6_000, burstOverMs: 15_000, stuck: 50, graceMs: 10_000, timeoutMs: 20_000 },
);
const LEASE_MS = 30_000;

describePostgresOnly('two chronos serve processes on one database', 'scenario: graceful shutdown', () => {
  const fleet: Instance[] = [];
  const stuck = new Set<string>();
  // The first delivery of a stuck alarm is never answered; everything else after 100–300 ms.
  const seen = new Set<string>();
  const scenario = useScenario((request) => {
    const id = (JSON.parse(request.body) as { alarm_id: string }).alarm_id;
    if (stuck.has(id) && !seen.has(id)) {
      seen.add(id);
      return { hang: true };
    }
    return { status: 200, delayMs: 100 + Math.floor(Math.random() * 200) };
  });

  it('SIGTERM during a burst: deliveries under way finish, hung ones are released and fired by the other instance at once, exit 0', async () => {
    const report = startReport('graceful-shutdown', 'test/scenarios/graceful-shutdown.test.ts');
    const env = serveEnv(scenario.t.url!, scenario.router, {
      CHRONOS_LEASE: `${LEASE_MS}ms`,
      CHRONOS_SHUTDOWN_GRACE: `${SIZE.graceMs}ms`,
      CHRONOS_DELIVERY_TIMEOUT: `${SIZE.timeoutMs}ms`,
    });
    const a = await Instance.create('chronos-a', env);
    const b = await Instance.create('chronos-b', env);
    fleet.push(a, b);
    await a.start();

    // The stuck alarms fall due first, so A — alone at that moment — claims them all.
    const people = owners(10);
    const stuckDue = await loadAlarms(scenario.t.db, {
      count: SIZE.stuck,
      firstDueInMs: 1_500,
      owners: people,
      label: 'stuck',
    });
    for (const id of stuckDue.keys()) stuck.add(id);
    const burstDue = await loadAlarms(scenario.t.db, {
      count: SIZE.burst,
      firstDueInMs: 1_600,
      spreadMs: SIZE.burstOverMs,
      owners: people,
      label: 'burst',
    });
    const due = new Map([...stuckDue, ...burstDue]);
    await waitUntil(
      () => scenario.router.receipts().filter((r) => stuck.has(r.alarmId)).length === SIZE.stuck,
      {
        timeoutMs: 30_000,
        what: 'A to send every stuck alarm',
      },
    );
    await b.start();

    const inFlightAtTerm = await a.metric('chronos_deliveries_in_flight');
    const receivedBeforeTerm = scenario.router.sink.received;
    const termAt = Date.now();
    const ended = await a.terminate();
    const exitMs = Date.now() - termAt;

    await allDelivered(scenario.router, due, LEASE_MS);
    await allSettled(scenario.t.db, due, 30_000);
    const tally = await scenario.router.tally(due, scenario.t.db);

    // A stuck alarm's first request (A's) was cut; its delivery came from B, after A let it go.
    const receipts = scenario.router.receipts();
    const refiredAfterMs: number[] = [];
    for (const id of stuck) {
      const list = receipts.filter((r) => r.alarmId === id).sort((x, y) => x.receivedAt - y.receivedAt);
      refiredAfterMs.push(list.find((r) => r.ok)!.receivedAt - termAt);
    }
    const firstOfStuck = [...stuck].map(
      (id) => receipts.filter((r) => r.alarmId === id).sort((x, y) => x.receivedAt - y.receivedAt)[0]!,
    );
    const aLogs = a.logs();
    const burstDuplicates = [...scenario.router.deliveredByAlarm()].filter(
      ([id, list]) => burstDue.has(id) && list.length > 1,
    ).length;

    Object.assign(report, {
      instances: 2,
      burst: SIZE.burst,
      burstDueOverMs: SIZE.burstOverMs,
      stuckAlarms: SIZE.stuck,
      leaseMs: LEASE_MS,
      graceMs: SIZE.graceMs,
      deliveriesInFlightOnAAtSigterm: inFlightAtTerm,
      requestsReceivedBeforeSigterm: receivedBeforeTerm,
      aExitCode: ended.exitCode,
      aExitAfterSigtermMs: exitMs,
      stuckRefiredAfterSigtermMs: spread(refiredAfterMs),
      burstDuplicates,
      tally,
      fencedOutcomes: fencedLines(fleet),
      errorLogLines: errorLines(fleet).length,
      aShutdownLog: aLogs
        .filter((l) => /shutting down|stopped|received SIG|release/.test(String(l.msg)))
        .map((l) => l.msg),
      statuses: await alarmsByStatus(scenario.t.db),
    });
    await report.finish();

    expect(ended.exitCode).toBe(0);
    expect(inFlightAtTerm).toBeGreaterThan(SIZE.stuck);
    expect(tally.lost).toBe(0);
    expect(tally.failed).toBe(0);
    expect(tally.early).toBe(0);
    expect(tally.earlyByDatabase).toBe(0);
    // What A had under way finished and was recorded: no burst wake was sent twice.
    expect(burstDuplicates).toBe(0);
    // The hung ones were cut by A and fired by B, within the lease they would otherwise have waited out.
    for (const first of firstOfStuck) expect(first.request.clientGone).toBe(true);
    for (const ms of refiredAfterMs) expect(ms).toBeLessThan(LEASE_MS);
    expect(aLogs.some((l) => l.msg === 'stopped')).toBe(true);
  }, 180_000);
});
