import { describe, expect, inject, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  acquireLock,
  lockPath,
  openEmbedded,
} from '../../packages/chronos-timers/src/store/driver/embedded.js';
import { createChronos } from '../../packages/chronos-timers/src/library.js';
import { isChronosError } from '../../packages/chronos-timers/src/errors.js';
import { liteTemplateFile } from '../support/env.js';
import { openFromAnotherProcess } from '../support/library.js';

describe('the embedded store', () => {
  it('refuses a second holder of the same data directory, naming the lock and the holder', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'chronos-lock-'));
    const release = await acquireLock(dir);
    try {
      // Another process: a pid that is alive and not ours (our parent).
      await writeFile(
        lockPath(dir),
        JSON.stringify({ pid: process.ppid, host: hostname(), startedAt: new Date().toISOString() }),
      );
      const error = await acquireLock(dir).catch((e: unknown) => e);
      expect(isChronosError(error, 'locked')).toBe(true);
      expect((error as Error).message).toContain(lockPath(dir));
      expect((error as Error).message).toContain(`process ${process.ppid}`);
    } finally {
      await release();
    }
  });

  it('takes over a lock left by a process that no longer runs', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'chronos-lock-'));
    const dead = spawnSync(process.execPath, ['-e', 'process.exit(0)']).pid!;
    await writeFile(
      lockPath(dir),
      JSON.stringify({ pid: dead, host: hostname(), startedAt: '2020-01-01T00:00:00Z' }),
    );
    const release = await acquireLock(dir);
    expect(JSON.parse(await readFile(lockPath(dir), 'utf8')).pid).toBe(process.pid);
    await release();
  });

  it('a second process on an open store exits non-zero at once with a clear message', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'chronos-embedded-'));
    const db = await openEmbedded(dir);
    try {
      const child = openFromAnotherProcess(dir);
      expect(child.status).toBe(3);
      expect(child.stderr).toContain('chronos.lock');
      expect(child.stderr).toContain(`process ${process.pid}`);
    } finally {
      await db.close();
    }
  });

  it('keeps committed timers across a reopen of the same directory', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'chronos-embedded-'));
    const first = await createChronos({ dataDir: dir });
    await first.migrate();
    await first.schedule(null, {
      key: 'survives',
      inSeconds: 3_600,
      payload: { n: 12345678901234567890n.toString() },
    });
    await first.close();
    const second = await createChronos({ dataDir: dir });
    expect((await second.get('survives'))?.status).toBe('active');
    await second.close();
  });

  it('runs PostgreSQL with the small page cache it is given (shared_buffers), not its 128 MB default', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'chronos-embedded-'));
    const template = liteTemplateFile(inject('runId'));
    const small = await openEmbedded(dir, { template });
    expect((await small.lite.query<{ shared_buffers: string }>('SHOW shared_buffers')).rows[0]).toEqual({
      shared_buffers: '16MB',
    });
    await small.close();
    const larger = await openEmbedded(dir, { sharedBuffersMB: 48 });
    expect((await larger.lite.query<{ shared_buffers: string }>('SHOW shared_buffers')).rows[0]).toEqual({
      shared_buffers: '48MB',
    });
    await larger.close();
  });
});
