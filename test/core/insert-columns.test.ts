/**
 * The batch insert writes its columns as array literals of its own (store/alarm-inserts.ts): one value
 * for a column the same in every alarm, one element per alarm otherwise. Every awkward text an
 * array literal could mangle — quotes, backslashes, braces, commas, the word NULL, an empty
 * string, a newline, characters beyond the BMP — comes back exactly as it went in, in both
 * shapes, with one-shots and cron alarms (a null fire_at) mixed, and one-shots alone (whose fire
 * time the insert takes from their next fire time).
 *
 * A batch large enough to go in parts on a caller's transaction is copied instead on PostgreSQL
 * (`COPY … FROM STDIN` in binary, store/driver/copy-rows.ts): every column then comes back as it went
 * in too, the columns a part shares encoded once or per row, a payload whose stored text only
 * the database knows read back, and the answer the same as the stored rows.
 */
import { expect, it } from 'vitest';
import type { Timer } from '../../packages/chronos-timers/src/library.js';
import { describeEachBackend } from '../support/backends.js';
import { inCallerTransaction, libraryOn } from '../support/library.js';

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
  // The separators of the insert's answer (store/alarm-inserts.ts), which JSONB's text escapes.
  'unit\u001fsep\u001erecord',
  // A binary copy writes short ASCII a byte a character and the rest through the encoder
  // (store/driver/copy-rows.ts): a text that turns non-ASCII inside the short length, and one past it.
  `${'a'.repeat(40)}€ after forty`,
  `${'b'.repeat(70)} and é past the seventieth`,
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
        expect(stored.payload).toEqual('payload' in spec ? spec.payload : {});
        expect(stored.payloadText).toBe(alarm.payloadText);
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

  it('a batch in parts on a caller’s transaction: every column as it went in, the answer as stored', async () => {
    const chronos = await libraryOn(t);
    const base = Date.now() + 3_600_000;
    // More than one part (the first holds 250), each column varying from timer to timer.
    const varied = Array.from({ length: 1_300 }, (_, i) => {
      const s = AWKWARD[i % AWKWARD.length]!;
      return {
        key: `copy-varied:${s}:${i}`,
        label: s,
        conversationId: AWKWARD[(i + 3) % AWKWARD.length]!,
        wakeMessage: AWKWARD[(i + 5) % AWKWARD.length]!,
        ...(i % 3 === 0
          ? { cron: '0 9 * * *', timezone: i % 2 === 0 ? 'Europe/Paris' : 'UTC' }
          : { at: new Date(base + i * 997) }),
        // 1e21: a number whose JSONB text only the database gives (json.ts, jsonbText).
        payload: i % 7 === 0 ? { big: 1e21, s } : { s, n: i },
        maxFailures: 1 + (i % 100),
        // Acknowledgements are the router's: its queue, so that the flag can be true.
        queue: 'router',
        requireAck: i % 2 === 1,
      };
    });
    // Every column but the key and the time the same, none of them the table's default.
    const shared = Array.from({ length: 1_300 }, (_, i) => ({
      key: `copy-shared:${i}`,
      label: 'say "hi" \\ {NULL}',
      conversationId: 'ünï 🕰',
      wakeMessage: 'two\nlines',
      at: new Date(base + i),
      payload: { same: '{,}', big: 1e21 },
      maxFailures: 7,
      queue: 'router',
      requireAck: true,
    }));
    for (const specs of [varied, shared]) {
      const made = await inCallerTransaction(t, (tx) => chronos.scheduleMany(tx, specs));
      expect(made).toHaveLength(specs.length);
      for (let i = 0; i < specs.length; i += i < 260 ? 1 : 13) {
        const spec = specs[i]!;
        const alarm = made[i]!;
        const stored = (await chronos.get(spec.key))!;
        expect(comparable(alarm)).toEqual(comparable(stored));
        expect(stored.label).toBe(spec.label);
        expect(stored.conversationId).toBe(spec.conversationId);
        expect(stored.wakeMessage).toBe(spec.wakeMessage);
        expect(stored.payload).toEqual(spec.payload);
        expect(stored.maxFailures).toBe(spec.maxFailures);
        expect(stored.requireAck).toBe(spec.requireAck);
        expect(stored.kind).toBe('cron' in spec ? 'cron' : 'once');
        if ('at' in spec) expect(stored.fireAt?.getTime()).toBe(spec.at.getTime());
        if ('timezone' in spec) expect(stored.timezone).toBe(spec.timezone);
      }
    }
    await chronos.close();
  });
});

/** What the answer and the stored alarm must agree on: every field, times as instants. */
function comparable(alarm: Timer): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(alarm)) {
    out[name] = value instanceof Date ? value.getTime() : name === 'payload' ? alarm.payloadText : value;
  }
  return out;
}
