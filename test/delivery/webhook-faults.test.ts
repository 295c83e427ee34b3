import type { AlarmSpec } from '../../packages/chronos-timers/src/core/alarm-spec.js';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { alarmsClaimDue } from '../../packages/chronos-timers/src/store/claims.js';
import type { Alarm } from '../../packages/chronos-timers/src/types.js';
import { describeEachBackend } from '../support/backends.js';
import { alarmRow, backdate, dueNow, lapseLease, makeService, OWNER, wakesOf } from '../support/harness.js';
import { Sink } from '../support/sink.js';
import { attemptsOf, webhookDispatcher } from './support.js';

const api = { source: 'api' } as const;

describeEachBackend('webhook delivery: router faults', ({ t }) => {
  let sink: Sink;
  const closers: (() => Promise<void>)[] = [];
  const delivering = (options: Parameters<typeof webhookDispatcher>[2] = {}) => {
    const delivery = webhookDispatcher(t.db, sink, options);
    closers.push(() => delivery.receiver.close());
    return delivery;
  };
  const dueOnce = async (body: AlarmSpec = {}) => {
    const { alarm } = await makeService(t.db).create(OWNER, { inSeconds: 60, ...body }, api);
    await backdate(t.db, alarm.id, 61_000);
    return alarm;
  };

  beforeAll(async () => {
    sink = await Sink.start();
  });
  afterEach(async () => {
    await Promise.all(closers.splice(0).map((close) => close()));
    await sink.up();
    sink.reset();
  });
  afterAll(async () => {
    await sink.close();
  });

  it('router down for a while, then back: from the first refused connection deliveries are held, not spent, and each wake is delivered once', async () => {
    const service = makeService(t.db);
    const onces: Alarm[] = [];
    // One failure allowed: the first wakes of an outage must not spend it.
    for (let i = 0; i < 4; i++) onces.push(await dueOnce({ label: `once-${i}`, maxFailures: 1 }));
    const { alarm: cron } = await service.create(OWNER, { cron: '*/5 * * * *', requireAck: false }, api);
    await backdate(t.db, cron.id, 301_000);
    const alarms = [...onces, cron];
    const { receiver, dispatcher } = delivering();

    await sink.down();
    expect(await dispatcher.runOnce()).toBe(alarms.length);
    for (const alarm of alarms) {
      expect(await alarmRow(t.db, alarm.id)).toMatchObject({
        status: 'active',
        failure_count: 0,
        last_error: expect.stringMatching(/^router (unreachable: ECONNREFUSED|connection failed: )/),
      });
    }
    // An attempt found nobody there: the receiver holds further deliveries.
    expect(receiver.held).toBe(true);
    expect(receiver.holdMs()).toBeGreaterThan(0);

    // "A minute" later: every retry is due, the router still down. Nothing is claimed or spent.
    for (let pass = 0; pass < 3; pass++) {
      for (const alarm of alarms) await dueNow(t.db, alarm.id);
      expect(await receiver.probe()).toBe(false);
      expect(await dispatcher.runOnce()).toBe(0);
    }
    for (const alarm of alarms) expect((await alarmRow(t.db, alarm.id)).failure_count).toBe(0);

    await sink.up();
    expect(await receiver.probe()).toBe(true);
    expect(receiver.holdMs()).toBe(0);
    expect(await dispatcher.runOnce()).toBe(alarms.length);

    expect(sink.requests).toHaveLength(alarms.length);
    for (const alarm of alarms) {
      const [wake, ...others] = await wakesOf(t.db, alarm.id);
      expect(others).toEqual([]);
      expect(wake).toMatchObject({ status: 'delivered', attempts: 2 });
      const requests = sink.withId(wake!.id as string);
      expect(requests).toHaveLength(1);
      expect(JSON.parse(requests[0]!.body)).toMatchObject({ alarm_id: alarm.id, attempt: 2 });
      expect((await attemptsOf(t.db, alarm.id)).map((a) => a.outcome)).toEqual(['retry', 'delivered']);
    }
    for (const once of onces) expect((await alarmRow(t.db, once.id)).status).toBe('fired');
    expect(await alarmRow(t.db, cron.id)).toMatchObject({ status: 'active', failure_count: 0 });
  });

  it('a running dispatcher holds while the router is down and drains once a probe connects', async () => {
    const alarms: Alarm[] = [];
    for (let i = 0; i < 5; i++) alarms.push(await dueOnce({ label: `loop-${i}` }));
    const { receiver, dispatcher } = delivering({
      receiver: { probeMaxMs: 100 },
      dispatcher: { pollIntervalMs: 50, retry: { baseMs: 1, maxMs: 2 } },
    });
    await sink.down();
    await dispatcher.start();
    try {
      const failureCounts = () =>
        Promise.all(alarms.map(async (a) => (await alarmRow(t.db, a.id)).failure_count));
      await expect.poll(() => receiver.held).toBe(true);
      await expect.poll(async () => (await attemptsOf(t.db, alarms[0]!.id)).length).toBeGreaterThan(0);
      // Retries are due within milliseconds, yet the outage spends none of them.
      await expect.poll(() => receiver.probe()).toBe(false);
      expect(await failureCounts()).toEqual([0, 0, 0, 0, 0]);
      await sink.up();
      await sink.waitFor(alarms.length);
      await expect.poll(async () => (await alarmRow(t.db, alarms.at(-1)!.id)).status).toBe('fired');
    } finally {
      await dispatcher.stop(1_000);
    }
    for (const alarm of alarms) expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
    expect(new Set(sink.requests.map((r) => r.headers['webhook-id'])).size).toBe(alarms.length);
  });

  it('with holding turned off, each wake retries through the outage without spending its failures, and is delivered once', async () => {
    const alarms: Alarm[] = [];
    for (let i = 0; i < 3; i++) alarms.push(await dueOnce({ label: `once-${i}`, maxFailures: 2 }));
    const { dispatcher } = delivering({ receiver: { holdAfter: Number.POSITIVE_INFINITY } });

    await sink.down();
    for (let pass = 1; pass <= 3; pass++) {
      expect(await dispatcher.runOnce()).toBe(alarms.length);
      for (const alarm of alarms) {
        expect(await alarmRow(t.db, alarm.id)).toMatchObject({ status: 'active', failure_count: 0 });
        expect(await attemptsOf(t.db, alarm.id)).toHaveLength(pass);
        await dueNow(t.db, alarm.id);
      }
    }
    await sink.up();
    expect(await dispatcher.runOnce()).toBe(alarms.length);
    expect(sink.requests).toHaveLength(alarms.length);
    for (const alarm of alarms) {
      expect(await wakesOf(t.db, alarm.id)).toMatchObject([{ status: 'delivered', attempts: 4 }]);
      expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
    }
  });

  it('a hanging router is cut off before the lease lapses: no stuck worker, retried later', async () => {
    const alarm = await dueOnce();
    const leaseMs = 1_000;
    // The receiver would wait 10 s; the dispatcher aborts at 0.8 × the lease.
    const { dispatcher } = delivering({
      receiver: { timeoutMs: 10_000 },
      dispatcher: { leaseMs, deliveryTimeoutMs: 10_000 },
    });
    sink.always({ hang: true });
    expect(await dispatcher.runOnce()).toBe(1);

    expect(dispatcher.inFlight).toBe(0);
    const row = await alarmRow(t.db, alarm.id);
    // Recorded under its own lease (not fenced out): the lease never lapsed.
    expect(row).toMatchObject({ status: 'active', failure_count: 1, claimed_at: null });
    expect(row.last_error).toMatch(/^router timed out after \d+ ms/);
    const [attempt] = await attemptsOf(t.db, alarm.id);
    expect(attempt!.duration_ms).toBeGreaterThanOrEqual(0.8 * leaseMs - 20);
    expect(attempt!.duration_ms).toBeLessThan(leaseMs);
    await expect.poll(() => sink.requests[0]?.clientGone).toBe(true);

    sink.always({ status: 200 });
    await dueNow(t.db, alarm.id);
    expect(await dispatcher.runOnce()).toBe(1);
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
    expect(new Set(sink.requests.map((r) => r.headers['webhook-id'])).size).toBe(1);
  });

  it('a short delivery timeout cuts a hung request off, and other wakes of the batch still go through', async () => {
    const stuck = await dueOnce({ label: 'stuck' });
    const fine = [await dueOnce({ label: 'a' }), await dueOnce({ label: 'b' })];
    const { dispatcher } = delivering({
      receiver: { timeoutMs: 500 },
      dispatcher: { deliveryTimeoutMs: 500 },
    });
    sink.respond = (request) => (request.body.includes('"label":"stuck"') ? { hang: true } : { status: 200 });
    expect(await dispatcher.runOnce()).toBe(3);
    expect(dispatcher.inFlight).toBe(0);
    for (const alarm of fine) expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
    expect(await alarmRow(t.db, stuck.id)).toMatchObject({
      status: 'active',
      failure_count: 1,
      last_error: expect.stringMatching(/^router timed out after \d+ ms/),
    });
  });

  it('kill -9 between the POST and recording it: the wake is sent again with the same webhook-id', async () => {
    const alarm = await dueOnce();
    const { receiver, dispatcher } = delivering();

    // The dead worker: it claimed the alarm (wake row written), POSTed it, and died before
    // recording anything. Its lease is then as old as a dead worker's lease gets.
    const [claim] = await alarmsClaimDue(t.db, 'router', 10, 30_000);
    expect(claim!.alarm.id).toBe(alarm.id);
    const first = await receiver.deliver(
      {
        alarm: claim!.alarm,
        wakeId: claim!.wakeId,
        attempt: claim!.attempt,
        fireCount: claim!.fireCount,
        trigger: 'schedule',
        traceparent: '',
        scheduledFor: claim!.alarm.scheduledFor,
        firedAt: claim!.dbNow,
        latenessMs: claim!.dbNow.getTime() - claim!.alarm.scheduledFor.getTime(),
      },
      new AbortController().signal,
    );
    expect(first.ok).toBe(true);
    expect(await wakesOf(t.db, alarm.id)).toMatchObject([{ status: 'pending', attempts: 1 }]);
    // Still leased: nobody else may take it yet.
    expect(await dispatcher.runOnce()).toBe(0);
    await lapseLease(t.db, alarm.id);

    expect(await dispatcher.runOnce()).toBe(1);
    expect(sink.requests).toHaveLength(2);
    const [before, after] = sink.requests;
    expect(after!.headers['webhook-id']).toBe(before!.headers['webhook-id']);
    expect(after!.headers['webhook-id']).toBe(claim!.wakeId);
    expect(sink.bodies().map((b) => b.attempt)).toEqual([1, 2]);
    expect(await wakesOf(t.db, alarm.id)).toMatchObject([
      { id: claim!.wakeId, status: 'delivered', attempts: 2 },
    ]);
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
  });

  it('kill -9 before the POST: the wake is delivered after the lease lapses, never lost', async () => {
    const alarm = await dueOnce();
    const { dispatcher } = delivering();
    const [claim] = await alarmsClaimDue(t.db, 'router', 10, 30_000);
    await lapseLease(t.db, alarm.id);
    expect(await dispatcher.runOnce()).toBe(1);
    expect(sink.requests.map((r) => r.headers['webhook-id'])).toEqual([claim!.wakeId]);
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
  });
});
