/**
 * HTTP/1.1 pipelining to the router (`CHRONOS_ROUTER_PIPELINING`): up to that many wakes are sent
 * on one keep-alive connection before their answers come back, so a burst goes over a few
 * connections. A connection the router drops mid-pipeline loses nothing: the wake whose answer
 * was cut off is retried as usual, and those queued behind it are sent again on another
 * connection (at least once, under the same webhook-id).
 */
import { expect, it } from 'vitest';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import { backdate, makeService, OWNER } from '../support/harness.js';
import { OK } from '../support/sink.js';
import { useDelivery } from './support.js';

const api = { source: 'api' } as const;
const BURST = 20;
const states = sql(
  'test_pipelined_states',
  `SELECT a.status, a.failure_count, a.claimed_at IS NULL AS released, w.id::text AS wake_id, w.status AS wake_status
   FROM chronos.alarms a JOIN chronos.wakes w ON w.alarm_id = a.id WHERE a.id = ANY($1::uuid[])`,
);

describeEachBackend('webhook delivery: pipelining', ({ t }) => {
  const { sink, delivering: to } = useDelivery();
  const burst = async () => {
    const ids: string[] = [];
    for (let i = 0; i < BURST; i++) {
      const { alarm } = await makeService(t.db).create(OWNER, { inSeconds: 60, label: `p-${i}` }, api);
      await backdate(t.db, alarm.id, 61_000);
      ids.push(alarm.id);
    }
    return ids;
  };
  const delivering = (pipelining: number) =>
    to(t.db, {
      receiver: { pipelining, concurrency: BURST },
      dispatcher: { concurrency: BURST, batchSize: BURST },
    });
  const stateOf = async (ids: string[]) =>
    t.db.query<{
      status: string;
      failure_count: number;
      released: boolean;
      wake_id: string;
      wake_status: string;
    }>(states, [ids]);

  it('a burst goes over a few connections, each wake delivered once', async () => {
    const ids = await burst();
    expect(await delivering(10).dispatcher.runOnce()).toBe(BURST);
    expect(sink.received).toBe(BURST);
    // 20 under way, 10 to a connection: a pool of two.
    expect(sink.connections).toBeLessThanOrEqual(2);
    for (const row of await stateOf(ids)) {
      expect(row).toMatchObject({ status: 'fired', released: true, wake_status: 'delivered' });
      expect(sink.withId(row.wake_id)).toHaveLength(1);
    }
  });

  it('without it (the default), every request under way has a connection of its own', async () => {
    await burst();
    expect(await delivering(1).dispatcher.runOnce()).toBe(BURST);
    expect(sink.received).toBe(BURST);
    expect(sink.connections).toBe(BURST);
  });

  it('a connection dropped mid-pipeline: nothing lost, nothing left claimed', async () => {
    const ids = await burst();
    // The third request's connection is destroyed without an answer.
    sink.answer(OK, OK, { close: true });
    expect(await delivering(10).dispatcher.runOnce()).toBe(BURST);
    const rows = await stateOf(ids);
    for (const row of rows) {
      expect(row.released).toBe(true);
      expect(sink.withId(row.wake_id).length).toBeGreaterThanOrEqual(1);
      if (row.status === 'fired') expect(row.wake_status).toBe('delivered');
      else expect(row).toMatchObject({ status: 'active', failure_count: 1, wake_status: 'pending' });
    }
    // Only the wake whose answer was cut off failed; those sent behind it on that connection were
    // sent again on another, and delivered.
    expect(rows.filter((r) => r.status !== 'fired')).toHaveLength(1);
    expect(sink.received).toBeGreaterThan(BURST);
  });
});
