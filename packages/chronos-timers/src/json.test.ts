import { describe, expect, it } from 'vitest';
import { canonicalJson, jsonSyntaxError, RawJson, rawMember, stringifyJson } from './json.js';

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

describe('canonicalJson', () => {
  it('says the same thing the same way: no spaces, keys sorted, numbers as written', () => {
    const a = '{ "b": [1, {"y": 2, "x": "\\u00e9"}], "a": 12345678901234567890, "c": 0.10 }';
    const b = '{"a":12345678901234567890,"c":0.10,"b":[1,{"x":"é","y":2}]}';
    expect(canonicalJson(a)).toBe('{"a":12345678901234567890,"b":[1,{"x":"é","y":2}],"c":0.10}');
    expect(canonicalJson(b)).toBe(canonicalJson(a));
    expect(canonicalJson('{"k": 1, "k": 2}')).toBe('{"k":2}');
    expect(canonicalJson(' "s" ')).toBe('"s"');
  });
});

describe('jsonSyntaxError', () => {
  it('is null for valid JSON', () => {
    expect(jsonSyntaxError('{"a": [1, 2.5e3, "x", true, null, {}]}')).toBeNull();
  });

  it('says where and why, in a person’s terms', () => {
    const cases: [string, number, number, string][] = [
      ['{"a": 1,}', 1, 9, 'expected a property name, got "}" (JSON allows no trailing comma)'],
      ['[1,\n 2,\n]', 3, 1, 'expected a value, got "]" (JSON allows no trailing comma)'],
      ['{"a": 1', 1, 8, 'expected "," or "}" after a property value, got the end of the text'],
      ['{\n  "a": 1\n  "b": 2}', 3, 3, 'expected "," or "}" after a property value, got "\\""'],
      ["{'a': 1}", 1, 2, 'expected a "quoted" property name, got "\'"'],
      ['{"a": // note\n 1}', 1, 7, 'expected a value, got "/" (JSON has no comments)'],
      [
        '{"a": "one\ntwo"}',
        1,
        11,
        'expected a closing " before the end of the line (a string cannot hold a line break)',
      ],
      [
        '{"a": tru}',
        1,
        7,
        'expected a value (a string, number, object, array, true, false or null), got "t"',
      ],
      ['{} {}', 1, 4, 'expected the end of the text after the JSON value, got "{"'],
      ['{"alarms": [', 1, 13, 'expected a value, got the end of the text (is the file complete?)'],
    ];
    for (const [text, line, column, message] of cases) {
      expect(jsonSyntaxError(text), text).toEqual({ line, column, message });
      expect(() => JSON.parse(text), text).toThrow();
    }
  });
});
