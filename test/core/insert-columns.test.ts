/**
 * The batch insert writes its columns as array literals of its own (store/alarms.ts): one value
 * for a column the same in every alarm, one element per alarm otherwise. Every awkward text an
 * array literal could mangle — quotes, backslashes, braces, commas, the word NULL, an empty
 * string, a newline, characters beyond the BMP — comes back exactly as it went in, in both
 * shapes, with one-shots and cron alarms (a null fire_at) mixed, and one-shots alone (whose fire
 * time the insert takes from their next fire time).
 */
import { expect, it } from 'vitest';
import { describeEachBackend } from '../support/backends.js';
import { libraryOn } from '../support/library.js';

const AWKWARD = [
  'say "hi"',
  'back\\slash',
  '{a,b}',
  'NULL',
  'null',
  '',
  ' padded ',
  'two\nlines',
  'ünï 🕰',
  '\\"{,}"\\',
  // The separators of the insert's answer (store/alarms.ts), which JSONB's text escapes.
  'unit\u001fsep\u001erecord',
];

describeEachBackend('the batch insert’s columns', ({ t }) => {
  it('awkward text survives, column by column, whether the batch shares a value or not', async () => {
    const chronos = await libraryOn(t);
    const varied = AWKWARD.map((s, i) => ({
      key: `varied:${s}:${i}`,
      label: s,
      ...(i % 2 === 0
        ? { inSeconds: 60 + i }
        : { cron: '0 9 * * *', timezone: i % 4 === 1 ? 'Europe/Paris' : 'UTC' }),
      payload: { text: s, n: i, nested: { quote: '"', slash: '\\' } },
      maxFailures: 1 + i,
    }));
    const shared = AWKWARD.map((s, i) => ({
      key: `shared:${i}`,
      label: 'say "hi" \\ {NULL}',
      inSeconds: 600,
      payload: { same: '{,}' },
    }));
    // One-shots only, each at its own time: the fire time travels empty and is the next one.
    const base = Date.now() + 3_600_000;
    const once = AWKWARD.map((s, i) => ({ key: `once:${i}`, label: s, at: new Date(base + i * 1_001) }));
    for (const specs of [varied, shared, once, [varied[3]!], [once[2]!]]) {
      const made = await chronos.scheduleMany(
        null,
        specs.map((s) => ({ ...s, key: `${s.key}:${specs.length}` })),
      );
      for (const [i, alarm] of made.entries()) {
        const spec = specs[i]!;
        const stored = (await chronos.get(`${spec.key}:${specs.length}`))!;
        expect(stored.id).toBe(alarm.id);
        expect(stored.label).toBe(spec.label);
        expect(stored.idempotencyKey).toBe(`${spec.key}:${specs.length}`);
        expect(stored.payload.parse()).toEqual('payload' in spec ? spec.payload : {});
        expect(stored.payload.text).toBe(alarm.payload.text);
        expect(stored.kind).toBe('cron' in spec ? 'cron' : 'once');
        expect(stored.fireAt === null).toBe('cron' in spec);
        expect(stored.timezone).toBe(('timezone' in spec && spec.timezone) || 'UTC');
        expect(stored.maxFailures).toBe(('maxFailures' in spec && spec.maxFailures) || 5);
        expect(stored.nextFireAt?.getTime()).toBe(alarm.nextFireAt?.getTime());
        expect(stored.fireAt?.getTime()).toBe(alarm.fireAt?.getTime());
        if ('at' in spec) expect(stored.fireAt?.getTime()).toBe(spec.at.getTime());
        if (stored.kind === 'once') expect(stored.fireAt?.getTime()).toBe(stored.nextFireAt.getTime());
      }
    }
    await chronos.close();
  });
});
