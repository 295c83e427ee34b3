import { describe, expect, it } from 'vitest';
import { TestClock } from '../clock.js';
import { LogLimiter } from './log-limiter.js';

describe('LogLimiter', () => {
  const admitted = (limiter: LogLimiter<string>, kind: string, n: number) =>
    Array.from({ length: n }, () => limiter.admit(kind).write).filter(Boolean).length;

  it('writes at most `limit` lines of a kind per window and counts the rest', () => {
    const clock = new TestClock(new Date('2026-01-01T00:00:00Z'));
    const limiter = new LogLimiter<string>(clock, { limit: 3, windowMs: 10_000 });
    expect(admitted(limiter, 'retry', 5)).toBe(3);
    // Another kind has its own window.
    expect(admitted(limiter, 'failed', 2)).toBe(2);
    // The window is still open: no summary yet.
    clock.advance(9_999);
    expect(limiter.ended()).toEqual([]);
    expect(limiter.admit('retry').write).toBe(false);
  });

  it('summarises a window that left lines out once it has ended, once', () => {
    const clock = new TestClock(new Date('2026-01-01T00:00:00Z'));
    const limiter = new LogLimiter<string>(clock, { limit: 2, windowMs: 10_000 });
    admitted(limiter, 'retry', 7);
    admitted(limiter, 'failed', 2);
    clock.advance(10_000);
    expect(limiter.ended()).toEqual([{ kind: 'retry', suppressed: 5, windowMs: 10_000 }]);
    expect(limiter.ended()).toEqual([]);
    // A new window writes again.
    expect(admitted(limiter, 'retry', 3)).toBe(2);
  });

  it('gives the ended window’s summary with the first line of the next window', () => {
    const clock = new TestClock(new Date('2026-01-01T00:00:00Z'));
    const limiter = new LogLimiter<string>(clock);
    expect(limiter.limit).toBe(20);
    expect(limiter.windowMs).toBe(10_000);
    admitted(limiter, 'retry', 25);
    clock.advance(12_000);
    expect(limiter.admit('retry')).toEqual({
      write: true,
      summary: { kind: 'retry', suppressed: 5, windowMs: 10_000 },
    });
    expect(limiter.admit('retry').summary).toBeNull();
  });

  it('with `all`, also summarises windows still open (on stopping)', () => {
    const clock = new TestClock(new Date('2026-01-01T00:00:00Z'));
    const limiter = new LogLimiter<string>(clock, { limit: 1 });
    admitted(limiter, 'failed', 4);
    expect(limiter.ended()).toEqual([]);
    expect(limiter.ended(true)).toEqual([{ kind: 'failed', suppressed: 3, windowMs: 10_000 }]);
    expect(limiter.ended(true)).toEqual([]);
  });
});
