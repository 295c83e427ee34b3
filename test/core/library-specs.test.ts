/**
 * What the library takes as a timer's `at` and `payload`, read by plain predicates rather than
 * the wire's schemas, and what it answers: each payload as the database stores it, whether this
 * process could render that text itself (json.ts, `jsonbText`) or had to read it back.
 */
import { expect, it } from 'vitest';
import type { ChronosError } from '../../packages/chronos-timers/src/errors.js';
import { describeEachBackend } from '../support/backends.js';
import { inCallerTransaction, libraryOn } from '../support/library.js';

class Order {
  constructor(readonly id: number) {}
}

describeEachBackend('the library’s at and payload', ({ t }) => {
  it('takes a Date, a string and any plain object; refuses an invalid Date, arrays, Maps and class instances', async () => {
    const chronos = await libraryOn(t);
    const soon = new Date(Date.now() + 600_000);
    const bare = Object.create(null) as Record<string, unknown>;
    bare.z = 1;
    bare.a = 'x';
    const made = await chronos.scheduleMany(null, [
      { key: 'date', at: soon },
      { key: 'text', at: soon.toISOString() },
      { key: 'bare', inSeconds: 600, payload: bare },
    ]);
    expect(made.map((a) => a.fireAt!.getTime())).toEqual([
      soon.getTime(),
      soon.getTime(),
      made[2]!.fireAt!.getTime(),
    ]);
    expect(made[2]!.payloadText).toBe('{"a": "x", "z": 1}');

    const refused = await chronos
      .scheduleMany(null, [
        { key: 'a', at: new Date(Number.NaN) },
        { key: 'b', inSeconds: 600, payload: [1, 2] as never },
        { key: 'c', inSeconds: 600, payload: new Map([['a', 1]]) as never },
        { key: 'd', inSeconds: 600, payload: new Order(7) as never },
      ])
      .then(
        () => null,
        (e: unknown) => e as ChronosError,
      );
    expect(refused!.errors.map((e) => e.path)).toEqual([
      'specs.0.at',
      'specs.1.payload',
      'specs.2.payload',
      'specs.3.payload',
    ]);
    expect(refused!.errors[0]!.message).toMatch(/^specs\.0\.at: expected .*or a Date, like/);
    expect(refused!.errors[1]!.message).toMatch(/^specs\.1\.payload: expected a JSON object/);
    await chronos.close();
  });

  it('answers every payload as stored, rendered here or read back, in one batch', async () => {
    const chronos = await libraryOn(t);
    const specs = Array.from({ length: 2_500 }, (_, i) => ({
      key: `p:${i}`,
      inSeconds: 600,
      // Most render here; a Date (toJSON), 1e21 and 1e-7 (exponents) are read back.
      payload:
        i % 500 === 1
          ? { when: new Date(0), i }
          : i % 500 === 2
            ? { big: 1e21, small: 1e-7 }
            : { zeta: i, alpha: 'é', nested: { b: [true, null], a: 1.5 } },
    }));
    const made = await inCallerTransaction(t, (tx) => chronos.scheduleMany(tx, specs));
    for (const i of [0, 1, 2, 999, 1_000, 1_001, 1_002, 2_499]) {
      expect(made[i]!.payloadText).toBe((await chronos.get(`p:${i}`))!.payloadText);
    }
    expect(made[1]!.payloadText).toBe('{"i": 1, "when": "1970-01-01T00:00:00.000Z"}');
    expect(made[2]!.payloadText).toBe('{"big": 1000000000000000000000, "small": 0.0000001}');
    expect(made[0]!.payloadText).toBe('{"zeta": 0, "alpha": "é", "nested": {"a": 1.5, "b": [true, null]}}');
    await chronos.close();
  });
  it('takes rrule, startsAt, endsAt, jitterSeconds and expiresAfterSeconds in camelCase, refusals named as written', async () => {
    const chronos = await libraryOn(t);
    const rule = 'FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0';
    const timer = await inCallerTransaction(t, (tx) =>
      chronos.schedule(tx, {
        key: 'review',
        rrule: rule,
        timezone: 'Europe/Paris',
        startsAt: new Date('2030-01-01T00:00:00+01:00'),
        endsAt: '2030-12-31T23:59:59+01:00',
        jitterSeconds: 300,
        expiresAfterSeconds: 3600,
      }),
    );
    expect(timer).toMatchObject({
      kind: 'rrule',
      rrule: rule,
      startsAt: new Date('2029-12-31T23:00:00Z'),
      endsAt: new Date('2030-12-31T22:59:59Z'),
      jitterSeconds: 300,
      expiresAfterSeconds: 3600,
    });
    // The last Friday of January 2030, 17:00 in Paris, plus a jitter under five minutes.
    const offset = timer.nextFireAt.getTime() - Date.parse('2030-01-25T16:00:00Z');
    expect(offset).toBeGreaterThanOrEqual(0);
    expect(offset).toBeLessThan(300_000);
    expect(await chronos.get('review')).toMatchObject({ rrule: rule, jitterSeconds: 300 });

    const refused = await chronos
      .scheduleMany(null, [
        { key: 'a', rrule: 'FREQ=DAILY;BYHOUR=25' },
        { key: 'b', inSeconds: 60, jitterSeconds: 10 },
      ])
      .then(
        () => null,
        (e: unknown) => e as ChronosError,
      );
    expect(refused!.errors.map((e) => e.path)).toEqual(['specs.0.rrule', 'specs.1.jitterSeconds']);
    expect(refused!.errors[0]!.message).toMatch(/^specs\.0\.rrule: .*BYHOUR=25/);
    expect(await chronos.get('a')).toBeNull();
    await chronos.close();
  });
});
