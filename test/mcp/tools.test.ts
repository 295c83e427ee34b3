/**
 * Every tool through the SDK's Client over Streamable HTTP on a real socket: the answers (the
 * HTTP answer plus server_time, held to the tools' output schemas by the test and by the SDK
 * client itself), next_fires, and what each refusal tells the model.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import {
  ALARM_VIEW_KEYS,
  callTool,
  fire,
  httpClient,
  ok,
  openMcpServer,
  refused,
  RFC3339_MS,
  textOf,
  type McpTestServer,
} from './support.js';

const alarmRow = sql(
  'test_mcp_alarm_row',
  'SELECT source, require_ack, payload::text AS payload FROM chronos.alarms WHERE id = $1',
);

describeEachBackend('MCP tools over Streamable HTTP', ({ t }) => {
  let server: McpTestServer;
  let client: Client;
  beforeEach(async () => {
    server = await openMcpServer(t.db);
    client = await httpClient(server.url, { authorization: `Bearer ${server.ownerKey}` });
  });
  afterEach(async () => {
    await client.close();
    await server.close();
  });

  it('lists the ten tools with descriptions, examples, schemas and truthful annotations', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual([
      'schedule_alarm',
      'list_alarms',
      'get_alarm',
      'reschedule_alarm',
      'cancel_alarm',
      'pause_alarm',
      'resume_alarm',
      'list_wakes',
      'ack_wake',
      'preview_schedule',
    ]);
    for (const tool of tools) {
      expect(tool.description).toContain('Example: {');
      expect(tool.outputSchema?.properties).toHaveProperty('server_time');
      expect(tool.inputSchema.additionalProperties).toBe(false);
      expect(tool.annotations?.openWorldHint).toBe(false);
    }
    const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
    expect(Object.keys(byName.schedule_alarm!.inputSchema.properties!)).toEqual(
      expect.arrayContaining(['at', 'in_seconds', 'cron', 'timezone', 'wake_message', 'idempotency_key']),
    );
    expect(byName.schedule_alarm!.description).toMatch(/in_seconds: relative/);
    expect(byName.schedule_alarm!.description).toMatch(/at: absolute, RFC 3339 with/);
    expect(byName.schedule_alarm!.description).toMatch(/IANA zone the user lives in/);
    expect(byName.schedule_alarm!.description).toMatch(/idempotency_key.*retry.*is safe/s);
    expect(byName.schedule_alarm!.description).toMatch(/wake_message as instructions to your future self/);
    expect(byName.get_alarm!.inputSchema.required).toEqual(['id']);
    expect(byName.ack_wake!.inputSchema.required).toEqual(['wake_id', 'note']);
    expect(byName.list_alarms!.annotations).toMatchObject({ readOnlyHint: true });
    expect(byName.get_alarm!.annotations).toMatchObject({ readOnlyHint: true });
    expect(byName.cancel_alarm!.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: true,
    });
    expect(byName.schedule_alarm!.annotations).toMatchObject({
      destructiveHint: false,
      idempotentHint: false,
    });
    expect(byName.ack_wake!.annotations).toMatchObject({ destructiveHint: false, idempotentHint: true });
    expect(byName.list_wakes!.annotations).toMatchObject({ readOnlyHint: true });
    expect(byName.pause_alarm!.annotations).toMatchObject({ destructiveHint: false, idempotentHint: true });
    expect(byName.pause_alarm!.description).toMatch(/instead of cancelling, which is final/);
    expect(byName.resume_alarm!.description).toMatch(/not fired/);
    expect(Object.keys(byName.list_wakes!.inputSchema.properties!)).toEqual(
      expect.arrayContaining(['status', 'alarm_id']),
    );
  });

  it('schedule_alarm answers {alarm, deduped, next_fires, server_time}, made with source mcp', async () => {
    const before = Date.now();
    const answer = await ok(client, 'schedule_alarm', {
      in_seconds: 600,
      label: 'tea',
      wake_message: 'Tell the user the tea is ready.',
      conversation_id: 'conv-1',
    });
    expect(Object.keys(answer).sort()).toEqual(['alarm', 'deduped', 'next_fires', 'server_time']);
    expect(answer.deduped).toBe(false);
    expect(answer.server_time).toMatch(RFC3339_MS);
    const { alarm } = answer;
    expect(ALARM_VIEW_KEYS).toEqual(expect.arrayContaining(Object.keys(alarm)));
    expect(alarm).toMatchObject({
      label: 'tea',
      kind: 'once',
      timezone: 'UTC',
      status: 'active',
      wake_message: 'Tell the user the tea is ready.',
      conversation_id: 'conv-1',
      payload: {},
      require_ack: true,
    });
    const due = Date.parse(alarm.next_fire_at);
    expect(due).toBeGreaterThanOrEqual(before + 600_000 - 5_000);
    expect(answer.next_fires).toEqual([
      { utc: alarm.next_fire_at, local: alarm.next_fire_at.replace('Z', '+00:00') },
    ]);
    const [row] = await t.db.query<{ source: string; require_ack: boolean }>(alarmRow, [alarm.id]);
    expect(row).toMatchObject({ source: 'mcp', require_ack: true });
  });

  it('a cron in Europe/Paris shows its next fires with the zone offsets of winter and summer', async () => {
    const { alarm, next_fires } = await ok(client, 'schedule_alarm', {
      cron: '0 9 1 1,7 *',
      timezone: 'Europe/Paris',
    });
    expect(alarm).toMatchObject({ kind: 'cron', cron_expr: '0 9 1 1,7 *', timezone: 'Europe/Paris' });
    expect(next_fires).toHaveLength(3);
    expect(next_fires[0].utc).toBe(alarm.next_fire_at);
    const offsets = new Set<string>();
    for (const { utc, local } of next_fires) {
      expect(utc).toMatch(RFC3339_MS);
      expect(local).toMatch(/^\d{4}-(01|07)-01T09:00:00\.000\+0[12]:00$/);
      expect(Date.parse(local)).toBe(Date.parse(utc));
      offsets.add(local.slice(-6));
      expect(local.slice(5, 7) === '01' ? '+01:00' : '+02:00').toBe(local.slice(-6));
    }
    expect([...offsets].sort()).toEqual(['+01:00', '+02:00']);
  });

  it('preview_schedule shows an rrule in its zone and writes nothing; schedule_alarm takes the same rule', async () => {
    const rule = 'FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0';
    const preview = await ok(client, 'preview_schedule', {
      rrule: rule,
      timezone: 'Europe/Paris',
      starts_at: '2030-01-01T00:00:00+01:00',
      count: 3,
    });
    expect(Object.keys(preview).sort()).toEqual(['fires', 'server_time']);
    // The last Fridays of January, February and March 2030, 17:00 in Paris (CET: summer time starts on the 31st).
    expect(preview.fires).toEqual([
      { utc: '2030-01-25T16:00:00.000Z', local: '2030-01-25T17:00:00.000+01:00' },
      { utc: '2030-02-22T16:00:00.000Z', local: '2030-02-22T17:00:00.000+01:00' },
      { utc: '2030-03-29T16:00:00.000Z', local: '2030-03-29T17:00:00.000+01:00' },
    ]);
    expect((await ok(client, 'list_alarms', {})).alarms).toHaveLength(0);
    expect(await refused(client, 'preview_schedule', { rrule: 'FREQ=DAILY;BYHOUR=25' })).toMatch(
      /rrule.*BYHOUR=25: hours are 0 to 23/,
    );

    const { alarm, next_fires } = await ok(client, 'schedule_alarm', {
      rrule: rule,
      timezone: 'Europe/Paris',
      starts_at: '2030-01-01T00:00:00+01:00',
      jitter_seconds: 60,
      expires_after_seconds: 3600,
    });
    expect(alarm).toMatchObject({
      kind: 'rrule',
      rrule: rule,
      jitter_seconds: 60,
      expires_after_seconds: 3600,
    });
    // Each due instant is its occurrence plus a jitter under a minute.
    preview.fires.forEach((f: { utc: string }, i: number) => {
      const offset = Date.parse(next_fires[i].utc) - Date.parse(f.utc);
      expect(offset).toBeGreaterThanOrEqual(0);
      expect(offset).toBeLessThan(60_000);
    });
    // reschedule_alarm clears the jitter with null: due on the occurrences themselves.
    const cleared = await ok(client, 'reschedule_alarm', { id: alarm.id, jitter_seconds: null });
    expect(cleared.alarm).not.toHaveProperty('jitter_seconds');
    expect(cleared.next_fires.map((f: { utc: string }) => f.utc)).toEqual(
      preview.fires.map((f: { utc: string }) => f.utc),
    );
  });

  it('an idempotency_key makes a repeated schedule_alarm return the same alarm, deduped', async () => {
    const first = await ok(client, 'schedule_alarm', { in_seconds: 60, idempotency_key: 'k-1' });
    const again = await ok(client, 'schedule_alarm', { in_seconds: 120, idempotency_key: 'k-1' });
    expect(again.deduped).toBe(true);
    expect(again.alarm).toEqual(first.alarm);
    expect((await ok(client, 'list_alarms', {})).alarms).toHaveLength(1);
  });

  it('list_alarms pages newest first and filters by status', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await ok(client, 'schedule_alarm', { in_seconds: 60 + i })).alarm.id);
    await ok(client, 'cancel_alarm', { id: ids[0] });

    const page1 = await ok(client, 'list_alarms', { limit: 2 });
    expect(Object.keys(page1).sort()).toEqual(['alarms', 'next_cursor', 'server_time']);
    expect(page1.alarms.map((a: { id: string }) => a.id)).toEqual([ids[2], ids[1]]);
    expect(page1.next_cursor).toEqual(expect.any(String));
    const page2 = await ok(client, 'list_alarms', { limit: 2, cursor: page1.next_cursor });
    expect(page2.alarms.map((a: { id: string }) => a.id)).toEqual([ids[0]]);
    expect(page2.next_cursor).toBeNull();

    const active = await ok(client, 'list_alarms', { status: 'active' });
    expect(active.alarms.map((a: { id: string }) => a.id)).toEqual([ids[2], ids[1]]);
    const cancelled = await ok(client, 'list_alarms', { status: 'cancelled' });
    expect(cancelled.alarms.map((a: { id: string }) => a.id)).toEqual([ids[0]]);
    expect(cancelled.alarms[0]).not.toHaveProperty('next_fire_at');
  });

  it('get_alarm answers {alarm, server_time}', async () => {
    const { alarm } = await ok(client, 'schedule_alarm', { in_seconds: 60, payload: { task: 'x' } });
    const answer = await ok(client, 'get_alarm', { id: alarm.id });
    expect(Object.keys(answer).sort()).toEqual(['alarm', 'server_time']);
    expect(answer.alarm).toEqual(alarm);
  });

  it('reschedule_alarm moves an alarm and edits fields in place, with next_fires in its zone', async () => {
    const { alarm } = await ok(client, 'schedule_alarm', { in_seconds: 60, label: 'old' });
    const moved = await ok(client, 'reschedule_alarm', {
      id: alarm.id,
      at: '2099-03-14T09:30:00+01:00',
      timezone: 'Europe/Paris',
      label: 'new',
    });
    expect(Object.keys(moved).sort()).toEqual(['alarm', 'next_fires', 'server_time']);
    expect(moved.alarm).toMatchObject({
      id: alarm.id,
      label: 'new',
      kind: 'once',
      next_fire_at: '2099-03-14T08:30:00.000Z',
    });
    expect(moved.next_fires).toEqual([
      { utc: '2099-03-14T08:30:00.000Z', local: '2099-03-14T09:30:00.000+01:00' },
    ]);

    const repeating = await ok(client, 'reschedule_alarm', { id: alarm.id, cron: '30 7 * * MON-FRI' });
    expect(repeating.alarm).toMatchObject({
      kind: 'cron',
      cron_expr: '30 7 * * MON-FRI',
      timezone: 'Europe/Paris',
    });
    expect(repeating.next_fires).toHaveLength(3);
    for (const { local } of repeating.next_fires) expect(local).toMatch(/T07:30:00\.000\+0[12]:00$/);
  });

  it('cancel_alarm cancels, answers a cancelled alarm again, and refuses a fired one', async () => {
    const { alarm } = await ok(client, 'schedule_alarm', { in_seconds: 60 });
    const cancelled = await ok(client, 'cancel_alarm', { id: alarm.id });
    expect(Object.keys(cancelled).sort()).toEqual(['alarm', 'server_time']);
    expect(cancelled.alarm).toMatchObject({ id: alarm.id, status: 'cancelled' });
    expect((await ok(client, 'cancel_alarm', { id: alarm.id })).alarm.status).toBe('cancelled');

    const once = await ok(client, 'schedule_alarm', { in_seconds: 60 });
    await fire(server, t.db, once.alarm.id);
    const text = await refused(client, 'cancel_alarm', { id: once.alarm.id });
    expect(text).toMatch(/has already fired/);
    expect(text).toMatch(/nothing to cancel/);
    const again = await refused(client, 'reschedule_alarm', { id: once.alarm.id, in_seconds: 60 });
    expect(again).toMatch(/has already fired; only an active or paused alarm can be changed/);
    expect(again).toMatch(/schedule_alarm/);
  });

  it('pause_alarm and resume_alarm hold an alarm and let it fire again, with next_fires; refusals say what to do', async () => {
    const { alarm } = await ok(client, 'schedule_alarm', {
      cron: '0 9 * * *',
      timezone: 'Europe/Paris',
      label: 'standup',
    });
    const paused = await ok(client, 'pause_alarm', { id: alarm.id });
    expect(paused.alarm.status).toBe('paused');
    expect(paused.alarm.next_fire_at).toBeUndefined();
    expect(paused.server_time).toMatch(RFC3339_MS);
    expect((await ok(client, 'pause_alarm', { id: alarm.id })).alarm.status).toBe('paused');
    expect(
      (await ok(client, 'list_alarms', { status: 'paused' })).alarms.map((a: { id: string }) => a.id),
    ).toEqual([alarm.id]);

    const resumed = await ok(client, 'resume_alarm', { id: alarm.id });
    expect(resumed.alarm.status).toBe('active');
    expect(resumed.next_fires).toHaveLength(3);
    expect(resumed.next_fires[0].local).toMatch(/T09:00:00\.000\+0[12]:00$/);

    await ok(client, 'cancel_alarm', { id: alarm.id });
    expect(await refused(client, 'resume_alarm', { id: alarm.id })).toMatch(
      /is cancelled; only a paused alarm can be resumed[\s\S]*use schedule_alarm/,
    );
    expect(await refused(client, 'pause_alarm', { id: alarm.id })).toMatch(
      /only an active alarm can be paused/,
    );
    expect(await refused(client, 'pause_alarm', { alarm_id: alarm.id })).toMatch(
      /alarm_id: unknown field; send only id; did you mean "id"\?/,
    );
  });

  it('list_wakes finds the wakes still waiting for an acknowledgement, with label, message and lateness', async () => {
    const { alarm } = await ok(client, 'schedule_alarm', {
      in_seconds: 60,
      label: 'tea',
      wake_message: 'Tell the user the tea is ready.',
      conversation_id: 'conv-tea',
    });
    const { alarm: other } = await ok(client, 'schedule_alarm', { in_seconds: 60, label: 'other' });
    const wakeId = await fire(server, t.db, alarm.id);
    await fire(server, t.db, other.id);

    const waiting = await ok(client, 'list_wakes', { status: 'delivered', alarm_id: alarm.id });
    expect(waiting.wakes).toHaveLength(1);
    expect(waiting.wakes[0]).toMatchObject({
      id: wakeId,
      alarm_id: alarm.id,
      label: 'tea',
      wake_message: 'Tell the user the tea is ready.',
      conversation_id: 'conv-tea',
      require_ack: true,
    });
    expect(waiting.wakes[0].lateness_ms).toBeGreaterThanOrEqual(1_000);
    expect(waiting.next_cursor).toBeNull();
    expect((await ok(client, 'list_wakes', {})).wakes).toHaveLength(2);
    await ok(client, 'ack_wake', { wake_id: wakeId, note: 'told them' });
    expect(
      (await ok(client, 'list_wakes', { status: 'delivered' })).wakes.map((w: { label: string }) => w.label),
    ).toEqual(['other']);
    expect(await refused(client, 'list_wakes', { status: 'open' })).toMatch(
      /status: expected one of pending, delivered, acknowledged, failed, expired, got "open"/,
    );
  });

  it('ack_wake acknowledges a wake with a note, once; again answers it unchanged', async () => {
    const { alarm } = await ok(client, 'schedule_alarm', { in_seconds: 60, conversation_id: 'c-9' });
    const wakeId = await fire(server, t.db, alarm.id);
    const answer = await ok(client, 'ack_wake', { wake_id: wakeId, note: 'tea served' });
    expect(Object.keys(answer).sort()).toEqual(['server_time', 'wake']);
    expect(answer.wake).toMatchObject({
      id: wakeId,
      alarm_id: alarm.id,
      status: 'acknowledged',
      conversation_id: 'c-9',
      ack_note: 'tea served',
      ack_inferred: false,
      require_ack: true,
    });
    expect(answer.wake.acknowledged_at).toMatch(RFC3339_MS);
    const again = await ok(client, 'ack_wake', { wake_id: wakeId, note: 'second note' });
    expect(again.wake).toEqual(answer.wake);
  });

  it('keeps payload numbers digit for digit in the text, and in the database', async () => {
    // The SDK client cannot write such numbers (it goes through JSON.stringify): a raw request.
    const response = await fetch(new URL('/mcp', server.url), {
      method: 'POST',
      headers: {
        authorization: `Bearer ${server.ownerKey}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"schedule_alarm","arguments":{"in_seconds":60,"payload":{"big":12345678901234567890,"pi":0.1000000000000000055511151231257827}}}}`,
    });
    expect(response.status).toBe(200);
    const message = (await response.json()) as {
      result: { content: { text: string }[]; structuredContent: any };
    };
    const text = message.result.content[0]!.text;
    expect(text).toContain('"big": 12345678901234567890');
    expect(text).toContain('"pi": 0.1000000000000000055511151231257827');
    const [row] = await t.db.query<{ payload: string }>(alarmRow, [
      message.result.structuredContent.alarm.id,
    ]);
    expect(row!.payload).toBe('{"pi": 0.1000000000000000055511151231257827, "big": 12345678901234567890}');

    const read = await callTool(client, 'get_alarm', { id: message.result.structuredContent.alarm.id });
    expect(textOf(read)).toContain('"big": 12345678901234567890');
  });

  describe('refusals', () => {
    it('an at in the past suggests checking the time zone offset and shows server_time', async () => {
      const text = await refused(client, 'schedule_alarm', { at: '2020-01-01T09:00:00+01:00' });
      expect(text).toMatch(/^schedule_alarm refused its arguments; nothing was changed/);
      expect(text).toMatch(/at: expected a time in the future, got "2020-01-01T09:00:00\+01:00"/);
      expect(text).toMatch(/check the time zone offset/);
      expect(text).toMatch(/\nserver_time: \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    });

    it('a bad cron, an unknown zone and a bare local time say what to send instead', async () => {
      expect(await refused(client, 'schedule_alarm', { cron: 'every morning' })).toMatch(
        /cron: expected a 5-field cron expression like "0 9 \* \* MON-FRI"/,
      );
      expect(await refused(client, 'schedule_alarm', { cron: '0 9 * * *', timezone: 'CEST' })).toMatch(
        /timezone: expected an IANA time zone like "Europe\/Paris" or "UTC", got "CEST"; did you mean "Europe\/Paris"/,
      );
      expect(await refused(client, 'schedule_alarm', { at: '2099-01-01T09:00:00' })).toMatch(
        /add "Z" for UTC or an offset like "\+01:00"/,
      );
      expect(await refused(client, 'schedule_alarm', { cron: '@every 30s' })).toMatch(
        /cron: expected a schedule that fires at most once every/,
      );
      expect(await refused(client, 'schedule_alarm', { in_seconds: 60, cron: '@daily' })).toMatch(
        /expected exactly one of "at", "in_seconds", "cron" or "rrule", got "in_seconds" and "cron"/,
      );
    });

    it('arguments the published schema forbids come back as isError results, never protocol errors', async () => {
      expect(await refused(client, 'schedule_alarm', { in_seconds: '600' })).toMatch(
        /in_seconds: expected a whole number of seconds from 1 to 315360000, got "600"/,
      );
      expect(await refused(client, 'schedule_alarm', { in_seconds: 60, when: 'soon' })).toMatch(
        /when: unknown field; send only label, at, in_seconds, .*; did you mean "at"\?/,
      );
      expect(await refused(client, 'schedule_alarm', { in_seconds: 60, payload: [1] })).toMatch(
        /payload: expected a JSON object/,
      );
      expect(await refused(client, 'get_alarm', {})).toMatch(/id: expected the id of one of your alarms/);
      expect(await refused(client, 'get_alarm', { id: 42 })).toMatch(/id: expected .*, got 42/);
      expect(await refused(client, 'list_alarms', { limit: 500 })).toMatch(
        /limit: expected a whole number from 1 to 200, got 500/,
      );
      expect(await refused(client, 'list_alarms', { status: 'done' })).toMatch(
        /status: expected one of active, paused, fired, cancelled, failed, expired, got "done"/,
      );
      expect(await refused(client, 'list_alarms', { sort: 'asc' })).toMatch(
        /sort: unknown field; send only status, limit, cursor/,
      );
      expect(await refused(client, 'ack_wake', { note: 'x' })).toMatch(/wake_id: expected the wake_id/);
      const { alarm } = await ok(client, 'schedule_alarm', { in_seconds: 60 });
      expect(await refused(client, 'reschedule_alarm', { id: alarm.id })).toMatch(
        /expected at least one field to change besides "id"/,
      );
      expect((await ok(client, 'list_alarms', {})).alarms).toHaveLength(1);
    });

    it('an empty note is refused, and the wake stays unacknowledged', async () => {
      const { alarm } = await ok(client, 'schedule_alarm', { in_seconds: 60 });
      const wakeId = await fire(server, t.db, alarm.id);
      expect(await refused(client, 'ack_wake', { wake_id: wakeId, note: '  ' })).toMatch(
        /note: expected a non-empty note saying what was done about the wake/,
      );
      expect(await refused(client, 'ack_wake', { wake_id: wakeId })).toMatch(
        /note: expected a non-empty note/,
      );
      expect((await ok(client, 'ack_wake', { wake_id: wakeId, note: 'done' })).wake.ack_note).toBe('done');
    });

    it('an unknown id answers "no alarm with that id for you" and points to list_alarms', async () => {
      for (const id of ['5f0c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10', 'not-a-uuid']) {
        for (const tool of ['get_alarm', 'cancel_alarm']) {
          const text = await refused(client, tool, { id });
          expect(text).toMatch(/^no alarm with that id for you; call list_alarms/);
        }
        expect(await refused(client, 'reschedule_alarm', { id, label: 'x' })).toMatch(
          /^no alarm with that id/,
        );
        expect(await refused(client, 'ack_wake', { wake_id: id, note: 'x' })).toMatch(
          /^no wake with that id for you/,
        );
      }
    });
  });
});

describeEachBackend('MCP quotas', ({ t }) => {
  let server: McpTestServer;
  let client: Client;
  afterEach(async () => {
    await client.close();
    await server.close();
  });

  it('the create rate refuses with the limit and when to retry, and writes nothing', async () => {
    server = await openMcpServer(t.db, { CHRONOS_CREATE_RATE: '2' });
    client = await httpClient(server.url, { authorization: `Bearer ${server.ownerKey}` });
    await ok(client, 'schedule_alarm', { in_seconds: 60 });
    await ok(client, 'schedule_alarm', { in_seconds: 60 });
    const text = await refused(client, 'schedule_alarm', { in_seconds: 60 });
    expect(text).toMatch(
      /^quota exceeded, create_rate: at most 2 alarms a minute per owner; try again in \d+ s/,
    );
    expect(text).toMatch(/Wait \d+ s before scheduling again \(retry_after_seconds: \d+\)/);
    expect((await ok(client, 'list_alarms', {})).alarms).toHaveLength(2);
  });

  it('the active-alarm limit refuses and says to cancel alarms first', async () => {
    server = await openMcpServer(t.db, { CHRONOS_MAX_ACTIVE_ALARMS: '1' });
    client = await httpClient(server.url, { authorization: `Bearer ${server.ownerKey}` });
    const { alarm } = await ok(client, 'schedule_alarm', { in_seconds: 60 });
    const text = await refused(client, 'schedule_alarm', { in_seconds: 60 });
    expect(text).toMatch(/max_active_alarms: at most 1 active or paused alarms per owner/);
    expect(text).toMatch(/cancel_alarm the alarms no longer needed/);
    await ok(client, 'cancel_alarm', { id: alarm.id });
    await ok(client, 'schedule_alarm', { in_seconds: 60 });
  });
});
