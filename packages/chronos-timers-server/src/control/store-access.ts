/**
 * How a one-shot command (keys, migrate, alarms, wakes, schedules) reaches the store: PostgreSQL
 * directly when DATABASE_URL is set; otherwise the embedded store — opened here when no live
 * process holds it, or through the running server's control socket when one does.
 */
import { resolve } from 'node:path';
import type { Config } from 'chronos-timers/internal';
import { ChronosError, isChronosError } from 'chronos-timers/internal';
import { silentLogger } from 'chronos-timers/internal';
import { ChronosService } from '../service.js';
import { holderOf, type LockInfo } from './store-holder.js';
import { remoteStoreOps } from './control-socket.js';
import { localStoreOps, type StoreOps } from './store-ops.js';

export interface StoreAccess {
  store: StoreOps;
  /** The service itself when this process opened the store; null through a running server. */
  service: ChronosService | null;
  /** Where the store is, for messages: "PostgreSQL", "the embedded store …", "the running server …". */
  where: string;
}

export async function withStore<T>(
  config: Config,
  fn: (access: StoreAccess) => Promise<T>,
  options: { migrate?: boolean } = {},
): Promise<T> {
  const open = () =>
    ChronosService.open(
      { ...config, dbConnectTimeoutMs: Math.max(config.dbConnectTimeoutMs, 10_000) },
      { logger: silentLogger, migrate: options.migrate ?? true },
    );
  if (config.databaseUrl) return useLocal(await open(), 'PostgreSQL (DATABASE_URL)', fn);
  const dir = resolve(config.dataDir);
  const holder = await holderOf(dir);
  if (holder) return fn(remote(holder, dir));
  let service: ChronosService;
  try {
    service = await open();
  } catch (error) {
    // Taken between our look and our open: a server that just started.
    const now = await holderOf(dir);
    if (isChronosError(error, 'locked') && now) return fn(remote(now, dir));
    throw error;
  }
  return useLocal(service, `the embedded store ${dir}`, fn);
}

async function useLocal<T>(
  service: ChronosService,
  where: string,
  fn: (access: StoreAccess) => Promise<T>,
): Promise<T> {
  try {
    return await fn({ store: localStoreOps(service), service, where });
  } finally {
    await service.close();
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
    store: remoteStoreOps(holder.controlSocket, holder.pid),
    service: null,
    where: `the running server (process ${holder.pid}) on the embedded store ${dir}`,
  };
}
