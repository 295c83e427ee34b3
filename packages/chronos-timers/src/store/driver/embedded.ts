/**
 * The embedded store: PostgreSQL compiled to WebAssembly (PGlite) in a local directory.
 *
 * PGlite does not lock its data directory, and two processes on one directory lose data
 * silently. Chronos therefore holds `<dir>/chronos.lock` (pid, host, start time) for as long as
 * the store is open; a second process is refused with the lock's path and the holder's pid, and
 * a lock left by a process that no longer runs is taken over.
 *
 * A new store (no `<dir>/pgdata` yet) is copied from the migrated template the build ships
 * (`embedded-template.ts`) when there is one that fits, under the lock; otherwise PGlite
 * initialises it (`initdb`), as it always did.
 *
 * Not promised: PGlite does not fsync. The store survives a crash of the process, not a power
 * loss or a kernel panic.
 */
import { existsSync } from 'node:fs';
import { mkdir, open, readFile, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { ChronosError } from '../../errors.js';
import { EMBEDDED_SHARED_BUFFERS_MB, LiteDb } from './db.js';
import { copyTemplate, usableTemplate } from './embedded-template.js';
import { takeAhead } from './embedded-ahead.js';

export interface LockInfo {
  pid: number;
  host: string;
  startedAt: string;
  /** Where a running server accepts local control requests (e.g. `keys create`), if it does. */
  controlSocket?: string;
}

export function lockPath(dataDir: string): string {
  return join(resolve(dataDir), 'chronos.lock');
}

export async function readLock(dataDir: string): Promise<LockInfo | null> {
  try {
    return JSON.parse(await readFile(lockPath(dataDir), 'utf8')) as LockInfo;
  } catch {
    return null;
  }
}

/** True when the lock names a live process (on this host) other than this one. */
export function isHeldByOther(lock: LockInfo | null): lock is LockInfo {
  if (!lock || lock.pid === process.pid) return false;
  if (lock.host !== hostname()) return true;
  try {
    process.kill(lock.pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the directory's lock or throws `locked` naming the holder. Returns the release. */
export async function acquireLock(
  dataDir: string,
  extra: Partial<LockInfo> = {},
): Promise<() => Promise<void>> {
  await mkdir(resolve(dataDir), { recursive: true });
  const path = lockPath(dataDir);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const file = await open(path, 'wx', 0o600);
      const info: LockInfo = {
        pid: process.pid,
        host: hostname(),
        startedAt: new Date().toISOString(),
        ...extra,
      };
      await file.writeFile(JSON.stringify(info));
      await file.close();
      return async () => {
        const current = await readLock(dataDir);
        if (current?.pid === process.pid) await rm(path, { force: true });
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = await readLock(dataDir);
      if (isHeldByOther(holder)) {
        throw new ChronosError(
          'locked',
          `the embedded store ${resolve(dataDir)} is in use by process ${holder.pid} on ${holder.host} ` +
            `(lock file ${path}, since ${holder.startedAt}); stop that process, or set CHRONOS_DATA_DIR ` +
            'to another directory, or DATABASE_URL to share a PostgreSQL between processes',
        );
      }
      // Left by a process that no longer runs (or unreadable): take it over.
      await rm(path, { force: true });
    }
  }
  throw new ChronosError('locked', `could not take the lock ${path}`);
}

export interface OpenEmbeddedOptions {
  /** Extra fields written into the lock file (e.g. the control socket). */
  lock?: Partial<LockInfo>;
  /** The schema Chronos's tables live in (default `chronos`). */
  schema?: string;
  /**
   * What a new store is copied from: a template file (`buildTemplate`), or null to initialise it
   * with `initdb`. Default: the shipped template, when it fits (`usableTemplate`).
   */
  template?: string | null;
  /** PostgreSQL's `shared_buffers`, in MB (default `EMBEDDED_SHARED_BUFFERS_MB`). */
  sharedBuffersMB?: number;
}

/** Opens (creating if needed) the embedded store under `dataDir`, holding its lock. */
export async function openEmbedded(dataDir: string, options: OpenEmbeddedOptions = {}): Promise<LiteDb> {
  const release = await acquireLock(dataDir, options.lock);
  try {
    const pgdata = join(resolve(dataDir), 'pgdata');
    const template = existsSync(pgdata)
      ? null
      : options.template === undefined
        ? await usableTemplate()
        : options.template;
    const ahead = await takeAhead(template);
    if (template) await copyTemplate(template, pgdata, ahead.tar);
    const sharedBuffersMB = options.sharedBuffersMB ?? EMBEDDED_SHARED_BUFFERS_MB;
    const lite = await PGlite.create(pgdata, {
      ...(ahead.module ? { pgliteWasmModule: ahead.module } : {}),
      startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${sharedBuffersMB}MB`],
    });
    return new LiteDb(
      lite,
      async () => {
        await lite.close();
        await release();
      },
      options.schema,
    );
  } catch (error) {
    await release();
    throw error;
  }
}

/** An in-memory store, optionally loaded from a dump (`PGlite.dumpDataDir()`): for tests. */
export async function openMemory(loadDataDir?: Blob | File): Promise<LiteDb> {
  const lite = await PGlite.create(loadDataDir ? { loadDataDir } : {});
  return new LiteDb(lite, () => lite.close());
}
