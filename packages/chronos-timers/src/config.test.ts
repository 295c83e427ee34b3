import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { embeddedAheadDir, loadConfig } from './config.js';
import { isChronosError } from './errors.js';

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      databaseUrl: undefined,
      dataDir: './.chronos',
      embeddedSharedBuffersMB: 16,
      port: 8080,
      leaseMs: 30_000,
      nudgeAfterMs: 300_000,
      escalateAfterMs: 720_000,
      replyWindowMs: 120_000,
      retryBaseMs: 1_000,
      retryMaxMs: 3_600_000,
      deliveryTimeoutMs: 10_000,
      minCronIntervalMs: 60_000,
      maxActiveAlarms: 1_000,
      createRatePerMinute: 120,
      routerPipelining: 1,
      webhookSecrets: [],
    });
  });

  it('reads durations, numbers, URLs and rotating secrets', () => {
    const config = loadConfig({
      CHRONOS_LEASE: '1m30s',
      CHRONOS_RETRY_BASE: '250ms',
      PORT: '9090',
      CHRONOS_EMBEDDED_SHARED_BUFFERS_MB: '64',
      CHRONOS_ROUTER_PIPELINING: '10',
      CHRONOS_ROUTER_URL: 'http://127.0.0.1:9000/wakes',
      CHRONOS_WEBHOOK_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_c2Vjb25k',
    });
    expect(config).toMatchObject({
      leaseMs: 90_000,
      retryBaseMs: 250,
      port: 9090,
      embeddedSharedBuffersMB: 64,
      routerPipelining: 10,
    });
    expect(config.webhookSecrets).toHaveLength(2);
  });

  it('names every bad variable, what it expected and what it got', () => {
    const error = (() => {
      try {
        loadConfig({
          CHRONOS_LEASE: 'thirty',
          PORT: 'eighty',
          CHRONOS_ROUTER_URL: 'ftp://x',
          CHRONOS_WEBHOOK_SECRET: 'hunter2',
          CHRONOS_ROUTER_PIPELINING: '0',
        });
      } catch (e) {
        return e;
      }
    })();
    expect(isChronosError(error, 'invalid_input')).toBe(true);
    const paths = (error as { errors: { path: string }[] }).errors.map((e) => e.path);
    expect(new Set(paths)).toEqual(
      new Set([
        'PORT',
        'CHRONOS_ROUTER_URL',
        'CHRONOS_WEBHOOK_SECRET',
        'CHRONOS_LEASE',
        'CHRONOS_ROUTER_PIPELINING',
      ]),
    );
    expect((error as Error).message).toContain(
      'CHRONOS_LEASE: expected a duration such as "250ms", "30s", "5m" or "1h", got "thirty"',
    );
    expect((error as Error).message).not.toContain('hunter2');
  });

  it('takes a DATABASE_URL listing several hosts, a pooler mode and a direct URL for LISTEN', () => {
    const config = loadConfig({
      DATABASE_URL: 'postgres://chronos:s3cret@db1:5432,db2:5432/chronos?target_session_attrs=read-write',
      CHRONOS_DB_POOLER: 'transaction',
      CHRONOS_LISTEN_URL:
        'postgres://chronos:s3cret@db1:5432,db2:5432/chronos?target_session_attrs=read-write',
    });
    expect(config).toMatchObject({ dbPooler: 'transaction' });
    expect(config.databaseUrl).toContain('db1:5432,db2:5432');
    expect(loadConfig({})).toMatchObject({ dbPooler: 'none', listenUrl: undefined });
  });

  it('refuses a database URL it cannot use, naming the variable and never the password', () => {
    const messages = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (e) {
        expect(isChronosError(e, 'invalid_input')).toBe(true);
        return (e as { errors: { message: string }[] }).errors.map((x) => x.message);
      }
      return [];
    };
    expect(
      messages({ DATABASE_URL: 'postgres://u:hunter2@db1:5432,db2:5432/c?target_session_attrs=read-only' }),
    ).toEqual([
      'DATABASE_URL: expected target_session_attrs "read-write" or "any" (Chronos writes), got "read-only"',
    ]);
    const bad = messages({
      DATABASE_URL: 'postgres://u:hunter2@db1:99999/c',
      CHRONOS_LISTEN_URL: 'host=db1 password=hunter2',
      CHRONOS_DB_POOLER: 'session',
    });
    expect(bad).toEqual([
      expect.stringMatching(/^DATABASE_URL: expected a port from 1 to 65535 .*, got "99999"$/),
      'CHRONOS_DB_POOLER: expected "none" or "transaction" (PgBouncer in transaction mode), got "session"',
      expect.stringMatching(/^CHRONOS_LISTEN_URL: expected a URL .*, got a keyword\/value string$/),
    ]);
    expect(bad.join('\n')).not.toContain('hunter2');
    expect(messages({ CHRONOS_DB_POOLER: 'transaction' })).toEqual([
      'CHRONOS_DB_POOLER: expected only with DATABASE_URL, got it without',
    ]);
  });

  it('reads CHRONOS_SCHEDULES_FILE as an absolute path, and refuses a directory', () => {
    expect(loadConfig({}).schedulesFile).toBeUndefined();
    expect(loadConfig({ CHRONOS_SCHEDULES_FILE: 'ops/schedules.json' }).schedulesFile).toBe(
      resolve('ops/schedules.json'),
    );
    expect(() => loadConfig({ CHRONOS_SCHEDULES_FILE: 'ops/' })).toThrow(
      'CHRONOS_SCHEDULES_FILE: expected the path of a JSON file such as "./schedules.json", got "ops/"',
    );
  });
});

describe('embeddedAheadDir', () => {
  it('names the store `chronos serve` opens on the embedded store, with loadConfig’s data directory', () => {
    expect(embeddedAheadDir({}, ['serve'])).toBe(loadConfig({}).dataDir);
    expect(embeddedAheadDir({ CHRONOS_DATA_DIR: ' /srv/chronos ' }, ['serve'])).toBe('/srv/chronos');
    expect(embeddedAheadDir({ CHRONOS_DATA_DIR: '  ' }, ['serve'])).toBe(loadConfig({}).dataDir);
  });

  it('is null for PostgreSQL, another command, and serve with arguments (--help opens nothing)', () => {
    expect(embeddedAheadDir({ DATABASE_URL: 'postgres://localhost/chronos' }, ['serve'])).toBeNull();
    expect(embeddedAheadDir({}, ['keys', 'list'])).toBeNull();
    expect(embeddedAheadDir({}, ['serve', '--help'])).toBeNull();
    expect(embeddedAheadDir({}, [])).toBeNull();
  });
});
