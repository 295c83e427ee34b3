/**
 * What `chronos serve` starts before it loads its own modules (src/store/driver/embedded-ahead.ts):
 * PGlite's module compiled and a new store's template unzipped, taken by the next store opened,
 * once, and dropped by it whether used or not.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openEmbedded } from '../../packages/chronos-timers/src/store/driver/embedded.js';
import {
  startEmbeddedAhead,
  takeAhead,
  TEMPLATE_FILE,
} from '../../packages/chronos-timers/src/store/driver/embedded-ahead.js';

describe('the embedded store started ahead', () => {
  const dirs: string[] = [];
  const newDir = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'chronos-ahead-'));
    dirs.push(dir);
    return dir;
  };
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it('a new store opens from what was started ahead, and takes it: nothing is left after', async () => {
    const dir = await newDir();
    startEmbeddedAhead(dir);
    startEmbeddedAhead(dir); // started once
    const db = await openEmbedded(dir);
    try {
      expect((await db.lite.query<{ n: number }>('SELECT 1 + 1 AS n')).rows).toEqual([{ n: 2 }]);
    } finally {
      await db.close();
    }
    expect(await takeAhead(TEMPLATE_FILE)).toEqual({ module: undefined, tar: undefined });
  }, 120_000);

  it('compiles but unzips nothing for a store that exists; a store opened without a template drops it all', async () => {
    const dir = await newDir();
    await (await openEmbedded(dir, { template: null })).close();
    startEmbeddedAhead(dir);
    const ahead = await takeAhead(TEMPLATE_FILE);
    expect(ahead.module).toBeDefined();
    expect(ahead.tar).toBeUndefined();

    startEmbeddedAhead(await newDir());
    const other = await openEmbedded(await newDir(), { template: null });
    await other.close();
    expect(await takeAhead(TEMPLATE_FILE)).toEqual({ module: undefined, tar: undefined });
  }, 120_000);
});
