import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { webhookHeaders, webhookSignature } from './signing.js';

const secret = () => `whsec_${randomBytes(24).toString('base64')}`;
const nowSeconds = () => Math.floor(Date.now() / 1000);

describe('Standard Webhooks signing', () => {
  it('matches the specification’s published example', () => {
    // The example from the Standard Webhooks test suite (svix's original vector).
    const signature = webhookSignature(
      'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      'msg_p5jXN8AQM9LWM0D4loKWxJek',
      1614265330,
      '{"test": 2432232314}',
    );
    expect(signature).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('is accepted by the official standardwebhooks verifier', () => {
    const key = secret();
    const body = '{"type":"alarm.fired","payload":{"n":12345678901234567890}}';
    const headers = webhookHeaders([key], 'wake-1', body, nowSeconds());
    expect(Object.keys(headers).sort()).toEqual(['webhook-id', 'webhook-signature', 'webhook-timestamp']);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(() => new Webhook(key).verify(body, headers)).not.toThrow();
  });

  it('signs the body’s UTF-8 bytes: emoji, right-to-left text and U+2028 verify', () => {
    const key = secret();
    const body = JSON.stringify({ wake_message: 'réveil ⏰ 🦀 שלום עולם \u2028 end' });
    const headers = webhookHeaders([key], 'wake-2', body, nowSeconds());
    expect(() => new Webhook(key).verify(body, headers)).not.toThrow();
    expect(() => new Webhook(key).verify(Buffer.from(body, 'utf8'), headers)).not.toThrow();
  });

  it('agrees with the verifier’s own signature for the same id, time and body', () => {
    const key = secret();
    const at = 1_800_000_123;
    const body = '{"a":"b"}';
    const ours = webhookHeaders([key], 'msg_1', body, at)['webhook-signature'];
    expect(ours).toBe(new Webhook(key).sign('msg_1', new Date(at * 1000), body));
  });

  it('sends both signatures during a rotation, and a receiver holding either secret accepts', () => {
    const [oldKey, newKey, stranger] = [secret(), secret(), secret()];
    const body = '{"x":1}';
    const headers = webhookHeaders([oldKey, newKey], 'wake-3', body, nowSeconds());
    expect(headers['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(() => new Webhook(oldKey).verify(body, headers)).not.toThrow();
    expect(() => new Webhook(newKey).verify(body, headers)).not.toThrow();
    expect(() => new Webhook(stranger).verify(body, headers)).toThrow(/No matching signature/);
  });

  it('is refused by the verifier when the body, the id or the timestamp was changed', () => {
    const key = secret();
    const body = '{"n":1}';
    const at = nowSeconds();
    const headers = webhookHeaders([key], 'wake-4', body, at);
    expect(() => new Webhook(key).verify('{"n":2}', headers)).toThrow();
    expect(() => new Webhook(key).verify(body, { ...headers, 'webhook-id': 'wake-5' })).toThrow();
    expect(() =>
      new Webhook(key).verify(body, { ...headers, 'webhook-timestamp': String(at - 1) }),
    ).toThrow();
  });

  it('writes whole seconds and leaves the signature out when no secret is configured', () => {
    const headers = webhookHeaders([], 'wake-6', '{}', 1_700_000_000.9);
    expect(headers).toEqual({ 'webhook-id': 'wake-6', 'webhook-timestamp': '1700000000' });
  });
});
