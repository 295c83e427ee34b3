/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): the three headers that let a
 * receiver check that a request came from Chronos and was not replayed much later.
 *
 * - `webhook-id`: the message id, the receiver's deduplication key (for a wake, its wake id;
 *   stable across retries).
 * - `webhook-timestamp`: Unix seconds when this attempt was signed; receivers refuse timestamps
 *   far from their own clock (the official libraries allow ±5 minutes).
 * - `webhook-signature`: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, keyed with the
 *   base64-decoded part of a `whsec_<base64>` secret. During a rotation two secrets are given and
 *   both signatures are sent, space-separated, so a receiver holding either secret accepts.
 *
 * Pure: the timestamp is passed in. It signs the body text exactly as it will be sent (UTF-8);
 * a receiver must verify the raw body, never a re-serialisation of parsed JSON.
 */
import { createHmac } from 'node:crypto';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';

const keys = new Map<string, Buffer>();

/** The HMAC key of a `whsec_<base64>` secret (a bare base64 secret is accepted too). */
export function webhookKey(secret: string): Buffer {
  let key = keys.get(secret);
  if (!key) {
    const encoded = secret.startsWith(WEBHOOK_SECRET_PREFIX)
      ? secret.slice(WEBHOOK_SECRET_PREFIX.length)
      : secret;
    key = Buffer.from(encoded, 'base64');
    if (key.length === 0)
      throw new Error('webhook secret: expected "whsec_" followed by base64, got an empty key');
    // Secrets are few (one, two during a rotation): the cache only saves decoding per request.
    if (keys.size > 16) keys.clear();
    keys.set(secret, key);
  }
  return key;
}

/** `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` for one secret. */
export function webhookSignature(
  secret: string,
  msgId: string,
  timestampSeconds: number,
  body: string,
): string {
  const mac = createHmac('sha256', webhookKey(secret));
  mac.update(`${msgId}.${timestampSeconds}.`, 'utf8');
  mac.update(body, 'utf8');
  return `v1,${mac.digest('base64')}`;
}

/**
 * The Standard Webhooks headers for one message. `secrets` holds one secret, or two during a
 * rotation (every signature is sent); with none, `webhook-signature` is left out.
 */
export function webhookHeaders(
  secrets: readonly string[],
  msgId: string,
  body: string,
  timestampSeconds: number,
): Record<string, string> {
  const timestamp = Math.floor(timestampSeconds);
  const headers: Record<string, string> = {
    'webhook-id': msgId,
    'webhook-timestamp': String(timestamp),
  };
  if (secrets.length > 0) {
    headers['webhook-signature'] = secrets
      .map((secret) => webhookSignature(secret, msgId, timestamp, body))
      .join(' ');
  }
  return headers;
}
