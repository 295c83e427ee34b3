/**
 * Who holds an embedded store: the live process named by its lock file (`chronos.lock`), if any,
 * and whether there is a store at a path at all. A door uses this to decide between opening the
 * store itself and going through the process that holds it.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { isHeldByOther, readLock, type LockInfo } from 'chronos-timers/internal';

export type { LockInfo };

/** The live process (other than this one) holding the store in `dataDir`, or null. */
export async function holderOf(dataDir: string): Promise<LockInfo | null> {
  const lock = await readLock(dataDir);
  return isHeldByOther(lock) ? lock : null;
}

/** True when `dataDir` holds an embedded store (it has been opened once). */
export function storeExists(dataDir: string): boolean {
  return existsSync(join(dataDir, 'pgdata'));
}
