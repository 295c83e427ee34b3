import { describe, expect, it } from 'vitest';
import { RawJson } from 'chronos-timers/internal';
import type { Alarm } from 'chronos-timers/internal';
import type { SignedDelivery } from './http-post.js';
import type { Fire } from 'chronos-timers/internal';
import { resultClass } from './result-class.js';
import { wakeBody } from './wake-body.js';

const alarm = {
  id: '0b6f2f0e-6f43-4a6b-9a55-1b1e6f0c9e11',
  ownerDid: 'did:matrix:11111111-1111-4111-8111-111111111111:test',
  userId: '11111111-1111-4111-8111-111111111111',
  label: 'standup',
  kind: 'once',
  conversationId: 'conv-1',
  wakeMessage: 'line 1\u2028line 2 🦀',
  payload: new RawJson('{"big": 12345678901234567890, "f": 0.1000000000000000055511151231257827}'),
  requireAck: true,
} as Alarm;

const fire: Fire = {
  alarm,
  wakeId: '5d1c0e8e-8c0a-4f0e-a1b4-1f0f2b8b2f77',
  attempt: 2,
  fireCount: 1,
  trigger: 'schedule',
  traceparent: '',
  scheduledFor: new Date('2027-03-14T07:00:00.000Z'),
  firedAt: new Date('2027-03-14T07:00:00.012Z'),
  latenessMs: 12.4,
};

describe('wakeBody', () => {
  it('writes the §6 fields in order, times as RFC 3339 UTC with milliseconds, the payload as stored', () => {
    const body = wakeBody(fire);
    expect(body.slice(0, body.indexOf(',"instructions":'))).toBe(
      '{"type":"alarm.fired","wake_id":"5d1c0e8e-8c0a-4f0e-a1b4-1f0f2b8b2f77",' +
        '"alarm_id":"0b6f2f0e-6f43-4a6b-9a55-1b1e6f0c9e11","user_id":"11111111-1111-4111-8111-111111111111",' +
        '"owner_did":"did:matrix:11111111-1111-4111-8111-111111111111:test","label":"standup","kind":"once",' +
        '"conversation_id":"conv-1","wake_message":"line 1\u2028line 2 🦀",' +
        '"payload":{"big": 12345678901234567890, "f": 0.1000000000000000055511151231257827},' +
        '"scheduled_for":"2027-03-14T07:00:00.000Z","fired_at":"2027-03-14T07:00:00.012Z",' +
        '"lateness_ms":12,"attempt":2,"fire_count":1,"require_ack":true,"trigger":"schedule"',
    );
    expect(Object.keys(JSON.parse(body)).at(-1)).toBe('instructions');
  });

  it('tells the agent what woke it, to act on the message, and how to acknowledge it', () => {
    const { instructions } = JSON.parse(wakeBody(fire)) as { instructions: string };
    expect(instructions).toContain('the scheduled wake "standup", due 2027-03-14T07:00:00.000Z');
    expect(instructions).toContain('line 1\u2028line 2 🦀');
    expect(instructions).toContain(`call the ack_wake tool with wake_id "${fire.wakeId}"`);
    expect(instructions).toContain(`POST /v1/wakes/${fire.wakeId}/ack`);
    expect(instructions).toContain('reminded once, and then it may be escalated to a person');
  });

  it('says when no acknowledgement is needed, and when the fire was by hand', () => {
    const manual: Fire = { ...fire, trigger: 'manual', alarm: { ...alarm, requireAck: false } };
    const body = JSON.parse(wakeBody(manual)) as {
      trigger: string;
      require_ack: boolean;
      instructions: string;
    };
    expect(body).toMatchObject({ trigger: 'manual', require_ack: false });
    expect(body.instructions).toContain('fired it by hand');
    expect(body.instructions).toContain('No acknowledgement is needed.');
    expect(body.instructions).not.toContain('ack_wake');
  });

  it('carries the same fields with type "alarm.nudge" and a reminder for instructions', () => {
    const nudge = JSON.parse(wakeBody(fire, 'alarm.nudge')) as Record<string, unknown>;
    expect(nudge).toMatchObject({ type: 'alarm.nudge', wake_id: fire.wakeId, require_ack: true });
    expect(nudge.instructions).toMatch(/^Reminder: /);
    expect(nudge.instructions).toContain(`wake_id "${fire.wakeId}"`);
  });
});

describe('resultClass', () => {
  it.each([
    [{ ok: true, statusCode: 204, kind: 'answered' }, '2xx'],
    [{ ok: false, retryable: true, statusCode: 503, error: 'router answered 503', kind: 'answered' }, '5xx'],
    [{ ok: false, retryable: false, statusCode: 404, error: 'router answered 404', kind: 'answered' }, '4xx'],
    [{ ok: false, retryable: true, error: 'router timed out after 10000 ms', kind: 'timeout' }, 'timeout'],
    [
      { ok: false, retryable: true, error: 'router unreachable: ECONNREFUSED', kind: 'unreachable' },
      'network',
    ],
    [
      { ok: false, retryable: true, error: 'router connection failed: ECONNRESET', kind: 'connection' },
      'network',
    ],
  ] as [SignedDelivery, string][])('classes %j as %s', (delivery, expected) => {
    expect(resultClass(delivery)).toBe(expected);
  });
});

describe('wakeBody and stringifyJson', () => {
  it('write the same text', async () => {
    const { stringifyJson } = await import('chronos-timers/internal');
    const body = JSON.parse(wakeBody(fire)) as Record<string, unknown>;
    const expected = stringifyJson({ ...body, payload: fire.alarm.payload });
    expect(wakeBody(fire)).toBe(expected);
  });
});
