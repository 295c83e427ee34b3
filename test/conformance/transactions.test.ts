import { expect, it } from 'vitest';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import { backdate, makeService, OWNER, OTHER, until } from '../support/harness.js';
import { appOrders, inCallerTransaction, insertOrder, libraryOn } from '../support/library.js';
import type { TimerFire } from '../../packages/chronos-timers/src/receivers/handler.js';

describeEachBackend('conformance: the caller’s transaction', ({ t, kind }) => {
  it('committed-timer-fires: a timer written in a committed transaction fires', async () => {
    const orders = await appOrders(t);
    const chronos = await libraryOn(t);
    const timer = await inCallerTransaction(t, async (tx) => {
      await insertOrder(tx, 1);
      return chronos.schedule(tx, { key: 'order:1:expire', inSeconds: 60, payload: { order: 1 } });
    });
    expect(await orders.count()).toBe(1);
    await backdate(t.db, timer.id, 61_000);

    const fires: TimerFire[] = [];
    const worker = chronos.work((fire) => void fires.push(fire));
    await until(() => fires.length > 0, 'the timer to fire');
    await worker.stop();
    expect(fires).toHaveLength(1);
    expect(fires[0]).toMatchObject({
      key: 'order:1:expire',
      alarmId: timer.id,
      payload: { order: 1 },
      attempt: 1,
    });
    expect((await chronos.get('order:1:expire'))?.status).toBe('fired');
  });

  it('rolled-back-timer-never-fires: a timer written in a rolled-back transaction leaves nothing', async () => {
    const orders = await appOrders(t);
    const chronos = await libraryOn(t);
    await inCallerTransaction(
      t,
      async (tx) => {
        await insertOrder(tx, 2);
        await chronos.schedule(tx, { key: 'order:2:expire', at: new Date(Date.now() - 1_000) });
      },
      { rollback: true },
    );
    expect(await orders.count()).toBe(0);
    expect(await chronos.get('order:2:expire')).toBeNull();
    const fires: TimerFire[] = [];
    const worker = chronos.work((fire) => void fires.push(fire));
    await worker.stop();
    expect(await worker.runOnce()).toBe(0);
    expect(fires).toHaveLength(0);
  });

  it('idempotent-create: the same key twice is one alarm, the second answer deduped', async () => {
    const service = makeService(t.db);
    const body = { inSeconds: 600, idempotencyKey: 'build-check', label: 'first' };
    const first = await service.create(OWNER, body, { source: 'api' });
    const second = await service.create(OWNER, { ...body, label: 'second' }, { source: 'api' });
    expect(first.deduped).toBe(false);
    expect(second.deduped).toBe(true);
    expect(second.alarm.id).toBe(first.alarm.id);
    expect(second.alarm.label).toBe('first');
    // The key is the owner's own: another owner with the same key gets its own alarm.
    const other = await service.create(OTHER, body, { source: 'api' });
    expect(other.deduped).toBe(false);
    expect(other.alarm.id).not.toBe(first.alarm.id);

    const chronos = await libraryOn(t);
    const a = await chronos.schedule(null, { key: 'lib-key', inSeconds: 60 });
    const b = await chronos.schedule(null, { key: 'lib-key', inSeconds: 9_999 });
    expect(b.id).toBe(a.id);
    expect(b.nextFireAt).toEqual(a.nextFireAt);
  });

  postgresOnly(
    kind,
    'concurrent transactions need several connections',
    'idempotent-create: concurrent creates with one key make one alarm',
    async () => {
      const service = makeService(t.db);
      const results = await Promise.all(
        Array.from({ length: 8 }, () =>
          service.create(OWNER, { inSeconds: 600, idempotencyKey: 'race' }, { source: 'api' }),
        ),
      );
      expect(new Set(results.map((r) => r.alarm.id)).size).toBe(1);
      expect(results.filter((r) => !r.deduped)).toHaveLength(1);
    },
  );
});
