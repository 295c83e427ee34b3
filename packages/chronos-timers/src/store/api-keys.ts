/**
 * Every statement on `api_keys`. A key is stored only as its hash; nothing here ever sees the
 * key itself.
 *
 * Revocation announces itself on the `chronos_keys` channel, so every instance that caches
 * authenticated keys drops them at once.
 */
import { channel, sql, sqlState, type Executor } from './driver/db.js';

/** The channel that announces revocations. */
export const keysChannel = (schema: string): string => channel(schema, 'keys');

export interface ApiKey {
  id: string;
  ownerDid: string;
  label: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

interface KeyRow {
  id: string;
  owner_did: string;
  label: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

const COLUMNS = 'id, owner_did, label, created_at, last_used_at, revoked_at';

function toKey(row: KeyRow): ApiKey {
  return {
    id: row.id,
    ownerDid: row.owner_did,
    label: row.label,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
  };
}

// One row per key; the hash is unique, so a key names one owner.
const insert = sql(
  'keys_insert',
  `INSERT INTO chronos.api_keys (id, owner_did, key_hash, label) VALUES ($1, $2, $3, $4) RETURNING ${COLUMNS}`,
);

/** The new key, or null when its id is taken already (the caller picks another). */
export async function keysInsert(
  ex: Executor,
  key: { id: string; ownerDid: string; keyHash: string; label: string },
): Promise<ApiKey | null> {
  try {
    const [row] = await ex.query<KeyRow>(insert, [key.id, key.ownerDid, key.keyHash, key.label]);
    return toKey(row!);
  } catch (error) {
    if (sqlState(error) === '23505') return null;
    throw error;
  }
}

// The live (unrevoked) key with this hash: the whole of authentication.
const byHash = sql(
  'keys_by_hash',
  `SELECT ${COLUMNS} FROM chronos.api_keys WHERE key_hash = $1 AND revoked_at IS NULL`,
);

export async function keysFindLive(ex: Executor, keyHash: string): Promise<ApiKey | null> {
  const [row] = await ex.query<KeyRow>(byHash, [keyHash]);
  return row ? toKey(row) : null;
}

// Oldest first, optionally one owner's, revoked keys included (they say when).
const list = sql(
  'keys_list',
  `SELECT ${COLUMNS} FROM chronos.api_keys WHERE ($1::text IS NULL OR owner_did = $1) ORDER BY created_at, id`,
);

export async function keysList(ex: Executor, ownerDid?: string): Promise<ApiKey[]> {
  return (await ex.query<KeyRow>(list, [ownerDid ?? null])).map(toKey);
}

const count = sql('keys_count', 'SELECT count(*)::int AS n FROM chronos.api_keys');

export async function keysCount(ex: Executor): Promise<number> {
  const [row] = await ex.query<{ n: number }>(count);
  return row?.n ?? 0;
}

// Revokes once: a second revoke changes nothing and answers the key as it is. Notifies every
// instance, so cached authentications of this key end now.
const revoke = sql(
  'keys_revoke',
  `WITH revoked AS (
     UPDATE chronos.api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING ${COLUMNS}
   )
   SELECT ${COLUMNS}, true AS changed FROM revoked, LATERAL (SELECT pg_notify('chronos_keys', revoked.id)) n
   UNION ALL
   SELECT ${COLUMNS}, false AS changed FROM chronos.api_keys WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM revoked)`,
);

/** Revokes the key; null when there is no such key. `changed` is false when it was revoked already. */
export async function keysRevoke(
  ex: Executor,
  id: string,
): Promise<{ key: ApiKey; changed: boolean } | null> {
  const [row] = await ex.query<KeyRow & { changed: boolean }>(revoke, [id]);
  if (!row) return null;
  return { key: toKey(row), changed: row.changed };
}

// Written at most about once a minute per key by the caller; losing one is harmless.
const touch = sql('keys_touch', 'UPDATE chronos.api_keys SET last_used_at = now() WHERE id = $1');

export async function keysTouch(ex: Executor, id: string): Promise<void> {
  await ex.query(touch, [id]);
}
