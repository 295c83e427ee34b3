import { describe, expect, it } from 'vitest';
import { readAlarmBody } from './alarm-input.js';
import type { ChronosError } from '../errors.js';

function refusal(body: unknown): ChronosError['errors'] {
  try {
    readAlarmBody(body, { create: false });
  } catch (error) {
    return (error as ChronosError).errors;
  }
  throw new Error('expected a refusal');
}

describe('the create body', () => {
  it('accepts every field of the contract', () => {
    const body = {
      label: 'check the build',
      cron: '0 9 * * MON-FRI',
      timezone: 'Europe/Paris',
      conversation_id: 'conv-1',
      wake_message: 'Check the build',
      payload: { n: 1 },
      idempotency_key: 'k',
      max_failures: 3,
      require_ack: false,
    };
    const spec = readAlarmBody(body, { create: true, rawPayload: '{"n": 1}' });
    expect({ ...spec, payload: spec.payload?.text }).toEqual({
      label: 'check the build',
      cron: '0 9 * * MON-FRI',
      timezone: 'Europe/Paris',
      conversationId: 'conv-1',
      wakeMessage: 'Check the build',
      payload: '{"n": 1}',
      idempotencyKey: 'k',
      maxFailures: 3,
      requireAck: false,
    });
  });

  it('suggests the field meant for a misspelt one, or another word for it', () => {
    expect(refusal({ lable: 'x' })[0]?.message).toContain('did you mean "label"?');
    expect(refusal({ inSeconds: 5 })[0]?.message).toContain('did you mean "in_seconds"?');
    expect(refusal({ tz: 'UTC' })[0]?.message).toContain('did you mean "timezone"?');
    expect(refusal({ zzz: 1 })[0]?.message).not.toContain('did you mean');
  });

  it('wants exactly one schedule field on a create, at most one on a change', () => {
    expect(() => readAlarmBody({ label: 'x' }, { create: true })).toThrow(
      'body: expected exactly one of "at", "in_seconds", "cron" or "rrule", got none of them; send exactly one',
    );
    expect(refusal({ at: '2027-01-01T00:00:00Z', cron: '@daily' })[0]?.message).toBe(
      'body: expected at most one of "at", "in_seconds", "cron" or "rrule", got "at" and "cron"; send at most one',
    );
  });

  it('refuses unknown fields by name, with a suggestion', () => {
    expect(refusal({ in_seconds: 5, message: 'hi' })).toEqual([
      { path: 'message', message: expect.stringContaining('did you mean "wake_message"?') },
    ]);
  });

  it('says what each field expects and what came', () => {
    const errors = refusal({
      in_seconds: 1.5,
      label: 'x'.repeat(201),
      max_failures: 0,
      payload: [1],
      require_ack: 'yes',
    });
    const byPath = Object.fromEntries(errors.map((e) => [e.path, e.message]));
    expect(byPath.in_seconds).toBe(
      'in_seconds: expected a whole number of seconds from 1 to 315360000, got 1.5',
    );
    expect(byPath.label).toMatch(/^label: expected a string of at most 200 characters, got 201 characters/);
    expect(byPath.max_failures).toBe('max_failures: expected a whole number from 1 to 100, got 0');
    expect(byPath.payload).toMatch(/^payload: expected a JSON object/);
    expect(byPath.require_ack).toBe('require_ack: expected true or false, got "yes"');
  });

  it('refuses text PostgreSQL would change: NUL characters and unpaired surrogates', () => {
    expect(refusal({ in_seconds: 5, wake_message: 'a\u0000b' })[0]?.path).toBe('wake_message');
    expect(refusal({ in_seconds: 5, label: '\ud800' })[0]?.path).toBe('label');
  });

  it('refuses a body that is not an object, on the path ""', () => {
    expect(refusal([1, 2])).toEqual([{ path: '', message: 'body: expected a JSON object, got an array' }]);
  });
});
