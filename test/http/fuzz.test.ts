/**
 * Random and mutated bodies thrown at POST and PATCH: never a 5xx, every refusal a problem body,
 * and a refused request writes nothing.
 */
import fc from 'fast-check';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { describeEachBackend } from '../support/backends.js';
import { call, isProblem, openTestApp, snapshot, type TestApp } from './support.js';
import { ALARM_FIELDS, mutate } from '../support/mutations.js';
import { storedForm } from '../../packages/chronos-timers/src/json.js';

const valid = fc.constantFrom<Record<string, unknown>>(
  { in_seconds: 600 },
  { in_seconds: 1, label: 'x', payload: { a: 1 } },
  { cron: '*/5 * * * *', timezone: 'Europe/Paris' },
  { cron: '@every 1h30m', wake_message: 'hi', require_ack: false },
  { at: '2031-03-14T09:00:00+01:00', idempotency_key: 'k', max_failures: 3 },
  { cron: '@daily', conversation_id: 'c', payload: { nested: { deep: [1, 2, { x: null }] } } },
);

// Values that stress parsers and validators: edge numbers, odd strings, wrong types.
const nasty = fc.oneof(
  fc.jsonValue(),
  fc.constantFrom(
    0,
    -1,
    1e308,
    -0,
    2 ** 53 + 1,
    315_360_000,
    315_360_001,
    '',
    ' ',
    '\u0000',
    '\ud800',
    'a\udfffb',
    '\ud83d\ude00',
    'did:matrix:x',
    '2027-02-30T25:61:00Z',
    '1970-01-01T00:00:00Z',
    '9999-12-31T23:59:59+14:00',
    '@every 0s',
    '@every 999999999h',
    '* * * * * *',
    '60 24 32 13 8',
    'Mars/Olympus_Mons',
    '__proto__',
    'constructor',
    [],
    {},
    null,
    true,
  ),
  fc.string({ maxLength: 300 }),
  fc.string({ unit: 'binary', maxLength: 50 }),
);

const mutated = fc
  .tuple(
    valid,
    fc.array(
      fc.oneof(
        fc.record({ op: fc.constant('set' as const), key: fc.constantFrom(...ALARM_FIELDS), value: nasty }),
        fc.record({ op: fc.constant('drop' as const), key: fc.constantFrom(...ALARM_FIELDS) }),
        fc.record({
          op: fc.constant('set' as const),
          key: fc.constant('payload'),
          value: fc.dictionary(
            fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom('\ud800', '__proto__')),
            nasty,
            {
              maxKeys: 4,
            },
          ),
        }),
        fc.record({
          op: fc.constant('add' as const),
          key: fc.oneof(
            fc.string({ maxLength: 20 }),
            fc.constantFrom('__proto__', 'constructor', 'toString'),
          ),
          value: nasty,
        }),
      ),
      { maxLength: 4 },
    ),
  )
  .map(([base, ops]) => JSON.stringify(mutate(base, ops)));

// Raw text too: broken JSON, truncated bodies, lone values, duplicate keys.
const bodies = fc.oneof(
  { weight: 5, arbitrary: mutated },
  { weight: 2, arbitrary: fc.jsonValue().map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
  { weight: 1, arbitrary: mutated.map((text) => text.slice(0, Math.max(1, Math.floor(text.length / 2)))) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(nasty, nasty)
      .map(
        ([a, b]) =>
          `{"payload": ${JSON.stringify(a) ?? 'null'}, "in_seconds": 60, "payload": ${JSON.stringify(b) ?? 'null'}}`,
      ),
  },
);

// Payloads that JSONB expands or cannot take (issue 45): numbers with exponents, nesting around
// the 64-level limit, NUL in any text field. `bad` says whether the body must be refused.
const exponent = fc
  .tuple(
    fc.constantFrom('1', '-2.5', '0', '9.99'),
    fc.constantFrom('e', 'E', 'e+', 'e-'),
    fc.integer({ min: 0, max: 120_000 }),
  )
  .map(([m, e, x]) => `${m}${e}${x}`);
const expanding = fc
  .record({
    numbers: fc.array(exponent, { maxLength: 8 }),
    depth: fc.integer({ min: 1, max: 120 }),
    nulIn: fc.option(
      fc.constantFrom('label', 'wake_message', 'conversation_id', 'idempotency_key', 'payload'),
      {
        nil: undefined,
      },
    ),
  })
  .map(({ numbers, depth, nulIn }) => {
    const inner = `{"n": [${numbers.join(', ')}]${nulIn === 'payload' ? ', "s": "a\\u0000"' : ''}}`;
    const payload = `${'{"a": '.repeat(depth - 1)}${inner}${'}'.repeat(depth - 1)}`;
    const text = nulIn && nulIn !== 'payload' ? `, "${nulIn}": "x\\u0000"` : '';
    return { body: `{"in_seconds": 60, "payload": ${payload}${text}}`, payload, nulIn };
  });

describeEachBackend('HTTP: random bodies never make a 5xx', ({ t }) => {
  let h: TestApp;
  let target: string;
  beforeEach(async () => {
    h = await openTestApp(t.db);
    const r = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { cron: '@every 2h' } });
    target = r.body.alarm.id;
  });
  afterEach(async () => {
    await h.close();
  });

  it('numbers with exponents, depth and NUL: a 400 on the field exactly when the stored form breaks a limit', async () => {
    await fc.assert(
      fc.asyncProperty(expanding, async ({ body, payload, nulIn }) => {
        const before = await snapshot(t.db);
        const answer = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body });
        expect(answer.text).not.toMatch(/database refused/);
        const stored = storedForm(payload);
        const bad =
          nulIn !== undefined || stored.depth > 64 || stored.bytes > 65_536 || stored.badNumber !== undefined;
        if (!bad) {
          expect(answer.status, answer.text).toBe(201);
          return;
        }
        expect(answer.status, answer.text).toBe(400);
        expect(answer.body.errors.map((e: { path: string }) => e.path)).toContain(nulIn ?? 'payload');
        expect(await snapshot(t.db)).toEqual(before);
      }),
      { numRuns: 60 },
    );
  }, 120_000);

  for (const method of ['POST', 'PATCH'] as const) {
    it(`${method}: any body answers 2xx or a 4xx problem, and a refusal writes nothing`, async () => {
      await fc.assert(
        fc.asyncProperty(bodies, async (body) => {
          const before = await snapshot(t.db);
          const url = method === 'POST' ? '/v1/alarms' : `/v1/alarms/${target}`;
          const answer = await call(h.app, method, url, { headers: h.auth, body });
          expect(answer.status, `${answer.status} for ${body}: ${answer.text}`).toBeLessThan(500);
          if (answer.status >= 400) {
            expect(isProblem(answer, answer.status), answer.text).toBe(true);
            // Refused by validation, not by the database's last line of defence.
            expect(answer.body.detail, body).not.toMatch(/database refused/);
            expect(await snapshot(t.db)).toEqual(before);
          } else {
            expect(answer.body.alarm.id).toMatch(/^[0-9a-f-]{36}$/);
          }
        }),
        { numRuns: 150 },
      );
    }, 120_000);
  }
});
