/**
 * `/mcp` authenticates like the API (before any MCP handling) and scopes every tool to the
 * caller's owner: another owner's ids answer exactly like missing ones.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { describeEachBackend } from '../support/backends.js';
import {
  fire,
  httpClient,
  ok,
  openMcpServer,
  OPERATOR_TOKEN,
  OTHER,
  OWNER,
  refused,
  type McpTestServer,
} from './support.js';

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

const withoutServerTime = (text: string) => text.replace(/\nserver_time: .*$/, '');

describeEachBackend('MCP authentication and owners', ({ t }) => {
  let server: McpTestServer;
  const clients: Client[] = [];
  beforeEach(async () => {
    server = await openMcpServer(t.db);
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await server.close();
  });

  async function connect(headers: Record<string, string>): Promise<Client> {
    const client = await httpClient(server.url, headers);
    clients.push(client);
    return client;
  }

  async function post(headers: Record<string, string>, method = 'POST') {
    const response = await fetch(new URL('/mcp', server.url), {
      method,
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...headers,
      },
      body: method === 'POST' ? INITIALIZE : undefined,
    });
    return { status: response.status, headers: response.headers, body: (await response.json()) as any };
  }

  it('answers 401 without a token or with a bad one, before any MCP handling', async () => {
    for (const headers of [
      {} as Record<string, string>,
      { authorization: 'Bearer chronos_notakeynotakeynotakeynotakeynotakeynotakeyn' },
      { authorization: `Bearer ${server.ownerKey}x` },
      { authorization: 'Basic dXNlcjpwYXNz' },
    ]) {
      for (const method of ['POST', 'GET', 'DELETE']) {
        const answer = await post(headers, method);
        expect(answer.status).toBe(401);
        expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        expect(answer.headers.get('www-authenticate')).toBe('Bearer realm="chronos"');
        expect(answer.body).toMatchObject({ status: 401, code: 'unauthorized' });
        expect(answer.body).not.toHaveProperty('jsonrpc');
      }
    }
    await expect(httpClient(server.url, {})).rejects.toThrow(/401/);
    await expect(httpClient(server.url, { authorization: 'Bearer nope' })).rejects.toThrow(/401/);
  });

  it('answers an initialize with a valid key, and 405 to GET and DELETE (stateless: no stream, no session)', async () => {
    const auth = { authorization: `Bearer ${server.ownerKey}` };
    const answer = await post(auth);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('mcp-session-id')).toBeNull();
    expect(answer.headers.get('x-request-id')).toEqual(expect.any(String));
    expect(answer.body.result.serverInfo).toMatchObject({ name: 'chronos' });
    expect(answer.body.result.instructions).toMatch(/ack_wake/);
    for (const method of ['GET', 'DELETE']) {
      const refusedAnswer = await post(auth, method);
      expect(refusedAnswer.status).toBe(405);
      expect(refusedAnswer.headers.get('allow')).toBe('POST');
      expect(refusedAnswer.body.error.message).toMatch(/stateless/);
    }
  });

  it('counts and logs /mcp requests like any other route', async () => {
    await post({ authorization: `Bearer ${server.ownerKey}` });
    const metrics = await (await fetch(new URL('/metrics', server.url))).text();
    expect(metrics).toMatch(
      /chronos_http_request_duration_seconds_count\{[^}]*route="\/mcp"[^}]*status_code="200"/,
    );
  });

  it('another owner’s alarms and wakes answer exactly like missing ones', async () => {
    const mine = await connect({ authorization: `Bearer ${server.ownerKey}` });
    const theirs = await connect({ authorization: `Bearer ${server.otherKey}` });
    const { alarm } = await ok(mine, 'schedule_alarm', { in_seconds: 60, label: 'mine' });
    const wakeId = await fire(server, t.db, (await ok(mine, 'schedule_alarm', { in_seconds: 60 })).alarm.id);
    const missing = '5f0c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10';

    expect((await ok(theirs, 'list_alarms', {})).alarms).toEqual([]);
    for (const [tool, args] of [
      ['get_alarm', {}],
      ['cancel_alarm', {}],
      ['reschedule_alarm', { in_seconds: 600 }],
    ] as const) {
      const foreign = await refused(theirs, tool, { id: alarm.id, ...args });
      expect(withoutServerTime(foreign)).toBe(
        withoutServerTime(await refused(theirs, tool, { id: missing, ...args })),
      );
    }
    const foreignWake = await refused(theirs, 'ack_wake', { wake_id: wakeId, note: 'not mine' });
    expect(withoutServerTime(foreignWake)).toBe(
      withoutServerTime(await refused(theirs, 'ack_wake', { wake_id: missing, note: 'not mine' })),
    );
    // Nothing was changed by the other owner.
    expect((await ok(mine, 'get_alarm', { id: alarm.id })).alarm).toMatchObject({
      status: 'active',
      label: 'mine',
    });
    expect((await ok(mine, 'ack_wake', { wake_id: wakeId, note: 'mine' })).wake.ack_note).toBe('mine');
  });

  it('the operator token acts for the owner named by X-Chronos-Owner, and only for that owner', async () => {
    const asOwner = await connect({
      authorization: `Bearer ${OPERATOR_TOKEN}`,
      'x-chronos-owner': OWNER.did,
    });
    const asOther = await connect({
      authorization: `Bearer ${OPERATOR_TOKEN}`,
      'x-chronos-owner': OTHER.did,
    });
    const byKey = await connect({ authorization: `Bearer ${server.ownerKey}` });

    const { alarm } = await ok(asOwner, 'schedule_alarm', { in_seconds: 60, label: 'via operator' });
    expect((await ok(byKey, 'get_alarm', { id: alarm.id })).alarm.label).toBe('via operator');
    expect((await ok(asOther, 'list_alarms', {})).alarms).toEqual([]);
    expect(await refused(asOther, 'cancel_alarm', { id: alarm.id })).toMatch(
      /^no alarm with that id for you/,
    );

    expect((await post({ authorization: `Bearer ${OPERATOR_TOKEN}` })).status).toBe(400);
    expect(
      (await post({ authorization: `Bearer ${OPERATOR_TOKEN}`, 'x-chronos-owner': 'did:nope' })).status,
    ).toBe(400);
    const forbidden = await post({
      authorization: `Bearer ${server.ownerKey}`,
      'x-chronos-owner': OTHER.did,
    });
    expect(forbidden.status).toBe(403);
  });

  it('serves clients of different owners at once without mixing their answers', async () => {
    const mine = await connect({ authorization: `Bearer ${server.ownerKey}` });
    const theirs = await connect({ authorization: `Bearer ${server.otherKey}` });
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        ok(i % 2 === 0 ? mine : theirs, 'schedule_alarm', {
          in_seconds: 60,
          label: i % 2 === 0 ? 'mine' : 'theirs',
        }),
      ),
    );
    const [a, b] = await Promise.all([ok(mine, 'list_alarms', {}), ok(theirs, 'list_alarms', {})]);
    expect(a.alarms.map((x: { label: string }) => x.label)).toEqual(Array(5).fill('mine'));
    expect(b.alarms.map((x: { label: string }) => x.label)).toEqual(Array(5).fill('theirs'));
  });
});
