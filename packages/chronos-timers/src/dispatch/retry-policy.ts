/**
 * How long to wait before trying a failed delivery again: exponential backoff with jitter.
 *
 * Pure: the random source is passed in. The n-th failure waits between half and all of
 * `base * 2^(n-1)`, capped at `max`; a receiver's `Retry-After` is honoured when it asks for
 * longer (still capped at `max`).
 */
export interface RetryPolicy {
  baseMs: number;
  maxMs: number;
}

export function retryDelayMs(
  failureCount: number,
  policy: RetryPolicy,
  random: () => number = Math.random,
  retryAfterMs?: number,
): number {
  const exponent = Math.min(Math.max(failureCount - 1, 0), 40);
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** exponent);
  const jittered = ceiling / 2 + (ceiling / 2) * random();
  const wanted = retryAfterMs !== undefined && retryAfterMs > jittered ? retryAfterMs : jittered;
  return Math.round(Math.min(policy.maxMs, wanted));
}
