import fc from 'fast-check';
import { expect, it } from 'vitest';
import { arrayLiteral, textElement } from './db.js';

/** The literal element by element, as arrayLiteral writes it when no shortcut applies. */
const byElement = <T>(values: readonly T[], element: (v: NonNullable<T>) => string) =>
  `{${values.map((v) => (v === null || v === undefined ? 'NULL' : element(v as NonNullable<T>))).join(',')}}`;

it('joins plain texts and bare values at once into the same literal as element by element', () => {
  const text = fc.oneof(fc.string(), fc.constantFrom('', 'a"b', 'back\\slash', '{,}', 'NULL', ' '));
  fc.assert(
    fc.property(fc.array(fc.option(text, { nil: null })), (values) => {
      expect(arrayLiteral(values, textElement)).toBe(byElement(values, textElement));
    }),
  );
  fc.assert(
    fc.property(
      fc.array(fc.option(fc.oneof(fc.integer(), fc.double(), fc.uuid()), { nil: null })),
      (values) => {
        expect(arrayLiteral(values, String)).toBe(byElement(values, String));
      },
    ),
  );
  expect(arrayLiteral([], textElement)).toBe('{}');
  expect(arrayLiteral([''], textElement)).toBe('{""}');
  expect(arrayLiteral(['a', 'b'], textElement)).toBe('{"a","b"}');
  expect(arrayLiteral([1, null, 3], String)).toBe('{1,NULL,3}');
});
