import { afterEach, beforeEach, expect, it } from 'vitest';
import { createAlarmSchema } from '../../packages/chronos-timers/src/wire/alarm-input.js';
import { describeEachBackend } from '../support/backends.js';
import { backdate } from '../support/harness.js';
import { call, isProblem, OPERATOR_TOKEN, openTestApp, OTHER, type TestApp } from './support.js';

describeEachBackend('HTTP: operations', ({ kind, t }) => {
  let h: TestApp;
  beforeEach(async () => {
    h = await openTestApp(t.db, {}, { captureLogs: true });
  });
  afterEach(async () => {
    await h.close();
  });

  it('/healthz and /readyz need no credentials; /readyz turns 503 once the app is closing', async () => {
    expect(await call(h.app, 'GET', '/healthz')).toMatchObject({ status: 200, body: { status: 'ok' } });
    expect(await call(h.app, 'GET', '/readyz')).toMatchObject({ status: 200, body: { status: 'ready' } });
    h.app.markClosing();
    expect(await call(h.app, 'GET', '/readyz')).toMatchObject({
      status: 503,
      body: { status: 'not ready', reason: 'shutting down' },
    });
  });

  it('/readyz names the PostgreSQL host in use (none on the embedded store)', async () => {
    const { body } = await call(h.app, 'GET', '/readyz');
    if (kind === 'pglite') {
      expect(body).toEqual({ status: 'ready' });
      return;
    }
    const url = new URL(t.url!);
    const host = `${url.hostname}:${url.port || 5432}`;
    expect(body).toEqual({
      status: 'ready',
      database: { host, hosts: [host], target_session_attrs: 'any', host_changes: 0, last_error: null },
    });
  });

  it('/metrics exports alarms by status, deliveries, lateness and HTTP latency by route', async () => {
    const created = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 60 } });
    await call(h.app, 'GET', `/v1/alarms/${created.body.alarm.id}`, { headers: h.auth });
    await backdate(t.db, created.body.alarm.id, 61_000);
    await h.service.dispatcher.runOnce();
    const r = await call(h.app, 'GET', '/metrics');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toMatch(/^text\/plain/);
    expect(r.text).toMatch(/^chronos_alarms\{status="fired"\} 1$/m);
    expect(r.text).toMatch(/^chronos_deliveries_total\{outcome="delivered"\} 1$/m);
    expect(r.text).toMatch(/^chronos_lateness_seconds_count 1$/m);
    expect(r.text).toMatch(
      /^chronos_http_request_duration_seconds_count\{method="POST",route="\/v1\/alarms",status_code="201"\} 1$/m,
    );
    expect(r.text).toMatch(/route="\/v1\/alarms\/:id",status_code="200"/);
  });

  it('/openapi.json describes every route, with the request schemas generated from the zod ones', async () => {
    const r = await call(h.app, 'GET', '/openapi.json');
    expect(r.status).toBe(200);
    const doc = r.body;
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual(
      [
        '/v1/alarms',
        '/v1/alarms/{id}',
        '/v1/alarms/batch',
        '/v1/alarms/bulk-cancel',
        '/v1/alarms/{id}/pause',
        '/v1/alarms/{id}/resume',
        '/v1/alarms/{id}/fire',
        '/v1/alarms/{id}/retry',
        '/v1/alarms/{id}/wakes',
        '/v1/alarms/{id}/next-fires',
        '/v1/schedules/preview',
        '/v1/stats/lateness',
        '/v1/stats/upcoming',
        '/v1/wakes',
        '/v1/wakes/{id}',
        '/v1/wakes/{id}/attempts',
        '/v1/wakes/{id}/ack',
        '/v1/conversations/{conversation_id}/replies',
        '/healthz',
        '/readyz',
        '/metrics',
        '/openapi.json',
      ].sort(),
    );
    const create = doc.components.schemas.CreateAlarm;
    expect(Object.keys(create.properties).sort()).toEqual(Object.keys(createAlarmSchema.shape).sort());
    expect(create.additionalProperties).toBe(false);
    expect(create.properties.in_seconds).toMatchObject({ type: 'integer', minimum: 1, maximum: 315_360_000 });
    expect(doc.components.schemas.AckWake.required).toEqual(['note']);
    expect(Object.keys(doc.components.schemas.Alarm.properties)).toContain('next_fire_at');
    expect(Object.keys(doc.webhooks).sort()).toEqual(
      ['alarm.fired', 'alarm.nudge', 'schedule.changed', 'wake.acknowledged', 'wake.escalated'].sort(),
    );
    expect(doc.components.schemas.WakeBody.required).toEqual(
      expect.arrayContaining(['require_ack', 'trigger', 'instructions']),
    );
    expect(doc.paths['/v1/alarms/{id}/fire'].post.responses['202']).toBeDefined();
  });

  it('every answer carries a request id: the caller’s own when sane, a fresh one otherwise', async () => {
    const given = await h.app.inject({
      method: 'GET',
      url: '/healthz',
      headers: { 'x-request-id': 'trace-42' },
    });
    expect(given.headers['x-request-id']).toBe('trace-42');
    const odd = await h.app.inject({
      method: 'GET',
      url: '/healthz',
      headers: { 'x-request-id': 'bad id\twith space' },
    });
    expect(odd.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const problem = await call(h.app, 'GET', '/v1/alarms', { headers: { 'x-request-id': 'trace-43' } });
    expect(problem.body.request_id).toBe('trace-43');
    const line = h.logs.find((l) => l.includes('"reqId":"trace-43"'));
    expect(line).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({
      statusCode: 401,
      route: '/v1/alarms',
      msg: 'request completed',
    });
  });

  it('an unexpected error is a bland 500, logged with its cause and request id', async () => {
    h.service.alarms.get = async () => {
      throw new Error('boom: internal detail');
    };
    const r = await call(h.app, 'GET', '/v1/alarms/c0ffee00-0000-4000-8000-000000000000', {
      headers: { ...h.auth, 'x-request-id': 'trace-500' },
    });
    expect(isProblem(r, 500)).toBe(true);
    expect(r.text).not.toContain('boom');
    expect(r.body.request_id).toBe('trace-500');
    const logged = h.logs.map((l) => JSON.parse(l)).find((l) => l.reqId === 'trace-500' && l.level === 50);
    expect(logged?.err?.message).toBe('boom: internal detail');
    expect(logged?.err?.stack).toMatch(/boom/);
  });

  it('no API key or operator token appears in any log line', async () => {
    const wrongKey = 'chronos_' + 'Z'.repeat(43);
    const requests = [
      call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 60 } }),
      call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { bogus: true } }),
      call(h.app, 'GET', '/v1/alarms', { headers: { authorization: `Bearer ${wrongKey}` } }),
      call(h.app, 'GET', '/v1/alarms', { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } }),
      call(h.app, 'GET', '/v1/alarms', {
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'x-chronos-owner': OTHER.did },
      }),
      call(h.app, 'GET', '/v1/alarms', { headers: { ...h.auth, 'x-chronos-owner': OTHER.did } }),
      call(h.app, 'GET', `/v1/alarms?cursor=${h.ownerKey}`, { headers: h.otherAuth }),
    ];
    for (const r of await Promise.all(requests)) expect(r.status).toBeLessThan(500);
    expect(h.logs.length).toBeGreaterThanOrEqual(requests.length);
    const everything = h.logs.join('\n');
    expect(everything).not.toContain(OPERATOR_TOKEN);
    expect(everything).not.toContain(wrongKey);
    expect(everything).not.toContain(h.otherKey);
    // Even a key misplaced into a query string is scrubbed from the logged URL.
    expect(everything).not.toContain(h.ownerKey);
    expect(everything).toContain('cursor=chronos_[redacted]');
    expect(everything).not.toMatch(/authorization/i);
  });
});
