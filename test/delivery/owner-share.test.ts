/**
 * One owner's hanging router holds no more than its share of the dispatcher's delivery slots
 * (issue 45): the other owners' wakes are delivered while the hung ones are in flight.
 */
import { expect, it } from 'vitest';
import { ownerShare } from '../../src/dispatch/dispatcher.js';
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
      // The share's one hung wake and the other owner's three.
      await sink.waitFor(4);
      const users = sink.requests.map((r) => (JSON.parse(r.body) as { user_id: string }).user_id);
      expect(users.filter((u) => u === OWNER.userId)).toHaveLength(1);
      expect(users.filter((u) => u === OTHER.userId)).toHaveLength(3);
      expect(sink.hanging).toBe(1);
    } finally {
      await dispatcher.stop(0);
    }
    // The hung owner's other wakes were given back unsent: no attempt was counted for them.
    const [row] = await t.db.query<{ n: number }>(
      {
        name: 'test_owner_share_attempts',
        text: `SELECT count(*)::int AS n FROM chronos.alarms WHERE owner_did = $1 AND fire_attempts > 0`,
      },
      [OWNER.did],
    );
    expect(row!.n).toBeLessThanOrEqual(1);
  });
});
