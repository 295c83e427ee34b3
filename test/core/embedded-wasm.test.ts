/**
 * PGlite's module compiled ahead (src/store/embedded-wasm.ts), as `chronos serve` does before it
 * loads its own modules: the next store opened takes it, once.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openEmbedded } from '../../src/store/embedded.js';
import { compilePgliteAhead, takeCompiledPglite } from '../../src/store/embedded-wasm.js';

describe('PGlite compiled ahead', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it('is handed to the next store opened, once; that store works', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'chronos-wasm-'));
    dirs.push(dir);
    compilePgliteAhead();
    compilePgliteAhead(); // started once
    const db = await openEmbedded(dir, { template: null });
    try {
      expect((await db.lite.query<{ n: number }>('SELECT 1 + 1 AS n')).rows).toEqual([{ n: 2 }]);
    } finally {
      await db.close();
    }
    expect(await takeCompiledPglite()).toBeUndefined();
  }, 120_000);

  it('opens a store as before when nothing was compiled ahead', async () => {
    expect(await takeCompiledPglite()).toBeUndefined();
    const dir = await mkdtemp(join(tmpdir(), 'chronos-wasm-'));
    dirs.push(dir);
    const db = await openEmbedded(dir, { template: null });
    await db.close();
  }, 120_000);
});
