/**
 * Migration 0016: a library timer has no entry in alarms_owner_idx, and the statements that read
 * one owner's alarms reach them on the indexes that do hold them — never by reading the table —
 * when planned generically, as a prepared statement is after its fifth run.
 */
import { expect, it } from 'vitest';
import { OWNER_STATEMENTS } from '../../packages/chronos-timers/src/store/alarms.js';
import { sql, type Db, type Statement } from '../../packages/chronos-timers/src/store/driver/db.js';
import { dueOfOwner } from '../../packages/chronos-timers/src/store/fire-stats.js';
import { describeEachBackend } from '../support/backends.js';
import { OWNER } from '../support/harness.js';

// Enough rows of each kind, of enough owners, that reading the table would cost more than the
// indexes: a tenth made through the service (of 40 owners, OWNER among them), the rest library
// timers (of 20 applications' owners).
const fill = sql(
  'test_owner_index_fill',
  `INSERT INTO chronos.alarms (owner_did, user_id, kind, fire_at, next_fire_at, scheduled_for, idempotency_key,
     source, queue)
   SELECT CASE WHEN i % 400 = 0 THEN $1 WHEN i % 10 = 0 THEN 'did:example:agent-' || (i % 39)
               ELSE 'did:example:app-' || (i % 20) END,
     '', 'once', now() + i * interval '1 s', now() + i * interval '1 s', now() + i * interval '1 s',
     CASE WHEN i % 10 = 0 THEN '' ELSE 'app:' || i END,
     CASE WHEN i % 10 = 0 THEN 'api' ELSE 'library' END, CASE WHEN i % 10 = 0 THEN 'router' ELSE 'default' END
   FROM generate_series(1, 5000) AS i`,
);

const ownerIndex = sql(
  'test_owner_index_def',
  `SELECT pg_get_indexdef('chronos.alarms_owner_idx'::regclass) AS def`,
);

async function genericPlan(db: Db, statement: Statement, args: string): Promise<string> {
  return db.transaction(async (tx) => {
    await tx.exec('SET LOCAL plan_cache_mode = force_generic_plan');
    await tx.exec(`PREPARE owner_plan AS ${statement.text}`);
    const rows = await tx.query<Record<string, string>>(
      sql(`test_owner_explain_${statement.name}`, `EXPLAIN EXECUTE owner_plan(${args})`),
    );
    await tx.exec('DEALLOCATE owner_plan');
    return rows.map((r) => Object.values(r)[0]).join('\n');
  });
}

describeEachBackend('the owner index leaves library timers out', ({ t }) => {
  it('an owner’s listing, bulk cancel and due schedules read indexes only', async () => {
    await t.db.query(fill, [OWNER.did]);
    await t.db.exec('ANALYZE chronos.alarms');
    const owner = `'${OWNER.did}'`;
    const list = await genericPlan(t.db, OWNER_STATEMENTS.list, `${owner}, NULL, NULL, NULL, 50, NULL`);
    expect(list).toContain('alarms_owner_idx');
    expect(list).toContain('alarms_idempotency_idx');
    const cancel = await genericPlan(t.db, OWNER_STATEMENTS.bulkCancel, `${owner}, NULL, 'x', NULL`);
    const due = await genericPlan(t.db, dueOfOwner, `${owner}, now(), 100`);
    for (const plan of [list, cancel, due]) expect(plan).not.toMatch(/Seq Scan on alarms/);
    // And the index these statements lean on holds no library timer.
    const [index] = await t.db.query<{ def: string }>(ownerIndex);
    expect(index!.def).toMatch(/\(owner_did, created_at DESC\) WHERE \(source <> 'library'::text\)$/);
  });
});
