import { describe, expect, it } from 'vitest';
import { isFailoverError } from './multi-host.js';

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
