import type { AlarmSpec } from '../../packages/chronos-timers/src/core/alarm-spec.js';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { describeEachBackend } from '../support/backends.js';
import { alarmRow, backdate, dueNow, makeService, OWNER, wakesOf } from '../support/harness.js';
import { Sink, type SinkAnswer } from '../support/sink.js';
import { attemptsOf, backoffMs, newSecret, webhookDispatcher } from './support.js';

const api = { source: 'api' } as const;
// makeDispatcher's policy: base 1 s, cap 60 s, jitter fixed at 0.5, so the n-th failure waits
// 0.75 × 2^(n-1) s.
const backoff = (failures: number) => 750 * 2 ** (failures - 1);

describeEachBackend('webhook delivery: answers, retries and the failure ceiling', ({ t }) => {
  let sink: Sink;
  const closers: (() => Promise<void>)[] = [];
  const delivering = (options: Parameters<typeof webhookDispatcher>[2] = {}) => {
    const delivery = webhookDispatcher(t.db, sink, {
      ...options,
      receiver: { secrets: [newSecret()], ...options.receiver },
    });
    closers.push(() => delivery.receiver.close());
    return delivery.dispatcher;
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

  const retryable: [string, SinkAnswer, string, number | null][] = [
    ['408', { status: 408 }, 'router answered 408 Request Timeout', 408],
    ['429', { status: 429 }, 'router answered 429 Too Many Requests', 429],
    ['500', { status: 500 }, 'router answered 500 Internal Server Error', 500],
    ['503', { status: 503 }, 'router answered 503 Service Unavailable', 503],
    ['a timeout', { hang: true }, 'router timed out after 300 ms', null],
  ];
  it.each(retryable)(
    'after %s the wake is retried with backoff under the same webhook-id, then delivered',
    async (_what, answer, error, statusCode) => {
      const alarm = await dueOnce();
      const dispatcher = delivering({ receiver: { timeoutMs: 300 } });
      sink.answer(answer, answer);

      for (let failures = 1; failures <= 2; failures++) {
        expect(await dispatcher.runOnce()).toBe(1);
        const row = await alarmRow(t.db, alarm.id);
        expect(row).toMatchObject({ status: 'active', failure_count: failures, last_error: error });
        const attempts = await attemptsOf(t.db, alarm.id);
        expect(attempts).toHaveLength(failures);
        expect(attempts[failures - 1]).toMatchObject({
          attempt: failures,
          outcome: 'retry',
          status_code: statusCode,
          error,
        });
        expect(backoffMs(row, attempts[failures - 1]!)).toBe(backoff(failures));
        // Not due again until the backoff has passed.
        expect(await dispatcher.runOnce()).toBe(0);
        await dueNow(t.db, alarm.id);
      }
      expect(await dispatcher.runOnce()).toBe(1);

      expect(sink.requests).toHaveLength(3);
      const ids = new Set(sink.requests.map((r) => r.headers['webhook-id']));
      const [wake] = await wakesOf(t.db, alarm.id);
      expect([...ids]).toEqual([wake!.id]);
      expect(sink.bodies().map((b) => b.attempt)).toEqual([1, 2, 3]);
      expect(wake).toMatchObject({ status: 'delivered', attempts: 3 });
      expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
      const attempts = await attemptsOf(t.db, alarm.id);
      expect(attempts.map((a) => [a.outcome, a.status_code])).toEqual([
        ['retry', statusCode],
        ['retry', statusCode],
        ['delivered', 200],
      ]);
    },
  );

  it('a connection closed without an answer is retried', async () => {
    const alarm = await dueOnce();
    const dispatcher = delivering();
    sink.answer({ close: true });
    await dispatcher.runOnce();
    const row = await alarmRow(t.db, alarm.id);
    expect(row.failure_count).toBe(1);
    expect(row.last_error).toMatch(/^router connection failed: UND_ERR_SOCKET/);
    await dueNow(t.db, alarm.id);
    await dispatcher.runOnce();
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
    expect(new Set(sink.requests.map((r) => r.headers['webhook-id'])).size).toBe(1);
  });

  it('a refused connection is retried, with "router unreachable" in last_error, spending none of max_failures', async () => {
    const alarm = await dueOnce({ maxFailures: 1 });
    const dispatcher = delivering();
    await sink.down();
    await dispatcher.runOnce();
    const row = await alarmRow(t.db, alarm.id);
    expect(row).toMatchObject({
      status: 'active',
      failure_count: 0,
      last_error: 'router unreachable: ECONNREFUSED',
    });
    const [attempt] = await attemptsOf(t.db, alarm.id);
    expect(attempt).toMatchObject({ outcome: 'retry', status_code: null });
    expect(backoffMs(row, attempt!)).toBe(backoff(1));
  });

  it('a Retry-After longer than the backoff is honoured (seconds and HTTP-date)', async () => {
    const alarm = await dueOnce();
    const dispatcher = delivering();
    sink.answer({ status: 429, headers: { 'retry-after': '30' } });
    await dispatcher.runOnce();
    let row = await alarmRow(t.db, alarm.id);
    expect(backoffMs(row, (await attemptsOf(t.db, alarm.id))[0]!)).toBe(30_000);

    await dueNow(t.db, alarm.id);
    const at = new Date(Date.now() + 45_000);
    at.setMilliseconds(0);
    sink.answer({ status: 503, headers: { 'retry-after': at.toUTCString() } });
    await dispatcher.runOnce();
    row = await alarmRow(t.db, alarm.id);
    expect(await attemptsOf(t.db, alarm.id)).toMatchObject([{ status_code: 429 }, { status_code: 503 }]);
    // An HTTP-date has whole seconds and is read against this host's clock: allow a second.
    expect(Math.abs((row.next_fire_at as Date).getTime() - at.getTime())).toBeLessThan(1_000);
    expect(row.failure_count).toBe(2);
  });

  it('a Retry-After shorter than the backoff does not shorten it', async () => {
    const alarm = await dueOnce();
    const dispatcher = delivering();
    sink.answer({ status: 503, headers: { 'retry-after': '0' } });
    await dispatcher.runOnce();
    const row = await alarmRow(t.db, alarm.id);
    expect(backoffMs(row, (await attemptsOf(t.db, alarm.id))[0]!)).toBe(backoff(1));
  });

  it.each([
    [400, 'Bad Request'],
    [404, 'Not Found'],
    [410, 'Gone'],
  ])('a %i answer fails the once alarm at once: recorded, not retried', async (status, reason) => {
    const alarm = await dueOnce({ maxFailures: 5 });
    const dispatcher = delivering();
    sink.answer({ status });
    expect(await dispatcher.runOnce()).toBe(1);

    const error = `router answered ${status} ${reason}`;
    expect(await alarmRow(t.db, alarm.id)).toMatchObject({
      status: 'failed',
      failure_count: 1,
      last_error: error,
    });
    expect(await wakesOf(t.db, alarm.id)).toMatchObject([
      { status: 'failed', attempts: 1, last_error: error },
    ]);
    expect(await attemptsOf(t.db, alarm.id)).toMatchObject([
      { attempt: 1, outcome: 'failed', status_code: status, error },
    ]);
    await dueNow(t.db, alarm.id);
    expect(await dispatcher.runOnce()).toBe(0);
    expect(sink.requests).toHaveLength(1);
  });

  it('a 4xx on a cron occurrence skips it: the alarm advances and stays active', async () => {
    const { alarm } = await makeService(t.db).create(OWNER, { cron: '*/5 * * * *', maxFailures: 5 }, api);
    await backdate(t.db, alarm.id, 301_000);
    const dispatcher = delivering();
    sink.answer({ status: 404 });
    await dispatcher.runOnce();
    const row = await alarmRow(t.db, alarm.id);
    expect(row).toMatchObject({
      status: 'active',
      last_error: 'router answered 404 Not Found',
      wake_id: null,
    });
    expect((row.next_fire_at as Date).getTime()).toBeGreaterThan(Date.now());
    expect(await wakesOf(t.db, alarm.id)).toMatchObject([{ status: 'failed' }]);
  });

  it('a router answering 500 forever: the once alarm ends failed with last_error after max_failures', async () => {
    const alarm = await dueOnce({ maxFailures: 3 });
    const dispatcher = delivering();
    sink.always({ status: 500, body: 'database is on fire' });
    for (let pass = 1; pass <= 3; pass++) {
      expect(await dispatcher.runOnce()).toBe(1);
      await dueNow(t.db, alarm.id);
    }
    expect(await dispatcher.runOnce()).toBe(0);

    const error = 'router answered 500 Internal Server Error: database is on fire';
    expect(await alarmRow(t.db, alarm.id)).toMatchObject({
      status: 'failed',
      failure_count: 3,
      last_error: error,
    });
    const [wake] = await wakesOf(t.db, alarm.id);
    expect(wake).toMatchObject({ status: 'failed', attempts: 3, last_error: error });
    expect((await attemptsOf(t.db, alarm.id)).map((a) => a.outcome)).toEqual(['retry', 'retry', 'failed']);
    expect(sink.withId(wake!.id as string)).toHaveLength(3);
  });

  it('a router answering 500 forever: the cron alarm skips the occurrence, advances and stays active', async () => {
    const { alarm } = await makeService(t.db).create(
      OWNER,
      { cron: '*/5 * * * *', maxFailures: 2, requireAck: false },
      api,
    );
    await backdate(t.db, alarm.id, 301_000);
    const dispatcher = delivering();
    sink.always({ status: 500 });
    await dispatcher.runOnce();
    await dueNow(t.db, alarm.id);
    await dispatcher.runOnce();

    let row = await alarmRow(t.db, alarm.id);
    expect(row).toMatchObject({
      status: 'active',
      failure_count: 0,
      last_error: 'router answered 500 Internal Server Error',
    });
    expect((row.next_fire_at as Date).getTime()).toBeGreaterThan(Date.now());
    // The next occurrence fires as a fresh wake, and is delivered once the router recovers.
    sink.always({ status: 200 });
    await backdate(t.db, alarm.id, 301_000);
    await dispatcher.runOnce();
    row = await alarmRow(t.db, alarm.id);
    expect(row.status).toBe('active');
    const wakes = await wakesOf(t.db, alarm.id);
    expect(wakes.map((w) => w.status)).toEqual(['failed', 'delivered']);
    expect(sink.requests.map((r) => r.headers['webhook-id'])).toEqual([
      wakes[0]!.id,
      wakes[0]!.id,
      wakes[1]!.id,
    ]);
  });
});
