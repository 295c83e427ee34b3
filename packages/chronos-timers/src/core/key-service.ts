/**
 * API keys: create, list, revoke, and authenticate a Bearer key to its owner.
 *
 * A key is `chronos_` followed by 43 characters of base64url: 256 random bits. Only its SHA-256
 * is stored. A fast unsalted hash is enough for keys this random — a slow, salted hash (bcrypt,
 * argon2) protects guessable passwords, and nobody can enumerate 2^256 keys — and it lets a
 * request be authenticated with one indexed lookup.
 *
 * Authenticated keys are cached in process for `cacheTtlMs` (default 30 s). A revocation made
 * through this service (the CLI, on any instance) is announced by the database and drops every
 * instance's cache at once; a key revoked by hand in SQL stops working within `cacheTtlMs`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { systemClock, type Clock } from '../clock.js';
import { ChronosError, invalidInput, notFound } from '../errors.js';
import { parseOwner, type Owner } from './owner.js';
import { codePoints, isStorable } from './text.js';
import type { Db, Executor } from '../store/driver/db.js';
import {
  keysCount,
  keysFindLive,
  keysInsert,
  keysList,
  keysRevoke,
  keysChannel,
  keysTouch,
  type ApiKey,
} from '../store/api-keys.js';

export type { ApiKey };

export const KEY_PREFIX = 'chronos_';
/** The random part of a key, in bytes; written in base64url, 4 characters for every 3 bytes. */
const KEY_RANDOM_BYTES = 32;
const KEY_RANDOM_CHARS = Math.ceil((KEY_RANDOM_BYTES * 4) / 3);
/** Anything shaped like a key, as a pattern's source (what a log line must not carry). */
export const KEY_PATTERN = `${KEY_PREFIX}[A-Za-z0-9_-]{${KEY_RANDOM_CHARS}}`;
const KEY_SHAPE = new RegExp(`^${KEY_PATTERN}$`);
const LABEL_MAX_CHARS = 200;
const TOUCH_EVERY_MS = 60_000;
const CACHE_MAX_ENTRIES = 10_000;

export interface AuthenticatedKey {
  keyId: string;
  owner: Owner;
}

export interface KeyServiceOptions {
  clock?: Clock;
  /** How long an authenticated key is trusted without asking the database again. */
  cacheTtlMs?: number;
}

/** SHA-256 of a key, hex: what `api_keys.key_hash` holds. */
export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export class KeyService {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #cache = new Map<string, { key: AuthenticatedKey; expiresAt: number }>();
  readonly #touchedAt = new Map<string, number>();

  constructor(db: Db, options: KeyServiceOptions = {}) {
    this.#db = db;
    this.#clock = options.clock ?? systemClock;
    this.#ttlMs = options.cacheTtlMs ?? 30_000;
  }

  /** Creates a key for `ownerDid`. The key itself is returned here and never again. */
  async create(ownerDid: unknown, label: unknown = ''): Promise<{ key: string; record: ApiKey }> {
    const owner = parseOwner(ownerDid, 'owner');
    if (typeof label !== 'string' || codePoints(label) > LABEL_MAX_CHARS || !isStorable(label)) {
      throw invalidInput('label', `a string of at most ${LABEL_MAX_CHARS} characters`, label);
    }
    const key = KEY_PREFIX + randomBytes(KEY_RANDOM_BYTES).toString('base64url');
    for (let attempt = 0; ; attempt++) {
      const id = `key_${randomBytes(6).toString('hex')}`;
      const record = await keysInsert(this.#db, { id, ownerDid: owner.did, keyHash: hashKey(key), label });
      if (record) return { key, record };
      // An id collision (48 random bits): try another.
      if (attempt >= 2) throw new Error('could not find a free key id');
    }
  }

  list(ownerDid?: string, ex: Executor = this.#db): Promise<ApiKey[]> {
    if (ownerDid !== undefined) parseOwner(ownerDid, 'owner');
    return keysList(ex, ownerDid);
  }

  count(): Promise<number> {
    return keysCount(this.#db);
  }

  /** Revokes a key by id; revoking a revoked key answers it again (`changed: false`). */
  async revoke(id: unknown): Promise<{ key: ApiKey; changed: boolean }> {
    if (typeof id !== 'string' || id === '') {
      throw invalidInput('id', 'a key id such as "key_3f9a0c1d2e4b" (see `chronos keys list`)', id);
    }
    const result = await keysRevoke(this.#db, id);
    if (!result) throw notFound(`key ${JSON.stringify(id)}`);
    this.forget();
    return result;
  }

  /** The owner of a live key, or null. Never throws for a bad key; database errors propagate. */
  async authenticate(key: string): Promise<AuthenticatedKey | null> {
    if (!KEY_SHAPE.test(key)) return null;
    const hash = hashKey(key);
    const now = this.#clock.now().getTime();
    const cached = this.#cache.get(hash);
    if (cached && cached.expiresAt > now) {
      this.#touch(cached.key.keyId, now);
      return cached.key;
    }
    const record = await keysFindLive(this.#db, hash);
    if (!record) {
      this.#cache.delete(hash);
      return null;
    }
    const found: AuthenticatedKey = { keyId: record.id, owner: parseOwner(record.ownerDid) };
    if (this.#cache.size >= CACHE_MAX_ENTRIES) this.#cache.clear();
    this.#cache.set(hash, { key: found, expiresAt: now + this.#ttlMs });
    this.#touch(record.id, now);
    return found;
  }

  /** Drops every cached authentication. */
  forget(): void {
    this.#cache.clear();
  }

  /**
   * Listens for revocations made by any instance and drops the cache on each (and after a lost
   * listening connection came back, when some may have been missed). Returns the unsubscribe.
   */
  watch(): Promise<() => Promise<void>> {
    return this.#db.listen(keysChannel(this.#db.schema), () => this.forget());
  }

  // last_used_at is informative: written at most once a minute per key, never awaited.
  #touch(keyId: string, now: number): void {
    const last = this.#touchedAt.get(keyId) ?? -Infinity;
    if (now - last < TOUCH_EVERY_MS) return;
    if (this.#touchedAt.size >= CACHE_MAX_ENTRIES) this.#touchedAt.clear();
    this.#touchedAt.set(keyId, now);
    keysTouch(this.#db, keyId).catch(() => this.#touchedAt.delete(keyId));
  }
}

/** Formats the refusal for a missing or unknown key; never echoes what was sent. */
export function unauthorized(detail: string): ChronosError {
  return new ChronosError('unauthorized', detail);
}
