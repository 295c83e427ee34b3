import { pino } from 'pino';
import { expect, it } from 'vitest';
import { TestClock } from '../../packages/chronos-timers/src/clock.js';
import { RawJson } from '../../packages/chronos-timers/src/json.js';
import { describeEachBackend } from '../support/backends.js';
import { alarmRow, backdate, dueNow, makeService, OWNER, wakesOf } from '../support/harness.js';
import { newSecret, useDelivery } from './support.js';

const api = { source: 'api' } as const;
const MARKER = 'payload-marker-never-logged';

/** A logger whose lines are kept, parsed. */
function capturingLogger() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
}

/** The lines a delivery's retry or failure wrote (msg starting "delivery failed" or "… and"). */
const deliveryLines = (lines: Record<string, unknown>[]) =>
  lines.filter((l) => /^(delivery failed|… and)/.test(String(l.msg)));

describeEachBackend('a delivery that fails or is retried writes a log line', ({ t }) => {
  const { sink, delivering } = useDelivery();
  const dispatcherLogging = (clock?: TestClock) => {
    const { logger, lines } = capturingLogger();
    const { dispatcher } = delivering(t.db, {
      receiver: { secrets: [newSecret()] },
      dispatcher: { logger, ...(clock ? { clock } : {}) },
    });
    return { dispatcher, lines };
  };

  it('500 three times: a retry at info twice, then the failure at warn, no payload', async () => {
    const { alarm } = await makeService(t.db).create(
      OWNER,
      { inSeconds: 60, maxFailures: 3, payload: new RawJson(`{"note": "${MARKER}"}`) },
      api,
    );
    await backdate(t.db, alarm.id, 61_000);
    const { dispatcher, lines } = dispatcherLogging();
    sink.answer({ status: 500 }, { status: 500 }, { status: 500 });

    expect(await dispatcher.runOnce()).toBe(1);
    await dueNow(t.db, alarm.id);
    expect(await dispatcher.runOnce()).toBe(1);
    await dueNow(t.db, alarm.id);
    expect(await dispatcher.runOnce()).toBe(1);
    expect(await alarmRow(t.db, alarm.id)).toMatchObject({ status: 'failed' });

    const [wake] = await wakesOf(t.db, alarm.id);
    const error = 'router answered 500 Internal Server Error';
    const logged = deliveryLines(lines);
    expect(logged).toHaveLength(3);
    expect(logged[0]).toMatchObject({
      level: 30,
      msg: 'delivery failed; retrying',
      alarmId: alarm.id,
      wakeId: wake!.id,
      attempt: 1,
      statusCode: 500,
      error,
    });
    expect(logged[1]).toMatchObject({ level: 30, attempt: 2, statusCode: 500, error });
    expect(logged[2]).toMatchObject({
      level: 40,
      msg: 'delivery failed; the alarm has failed',
      alarmId: alarm.id,
      wakeId: wake!.id,
      attempt: 3,
      statusCode: 500,
      error,
    });
    expect(JSON.stringify(lines)).not.toContain(MARKER);
  });

  it('a 400 fails the once alarm at once: one warn line with its status and error', async () => {
    const { alarm } = await makeService(t.db).create(OWNER, { inSeconds: 60 }, api);
    await backdate(t.db, alarm.id, 61_000);
    const { dispatcher, lines } = dispatcherLogging();
    sink.answer({ status: 400 });
    expect(await dispatcher.runOnce()).toBe(1);
    expect(await alarmRow(t.db, alarm.id)).toMatchObject({ status: 'failed' });
    expect(deliveryLines(lines)).toEqual([
      expect.objectContaining({
        level: 40,
        msg: 'delivery failed; the alarm has failed',
        alarmId: alarm.id,
        attempt: 1,
        statusCode: 400,
        error: 'router answered 400 Bad Request',
      }),
    ]);
  });

  it('a cron occurrence skipped at max_failures is a warn line; the alarm stays active', async () => {
    const { alarm } = await makeService(t.db).create(
      OWNER,
      { cron: '*/5 * * * *', maxFailures: 2, requireAck: false },
      api,
    );
    await backdate(t.db, alarm.id, 301_000);
    const { dispatcher, lines } = dispatcherLogging();
    sink.always({ status: 500 });
    await dispatcher.runOnce();
    await dueNow(t.db, alarm.id);
    await dispatcher.runOnce();
    expect(await alarmRow(t.db, alarm.id)).toMatchObject({ status: 'active' });
    const logged = deliveryLines(lines);
    expect(logged.map((l) => [l.level, l.attempt, l.statusCode])).toEqual([
      [30, 1, 500],
      [40, 2, 500],
    ]);
    expect(logged[1]!.msg).toBe('delivery failed; this occurrence is skipped, the alarm stays active');
  });

  it('a router that hangs past the timeout: a retry line with no status code and the timeout', async () => {
    const { alarm } = await makeService(t.db).create(OWNER, { inSeconds: 60 }, api);
    await backdate(t.db, alarm.id, 61_000);
    const { logger, lines } = capturingLogger();
    const { dispatcher } = delivering(t.db, {
      receiver: { secrets: [newSecret()], timeoutMs: 300 },
      dispatcher: { logger },
    });
    sink.answer({ hang: true });
    expect(await dispatcher.runOnce()).toBe(1);
    expect(deliveryLines(lines)).toEqual([
      expect.objectContaining({
        level: 30,
        msg: 'delivery failed; retrying',
        alarmId: alarm.id,
        attempt: 1,
        statusCode: null,
        error: 'router timed out after 300 ms',
      }),
    ]);
  });

  it('under a storm: at most 20 retry lines per 10 s, then one summary line', async () => {
    const service = makeService(t.db);
    for (let i = 0; i < 25; i++) {
      const { alarm } = await service.create(OWNER, { inSeconds: 60 }, api);
      await backdate(t.db, alarm.id, 61_000);
    }
    const clock = new TestClock();
    const { dispatcher, lines } = dispatcherLogging(clock);
    sink.always({ status: 500 });
    expect(await dispatcher.runOnce()).toBe(25);
    expect(deliveryLines(lines)).toHaveLength(20);

    clock.advance(10_000);
    await dispatcher.runOnce();
    const logged = deliveryLines(lines);
    expect(logged).toHaveLength(21);
    expect(logged[20]).toMatchObject({
      level: 30,
      suppressed: 5,
      msg: '… and 5 more delivery retries in the last 10 s',
    });
  });
});
