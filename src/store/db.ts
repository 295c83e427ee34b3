/**
 * The one door to SQL: a narrow query interface over node-postgres and PGlite.
 *
 * The same statement text runs on both. On node-postgres every statement is a named prepared
 * statement. Results are made alike: `int8` and `numeric` come back as strings on both, and
 * store queries read `jsonb` as `::text` so payloads pass through verbatim (I4).
 *
 * PGlite is one backend shared by everything in the process: its own mutex serialises our
 * queries with any transaction the application holds on the same instance.
 */
import pg from 'pg';
import type { PGlite, Transaction as LiteTransaction } from '@electric-sql/pglite';
import { STORE_TYPES } from './timestamptz.js';

export type Row = Record<string, unknown>;

/** A statement with a stable name; defined once, beside the code that uses it. */
export interface Statement {
  readonly name: string;
  readonly text: string;
}

export function sql(name: string, text: string): Statement {
  return { name, text };
}

/** Something statements can run on: the database itself, or one transaction. */
export interface Executor {
  query<T = Row>(statement: Statement, values?: readonly unknown[]): Promise<T[]>;
  /** Runs a script of several statements with no parameters (migrations). */
  exec(script: string): Promise<void>;
}

export type BackendKind = 'postgres' | 'pglite';

export interface Db extends Executor {
  readonly kind: BackendKind;
  transaction<T>(fn: (tx: Executor) => Promise<T>): Promise<T>;
  /**
   * Calls `onNotify` for each notification on `channel`, and also after a dropped listening
   * connection has been re-established (notifications may have been lost meanwhile).
   */
  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

// Type OIDs whose JavaScript form differs between the two drivers unless pinned.
const INT8 = 20;
const NUMERIC = 1700;
const asText = (value: string) => value;
const LITE_PARSERS = { [INT8]: asText, [NUMERIC]: asText };

/** How long a pooled PostgreSQL connection (and every plan it prepared) lives. */
export const CONNECTION_LIFETIME_S = 600;

/** node-postgres returns int8 and numeric as strings already; PGlite is told to match. */
export class PgDb implements Db {
  readonly kind = 'postgres' as const;
  readonly pool: pg.Pool;
  readonly #ownsPool: boolean;
  readonly #listeners = new Set<PgListener>();

  constructor(pool: pg.Pool, ownsPool: boolean) {
    this.pool = pool;
    this.#ownsPool = ownsPool;
    // An idle client that loses its connection must not crash the process.
    pool.on('error', () => {});
  }

  /**
   * `options` are further pool settings, e.g. `connectionTimeoutMillis` so callers fail fast when
   * the database is away.
   *
   * Connections retire after `maxLifetimeSeconds` (default 10 minutes), busy or not. PostgreSQL
   * keeps a prepared statement's generic plan for the life of its connection unless an ANALYZE
   * invalidates it, so a plan made while a table was small (a fresh install, a server with
   * autovacuum off) would otherwise be kept however large the table grows; a new connection
   * plans for the table as it is.
   */
  static connect(
    connectionString: string,
    max = 10,
    options: Omit<pg.PoolConfig, 'connectionString' | 'max'> = {},
  ): PgDb {
    return new PgDb(
      new pg.Pool({ maxLifetimeSeconds: CONNECTION_LIFETIME_S, ...options, connectionString, max }),
      true,
    );
  }

  async query<T = Row>(statement: Statement, values: readonly unknown[] = []): Promise<T[]> {
    const result = await this.pool.query(pgQuery(statement, values));
    return result.rows as T[];
  }

  async exec(script: string): Promise<void> {
    await this.pool.query(script);
  }

  async transaction<T>(fn: (tx: Executor) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await fn(pgExecutor(client));
      await client.query('COMMIT');
      client.release();
      return result;
    } catch (error) {
      try {
        await client.query('ROLLBACK');
        client.release();
      } catch (rollbackError) {
        client.release(rollbackError as Error);
      }
      throw error;
    }
  }

  async listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    const listener = new PgListener(this.pool.options, channel, onNotify);
    this.#listeners.add(listener);
    await listener.start();
    return async () => {
      this.#listeners.delete(listener);
      await listener.stop();
    };
  }

  async close(): Promise<void> {
    await Promise.all([...this.#listeners].map((l) => l.stop()));
    if (this.#ownsPool) await this.pool.end();
  }
}

/**
 * A dedicated LISTEN connection. node-postgres does not reconnect one by itself: on error or end
 * this reconnects with backoff and calls `onNotify` once reconnected, so the caller re-polls for
 * whatever was announced while it was away.
 */
class PgListener {
  #client: pg.Client | null = null;
  #stopped = false;
  #retryMs = 100;
  #timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly options: pg.PoolConfig,
    private readonly channel: string,
    private readonly onNotify: (payload: string) => void,
  ) {}

  async start(): Promise<void> {
    try {
      await this.#connect();
    } catch {
      this.#scheduleReconnect();
    }
  }

  async #connect(): Promise<void> {
    const client = new pg.Client(this.options);
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    client.on('notification', (message) => {
      if (message.channel === this.channel) this.onNotify(message.payload ?? '');
    });
    await client.connect();
    await client.query(`LISTEN ${pg.escapeIdentifier(this.channel)}`);
    if (this.#stopped) {
      await client.end().catch(() => {});
      return;
    }
    this.#client = client;
    this.#retryMs = 100;
  }

  #lost(client: pg.Client): void {
    if (this.#client !== client) return;
    this.#client = null;
    client.end().catch(() => {});
    this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    if (this.#stopped || this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#connect().then(
        () => this.onNotify(''),
        () => {
          this.#retryMs = Math.min(this.#retryMs * 2, 5_000);
          this.#scheduleReconnect();
        },
      );
    }, this.#retryMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    const client = this.#client;
    this.#client = null;
    await client?.end().catch(() => {});
  }
}

export class LiteDb implements Db {
  readonly kind = 'pglite' as const;
  readonly lite: PGlite;
  readonly #onClose: (() => Promise<void>) | undefined;

  constructor(lite: PGlite, onClose?: () => Promise<void>) {
    this.lite = lite;
    this.#onClose = onClose;
  }

  query<T = Row>(statement: Statement, values: readonly unknown[] = []): Promise<T[]> {
    return liteQuery<T>(this.lite, statement, values);
  }

  async exec(script: string): Promise<void> {
    await this.lite.exec(script);
  }

  transaction<T>(fn: (tx: Executor) => Promise<T>): Promise<T> {
    return this.lite.transaction((tx) => fn(liteExecutor(tx)));
  }

  async listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    return this.lite.listen(channel, onNotify);
  }

  async close(): Promise<void> {
    await this.#onClose?.();
  }
}

type LiteQueryable = Pick<PGlite | LiteTransaction, 'query' | 'exec'>;

async function liteQuery<T>(target: LiteQueryable, statement: Statement, values: readonly unknown[]) {
  const result = await target.query<T>(statement.text, [...values], { parsers: LITE_PARSERS });
  return result.rows;
}

function liteExecutor(target: LiteQueryable): Executor {
  return {
    query: (statement, values = []) => liteQuery(target, statement, values),
    exec: async (script) => {
      await target.exec(script);
    },
  };
}

/** A named statement with the store's type parsers (see timestamptz.ts). */
function pgQuery(statement: Statement, values: readonly unknown[]): pg.QueryConfig {
  return { name: statement.name, text: statement.text, values: values as unknown[], types: STORE_TYPES };
}

function pgExecutor(client: pg.ClientBase): Executor {
  return {
    query: async (statement, values = []) => {
      const result = await client.query(pgQuery(statement, values));
      return result.rows;
    },
    exec: async (script) => {
      await client.query(script);
    },
  };
}

/**
 * The caller's transaction as an Executor: a node-postgres client inside BEGIN, or a PGlite
 * transaction (or instance). Anything else is a programming error and says so.
 */
export function executorOf(tx: unknown): Executor {
  // Duck-typed as well, in case the application loads its own copy of pg.
  if (tx instanceof pg.Client || (isObject(tx) && typeof tx.query === 'function' && 'connection' in tx)) {
    return pgExecutor(tx as pg.ClientBase);
  }
  if (isObject(tx) && typeof tx.query === 'function' && typeof tx.exec === 'function') {
    return liteExecutor(tx as unknown as LiteQueryable);
  }
  if (tx instanceof pg.Pool) {
    throw new TypeError(
      'tx: expected a client inside a transaction (const tx = await pool.connect(); await tx.query("BEGIN")), got a Pool',
    );
  }
  throw new TypeError('tx: expected a node-postgres client inside BEGIN or a PGlite transaction, or null');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}
