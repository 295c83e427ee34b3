/**
 * Migration 0017: a wake delivered at its first attempt keeps that attempt on its own row, not as
 * a row of `wake_attempts`; the attempt history (`GET /v1/wakes/{id}/attempts`) still lists it,
 * with its start, length and status code. A second recording of the same attempt (a worker fenced
 * out after delivering) changes nothing, and an attempt row 1 written before the migration is
 * listed once, not twice.
 */
import { expect, it } from 'vitest';
import { WakeService } from '../../packages/chronos-timers/src/core/wake-service.js';
import { decideOutcome } from '../../packages/chronos-timers/src/dispatch/outcome.js';
import {
  alarmsClaimDue,
  alarmsRecordOutcomes,
  type Claim,
  type Outcome,
} from '../../packages/chronos-timers/src/store/claims.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import { backdate, makeDispatcher, makeService, OWNER, RecordingReceiver } from '../support/harness.js';

const api = { source: 'api' } as const;
const rowsOf = sql(
  'test_attempt_rows_of_wake',
  'SELECT count(*)::int AS n FROM chronos.wake_attempts WHERE wake_id = $1',
);
const legacyRow = sql(
  'test_legacy_attempt_row',
  `INSERT INTO chronos.wake_attempts (wake_id, attempt, started_at, duration_ms, outcome, status_code, error)
   VALUES ($1, 1, now() - interval '1 minute', 5, 'delivered', 202, '')`,
);

/** What a dispatcher records for a first attempt delivered with `statusCode`, from `startedAt`. */
function delivered(claim: Claim, startedAt: Date, statusCode: number): Outcome {
  const times = { startedAt, finishedAt: new Date(startedAt.getTime() + 12), latenessMs: 0 };
  return decideOutcome(claim, { ok: true, statusCode }, times, { baseMs: 1_000, maxMs: 60_000 });
}

describeEachBackend('a first attempt delivered, kept on its wake', ({ t }) => {
  const attempts = (wakeId: string) =>
    new WakeService({ db: t.db, replyWindowMs: 60_000 }).attempts(OWNER, wakeId);
  const rows = async (wakeId: string) => (await t.db.query<{ n: number }>(rowsOf, [wakeId]))[0]!.n;

  it('writes no attempt row and is listed as attempt 1 with its status code and length', async () => {
    const { alarm } = await makeService(t.db).create(OWNER, { inSeconds: 1 }, api);
    await backdate(t.db, alarm.id, 2_000);
    const receiver = new RecordingReceiver();
    receiver.behave = () => ({ ok: true, statusCode: 204 });
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(1);
    const wakeId = receiver.fires[0]!.wakeId;
    expect(await rows(wakeId)).toBe(0);
    const [only, ...rest] = await attempts(wakeId);
    expect(rest).toEqual([]);
    expect(only).toMatchObject({ attempt: 1, outcome: 'delivered', statusCode: 204, error: null });
    expect(only!.durationMs).toBeGreaterThanOrEqual(0);
    expect(only!.finishedAt.getTime() - only!.startedAt.getTime()).toBe(only!.durationMs);
  });

  it('a second recording of the same attempt changes nothing; an attempt row 1 is listed once', async () => {
    const { alarm } = await makeService(t.db).create(OWNER, { inSeconds: 1 }, api);
    await backdate(t.db, alarm.id, 2_000);
    const [claim] = await alarmsClaimDue(t.db, 'router', 10, 30_000);
    expect(claim!.alarm.id).toBe(alarm.id);
    const first = new Date(Date.now() - 1_000);
    expect(await alarmsRecordOutcomes(t.db, [delivered(claim!, first, 200)])).toEqual(new Set([alarm.id]));
    // Fenced out now (the lease is spent), but the wake still hears of the delivery: as before,
    // the first one recorded stands.
    await alarmsRecordOutcomes(t.db, [delivered(claim!, new Date(), 201)]);
    const listed = await attempts(claim!.wakeId);
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ attempt: 1, statusCode: 200, startedAt: first, durationMs: 12 });
    expect(await rows(claim!.wakeId)).toBe(0);

    // A row for attempt 1 (written before migration 0017) is the one listed.
    await t.db.query(legacyRow, [claim!.wakeId]);
    const again = await attempts(claim!.wakeId);
    expect(again).toHaveLength(1);
    expect(again[0]).toMatchObject({ attempt: 1, statusCode: 202, durationMs: 5 });
  });
});
