import { expect, it } from 'vitest';
import { TestClock } from '../../packages/chronos-timers/src/clock.js';
import { Metrics } from '../../packages/chronos-timers-server/src/metrics.js';
import type { Db, Statement } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import { OWNER, until } from '../support/harness.js';
import {
  age,
  ESCALATE_AFTER,
  failingReceiver,
  fire,
  lapse,
  makeTracker,
  MINUTE,
  NUDGE_AFTER,
  wakeService,
  useSinks,
} from './support.js';

/** A TestClock that remembers how long each sleep was asked to be. */
class RecordingClock extends TestClock {
  readonly sleeps: number[] = [];
  override sleep(ms: number, signal?: AbortSignal): Promise<void> {
    this.sleeps.push(ms);
    return super.sleep(ms, signal);
  }
}

describeEachBackend('tracker: the loop', ({ t }) => {
  const { router, fallback } = useSinks();

  it('a started tracker sleeps until the next stage falls due, as read from the rows', async () => {
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, NUDGE_AFTER - 2 * MINUTE);
    const clock = new RecordingClock();
    const tracker = makeTracker(t.db, { router, fallback }, { clock, intervalMs: 10 * MINUTE });
    await tracker.start();
    await until(() => clock.sleeping === 1, 'the tracker to sleep');
    const slept = clock.sleeps.at(-1)!;
    expect(slept).toBeGreaterThan(2 * MINUTE - 10_000);
    expect(slept).toBeLessThanOrEqual(2 * MINUTE);
    expect(router.requests).toHaveLength(0);

    // Two minutes go by, for the database and for the tracker.
    await age(t.db, wakeId, 2 * MINUTE);
    clock.advance(slept);
    await router.waitFor(1);
    expect(router.requests[0]!.headers['webhook-id']).toBe(`${wakeId}:nudge`);
    // Next: the escalation, seven minutes on.
    await until(() => clock.sleeping === 1 && clock.sleeps.length > 1, 'the tracker to sleep again');
    expect(clock.sleeps.at(-1)!).toBeGreaterThan(ESCALATE_AFTER - NUDGE_AFTER - 10_000);
    expect(clock.sleeps.at(-1)!).toBeLessThanOrEqual(ESCALATE_AFTER - NUDGE_AFTER);
    await tracker.stop();
  });

  it('with nothing waiting it sleeps the whole interval; an ack wakes it at once to send the receipt', async () => {
    const clock = new RecordingClock();
    const tracker = makeTracker(t.db, { router, fallback }, { clock, intervalMs: 10 * MINUTE });
    const wakes = wakeService(t.db);
    wakes.onAcknowledged((acked) => tracker.acknowledged(acked));
    const { wakeId } = await fire(t.db, { require_ack: false });
    await tracker.start();
    await until(() => clock.sleeping === 1, 'the tracker to sleep');
    expect(clock.sleeps).toEqual([10 * MINUTE]);

    await wakes.ack(OWNER, wakeId, 'done');
    await fallback.waitFor(1);
    expect(fallback.requests[0]!.headers['webhook-id']).toBe(`${wakeId}:receipt`);
    await tracker.stop();
  });

  it('a pass that fails is logged and counted, and the loop carries on', async () => {
    let failures = 1;
    const flaky = new Proxy(t.db, {
      get(target, property, receiver) {
        if (property === 'query') {
          return (statement: Statement, values?: readonly unknown[]) =>
            statement.name === 'wakes_claim_nudges' && failures-- > 0
              ? Promise.reject(new Error('connection reset'))
              : target.query(statement, values);
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as Db;
    const metrics = new Metrics();
    const clock = new TestClock();
    const tracker = makeTracker(flaky, { router, fallback }, { clock, metrics, intervalMs: 10 * MINUTE });
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, NUDGE_AFTER + 1_000);

    await tracker.start();
    await until(() => clock.sleeping === 1, 'the tracker to back off');
    expect(await metrics.render()).toMatch(/^chronos_loop_errors_total\{loop="tracker"\} 1$/m);
    clock.advance(100);
    await router.waitFor(1);
    await tracker.stop();
  });

  it('exports wakes by stage, sends per stage, failures and the time to ack', async () => {
    const metrics = new Metrics();
    const tracker = makeTracker(t.db, { router, fallback }, { metrics });
    const wakes = wakeService(t.db);
    wakes.onAcknowledged((acked) => tracker.acknowledged(acked));

    await fire(t.db, {}, failingReceiver()); // pending
    await fire(t.db, { require_ack: false }); // delivered
    await fire(t.db); // awaiting_ack
    const nudged = await fire(t.db);
    await age(t.db, nudged.wakeId, NUDGE_AFTER + 1_000);
    const escalated = await fire(t.db);
    await age(t.db, escalated.wakeId, ESCALATE_AFTER + 1_000);
    const acked = await fire(t.db);
    await age(t.db, acked.wakeId, 90_000);
    await fire(t.db, { require_ack: false }, failingReceiver(false)); // failed
    fallback.answer({ status: 503 }); // the escalation fails once
    await tracker.runOnce();
    await tracker.runOnce(); // the escalation waits out its backoff
    await lapse(t.db, escalated.wakeId, 'escalation');
    await wakes.ack(OWNER, acked.wakeId, 'done');
    await tracker.runOnce();

    const text = await metrics.render();
    const stages = {
      pending: 1,
      delivered: 1,
      awaiting_ack: 1,
      nudged: 1,
      escalated: 1,
      acknowledged: 1,
      failed: 1,
    };
    for (const [stage, n] of Object.entries(stages)) {
      expect(text).toMatch(new RegExp(`^chronos_wakes\\{stage="${stage}"\\} ${n}$`, 'm'));
    }
    expect(text).toMatch(/^chronos_nudges_total 2$/m); // the nudged one and the escalated one
    expect(text).toMatch(/^chronos_escalations_total 1$/m);
    expect(text).toMatch(/^chronos_receipts_total 1$/m);
    expect(text).toMatch(/^chronos_tracker_failures_total\{stage="escalation",result="5xx"\} 1$/m);
    expect(text).toMatch(/^chronos_time_to_ack_seconds_count\{inferred="false"\} 1$/m);
    expect(text).toMatch(/^chronos_time_to_ack_seconds_bucket\{le="60",inferred="false"\} 0$/m);
    expect(text).toMatch(/^chronos_time_to_ack_seconds_bucket\{le="120",inferred="false"\} 1$/m);
    expect(text).toMatch(/^chronos_tracker_backlog\{stage="receipt"\} 0$/m);
  });
});
