/**
 * The hanging-router case of issue 45: 250 wakes of one owner whose router never answers (cut
 * off at the 10 s delivery timeout) fall due just before 30 wakes of another owner; how late are
 * the other owner's wakes? Lateness: from the dispatcher's start (every wake already due) to
 * each of the other owner's wakes reaching the router. Default dispatcher: concurrency 200.
 *
 *   npx tsx bench/noisy-neighbour.ts            # PostgreSQL (BENCH_DATABASE_URL)
 */
import { AlarmService } from '../packages/chronos-timers/src/core/alarm-service.js';
import { parseOwner } from '../packages/chronos-timers/src/core/owner.js';
import { Dispatcher } from '../packages/chronos-timers/src/dispatch/dispatcher.js';
import { WebhookReceiver } from '../packages/chronos-timers-server/src/receivers/webhook.js';
import { DbClock } from '../packages/chronos-timers/src/store/driver/db-clock.js';
import { sql } from '../packages/chronos-timers/src/store/driver/db.js';
import { Sink } from '../test/support/sink.js';
import { createPostgres, summarize } from './support.js';

const HUNG = parseOwner('did:matrix:11111111-1111-4111-8111-111111111111:hung');
const OTHER = parseOwner('did:matrix:22222222-2222-4222-8222-222222222222:other');

const bench = await createPostgres('noisy', 10);
const sink = await Sink.start();
try {
  const { db } = bench;
  const alarms = new AlarmService({
    db,
    dbClock: new DbClock(db),
    quotas: { maxActiveAlarms: 0, createRatePerMinute: 0, minCronIntervalMs: 0 },
    notifyHorizonMs: 1_000,
  });
  const api = { source: 'api' } as const;
  const now = Date.now();
  await alarms.createMany(
    Array.from({ length: 250 }, () => ({
      owner: HUNG,
      spec: { at: new Date(now + 3_600_000).toISOString() },
    })),
    api,
  );
  await alarms.createMany(
    Array.from({ length: 30 }, () => ({
      owner: OTHER,
      spec: { at: new Date(now + 3_600_001).toISOString() },
    })),
    api,
  );
  // Every wake due an hour ago, the hung owner's first.
  await db.query(
    sql(
      'bench_due',
      `UPDATE chronos.alarms SET next_fire_at = next_fire_at - interval '2 hours', scheduled_for = scheduled_for - interval '2 hours'`,
    ),
  );
  sink.respond = (r) =>
    (JSON.parse(r.body) as { user_id: string }).user_id === HUNG.userId ? { hang: true } : { status: 200 };
  const receiver = new WebhookReceiver({ url: sink.url(), secrets: [], timeoutMs: 10_000, concurrency: 256 });
  const dispatcher = new Dispatcher({
    db,
    queue: 'router',
    receiver,
    leaseMs: 30_000,
    deliveryTimeoutMs: 10_000,
  });
  const started = Date.now();
  await dispatcher.start();
  while (sink.requests.filter((r) => r.body.includes(OTHER.userId)).length < 30)
    await new Promise((r) => setTimeout(r, 5));
  const lateness = sink.requests
    .filter((r) => r.body.includes(OTHER.userId))
    .map((r) => r.receivedAt - started);
  console.log(
    JSON.stringify({ unrelatedWakes: 30, latenessMs: summarize(lateness), maxMs: Math.max(...lateness) }),
  );
  await dispatcher.stop(0);
  await receiver.close();
} finally {
  await sink.close();
  await bench.drop();
}
