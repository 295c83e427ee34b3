import { describe, expect, it } from 'vitest';
import { isChronosError } from '../../errors.js';
import { storeError } from './db.js';
import { hostEventLog, isFailoverError, NoHostError } from './multi-host.js';

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('isFailoverError', () => {
  it.each([
    [
      'a write on a read-only server (25006)',
      withCode('25006', 'cannot execute INSERT in a read-only transaction'),
    ],
    [
      'an administrator shutdown (57P01)',
      withCode('57P01', 'terminating connection due to administrator command'),
    ],
    ['a crash shutdown (57P02)', withCode('57P02')],
    [
      'a server not accepting connections yet (57P03)',
      withCode('57P03', 'the database system is starting up'),
    ],
    ['a connection exception (class 08)', withCode('08006')],
    ['a reset socket', withCode('ECONNRESET')],
    ['a refused connection', withCode('ECONNREFUSED')],
    ['a lost connection (node-postgres, no code)', new Error('Connection terminated unexpectedly')],
    [
      "the pool's connect timeout, with its cause",
      new Error('Connection terminated due to connection timeout', {
        cause: new Error('Connection terminated'),
      }),
    ],
    ['no listed host qualifying', withCode('CHRONOS_NO_HOST')],
  ])('recognises %s', (_, error) => {
    expect(isFailoverError(error)).toBe(true);
  });

  it.each([
    ['a unique violation', withCode('23505')],
    ['a serialization failure', withCode('40001')],
    ['a syntax error', withCode('42601')],
    ['a plain error', new Error('something else')],
    ['not an error', 'Connection terminated'],
    ['nothing', undefined],
  ])('leaves alone %s', (_, error) => {
    expect(isFailoverError(error)).toBe(false);
  });
});

describe('storeError during a failover', () => {
  it.each([
    [
      'no listed host qualifying',
      new NoHostError('no listed host accepts read-write sessions: h1:5432 (a standby)'),
    ],
    [
      'a write on a server that turned read-only',
      withCode('25006', 'cannot execute INSERT in a read-only transaction'),
    ],
    [
      'the pool timing out while a host is chosen',
      new Error('timeout expired while choosing a host (5000 ms)'),
    ],
  ])('is "unavailable" (503, try again) for %s, not an unknown error', (_, error) => {
    expect(isChronosError(storeError(error), 'unavailable')).toBe(true);
  });
});

describe('hostEventLog', () => {
  it('logs a change at info, a loss at warn, and "no host" at most once per interval', () => {
    const lines: { level: string; fields: Record<string, unknown>; message: string }[] = [];
    const logger = {
      info: (fields: object, message: string) =>
        lines.push({ level: 'info', fields: { ...fields }, message }),
      warn: (fields: object, message: string) =>
        lines.push({ level: 'warn', fields: { ...fields }, message }),
    };
    const log = hostEventLog(logger, 'DATABASE_URL', 60_000);
    const h1 = { host: 'db1', port: 5432 };
    const h2 = { host: 'db2', port: 5432 };
    log({ type: 'chosen', host: h1, previous: null, probeMs: 3 });
    log({ type: 'lost', host: h1, reason: 'Connection terminated unexpectedly' });
    for (let i = 0; i < 5; i++) log({ type: 'none', reason: 'no listed host accepts read-write sessions' });
    log({ type: 'chosen', host: h2, previous: h1, probeMs: 4 });

    expect(lines.map((l) => `${l.level} ${l.message}`)).toEqual([
      'info database host chosen: db1:5432',
      'warn database host lost: db1:5432; looking for the one that qualifies',
      'warn no listed host accepts read-write sessions',
      'info database host changed: db1:5432 -> db2:5432',
    ]);
    expect(lines[3]!.fields).toMatchObject({ url: 'DATABASE_URL', host: 'db2:5432', previous: 'db1:5432' });
  });
});
