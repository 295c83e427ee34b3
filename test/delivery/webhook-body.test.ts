import { RawJson } from '../../packages/chronos-timers/src/json.js';
import { Webhook } from 'standardwebhooks';
import { expect, it } from 'vitest';
import { rawMember } from '../../packages/chronos-timers/src/json.js';
import { describeEachBackend } from '../support/backends.js';
import { alarmRow, backdate, makeService, OWNER, wakesOf } from '../support/harness.js';
import { newSecret, useDelivery } from './support.js';

const api = { source: 'api' } as const;
const BODY_KEYS = [
  'type',
  'wake_id',
  'alarm_id',
  'user_id',
  'owner_did',
  'label',
  'kind',
  'conversation_id',
  'wake_message',
  'payload',
  'scheduled_for',
  'fired_at',
  'lateness_ms',
  'attempt',
  'fire_count',
  'require_ack',
  'trigger',
  'instructions',
];
const RFC3339_MS_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describeEachBackend('webhook delivery: the body and its signature', ({ t }) => {
  const { sink, delivering } = useDelivery();
  const secret = newSecret();
  const deliveryWith = (secrets = [secret]) => delivering(t.db, { receiver: { secrets } });

  it('a fire is POSTed with the §6 body, and the official verifier accepts its signature', async () => {
    const { alarm } = await makeService(t.db).create(
      OWNER,
      {
        inSeconds: 60,
        label: 'standup',
        conversationId: 'conv-42',
        wakeMessage: 'Time for the standup',
        payload: new RawJson('{"room": "a"}'),
      },
      api,
    );
    await backdate(t.db, alarm.id, 61_500);
    const { dispatcher } = deliveryWith();
    const before = Math.floor(Date.now() / 1000);
    expect(await dispatcher.runOnce()).toBe(1);

    expect(sink.requests).toHaveLength(1);
    const request = sink.requests[0]!;
    expect(request.method).toBe('POST');
    expect(request.headers['content-type']).toBe('application/json');
    expect(() => new Webhook(secret).verify(request.rawBody, request.headers)).not.toThrow();
    const timestamp = Number(request.headers['webhook-timestamp']);
    expect(timestamp).toBeGreaterThanOrEqual(before - 1);
    expect(timestamp).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));

    const body = JSON.parse(request.body) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(BODY_KEYS);
    const [wake] = await wakesOf(t.db, alarm.id);
    const row = await alarmRow(t.db, alarm.id);
    expect(body).toMatchObject({
      type: 'alarm.fired',
      wake_id: wake!.id,
      alarm_id: alarm.id,
      user_id: OWNER.userId,
      owner_did: OWNER.did,
      label: 'standup',
      kind: 'once',
      conversation_id: 'conv-42',
      wake_message: 'Time for the standup',
      payload: { room: 'a' },
      scheduled_for: (row.scheduled_for as Date).toISOString(),
      attempt: 1,
      fire_count: 1,
      require_ack: true,
      trigger: 'schedule',
    });
    expect(body.instructions).toContain(`ack_wake tool with wake_id "${wake!.id}"`);
    expect(request.headers['webhook-id']).toBe(wake!.id);
    expect(body.scheduled_for).toMatch(RFC3339_MS_UTC);
    expect(body.fired_at).toMatch(RFC3339_MS_UTC);
    const lateness = Date.parse(body.fired_at as string) - Date.parse(body.scheduled_for as string);
    expect(body.lateness_ms).toBe(lateness);
    expect(lateness).toBeGreaterThanOrEqual(1_500);
    expect(wake!.lateness_ms).toBe(body.lateness_ms);
    expect(row.status).toBe('fired');
    expect(wake!.status).toBe('delivered');
  });

  it('payload and wake_message arrive verbatim: big numbers digit for digit, any Unicode unit for unit', async () => {
    const rawPayload =
      '{"big": 12345678901234567890, "precise": 0.1000000000000000055511151231257827, ' +
      '"emoji": "🦀🕰️", "rtl": "שלום עולם مرحبا", "sep": "a\\u2028b", "nested": {"n": [100000000000000000000000000001]}}';
    const wakeMessage = 'Réveil ⏰ — שלום (RTL) \u2028 next line \u2029 “quotes” \\ and "double" 𝄞';
    const label = 'π ≈ 3.14159 🧪';
    const { alarm } = await makeService(t.db).create(
      OWNER,
      { inSeconds: 60, payload: new RawJson(rawPayload), wakeMessage: wakeMessage, label },
      api,
    );
    await backdate(t.db, alarm.id, 61_000);
    const { dispatcher } = deliveryWith();
    await dispatcher.runOnce();

    const request = sink.requests[0]!;
    const stored = (await alarmRow(t.db, alarm.id)).payload as string;
    // The payload member is the stored JSONB text itself, not a re-serialisation of a parse.
    expect(rawMember(request.body, 'payload')).toBe(stored);
    for (const digits of [
      '12345678901234567890',
      '0.1000000000000000055511151231257827',
      '100000000000000000000000000001',
    ]) {
      expect(request.body).toContain(digits);
    }
    const body = JSON.parse(request.body) as Record<string, unknown>;
    expect(body.wake_message).toBe(wakeMessage);
    expect(body.label).toBe(label);
    expect((body.payload as Record<string, unknown>).emoji).toBe('🦀🕰️');
    expect((body.payload as Record<string, unknown>).rtl).toBe('שלום עולם مرحبا');
    expect((body.payload as Record<string, unknown>).sep).toBe('a\u2028b');
    // What was signed is what arrived, byte for byte.
    expect(() => new Webhook(secret).verify(request.rawBody, request.headers)).not.toThrow();
  });

  it('during a secret rotation both signatures are sent, and a receiver holding either one accepts', async () => {
    const next = newSecret();
    const { alarm } = await makeService(t.db).create(OWNER, { inSeconds: 60 }, api);
    await backdate(t.db, alarm.id, 61_000);
    const { dispatcher } = deliveryWith([secret, next]);
    await dispatcher.runOnce();

    const request = sink.requests[0]!;
    expect(request.headers['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(() => new Webhook(secret).verify(request.rawBody, request.headers)).not.toThrow();
    expect(() => new Webhook(next).verify(request.rawBody, request.headers)).not.toThrow();
    expect(() => new Webhook(newSecret()).verify(request.rawBody, request.headers)).toThrow();
  });

  it('a cron fire says kind "cron", and each occurrence is a new wake with its own webhook-id', async () => {
    const { alarm } = await makeService(t.db).create(OWNER, { cron: '*/5 * * * *', requireAck: false }, api);
    const { dispatcher } = deliveryWith();
    await backdate(t.db, alarm.id, 301_000);
    await dispatcher.runOnce();
    await backdate(t.db, alarm.id, 301_000);
    await dispatcher.runOnce();

    const bodies = sink.bodies();
    expect(bodies.map((b) => b.kind)).toEqual(['cron', 'cron']);
    expect(bodies.map((b) => b.attempt)).toEqual([1, 1]);
    const ids = sink.requests.map((r) => r.headers['webhook-id']);
    expect(new Set(ids).size).toBe(2);
    expect(ids).toEqual((await wakesOf(t.db, alarm.id)).map((w) => w.id));
    expect((await alarmRow(t.db, alarm.id)).status).toBe('active');
  });

  it('a cron fire absorbed by an unacknowledged wake (require_ack) is counted on it, not POSTed again', async () => {
    const { alarm } = await makeService(t.db).create(OWNER, { cron: '*/5 * * * *', requireAck: true }, api);
    const { dispatcher } = deliveryWith();
    await backdate(t.db, alarm.id, 301_000);
    await dispatcher.runOnce();
    await backdate(t.db, alarm.id, 301_000);
    expect(await dispatcher.runOnce()).toBe(1);

    expect(sink.requests).toHaveLength(1);
    const wakes = await wakesOf(t.db, alarm.id);
    expect(wakes).toHaveLength(1);
    expect(wakes[0]).toMatchObject({ id: sink.requests[0]!.headers['webhook-id'], fire_count: 2 });
  });
});
