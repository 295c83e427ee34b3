import { describe, expect, it } from 'vitest';
import { RawJson, rawMember, stringifyJson } from './json.js';

describe('rawMember', () => {
  it('returns a member’s own text, digits and escapes untouched', () => {
    const text =
      '{"a": 1, "payload": {"n": 12345678901234567890, "s": "x\\"}y", "l": [1, {"b": "]"}]}, "z": 2}';
    expect(rawMember(text, 'payload')).toBe(
      '{"n": 12345678901234567890, "s": "x\\"}y", "l": [1, {"b": "]"}]}',
    );
    expect(rawMember(text, 'z')).toBe('2');
    expect(rawMember(text, 'missing')).toBeUndefined();
  });

  it('takes the last of duplicated keys, as JSON.parse does', () => {
    expect(rawMember('{"payload": {"a": 1}, "payload": {"b": 2}}', 'payload')).toBe('{"b": 2}');
  });

  it('finds nothing in a body that is not an object', () => {
    expect(rawMember('[{"payload": 1}]', 'payload')).toBeUndefined();
    expect(rawMember('  "payload"', 'payload')).toBeUndefined();
  });

  it('reads keys written with escapes', () => {
    expect(rawMember('{"pay\\u006coad": [0.1000000000000000055511151231257827]}', 'payload')).toBe(
      '[0.1000000000000000055511151231257827]',
    );
  });
});

describe('stringifyJson', () => {
  it('writes RawJson as its own text anywhere in the value', () => {
    const out = stringifyJson({
      alarm: { payload: new RawJson('{"n": 12345678901234567890}') },
      list: [new RawJson('1.50')],
    });
    expect(out).toBe('{"alarm":{"payload":{"n": 12345678901234567890}},"list":[1.50]}');
  });

  it('leaves strings that look like its markers alone', () => {
    expect(stringifyJson({ s: '\u0000raw:x:0\u0000', p: new RawJson('true') })).toBe(
      '{"s":"\\u0000raw:x:0\\u0000","p":true}',
    );
  });
});
