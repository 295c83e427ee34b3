import { afterEach, expect, it } from 'vitest';
import type { Db, Statement } from '../../packages/chronos-timers/src/store/driver/db.js';
import {
  wakesClaimEscalations,
  wakesClaimNudges,
  wakesRecordStage,
} from '../../packages/chronos-timers/src/store/wake-stages.js';
import { describeEachBackend } from '../support/backends.js';
import { until } from '../support/harness.js';
import { age, ESCALATE_AFTER, fire, lapse, makeTracker, NUDGE_AFTER, wakeRow, useSinks } from './support.js';

/** The database, except that the statements named die: the process is gone before they run. */
function dyingAt(db: Db, ...names: string[]): Db {
  return new Proxy(db, {
    get(target, property, receiver) {
      if (property === 'query') {
        return (statement: Statement, values?: readonly unknown[]) => {
          if (names.includes(statement.name))
            return Promise.reject(new Error(`died before ${statement.name}`));
          return target.query(statement, values);
        };
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describeEachBackend('tracker: crashes and restarts', ({ t }) => {
  const { router, fallback } = useSinks();
  // A test may leave the router refusing connections.
  afterEach(() => router.up());

  it('a tracker that dies between sending the nudge and recording it causes at most one extra nudge, and no lost escalation', async () => {
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, NUDGE_AFTER + 1_000);
    const dying = makeTracker(dyingAt(t.db, 'wakes_record_nudges'), { router, fallback });
    await expect(dying.runOnce()).rejects.toThrow(/died before wakes_record_nudges/);
    expect(router.withId(`${wakeId}:nudge`)).toHaveLength(1);

    // The restarted tracker finds the claim still leased: nothing is sent twice at once.
    const restarted = makeTracker(t.db, { router, fallback });
    expect((await restarted.runOnce()).nudged).toBe(0);
    // Its lease lapses: the nudge is sent once more (the receiver deduplicates on webhook-id), then never again.
    await lapse(t.db, wakeId, 'nudge');
    expect((await restarted.runOnce()).nudged).toBe(1);
    await lapse(t.db, wakeId, 'nudge');
    expect((await restarted.runOnce()).nudged).toBe(0);
    expect(router.withId(`${wakeId}:nudge`)).toHaveLength(2);

    await age(t.db, wakeId, ESCALATE_AFTER - NUDGE_AFTER);
    expect((await restarted.runOnce()).escalated).toBe(1);
    expect(fallback.withId(`${wakeId}:escalation`)).toHaveLength(1);
  });

  it('a tracker that dies between sending the escalation and recording it: the escalation is sent again, never lost', async () => {
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, ESCALATE_AFTER + 1_000);
    const dying = makeTracker(dyingAt(t.db, 'wakes_record_escalations'), { router, fallback });
    await expect(dying.runOnce()).rejects.toThrow(/died before/);
    expect(fallback.withId(`${wakeId}:escalation`)).toHaveLength(1);
    expect((await wakeRow(t.db, wakeId))!.escalated_at).toBeNull();

    const restarted = makeTracker(t.db, { router, fallback });
    expect((await restarted.runOnce()).escalated).toBe(0);
    await lapse(t.db, wakeId, 'escalation');
    expect((await restarted.runOnce()).escalated).toBe(1);
    expect((await wakeRow(t.db, wakeId))!.escalated_at).toBeInstanceOf(Date);
    expect(fallback.withId(`${wakeId}:escalation`)).toHaveLength(2);
  });

  it('a tracker that dies after claiming and before sending loses nothing: the stages go out once their leases lapse', async () => {
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, ESCALATE_AFTER + 1_000);
    // The dead tracker's claims, as it left them.
    expect(
      await wakesClaimEscalations(t.db, { escalateAfterMs: ESCALATE_AFTER, limit: 10, leaseMs: 30_000 }),
    ).toHaveLength(1);
    expect(
      await wakesClaimNudges(t.db, { nudgeAfterMs: NUDGE_AFTER, limit: 10, leaseMs: 30_000 }),
    ).toHaveLength(1);

    const tracker = makeTracker(t.db, { router, fallback });
    expect(await tracker.runOnce()).toMatchObject({ nudged: 0, escalated: 0 });
    await lapse(t.db, wakeId, 'nudge');
    await lapse(t.db, wakeId, 'escalation');
    expect(await tracker.runOnce()).toMatchObject({ nudged: 1, escalated: 1 });
    const row = (await wakeRow(t.db, wakeId))!;
    expect(row).toMatchObject({ nudge_attempts: 2, escalation_attempts: 2, nudge_lease_token: null });
    expect(row.escalated_at).toBeInstanceOf(Date);
    expect(router.requests).toHaveLength(1);
    expect(fallback.requests).toHaveLength(1);
  });

  it('a stale tracker cannot record over a newer claim of the same stage (fencing)', async () => {
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, NUDGE_AFTER + 1_000);
    const [stale] = await wakesClaimNudges(t.db, { nudgeAfterMs: NUDGE_AFTER, limit: 10, leaseMs: 30_000 });
    await lapse(t.db, wakeId, 'nudge');
    const tracker = makeTracker(t.db, { router, fallback });
    expect((await tracker.runOnce()).nudged).toBe(1);

    const recorded = await wakesRecordStage(t.db, 'nudge', [
      { wakeId, token: stale!.token, ok: false, error: 'stale failure', retryMs: 0 },
    ]);
    expect(recorded.size).toBe(0);
    const row = (await wakeRow(t.db, wakeId))!;
    expect(row.nudged_at).toBeInstanceOf(Date);
    expect(row.tracker_error).toBe('');
  });

  it('stop() aborts a send that outlives the grace period and records it as failed, to be sent again', async () => {
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, NUDGE_AFTER + 1_000);
    router.answer({ hang: true });
    const tracker = makeTracker(t.db, { router, fallback });
    await tracker.start();
    await router.waitFor(1);
    await tracker.stop(0);

    const row = (await wakeRow(t.db, wakeId))!;
    expect(row.nudged_at).toBeNull();
    expect(row.nudge_lease_token).toBeNull();
    expect(row.tracker_error).toMatch(/router timed out .* \(delivery aborted\)/);
    await until(
      () => router.hanging === 0 || router.requests[0]!.clientGone,
      'the hung request to be dropped',
    );

    await lapse(t.db, wakeId, 'nudge');
    const next = makeTracker(t.db, { router, fallback });
    expect((await next.runOnce()).nudged).toBe(1);
    expect(router.withId(`${wakeId}:nudge`)).toHaveLength(2);
  });
});
