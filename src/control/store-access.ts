/**
 * How a one-shot command (keys, migrate) reaches the store: PostgreSQL directly when
 * DATABASE_URL is set; otherwise the embedded store — opened here when no live process holds
 * it, or through the running server's control socket when one does.
 */
import { resolve } from 'node:path';
import type { Config } from '../config.js';
import { ChronosError, isChronosError } from '../errors.js';
import { KeyService } from '../core/key-service.js';
import { PgDb, type Db } from '../store/db.js';
import { isHeldByOther, openEmbedded, readLock, type LockInfo } from '../store/embedded.js';
import { migrate } from '../store/migrate.js';
import { localKeyStore, remoteKeyStore, type KeyStore } from './control-socket.js';

export interface StoreAccess {
  store: KeyStore;
  /** Where the store is, for messages: "PostgreSQL", "the embedded store …", "the running server …". */
  where: string;
}

export async function withStore<T>(
  config: Config,
  fn: (access: StoreAccess) => Promise<T>,
  options: { migrate?: boolean } = {},
): Promise<T> {
  const shouldMigrate = options.migrate ?? true;
  if (config.databaseUrl) {
    const db = PgDb.connect(config.databaseUrl, 2, { connectionTimeoutMillis: 10_000 });
    return useLocal(db, 'PostgreSQL (DATABASE_URL)', shouldMigrate, fn);
  }
  const dir = resolve(config.dataDir);
  const holder = await readLock(dir);
  if (isHeldByOther(holder)) return fn(remote(holder, dir));
  let db: Db;
  try {
    db = await openEmbedded(dir);
  } catch (error) {
    // Taken between our look and our open: a server that just started.
    const now = await readLock(dir);
    if (isChronosError(error, 'locked') && isHeldByOther(now)) return fn(remote(now, dir));
    throw error;
  }
  return useLocal(db, `the embedded store ${dir}`, shouldMigrate, fn);
}

async function useLocal<T>(
  db: Db,
  where: string,
  shouldMigrate: boolean,
  fn: (access: StoreAccess) => Promise<T>,
): Promise<T> {
  try {
    if (shouldMigrate) await migrate(db);
    return await fn({ store: localKeyStore(db, new KeyService(db)), where });
  } finally {
    await db.close();
  }
}

function remote(holder: LockInfo, dir: string): StoreAccess {
  if (!holder.controlSocket) {
    throw new ChronosError(
      'locked',
      `the embedded store ${dir} is in use by process ${holder.pid} on ${holder.host}, which does not accept ` +
        'control requests (a library user, or an older chronos); stop it and try again, or use DATABASE_URL',
    );
  }
  return {
    store: remoteKeyStore(holder.controlSocket, holder.pid),
    where: `the running server (process ${holder.pid}) on the embedded store ${dir}`,
  };
}
