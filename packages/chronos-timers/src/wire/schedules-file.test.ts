import { describe, expect, it } from 'vitest';
import { RawJson } from '../json.js';
import type { Alarm } from '../types.js';
import { readSchedulesFile, scheduleChangedBody, writeSchedulesFile } from './schedules-file.js';

const DID = 'did:matrix:6f1c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10:laptop';

const paths = (text: string) => readSchedulesFile(text).errors.map((e) => e.path);
const messages = (text: string) => readSchedulesFile(text).errors.map((e) => e.message);

describe('reading a schedules file', () => {
  it('reads each entry as a create with its owner and key; payloads keep every digit', () => {
    const text = `{"alarms": [
      {"owner": "${DID}", "key": "standup", "label": "standup", "cron": "0 9 * * 1-5",
       "timezone": "Europe/Paris", "conversation_id": "c", "wake_message": "hi",
       "payload": {"n": 12345678901234567890}, "max_failures": 3, "require_ack": false},
      {"owner": "${DID}", "key": "launch", "at": "2031-01-01T09:00:00+01:00"}
    ]}`;
    const { entries, errors } = readSchedulesFile(text);
    expect(errors).toEqual([]);
    expect(entries.map((e) => [e.index, e.owner.did, e.owner.userId, e.key])).toEqual([
      [0, DID, '6f1c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10', 'standup'],
      [1, DID, '6f1c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10', 'launch'],
    ]);
    expect({ ...entries[0]!.spec, payload: entries[0]!.spec.payload?.text }).toEqual({
      idempotencyKey: 'standup',
      label: 'standup',
      cron: '0 9 * * 1-5',
      timezone: 'Europe/Paris',
      conversationId: 'c',
      wakeMessage: 'hi',
      payload: '{"n": 12345678901234567890}',
      maxFailures: 3,
      requireAck: false,
    });
    expect(entries[1]!.spec).toEqual({ idempotencyKey: 'launch', at: '2031-01-01T09:00:00+01:00' });
    expect(readSchedulesFile('{"alarms": []}')).toEqual({ entries: [], errors: [] });
  });

  it('names every refusal as written in the file, with what to write instead', () => {
    const text = JSON.stringify({
      alarms: [
        'standup',
        { owner: DID, cron: '@daily' },
        { owner: DID, key: '', cron: '@daily' },
        { owner: DID, key: 'k', idempotency_key: 'k', at: '2031-01-01T00:00:00Z' },
        { owner: DID, key: 'both', at: '2031-01-01T00:00:00Z', cron: '@daily' },
        { owner: DID, key: 'none' },
        { owner: DID, key: 'delay', in_seconds: 60 },
        { owner: DID, key: 'tz', cron: '@daily', tz: 'UTC' },
        { owner: DID, key: 'n', cron: '@daily', max_failures: 0, payload: [] },
      ],
    });
    expect(paths(text)).toEqual([
      'alarms.0',
      'alarms.1.key',
      'alarms.2.key',
      'alarms.3.idempotency_key',
      'alarms.4',
      'alarms.5',
      'alarms.6.in_seconds',
      'alarms.7.tz',
      'alarms.8.max_failures',
      'alarms.8.payload',
    ]);
    const said = messages(text);
    expect(said[0]).toBe('alarms.0: expected a JSON object, got "standup"');
    expect(said[1]).toMatch(/^alarms\.1\.key: expected a non-empty string .*, got nothing$/);
    expect(said[2]).toMatch(/^alarms\.2\.key: expected a non-empty string .*, got ""$/);
    expect(said[3]).toMatch(
      /^alarms\.3\.idempotency_key: unknown field; send only owner, key, label, at, cron, .*; did you mean "key"\?$/,
    );
    expect(said[4]).toBe(
      'alarms.4: expected exactly one of "at", "cron" or "rrule", got "at" and "cron"; send exactly one',
    );
    expect(said[6]).toMatch(/in_seconds would mean a new time at each read, got 60$/);
    expect(said[7]).toMatch(/did you mean "timezone"\?$/);
  });

  it('refuses the file as a whole: not JSON, not an object, no alarms, too big', () => {
    expect(messages('')).toEqual([
      'schedules file: expected a JSON object {"alarms": [entry, …]}, got an empty file',
    ]);
    expect(messages('{"alarms": [}')).toEqual([
      'schedules file: expected a JSON object {"alarms": [entry, …]}, got invalid JSON at line 1, column 13: expected a value, got "}"',
    ]);
    expect(messages('{}')).toEqual([
      'alarms: expected an array of entries, like [{"owner": "did:matrix:<user uuid>:<name>", "key": "standup", "cron": "0 9 * * 1-5"}], got nothing',
    ]);
    expect(messages('{"alarms": {}}')[0]).toMatch(/^alarms: expected an array of entries/);
    expect(messages(`{"alarms": [], "pad": "${'x'.repeat(8 * 1024 * 1024)}"}`)).toEqual([
      expect.stringMatching(
        /^schedules file: expected at most 8388608 bytes \(8 MiB\), got 83886\d\d bytes$/,
      ),
    ]);
  });
});

const alarm = (over: Partial<Alarm> = {}): Alarm => ({
  id: '01a23263-3fbe-7012-9222-c727a54388f0',
  ownerDid: DID,
  userId: '6f1c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10',
  label: 'standup',
  kind: 'cron',
  fireAt: null,
  cronExpr: '0 9 * * 1-5',
  timezone: 'Europe/Paris',
  nextFireAt: new Date('2031-01-06T08:00:00Z'),
  scheduledFor: new Date('2031-01-06T08:00:00Z'),
  conversationId: '',
  wakeMessage: 'hi',
  payload: new RawJson('{}'),
  status: 'active',
  idempotencyKey: 'standup',
  maxFailures: 5,
  failureCount: 0,
  lastError: '',
  claimedAt: null,
  requireAck: true,
  source: 'file',
  queue: 'router',
  trigger: 'schedule',
  heldOccurrence: null,
  createdAt: new Date('2030-12-01T00:00:00Z'),
  updatedAt: new Date('2030-12-01T00:00:00Z'),
  lastFiredAt: null,
  traceparent: '',
  ...over,
});

describe('writing a schedules file', () => {
  it('writes each keyed alarm as an entry, optional fields only when not their defaults', () => {
    const once = alarm({
      kind: 'once',
      cronExpr: '',
      fireAt: new Date('2031-01-01T08:00:00Z'),
      idempotencyKey: 'launch',
      timezone: 'UTC',
      conversationId: 'c-1',
      payload: new RawJson('{"n": 12345678901234567890}'),
      maxFailures: 9,
      requireAck: false,
    });
    const keyless = alarm({ idempotencyKey: '' });
    const { text, skipped } = writeSchedulesFile([alarm(), once, keyless]);
    expect(skipped).toEqual([keyless]);
    expect(text).toContain('"payload": {"n": 12345678901234567890}');
    expect(JSON.parse(text)).toEqual({
      alarms: [
        {
          owner: DID,
          key: 'standup',
          label: 'standup',
          cron: '0 9 * * 1-5',
          timezone: 'Europe/Paris',
          wake_message: 'hi',
        },
        {
          owner: DID,
          key: 'launch',
          label: 'standup',
          at: '2031-01-01T08:00:00.000Z',
          timezone: 'UTC',
          wake_message: 'hi',
          conversation_id: 'c-1',
          payload: JSON.parse('{"n": 12345678901234567890}'),
          max_failures: 9,
          require_ack: false,
        },
      ],
    });
    // What it writes reads back.
    expect(readSchedulesFile(text).errors).toEqual([]);
  });

  it('the heads-up body: type, change, source, owner, user and the alarm view', () => {
    const body = scheduleChangedBody(
      'created',
      alarm({ payload: new RawJson('{"n": 1.000000000000000000001}') }),
    );
    expect(body).toContain('"payload":{"n": 1.000000000000000000001}');
    const parsed = JSON.parse(body);
    expect(Object.keys(parsed)).toEqual(['type', 'change', 'source', 'owner_did', 'user_id', 'alarm']);
    expect(parsed).toMatchObject({
      type: 'schedule.changed',
      change: 'created',
      source: 'file',
      owner_did: DID,
      user_id: '6f1c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10',
      alarm: { id: '01a23263-3fbe-7012-9222-c727a54388f0', cron_expr: '0 9 * * 1-5', status: 'active' },
    });
  });
});
