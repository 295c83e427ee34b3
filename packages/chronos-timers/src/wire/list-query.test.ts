import { describe, expect, it } from 'vitest';
import { timeCursor } from '../core/page.js';
import type { ChronosError } from '../errors.js';
import { readAlarmListQuery, readNextFiresQuery, readWakeListQuery } from './list-query.js';

const ALARM_ID = '2f1e8c7a-5b3d-4e8f-9a1b-6c2d3e4f5a6b';

function refusal(read: () => unknown): ChronosError['errors'] {
  try {
    read();
  } catch (error) {
    return (error as ChronosError).errors;
  }
  throw new Error('expected a refusal');
}

describe('a list query', () => {
  it('reads a query string into the typed filter, an empty value as none', () => {
    const cursor = { createdUs: '1700000000000000', id: ALARM_ID };
    expect(
      readAlarmListQuery({ status: 'active', q: 'build', limit: '20', cursor: timeCursor.encode(cursor) }),
    ).toEqual({ status: 'active', labelContains: 'build', limit: 20, after: cursor });
    expect(readAlarmListQuery({ status: '', q: '', limit: '', cursor: '' })).toEqual({
      status: undefined,
      labelContains: undefined,
      limit: undefined,
      after: undefined,
    });
    expect(
      readWakeListQuery({ alarm_id: ALARM_ID, conversation_id: 'c', require_ack: 'false', limit: 3 }),
    ).toEqual({ alarmId: ALARM_ID, conversationId: 'c', requireAck: false, limit: 3 });
    expect(readNextFiresQuery({ count: '7' })).toBe(7);
    expect(readNextFiresQuery({})).toBeUndefined();
  });

  it('refuses each bad parameter by the name it was sent with', () => {
    expect(refusal(() => readWakeListQuery({ status: 'late', require_ack: 'yes', cursor: 'x' }))).toEqual([
      {
        path: 'status',
        message: 'status: expected one of pending, delivered, acknowledged, failed, expired, got "late"',
      },
      { path: 'require_ack', message: 'require_ack: expected "true" or "false", got "yes"' },
      { path: 'cursor', message: 'cursor: expected the next_cursor of a previous page, got "x"' },
    ]);
    expect(refusal(() => readAlarmListQuery({ limit: '201' }))).toEqual([
      { path: 'limit', message: 'limit: expected a whole number from 1 to 200, got "201"' },
    ]);
    expect(refusal(() => readNextFiresQuery({ count: '51' }))).toEqual([
      { path: 'count', message: 'count: expected a whole number from 1 to 50, got "51"' },
    ]);
  });

  it('names an unknown parameter with what was meant', () => {
    const [error] = refusal(() => readAlarmListQuery({ stauts: 'active' }));
    expect(error?.message).toMatch(
      /^stauts: unknown field; send only status, q, limit, cursor; did you mean "status"\?$/,
    );
  });
});
