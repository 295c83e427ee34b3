import type { AlarmSpec } from '../../packages/chronos-timers/src/core/alarm-spec.js';
import { expect, it } from 'vitest';
import { alarmsClaimDue } from '../../packages/chronos-timers/src/store/claims.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import {
  alarmRow,
  backdate,
  counting,
  gate,
  lapseLease,
  makeDispatcher,
  makeService,
  OWNER,
  RecordingReceiver,
  until,
  wakesOf,
} from '../support/harness.js';
import type { Delivery } from '../../packages/chronos-timers/src/receivers/receiver.js';

const api = { source: 'api' } as const;

describeEachBackend('conformance: leases', ({ t, kind }) => {
  async function dueAlarm(body: AlarmSpec = { inSeconds: 1 }) {
    const { alarm } = await makeService(t.db).create(OWNER, body, api);
    await backdate(t.db, alarm.id, 2_000);
    return alarm;
  }

  it('lease-not-lock: a claimed alarm holds no row lock, yet no other worker takes it during its lease', async () => {
    const alarm = await dueAlarm();
    const held = gate<Delivery>();
    const slow = new RecordingReceiver();
    slow.behave = () => held.promise;
    const a = makeDispatcher(t.db, slow);
    const running = a.runOnce();
    await until(() => slow.fires.length === 1, 'the first worker to start delivering');

    // No transaction is held open: the row can be read and written at once.
    const row = await alarmRow(t.db, alarm.id);
    expect(row.claimed_at).not.toBeNull();
    await t.db.query(sql('test_touch', 'UPDATE chronos.alarms SET label = $2 WHERE id = $1'), [
      alarm.id,
      'touched',
    ]);

    const other = new RecordingReceiver();
    expect(await makeDispatcher(t.db, other).runOnce()).toBe(0);
    expect(other.fires).toHaveLength(0);

    held.open({ ok: true });
    expect(await running).toBe(1);
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
  });

  it('lease-lapse-reclaims: once a lease lapses another worker takes the alarm, with the same wake id', async () => {
    const alarm = await dueAlarm();
    // A worker claimed it and died: the claim is written, the delivery never recorded.
    const [dead] = await alarmsClaimDue(t.db, 'router', 10, 30_000);
    expect(dead?.alarm.id).toBe(alarm.id);

    const receiver = new RecordingReceiver();
    const b = makeDispatcher(t.db, receiver);
    expect(await b.runOnce()).toBe(0);
    await lapseLease(t.db, alarm.id);
    expect(await b.runOnce()).toBe(1);
    expect(receiver.fires[0]?.wakeId).toBe(dead!.wakeId);
    expect(receiver.fires[0]?.attempt).toBe(2);
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
    expect(await wakesOf(t.db, alarm.id)).toHaveLength(1);
  });

  it('fencing-stale-worker: a worker whose lease lapsed cannot record over the newer claim', async () => {
    const alarm = await dueAlarm({ inSeconds: 1, maxFailures: 1 });
    const held = gate<Delivery>();
    const stale = new RecordingReceiver();
    stale.behave = () => held.promise;
    const a = makeDispatcher(t.db, stale);
    const running = a.runOnce();
    await until(() => stale.fires.length === 1, 'the stale worker to start delivering');

    await lapseLease(t.db, alarm.id);
    const fresh = new RecordingReceiver();
    expect(await makeDispatcher(t.db, fresh).runOnce()).toBe(1);
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');

    // The stale worker now fails; at max_failures 1 this would mark the alarm failed — if it could.
    held.open({ ok: false, retryable: true, error: 'late failure' });
    await running;
    const row = await alarmRow(t.db, alarm.id);
    expect(row.status).toBe('fired');
    expect(row.failure_count).toBe(0);
    expect(row.last_error).toBe('');
  });

  it('claim-is-one-statement: a batch of due alarms is claimed by a single statement', async () => {
    for (let i = 0; i < 5; i++) await dueAlarm();
    const ex = counting(t.db);
    const claims = await alarmsClaimDue(ex, 'router', 10, 30_000);
    expect(claims).toHaveLength(5);
    expect(ex.statements).toEqual(['alarms_claim_due']);
    // And every claimed alarm has its wake row, written by that same statement.
    const wakes = await Promise.all(claims.map((c) => wakesOf(t.db, c.alarm.id)));
    expect(wakes.map((w) => w.length)).toEqual([1, 1, 1, 1, 1]);
  });

  it('claim-is-one-statement: the claim keeps an index scan when planned generically', async () => {
    await dueAlarm();
    const plan = await t.db.transaction(async (tx) => {
      await tx.exec('SET LOCAL plan_cache_mode = force_generic_plan');
      await tx.exec(`PREPARE claim_plan(int, int) AS
        SELECT id FROM chronos.alarms WHERE status = 'active' AND next_fire_at <= now()
          AND (claimed_at IS NULL OR claimed_at <= now() - $2::int * interval '1 millisecond')
        ORDER BY next_fire_at LIMIT $1 FOR UPDATE SKIP LOCKED`);
      const rows = await tx.query<Record<string, string>>(
        sql('test_explain', 'EXPLAIN EXECUTE claim_plan(10, 30000)'),
      );
      await tx.exec('DEALLOCATE claim_plan');
      return rows.map((r) => Object.values(r)[0]).join('\n');
    });
    expect(plan).toContain('alarms_claim_idx');
    expect(plan).not.toMatch(/Seq Scan on alarms/);
  });

  postgresOnly(
    kind,
    'racing workers need separate connections',
    'skip-locked-no-double-claim: racing workers on separate pools deliver every alarm exactly once',
    async () => {
      const service = makeService(t.db);
      const ids = new Set<string>();
      for (let i = 0; i < 200; i++) {
        const { alarm } = await service.create(OWNER, { inSeconds: 1 }, api);
        ids.add(alarm.id);
      }
      await t.db.query(
        sql('test_all_due', "UPDATE chronos.alarms SET next_fire_at = now() - interval '1 second'"),
      );
      const receivers = Array.from({ length: 4 }, () => new RecordingReceiver());
      const workers = receivers.map((r) => makeDispatcher(t.openPool(3), r, { batchSize: 7 }));
      let claimed = 0;
      for (;;) {
        const counts = await Promise.all(workers.map((w) => w.runOnce()));
        claimed += counts.reduce((a, b) => a + b, 0);
        if (counts.every((c) => c === 0)) break;
      }
      const delivered = receivers.flatMap((r) => r.fires.map((f) => f.alarm.id));
      expect(claimed).toBe(200);
      expect(delivered).toHaveLength(200);
      expect(new Set(delivered)).toEqual(ids);
      expect(receivers.filter((r) => r.fires.length > 0).length).toBeGreaterThan(1);
    },
  );
});
