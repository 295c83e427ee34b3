import { expect, it } from 'vitest';
import { isChronosError } from '../../packages/chronos-timers/src/errors.js';
import type { Delivery } from '../../packages/chronos-timers/src/receivers/receiver.js';
import { describeEachBackend } from '../support/backends.js';
import {
  alarmRow,
  backdate,
  counting,
  gate,
  lapseLease,
  makeDispatcher,
  makeService,
  OTHER,
  OWNER,
  RecordingReceiver,
  until,
} from '../support/harness.js';
import { AlarmService } from '../../packages/chronos-timers/src/core/alarm-service.js';
import { DbClock } from '../../packages/chronos-timers/src/store/driver/db-clock.js';

const api = { source: 'api' } as const;

describeEachBackend('conformance: cancel and reschedule', ({ t }) => {
  it('cancel-is-final: a cancelled alarm is never delivered again', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { cron: '* * * * *' }, api);
    await backdate(t.db, alarm.id, 120_000);
    const ex = counting(t.db);
    const cancelled = await new AlarmService({
      db: ex,
      dbClock: new DbClock(t.db),
      quotas: { maxActiveAlarms: 0, createRatePerMinute: 0, minCronIntervalMs: 0 },
      notifyHorizonMs: 1_000,
    }).cancel(OWNER, { id: alarm.id });
    expect(cancelled.status).toBe('cancelled');
    expect(ex.statements).toEqual(['alarms_cancel_by_id']);

    const receiver = new RecordingReceiver();
    const dispatcher = makeDispatcher(t.db, receiver);
    expect(await dispatcher.runOnce()).toBe(0);
    // Cancelling again answers the cancelled alarm; nothing can bring it back.
    expect((await service.cancel(OWNER, { id: alarm.id })).status).toBe('cancelled');
    await expect(service.update(OWNER, { id: alarm.id }, { inSeconds: 5 }, api)).rejects.toSatisfy((e) =>
      isChronosError(e, 'conflict'),
    );
    expect(await dispatcher.runOnce()).toBe(0);
    expect(receiver.fires).toHaveLength(0);
  });

  it('cancel-is-final: cancelling during a delivery stops every later one, the in-flight outcome is fenced', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { cron: '* * * * *' }, api);
    await backdate(t.db, alarm.id, 61_000);
    const held = gate<Delivery>();
    const receiver = new RecordingReceiver();
    receiver.behave = () => held.promise;
    const dispatcher = makeDispatcher(t.db, receiver);
    const running = dispatcher.runOnce();
    await until(() => receiver.fires.length === 1, 'the delivery to start');

    await service.cancel(OWNER, { id: alarm.id });
    held.open({ ok: true });
    await running;
    const row = await alarmRow(t.db, alarm.id);
    expect(row.status).toBe('cancelled');
    await lapseLease(t.db, alarm.id);
    await backdate(t.db, alarm.id, 3_600_000);
    expect(await dispatcher.runOnce()).toBe(0);
  });

  it('reschedule-is-atomic: one UPDATE moves the alarm; it fires at the new time only', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 60, label: 'move me' }, api);
    const ex = counting(t.db);
    const moved = await new AlarmService({
      db: ex,
      dbClock: new DbClock(t.db),
      quotas: { maxActiveAlarms: 0, createRatePerMinute: 0, minCronIntervalMs: 0 },
      notifyHorizonMs: 1_000,
    }).update(OWNER, { id: alarm.id }, { inSeconds: 3_600 }, api);
    // One write; the read before it only fetches the zone a new schedule is read in.
    expect(ex.statements.filter((s) => !['db_now', 'alarms_get'].includes(s))).toEqual([
      'alarms_reschedule_by_id',
    ]);
    expect(moved.id).toBe(alarm.id);
    expect(moved.status).toBe('active');
    expect(moved.label).toBe('move me');
    expect(moved.nextFireAt.getTime() - alarm.nextFireAt.getTime()).toBeGreaterThan(3_400_000);

    // The old time passes: nothing. The new time passes: it fires, once.
    const receiver = new RecordingReceiver();
    const dispatcher = makeDispatcher(t.db, receiver);
    await backdate(t.db, alarm.id, 120_000);
    expect(await dispatcher.runOnce()).toBe(0);
    await backdate(t.db, alarm.id, 3_600_000);
    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.fires[0]!.scheduledFor.getTime()).toBe(moved.nextFireAt.getTime() - 3_720_000);
  });

  it('reschedule-during-delivery: a reschedule landing mid-delivery wins; the alarm fires at its new time', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 1 }, api);
    await backdate(t.db, alarm.id, 2_000);
    const held = gate<Delivery>();
    const receiver = new RecordingReceiver();
    receiver.behave = () => held.promise;
    const dispatcher = makeDispatcher(t.db, receiver);
    const running = dispatcher.runOnce();
    await until(() => receiver.fires.length === 1, 'the old delivery to start');

    const moved = await service.update(OWNER, { id: alarm.id }, { inSeconds: 600 }, api);
    held.open({ ok: true });
    await running;
    const row = await alarmRow(t.db, alarm.id);
    expect(row.status).toBe('active');
    expect((row.next_fire_at as Date).getTime()).toBe(moved.nextFireAt.getTime());
    expect(row.claimed_at).toBeNull();

    receiver.behave = () => ({ ok: true });
    expect(await dispatcher.runOnce()).toBe(0);
    await backdate(t.db, alarm.id, 600_000);
    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.fires[1]!.wakeId).not.toBe(receiver.fires[0]!.wakeId);
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
  });

  it('owners-are-isolated: another owner’s alarm is exactly as absent as a missing one', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 600, idempotencyKey: 'k' }, api);
    const missing = '00000000-0000-4000-8000-000000000000';
    const attempts: [string, (id: string) => Promise<unknown>][] = [
      ['get', (id) => service.get(OTHER, id)],
      ['cancel', (id) => service.cancel(OTHER, { id })],
      ['update', (id) => service.update(OTHER, { id }, { label: 'mine now' }, api)],
    ];
    for (const [name, attempt] of attempts) {
      const theirs = await attempt(alarm.id).catch((e: Error) => e);
      const absent = await attempt(missing).catch((e: Error) => e);
      expect(isChronosError(theirs, 'not_found'), name).toBe(true);
      expect(isChronosError(absent, 'not_found'), name).toBe(true);
      expect((theirs as Error).message.replace(alarm.id, missing)).toBe((absent as Error).message);
    }
    expect((await service.list(OTHER, {})).items).toHaveLength(0);
    expect((await service.list(OWNER, {})).items.map((a) => a.id)).toEqual([alarm.id]);
    const row = await alarmRow(t.db, alarm.id);
    expect(row.status).toBe('active');
  });
});
