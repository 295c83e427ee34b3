/**
 * Issue 46: what `schedule()`, `scheduleMany()`, `get()`, `cancel()`, `reschedule()` and a
 * `work()` handler give back: `payload` the plain object that was given (contract §9), and
 * `payloadText` its JSON text as stored, every digit kept. And the type names a user writes.
 */
import { expect, expectTypeOf, it } from 'vitest';
import type {
  ChronosOptions,
  Fire,
  FireHandler,
  Timer,
  TimerFire,
  TimerHandler,
  TimerSpec,
  WorkOptions,
} from '../../packages/chronos-timers/src/index.js';
import { describeEachBackend } from '../support/backends.js';
import { backdate } from '../support/harness.js';
import { inCallerTransaction, libraryOn } from '../support/library.js';

describeEachBackend('the library’s payload: the plain object, its stored text beside it', ({ t }) => {
  it('schedule, scheduleMany, get, reschedule, cancel and the fire give t.payload.orderId', async () => {
    const chronos = await libraryOn(t);
    const made = await inCallerTransaction(t, (tx) =>
      chronos.schedule<{ orderId: string; n: number }>(tx, {
        key: 'order:42',
        inSeconds: 600,
        payload: { orderId: 'o-42', n: 1e21 },
      }),
    );
    expectTypeOf(made.payload.orderId).toEqualTypeOf<string>();
    expect(made.payload.orderId).toBe('o-42');
    expect(made.payloadText).toBe('{"n": 1000000000000000000000, "orderId": "o-42"}');
    const [many] = await chronos.scheduleMany(null, [
      { key: 'order:43', inSeconds: 600, payload: { orderId: 'o-43' } },
    ]);
    expect(many!.payload).toEqual({ orderId: 'o-43' });
    expect(many!.payloadText).toBe('{"orderId": "o-43"}');

    const got = (await chronos.get<{ orderId: string; n: number }>('order:42'))!;
    expectTypeOf(got.payload.orderId).toEqualTypeOf<string>();
    expect(got.payload.orderId).toBe('o-42');
    expect(got.payloadText).toBe(made.payloadText);
    expect(got.payload.n).toBe(1e21);

    const moved = await chronos.reschedule(null, 'order:43', { payload: { orderId: 'o-43b' } });
    expect(moved.payload).toEqual({ orderId: 'o-43b' });
    const cancelled = await chronos.cancel(null, 'order:43');
    expect(cancelled.payload).toEqual({ orderId: 'o-43b' });
    expect(cancelled.payloadText).toBe('{"orderId": "o-43b"}');

    const fires: Fire<{ orderId: string }>[] = [];
    let onFire!: () => void;
    const fired = new Promise<void>((resolve) => (onFire = resolve));
    const worker = chronos.work<{ orderId: string }>((fire) => {
      expectTypeOf(fire.payload.orderId).toEqualTypeOf<string>();
      fires.push(fire);
      onFire();
    });
    await backdate(t.db, made.id, 601_000);
    // The worker's own loop may claim it before runOnce() does: either way it fires, once.
    await worker.runOnce();
    await fired;
    expect(fires).toHaveLength(1);
    expect(fires[0]!.payload.orderId).toBe('o-42');
    expect(fires[0]!.payloadText).toBe(made.payloadText);
    await chronos.close();
  });
});

it('exports the type names a user writes, the old ones kept as aliases', () => {
  expectTypeOf<Timer['payloadText']>().toEqualTypeOf<string>();
  expectTypeOf<Timer<{ orderId: string }>['payload']['orderId']>().toEqualTypeOf<string>();
  expectTypeOf<TimerSpec['key']>().toEqualTypeOf<string>();
  expectTypeOf<Fire['wakeId']>().toEqualTypeOf<string>();
  expectTypeOf<FireHandler>().parameter(0).toEqualTypeOf<Fire>();
  expectTypeOf<TimerFire['payloadText']>().toEqualTypeOf<string>();
  expectTypeOf<TimerHandler>().toBeFunction();
  expectTypeOf<ChronosOptions['dataDir']>().toEqualTypeOf<string | undefined>();
  expectTypeOf<WorkOptions['queue']>().toEqualTypeOf<string | undefined>();
});
