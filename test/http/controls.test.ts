/**
 * The operator routes of §5 over a real socket: batch create, pause, resume, fire now, retry,
 * bulk cancel, an alarm's wakes, the wake filters, one wake and its attempts — each with its
 * refusals, and an SQL fingerprint that a refusal wrote nothing.
 */
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { describeEachBackend } from '../support/backends.js';
import { backdate } from '../support/harness.js';
import { libraryOn } from '../support/library.js';
import { openTestApp, OWNER, snapshot, WAKE_VIEW_KEYS, type TestApp } from './support.js';

const UNKNOWN = '2f1e8c7a-5b3d-4e8f-9a1b-6c2d3e4f5a6b';

describeEachBackend('HTTP: operator controls over a real socket', ({ t }) => {
  let h: TestApp;
  let client: Pool;
  const open = async (env: Record<string, string> = {}) => {
    h = await openTestApp(t.db, env);
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = h.app.server.address() as AddressInfo;
    client = new Pool(`http://127.0.0.1:${port}`, { connections: 2 });
  };
  beforeEach(async () => {
    await open();
  });
  afterEach(async () => {
    await client.close();
    await h.close();
  });

  async function send(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = h.auth,
  ) {
    const text = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const response = await client.request({
      method: method as 'GET',
      path,
      headers: text === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      body: text,
    });
    const answer = await response.body.text();
    return { status: response.statusCode, text: answer, json: answer ? JSON.parse(answer) : undefined };
  }

  /** Sends a request that must be refused with `status`, and checks that nothing was written. */
  async function refused(
    status: number,
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ) {
    const before = await snapshot(t.db);
    const answer = await send(method, path, body, headers);
    expect(answer.status, answer.text).toBe(status);
    expect(answer.json.status).toBe(status);
    expect(await snapshot(t.db)).toEqual(before);
    return answer.json;
  }

  const create = async (body: Record<string, unknown>) => (await send('POST', '/v1/alarms', body)).json.alarm;

  it('POST /v1/alarms/batch creates up to 1,000 at once, in order, deduping known keys', async () => {
    const existing = await create({ in_seconds: 600, idempotency_key: 'known' });
    const answer = await send(
      'POST',
      '/v1/alarms/batch',
      '{"alarms": [{"in_seconds": 60, "label": "a", "payload": {"n": 12345678901234567890}},' +
        ' {"cron": "0 9 * * *", "timezone": "Europe/Paris", "label": "b"},' +
        ' {"in_seconds": 600, "idempotency_key": "known"}]}',
    );
    expect(answer.status).toBe(201);
    expect(answer.text).toContain('"n": 12345678901234567890');
    expect(
      answer.json.results.map((r: { alarm: { label: string }; deduped: boolean }) => [
        r.alarm.label,
        r.deduped,
      ]),
    ).toEqual([
      ['a', false],
      ['b', false],
      ['', true],
    ]);
    expect(answer.json.results[2].alarm.id).toBe(existing.id);
  });

  it('POST /v1/alarms/batch refuses the whole batch for one bad item, naming it, and writes nothing', async () => {
    const body = {
      alarms: [{ in_seconds: 60 }, { in_seconds: 60 }, { in_seconds: 0 }, { in_seconds: 60, lable: 'x' }],
    };
    const problem = await refused(400, 'POST', '/v1/alarms/batch', body);
    expect(problem.errors.map((e: { path: string }) => e.path)).toEqual([
      'alarms.2.in_seconds',
      'alarms.3.lable',
    ]);
    expect(problem.errors[1].message).toMatch(/did you mean "label"\?/);
    const cron = await refused(400, 'POST', '/v1/alarms/batch', {
      alarms: [{ in_seconds: 60 }, { cron: 'every day' }],
    });
    expect(cron.errors.map((e: { path: string }) => e.path)).toEqual(['alarms.1.cron']);
    expect(cron.errors[0].message).toMatch(/^alarms\.1\.cron: expected/);
    // A meaning error (an at in the past) too, named by its item.
    const past = await refused(400, 'POST', '/v1/alarms/batch', {
      alarms: [{ in_seconds: 60 }, { at: '2020-01-01T00:00:00Z' }],
    });
    expect(past.errors.map((e: { path: string }) => e.path)).toEqual(['alarms.1.at']);
    expect((await refused(400, 'POST', '/v1/alarms/batch', { alarms: [] })).errors[0].path).toBe('alarms');
    const tooMany = { alarms: Array.from({ length: 1_001 }, () => ({ in_seconds: 60 })) };
    expect((await refused(400, 'POST', '/v1/alarms/batch', tooMany)).errors[0].message).toMatch(/1 to 1000/);
    expect((await refused(400, 'POST', '/v1/alarms/batch', { alarm: [] })).errors[0].message).toMatch(
      /did you mean "alarms"\?/,
    );
  });

  it('POST /v1/alarms/batch counts every item against the quotas: over either, 429 and nothing written', async () => {
    await client.close();
    await h.close();
    await open({ CHRONOS_MAX_ACTIVE_ALARMS: '3', CHRONOS_CREATE_RATE: '0' });
    const batch = (n: number) => ({ alarms: Array.from({ length: n }, (_, i) => ({ in_seconds: 60 + i })) });
    expect((await refused(429, 'POST', '/v1/alarms/batch', batch(4))).limit).toBe('max_active_alarms');
    expect((await send('POST', '/v1/alarms/batch', batch(3))).status).toBe(201);
    expect((await refused(429, 'POST', '/v1/alarms/batch', batch(1))).limit).toBe('max_active_alarms');
    await client.close();
    await h.close();
    await open({ CHRONOS_MAX_ACTIVE_ALARMS: '0', CHRONOS_CREATE_RATE: '5' });
    expect((await refused(429, 'POST', '/v1/alarms/batch', batch(6))).limit).toBe('create_rate');
  });

  it('pause, resume: 200 with the alarm (again on one already so); 409 when finished; 404 for another owner', async () => {
    const alarm = await create({ cron: '*/5 * * * *' });
    const paused = await send('POST', `/v1/alarms/${alarm.id}/pause`);
    expect(paused.status).toBe(200);
    expect(paused.json.alarm.status).toBe('paused');
    expect(paused.json.alarm.next_fire_at).toBeUndefined();
    expect((await send('POST', `/v1/alarms/${alarm.id}/pause`)).json.alarm.status).toBe('paused');
    expect(
      (await send('GET', '/v1/alarms?status=paused')).json.alarms.map((a: { id: string }) => a.id),
    ).toEqual([alarm.id]);
    // PATCH edits a paused alarm, which stays paused.
    const edited = await send('PATCH', `/v1/alarms/${alarm.id}`, { label: 'held' });
    expect(edited.json.alarm).toMatchObject({ status: 'paused', label: 'held' });
    await backdate(t.db, alarm.id, 3_600_000);
    expect(await h.service.dispatcher.runOnce()).toBe(0);

    await refused(404, 'POST', `/v1/alarms/${alarm.id}/pause`, undefined, h.otherAuth);
    await refused(404, 'POST', `/v1/alarms/${UNKNOWN}/resume`);
    expect(
      (await refused(400, 'POST', `/v1/alarms/${alarm.id}/resume`, { now: true })).errors[0].message,
    ).toMatch(/now: unknown field; send an empty object \{\}/);

    const resumed = await send('POST', `/v1/alarms/${alarm.id}/resume`);
    expect(resumed.json.alarm.status).toBe('active');
    expect(Date.parse(resumed.json.alarm.next_fire_at)).toBeGreaterThan(Date.now());
    expect((await send('POST', `/v1/alarms/${alarm.id}/resume`)).status).toBe(200);

    await send('DELETE', `/v1/alarms/${alarm.id}`);
    expect((await refused(409, 'POST', `/v1/alarms/${alarm.id}/pause`)).detail).toMatch(
      /is cancelled; only an active alarm can be paused/,
    );
    expect((await refused(409, 'POST', `/v1/alarms/${alarm.id}/resume`)).detail).toMatch(
      /only a paused alarm can be resumed/,
    );
  });

  it('fire: 202 and one extra delivery now with trigger manual; the schedule is not moved; 409 when finished', async () => {
    const alarm = await create({ cron: '0 9 * * *', require_ack: false });
    const fired = await send('POST', `/v1/alarms/${alarm.id}/fire`);
    expect(fired.status).toBe(202);
    expect(await h.service.dispatcher.runOnce()).toBe(1);
    expect(h.receiver.fires.map((f) => f.trigger)).toEqual(['manual']);
    const after = (await send('GET', `/v1/alarms/${alarm.id}`)).json.alarm;
    expect(after.next_fire_at).toBe(alarm.next_fire_at);
    expect(after.last_fired_at).toBeDefined();

    const once = await create({ in_seconds: 600 });
    await send('POST', `/v1/alarms/${once.id}/fire`);
    await h.service.dispatcher.runOnce();
    expect((await send('GET', `/v1/alarms/${once.id}`)).json.alarm.status).toBe('fired');
    expect((await refused(409, 'POST', `/v1/alarms/${once.id}/fire`)).detail).toMatch(/has already fired/);
    await refused(404, 'POST', `/v1/alarms/${alarm.id}/fire`, undefined, h.otherAuth);
  });

  it('retry: a failed alarm becomes active with no failures, due now; 409 otherwise', async () => {
    const alarm = await create({ in_seconds: 60, max_failures: 1 });
    await backdate(t.db, alarm.id, 61_000);
    h.receiver.behave = () => ({ ok: false, retryable: true, error: 'router answered 500' });
    await h.service.dispatcher.runOnce();
    expect((await send('GET', `/v1/alarms/${alarm.id}`)).json.alarm).toMatchObject({
      status: 'failed',
      failure_count: 1,
      last_error: 'router answered 500',
    });
    const retried = await send('POST', `/v1/alarms/${alarm.id}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.json.alarm).toMatchObject({ status: 'active', failure_count: 0 });
    expect(retried.json.alarm.last_error).toBeUndefined();
    h.receiver.behave = () => ({ ok: true });
    expect(await h.service.dispatcher.runOnce()).toBe(1);
    expect((await refused(409, 'POST', `/v1/alarms/${alarm.id}/retry`)).detail).toMatch(
      /has already fired; only a failed alarm can be retried/,
    );
  });

  it('max_active_alarms counts paused alarms, and a retry is refused 429 when the owner is at it', async () => {
    await client.close();
    await h.close();
    await open({ CHRONOS_MAX_ACTIVE_ALARMS: '2', CHRONOS_CREATE_RATE: '0' });
    const failing = await create({ in_seconds: 60, max_failures: 1 });
    await backdate(t.db, failing.id, 61_000);
    h.receiver.behave = () => ({ ok: false, retryable: true, error: 'router answered 500' });
    await h.service.dispatcher.runOnce();
    const held = await create({ cron: '@hourly' });
    await send('POST', `/v1/alarms/${held.id}/pause`);
    await create({ in_seconds: 600 });
    // Two live alarms, one of them paused: no room for a third, created or retried.
    expect((await refused(429, 'POST', '/v1/alarms', { in_seconds: 60 })).limit).toBe('max_active_alarms');
    const refusedRetry = await refused(429, 'POST', `/v1/alarms/${failing.id}/retry`);
    expect(refusedRetry).toMatchObject({ limit: 'max_active_alarms' });
    expect(refusedRetry.detail).toMatch(/at most 2 active or paused alarms per owner/);
    // Cancelling the paused one makes room: the retry goes through.
    await send('DELETE', `/v1/alarms/${held.id}`);
    expect((await send('POST', `/v1/alarms/${failing.id}/retry`)).json.alarm.status).toBe('active');
  });

  it('POST /v1/alarms/bulk-cancel cancels the owner’s active and paused alarms matching every filter', async () => {
    const a = await create({ in_seconds: 600, label: 'runaway', conversation_id: 'c1' });
    const b = await create({ in_seconds: 600, label: 'runaway', conversation_id: 'c2' });
    const c = await create({ cron: '@hourly', label: 'runaway', conversation_id: 'c1' });
    await send('POST', `/v1/alarms/${c.id}/pause`);
    const keep = await create({ in_seconds: 600, label: 'keep', conversation_id: 'c1' });
    const theirs = (await send('POST', '/v1/alarms', { in_seconds: 600, label: 'runaway' }, h.otherAuth)).json
      .alarm;

    expect(
      (await send('POST', '/v1/alarms/bulk-cancel', { label: 'runaway', conversation_id: 'c1' })).json,
    ).toEqual({
      cancelled: 2,
    });
    const status = async (id: string, headers = h.auth) =>
      (await send('GET', `/v1/alarms/${id}`, undefined, headers)).json.alarm.status;
    expect([await status(a.id), await status(b.id), await status(c.id), await status(keep.id)]).toEqual([
      'cancelled',
      'active',
      'cancelled',
      'active',
    ]);
    expect(await status(theirs.id, h.otherAuth)).toBe('active');
    expect((await send('POST', '/v1/alarms/bulk-cancel', { ids: [b.id, theirs.id, UNKNOWN] })).json).toEqual({
      cancelled: 1,
    });
    expect(await status(theirs.id, h.otherAuth)).toBe('active');
    // The owner's library timers are its alarms too (migration 0016 reaches them by their keys).
    const chronos = await libraryOn(t);
    const timer = await chronos.schedule(null, { key: 'app:1', inSeconds: 600, owner: OWNER.did });
    await chronos.close();
    expect((await send('POST', '/v1/alarms/bulk-cancel', { ids: [timer.id, keep.id] })).json).toEqual({
      cancelled: 2,
    });
    expect(await status(timer.id)).toBe('cancelled');

    expect((await refused(400, 'POST', '/v1/alarms/bulk-cancel', {})).detail).toMatch(
      /at least one of "ids", "label" or "conversation_id"/,
    );
    expect((await refused(400, 'POST', '/v1/alarms/bulk-cancel', { ids: ['nope'] })).errors[0].path).toBe(
      'ids',
    );
    const many = { ids: Array.from({ length: 1_001 }, () => UNKNOWN) };
    expect((await refused(400, 'POST', '/v1/alarms/bulk-cancel', many)).errors[0].message).toMatch(
      /1 to 1000/,
    );
  });

  it('an alarm’s wakes, the wake filters, one wake and its attempts', async () => {
    const alarm = await create({
      cron: '*/5 * * * *',
      conversation_id: 'conv-x',
      label: 'watch',
      wake_message: 'look',
    });
    const other = await create({ in_seconds: 60, conversation_id: 'conv-y' });
    await backdate(t.db, alarm.id, 301_000);
    await backdate(t.db, other.id, 61_000);
    h.receiver.behave = (fire) =>
      fire.alarm.id === other.id && fire.attempt === 1
        ? { ok: false, retryable: true, error: 'router answered 503', statusCode: 503 }
        : { ok: true, statusCode: 204 };
    await h.service.dispatcher.runOnce();
    await backdate(t.db, other.id, 60_000);
    await h.service.dispatcher.runOnce();

    const wakes = await send('GET', `/v1/alarms/${alarm.id}/wakes`);
    expect(wakes.status).toBe(200);
    expect(wakes.json.wakes).toHaveLength(1);
    const wake = wakes.json.wakes[0];
    expect(Object.keys(wake)).toEqual(WAKE_VIEW_KEYS);
    expect(wake).toMatchObject({
      alarm_id: alarm.id,
      label: 'watch',
      wake_message: 'look',
      status: 'delivered',
    });
    expect(wake.lateness_ms).toBeGreaterThanOrEqual(1_000);
    await refused(404, 'GET', `/v1/alarms/${alarm.id}/wakes`, undefined, h.otherAuth);
    await refused(404, 'GET', `/v1/alarms/${UNKNOWN}/wakes`);

    const byConversation = await send('GET', '/v1/wakes?conversation_id=conv-y');
    expect(byConversation.json.wakes.map((w: { alarm_id: string }) => w.alarm_id)).toEqual([other.id]);
    const combined = await send('GET', `/v1/wakes?status=delivered&alarm_id=${alarm.id}`);
    expect(combined.json.wakes).toHaveLength(1);
    expect((await send('GET', `/v1/wakes?status=acknowledged&alarm_id=${alarm.id}`)).json.wakes).toEqual([]);
    expect((await send('GET', '/v1/wakes?alarm_id=not-a-uuid')).json.wakes).toEqual([]);
    expect((await refused(400, 'GET', '/v1/wakes?alarm=x')).errors[0].message).toMatch(
      /unknown query parameter/,
    );

    const otherWake = byConversation.json.wakes[0];
    expect((await send('GET', `/v1/wakes/${otherWake.id}`)).json.wake.id).toBe(otherWake.id);
    const attempts = await send('GET', `/v1/wakes/${otherWake.id}/attempts`);
    expect(attempts.status).toBe(200);
    expect(attempts.json.attempts).toHaveLength(2);
    expect(attempts.json.attempts[0]).toMatchObject({
      attempt: 1,
      outcome: 'retry',
      status_code: 503,
      error: 'router answered 503',
    });
    expect(Object.keys(attempts.json.attempts[0])).toEqual([
      'attempt',
      'started_at',
      'finished_at',
      'outcome',
      'status_code',
      'error',
      'duration_ms',
    ]);
    expect(attempts.json.attempts[1]).toMatchObject({
      attempt: 2,
      outcome: 'delivered',
      status_code: 204,
      error: null,
    });
    expect(
      Date.parse(attempts.json.attempts[1].finished_at) - Date.parse(attempts.json.attempts[1].started_at),
    ).toBe(attempts.json.attempts[1].duration_ms);
    await refused(404, 'GET', `/v1/wakes/${otherWake.id}/attempts`, undefined, h.otherAuth);
    await refused(404, 'GET', `/v1/wakes/${UNKNOWN}/attempts`);
  });

  it('every new route answers 401 without a key, before reading anything', async () => {
    for (const [method, path] of [
      ['POST', '/v1/alarms/batch'],
      ['POST', `/v1/alarms/${UNKNOWN}/pause`],
      ['POST', `/v1/alarms/${UNKNOWN}/resume`],
      ['POST', `/v1/alarms/${UNKNOWN}/fire`],
      ['POST', `/v1/alarms/${UNKNOWN}/retry`],
      ['POST', '/v1/alarms/bulk-cancel'],
      ['GET', `/v1/alarms/${UNKNOWN}/wakes`],
      ['GET', `/v1/wakes/${UNKNOWN}/attempts`],
    ] as const) {
      await refused(401, method, path, undefined, {});
    }
  });
});
