import { describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { startServer } from '../../packages/chronos-timers-server/src/server.js';
import { describePostgresOnly } from '../support/backends.js';
import { createTestDatabase, postgresAvailable } from '../support/databases.js';
import { Sink } from '../support/sink.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function runExample(file: string, env: Record<string, string>) {
  return spawnSync(process.execPath, ['--import', 'tsx', file], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
}

describe('the README’s library examples', () => {
  it.skipIf(!postgresAvailable())(
    'on PostgreSQL: the committed timer fires, the rolled-back one never exists',
    async () => {
      const t = await createTestDatabase('postgres');
      const run = runExample('examples/library-postgres.ts', { DATABASE_URL: t.url! });
      await t.close();
      expect(run.stderr).toBe('');
      expect(run.status).toBe(0);
      expect(run.stdout).toContain('rolled back timer exists: false');
      expect(run.stdout).toMatch(/timer order:\d+:expire fired \d+ ms late/);
      expect(run.stdout).toMatch(/order \d+ is expired/);
    },
  );

  it('on the embedded store: the timer fires and the handler’s write lands', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'chronos-example-'));
    const run = runExample('examples/library-embedded.ts', { CHRONOS_DATA_DIR: dir });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/timer order:\d+:expire fired \d+ ms late/);
    expect(run.stdout).toMatch(/order \d+ is expired/);
  });
});

describePostgresOnly(
  'the server and the application are two processes on one database',
  'the library and `chronos serve` on one database',
  () => {
    it('the example gets its own timer while a server runs there, and the server delivers only its own', async () => {
      const t = await createTestDatabase('postgres');
      const router = await Sink.start();
      const server = await startServer(
        loadConfig({ DATABASE_URL: t.url!, PORT: '0', HOST: '127.0.0.1', CHRONOS_ROUTER_URL: router.url() }),
        { logger: silentLogger },
      );
      try {
        const child = spawn(process.execPath, ['--import', 'tsx', 'examples/library-postgres.ts'], {
          cwd: ROOT,
          env: { ...process.env, DATABASE_URL: t.url! },
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
        expect(stderr).toBe('');
        expect(code).toBe(0);
        expect(stdout).toContain('rolled back timer exists: false');
        expect(stdout).toMatch(/timer order:\d+:expire fired \d+ ms late/);
        // The server, running all along, never took the library's timer to the router.
        await server.service.dispatcher.runOnce();
        expect(router.requests).toHaveLength(0);
      } finally {
        await server.shutdown();
        await router.close();
        await t.close();
      }
    }, 60_000);
  },
);
