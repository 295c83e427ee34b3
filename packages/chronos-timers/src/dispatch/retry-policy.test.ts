import { describe, expect, it } from 'vitest';
import { retryDelayMs } from './retry-policy.js';

const policy = { baseMs: 1_000, maxMs: 60_000 };

describe('retryDelayMs', () => {
  it('doubles the window with each failure, between half and all of it', () => {
    expect(retryDelayMs(1, policy, () => 0)).toBe(500);
    expect(retryDelayMs(1, policy, () => 1)).toBe(1_000);
    expect(retryDelayMs(3, policy, () => 0)).toBe(2_000);
    expect(retryDelayMs(3, policy, () => 1)).toBe(4_000);
  });

  it('never waits longer than the cap, however many failures', () => {
    expect(retryDelayMs(50, policy, () => 1)).toBe(60_000);
    expect(retryDelayMs(1_000, policy, () => 0.5)).toBeLessThanOrEqual(60_000);
  });

  it('honours a longer Retry-After, capped too', () => {
    expect(retryDelayMs(1, policy, () => 0, 10_000)).toBe(10_000);
    expect(retryDelayMs(1, policy, () => 0, 3_600_000)).toBe(60_000);
    expect(retryDelayMs(3, policy, () => 1, 100)).toBe(4_000);
  });
});
