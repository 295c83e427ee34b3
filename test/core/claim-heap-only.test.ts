import { expect, it } from 'vitest';
import { alarmsClaimDue } from '../../packages/chronos-timers/src/store/claims.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import { OWNER } from '../support/harness.js';

// Alarms written together, on the same pages, and due together: the case the free space kept on
// each page of `alarms` (migration 0007) is for.
const writeDue = sql(
  'test_write_due_together',
  `INSERT INTO chronos.alarms (owner_did, user_id, kind, fire_at, next_fire_at, scheduled_for, idempotency_key, source,
     queue)
   SELECT $2, $3, 'once', now(), now(), now(), 'together-' || i, 'library', 'router'
   FROM generate_series(1, $1::int) AS i`,
);

// Counted by the transaction itself, so nothing waits for the statistics to be flushed.
const updates = sql(
  'test_alarm_updates_in_tx',
  `SELECT n_tup_upd::int AS updated, n_tup_hot_upd::int AS heap_only
   FROM pg_stat_xact_user_tables WHERE relname = 'alarms'`,
);

describeEachBackend('claim', ({ t }) => {
  it('a batch of alarms written and due together is claimed with heap-only updates: no index entry added', async () => {
    await t.db.query(writeDue, [200, OWNER.did, OWNER.userId]);
    const counts = await t.db.transaction(async (tx) => {
      const claims = await alarmsClaimDue(tx, 'router', 200, 30_000);
      expect(claims).toHaveLength(200);
      return (await tx.query<{ updated: number; heap_only: number }>(updates))[0];
    });
    expect(counts).toEqual({ updated: 200, heap_only: 200 });
  });
});
