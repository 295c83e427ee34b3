/**
 * A library worker loads only what it uses: on PostgreSQL it never loads the webhook client
 * (undici), the embedded store (PGlite) or Prometheus's client (prom-client) — they are
 * `chronos serve`'s — so its process stays small (docs/comparison.md, "worker RSS").
 *
 * Checked in a process of its own, which opens the library on a `databaseUrl`, schedules a
 * timer, has a worker handle it, and closes. Every module import passes through a resolve hook
 * (`module.register`) that records the package each resolved file is in; packages loaded by
 * `require()` are read from the CommonJS cache.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describePostgresOnly } from '../support/backends.js';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';

/** The resolve hook: records packages; `footprint:packages` is a module exporting their names. */
const HOOK = `
const seen = new Set();
export async function resolve(specifier, context, next) {
  if (specifier === 'footprint:packages') {
    const text = 'export default ' + JSON.stringify([...seen]);
    return { url: 'data:text/javascript,' + encodeURIComponent(text), shortCircuit: true };
  }
  const result = await next(specifier, context);
  const match = /\\/node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(result.url);
  if (match) seen.add(match[1]);
  return result;
}`;

/** The child: the library's whole life on PostgreSQL, then the packages it loaded, as JSON. */
const child = (url: string) => `
import { register, createRequire } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(HOOK)}));
const { createChronos } = await import('./packages/chronos-timers/src/index.ts');
const chronos = await createChronos({ databaseUrl: ${JSON.stringify(url)}, pollIntervalMs: 50 });
let handled;
const done = new Promise((resolve) => (handled = resolve));
const worker = chronos.work((fire) => handled(fire.key));
await chronos.schedule(null, { key: 'footprint', at: new Date() });
const key = await done;
await worker.stop();
await chronos.close();
const modules = (await import('footprint:packages')).default;
const required = Object.keys(createRequire(import.meta.url).cache)
  .map((file) => /\\/node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(file)?.[1])
  .filter(Boolean);
console.log(JSON.stringify({ key, packages: [...new Set([...modules, ...required])] }));
process.exit(0);
`;

describePostgresOnly('opens the library on a databaseUrl', 'library: what a worker loads', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await t.close();
  });

  it('a worker on PostgreSQL loads pg, and neither undici, PGlite nor prom-client', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', child(t.url!)], {
      cwd: fileURLToPath(new URL('../../', import.meta.url)),
      encoding: 'utf8',
    });
    expect(run.status, run.stderr).toBe(0);
    const { key, packages } = JSON.parse(run.stdout) as { key: string; packages: string[] };
    expect(key).toBe('footprint');
    // The hook saw the store's driver and the validation: it records what is loaded.
    expect(packages).toEqual(expect.arrayContaining(['pg', 'zod']));
    for (const name of ['undici', '@electric-sql/pglite', 'prom-client'])
      expect(packages).not.toContain(name);
  });
});
