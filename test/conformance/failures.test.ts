import { RawJson } from '../../packages/chronos-timers/src/json.js';
import { expect, it } from 'vitest';
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
import { stringifyJson } from '../../packages/chronos-timers/src/json.js';
import { alarmView } from '../../packages/chronos-timers/src/wire/views.js';
import { libraryOn } from '../support/library.js';

const api = { source: 'api' } as const;

describeEachBackend('conformance: failures and payloads', ({ t }) => {
  it('retry-until-ceiling: failures back off and count up to max_failures, then the once alarm fails', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 1, maxFailures: 3 }, api);
    await backdate(t.db, alarm.id, 2_000);
    const receiver = new RecordingReceiver();
    receiver.behave = (fire) => ({
      ok: false,
      retryable: true,
      error: `router answered 503 (attempt ${fire.attempt})`,
    });
    const dispatcher = makeDispatcher(t.db, receiver);

    for (let failures = 1; failures <= 2; failures++) {
      expect(await dispatcher.runOnce()).toBe(1);
      const row = await alarmRow(t.db, alarm.id);
      expect(row.status).toBe('active');
      expect(row.failure_count).toBe(failures);
      expect(row.last_error).toBe(`router answered 503 (attempt ${failures})`);
      // Backing off: not due again yet, and the occurrence it retries is unchanged.
      expect((row.next_fire_at as Date).getTime()).toBeGreaterThan(Date.now());
      expect((row.scheduled_for as Date).getTime()).toBe(alarm.nextFireAt.getTime() - 2_000);
      expect(await dispatcher.runOnce()).toBe(0);
      await dueNow(t.db, alarm.id);
    }
    expect(await dispatcher.runOnce()).toBe(1);
    const row = await alarmRow(t.db, alarm.id);
    expect(row.status).toBe('failed');
    expect(row.failure_count).toBe(3);
    expect(row.last_error).toBe('router answered 503 (attempt 3)');
    expect(new Set(receiver.fires.map((f) => f.wakeId)).size).toBe(1);
    const [wake] = await wakesOf(t.db, alarm.id);
    expect(wake).toMatchObject({ status: 'failed', attempts: 3 });
    expect(await dispatcher.runOnce()).toBe(0);
  });

  it('retry-until-ceiling: a failure that retrying cannot mend ends the occurrence at once', async () => {
    const { alarm } = await makeService(t.db).create(OWNER, { inSeconds: 1, maxFailures: 5 }, api);
    await backdate(t.db, alarm.id, 2_000);
    const receiver = new RecordingReceiver();
    receiver.behave = () => ({
      ok: false,
      retryable: false,
      statusCode: 404,
      error: 'router answered 404 Not Found',
    });
    await makeDispatcher(t.db, receiver).runOnce();
    const row = await alarmRow(t.db, alarm.id);
    expect(row).toMatchObject({
      status: 'failed',
      failure_count: 1,
      last_error: 'router answered 404 Not Found',
    });
  });

  it('cron-skip-and-advance: a cron occurrence that exhausts its failures is skipped; the alarm stays active', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { cron: '*/5 * * * *', maxFailures: 2 }, api);
    await backdate(t.db, alarm.id, 301_000);
    const before = await alarmRow(t.db, alarm.id);
    const receiver = new RecordingReceiver();
    receiver.behave = () => ({ ok: false, retryable: true, error: 'router unreachable: ECONNREFUSED' });
    const dispatcher = makeDispatcher(t.db, receiver);

    expect(await dispatcher.runOnce()).toBe(1);
    expect((await alarmRow(t.db, alarm.id)).failure_count).toBe(1);
    await dueNow(t.db, alarm.id);
    expect(await dispatcher.runOnce()).toBe(1);

    const row = await alarmRow(t.db, alarm.id);
    expect(row.status).toBe('active');
    expect(row.failure_count).toBe(0);
    expect(row.last_error).toBe('router unreachable: ECONNREFUSED');
    expect((row.next_fire_at as Date).getTime()).toBeGreaterThan(Date.now());
    expect((row.next_fire_at as Date).getTime()).toBeGreaterThan((before.scheduled_for as Date).getTime());
    expect(row.wake_id).toBeNull();
    const [wake] = await wakesOf(t.db, alarm.id);
    expect(wake?.status).toBe('failed');

    // The next occurrence is a fresh fire with a fresh wake.
    receiver.behave = () => ({ ok: true });
    await backdate(t.db, alarm.id, 301_000);
    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.fires[2]!.wakeId).not.toBe(receiver.fires[0]!.wakeId);
  });

  it('payload-verbatim: payload and wake_message pass through digit for digit and code unit for code unit', async () => {
    const rawPayload =
      '{"big": 12345678901234567890, "precise": 0.1000000000000000055511151231257827, "text": "naïve 🕰️ \\u2028 שלום", "nested": {"list": [3.0, 100000000000000000000000000001]}}';
    const wakeMessage = 'Wake up 🕰️ — check the build\u2028(line 2) “quoted” \\ backslash';
    const service = makeService(t.db);
    const { alarm } = await service.create(
      OWNER,
      { inSeconds: 1, payload: new RawJson(rawPayload), wakeMessage: wakeMessage, label: 'π ≈ 3.14159' },
      { source: 'api' },
    );
    const expected = JSON.parse(JSON.stringify(alarm.payload.text)) as string;
    for (const digits of [
      '12345678901234567890',
      '0.1000000000000000055511151231257827',
      '3.0',
      '100000000000000000000000000001',
    ]) {
      expect(expected).toContain(digits);
    }
    await backdate(t.db, alarm.id, 2_000);
    const receiver = new RecordingReceiver();
    await makeDispatcher(t.db, receiver).runOnce();
    const fire = receiver.fires[0]!;
    expect(fire.alarm.payload.text).toBe(alarm.payload.text);
    expect(fire.alarm.wakeMessage).toBe(wakeMessage);
    expect(fire.alarm.label).toBe('π ≈ 3.14159');
    const view = stringifyJson(alarmView(await service.get(OWNER, alarm.id)));
    expect(view).toContain('"big": 12345678901234567890');
    expect(view).toContain('"precise": 0.1000000000000000055511151231257827');

    // Through the library too: the handler sees the stored text verbatim.
    const chronos = await libraryOn(t);
    const timer = await chronos.schedule(null, {
      key: 'verbatim',
      inSeconds: 1,
      payload: { n: 9007199254740993n.toString() },
    });
    expect(timer.payloadText).toBe('{"n": "9007199254740993"}');
    expect(timer.payload).toEqual({ n: '9007199254740993' });
  });
});
