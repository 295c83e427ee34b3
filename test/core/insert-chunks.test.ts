/**
 * A large batch on a caller's transaction goes to PostgreSQL as several statements, each built
 * while the one before runs (store/alarm-inserts.ts, `alarmsInsert`). It must answer exactly as one
 * statement would: in order, a key given twice answered with the first one's alarm, and all or
 * nothing — a statement refused part-way leaves none of the batch once the caller rolls back.
 * Its specs are read part by part as the parts before them are written, so a spec refused in a
 * late part finds earlier parts written: those are taken back, and the caller's transaction goes
 * on as if the call had never been made. The parts go first without `ON CONFLICT`: a key taken
 * already sends the batch back to its savepoint, to be written again with it.
 * On PGlite the same batch is one statement; the cases hold there too.
 */
import { afterEach, expect, it } from 'vitest';
import { sql, type PgDb } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import { appOrders, inCallerTransaction, insertOrder, libraryOn } from '../support/library.js';
import type { ChronosError } from '../../packages/chronos-timers/src/errors.js';

/** More than two statements' worth (the service sends 1,000 alarms a statement). */
const SIZE = 4_500;

const count = sql('test_count_alarms', 'SELECT count(*)::int AS n FROM chronos.alarms');
const refuseLabel = sql(
  'test_refuse_label',
  `ALTER TABLE chronos.alarms ADD CONSTRAINT test_refuse_label CHECK (label <> 'refuse me')`,
);
const allowLabel = sql(
  'test_allow_label',
  'ALTER TABLE chronos.alarms DROP CONSTRAINT IF EXISTS test_refuse_label',
);

describeEachBackend('a batch larger than one statement', ({ kind, t }) => {
  afterEach(async () => {
    await t.db.query(allowLabel);
  });

  it('answers in order, a key given twice with the first one’s alarm, every alarm stored', async () => {
    const chronos = await libraryOn(t);
    const specs = Array.from({ length: SIZE }, (_, i) => ({
      key: i === 4_321 ? 'k:7' : `k:${i}`,
      label: `n${i}`,
      inSeconds: 600 + (i % 50),
      payload: { i },
    }));
    const made = await inCallerTransaction(t, (tx) => chronos.scheduleMany(tx, specs));
    expect(made).toHaveLength(SIZE);
    for (const [i, alarm] of made.entries()) {
      if (i === 4_321) continue;
      expect(alarm.label).toBe(`n${i}`);
      expect(alarm.payload).toEqual({ i });
    }
    expect(made[4_321]!.id).toBe(made[7]!.id);
    expect(made[4_321]!.label).toBe('n7');
    expect(new Set(made.map((a) => a.id)).size).toBe(SIZE - 1);
    const [{ n }] = (await t.db.query(count)) as [{ n: number }];
    expect(n).toBe(SIZE - 1);
    expect((await chronos.get('k:4499'))!.id).toBe(made[4_499]!.id);
    await chronos.close();
  });

  it('one payload for the whole batch: every alarm answers it as stored, a taken key its own alarm', async () => {
    const chronos = await libraryOn(t);
    const earlier = await inCallerTransaction(t, (tx) =>
      chronos.scheduleMany(tx, [
        { key: 'k:10', inSeconds: 600, payload: { earlier: true } },
        { key: 'k:2500', inSeconds: 600, payload: { earlier: true } },
      ]),
    );
    // Written by a JavaScript object, stored as JSONB: its keys come back in JSONB's order.
    const specs = Array.from({ length: SIZE }, (_, i) => ({
      key: `k:${i}`,
      inSeconds: 600,
      payload: { zeta: 1, a: [1.5, 'x'] },
    }));
    const made = await inCallerTransaction(t, (tx) => chronos.scheduleMany(tx, specs));
    const stored = (await chronos.get('k:0'))!.payloadText;
    expect(stored).toBe('{"a": [1.5, "x"], "zeta": 1}');
    for (const [i, alarm] of made.entries()) {
      if (i === 10 || i === 2_500) continue;
      expect(alarm.payloadText).toBe(stored);
    }
    for (const i of [0, 11, 2_499, 2_501, 4_499]) expect((await chronos.get(`k:${i}`))!.id).toBe(made[i]!.id);
    expect(made[10]!.id).toBe(earlier[0]!.id);
    expect(made[2_500]!.id).toBe(earlier[1]!.id);
    expect(made[2_500]!.payloadText).toBe('{"earlier": true}');
    // Every alarm written in the one-payload batch: nothing per row comes back, ids still right.
    const fresh = Array.from({ length: SIZE }, (_, i) => ({ key: `f:${i}`, inSeconds: 600 }));
    const all = await inCallerTransaction(t, (tx) => chronos.scheduleMany(tx, fresh));
    for (const i of [0, 999, 1_000, 4_499]) {
      const got = (await chronos.get(`f:${i}`))!;
      expect(all[i]!.id).toBe(got.id);
      expect(all[i]!.payloadText).toBe(got.payloadText);
    }
    await chronos.close();
  });

  it('batches of one statement (99, 100, 260 timers) answer the same way: a key given twice, a key taken, a refusal', async () => {
    const chronos = await libraryOn(t);
    for (const size of [99, 100, 260]) {
      const [earlier] = await inCallerTransaction(t, (tx) =>
        chronos.scheduleMany(tx, [{ key: `s${size}:40`, inSeconds: 600, label: 'earlier' }]),
      );
      const specs = Array.from({ length: size }, (_, i) => ({
        key: i === size - 1 ? `s${size}:3` : `s${size}:${i}`,
        label: `n${i}`,
        inSeconds: 600,
        payload: { i },
      }));
      const made = await inCallerTransaction(t, (tx) => chronos.scheduleMany(tx, specs));
      expect(made).toHaveLength(size);
      expect(made[40]!.id).toBe(earlier!.id);
      expect(made[40]!.label).toBe('earlier');
      expect(made[size - 1]!.id).toBe(made[3]!.id);
      for (const i of [0, 39, 41, size - 2]) {
        const got = (await chronos.get(`s${size}:${i}`))!;
        expect(got.id).toBe(made[i]!.id);
        expect(got.label).toBe(`n${i}`);
        expect(made[i]!.payload).toEqual({ i });
      }
      // A refusal in the batch keeps none of it.
      specs[size - 2] = { key: `s${size}:x`, inSeconds: -1 } as never;
      const refused = await inCallerTransaction(t, (tx) =>
        chronos.scheduleMany(tx, specs).catch((e: unknown) => e as ChronosError),
      );
      expect((refused as ChronosError).errors.map((e) => e.path)).toEqual([`specs.${size - 2}.inSeconds`]);
    }
    // Each size left its earlier alarm and its batch less the key given twice, and nothing refused.
    const [{ n }] = (await t.db.query(count)) as [{ n: number }];
    expect(n).toBe(99 - 1 + 100 - 1 + 260 - 1);
    await chronos.close();
  });

  it('a key taken in a late part: the batch is written again around it, the caller’s own writes before and after kept', async () => {
    const chronos = await libraryOn(t);
    const orders = await appOrders(t);
    const [earlier] = await inCallerTransaction(t, (tx) =>
      chronos.scheduleMany(tx, [{ key: 'k:4400', inSeconds: 600, label: 'earlier' }]),
    );
    const specs = Array.from({ length: SIZE }, (_, i) => ({ key: `k:${i}`, inSeconds: 600, label: `n${i}` }));
    const made = await inCallerTransaction(t, async (tx) => {
      await insertOrder(tx, 1);
      const answer = await chronos.scheduleMany(tx, specs);
      await insertOrder(tx, 2);
      return answer;
    });
    expect(await orders.count()).toBe(2);
    expect(made[4_400]!.id).toBe(earlier!.id);
    expect(made[4_400]!.label).toBe('earlier');
    expect(((await t.db.query(count)) as [{ n: number }])[0].n).toBe(SIZE);
    for (const i of [0, 999, 4_399, 4_401, 4_499]) {
      const got = (await chronos.get(`k:${i}`))!;
      expect(got.id).toBe(made[i]!.id);
      expect(got.label).toBe(`n${i}`);
    }
    await chronos.close();
  });

  it('a key taken in the first part and a spec refused in the next: the refusal, each field named once', async () => {
    const chronos = await libraryOn(t);
    await inCallerTransaction(t, (tx) => chronos.scheduleMany(tx, [{ key: 'k:10', inSeconds: 600 }]));
    const specs = Array.from({ length: SIZE }, (_, i) => ({ key: `k:${i}`, inSeconds: 600 }) as never);
    specs[300] = { key: 'k:300', inSeconds: -1 } as never;
    const refused = (await inCallerTransaction(t, (tx) =>
      chronos.scheduleMany(tx, specs).catch((e: unknown) => e),
    )) as ChronosError;
    expect(refused.code).toBe('invalid_input');
    expect(refused.errors.map((e) => e.path)).toEqual(['specs.300.inSeconds']);
    expect(((await t.db.query(count)) as [{ n: number }])[0].n).toBe(1);
    await chronos.close();
  });

  postgresOnly(
    kind,
    'a PGlite transaction is always a transaction block',
    'a client outside BEGIN: the parts are written as they go, a taken key answered, a late refusal deletes them',
    async () => {
      const chronos = await libraryOn(t);
      const [earlier] = await inCallerTransaction(t, (tx) =>
        chronos.scheduleMany(tx, [{ key: 'k:2500', inSeconds: 600, label: 'earlier' }]),
      );
      const specs = Array.from({ length: SIZE }, (_, i) => ({ key: `k:${i}`, inSeconds: 600 }) as never);
      const client = await (t.db as PgDb).pool.connect();
      try {
        const made = await chronos.scheduleMany(client, specs);
        expect(made[2_500]!.id).toBe(earlier!.id);
        expect(new Set(made.map((a) => a.id)).size).toBe(SIZE);
        expect(((await t.db.query(count)) as [{ n: number }])[0].n).toBe(SIZE);
        const more = Array.from({ length: SIZE }, (_, i) => ({ key: `m:${i}`, inSeconds: 600 }) as never);
        more[4_000] = { key: 'm:4000', inSeconds: -1 } as never;
        const refused = await chronos.scheduleMany(client, more).catch((e: unknown) => e as ChronosError);
        expect((refused as ChronosError).errors.map((e) => e.path)).toEqual(['specs.4000.inSeconds']);
        expect(((await t.db.query(count)) as [{ n: number }])[0].n).toBe(SIZE);
      } finally {
        client.release();
      }
      await chronos.close();
    },
  );

  it('all or nothing: a statement refused after others ran leaves none of the batch', async () => {
    const chronos = await libraryOn(t);
    await t.db.query(refuseLabel);
    const specs = Array.from({ length: SIZE }, (_, i) => ({
      key: `k:${i}`,
      label: i === SIZE - 3 ? 'refuse me' : `n${i}`,
      inSeconds: 600,
    }));
    let refused: unknown = null;
    await inCallerTransaction(
      t,
      async (tx) => {
        refused = await chronos.scheduleMany(tx, specs).catch((error: unknown) => error);
      },
      { rollback: true },
    );
    expect(String(refused)).toMatch(/test_refuse_label/);
    const [{ n }] = (await t.db.query(count)) as [{ n: number }];
    expect(n).toBe(0);
    await chronos.close();
  });

  it('a spec refused in a late part: every refusal named, nothing of the batch kept, the caller’s transaction goes on', async () => {
    const chronos = await libraryOn(t);
    const orders = await appOrders(t);
    const [earlier] = await inCallerTransaction(t, (tx) =>
      chronos.scheduleMany(tx, [{ key: 'k:5', inSeconds: 600, label: 'earlier' }]),
    );
    const specs = Array.from({ length: SIZE }, (_, i) => ({ key: `k:${i}`, inSeconds: 600 }) as never);
    specs[3_500] = { key: 'k:3500', inSeconds: -1 } as never;
    specs[4_400] = { key: 'k:4400', at: '2020-01-01T00:00:00Z' } as never;
    specs[4_401] = { key: 'k:4401', inSeconds: 60, tz: 'UTC' } as never;
    const refused = await inCallerTransaction(t, async (tx) => {
      await insertOrder(tx, 1);
      const error = await chronos.scheduleMany(tx, specs).catch((e: unknown) => e as ChronosError);
      // The caller's transaction is still usable: its own next write goes in.
      await insertOrder(tx, 2);
      return error as ChronosError;
    });
    expect(refused.code).toBe('invalid_input');
    expect(refused.errors.map((e) => e.path)).toEqual([
      'specs.3500.inSeconds',
      'specs.4400.at',
      'specs.4401.tz',
    ]);
    expect(refused.errors[0]!.message).toMatch(/^specs\.3500\.inSeconds: expected a whole number of seconds/);
    expect(refused.errors[1]!.message).toMatch(/^specs\.4400\.at: expected a time in the future/);
    expect(refused.errors[2]!.message).toMatch(/^specs\.4401\.tz: .*did you mean "timezone"\?/);
    expect(await orders.count()).toBe(2);
    // Only the earlier alarm is left, untouched by the batch that answered its key.
    const [{ n }] = (await t.db.query(count)) as [{ n: number }];
    expect(n).toBe(1);
    const kept = (await chronos.get('k:5'))!;
    expect(kept.id).toBe(earlier!.id);
    expect(kept.label).toBe('earlier');

    // A refusal in the first part writes nothing at all.
    specs[3_500] = { key: 'k:3500', inSeconds: 600 } as never;
    specs[4_400] = { key: 'k:4400', inSeconds: 600 } as never;
    specs[4_401] = { key: 'k:4401', inSeconds: 600 } as never;
    specs[2] = 'not a spec' as never;
    const first = await inCallerTransaction(t, (tx) =>
      chronos.scheduleMany(tx, specs).catch((e: unknown) => e as ChronosError),
    );
    expect((first as ChronosError).errors.map((e) => e.path)).toEqual(['specs.2']);
    expect((first as ChronosError).errors[0]!.message).toBe('specs.2: expected an object, got "not a spec"');
    expect(((await t.db.query(count)) as [{ n: number }])[0].n).toBe(1);
    await chronos.close();
  });
});
