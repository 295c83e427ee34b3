import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, postgresAvailable } from '../support/databases.js';

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
