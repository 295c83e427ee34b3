/**
 * An outcome is written where its claim left the alarm's row (`ctid`), and by id when the row has
 * moved since: another writer updated the alarm while it was being delivered, in a way that keeps
 * its lease (a change of label, payload or message; not of its time). The fire must be recorded
 * all the same, not left under a lease to lapse and fire again. (With history, outcomes are written
 * by id alone: the case is kept here as the check that a moved row changes nothing there either.)
 */
import { expect, it } from 'vitest';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { ATTEMPTS_OF_WAKE } from '../../packages/chronos-timers/src/store/wakes.js';
import type { ClaimedAlarm } from '../../packages/chronos-timers/src/types.js';
import { alarmsClaimDue } from '../../packages/chronos-timers/src/store/claims.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import {
  alarmRow,
  backdate,
  countingDb,
  makeDispatcher,
  makeService,
  OWNER,
  RecordingReceiver,
} from '../support/harness.js';
import { libraryOn } from '../support/library.js';

const api = { source: 'api' } as const;
const placeOf = sql('test_alarm_ctid', 'SELECT ctid::text AS place FROM chronos.alarms WHERE id = $1');

const loadDue = sql(
  'test_load_due_timers',
  `INSERT INTO chronos.alarms (owner_did, user_id, kind, fire_at, next_fire_at, scheduled_for, idempotency_key,
     payload, source, queue)
   SELECT 'did:matrix:00000000-0000-0000-0000-000000000000:lib', '', 'once', t, t, t, 'due-' || i, '{}'::jsonb,
     'library', 'default'
   FROM generate_series(1, $1::int) AS i, LATERAL (SELECT now() - interval '1 second') AS d(t)`,
);

describeEachBackend('outcomes at the claimed row', ({ t, kind }) => {
  const place = async (id: string) => (await t.db.query<{ place: string }>(placeOf, [id]))[0]!.place;

  it('with history (recorded by id): a delivery whose alarm was relabelled meanwhile is recorded, its wake delivered', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 1 }, api);
    await backdate(t.db, alarm.id, 2_000);
    const counted = countingDb(t.db);
    const receiver = new RecordingReceiver();
    let claimedAt = '';
    receiver.behave = async (fire) => {
      claimedAt = await place(fire.alarm.id);
      await service.update(OWNER, { id: fire.alarm.id }, { label: 'relabelled in flight' }, api);
      return { ok: true };
    };
    expect(await makeDispatcher(counted.db, receiver).runOnce()).toBe(1);
    expect(await place(alarm.id)).not.toBe(claimedAt);
    expect(counted.statements).toEqual(['alarms_claim_due', 'alarms_record_outcomes']);
    const row = await alarmRow(t.db, alarm.id);
    expect(row).toMatchObject({ status: 'fired', claimed_at: null, lease_token: null });
    const [wake] = await t.db.query<{ status: string; attempts: number }>(
      sql('test_wake_of', 'SELECT status, attempts FROM chronos.wakes WHERE alarm_id = $1'),
      [alarm.id],
    );
    expect(wake).toMatchObject({ status: 'delivered', attempts: 1 });
    const [attempts] = await t.db.query<{ n: number }>(
      sql(
        'test_attempt_rows',
        `SELECT count(*)::int AS n FROM chronos.wakes w CROSS JOIN LATERAL ${ATTEMPTS_OF_WAKE} a WHERE w.alarm_id = $1`,
      ),
      [alarm.id],
    );
    expect(attempts!.n).toBe(1);
  });

  it('without history: a fire whose timer got a new payload meanwhile is recorded by id; one not touched, at its row', async () => {
    const chronos = await libraryOn(t);
    const moved = await chronos.schedule(null, { key: 'moved', inSeconds: 1 });
    const still = await chronos.schedule(null, { key: 'still', inSeconds: 1 });
    await backdate(t.db, moved.id, 2_000);
    await backdate(t.db, still.id, 2_000);
    const counted = countingDb(t.db);
    const receiver = new RecordingReceiver<ClaimedAlarm>();
    // Both deliveries end once the change is made, so their outcomes are recorded together.
    let change: Promise<unknown> | null = null;
    receiver.behave = async () => {
      await (change ??= chronos.reschedule(null, 'moved', { payload: { in: 'flight' } }));
      return { ok: true };
    };
    const worker = makeDispatcher(counted.db, receiver, { queue: 'default', history: false });
    expect(await worker.runOnce()).toBe(2);
    expect(counted.statements).toEqual([
      'alarms_claim_due_untracked',
      'alarms_record_outcomes_untracked_at_row',
      'alarms_record_outcomes_untracked',
    ]);
    for (const id of [moved.id, still.id]) {
      expect(await alarmRow(t.db, id)).toMatchObject({
        status: 'fired',
        claimed_at: null,
        lease_token: null,
      });
    }
  });

  it('finished timers kept for no time: a fired one-shot changed meanwhile is deleted by id', async () => {
    const chronos = await libraryOn(t);
    const timer = await chronos.schedule(null, { key: 'gone', inSeconds: 1 });
    await backdate(t.db, timer.id, 2_000);
    const counted = countingDb(t.db);
    const receiver = new RecordingReceiver<ClaimedAlarm>();
    receiver.behave = async () => {
      await chronos.reschedule(null, 'gone', { payload: { in: 'flight' } });
      return { ok: true };
    };
    const worker = makeDispatcher(counted.db, receiver, {
      queue: 'default',
      history: false,
      deleteFired: true,
    });
    expect(await worker.runOnce()).toBe(1);
    expect(counted.statements).toEqual([
      'alarms_claim_due_untracked',
      'alarms_delete_fired_at_row',
      'alarms_delete_fired',
    ]);
    await expect(alarmRow(t.db, timer.id)).rejects.toThrow(/no alarm/);
  });

  it('a fenced outcome stays fenced when looked for by id too: a timer rescheduled in flight keeps its new time', async () => {
    const chronos = await libraryOn(t);
    const timer = await chronos.schedule(null, { key: 'moved-on', inSeconds: 1 });
    await backdate(t.db, timer.id, 2_000);
    const later = new Date(Date.now() + 3_600_000);
    const receiver = new RecordingReceiver<ClaimedAlarm>();
    receiver.behave = async () => {
      await chronos.reschedule(null, 'moved-on', { at: later });
      return { ok: true };
    };
    expect(await makeDispatcher(t.db, receiver, { queue: 'default', history: false }).runOnce()).toBe(1);
    const row = await alarmRow(t.db, timer.id);
    expect(row).toMatchObject({ status: 'active', claimed_at: null, lease_token: null });
    expect(new Date(row.next_fire_at as string | Date).getTime()).toBe(later.getTime());
  });

  postgresOnly(
    kind,
    'claims at once need several connections',
    'claims made at once by four workers, each updating the rows it locked where it found them, never take a timer twice',
    async () => {
      await t.db.query(loadDue, [600]);
      const taken = new Map<string, number>();
      for (let round = 0; round < 20 && taken.size < 600; round++) {
        const claims = await Promise.all(
          Array.from({ length: 4 }, () => alarmsClaimDue(t.db, 'default', 100, 30_000, false)),
        );
        for (const c of claims.flat()) taken.set(c.alarm.id, (taken.get(c.alarm.id) ?? 0) + 1);
      }
      expect(taken.size).toBe(600);
      expect([...taken.values()].filter((n) => n > 1)).toEqual([]);
    },
  );
});
