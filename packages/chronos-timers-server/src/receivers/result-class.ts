/**
 * The `result` label of the webhook metrics (`chronos_webhook_attempt_seconds`, the tracker's
 * failures): how one signed POST ended. Pure; kept apart from the POST itself, whose client
 * (undici) is loaded only where something is sent.
 */
import type { SignedDelivery } from './http-post.js';

/** How an attempt ended, for the attempt-latency histogram: `2xx`…`5xx`, `timeout`, `network`. */
export function resultClass(delivery: SignedDelivery): string {
  if (delivery.statusCode !== undefined) return `${Math.floor(delivery.statusCode / 100)}xx`;
  return delivery.kind === 'timeout' ? 'timeout' : 'network';
}
