import { describe, expect, it } from 'vitest';
import { RawPayloads } from '../../packages/chronos-timers-server/src/mcp/raw-payloads.js';

const call = (id: string, payload: string) =>
  `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"schedule_alarm","arguments":{"in_seconds":60,"payload":${payload}}}}`;

function noted(text: string): RawPayloads {
  const raw = new RawPayloads();
  raw.note(text, JSON.parse(text));
  return raw;
}

describe('RawPayloads', () => {
  it('gives a tool the payload text of its own request, once', () => {
    const text = call('7', '{"n": 12345678901234567890, "s": "\\u00e9"}');
    const raw = noted(text);
    const parsed = (JSON.parse(text) as any).params.arguments.payload;
    expect(raw.take('7', parsed)).toBeUndefined(); // "7" is not 7
    expect(noted(text).take(7, parsed)).toBe('{"n": 12345678901234567890, "s": "\\u00e9"}');
    const again = noted(text);
    again.take(7, parsed);
    expect(again.take(7, parsed)).toBeUndefined();
  });

  it('keeps the last of duplicate keys, as JSON.parse does', () => {
    const text = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"payload":{"a":1},"payload":{"b":2}}}}`;
    expect(noted(text).take(1, { b: 2 })).toBe('{"b":2}');
  });

  it('never answers a text that does not parse to the payload the tool was given', () => {
    expect(noted(call('1', '{"a": 1}')).take(1, { a: 2 })).toBeUndefined();
  });

  it('ignores anything but a tools/call request with a payload', () => {
    for (const text of [
      '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}',
      `[${call('1', '{"a": 1}')}]`,
      '{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"payload":{}}}}',
    ]) {
      expect(noted(text).take(1, { a: 1 })).toBeUndefined();
    }
    const raw = new RawPayloads();
    raw.note('not json', undefined);
    expect(raw.take(1, {})).toBeUndefined();
  });
});
