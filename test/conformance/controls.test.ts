import { expect, it } from 'vitest';
import { isChronosError } from '../../packages/chronos-timers/src/errors.js';
import { alarmView } from '../../packages/chronos-timers/src/wire/views.js';
import { describeEachBackend } from '../support/backends.js';
import {
  alarmRow,
  backdate,
  dueNow,
  makeDispatcher,
  makeService,
  OWNER,
  RecordingReceiver,
  wakesOf,
} from '../support/harness.js';

const api = { source: 'api' } as const;
const MINUTE = 60_000;

describeEachBackend('conformance: pause, resume, fire now, retry', ({ t }) => {
  it('paused-is-never-claimed: a paused alarm is not claimed on its schedule, however long overdue', async () => {
    const service = makeService(t.db);
    const { alarm: cron } = await service.create(OWNER, { cron: '*/5 * * * *' }, api);
    const { alarm: once } = await service.create(OWNER, { inSeconds: 60 }, api);
    await service.pause(OWNER, cron.id);
    await service.pause(OWNER, once.id);
    await backdate(t.db, cron.id, 3_600_000);
    await backdate(t.db, once.id, 3_600_000);

    const receiver = new RecordingReceiver();
    const dispatcher = makeDispatcher(t.db, receiver);
    expect(await dispatcher.runOnce()).toBe(0);
    expect(receiver.fires).toHaveLength(0);
    for (const id of [cron.id, once.id]) {
      expect(await alarmRow(t.db, id)).toMatchObject({ status: 'paused', claimed_at: null });
      expect(await wakesOf(t.db, id)).toEqual([]);
    }
    // Pausing again answers it as it is; a change keeps it paused.
    expect((await service.pause(OWNER, cron.id)).status).toBe('paused');
    const edited = await service.update(OWNER, { id: cron.id }, { label: 'held', cron: '0 9 * * *' }, api);
    expect(edited).toMatchObject({ status: 'paused', label: 'held', cronExpr: '0 9 * * *' });
    expect(await dispatcher.runOnce()).toBe(0);
  });

  it('paused-is-never-claimed: pausing fences out a delivery of the schedule already under way', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { cron: '*/5 * * * *', requireAck: false }, api);
    await backdate(t.db, alarm.id, 301_000);
    let paused: Promise<unknown> = Promise.resolve();
    const receiver = new RecordingReceiver();
    receiver.behave = () => {
      paused = service.pause(OWNER, alarm.id);
      return paused.then(() => ({ ok: true }));
    };
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(1);
    await paused;
    // The outcome of the delivery in flight was not recorded over the pause.
    const row = await alarmRow(t.db, alarm.id);
    expect(row).toMatchObject({ status: 'paused', lease_token: null, wake_id: null });
    await backdate(t.db, alarm.id, 3_600_000);
    expect(await makeDispatcher(t.db, new RecordingReceiver()).runOnce()).toBe(0);
  });

  it('resume-does-not-catch-up: a cron alarm resumes at its next occurrence after now, firing none it missed', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { cron: '*/5 * * * *', requireAck: false }, api);
    await service.pause(OWNER, alarm.id);
    // Three hours of occurrences come and go while it is paused.
    await backdate(t.db, alarm.id, 3 * 3_600_000);
    const before = Date.now();
    const resumed = await service.resume(OWNER, alarm.id);
    expect(resumed.status).toBe('active');
    expect(resumed.nextFireAt.getTime()).toBeGreaterThan(before);
    expect(resumed.nextFireAt.getTime()).toBeLessThanOrEqual(before + 5 * MINUTE + 1_000);
    expect(resumed.nextFireAt.getUTCMinutes() % 5).toBe(0);

    const receiver = new RecordingReceiver();
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(0);
    // At its next occurrence it fires once, on time.
    await dueNow(t.db, alarm.id);
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(1);
    expect(receiver.fires).toHaveLength(1);
    // Resuming an active alarm answers it as it is.
    expect((await service.resume(OWNER, alarm.id)).status).toBe('active');
  });

  it('resume-does-not-catch-up: a one-shot whose instant passed while paused fires promptly; one still ahead waits', async () => {
    const service = makeService(t.db);
    const { alarm: passed } = await service.create(OWNER, { inSeconds: 60 }, api);
    const { alarm: ahead } = await service.create(OWNER, { inSeconds: 3_600 }, api);
    await service.pause(OWNER, passed.id);
    await service.pause(OWNER, ahead.id);
    await backdate(t.db, passed.id, 120_000);
    expect((await service.resume(OWNER, ahead.id)).nextFireAt).toEqual(ahead.nextFireAt);
    const resumed = await service.resume(OWNER, passed.id);
    expect(resumed.nextFireAt.getTime()).toBeLessThanOrEqual(Date.now() + 1_000);

    const receiver = new RecordingReceiver();
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(1);
    expect(receiver.fires.map((f) => f.alarm.id)).toEqual([passed.id]);
  });

  it('fire now: one extra delivery, trigger manual; a cron alarm returns to its schedule, a paused one stays paused', async () => {
    const service = makeService(t.db);
    const { alarm: cron } = await service.create(OWNER, { cron: '0 9 * * *', requireAck: false }, api);
    const { alarm: held } = await service.create(OWNER, { cron: '0 10 * * *', requireAck: false }, api);
    await service.pause(OWNER, held.id);
    const fired = await service.fireNow(OWNER, cron.id);
    expect(fired).toMatchObject({ status: 'active', trigger: 'manual' });
    expect((await service.fireNow(OWNER, held.id)).status).toBe('paused');

    const receiver = new RecordingReceiver();
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(2);
    expect(receiver.fires.map((f) => f.trigger)).toEqual(['manual', 'manual']);
    // The schedule was not moved: back to the same next occurrence.
    const after = await alarmRow(t.db, cron.id);
    expect(after).toMatchObject({ status: 'active', trigger: 'schedule', held_occurrence: null });
    expect(after.next_fire_at).toEqual(cron.nextFireAt);
    expect(await alarmRow(t.db, held.id)).toMatchObject({ status: 'paused', trigger: 'schedule' });
    const [wake] = await wakesOf(t.db, cron.id);
    expect(wake).toMatchObject({ status: 'delivered' });
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(0);
  });

  it("fire now: a cron alarm's next_fire_at is not moved — the answer and every read meanwhile show the schedule's occurrence", async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { cron: '0 9 * * *', requireAck: false }, api);
    const scheduled = alarmView(alarm).next_fire_at;
    expect(scheduled).toBe(alarm.nextFireAt.toISOString());
    const fired = await service.fireNow(OWNER, alarm.id);
    expect(alarmView(fired).next_fire_at).toBe(scheduled);
    expect(alarmView(await service.get(OWNER, alarm.id)).next_fire_at).toBe(scheduled);
    // Still delivered promptly, trigger manual; then the schedule goes on as before.
    const receiver = new RecordingReceiver();
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(1);
    expect(receiver.fires.map((f) => f.trigger)).toEqual(['manual']);
    expect(alarmView(await service.get(OWNER, alarm.id)).next_fire_at).toBe(scheduled);
  });

  it('resume-does-not-catch-up: a one-shot resumed past its instant is due at its own instant; lateness counts from there', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 60, requireAck: false }, api);
    await service.pause(OWNER, alarm.id);
    await backdate(t.db, alarm.id, 120_000);
    const instant = new Date((alarm.fireAt as Date).getTime() - 120_000);
    await service.resume(OWNER, alarm.id);
    const receiver = new RecordingReceiver();
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(1);
    const [fire] = receiver.fires;
    expect(fire?.scheduledFor).toEqual(instant);
    expect(fire?.latenessMs).toBeGreaterThanOrEqual(60_000);
    const [wake] = await wakesOf(t.db, alarm.id);
    expect(wake?.lateness_ms).toBeGreaterThanOrEqual(60_000);
  });

  it('fire now: a one-shot is then fired as usual; a fired alarm cannot be fired now', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 3_600 }, api);
    await service.fireNow(OWNER, alarm.id);
    expect(await makeDispatcher(t.db, new RecordingReceiver()).runOnce()).toBe(1);
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
    await expect(service.fireNow(OWNER, alarm.id)).rejects.toSatisfy((e) => isChronosError(e, 'conflict'));
  });

  it('retry: a failed alarm is active again with no failures, due now, and delivered with a new wake', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 60, maxFailures: 1 }, api);
    await backdate(t.db, alarm.id, 61_000);
    const failing = new RecordingReceiver();
    failing.behave = () => ({ ok: false, retryable: true, error: 'router answered 500' });
    expect(await makeDispatcher(t.db, failing).runOnce()).toBe(1);
    expect(await alarmRow(t.db, alarm.id)).toMatchObject({ status: 'failed', failure_count: 1 });
    await expect(service.pause(OWNER, alarm.id)).rejects.toSatisfy((e) => isChronosError(e, 'conflict'));

    const retried = await service.retry(OWNER, alarm.id);
    expect(retried).toMatchObject({ status: 'active', failureCount: 0, lastError: '' });
    expect(await makeDispatcher(t.db, new RecordingReceiver()).runOnce()).toBe(1);
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
    expect((await wakesOf(t.db, alarm.id)).map((w) => w.status)).toEqual(['failed', 'delivered']);
    await expect(service.retry(OWNER, alarm.id)).rejects.toSatisfy((e) => isChronosError(e, 'conflict'));
  });
});
