import { expect, it } from 'vitest';
import { TestClock } from '../../packages/chronos-timers/src/clock.js';
import { nextFires } from '../../packages/chronos-timers/src/schedule/resolve.js';
import { nextOccurrence } from '../../packages/chronos-timers/src/schedule/next-occurrence.js';
import { describeEachBackend } from '../support/backends.js';
import {
  alarmRow,
  backdate,
  makeDispatcher,
  makeService,
  OWNER,
  RecordingReceiver,
  wakesOf,
} from '../support/harness.js';
import { Metrics } from '../../packages/chronos-timers-server/src/metrics.js';

const api = { source: 'api' } as const;

describeEachBackend('conformance: when alarms fire', ({ t }) => {
  it('never-early: an alarm not yet due is not delivered, and no delivery precedes its due instant', async () => {
    const service = makeService(t.db);
    const receiver = new RecordingReceiver();
    const dispatcher = makeDispatcher(t.db, receiver);
    const later = await service.create(OWNER, { inSeconds: 3 }, api);
    const due = await service.create(OWNER, { inSeconds: 60 }, api);
    await backdate(t.db, due.alarm.id, 60_000);

    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.fires.map((f) => f.alarm.id)).toEqual([due.alarm.id]);
    expect((await alarmRow(t.db, later.alarm.id)).status).toBe('active');
    for (const fire of receiver.fires) {
      expect(fire.firedAt.getTime()).toBeGreaterThanOrEqual(fire.scheduledFor.getTime());
      expect(fire.latenessMs).toBeGreaterThanOrEqual(0);
    }
  });

  it('fires-after-restart: an alarm written before a restart fires after it', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 30, wakeMessage: 'still here' }, api);
    await t.restart();

    await backdate(t.db, alarm.id, 30_000);
    const receiver = new RecordingReceiver();
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(1);
    expect(receiver.fires[0]?.alarm.wakeMessage).toBe('still here');
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
  });

  it('missed-once-fires-once: a one-shot that fell due while nothing ran fires once, late', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 10 }, api);
    await backdate(t.db, alarm.id, 3_600_000 + 10_000);
    const receiver = new RecordingReceiver();
    const dispatcher = makeDispatcher(t.db, receiver);

    expect(await dispatcher.runOnce()).toBe(1);
    expect(await dispatcher.runOnce()).toBe(0);
    expect(receiver.fires).toHaveLength(1);
    expect(receiver.fires[0]!.latenessMs).toBeGreaterThanOrEqual(3_600_000);
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
  });

  it('cron-no-catch-up: a cron alarm that missed many occurrences fires once and advances past now', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { cron: '* * * * *' }, api);
    await backdate(t.db, alarm.id, 10 * 60_000 + 5_000);
    const receiver = new RecordingReceiver();
    const dispatcher = makeDispatcher(t.db, receiver);

    expect(await dispatcher.runOnce()).toBe(1);
    expect(await dispatcher.runOnce()).toBe(0);
    expect(receiver.fires).toHaveLength(1);
    expect(receiver.fires[0]!.latenessMs).toBeGreaterThan(9 * 60_000);
    const row = await alarmRow(t.db, alarm.id);
    expect(row.status).toBe('active');
    expect((row.next_fire_at as Date).getTime()).toBeGreaterThan(Date.now() - 1_000);
    expect((row.next_fire_at as Date).getTime()).toBeLessThanOrEqual(Date.now() + 61_000);
    expect((row.next_fire_at as Date).getUTCSeconds()).toBe(0);
    expect(row.failure_count).toBe(0);
  });

  it('due-order: due alarms are claimed earliest first', async () => {
    const service = makeService(t.db);
    const ids: string[] = [];
    for (const ageMs of [5_000, 50_000, 20_000, 40_000]) {
      const { alarm } = await service.create(OWNER, { inSeconds: 1 }, api);
      await backdate(t.db, alarm.id, ageMs + 1_000);
      ids.push(alarm.id);
    }
    const receiver = new RecordingReceiver();
    const dispatcher = makeDispatcher(t.db, receiver, { batchSize: 2 });
    expect(await dispatcher.runOnce()).toBe(2);
    expect(new Set(receiver.fires.map((f) => f.alarm.id))).toEqual(new Set([ids[1], ids[3]]));
    expect(await dispatcher.runOnce()).toBe(2);
    expect(receiver.fires.slice(2).map((f) => f.alarm.id)).toEqual([ids[2], ids[0]]);
  });

  it('lateness-reported: every delivery reports how late it was, stored and exported', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 5 }, api);
    await backdate(t.db, alarm.id, 5_000 + 2_500);
    const receiver = new RecordingReceiver();
    const metrics = new Metrics();
    await makeDispatcher(t.db, receiver, { metrics }).runOnce();

    const lateness = receiver.fires[0]!.latenessMs;
    expect(lateness).toBeGreaterThanOrEqual(2_500);
    expect(lateness).toBeLessThan(2_500 + 5_000);
    const [wake] = await wakesOf(t.db, alarm.id);
    expect(wake?.lateness_ms).toBe(Math.round(lateness));
    const exported = await metrics.render();
    expect(exported).toMatch(/chronos_lateness_seconds_count 1/);
    expect(exported).toMatch(/chronos_deliveries_total\{outcome="delivered"\} 1/);
  });

  it('db-clock-rules: due-ness follows the database clock, not the application’s', async () => {
    // This process's clock runs a day ahead; the alarm is due in a minute by the database.
    const fast = new TestClock(new Date(Date.now() + 86_400_000));
    const service = makeService(t.db, { clock: fast });
    const { alarm } = await service.create(OWNER, { inSeconds: 60 }, api);
    const row = await alarmRow(t.db, alarm.id);
    const dbNow = (await t.db.query<{ now: Date }>({ name: 'test_now', text: 'SELECT now() AS now' }))[0]!
      .now;
    // Computed from the database's time, not the fast clock's.
    expect(Math.abs((row.next_fire_at as Date).getTime() - (dbNow.getTime() + 60_000))).toBeLessThan(5_000);

    const receiver = new RecordingReceiver();
    const dispatcher = makeDispatcher(t.db, receiver, { clock: fast });
    expect(await dispatcher.runOnce()).toBe(0);
    fast.advance(86_400_000);
    expect(await dispatcher.runOnce()).toBe(0);
    expect(receiver.fires).toHaveLength(0);
  });
});

// The database clock pinned to an instant, so a schedule is resolved "as of" a DST change.
const asOf = (iso: string) => ({ now: async () => new Date(iso) });

describeEachBackend('conformance: daylight saving time', ({ t }) => {
  it('dst-gap: a local time that does not exist fires at the first instant after the gap', async () => {
    // Europe/Paris springs forward on 2027-03-28: 02:00 CET becomes 03:00 CEST.
    const service = makeService(t.db, { dbClock: asOf('2027-03-27T12:00:00.000Z') });
    const { alarm } = await service.create(OWNER, { cron: '30 2 * * *', timezone: 'Europe/Paris' }, api);
    expect(alarm.nextFireAt.toISOString()).toBe('2027-03-28T01:00:00.000Z');
    expect(nextFires(alarm, 3).map((f) => f.local)).toEqual([
      '2027-03-28T03:00:00.000+02:00',
      '2027-03-29T02:30:00.000+02:00',
      '2027-03-30T02:30:00.000+02:00',
    ]);
    const stored = await alarmRow(t.db, alarm.id);
    expect((stored.next_fire_at as Date).toISOString()).toBe('2027-03-28T01:00:00.000Z');
  });

  it('dst-overlap: a local time that occurs twice fires once, at its first occurrence', async () => {
    // Europe/Paris falls back on 2027-10-31: 02:30 happens at 00:30Z (CEST) and 01:30Z (CET).
    const service = makeService(t.db, { dbClock: asOf('2027-10-30T12:00:00.000Z') });
    const { alarm } = await service.create(OWNER, { cron: '30 2 * * *', timezone: 'Europe/Paris' }, api);
    expect(alarm.nextFireAt.toISOString()).toBe('2027-10-31T00:30:00.000Z');
    const utc = nextFires(alarm, 2).map((f) => f.utc);
    expect(utc).toEqual(['2027-10-31T00:30:00.000Z', '2027-11-01T01:30:00.000Z']);
    // After the first 02:30 fires, the dispatcher advances past the second one.
    const afterFire = new Date('2027-10-31T00:30:00.010Z');
    expect(nextOccurrence(alarm, afterFire)?.toISOString()).toBe('2027-11-01T01:30:00.000Z');
    const stored = await alarmRow(t.db, alarm.id);
    expect((stored.next_fire_at as Date).toISOString()).toBe('2027-10-31T00:30:00.000Z');
  });
});
