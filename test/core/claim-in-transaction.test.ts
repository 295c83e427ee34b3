/**
 * A library worker that holds its claims in a transaction (`work()`'s `claim: 'transaction'`): a
 * batch's rows are locked, not written, while its handlers run; their outcomes are written in the
 * same transaction, and the commit lets the rows go. Nothing about a fire changes for the handler
 * (attempts, a wake id stable across an occurrence's attempts, retries to the ceiling, cron), and
 * a worker that dies mid-batch leaves its rows as they were, due again at once.
 */
import { expect, it } from 'vitest';
import type { Delivery } from '../../packages/chronos-timers/src/receivers/receiver.js';
import { alarmsClaimDue } from '../../packages/chronos-timers/src/store/claims.js';
import { PgDb, sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import type { ClaimedAlarm } from '../../packages/chronos-timers/src/types.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import {
  alarmRow,
  backdate,
  expectRetriesToTheCeiling,
  gate,
  lapseLease,
  makeDispatcher,
  RecordingReceiver,
  until,
} from '../support/harness.js';
import { libraryOn } from '../support/library.js';

const ONE_CONNECTION = 'a batch holds a connection while another statement checks the rows';

describeEachBackend('claims held in a transaction', ({ kind, t }) => {
  const holding = (
    receiver: RecordingReceiver<ClaimedAlarm>,
    deleteFired = false,
    deliveryTimeoutMs?: number,
  ) =>
    makeDispatcher(t.db, receiver, {
      queue: 'default',
      history: false,
      claim: 'transaction',
      deleteFired,
      ...(deliveryTimeoutMs === undefined ? {} : { deliveryTimeoutMs }),
    });
  const leasing = (receiver: RecordingReceiver<ClaimedAlarm>) =>
    makeDispatcher(t.db, receiver, { queue: 'default', history: false });

  async function dueTimer(key: string, spec: Record<string, unknown> = { inSeconds: 1 }, pastMs = 2_000) {
    const chronos = await libraryOn(t);
    const timer = await chronos.schedule(null, { key, ...spec });
    await backdate(t.db, timer.id, pastMs);
    return timer;
  }

  postgresOnly(
    kind,
    ONE_CONNECTION,
    'the row is locked, not written, while its handler runs; other workers skip it',
    async () => {
      const timer = await dueTimer('held');
      const open = gate<Delivery>();
      const receiver = new RecordingReceiver<ClaimedAlarm>();
      receiver.behave = () => open.promise;
      const running = holding(receiver).runOnce();
      await until(() => receiver.fires.length === 1, 'the fire');
      expect(await alarmRow(t.db, timer.id)).toMatchObject({
        status: 'active',
        claimed_at: null,
        lease_token: null,
        wake_id: null,
      });
      expect(await leasing(new RecordingReceiver<ClaimedAlarm>()).runOnce()).toBe(0);
      expect(await holding(new RecordingReceiver<ClaimedAlarm>()).runOnce()).toBe(0);
      open.open({ ok: true });
      expect(await running).toBe(1);
      expect(await alarmRow(t.db, timer.id)).toMatchObject({
        status: 'fired',
        claimed_at: null,
        wake_id: null,
      });
      expect(receiver.fires[0]).toMatchObject({ attempt: 1 });
    },
  );

  postgresOnly(
    kind,
    ONE_CONNECTION,
    'retries count up to the ceiling with one wake id and attempts 1, 2, 3',
    async () => {
      const timer = await dueTimer('flaky');
      await expectRetriesToTheCeiling(t.db, (receiver) => holding(receiver), timer.id);
    },
  );

  postgresOnly(
    kind,
    ONE_CONNECTION,
    'a worker that dies mid-batch leaves the row as it was: it fires again, same wake id',
    async () => {
      const timer = await dueTimer('orphaned');
      const open = gate<Delivery>();
      const dying = new RecordingReceiver<ClaimedAlarm>();
      dying.behave = () => open.promise;
      const running = holding(dying).runOnce();
      await until(() => dying.fires.length === 1, 'the fire');
      // The worker's connection is cut (its process killed): PostgreSQL rolls its transaction back.
      const [killed] = await t.db.query<{ n: number }>(
        sql(
          'test_kill_held_batch',
          `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND state = 'idle in transaction' AND pid <> pg_backend_pid()`,
        ),
      );
      expect(killed!.n).toBe(1);
      open.open({ ok: true });
      await running;
      expect(await alarmRow(t.db, timer.id)).toMatchObject({
        status: 'active',
        claimed_at: null,
        wake_id: null,
      });
      const again = new RecordingReceiver<ClaimedAlarm>();
      expect(await holding(again).runOnce()).toBe(1);
      expect(again.fires[0]).toMatchObject({ wakeId: dying.fires[0]!.wakeId, attempt: 1 });
      expect((await alarmRow(t.db, timer.id)).status).toBe('fired');
    },
  );

  postgresOnly(
    kind,
    ONE_CONNECTION,
    'a lease lapsed under a leasing worker is taken over, as attempt 2 of its wake',
    async () => {
      const timer = await dueTimer('lapsed');
      const [dead] = await alarmsClaimDue(t.db, 'default', 10, 30_000, false);
      const receiver = new RecordingReceiver<ClaimedAlarm>();
      expect(await holding(receiver).runOnce()).toBe(0);
      await lapseLease(t.db, timer.id);
      expect(await holding(receiver).runOnce()).toBe(1);
      expect(receiver.fires[0]).toMatchObject({ wakeId: dead!.wakeId, attempt: 2 });
      // The dead worker's late outcome is fenced: its lease token is gone.
      expect(await alarmRow(t.db, timer.id)).toMatchObject({ status: 'fired', lease_token: null });
    },
  );

  postgresOnly(
    kind,
    ONE_CONNECTION,
    'a handler that ignores the deadline does not hold the row past it: a retry is recorded',
    async () => {
      const timer = await dueTimer('hung');
      const receiver = new RecordingReceiver<ClaimedAlarm>();
      receiver.behave = () => new Promise<Delivery>(() => {});
      expect(await holding(receiver, false, 20).runOnce()).toBe(1);
      expect(await alarmRow(t.db, timer.id)).toMatchObject({
        status: 'active',
        failure_count: 1,
        last_error: 'delivery timed out',
      });
    },
  );

  postgresOnly(
    kind,
    ONE_CONNECTION,
    'stop() gives back what it could not finish: the row unchanged, due at once',
    async () => {
      const timer = await dueTimer('interrupted');
      const receiver = new RecordingReceiver<ClaimedAlarm>();
      receiver.behave = () => new Promise<Delivery>(() => {});
      const worker = holding(receiver);
      await worker.start();
      await until(() => receiver.fires.length === 1, 'the fire');
      await worker.stop(0);
      expect(await alarmRow(t.db, timer.id)).toMatchObject({
        status: 'active',
        claimed_at: null,
        failure_count: 0,
      });
      expect(await leasing(new RecordingReceiver<ClaimedAlarm>()).runOnce()).toBe(1);
    },
  );

  it('kept for no time: a delivered one-shot is deleted in the batch; a failed one and a cron timer are kept', async () => {
    const delivered = await dueTimer('gone');
    const failing = await dueTimer('failing');
    const cron = await dueTimer('cron', { cron: '* * * * *' }, 61_000);
    const receiver = new RecordingReceiver<ClaimedAlarm>();
    receiver.behave = (fire) =>
      fire.alarm.id === failing.id ? { ok: false, retryable: false, error: 'no' } : { ok: true };
    expect(await holding(receiver, true).runOnce()).toBe(3);
    const left = await t.db.query<{ id: string }>(
      sql('test_alarm_ids_left', 'SELECT id::text AS id FROM chronos.alarms ORDER BY id'),
    );
    expect(left.map((r) => r.id)).toEqual([failing.id, cron.id].sort());
    expect(await (await libraryOn(t)).get('gone')).toBeNull();
    expect(delivered.status).toBe('active');
    expect(await alarmRow(t.db, failing.id)).toMatchObject({ status: 'failed', last_error: 'no' });
    expect(await alarmRow(t.db, cron.id)).toMatchObject({ status: 'active', failure_count: 0 });
  });

  it(`work({ claim: 'transaction' }) fires timers (on ${kind}${kind === 'pglite' ? ', where it leases' : ''})`, async () => {
    const chronos = await libraryOn(t, { finishedTimerRetentionMs: 0 });
    for (const key of ['a', 'b']) {
      const timer = await chronos.schedule(null, { key, inSeconds: 1 });
      await backdate(t.db, timer.id, 2_000);
    }
    const keys: string[] = [];
    const worker = chronos.work((fire) => void keys.push(fire.key), { claim: 'transaction' });
    await until(() => keys.length === 2, 'both fires');
    await worker.stop();
    expect(keys.sort()).toEqual(['a', 'b']);
    await until(() => true);
    expect(await chronos.get('a')).toBeNull();
    await chronos.close();
  });

  it('a claim mode other than lease or transaction, or transaction with history, is refused naming claim', async () => {
    const chronos = await libraryOn(t);
    expect(() => chronos.work(() => {}, { claim: 'lock' as never })).toThrow(
      /claim: expected "lease" or "transaction", got "lock"/,
    );
    expect(() => chronos.work(() => {}, { claim: 'transaction', history: true })).toThrow(
      /claim: expected "lease" when history is kept/,
    );
    await chronos.close();
  });

  it('the kind of store decides: PostgreSQL holds, the embedded store leases', async () => {
    // On PGlite the same options lease: the row shows the claim while the handler runs.
    const timer = await dueTimer('which');
    const open = gate<Delivery>();
    const receiver = new RecordingReceiver<ClaimedAlarm>();
    receiver.behave = () => open.promise;
    const running = holding(receiver).runOnce();
    await until(() => receiver.fires.length === 1, 'the fire');
    if (kind === 'pglite') {
      expect((await alarmRow(t.db, timer.id)).lease_token).not.toBeNull();
    } else {
      expect(t.db).toBeInstanceOf(PgDb);
      expect((await alarmRow(t.db, timer.id)).lease_token).toBeNull();
    }
    open.open({ ok: true });
    await running;
    expect((await alarmRow(t.db, timer.id)).status).toBe('fired');
  });
});
