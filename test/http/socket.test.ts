/**
 * Every route once over a real socket (`listen({port: 0})`, a keep-alive undici client), so what
 * `inject` skips — the listener, Content-Length, keep-alive, the body limit on the wire — is
 * exercised too.
 */
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { describeEachBackend } from '../support/backends.js';
import { backdate } from '../support/harness.js';
import { openTestApp, type TestApp } from './support.js';

describeEachBackend('HTTP over a real socket', ({ t }) => {
  let h: TestApp;
  let client: Pool;
  beforeEach(async () => {
    h = await openTestApp(t.db);
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = h.app.server.address() as AddressInfo;
    client = new Pool(`http://127.0.0.1:${port}`, { connections: 2 });
  });
  afterEach(async () => {
    await client.close();
    await h.close();
  });

  async function send(method: string, path: string, body?: string, headers: Record<string, string> = h.auth) {
    const response = await client.request({
      method: method as 'GET',
      path,
      headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      body,
    });
    const text = await response.body.text();
    return {
      status: response.statusCode,
      headers: response.headers,
      text,
      json: text && String(response.headers['content-type']).includes('json') ? JSON.parse(text) : undefined,
    };
  }

  it('serves every route of §5 on the wire', async () => {
    const created = await send(
      'POST',
      '/v1/alarms',
      '{"in_seconds": 60, "conversation_id": "wire", "payload": {"n": 12345678901234567890}}',
    );
    expect(created.status).toBe(201);
    expect(created.text).toContain('"n": 12345678901234567890');
    const id = created.json.alarm.id as string;

    expect((await send('GET', '/v1/alarms?limit=10')).json.alarms).toHaveLength(1);
    expect((await send('GET', `/v1/alarms/${id}`)).json.alarm.id).toBe(id);
    expect((await send('PATCH', `/v1/alarms/${id}`, '{"label": "renamed"}')).json.alarm.label).toBe(
      'renamed',
    );

    await backdate(t.db, id, 61_000);
    await h.service.dispatcher.runOnce();
    const wakes = await send('GET', '/v1/wakes?status=delivered');
    expect(wakes.status).toBe(200);
    const wakeId = wakes.json.wakes[0].id as string;
    expect((await send('GET', `/v1/wakes/${wakeId}`)).json.wake.status).toBe('delivered');
    const replied = await send('POST', '/v1/conversations/wire/replies', '{}');
    expect(replied.json).toEqual({ acked: [wakeId] });
    const acked = await send('POST', `/v1/wakes/${wakeId}/ack`, '{"note": "seen"}');
    expect(acked.status).toBe(200);
    expect(acked.json.wake).toMatchObject({ status: 'acknowledged', ack_inferred: true });

    const other = await send('POST', '/v1/alarms', '{"in_seconds": 600}');
    const cancelled = await send('DELETE', `/v1/alarms/${other.json.alarm.id}`);
    expect(cancelled.json.alarm.status).toBe('cancelled');

    expect((await send('GET', '/healthz', undefined, {})).status).toBe(200);
    expect((await send('GET', '/readyz', undefined, {})).status).toBe(200);
    expect((await send('GET', '/metrics', undefined, {})).text).toContain(
      'chronos_http_request_duration_seconds',
    );
    expect((await send('GET', '/openapi.json', undefined, {})).json.openapi).toBe('3.1.0');
  });

  it('refuses a body over 128 KiB with 413 on the wire, and the connection stays usable', async () => {
    const big = JSON.stringify({ in_seconds: 60, payload: { blob: 'x'.repeat(130 * 1024) } });
    const r = await send('POST', '/v1/alarms', big);
    expect(r.status).toBe(413);
    expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect((await send('GET', '/v1/alarms')).status).toBe(200);
  });

  it('takes a body sent without a JSON Content-Type (curl -d) as JSON', async () => {
    const response = await client.request({
      method: 'POST',
      path: '/v1/alarms',
      headers: { ...h.auth, 'content-type': 'application/x-www-form-urlencoded' },
      body: '{"in_seconds": 60}',
    });
    expect(response.statusCode).toBe(201);
    await response.body.dump();
  });
});
