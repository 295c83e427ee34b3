import { Writable } from 'node:stream';
import { pino } from 'pino';
import { expect, it } from 'vitest';
import { Metrics } from '../../packages/chronos-timers-server/src/metrics.js';
import { describeEachBackend } from '../support/backends.js';
import { makeService, OWNER } from '../support/harness.js';
import {
  age,
  ESCALATE_AFTER,
  expectSigned,
  failingReceiver,
  fire,
  lapse,
  makeTracker,
  MINUTE,
  NUDGE_AFTER,
  wakeRow,
  wakeService,
  useSinks,
} from './support.js';

describeEachBackend('tracker: the escalation', ({ t }) => {
  const { router, fallback } = useSinks();

  it('a wake still unacknowledged after the escalation delay is POSTed once to the fallback, signed, and recorded', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { alarm, wakeId } = await fire(t.db, {
      label: 'deploy check',
      conversation_id: 'conv-9',
      wake_message: 'is prod green?',
    });
    await age(t.db, wakeId, NUDGE_AFTER + 1_000);
    expect(await tracker.runOnce()).toMatchObject({ nudged: 1, escalated: 0 });
    expect(fallback.requests).toHaveLength(0);

    await age(t.db, wakeId, ESCALATE_AFTER - NUDGE_AFTER);
    expect(await tracker.runOnce()).toMatchObject({ nudged: 0, escalated: 1 });
    expect(fallback.requests).toHaveLength(1);
    const request = fallback.requests[0]!;
    expect(request.path).toBe('/human');
    expectSigned(request, `${wakeId}:escalation`);
    const row = (await wakeRow(t.db, wakeId))!;
    const body = JSON.parse(request.body);
    expect(Object.keys(body)).toEqual([
      'type',
      'wake_id',
      'alarm_id',
      'user_id',
      'owner_did',
      'label',
      'conversation_id',
      'wake_message',
      'fired_at',
      'age_seconds',
    ]);
    expect(body).toMatchObject({
      type: 'wake.escalated',
      wake_id: wakeId,
      alarm_id: alarm.id,
      user_id: OWNER.userId,
      owner_did: OWNER.did,
      label: 'deploy check',
      conversation_id: 'conv-9',
      wake_message: 'is prod green?',
      fired_at: (row.fired_at as Date).toISOString(),
    });
    expect(body.age_seconds).toBeGreaterThanOrEqual(ESCALATE_AFTER / 1000);
    expect(body.age_seconds).toBeLessThan(ESCALATE_AFTER / 1000 + 60);
    expect(row.escalated_at).toBeInstanceOf(Date);
    expect(row).toMatchObject({ status: 'delivered', escalation_attempts: 1, escalation_lease_token: null });

    // Once.
    await age(t.db, wakeId, 10 * MINUTE);
    expect((await tracker.runOnce()).escalated).toBe(0);
    expect(fallback.requests).toHaveLength(1);
    expect(router.requests).toHaveLength(1);
  });

  it('a wake acknowledged before the escalation delay is never escalated', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, NUDGE_AFTER + 1_000);
    await tracker.runOnce();
    await wakeService(t.db).ack(OWNER, wakeId, 'on it');
    await age(t.db, wakeId, ESCALATE_AFTER);

    const pass = await tracker.runOnce();
    expect(pass.escalated).toBe(0);
    expect(fallback.requests.map((r) => r.headers['webhook-id'])).toEqual([`${wakeId}:receipt`]);
  });

  it('an escalation the fallback refuses is not recorded and is retried after its backoff until it answers 2xx', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, ESCALATE_AFTER + 1_000);
    fallback.answer({ status: 500 }, { status: 404 });

    expect(await tracker.runOnce()).toMatchObject({ escalated: 0, failed: 1 });
    let row = (await wakeRow(t.db, wakeId))!;
    expect(row.escalated_at).toBeNull();
    expect(row.tracker_error).toBe('fallback answered 500 Internal Server Error');
    expect((await tracker.runOnce()).escalated).toBe(0); // waits out its backoff
    expect(fallback.requests).toHaveLength(1);

    // Even a 4xx is tried again: the human must hear of it.
    await lapse(t.db, wakeId, 'escalation');
    expect(await tracker.runOnce()).toMatchObject({ escalated: 0, failed: 1 });
    row = (await wakeRow(t.db, wakeId))!;
    expect(row.tracker_error).toBe('fallback answered 404 Not Found');
    // The second failure waits twice as long: 1.5 s.
    expect((row.escalation_lease_until as Date).getTime() - (row.updated_at as Date).getTime()).toBe(1_500);

    await lapse(t.db, wakeId, 'escalation');
    expect((await tracker.runOnce()).escalated).toBe(1);
    row = (await wakeRow(t.db, wakeId))!;
    expect(row.escalated_at).toBeInstanceOf(Date);
    expect(row.escalation_attempts).toBe(3);
    expect(fallback.withId(`${wakeId}:escalation`)).toHaveLength(3);
    await lapse(t.db, wakeId, 'escalation');
    expect((await tracker.runOnce()).escalated).toBe(0);
  });

  it('an unreachable fallback is retried too', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, ESCALATE_AFTER + 1_000);
    await fallback.down();
    try {
      expect(await tracker.runOnce()).toMatchObject({ escalated: 0, failed: 1 });
      expect((await wakeRow(t.db, wakeId))!.tracker_error).toMatch(/^fallback unreachable: ECONNREFUSED/);
    } finally {
      await fallback.up();
    }
    await lapse(t.db, wakeId, 'escalation');
    expect((await tracker.runOnce()).escalated).toBe(1);
  });

  it('a broken router postpones nothing: a wake pending in retries, and one whose delivery failed, are escalated on time', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const pending = await fire(t.db, {}, failingReceiver());
    const failed = await fire(t.db, {}, failingReceiver(false));
    expect((await wakeRow(t.db, pending.wakeId))!.status).toBe('pending');
    expect((await wakeRow(t.db, failed.wakeId))!.status).toBe('failed');
    await age(t.db, pending.wakeId, ESCALATE_AFTER + 1_000);
    await age(t.db, failed.wakeId, ESCALATE_AFTER + 1_000);
    router.always({ status: 503 });

    const pass = await tracker.runOnce();
    expect(pass.escalated).toBe(2);
    expect(fallback.withId(`${pending.wakeId}:escalation`)).toHaveLength(1);
    expect(fallback.withId(`${failed.wakeId}:escalation`)).toHaveLength(1);
    // Neither is nudged: a nudge follows a delivery, and neither was delivered.
    expect(router.withId(`${pending.wakeId}:nudge`)).toHaveLength(0);
    expect(router.withId(`${failed.wakeId}:nudge`)).toHaveLength(0);
  });

  it('a tracker that was down past both delays sends the nudge and the escalation in one pass', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, ESCALATE_AFTER + 30 * MINUTE);
    expect(await tracker.runOnce()).toMatchObject({ nudged: 1, escalated: 1 });
    expect(router.withId(`${wakeId}:nudge`)).toHaveLength(1);
    expect(fallback.withId(`${wakeId}:escalation`)).toHaveLength(1);
  });

  it('a withdrawn wake is never escalated: its alarm cancelled, or its pending occurrence rescheduled away', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const alarms = makeService(t.db);
    const cron = await fire(t.db, { cron: '@every 1h' });
    await alarms.cancel(OWNER, { id: cron.alarm.id });
    const rescheduled = await fire(t.db, {}, failingReceiver());
    await alarms.update(OWNER, { id: rescheduled.alarm.id }, { inSeconds: 3_600 }, { source: 'api' });
    const cancelled = await fire(t.db, {}, failingReceiver());
    await alarms.cancel(OWNER, { id: cancelled.alarm.id });
    for (const w of [cron, rescheduled, cancelled]) await age(t.db, w.wakeId, ESCALATE_AFTER + MINUTE);

    expect(await tracker.runOnce()).toMatchObject({ nudged: 0, escalated: 0 });
    expect(fallback.requests).toHaveLength(0);
    expect(router.requests).toHaveLength(0);
    for (const w of [rescheduled, cancelled]) expect((await wakeRow(t.db, w.wakeId))!.status).toBe('pending');
  });

  it('with no fallback URL nothing is sent or recorded as escalated: it is logged, counted, and sent once a fallback is set', async () => {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const metrics = new Metrics();
    const tracker = makeTracker(t.db, { router }, { logger: pino({ level: 'info' }, stream), metrics });
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, ESCALATE_AFTER + 1_000);

    expect(await tracker.runOnce()).toMatchObject({ nudged: 1, escalated: 0 });
    expect((await wakeRow(t.db, wakeId))!.escalated_at).toBeNull();
    const warnings = () => lines.filter((l) => /CHRONOS_FALLBACK_URL is not set/.test(String(l.msg)));
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({ level: 40, escalations: 1, receipts: 0 });
    await tracker.runOnce();
    expect(warnings()).toHaveLength(1); // said once, not every pass
    expect(await metrics.render()).toMatch(/^chronos_tracker_backlog\{stage="escalation"\} 1$/m);

    // Configured later (a restart with CHRONOS_FALLBACK_URL): the escalation was not lost.
    const configured = makeTracker(t.db, { router, fallback });
    expect((await configured.runOnce()).escalated).toBe(1);
    expect(fallback.withId(`${wakeId}:escalation`)).toHaveLength(1);
    expect(await metrics.render()).toMatch(/^chronos_tracker_backlog\{stage="escalation"\} 0$/m);
  });
});
