/**
 * A library worker keeps its fires on the timer's row alone (`work()`'s `history: false`, the
 * default): no wake row, no attempt row. What the handler is told is the same as with history —
 * an attempt count per occurrence, a wake id stable across the occurrence's attempts — and the
 * dispatch rules hold as in the conformance suite: retries count up to the ceiling, a lapsed
 * lease is reclaimed with the same wake id, a stale worker is fenced out, a cron timer advances.
 */
import { expect, it } from 'vitest';
import type { Delivery } from '../../packages/chronos-timers/src/receivers/receiver.js';
import { alarmsGet } from '../../packages/chronos-timers/src/store/alarms.js';
import { alarmsClaimDue } from '../../packages/chronos-timers/src/store/claims.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import {
  alarmRow,
  backdate,
  dueNow,
  expectRetriesToTheCeiling,
  gate,
  lapseLease,
  makeDispatcher,
  makeService,
  RecordingReceiver,
  until,
} from '../support/harness.js';
import { libraryOn } from '../support/library.js';
import { parseOwner } from '../../packages/chronos-timers/src/core/owner.js';
import type { ClaimedAlarm } from '../../packages/chronos-timers/src/types.js';

const historyRows = sql(
  'test_history_rows',
  `SELECT (SELECT count(*) FROM chronos.wakes)::int + (SELECT count(*) FROM chronos.wake_attempts)::int AS n`,
);
const attemptsOf = sql('test_fire_attempts', 'SELECT fire_attempts FROM chronos.alarms WHERE id = $1');
const LIB = parseOwner('did:matrix:00000000-0000-0000-0000-000000000000:lib');

describeEachBackend('library fires without history', ({ t }) => {
  const untracked = (receiver: RecordingReceiver<ClaimedAlarm>) =>
    makeDispatcher(t.db, receiver, { queue: 'default', history: false });
  const history = async () => (await t.db.query<{ n: number }>(historyRows))[0]!.n;

  async function dueTimer(key: string, spec: Record<string, unknown> = { inSeconds: 1 }, pastMs = 2_000) {
    const chronos = await libraryOn(t);
    const timer = await chronos.schedule(null, { key, ...spec });
    await backdate(t.db, timer.id, pastMs);
    return timer;
  }

  it('a fire writes only the timer: fired, with last_fired_at; no wake or attempt row', async () => {
    const timer = await dueTimer('once');
    const receiver = new RecordingReceiver<ClaimedAlarm>();
    expect(await untracked(receiver).runOnce()).toBe(1);
    const row = await alarmRow(t.db, timer.id);
    expect(row).toMatchObject({ status: 'fired', claimed_at: null, lease_token: null, wake_id: null });
    expect(row.last_fired_at).not.toBeNull();
    expect(receiver.fires[0]).toMatchObject({ attempt: 1 });
    // Due a second ago (backdated 2 s from 1 s ahead).
    expect(receiver.fires[0]!.latenessMs).toBeGreaterThanOrEqual(1_000);
    expect(await history()).toBe(0);
  });

  it('retries count up to the ceiling with one wake id and attempts 1, 2, 3; then the timer fails', async () => {
    const timer = await dueTimer('flaky', { inSeconds: 1 });
    await expectRetriesToTheCeiling(t.db, untracked, timer.id);
    expect(await history()).toBe(0);
  });

  it('a claim reads each timer as stored, the usual values (answered as NULL) and others alike', async () => {
    const usual = await dueTimer('usual');
    const unusual = await dueTimer('unusual', {
      cron: '0 9 * * 1-5',
      timezone: 'Europe/Paris',
      maxFailures: 3,
      payload: { n: 2 ** 53 + 2, text: 'x' },
    });
    // What a timer holds after failures, a "fire now" while paused and a trace: none of the usual.
    await t.db.query(
      sql(
        'test_unusual_alarm',
        `UPDATE chronos.alarms SET failure_count = 2, last_error = 'boom', status = 'paused', trigger = 'manual',
           next_fire_at = now() - interval '1 second', held_occurrence = now() - interval '1 day',
           scheduled_for = now() - interval '1 hour',
           traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
         WHERE id = $1`,
      ),
      [unusual.id],
    );
    const claims = await alarmsClaimDue(t.db, 'default', 10, 30_000, false);
    expect(claims).toHaveLength(2);
    for (const id of [usual.id, unusual.id]) {
      const stored = (await alarmsGet(t.db, LIB.did, id))!;
      const claimed = claims.find((c) => c.alarm.id === id)!.alarm;
      const { payload, ...rest } = claimed;
      expect(rest).toEqual({
        id,
        kind: stored.kind,
        cronExpr: stored.cronExpr,
        timezone: stored.timezone,
        nextFireAt: stored.nextFireAt,
        scheduledFor: stored.scheduledFor,
        status: stored.status,
        idempotencyKey: stored.idempotencyKey,
        maxFailures: stored.maxFailures,
        failureCount: stored.failureCount,
        lastError: stored.lastError,
        trigger: stored.trigger,
        heldOccurrence: stored.heldOccurrence,
        traceparent: stored.traceparent,
      });
      expect(payload.text).toBe(stored.payload.text);
    }
    const other = claims.find((c) => c.alarm.id === unusual.id)!.alarm;
    expect(other).toMatchObject({
      kind: 'cron',
      timezone: 'Europe/Paris',
      status: 'paused',
      trigger: 'manual',
    });
    expect(other).toMatchObject({ maxFailures: 3, failureCount: 2, lastError: 'boom' });
    expect(other.scheduledFor.getTime()).toBeLessThan(other.nextFireAt.getTime());
    // One lease token for the claim, as the rows hold it.
    expect(new Set(claims.map((c) => c.leaseToken)).size).toBe(1);
    expect((await alarmRow(t.db, usual.id)).lease_token).toBe(claims[0]!.leaseToken);
  });

  it('a lapsed lease is reclaimed with the same wake id, as attempt 2', async () => {
    const timer = await dueTimer('reclaimed');
    // A worker claimed it and died.
    const [dead] = await alarmsClaimDue(t.db, 'default', 10, 30_000, false);
    expect(dead).toMatchObject({ attempt: 1, coalesced: false });
    const receiver = new RecordingReceiver<ClaimedAlarm>();
    const worker = untracked(receiver);
    expect(await worker.runOnce()).toBe(0);
    await lapseLease(t.db, timer.id);
    expect(await worker.runOnce()).toBe(1);
    expect(receiver.fires[0]).toMatchObject({ wakeId: dead!.wakeId, attempt: 2 });
    expect((await alarmRow(t.db, timer.id)).status).toBe('fired');
  });

  it('a claim lost in a crash of the database (its commit is not flushed) is made again with the same wake id', async () => {
    const timer = await dueTimer('lost');
    const [lost] = await alarmsClaimDue(t.db, 'default', 10, 30_000, false);
    // What a crash before the claim's commit reached the disk leaves: the row as it was before.
    await t.db.query(
      sql(
        'test_lose_claim',
        `UPDATE chronos.alarms SET claimed_at = NULL, lease_token = NULL, wake_id = NULL, fire_attempts = 0
         WHERE id = $1`,
      ),
      [timer.id],
    );
    const receiver = new RecordingReceiver<ClaimedAlarm>();
    expect(await untracked(receiver).runOnce()).toBe(1);
    expect(receiver.fires[0]).toMatchObject({ wakeId: lost!.wakeId, attempt: 1 });
    // A new occurrence gets another: see the cron case below.
  });

  it('a worker whose lease lapsed cannot record over the newer claim', async () => {
    const timer = await dueTimer('fenced');
    const held = gate<Delivery>();
    const stale = new RecordingReceiver<ClaimedAlarm>();
    stale.behave = () => held.promise;
    const running = untracked(stale).runOnce();
    await until(() => stale.fires.length === 1, 'the stale worker to start delivering');
    await lapseLease(t.db, timer.id);
    expect(await untracked(new RecordingReceiver<ClaimedAlarm>()).runOnce()).toBe(1);
    held.open({ ok: false, retryable: false, error: 'late failure' });
    await running;
    expect(await alarmRow(t.db, timer.id)).toMatchObject({
      status: 'fired',
      failure_count: 0,
      last_error: '',
    });
  });

  it('a cron timer advances with its failures reset; the next occurrence is attempt 1 with a new wake id', async () => {
    const timer = await dueTimer('every-minute', { cron: '* * * * *' }, 61_000);
    const receiver = new RecordingReceiver<ClaimedAlarm>();
    receiver.behave = (fire) =>
      fire.attempt === 1 ? { ok: false, retryable: true, error: 'once' } : { ok: true };
    const worker = untracked(receiver);
    expect(await worker.runOnce()).toBe(1);
    await dueNow(t.db, timer.id);
    expect(await worker.runOnce()).toBe(1);
    const after = await alarmRow(t.db, timer.id);
    expect(after).toMatchObject({ status: 'active', failure_count: 0, wake_id: null });
    expect((after.next_fire_at as Date).getTime()).toBeGreaterThan(Date.now());
    await backdate(t.db, timer.id, 61_000);
    receiver.behave = () => ({ ok: true });
    expect(await worker.runOnce()).toBe(1);
    const [first, second, third] = receiver.fires;
    expect([first!.attempt, second!.attempt, third!.attempt]).toEqual([1, 2, 1]);
    expect(second!.wakeId).toBe(first!.wakeId);
    expect(third!.wakeId).not.toBe(first!.wakeId);
    expect((await t.db.query<{ fire_attempts: number }>(attemptsOf, [timer.id]))[0]!.fire_attempts).toBe(1);
    expect(await history()).toBe(0);
  });

  it('"fire now" of a library timer is delivered once, and its schedule kept', async () => {
    const chronos = await libraryOn(t);
    const timer = await chronos.schedule(null, { key: 'later', inSeconds: 3_600 });
    await makeService(t.db).fireNow(LIB, timer.id);
    const receiver = new RecordingReceiver<ClaimedAlarm>();
    expect(await untracked(receiver).runOnce()).toBe(1);
    expect(receiver.fires[0]).toMatchObject({ trigger: 'manual', attempt: 1 });
    expect(await alarmRow(t.db, timer.id)).toMatchObject({ status: 'fired', trigger: 'schedule' });
    expect(await history()).toBe(0);
  });

  it('kept for no time (deleteFired): a delivered one-shot is deleted as its fire is recorded; the rest are kept', async () => {
    const delivered = await dueTimer('gone');
    const failing = await dueTimer('failing');
    const cron = await dueTimer('cron', { cron: '* * * * *' }, 61_000);
    const fenced = await dueTimer('fenced-delete');
    const receiver = new RecordingReceiver<ClaimedAlarm>();
    const held = gate<Delivery>();
    receiver.behave = (fire) =>
      fire.alarm.id === failing.id
        ? { ok: false, retryable: false, error: 'no' }
        : fire.alarm.id === fenced.id
          ? held.promise
          : { ok: true };
    const worker = makeDispatcher(t.db, receiver, { queue: 'default', history: false, deleteFired: true });
    const running = worker.runOnce();
    await until(() => receiver.fires.length === 4, 'four fires');
    // The fenced one's lease lapses and another worker fires it: the stale outcome deletes nothing.
    await lapseLease(t.db, fenced.id);
    const other = new RecordingReceiver<ClaimedAlarm>();
    other.behave = () => ({ ok: false, retryable: true, error: 'try again' });
    expect(await untracked(other).runOnce()).toBe(1);
    held.open({ ok: true });
    expect(await running).toBe(4);
    const gone = await t.db.query(
      sql('test_alarm_ids', 'SELECT id::text AS id FROM chronos.alarms WHERE id = ANY($1::uuid[])'),
      [[delivered.id, failing.id, cron.id, fenced.id]],
    );
    expect(gone.map((r) => r.id).sort()).toEqual([failing.id, cron.id, fenced.id].sort());
    expect(await alarmRow(t.db, failing.id)).toMatchObject({ status: 'failed', last_error: 'no' });
    expect(await alarmRow(t.db, cron.id)).toMatchObject({ status: 'active' });
    expect(await alarmRow(t.db, fenced.id)).toMatchObject({ status: 'active', failure_count: 1 });
    // Its key is free at once.
    const again = await (await libraryOn(t)).schedule(null, { key: 'gone', inSeconds: 60 });
    expect(again.id).not.toBe(delivered.id);
  });

  it('work() with finishedTimerRetentionMs: 0 deletes a one-shot as it fires', async () => {
    const chronos = await libraryOn(t, { finishedTimerRetentionMs: 0 });
    const timer = await chronos.schedule(null, { key: 'brief', inSeconds: 1 });
    await backdate(t.db, timer.id, 2_000);
    const fired = gate();
    const worker = chronos.work(() => fired.open());
    await fired.promise;
    await worker.stop();
    expect(await chronos.get('brief')).toBeNull();
    await chronos.close();
  });

  it('work() keeps no history by default, and keeps it with history: true', async () => {
    const chronos = await libraryOn(t);
    const fires: { key: string; attempt: number; wakeId: string }[] = [];
    for (const key of ['lean', 'kept']) {
      const timer = await chronos.schedule(null, { key, inSeconds: 1, queue: key });
      await backdate(t.db, timer.id, 2_000);
    }
    const done = gate();
    const lean = chronos.work((f) => void fires.push(f), { queue: 'lean' });
    const kept = chronos.work(
      (f) => {
        fires.push(f);
        done.open();
      },
      { queue: 'kept', history: true },
    );
    await done.promise;
    await until(() => fires.length === 2, 'both fires');
    await Promise.all([lean.stop(), kept.stop()]);
    expect(fires.map((f) => [f.key, f.attempt]).sort()).toEqual([
      ['kept', 1],
      ['lean', 1],
    ]);
    const kept1 = await chronos.get('kept');
    const wakes = await t.db.query<{ alarm_id: string }>(
      sql('test_wakes_alarm_ids', 'SELECT alarm_id::text AS alarm_id FROM chronos.wakes'),
    );
    expect(wakes.map((w) => w.alarm_id)).toEqual([kept1!.id]);
    expect((await chronos.get('lean'))?.status).toBe('fired');
    await chronos.close();
  });
});
