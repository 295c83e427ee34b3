/**
 * Scenario: PgBouncer in transaction mode. A real PgBouncer (Debian's 1.18, support/pgbouncer.ts)
 * with 5 server connections in front of the test PostgreSQL; `chronos serve` with `DATABASE_URL`
 * through it and `CHRONOS_DB_POOLER=transaction`, and the library's `schedule()` and `work()`
 * with `pooler: 'transaction'`.
 *
 * Proves (contract §14): the drain, the HTTP API (create, read, ack) and the tracker (nudges) work
 * through a pooler that hands each transaction to whichever server connection is free, so no
 * session state survives between transactions: statements go unnamed (a named one prepared on one
 * server connection is missing on the next); every error-level log line would show such a
 * failure, and there are none. LISTEN goes through `CHRONOS_LISTEN_URL`: an alarm created due in
 * a second wakes a dispatcher whose next poll is a minute away. Without it nothing listens and
 * the dispatcher finds due alarms by its poll. What the pooler costs is a benchmark's subject
 * (`npx tsx bench/drain.ts --pgbouncer`, `npm run bench:http -- --pgbouncer`).
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { KeyService } from '../../packages/chronos-timers/src/core/key-service.js';
import { createChronos } from '../../packages/chronos-timers/src/library.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { OWNER } from '../support/harness.js';
import { describePostgresOnly } from '../support/backends.js';
import { allDelivered, allSettled, errorLines, serveEnv, startFleet, useScenario } from './support/fleet.js';
import { Instance, stopAll } from './support/instance.js';
import { PgBouncer } from './support/pgbouncer.js';
import { alarmsByStatus, loadAlarms, owners } from './support/rows.js';
import { sized, spread, startReport, waitUntil } from './support/scenario.js';

const SIZE = sized(
  { alarms: 2_000, spreadMs: 4_000, api: 60, library: 2_000 },
  { alarms: 10_000, spreadMs: 10_000, api: 300, library: 10_000 },
);
const INSTANCES = 2;
/** Server connections per database and user: fewer than the instances' clients (20 each). */
const SERVER_CONNECTIONS = 5;

// In CI a machine without pgbouncer is a failure (.ci/run installs it), not a skip.
if (!PgBouncer.available() && !process.env.CI) {
  console.warn(
    '\n!!! pgbouncer is not installed (apt-get install -y pgbouncer): the PgBouncer scenario FAILS.\n',
  );
}

const listening = sql(
  'scenario_listening_backends',
  `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`,
);

const libraryStatuses = sql(
  'scenario_library_statuses',
  `SELECT count(*) FILTER (WHERE status = 'fired')::int AS fired, count(*) FILTER (WHERE status <> 'fired')::int AS other
   FROM chronos.alarms WHERE queue = 'scenario'`,
);

describePostgresOnly('a real PgBouncer in front of the test PostgreSQL', 'scenario: PgBouncer', () => {
  const scenario = useScenario();
  let bouncer: PgBouncer;
  let database: string;
  const report = startReport('pgbouncer', 'test/scenarios/pgbouncer.test.ts');
  beforeAll(async () => {
    const url = new URL(scenario.t.url!);
    database = url.pathname.slice(1);
    bouncer = await PgBouncer.start({
      serverHost: url.hostname,
      serverPort: Number(url.port || 5432),
      users: [decodeURIComponent(url.username)],
      poolSize: SERVER_CONNECTIONS,
    });
  }, 60_000);
  // Each test starts its own instances; a failed one must not leave them to the next.
  afterEach(async () => {
    await stopAll(Instance.created());
  });
  afterAll(async () => {
    await bouncer?.stop();
    await report.finish();
  });

  /** Creates through the API, round-robin over `fleet`; returns alarm id → due instant. */
  async function createThroughApi(fleet: Instance[], count: number, body: Record<string, unknown>) {
    const key = (await new KeyService(scenario.t.db).create(OWNER.did, 'scenario')).key;
    const created = new Map<string, number>();
    for (let n = 0; n < count; n++) {
      const response = await fetch(`${fleet[n % fleet.length]!.url}/v1/alarms`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ...body, label: `api-${n}` }),
      });
      const answer = (await response.json()) as { alarm: { id: string; next_fire_at: string } };
      expect(response.status).toBe(201);
      created.set(answer.alarm.id, Date.parse(answer.alarm.next_fire_at));
    }
    return { key, created };
  }

  const latenessOf = (due: ReadonlyMap<string, number>) => {
    const delivered = scenario.router.deliveredByAlarm();
    return spread([...due].map(([id, at]) => Math.min(...delivered.get(id)!.map((r) => r.receivedAt)) - at));
  };

  it(`${INSTANCES} instances through PgBouncer with CHRONOS_LISTEN_URL: the drain, the API and the tracker work, and NOTIFY wakes an idle dispatcher`, async () => {
    // The drain: alarms falling due over a few seconds, claimed and recorded through PgBouncer.
    // Loaded before the instances start (a bulk insert sends no NOTIFY), so their first look
    // finds them.
    const loaded = await loadAlarms(scenario.t.db, {
      count: SIZE.alarms,
      firstDueInMs: 5_000,
      spreadMs: SIZE.spreadMs,
      owners: owners(10),
    });
    const fleet = await startFleet(
      INSTANCES,
      serveEnv(bouncer.url(database), scenario.router, {
        CHRONOS_DB_POOLER: 'transaction',
        CHRONOS_LISTEN_URL: scenario.t.url!,
        // A minute: only a notification makes an idle dispatcher look again sooner.
        CHRONOS_POLL_INTERVAL: '60s',
        CHRONOS_NUDGE_AFTER: '1s',
        CHRONOS_TRACKER_INTERVAL: '250ms',
      }),
    );
    for (const instance of fleet) {
      expect(instance.logs().map((l) => l.msg)).toContain(
        'CHRONOS_DB_POOLER=transaction: statements are sent unnamed; LISTEN goes through CHRONOS_LISTEN_URL',
      );
    }
    // Each instance LISTENs on one direct connection, for both its channels (due alarms, revoked keys).
    const [{ n: listeners }] = (await scenario.t.db.query<{ n: number }>(listening)) as [{ n: number }];
    expect(listeners).toBe(INSTANCES);

    await allDelivered(scenario.router, loaded, SIZE.spreadMs + 60_000);
    await allSettled(scenario.t.db, loaded, 30_000);

    // The API, while every dispatcher sleeps on a minute-long poll: each alarm, due a second
    // after its create, is delivered well within that minute — a NOTIFY woke the dispatcher.
    const createdAt = Date.now();
    const { key, created } = await createThroughApi(fleet, SIZE.api, { in_seconds: 1, require_ack: true });
    await allDelivered(scenario.router, created, 20_000);
    const apiDeliveredMs = Date.now() - createdAt;
    // Reads through PgBouncer too.
    const [first] = created.keys();
    const read = await fetch(`${fleet[1]!.url}/v1/alarms/${first}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(read.status).toBe(200);

    // The tracker: every unacknowledged wake nudged, once; then each acknowledged through the API.
    const nudged = () =>
      new Set(
        scenario.router
          .receipts()
          .filter((r) => r.type === 'alarm.nudge' && r.ok)
          .map((r) => r.alarmId),
      );
    await waitUntil(
      () => {
        const seen = nudged();
        return [...created.keys()].every((id) => seen.has(id));
      },
      {
        timeoutMs: 30_000,
        what: 'a nudge for every wake created through the API',
        describe: () => ({
          nudged: nudged().size,
          warnings: fleet
            .flatMap((i) => i.logs())
            .filter((l) => Number(l.level) >= 40)
            .slice(-5),
        }),
      },
    );
    const wakes = new Map(
      scenario.router
        .receipts()
        .filter((r) => r.type === 'alarm.fired' && created.has(r.alarmId))
        .map((r) => [r.alarmId, r.wakeId]),
    );
    for (const [n, wakeId] of [...wakes.values()].entries()) {
      const response = await fetch(`${fleet[n % fleet.length]!.url}/v1/wakes/${wakeId}/ack`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ note: 'seen' }),
      });
      expect(response.status).toBe(200);
    }

    const all = new Map([...loaded, ...created]);
    const tally = await scenario.router.tally(all, scenario.t.db);
    const nudges = scenario.router.receipts().filter((r) => r.type === 'alarm.nudge' && r.ok);
    Object.assign(report, {
      instances: INSTANCES,
      pgbouncer: {
        version: '1.18 (Debian 12)',
        poolMode: 'transaction',
        serverConnections: SERVER_CONNECTIONS,
      },
      withListenUrl: {
        tally,
        loadedAlarms: { count: loaded.size, dueOverMs: SIZE.spreadMs, latenessMs: latenessOf(loaded) },
        apiAlarms: {
          count: created.size,
          pollIntervalMs: 60_000,
          allDeliveredAfterFirstCreateMs: apiDeliveredMs,
          latenessMs: latenessOf(created),
        },
        nudges: { sent: nudges.length, alarms: nudged().size },
        acknowledged: wakes.size,
        listeningBackends: listeners,
        errorLogLines: errorLines(fleet).length,
      },
    });

    expect(tally).toMatchObject({ lost: 0, failed: 0, duplicated: 0, early: 0, earlyByDatabase: 0 });
    expect(tally.delivered).toBe(all.size);
    expect(nudges).toHaveLength(created.size);
    expect(errorLines(fleet)).toEqual([]);
  }, 180_000);

  it('without CHRONOS_LISTEN_URL nothing LISTENs, and the dispatcher finds due alarms by its poll', async () => {
    await waitUntil(async () => (await scenario.t.db.query<{ n: number }>(listening))[0]!.n === 0, {
      timeoutMs: 10_000,
      what: 'the previous instances’ LISTEN connections to close',
    });
    const [instance] = await startFleet(
      1,
      serveEnv(bouncer.url(database), scenario.router, {
        CHRONOS_DB_POOLER: 'transaction',
        CHRONOS_POLL_INTERVAL: '500ms',
      }),
    );
    expect(instance!.logs().find((l) => String(l.msg).includes('nothing LISTENs'))).toMatchObject({
      level: 30,
      listen: 'none',
    });
    const { created } = await createThroughApi([instance!], SIZE.api, { in_seconds: 1, require_ack: false });
    await allDelivered(scenario.router, created, 30_000);
    const [{ n: listeners }] = (await scenario.t.db.query<{ n: number }>(listening)) as [{ n: number }];
    const tally = await scenario.router.tally(created, scenario.t.db);
    Object.assign(report, {
      withoutListenUrl: {
        tally,
        pollIntervalMs: 500,
        latenessMs: latenessOf(created),
        listeningBackends: listeners,
        errorLogLines: errorLines([instance!]).length,
      },
    });

    expect(listeners).toBe(0);
    expect(tally).toMatchObject({ lost: 0, failed: 0, duplicated: 0, early: 0, earlyByDatabase: 0 });
    expect(errorLines([instance!])).toEqual([]);
  }, 120_000);

  it('the library through PgBouncer: timers written in the caller’s transaction, drained by work()', async () => {
    const through = bouncer.url(database);
    const chronos = await createChronos({
      databaseUrl: through,
      pooler: 'transaction',
      listenUrl: scenario.t.url!,
    });
    // The application's own pool goes through PgBouncer as well.
    const pool = new pg.Pool({ connectionString: through, max: 4 });
    const fired = new Map<string, number>();
    let duplicates = 0;
    const started = Date.now();
    const worker = chronos.work(
      (fire) => {
        if (fired.has(fire.key)) duplicates++;
        fired.set(fire.key, fire.latenessMs);
      },
      { queue: 'scenario' },
    );
    try {
      const write = async (keys: string[], commit: boolean) => {
        const tx = await pool.connect();
        try {
          await tx.query('BEGIN');
          await chronos.scheduleMany(
            tx,
            keys.map((key) => ({ key, at: new Date(), queue: 'scenario', payload: { key } })),
          );
          await tx.query(commit ? 'COMMIT' : 'ROLLBACK');
        } finally {
          tx.release();
        }
      };
      const keys = Array.from({ length: SIZE.library }, (_, i) => `lib-${i}`);
      // Batches of 1,500: more than one statement each, in a savepoint, through the pooler.
      for (let i = 0; i < keys.length; i += 1_500) await write(keys.slice(i, i + 1_500), true);
      await write(['rolled-back'], false);
      await waitUntil(() => fired.size === keys.length, {
        timeoutMs: 60_000,
        what: `all ${keys.length} library timers fired`,
        describe: () => ({ fired: fired.size }),
      });
      const drainMs = Date.now() - started;
      // Every outcome recorded (through PgBouncer) before the rows are read.
      await worker.stop();
      Object.assign(report, {
        library: {
          timers: keys.length,
          drainedMs: drainMs,
          duplicates,
          rolledBackFired: fired.has('rolled-back'),
        },
        statuses: await alarmsByStatus(scenario.t.db),
      });

      expect(duplicates).toBe(0);
      expect(fired.has('rolled-back')).toBe(false);
      const [library] = await scenario.t.db.query<{ fired: number; other: number }>(libraryStatuses);
      expect(library).toEqual({ fired: SIZE.library, other: 0 });
      expect(await chronos.get('lib-0')).toMatchObject({ status: 'fired' });
    } finally {
      await worker.stop();
      await chronos.close();
      await pool.end();
    }
  }, 120_000);
});
