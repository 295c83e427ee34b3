/**
 * The embedded store's template (src/store/driver/embedded-template.ts): a new store is copied from a
 * migrated data directory instead of initialised, and is then a store like any other.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChronos } from '../../packages/chronos-timers/src/library.js';
import { openEmbedded } from '../../packages/chronos-timers/src/store/driver/embedded.js';
import {
  buildTemplate,
  copyTemplate,
  usableTemplate,
} from '../../packages/chronos-timers/src/store/driver/embedded-template.js';
import {
  migrate,
  MIGRATIONS_DIR,
  pendingMigrations,
} from '../../packages/chronos-timers/src/store/driver/migrate.js';
import { openFromAnotherProcess } from '../support/library.js';

describe('the embedded store made from a template', () => {
  let work: string;
  let migrations: string;
  /** Built from every migration but the last: a template older than the code that opens it. */
  let older: string;
  let last: string;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'chronos-template-'));
    const files = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).sort();
    last = files.pop()!.replace(/\.sql$/, '');
    const olderDir = join(work, 'migrations-older');
    migrations = join(work, 'migrations');
    await mkdir(olderDir);
    await mkdir(migrations);
    for (const f of files) await copyFile(join(MIGRATIONS_DIR, f), join(olderDir, f));
    for (const f of [...files, `${last}.sql`]) await copyFile(join(MIGRATIONS_DIR, f), join(migrations, f));
    older = join(work, 'older', 'pgdata-template.tar.gz');
    await buildTemplate(older, olderDir);
  }, 120_000);

  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('opens migrated: no initdb, only the migrations the template lacks are applied', async () => {
    const dir = join(work, 'store-older');
    const db = await openEmbedded(dir, { template: older });
    try {
      expect(await pendingMigrations(db, migrations)).toEqual([last]);
      expect(await migrate(db, migrations)).toEqual([last]);
      expect(await pendingMigrations(db, migrations)).toEqual([]);
    } finally {
      await db.close();
    }
    // The template's own postmaster.pid (it was dumped from a running PGlite) is not copied.
    expect(existsSync(join(dir, 'pgdata', 'postmaster.pid'))).toBe(false);
    expect(existsSync(join(dir, 'pgdata', 'PG_VERSION'))).toBe(true);
  });

  it('keeps a timer across a restart, and holds its lock against another process', async () => {
    const dir = join(work, 'store-restart');
    const db = await openEmbedded(dir, { template: older });
    await db.close();
    const first = await createChronos({ dataDir: dir });
    expect(await first.migrate()).toEqual([last]);
    await first.schedule(null, { key: 'from-template', inSeconds: 3_600, payload: { n: 1 } });
    const child = openFromAnotherProcess(dir);
    expect(child.status).toBe(3);
    expect(child.stderr).toContain('chronos.lock');
    await first.close();
    const second = await createChronos({ dataDir: dir });
    expect(await second.migrate()).toEqual([]);
    expect((await second.get('from-template'))?.status).toBe('active');
    await second.close();
  }, 60_000);

  it('copies nothing into a store that exists: a reopen is a restart, not a new store', async () => {
    const dir = join(work, 'store-existing');
    const db = await openEmbedded(dir, { template: older });
    await migrate(db, migrations);
    await db.close();
    // A template that is not a tar at all would fail the copy; a reopen never reads it.
    const broken = join(work, 'broken.tar.gz');
    await writeFile(broken, 'not a tar');
    const again = await openEmbedded(dir, { template: broken });
    expect(await pendingMigrations(again, migrations)).toEqual([]);
    await again.close();
  });

  it('a copy that fails leaves no store behind, and the next open copies again', async () => {
    const dir = join(work, 'store-failed');
    const broken = join(work, 'broken.tar.gz');
    await writeFile(broken, 'not a tar');
    await expect(openEmbedded(dir, { template: broken })).rejects.toThrow(
      /copying the embedded store's template/,
    );
    expect((await readdir(dir)).filter((f) => f.startsWith('pgdata'))).toEqual([]);
    // What a process killed while copying leaves: removed by the next copy.
    await mkdir(join(dir, 'pgdata.partial-99999', 'base'), { recursive: true });
    const db = await openEmbedded(dir, { template: older });
    expect(await pendingMigrations(db, migrations)).toEqual([last]);
    await db.close();
    expect((await readdir(dir)).filter((f) => f.startsWith('pgdata'))).toEqual(['pgdata']);
  });

  it('is used only while its stamp fits the PGlite and the migrations', async () => {
    // Newer migrations than the template's: still used (they are applied on open).
    expect(await usableTemplate(older, migrations)).toBe(older);
    // A migration the template holds has changed since: not used.
    const changed = join(work, 'migrations-changed');
    await mkdir(changed);
    for (const f of await readdir(migrations)) await copyFile(join(migrations, f), join(changed, f));
    const first = (await readdir(changed)).sort()[0]!;
    await writeFile(join(changed, first), `${await readFile(join(changed, first), 'utf8')}\n-- changed\n`);
    expect(await usableTemplate(older, changed)).toBeNull();
    // Made by another PGlite: not used.
    const stamp = older.replace(/\.tar\.gz$/, '.json');
    const saved = await readFile(stamp, 'utf8');
    await writeFile(stamp, JSON.stringify({ ...JSON.parse(saved), pglite: '0.0.1' }));
    try {
      expect(await usableTemplate(older, migrations)).toBeNull();
    } finally {
      await writeFile(stamp, saved);
    }
    // No template (the sources without a build): none.
    expect(await usableTemplate(join(work, 'absent.tar.gz'), migrations)).toBeNull();
  });

  it('copies every file and directory of the template, files 0600 and directories 0700, without postmaster.pid', async () => {
    const pgdata = join(work, 'copied', 'pgdata');
    await mkdir(join(work, 'copied'));
    await copyTemplate(older, pgdata);
    // The system's tar as the reference reading of the archive.
    const listed = execFileSync('tar', ['-tzf', older], { encoding: 'utf8', maxBuffer: 1 << 24 })
      .split('\n')
      .map((name) => name.replace(/^\/+/, '').replace(/\/+$/, ''))
      .filter((name) => name !== '' && name !== 'postmaster.pid');
    const copied = (await readdir(pgdata, { recursive: true })).map((name) => name.split('\\').join('/'));
    expect(copied.sort()).toEqual([...new Set(listed)].sort());
    for (const name of copied) {
      const { mode } = await stat(join(pgdata, name));
      expect([name, mode & 0o777]).toEqual([name, (mode & 0o040000) !== 0 ? 0o700 : 0o600]);
    }
  });
});
