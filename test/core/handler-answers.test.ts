/**
 * A library handler answers by returning or throwing, or by a promise that does either later.
 * Returned or thrown, the answer is taken at once: the receiver gives it as it is and the
 * dispatcher finishes the delivery without a promise (bench/README.md, "Drain"). Whichever way it
 * comes, it is recorded alike: delivered, or a failure to retry with the error's text.
 */
import { expect, it } from 'vitest';
import { HandlerReceiver, type TimerHandler } from '../../packages/chronos-timers/src/receivers/handler.js';
import type { Fire } from '../../packages/chronos-timers/src/receivers/receiver.js';
import { RawJson } from '../../packages/chronos-timers/src/json.js';
import type { ClaimedAlarm } from '../../packages/chronos-timers/src/types.js';
import { describeEachBackend } from '../support/backends.js';
import { alarmRow, backdate, makeDispatcher } from '../support/harness.js';
import { libraryOn } from '../support/library.js';

const ANSWERS: Record<string, TimerHandler> = {
  returns: () => 42,
  'returns nothing': () => {},
  throws: () => {
    throw new Error('not now');
  },
  resolves: () => Promise.resolve(),
  rejects: () => Promise.reject(new Error('not later')),
  // A thenable of another library's making is waited for like a promise.
  'a thenable': () => ({ then: (resolve: () => void) => setTimeout(resolve, 1) }),
};

describeEachBackend('a handler answers', ({ t }) => {
  it('returned, resolved or a thenable: delivered; thrown or rejected: retried, with the text', async () => {
    const chronos = await libraryOn(t);
    const ids = new Map<string, string>();
    for (const key of Object.keys(ANSWERS)) {
      const timer = await chronos.schedule(null, { key, inSeconds: 1 });
      await backdate(t.db, timer.id, 2_000);
      ids.set(key, timer.id);
    }
    const called: string[] = [];
    const receiver = new HandlerReceiver((fire) => {
      called.push(fire.key);
      return ANSWERS[fire.key]!(fire);
    });
    const worker = makeDispatcher(t.db, receiver, { queue: 'default', history: false });
    expect(await worker.runOnce()).toBe(6);
    expect(called.sort()).toEqual(Object.keys(ANSWERS).sort());
    for (const key of ['returns', 'returns nothing', 'resolves', 'a thenable']) {
      expect(await alarmRow(t.db, ids.get(key)!), key).toMatchObject({
        status: 'fired',
        failure_count: 0,
        claimed_at: null,
      });
    }
    for (const [key, error] of [
      ['throws', 'handler threw: not now'],
      ['rejects', 'handler threw: not later'],
    ] as const) {
      const row = await alarmRow(t.db, ids.get(key)!);
      expect(row, key).toMatchObject({
        status: 'active',
        failure_count: 1,
        last_error: error,
        claimed_at: null,
      });
      expect(new Date(row.next_fire_at as string | Date).getTime(), key).toBeGreaterThan(Date.now());
    }
  });
});

it('a handler that returns or throws is answered as it is, not through a promise', () => {
  const fire = {
    alarm: { id: 'a', idempotencyKey: 'k', payload: new RawJson('{"n":1}') },
    wakeId: 'w',
    attempt: 1,
    scheduledFor: new Date(),
    firedAt: new Date(),
    latenessMs: 0,
  } as unknown as Fire<ClaimedAlarm>;
  const signal = new AbortController().signal;
  const answer = (handler: TimerHandler) => new HandlerReceiver(handler).deliver(fire, signal);
  expect(answer(() => 'done')).toEqual({ ok: true });
  expect(
    answer(() => {
      throw new Error('no');
    }),
  ).toEqual({ ok: false, retryable: true, error: 'handler threw: no' });
  expect(answer(async () => {})).toBeInstanceOf(Promise);
});
