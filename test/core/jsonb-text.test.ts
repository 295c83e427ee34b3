/**
 * `jsonbText` (json.ts) renders a payload as the database's JSONB would give it back, so a batch
 * of the library's timers need not have the database send every payload back. Wherever it gives
 * a text, that text must be exactly what the database says; where it is unsure it gives none.
 * Checked against each backend's own `::jsonb::text`, for generated values and awkward ones.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { jsonbText } from '../../packages/chronos-timers/src/json.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';

const asStored = sql('test_jsonb_text', 'SELECT $1::jsonb::text AS text');

const awkward: unknown[] = [
  {},
  [],
  { b: 1, a: 2, aa: 3, B: 4, é: 5, z: 6, ['\u{1F600}']: 7, ab: 8, ä: 9 },
  { nested: { y: [1, { q: null, p: true }], x: [] }, '': 'empty key' },
  Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${(i * 7919) % 1000}`, i])),
  { s: 'quote " backslash \\ slash / tab \t newline \n bell \u0007 del \u007f é 漢 \u{1F600}' },
  { n: [0, -0, 1, -1, 0.1, 1.5, 123456789, 2 ** 53, 2 ** 53 + 2, 1e20, 0.000001, -12.25, 1 / 3] },
  { exp: 1e21 },
  { tiny: 1e-7 },
  { date: new Date(0) },
  { missing: undefined },
  { lone: '\ud800' },
  { big: Number.MAX_VALUE },
  { inf: Number.POSITIVE_INFINITY },
  Object.assign(Object.create(null) as object, { b: 1, a: 2 }),
];

describeEachBackend('jsonbText: what JSONB gives back, or nothing', ({ t }) => {
  const check = async (value: unknown) => {
    const mine = jsonbText(value);
    if (mine === undefined) return false;
    const [row] = await t.db.query<{ text: string }>(asStored, [JSON.stringify(value)]);
    expect(mine, JSON.stringify(value)).toBe(row!.text);
    return true;
  };

  it('agrees with the database on awkward values, and leaves exponents, toJSON and undefined to it', async () => {
    const rendered = [];
    for (const value of awkward) rendered.push(await check(value));
    // Rendered here: all but 1e21, 1e-7, the Date, the undefined member, the lone surrogate,
    // MAX_VALUE (an exponent) and Infinity.
    expect(rendered).toEqual([
      true,
      true,
      true,
      true,
      true,
      true,
      true,
      false,
      false,
      false,
      false,
      false,
      false,
      false,
      true,
    ]);
  });

  it('agrees with the database on generated JSON values', async () => {
    let rendered = 0;
    await fc.assert(
      fc.asyncProperty(fc.jsonValue({ maxDepth: 4 }), async (value) => {
        if (await check(value)) rendered++;
      }),
      { numRuns: 300 },
    );
    // Many are rendered here, not merely left to the database (the generator's doubles often
    // have exponents, 1.5e-300 and the like, which are left to it).
    expect(rendered).toBeGreaterThan(100);
  });
});
