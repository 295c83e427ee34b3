/**
 * The third edition's recurrence rules (contract §3a, §11): rrule-as-rfc5545,
 * window-bounds-occurrences, jitter-stable-and-never-early, expired-never-delivered — on
 * PostgreSQL and PGlite alike. Time passes by backdating rows or pinning the service's clock,
 * never by sleeping.
 */
import { expect, it } from 'vitest';
import { isChronosError, type ChronosError } from '../../packages/chronos-timers/src/errors.js';
import { dueAt } from '../../packages/chronos-timers/src/schedule/next-occurrence.js';
import { nextFires } from '../../packages/chronos-timers/src/schedule/resolve.js';
import { alarmView } from '../../packages/chronos-timers/src/wire/views.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { Metrics } from '../../packages/chronos-timers-server/src/metrics.js';
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

const api = { source: 'api' } as const;
const asOf = (iso: string | Date) => ({ now: async () => new Date(iso) });
const ago = (ms: number) => new Date(Date.now() - ms);
const HOUR = 3_600_000;

async function refusedOn(promise: Promise<unknown>): Promise<string[]> {
  try {
    await promise;
  } catch (error) {
    expect(isChronosError(error, 'invalid_input')).toBe(true);
    return (error as ChronosError).errors.map((e) => e.path);
  }
  throw new Error('expected a refusal');
}

describeEachBackend('conformance: recurrences, windows, jitter and expiry', ({ t }) => {
  it('rrule-as-rfc5545: a rule is stored without RRULE:, evaluated in its zone from its start, and fired when it ends', async () => {
    const service = makeService(t.db, { dbClock: asOf('2027-02-20T12:00:00.000Z') });
    const { alarm } = await service.create(
      OWNER,
      {
        rrule: 'RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
        timezone: 'Europe/Paris',
        startsAt: '2027-03-01T00:00:00+01:00',
      },
      api,
    );
    expect(alarm.kind).toBe('rrule');
    const view = alarmView(alarm);
    expect(view).toMatchObject({
      kind: 'rrule',
      rrule: 'FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
      starts_at: '2027-02-28T23:00:00.000Z',
      next_fire_at: '2027-03-02T08:00:00.000Z',
    });
    expect(view).not.toHaveProperty('cron_expr');
    expect(view).not.toHaveProperty('jitter_seconds');
    // Every other Tuesday at 09:00 Paris, across the spring change.
    expect(nextFires(alarm, 3).map((f) => f.local)).toEqual([
      '2027-03-02T09:00:00.000+01:00',
      '2027-03-16T09:00:00.000+01:00',
      '2027-03-30T09:00:00.000+02:00',
    ]);
    const [row] = await t.db.query<{ kind: string; rrule: string; cron_expr: string }>(
      sql('test_rrule_row', 'SELECT kind, rrule, cron_expr FROM chronos.alarms WHERE id = $1'),
      [alarm.id],
    );
    expect(row).toEqual({
      kind: 'rrule',
      rrule: 'FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
      cron_expr: '',
    });
    expect(alarmView(await service.get(OWNER, alarm.id))).toEqual(view);

    // COUNT: of three daily occurrences from 36 hours ago, two are past; one fire, then the third.
    const past = makeService(t.db, { dbClock: asOf(ago(36 * HOUR)) });
    const three = (await past.create(OWNER, { rrule: 'FREQ=DAILY;COUNT=3' }, api)).alarm;
    const two = (await past.create(OWNER, { rrule: 'FREQ=DAILY;COUNT=2' }, api)).alarm;
    const receiver = new RecordingReceiver();
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(2);
    expect(receiver.fires).toHaveLength(2);
    const threeRow = await alarmRow(t.db, three.id);
    expect(threeRow.status).toBe('active');
    expect((threeRow.next_fire_at as Date).getTime()).toBe(three.nextFireAt.getTime() + 2 * 24 * HOUR);
    // After its last occurrence is delivered the alarm is fired.
    expect((await alarmRow(t.db, two.id)).status).toBe('fired');

    // Refusals name the part at fault.
    const error = await service
      .create(OWNER, { rrule: 'FREQ=MONTHLY;BYMONTH=2;BYDAY=5FR' }, api)
      .catch((e: unknown) => e);
    expect((error as ChronosError).errors[0]).toMatchObject({ path: 'rrule' });
    expect((error as Error).message).toMatch(/BYDAY=5FR never occurs in February.*use -1FR/);
  });

  it('window-bounds-occurrences: nothing is due before starts_at nor after ends_at, and past ends_at the alarm is fired', async () => {
    const service = makeService(t.db);
    const startsAt = new Date(Date.now() + 2 * HOUR);
    const { alarm } = await service.create(
      OWNER,
      { cron: '* * * * *', startsAt: startsAt.toISOString() },
      api,
    );
    expect(alarm.nextFireAt.getTime()).toBeGreaterThanOrEqual(startsAt.getTime());
    expect(alarm.nextFireAt.getTime()).toBeLessThan(startsAt.getTime() + 60_000);
    expect(alarmView(alarm).starts_at).toBe(startsAt.toISOString());

    // Hourly from three hours ago, ending in half an hour: one fire (no catching up), then fired.
    const past = makeService(t.db, { dbClock: asOf(ago(3 * HOUR)) });
    const endsAt = new Date(Date.now() + HOUR / 2);
    const hourly = (await past.create(OWNER, { rrule: 'FREQ=HOURLY', endsAt: endsAt.toISOString() }, api))
      .alarm;
    const receiver = new RecordingReceiver();
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(1);
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(0);
    expect(receiver.fires).toHaveLength(1);
    expect((await alarmRow(t.db, hourly.id)).status).toBe('fired');

    expect(
      await refusedOn(
        service.create(
          OWNER,
          { cron: '@daily', startsAt: '2030-01-02T00:00:00Z', endsAt: '2030-01-01T00:00:00Z' },
          api,
        ),
      ),
    ).toEqual(['endsAt']);
    expect(
      await refusedOn(service.create(OWNER, { inSeconds: 60, endsAt: '2030-01-01T00:00:00Z' }, api)),
    ).toEqual(['endsAt']);
    expect(
      await refusedOn(service.create(OWNER, { cron: '@daily', endsAt: ago(HOUR).toISOString() }, api)),
    ).toEqual(['endsAt']);
  });

  it('jitter-stable-and-never-early: each alarm of a shared schedule is due at its own stable offset, never before the occurrence', async () => {
    const service = makeService(t.db);
    const made = await service.createMany(
      Array.from({ length: 20 }, () => ({ owner: OWNER, spec: { cron: '0 9 * * *', jitterSeconds: 600 } })),
      api,
    );
    const occurrence = nextFires(
      { kind: 'cron', cronExpr: '0 9 * * *', timezone: 'UTC', nextFireAt: new Date() },
      2,
    )
      .map((f) => new Date(f.utc))
      .find((d) => d.getTime() > Date.now())!;
    const offsets = new Set<number>();
    for (const { alarm } of made) {
      const offset = alarm.nextFireAt.getTime() - occurrence.getTime();
      expect(offset).toBeGreaterThanOrEqual(0);
      expect(offset).toBeLessThan(600_000);
      offsets.add(offset);
      // The same from the id and the occurrence alone: on a re-read, and on another instance.
      expect(alarm.nextFireAt.getTime()).toBe(dueAt(alarm, occurrence).getTime());
      const again = await makeService(t.db).get(OWNER, alarm.id);
      expect(again.nextFireAt.getTime()).toBe(alarm.nextFireAt.getTime());
      expect(alarmView(again).jitter_seconds).toBe(600);
    }
    expect(offsets.size).toBeGreaterThan(15);

    // Delivered at (or after) its jittered instant, lateness counted from it; then the next one.
    const { alarm } = made[0]!;
    await backdate(t.db, alarm.id, alarm.nextFireAt.getTime() - Date.now() + 2_000);
    const due = (await alarmRow(t.db, alarm.id)).scheduled_for as Date;
    const receiver = new RecordingReceiver();
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(1);
    const fire = receiver.fires[0]!;
    expect(fire.scheduledFor.getTime()).toBe(due.getTime());
    expect(fire.firedAt.getTime()).toBeGreaterThanOrEqual(fire.scheduledFor.getTime());
    expect(fire.latenessMs).toBe(fire.firedAt.getTime() - fire.scheduledFor.getTime());
    const after = await service.get(OWNER, alarm.id);
    expect(after.nextFireAt.getTime()).toBeGreaterThan(Date.now());
    const nextOccurrence = new Date(
      Math.floor(after.nextFireAt.getTime() / 86_400_000) * 86_400_000 + 9 * HOUR,
    );
    expect(after.nextFireAt.getTime()).toBe(dueAt(alarm, nextOccurrence).getTime());

    expect(await refusedOn(service.create(OWNER, { cron: '*/5 * * * *', jitterSeconds: 300 }, api))).toEqual([
      'jitterSeconds',
    ]);
  });

  it('expired-never-delivered: an occurrence past its deadline is never delivered, at the claim, before a retry, after a pause', async () => {
    const service = makeService(t.db);
    const metrics = new Metrics();
    const receiver = new RecordingReceiver();
    const dispatcher = makeDispatcher(t.db, receiver, { metrics });

    // After an outage: a one-shot claimed past its deadline is expired, and final.
    const once = (await service.create(OWNER, { inSeconds: 60, expiresAfterSeconds: 30 }, api)).alarm;
    await backdate(t.db, once.id, 60_000 + 31_000);
    // A recurring alarm skips that occurrence and advances.
    const cron = (await service.create(OWNER, { cron: '* * * * *', expiresAfterSeconds: 5 }, api)).alarm;
    await backdate(t.db, cron.id, 10 * 60_000);
    expect(await dispatcher.runOnce()).toBe(2);
    expect(receiver.fires).toHaveLength(0);
    expect((await alarmRow(t.db, once.id)).status).toBe('expired');
    expect((await wakesOf(t.db, once.id)).map((w) => w.status)).toEqual(['expired']);
    const cronRow = await alarmRow(t.db, cron.id);
    expect(cronRow.status).toBe('active');
    expect((cronRow.next_fire_at as Date).getTime()).toBeGreaterThan(Date.now() - 1_000);
    expect(await metrics.render()).toMatch(/chronos_deliveries_total\{outcome="expired"\} 2/);
    expect(alarmView(await service.get(OWNER, once.id))).toMatchObject({
      status: 'expired',
      expires_after_seconds: 30,
    });
    for (const change of [
      () => service.update(OWNER, { id: once.id }, { label: 'late' }, api),
      () => service.pause(OWNER, once.id),
      () => service.resume(OWNER, once.id),
      () => service.fireNow(OWNER, once.id),
      () => service.retry(OWNER, once.id),
      () => service.cancel(OWNER, { id: once.id }),
    ]) {
      await expect(change()).rejects.toSatisfy((e) => isChronosError(e, 'conflict'));
    }

    // Retries that run out of time: the first attempt fails; the retry, claimed past the deadline, is not made.
    const flaky = (await service.create(OWNER, { inSeconds: 60, expiresAfterSeconds: 10 }, api)).alarm;
    await backdate(t.db, flaky.id, 61_000);
    receiver.behave = () => ({ ok: false, retryable: true, error: 'router down', statusCode: 503 });
    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.firesOf(flaky.id)).toHaveLength(1);
    expect((await alarmRow(t.db, flaky.id)).status).toBe('active');
    await backdate(t.db, flaky.id, 20_000);
    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.firesOf(flaky.id)).toHaveLength(1);
    expect((await alarmRow(t.db, flaky.id)).status).toBe('expired');
    expect((await wakesOf(t.db, flaky.id)).map((w) => w.status)).toEqual(['expired']);

    // A pause: not expired while paused; on resume past the deadline, given up at once.
    receiver.behave = () => ({ ok: true });
    const paused = (await service.create(OWNER, { inSeconds: 60, expiresAfterSeconds: 30 }, api)).alarm;
    await service.pause(OWNER, paused.id);
    await backdate(t.db, paused.id, 60_000 + 120_000);
    expect(await dispatcher.runOnce()).toBe(0);
    expect((await alarmRow(t.db, paused.id)).status).toBe('paused');
    expect((await service.resume(OWNER, paused.id)).status).toBe('active');
    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.firesOf(paused.id)).toHaveLength(0);
    expect((await alarmRow(t.db, paused.id)).status).toBe('expired');

    // Without it, a late one-shot is still delivered (no catching up still holds).
    const plain = (await service.create(OWNER, { inSeconds: 60 }, api)).alarm;
    await backdate(t.db, plain.id, 60_000 + 3 * HOUR);
    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.firesOf(plain.id)).toHaveLength(1);
  });
});
