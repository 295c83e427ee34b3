import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { timerForm } from '../library.js';
import { formErrors } from './fields.js';

// Strings near every edge a text rule has: empty, NUL, lone surrogates, around 200 units.
const edgyString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 8 }),
  fc.string({ unit: 'grapheme-composite', minLength: 190, maxLength: 210 }),
  fc.constantFrom(
    '',
    '\u0000',
    'a\u0000b',
    '\ud800',
    'x\udc00',
    '\ud83d\ude00',
    'k'.repeat(200),
    'k'.repeat(201),
  ),
);
const anyValue = fc.oneof(edgyString, fc.anything(), fc.date({ noInvalidDate: false }));

describe('a rule with a quick yes (`accepts`)', () => {
  const quick = Object.entries(timerForm.rules).filter(([, rule]) => rule.accepts);

  it('the library form has some', () => {
    expect(quick.map(([field]) => field).sort()).toEqual([
      'at',
      'endsAt',
      'idempotencyKey',
      'payload',
      'startsAt',
    ]);
  });

  it('accepts only what its schema accepts, and takes it as the schema gives it', () => {
    for (const [field, rule] of quick) {
      fc.assert(
        fc.property(anyValue, (value) => {
          if (!rule.accepts!(value)) return;
          const parsed = rule.schema.safeParse(value);
          expect(parsed.success, `${field}: ${fc.stringify(value)}`).toBe(true);
          expect(parsed.data).toEqual(value);
        }),
        { numRuns: 2_000 },
      );
    }
  });

  it('a value it does not accept is refused with the schema’s reason', () => {
    const read = (key: unknown) => formErrors({ key }, timerForm, { path: 'specs.3' }).errors;
    expect(read('k'.repeat(200))).toEqual([]);
    expect(read('k'.repeat(201))[0]!.message).toBe(
      'specs.3.key: expected a non-empty string of at most 200 characters naming the timer, e.g. "invoice:42:expire", got 201 characters (201 bytes)',
    );
    expect(read('a\u0000b')[0]!.message).toMatch(/^specs\.3\.key: expected text without NUL characters/);
    expect(read('')[0]!.message).toMatch(/^specs\.3\.key: expected a non-empty string .*, got ""$/);
    expect(read(42)[0]!.message).toMatch(/^specs\.3\.key: expected a non-empty string .*, got 42$/);
  });
});
