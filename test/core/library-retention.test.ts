/**
 * The library deletes its own finished timers: a `work()` of a queue prunes that queue's finished
 * timers (with their fires) after `finishedTimerRetentionMs`, freeing their keys, and never
 * touches another queue's — so an application with no `chronos serve` beside it does not grow
 * its table forever, and one with a server keeps each to its own retention.
 */
import { expect, it } from 'vitest';
import { isChronosError } from '../../packages/chronos-timers/src/errors.js';
import { createChronos } from '../../packages/chronos-timers/src/library.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { ATTEMPTS_OF_WAKE } from '../../packages/chronos-timers/src/store/wakes.js';
import { describeEachBackend } from '../support/backends.js';
import { backdate, gate } from '../support/harness.js';
import { libraryOn } from '../support/library.js';

const wakeCount = sql(
  'test_wakes_of_alarm',
  'SELECT count(*)::int AS n FROM chronos.wakes WHERE alarm_id = $1::uuid',
);
// Rows whose parent is gone: none, ever (no foreign key checks this since migration 0013; the
// deletes take the children with them).
const orphans = sql(
  'test_orphan_rows',
  `SELECT (SELECT count(*) FROM chronos.wake_attempts t
           WHERE NOT EXISTS (SELECT 1 FROM chronos.wakes w WHERE w.id = t.wake_id))::int
        + (SELECT count(*) FROM chronos.wakes w
           WHERE NOT EXISTS (SELECT 1 FROM chronos.alarms a WHERE a.id = w.alarm_id))::int AS n`,
);
// Every attempt, on wake rows (a first one delivered: migration 0017) and in wake_attempts.
const attemptCount = sql(
  'test_attempts_count',
  `SELECT count(*)::int AS n FROM chronos.wakes w CROSS JOIN LATERAL ${ATTEMPTS_OF_WAKE} t`,
);
const age = sql(
  'test_age_finished',
  `UPDATE chronos.alarms SET updated_at = updated_at - interval '31 days' WHERE id = $1::uuid`,
);

describeEachBackend('library: retention of finished timers', ({ t }) => {
  it('a worker deletes its queue’s finished timers past retention, with their fires; the key is free again', async () => {
    const chronos = await libraryOn(t);
    const fired: string[] = [];
    const done = await chronos.schedule(null, { key: 'old', inSeconds: 60 });
    const recent = await chronos.schedule(null, { key: 'recent', inSeconds: 60 });
    const elsewhere = await chronos.schedule(null, { key: 'elsewhere', inSeconds: 60, queue: 'other' });
    const live = await chronos.schedule(null, { key: 'live', inSeconds: 3_600 });
    for (const timer of [done, recent, elsewhere]) await backdate(t.db, timer.id, 61_000);
    // The workers' own loops fire what is due; each is stopped once its handler has run. They
    // keep their fires' history (wake and attempt rows), which the pruning must take along.
    const firedBoth = gate();
    const first = chronos.work(
      (fire) => {
        fired.push(fire.key);
        if (fired.length === 2) firedBoth.open();
      },
      { history: true },
    );
    await firedBoth.promise;
    await first.stop();
    const firedOther = gate();
    const other = chronos.work(() => firedOther.open(), { queue: 'other', history: true });
    await firedOther.promise;
    await other.stop();
    expect(fired.sort()).toEqual(['old', 'recent']);
    expect((await chronos.get('elsewhere'))?.status).toBe('fired');
    expect((await t.db.query<{ n: number }>(wakeCount, [done.id]))[0]!.n).toBe(1);
    expect((await t.db.query<{ n: number }>(attemptCount))[0]!.n).toBe(3);

    // 31 days later (the default keeps 30): one pass of a new worker of `default` prunes.
    await t.db.query(age, [done.id]);
    await t.db.query(age, [elsewhere.id]);
    const second = chronos.work(() => undefined);
    await second.stop(); // a worker's first pruning pass runs as it starts; stop waits for it
    expect(await chronos.get('old')).toBeNull();
    expect((await t.db.query<{ n: number }>(wakeCount, [done.id]))[0]!.n).toBe(0);
    expect((await t.db.query<{ n: number }>(attemptCount))[0]!.n).toBe(2);
    expect((await t.db.query<{ n: number }>(orphans))[0]!.n).toBe(0);
    expect((await chronos.get('recent'))?.id).toBe(recent.id);
    expect((await chronos.get('live'))?.id).toBe(live.id);
    // Another queue's finished timer is its own workers' to prune, not this one's.
    expect((await chronos.get('elsewhere'))?.id).toBe(elsewhere.id);

    // The key is free: scheduling it again writes a new timer.
    const again = await chronos.schedule(null, { key: 'old', inSeconds: 60 });
    expect(again.id).not.toBe(done.id);
    expect(again.status).toBe('active');
    await chronos.close();
  });

  it('finishedTimerRetentionMs: 0 deletes a fired one-shot as it is recorded and prunes the rest at the next pass; a bad value is refused by name', async () => {
    const chronos = await libraryOn(t, { finishedTimerRetentionMs: 0 });
    const brief = await chronos.schedule(null, { key: 'brief', inSeconds: 60 });
    await chronos.schedule(null, { key: 'dropped', inSeconds: 60 });
    await backdate(t.db, brief.id, 61_000);
    const firedBrief = gate();
    const worker = chronos.work(() => firedBrief.open());
    await firedBrief.promise;
    await worker.stop();
    expect(await chronos.get('brief')).toBeNull();
    await chronos.cancel(null, 'dropped');
    expect((await chronos.get('dropped'))?.status).toBe('cancelled');
    await chronos.work(() => undefined).stop();
    expect(await chronos.get('dropped')).toBeNull();
    await chronos.close();

    const refused = await createChronos({ dataDir: '/nonexistent', finishedTimerRetentionMs: -1 }).catch(
      (e: unknown) => e,
    );
    expect(isChronosError(refused, 'invalid_input')).toBe(true);
    expect((refused as Error).message).toContain(
      'finishedTimerRetentionMs: expected a whole number of milliseconds, 0 or more, got -1',
    );
  });
});
