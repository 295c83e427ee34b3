import { expect, it } from 'vitest';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { ATTEMPTS_OF_WAKE } from '../../packages/chronos-timers/src/store/wakes.js';
import { describeEachBackend } from '../support/backends.js';
import { makeService, OWNER } from '../support/harness.js';
import {
  age,
  ageAck,
  ageEscalation,
  ESCALATE_AFTER,
  failingReceiver,
  fire,
  makeTracker,
  MINUTE,
  RETENTION,
  wakeRow,
  wakeService,
  useSinks,
} from './support.js';

const statusOf = sql('test_retention_status', 'SELECT status FROM chronos.alarms WHERE id = ANY($1::uuid[])');
const olderStmt = sql(
  'test_retention_older',
  `UPDATE chronos.alarms SET updated_at = updated_at - $2::float8 * interval '1 millisecond' WHERE id = $1`,
);

// A wake's attempts while it exists (a first one delivered is on its row: migration 0017), and
// once it is gone, the attempt rows left behind (none, ever).
const attemptsOf = sql(
  'test_tracker_attempts_of',
  `SELECT (SELECT count(*) FROM chronos.wakes w CROSS JOIN LATERAL ${ATTEMPTS_OF_WAKE} t WHERE w.id = $1)::int
     + (SELECT count(*) FROM chronos.wake_attempts a
        WHERE a.wake_id = $1 AND NOT EXISTS (SELECT 1 FROM chronos.wakes w WHERE w.id = $1))::int AS n`,
);

describeEachBackend('tracker: retention', ({ t }) => {
  const { router, fallback } = useSinks();
  const statuses = async (ids: string[]) =>
    (await t.db.query<{ status: string }>(statusOf, [ids])).map((r) => r.status);
  const olderBy = (id: string, ms: number) => t.db.query(olderStmt, [id, ms]);
  const DAY = 24 * 60 * MINUTE;

  it('finished wakes are pruned with their attempts once the retention period has passed, not before', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const wakes = wakeService(t.db);
    const escalatedOld = await fire(t.db);
    await age(t.db, escalatedOld.wakeId, ESCALATE_AFTER + MINUTE);
    const ackedOld = await fire(t.db);
    const ackedRecent = await fire(t.db);
    for (const w of [ackedOld, ackedRecent]) await wakes.ack(OWNER, w.wakeId, 'done');
    expect(await tracker.runOnce()).toMatchObject({ escalated: 1, receipts: 2, pruned: 0 });
    expect((await t.db.query(attemptsOf, [ackedOld.wakeId]))[0]!.n).toBe(1);

    await ageEscalation(t.db, escalatedOld.wakeId, RETENTION + MINUTE);
    await ageAck(t.db, ackedOld.wakeId, RETENTION + MINUTE);
    await ageAck(t.db, ackedRecent.wakeId, RETENTION - MINUTE);
    const noAckOld = await fire(t.db, { require_ack: false });
    await age(t.db, noAckOld.wakeId, RETENTION + MINUTE);
    const failedOld = await fire(t.db, { require_ack: false }, failingReceiver(false));
    await age(t.db, failedOld.wakeId, RETENTION + MINUTE);

    const pass = await tracker.runOnce();
    expect(pass.pruned).toBe(4);
    for (const w of [ackedOld, noAckOld, failedOld, escalatedOld]) {
      expect(await wakeRow(t.db, w.wakeId)).toBeNull();
      expect((await t.db.query(attemptsOf, [w.wakeId]))[0]!.n).toBe(0);
    }
    expect(await wakeRow(t.db, ackedRecent.wakeId)).not.toBeNull();
  });

  it('a pending wake is never pruned, nor one still waiting for its ack, however old', async () => {
    const tracker = makeTracker(t.db, { router }); // no fallback: nothing gets escalated
    const pending = await fire(t.db, {}, failingReceiver());
    const waiting = await fire(t.db);
    const superseded = await fire(t.db, {}, failingReceiver());
    await makeService(t.db).cancel(OWNER, { id: superseded.alarm.id });
    for (const w of [pending, waiting, superseded]) await age(t.db, w.wakeId, 30 * DAY);

    expect((await tracker.runOnce()).pruned).toBe(0);
    for (const w of [pending, waiting, superseded]) expect(await wakeRow(t.db, w.wakeId)).not.toBeNull();
    expect((await wakeRow(t.db, pending.wakeId))!.status).toBe('pending');
  });

  it('prunes in bounded batches, and says when more remain', async () => {
    const tracker = makeTracker(t.db, { router, fallback }, { pruneBatchSize: 2 });
    for (let i = 0; i < 5; i++) {
      const w = await fire(t.db, { require_ack: false });
      await age(t.db, w.wakeId, RETENTION + MINUTE);
    }
    const passes = [await tracker.runOnce(), await tracker.runOnce(), await tracker.runOnce()];
    expect(passes.map((p) => [p.pruned, p.more])).toEqual([
      [2, true],
      [2, true],
      [1, false],
    ]);
  });

  it('finished alarms (fired, cancelled, failed) are deleted with their wakes and attempts after their own retention', async () => {
    const ALARM_RETENTION = 30 * DAY;
    const tracker = makeTracker(t.db, { router, fallback }, { alarmRetentionMs: ALARM_RETENTION });
    const alarms = makeService(t.db);
    const fired = await fire(t.db, { require_ack: false });
    const failed = await fire(t.db, { require_ack: false, max_failures: 1 }, failingReceiver(false));
    const { alarm: cancelled } = await alarms.create(OWNER, { inSeconds: 600 }, { source: 'api' });
    await alarms.cancel(OWNER, { id: cancelled.id });
    const { alarm: active } = await alarms.create(OWNER, { cron: '@daily' }, { source: 'api' });
    const { alarm: paused } = await alarms.create(OWNER, { cron: '@daily' }, { source: 'api' });
    await alarms.pause(OWNER, paused.id);
    const ids = [fired.alarm.id, failed.alarm.id, cancelled.id, active.id, paused.id];
    expect((await statuses(ids)).sort()).toEqual(['active', 'cancelled', 'failed', 'fired', 'paused']);

    // Not yet: finished a moment ago.
    expect((await tracker.runOnce()).prunedAlarms).toBe(0);
    for (const id of ids) await olderBy(id, ALARM_RETENTION + MINUTE);
    expect((await tracker.runOnce()).prunedAlarms).toBe(3);
    // Only the active and the paused one are left; the others' wakes and attempts went with them.
    expect((await statuses(ids)).sort()).toEqual(['active', 'paused']);
    expect(await wakeRow(t.db, fired.wakeId)).toBeNull();
    expect((await t.db.query(attemptsOf, [failed.wakeId]))[0]!.n).toBe(0);
    expect((await tracker.runOnce()).prunedAlarms).toBe(0);
  });
});
