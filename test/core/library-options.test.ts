/**
 * createChronos's connection options (issue 16): a multi-host `databaseUrl`, `pooler` and
 * `listenUrl` are checked before anything connects, in the library's own names, and a refusal
 * never repeats the password.
 */
import { describe, expect, it } from 'vitest';
import { isChronosError } from '../../packages/chronos-timers/src/errors.js';
import { createChronos, type ChronosOptions } from '../../packages/chronos-timers/src/library.js';

async function refusal(options: ChronosOptions): Promise<string[]> {
  const error = await createChronos(options).then(
    () => expect.unreachable('createChronos accepted the options'),
    (e: unknown) => e,
  );
  expect(isChronosError(error, 'invalid_input')).toBe(true);
  return (error as { errors: { message: string }[] }).errors.map((e) => e.message);
}

describe('createChronos: connection options', () => {
  it('refuses a URL Chronos cannot write through, a pooler it does not know, and says which option', async () => {
    const messages = await refusal({
      databaseUrl: 'postgres://app:hunter2@db1,db2/app?target_session_attrs=standby',
      listenUrl: 'postgres://app:hunter2@db1:70000/app',
      pooler: 'session' as 'transaction',
    });
    expect(messages).toEqual([
      'databaseUrl: expected target_session_attrs "read-write" or "any" (Chronos writes), got "standby"',
      expect.stringMatching(/^listenUrl: expected a port from 1 to 65535 .*, got "70000"$/),
      'pooler: expected "none" or "transaction", got "session"',
    ]);
    expect(messages.join('\n')).not.toContain('hunter2');
  });

  it('refuses pooler and listenUrl for the embedded store', async () => {
    expect(await refusal({ dataDir: '/nonexistent', pooler: 'transaction' })).toEqual([
      'pooler: expected only with databaseUrl or pool, got neither',
    ]);
  });
});
