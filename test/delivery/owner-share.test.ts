/**
 * One owner's hanging router holds no more than its share of the dispatcher's delivery slots
 * (issue 45): the other owners' wakes are delivered while the hung ones are in flight.
 */
import { expect, it } from 'vitest';
import { ownerShare } from '../../packages/chronos-timers/src/dispatch/dispatcher.js';
import { alarmsClaimDue, alarmsReleaseUnsent } from '../../packages/chronos-timers/src/store/claims.js';
import { ROUTER_QUEUE } from '../../packages/chronos-timers/src/types.js';
import { describeEachBackend } from '../support/backends.js';
import { backdate, makeService, OTHER, OWNER } from '../support/harness.js';
import { useDelivery } from './support.js';

const api = { source: 'api' } as const;

describeEachBackend('owner share of the delivery slots', ({ t }) => {
  const { sink, delivering } = useDelivery();

  it('a router hanging for one owner holds at most its share; another owner’s wakes go out meanwhile', async () => {
    const service = makeService(t.db);
    const concurrency = 4;
    expect(ownerShare(concurrency)).toBe(1);
    // The hanging owner's wakes fall due first: without a share they take every slot.
    for (let i = 0; i < 6; i++) {
      const { alarm } = await service.create(OWNER, { inSeconds: 60, label: `hung-${i}` }, api);
      await backdate(t.db, alarm.id, 120_000);
    }
    for (let i = 0; i < 3; i++) {
      const { alarm } = await service.create(OTHER, { inSeconds: 60, label: `other-${i}` }, api);
      await backdate(t.db, alarm.id, 61_000);
    }
    sink.respond = (request) =>
      (JSON.parse(request.body) as { user_id: string }).user_id === OWNER.userId
        ? { hang: true }
        : { status: 200 };
    const { dispatcher } = delivering(t.db, {
      receiver: { timeoutMs: 600_000 },
      dispatcher: { concurrency, deliveryTimeoutMs: 600_000, leaseMs: 1_200_000 },
    });
    await dispatcher.start();
    try {
      // The share's one hung wake and the other owner's three, before any more of the hung owner's.
      await sink.waitFor(4);
      const users = sink.requests.slice(0, 4).map((r) => (JSON.parse(r.body) as { user_id: string }).user_id);
      expect(users.filter((u) => u === OWNER.userId)).toHaveLength(1);
      expect(users.filter((u) => u === OTHER.userId)).toHaveLength(3);
      expect(sink.hanging).toBeGreaterThanOrEqual(1);
    } finally {
      await dispatcher.stop(0);
    }
  });

  it('with no other owner waiting, one owner’s burst takes every slot (the share leaves none idle)', async () => {
    const service = makeService(t.db);
    const concurrency = 4;
    for (let i = 0; i < 6; i++) {
      const { alarm } = await service.create(OWNER, { inSeconds: 60, label: `burst-${i}` }, api);
      await backdate(t.db, alarm.id, 120_000);
    }
    sink.respond = () => ({ hang: true });
    const { dispatcher } = delivering(t.db, {
      receiver: { timeoutMs: 600_000 },
      dispatcher: { concurrency, deliveryTimeoutMs: 600_000, leaseMs: 1_200_000 },
    });
    await dispatcher.start();
    try {
      await sink.waitFor(concurrency);
      expect(sink.hanging).toBe(concurrency);
    } finally {
      await dispatcher.stop(0);
    }
  });

  it('a claim given back unsent counts no attempt, and the next claim takes the row again', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 60, label: 'unsent' }, api);
    await backdate(t.db, alarm.id, 120_000);
    const attempts = async () => {
      const [row] = await t.db.query<{ alarm: number; wake: number | null }>(
        {
          name: 'test_owner_share_unsent',
          text: `SELECT a.fire_attempts AS alarm, w.attempts AS wake
                 FROM chronos.alarms a LEFT JOIN chronos.wakes w ON w.id = a.wake_id WHERE a.id = $1`,
        },
        [alarm.id],
      );
      return row!;
    };
    const [first] = await alarmsClaimDue(t.db, ROUTER_QUEUE, 10, 60_000, true, []);
    expect(first!.alarm.id).toBe(alarm.id);
    expect((await attempts()).alarm).toBe(1);
    await alarmsReleaseUnsent(t.db, [{ alarmId: alarm.id, leaseToken: first!.leaseToken }]);
    expect((await attempts()).alarm).toBe(0);
    expect((await attempts()).wake ?? 0).toBe(0);
    const [again] = await alarmsClaimDue(t.db, ROUTER_QUEUE, 10, 60_000, true, []);
    expect(again!.alarm.id).toBe(alarm.id);
    expect((await attempts()).alarm).toBe(1);
  });
});
