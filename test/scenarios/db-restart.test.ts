/**
 * Scenario: the database restarts. Instances run on a private PostgreSQL (the machine's shared
 * one is never stopped); mid-run it is shut down with `pg_ctl stop -m fast` — every connection
 * cut, every open transaction rolled back — and started again once every instance has reported
 * itself not ready.
 *
 * Proves that a database restart loses nothing (I2): every alarm committed before it, and every
 * alarm whose create was answered 201 by the API while the instances kept taking requests, is
 * delivered; no instance needs a restart of its own; `/readyz` answers 503 while the database is
 * away and 200 again after. Duplicates are counted: a delivery that finished while the database
 * was away cannot be recorded, so its wake is sent again after the lease.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER } from '../support/harness.js';
import { KeyService } from '../../packages/chronos-timers/src/core/key-service.js';
import { PgDb } from '../../packages/chronos-timers/src/store/driver/db.js';
import { PrivateCluster } from './support/cluster.js';
import { allDelivered, allSettled, errorLines, fencedLines, serveEnv, startFleet } from './support/fleet.js';
import { stopAll, type Instance } from './support/instance.js';
import { Router } from './support/router.js';
import { alarmsByStatus, loadAlarms, owners } from './support/rows.js';
import { sized, sleep, startReport, waitUntil } from './support/scenario.js';

// Full size also keeps the database away for longer than a lease, so deliveries that finished
// while it was away cannot be recorded in time and are sent again (counted as duplicates).
const SIZE = sized(
  { instances: 2, alarms: 1_000, spreadMs: 6_000, leaseMs: 3_000, extraDownMs: 0 },
  { instances: 3, alarms: 6_000, spreadMs: 30_000, leaseMs: 5_000, extraDownMs: 10_000 },
);

// In CI a machine without the PostgreSQL server binaries is a failure, not a skip.
const available = PrivateCluster.available() || !!process.env.CI;
if (!available)
  console.warn(
    '\n!!! No PostgreSQL server binaries (initdb, pg_ctl): the database restart scenario is SKIPPED.\n',
  );

describe.skipIf(!available)('scenario: database restart', () => {
  let cluster: PrivateCluster;
  let db: PgDb;
  let router: Router;
  let fleet: Instance[] = [];
  beforeAll(async () => {
    cluster = await PrivateCluster.create();
    const url = await cluster.createDatabase('chronos');
    db = PgDb.connect(url, 4);
    router = await Router.start(() => ({ status: 200, delayMs: 20 + Math.floor(Math.random() * 80) }));
  }, 60_000);
  afterAll(async () => {
    await stopAll(fleet);
    await router?.close();
    await db?.close().catch(() => {});
    await cluster?.destroy();
  });

  it('PostgreSQL stopped (fast) mid-run and started again: nothing lost, readiness 503 and back, no instance restarted', async () => {
    const report = startReport('database-restart', 'test/scenarios/db-restart.test.ts');
    fleet = await startFleet(
      SIZE.instances,
      serveEnv(cluster.url('chronos'), router, {
        CHRONOS_LEASE: `${SIZE.leaseMs}ms`,
        CHRONOS_DELIVERY_TIMEOUT: '2s',
        CHRONOS_DB_CONNECT_TIMEOUT: '1s',
      }),
    );
    const key = (await new KeyService(db).create(OWNER.did, 'scenario')).key;
    const due = await loadAlarms(db, {
      count: SIZE.alarms,
      firstDueInMs: 2_000,
      spreadMs: SIZE.spreadMs,
      owners: owners(10),
    });
    const firstDue = Math.min(...due.values());

    // Readiness of every instance, every 100 ms, as a load balancer would poll it.
    const readiness = new Map<string, { at: number; status: number }[]>(fleet.map((i) => [i.name, []]));
    let polling = true;
    const poller = (async () => {
      while (polling) {
        await Promise.all(
          fleet.map(async (instance) => {
            const status = await instance.readyz(1_500);
            const seen = readiness.get(instance.name)!;
            if (seen.at(-1)?.status !== status) seen.push({ at: Date.now(), status });
          }),
        );
        await sleep(100);
      }
    })();

    // An API client creating alarms through every instance all along: a 201 is a commitment.
    const created = new Map<string, number>();
    const answers: Record<string, number> = {};
    let creating = true;
    const creator = (async () => {
      for (let n = 0; creating; n++) {
        const instance = fleet[n % fleet.length]!;
        let status: number;
        try {
          const response = await fetch(`${instance.url}/v1/alarms`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ in_seconds: 1 + (n % 3), label: `api-${n}`, require_ack: false }),
            signal: AbortSignal.timeout(5_000),
          });
          status = response.status;
          const body = (await response.json()) as { alarm?: { id: string; next_fire_at: string } };
          if (status === 201) created.set(body.alarm!.id, Date.parse(body.alarm!.next_fire_at));
        } catch {
          status = 0;
        }
        answers[status] = (answers[status] ?? 0) + 1;
        await sleep(50);
      }
    })();

    await sleep(firstDue + SIZE.spreadMs / 2 - Date.now());
    const stoppedAt = Date.now();
    await cluster.stop('fast');
    const stopMs = Date.now() - stoppedAt;
    await waitUntil(() => fleet.every((i) => readiness.get(i.name)!.at(-1)!.status === 503), {
      timeoutMs: 15_000,
      what: 'every instance to report 503 on /readyz',
      describe: () => Object.fromEntries(readiness),
    });
    await sleep(SIZE.extraDownMs);
    const startedAt = Date.now();
    await cluster.start();
    const startMs = Date.now() - startedAt;
    await waitUntil(() => fleet.every((i) => readiness.get(i.name)!.at(-1)!.status === 200), {
      timeoutMs: 30_000,
      what: 'every instance to report 200 on /readyz again',
      describe: () => Object.fromEntries(readiness),
    });
    await sleep(2_000);
    creating = false;
    await creator;

    const all = new Map([...due, ...created]);
    await allDelivered(router, all, SIZE.spreadMs + 4 * SIZE.leaseMs + 60_000);
    await allSettled(db, all, 4 * SIZE.leaseMs + 30_000);
    polling = false;
    await poller;
    const tally = await router.tally(all, db);

    const relative = (at: number) => Math.round(at - stoppedAt);
    Object.assign(report, {
      instances: SIZE.instances,
      leaseMs: SIZE.leaseMs,
      alarmsLoaded: SIZE.alarms,
      alarmsCreatedThroughApi: created.size,
      apiAnswers: answers,
      databaseStoppedAfterFirstDueMs: Math.round(stoppedAt - firstDue),
      databaseDownMs: Math.round(startedAt + startMs - stoppedAt),
      pgCtlStopMs: stopMs,
      pgCtlStartMs: startMs,
      readinessMsFromStop: Object.fromEntries(
        [...readiness].map(([name, seen]) => [name, seen.map((s) => `${s.status}@${relative(s.at)}`)]),
      ),
      restartsOfInstances: fleet.map((i) => i.incarnations.length - 1),
      tally,
      fencedOutcomes: fencedLines(fleet),
      errorLogLines: errorLines(fleet).length,
      statuses: await alarmsByStatus(db),
    });
    await report.finish();

    expect(tally.lost).toBe(0);
    expect(tally.failed).toBe(0);
    expect(tally.early).toBe(0);
    expect(tally.earlyByDatabase).toBe(0);
    expect(created.size).toBeGreaterThan(0);
    for (const instance of fleet) {
      expect(instance.running, `${instance.name} still runs`).toBe(true);
      expect(instance.incarnations, `${instance.name} was never restarted`).toHaveLength(1);
      const seen = readiness.get(instance.name)!.map((s) => s.status);
      expect(seen[0]).toBe(200);
      expect(seen).toContain(503);
      expect(seen.at(-1)).toBe(200);
    }
    // Only 201, 503 (database away) or a request cut by the restart itself; never a 500.
    expect(Object.keys(answers).filter((s) => !['0', '201', '503'].includes(s))).toEqual([]);
  }, 240_000);
});
