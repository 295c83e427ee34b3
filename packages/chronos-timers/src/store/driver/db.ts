/**
 * The one door to SQL: a narrow query interface over node-postgres and PGlite.
 *
 * The same statement text runs on both. On node-postgres every statement is a named prepared
 * statement, unless the database is reached through a pooler in transaction mode (`pooler:
 * 'transaction'`), where a named statement prepared on one server connection is missing on the
 * next: there they are sent unnamed (parsed and planned at every execution). Results are made alike: `int8` and `numeric` come back as strings on both, and
 * store queries read `jsonb` as `::text` so payloads pass through verbatim (I4).
 *
 * **Schema.** Every table lives in one schema (default `chronos`, contract §2). Statement texts
 * name tables as `chronos.<table>` and notification channels as `'chronos_<name>'`; an executor
 * bound to another schema runs the same statement with both prefixes replaced (and under its own
 * prepared-statement name), so one process can serve several schemas and a caller's transaction
 * never depends on its `search_path`.
 *
 * **Errors.** Driver errors leave the store as `ChronosError`s: the database being away is
 * `unavailable`, a value it refused (SQLSTATE class 22) is `invalid_input`. Nothing above the
 * store reads a SQLSTATE; store modules that expect one (a unique violation) use `sqlState()`.
 *
 * **Several hosts.** A `DATABASE_URL` listing several hosts, or giving `target_session_attrs`,
 * connects through `MultiHost` (multi-host.ts): every connection, LISTEN's included, goes to the
 * host that qualifies (for `read-write`, the primary), and after a failover to the new one. A
 * plain one-host URL is handed to node-postgres as it is.
 *
 * PGlite is one backend shared by everything in the process: its own mutex serialises our
 * queries with any transaction the application holds on the same instance.
 */
import pg from 'pg';
import type { PGlite, Transaction as LiteTransaction } from '@electric-sql/pglite';
import { ChronosError } from '../../errors.js';
import { describeHost, parseConnectionString, type ParsedConnectionString } from './connection-string.js';
import { isFailoverError, MultiHost, type MultiHostEvent, type MultiHostStatus } from './multi-host.js';
import { CopyInQuery, type CopyIn } from './copy-in.js';
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

/**
 * `{a,b,NULL}`: each element written by `element`, null as NULL. For a `$n::type[]` parameter
 * of many elements, instead of node-postgres's own literal, which it grows a string per element
 * and separator: a large batch of alarms costs the client less work this way
 * (bench/schedule-many.ts), and a worker recording its outcomes allocates less while draining
 * (bench/README.md, "Worker RSS"; the figures in "Figures from the store's comments").
 */
export function arrayLiteral<T>(values: readonly T[], element: (v: NonNullable<T>) => string): string {
  // The common cases joined at once, with no string made per element: bare values without a
  // null, and texts that need no escaping (quoted alike by the separator).
  if (element === String && values.every(isPresent)) return `{${values.join(',')}}`;
  if (element === textElement && values.length > 0 && values.every(isPlainText))
    return `{"${values.join('","')}"}`;
  const parts = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    parts[i] = v === null || v === undefined ? 'NULL' : element(v);
  }
  return `{${parts.join(',')}}`;
}

/** A text element of an array literal: always quoted, with `"` and `\` escaped. */
export function textElement(s: string): string {
  return NEEDS_ESCAPE.test(s) ? `"${s.replace(ESCAPED, '\\$&')}"` : `"${s}"`;
}
const NEEDS_ESCAPE = /["\\]/;
const isPresent = (v: unknown) => v !== null && v !== undefined;
const isPlainText = (v: unknown) => typeof v === 'string' && !NEEDS_ESCAPE.test(v);
const ESCAPED = /["\\]/g;

/** What one batch of a retention prune is told: rows older than `retentionMs`, at most `limit`. */
export interface PruneBatch {
  retentionMs: number;
  limit: number;
  /** Only these queues' rows (a library worker prunes its own); all of them when absent. */
  queues?: readonly string[];
}

/**
 * Runs one prune batch with the statement for every queue ($1 retention, $2 limit) or the one
 * for some queues ($3 the queues); returns how many rows it deleted.
 */
export async function pruneBatch(
  ex: Executor,
  statements: { every: Statement; ofQueues: Statement },
  { retentionMs, limit, queues }: PruneBatch,
): Promise<number> {
  const rows = await (queues
    ? ex.query(statements.ofQueues, [retentionMs, limit, queues])
    : ex.query(statements.every, [retentionMs, limit]));
  return rows.length;
}

/** The schema Chronos's tables live in unless configured otherwise (`CHRONOS_SCHEMA`). */
export const DEFAULT_SCHEMA = 'chronos';
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** `value` as a schema name, or an `invalid_input` error naming `path`. */
export function schemaName(value: unknown, path = 'schema'): string {
  if (value === undefined) return DEFAULT_SCHEMA;
  if (typeof value === 'string' && SCHEMA_NAME.test(value)) return value;
  const shown = typeof value === 'string' ? JSON.stringify(value) : typeof value;
  const message = `${path}: expected a schema name of lower-case letters, digits and "_" (up to 63, not starting with a digit), like "chronos", got ${shown}`;
  throw new ChronosError('invalid_input', message, { errors: [{ path, message }] });
}

/** The notification channel `name` of `schema`'s Chronos (`chronos_due` for the default). */
export function channel(schema: string, name: string): string {
  return `${schema}_${name}`;
}

const bySchema = new WeakMap<Statement, Map<string, Statement>>();

/** `statement` as it runs in `schema`: its table and channel prefixes replaced, its name kept apart. */
export function inSchema(statement: Statement, schema: string): Statement {
  if (schema === DEFAULT_SCHEMA) return statement;
  let forms = bySchema.get(statement);
  if (!forms) bySchema.set(statement, (forms = new Map()));
  let bound = forms.get(schema);
  if (!bound) {
    bound = {
      name: `${statement.name}@${schema}`,
      text: statement.text.replace(/\bchronos\./g, `${schema}.`).replace(/'chronos_/g, `'${schema}_`),
    };
    forms.set(schema, bound);
  }
  return bound;
}

/** Something statements can run on: the database itself, or one transaction. */
export interface Executor {
  /** The schema this executor's statements run in. */
  readonly schema: string;
  query<T = Row>(statement: Statement, values?: readonly unknown[]): Promise<T[]>;
  /** Runs a script of several statements with no parameters (migrations). */
  exec(script: string): Promise<void>;
  /**
   * `COPY … FROM STDIN` (`text`, naming `chronos.` tables as statements do), its rows sent as the
   * caller makes them: only on a node-postgres client (a caller's transaction); absent elsewhere.
   */
  copyIn?(text: string): CopyIn;
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

// Node's network errors; PostgreSQL's "connection exception" (08), "operator intervention"
// (57P01–57P05: terminated, shutting down, cannot connect now) and "insufficient resources" (53).
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ECONNABORTED',
]);
const DRIVER_MESSAGES =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|connection error and is not queryable|Client was closed and is not queryable|Cannot use a pool after calling end/i;

/** The SQLSTATE (or Node error code) of a driver error, wherever the store wrapped it. */
export function sqlState(error: unknown): string | undefined {
  const inner = error instanceof ChronosError ? error.cause : error;
  const code = (inner as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** True when `error` says the database could not be reached (as opposed to refusing a query). */
function isUnreachable(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 4) return false;
  if (error instanceof ChronosError) return error.code === 'unavailable';
  const { code, message, cause, errors } = error as {
    code?: unknown;
    message?: unknown;
    cause?: unknown;
    errors?: unknown;
  };
  if (typeof code === 'string') {
    if (NETWORK_CODES.has(code)) return true;
    if (/^(08...|57P0[1-5]|53...)$/.test(code)) return true;
  }
  if (typeof message === 'string' && DRIVER_MESSAGES.test(message)) return true;
  if (Array.isArray(errors) && errors.some((e) => isUnreachable(e, depth + 1))) return true;
  // A failover: no listed host qualifies yet, or the one in use turned read-only (25006).
  if (isFailoverError(error)) return true;
  return isUnreachable(cause, depth + 1);
}

const UNREACHABLE_ADVICE = 'nothing was changed; try again in a few seconds';

/**
 * Where and why a connection failed, from the system's errors in `error`'s chain (Node's connect
 * errors carry `address`, `port` and `code`; a name lookup, `hostname`): `at` is `host:port` (or
 * several, comma-separated), `why` the codes or the driver's words. Never a password: only these
 * fields are read, never the connection string.
 */
export function unreachableDetail(error: unknown, fallbackAt?: string): { at?: string; why?: string } {
  const at = new Set<string>();
  const why = new Set<string>();
  const visit = (e: unknown, depth: number) => {
    if (typeof e !== 'object' || e === null || depth > 4) return;
    const { code, address, port, hostname, message, errors, cause } = e as Record<string, unknown>;
    if (typeof address === 'string') at.add(typeof port === 'number' ? hostPort(address, port) : address);
    else if (typeof hostname === 'string') at.add(hostname);
    if (typeof code === 'string' && code !== '' && !(e instanceof ChronosError)) why.add(code);
    else if (!Array.isArray(errors) && cause === undefined && typeof message === 'string' && message !== '') {
      why.add(message.length > 120 ? `${message.slice(0, 119)}…` : message);
    }
    if (Array.isArray(errors)) for (const inner of errors) visit(inner, depth + 1);
    visit(cause, depth + 1);
  };
  visit(error, 0);
  const where = at.size > 0 ? [...at].join(', ') : fallbackAt;
  return { ...(where !== undefined && { at: where }), ...(why.size > 0 && { why: [...why].join(', ') }) };
}

function hostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

/**
 * A driver error as the rest of Chronos sees it (see the module comment). `where` names the
 * database (`host:port`) when the error itself does not. An unreachable database's message names
 * its address and the system's error, for the log and a library's caller; an HTTP answer shows
 * `publicMessage`, without the address.
 */
export function storeError(error: unknown, where?: string): unknown {
  if (error instanceof ChronosError) return error;
  if (isUnreachable(error)) {
    const { at, why } = unreachableDetail(error, where);
    const subject = at === undefined ? 'the database' : `the database at ${at}`;
    return new ChronosError(
      'unavailable',
      `${subject} is unreachable${why === undefined ? '' : ` (${why})`}; ${UNREACHABLE_ADVICE}`,
      { cause: error, publicMessage: `the database is unreachable right now; ${UNREACHABLE_ADVICE}` },
    );
  }
  const code = sqlState(error);
  if (code !== undefined && /^22...$/.test(code)) {
    const message = `body: the database refused a value: ${(error as Error).message}`;
    return new ChronosError('invalid_input', message, { errors: [{ path: '', message }], cause: error });
  }
  return error;
}

async function mapped<T>(promise: Promise<T>, where?: () => string | undefined): Promise<T> {
  try {
    return await promise;
  } catch (error) {
    throw storeError(error, where?.());
  }
}

// Type OIDs whose JavaScript form differs between the two drivers unless pinned.
const INT8 = 20;
const NUMERIC = 1700;
const asText = (value: string) => value;
const LITE_PARSERS = { [INT8]: asText, [NUMERIC]: asText };

/** How long a pooled PostgreSQL connection (and every plan it prepared) lives. */
export const CONNECTION_LIFETIME_S = 600;

/** `transaction`: the database is reached through a pooler in transaction mode (PgBouncer). */
export type PoolerMode = 'none' | 'transaction';
export const POOLER_MODES: readonly PoolerMode[] = ['none', 'transaction'];

/** How a PgDb reaches its database beyond the pool itself. */
export interface PgConnectionOptions {
  /**
   * `transaction` (behind PgBouncer in transaction mode): statements are sent unnamed, and LISTEN
   * goes through `listenUrl` only; without one there is no listener and `listen()` does nothing
   * (its callers poll). Default `none`.
   */
  pooler?: PoolerMode;
  /** A URL that reaches PostgreSQL directly (not through the pooler), for LISTEN; may list hosts. */
  listenUrl?: string;
  /** What a multi-host URL reports (a host chosen, lost, none qualifying): for the log. */
  onHostEvent?: (event: MultiHostEvent, url: 'DATABASE_URL' | 'CHRONOS_LISTEN_URL') => void;
}

export interface PgDbOptions extends Omit<pg.PoolConfig, 'connectionString' | 'max'>, PgConnectionOptions {
  /** The schema Chronos's tables live in (default `chronos`). */
  schema?: string;
}

/** Which database host is in use (for `/readyz`); a one-host URL reports that host. */
export type DatabaseStatus = MultiHostStatus;

/** How a PgDb reaches its database: the options above and what `PgDb.connect` found in the URL. */
export interface PgDbReach extends PgConnectionOptions {
  /** The URL's hosts, when it lists several or gives `target_session_attrs`. */
  hosts?: MultiHost;
  /** The URL as parsed (absent for an application's own pool). */
  target?: ParsedConnectionString;
}

/** The pools a PgDb has already given a listener for idle clients' errors. */
const quietPools = new WeakSet<pg.Pool>();

/** node-postgres returns int8 and numeric as strings already; PGlite is told to match. */
export class PgDb implements Db {
  readonly kind = 'postgres' as const;
  readonly pool: pg.Pool;
  readonly schema: string;
  readonly #ownsPool: boolean;
  /** The LISTEN connection every listener shares, made by the first (see PgListener). */
  #listener: PgListener | null = null;
  /** Another store on the same database whose LISTEN connection this one uses (see listenThrough). */
  #listenThrough: PgDb | null = null;
  /** False behind a transaction pooler: statements go unnamed. */
  readonly named: boolean;
  readonly #reach: PgDbReach;
  #listenHosts: MultiHost | null = null;

  constructor(pool: pg.Pool, ownsPool: boolean, schema: string = DEFAULT_SCHEMA, reach: PgDbReach = {}) {
    this.pool = pool;
    this.schema = schema;
    this.#ownsPool = ownsPool;
    this.#reach = reach;
    this.named = (reach.pooler ?? 'none') !== 'transaction';
    // An idle client that loses its connection must not crash the process. Once a pool: an
    // application may open several stores on its own pool (eleven listeners made Node warn).
    if (!quietPools.has(pool)) {
      quietPools.add(pool);
      pool.on('error', () => {});
    }
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
  static connect(connectionString: string, max = 10, options: PgDbOptions = {}): PgDb {
    const { schema, pooler, listenUrl, onHostEvent, ...poolOptions } = options;
    const reach = { pooler, listenUrl, onHostEvent };
    const target = parseConnectionString(connectionString, 'DATABASE_URL');
    const settings = { maxLifetimeSeconds: CONNECTION_LIFETIME_S, ...poolOptions, max };
    if (target.hosts.length === 1 && target.targetSessionAttrs === 'any') {
      return new PgDb(new pg.Pool({ ...settings, connectionString }), true, schema, { ...reach, target });
    }
    const hosts = new MultiHost(target, {
      connectTimeoutMs: poolOptions.connectionTimeoutMillis,
      clientConfig: { connectionTimeoutMillis: poolOptions.connectionTimeoutMillis },
      onEvent: onHostEvent && ((event) => onHostEvent(event, 'DATABASE_URL')),
    });
    const pool = new pg.Pool({ ...settings, ...hosts.poolConfig() });
    hosts.watch(pool);
    return new PgDb(pool, true, schema, { ...reach, hosts, target });
  }

  /**
   * The host in use and the hosts listed; null for an application's own pool (its URL is not
   * ours to report).
   */
  status(): DatabaseStatus | null {
    const { hosts, target } = this.#reach;
    if (hosts) return hosts.status();
    if (!target) return null;
    const host = describeHost(target.hosts[0]!);
    return { host, targetSessionAttrs: 'any', hosts: [host], changes: 0, lastError: null };
  }

  /** How LISTEN reaches the database: `pool` (as the pool does), `listenUrl`, or `none` (callers poll). */
  get listening(): 'pool' | 'listenUrl' | 'none' {
    if (this.#reach.listenUrl) return 'listenUrl';
    return this.named ? 'pool' : 'none';
  }

  /** The database's `host:port` for an error that does not name it (read only on an error). */
  private readonly whereHost = (): string | undefined => this.status()?.host ?? undefined;

  async query<T = Row>(statement: Statement, values: readonly unknown[] = []): Promise<T[]> {
    const result = await mapped(
      this.pool.query(pgQuery(inSchema(statement, this.schema), values, this.named)),
      this.whereHost,
    );
    return result.rows as T[];
  }

  async exec(script: string): Promise<void> {
    await mapped(this.pool.query(script), this.whereHost);
  }

  async transaction<T>(fn: (tx: Executor) => Promise<T>): Promise<T> {
    const client = await mapped(this.pool.connect(), this.whereHost);
    // A connection lost while the transaction waits between statements (a held claim's handlers
    // running) is reported as an 'error' event, which would otherwise end the process: its next
    // statement fails instead, and the transaction is rolled back as for any other failure.
    const ignore = () => {};
    client.on('error', ignore);
    try {
      return await this.#inTransaction(client, fn);
    } finally {
      client.off('error', ignore);
    }
  }

  async #inTransaction<T>(client: pg.PoolClient, fn: (tx: Executor) => Promise<T>): Promise<T> {
    try {
      await client.query('BEGIN');
      const result = await fn(pgExecutor(client, this.schema, this.named));
      await client.query('COMMIT');
      client.release();
      return result;
    } catch (error) {
      try {
        await client.query('ROLLBACK');
        // A connection to a host that is going away or turned read-only is not reused; a
        // multi-host pool also stops choosing that host (MultiHost.watch).
        client.release(isFailoverError(error) ? (error as Error) : undefined);
      } catch (rollbackError) {
        client.release(rollbackError as Error);
      }
      throw storeError(error, this.whereHost());
    }
  }

  /**
   * LISTEN on a connection of its own: to the host the pool uses, or through `listenUrl`. Behind
   * a transaction pooler without `listenUrl` nothing listens: the callers' fallback polls do the
   * work, and this resolves to a no-op.
   */
  async listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    if (this.#listenThrough) return this.#listenThrough.listen(channel, onNotify);
    const connect = this.#listenConnect();
    if (!connect) return async () => {};
    const listener = (this.#listener ??= new PgListener(connect));
    await listener.add(channel, onNotify);
    return () => listener.remove(channel, onNotify);
  }

  /**
   * Listens through `other`'s LISTEN connection instead of one of its own: a second pool on the
   * same database (the loops') adds no connection that LISTENs, which matters behind a pooler.
   */
  listenThrough(other: PgDb): this {
    this.#listenThrough = other;
    return this;
  }

  async close(): Promise<void> {
    await this.#listener?.close();
    if (this.#ownsPool) await this.pool.end();
  }

  /** How a LISTEN connection is made, or null when there is none to make (see listen()). */
  #listenConnect(): (() => Promise<pg.Client>) | null {
    const { listenUrl, hosts, onHostEvent } = this.#reach;
    const timeout = this.pool.options.connectionTimeoutMillis;
    if (listenUrl) {
      const target = parseConnectionString(listenUrl, 'CHRONOS_LISTEN_URL');
      if (target.hosts.length > 1 || target.targetSessionAttrs !== 'any') {
        const listenHosts = (this.#listenHosts ??= new MultiHost(target, {
          connectTimeoutMs: timeout,
          clientConfig: { connectionTimeoutMillis: timeout },
          onEvent: onHostEvent && ((event) => onHostEvent(event, 'CHRONOS_LISTEN_URL')),
        }));
        return () => listenHosts.connect();
      }
      return () => plainClient({ connectionString: listenUrl, connectionTimeoutMillis: timeout });
    }
    if (!this.named) return null;
    if (hosts) return () => hosts.connect();
    return () => plainClient(this.pool.options);
  }
}

async function plainClient(config: pg.ClientConfig): Promise<pg.Client> {
  const client = new pg.Client(config);
  // Until the listener takes it over, an error must not go unhandled.
  client.on('error', () => {});
  await client.connect();
  return client;
}

/**
 * The store's LISTEN connection: one for every channel and listener of a PgDb (a worker's due
 * channel, the API keys' cache, a second worker's), made by the first listen() and kept until
 * close(). A worker started again, or another queue's, listens at once, with no connection to
 * make while its first claim runs (bench/README.md, "Drain"); an instance holds one LISTEN
 * connection however many listen. LISTEN and UNLISTEN go one at a time, in the order asked.
 *
 * node-postgres does not reconnect one by itself: on error or end this reconnects with backoff
 * (100 ms doubling to at most 1 s, so it is back about a second after a failover's promotion),
 * listens on every channel again and calls every listener with '', so each re-polls for whatever
 * was announced while it was away.
 */
class PgListener {
  #client: pg.Client | null = null;
  /** The channels the connection in hand listens on. */
  #listening = new Set<string>();
  readonly #channels = new Map<string, Set<(payload: string) => void>>();
  #closed = false;
  #retryMs = 100;
  #timer: NodeJS.Timeout | null = null;
  #queue: Promise<void> = Promise.resolve();

  constructor(private readonly connect: () => Promise<pg.Client>) {}

  /**
   * Calls `onNotify` for each notification on `channel`. Resolves once the server listens, or
   * once a first connection failed (it is then retried, and `onNotify('')` called when it is back).
   */
  add(channel: string, onNotify: (payload: string) => void): Promise<void> {
    let listeners = this.#channels.get(channel);
    if (!listeners) this.#channels.set(channel, (listeners = new Set()));
    listeners.add(onNotify);
    return this.#serial(async () => {
      if (!this.#client) {
        if (this.#timer) return;
        try {
          await this.#connect();
        } catch {
          this.#scheduleReconnect();
        }
        return;
      }
      if (this.#listening.has(channel) || !this.#channels.has(channel)) return;
      await this.#client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      this.#listening.add(channel);
    });
  }

  /** Stops calling `onNotify`; the last listener of a channel unlistens it. */
  remove(channel: string, onNotify: (payload: string) => void): Promise<void> {
    const listeners = this.#channels.get(channel);
    listeners?.delete(onNotify);
    if (listeners?.size !== 0) return this.#queue;
    this.#channels.delete(channel);
    return this.#serial(async () => {
      if (!this.#client || !this.#listening.has(channel) || this.#channels.has(channel)) return;
      this.#listening.delete(channel);
      await this.#client.query(`UNLISTEN ${pg.escapeIdentifier(channel)}`);
    });
  }

  /** Runs `op` after those asked before it; a failure of one (a lost connection) stops none. */
  #serial(op: () => Promise<void>): Promise<void> {
    const run = this.#queue.then(op).catch(() => {});
    this.#queue = run;
    return run;
  }

  async #connect(): Promise<void> {
    const client = await this.connect();
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    client.on('notification', (message) => {
      for (const onNotify of this.#channels.get(message.channel) ?? []) onNotify(message.payload ?? '');
    });
    const listening = new Set<string>();
    try {
      for (const channel of this.#channels.keys()) {
        await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
        listening.add(channel);
      }
    } catch (error) {
      await client.end().catch(() => {});
      throw error;
    }
    if (this.#closed) {
      await client.end().catch(() => {});
      return;
    }
    this.#client = client;
    this.#listening = listening;
    this.#retryMs = 100;
  }

  #lost(client: pg.Client): void {
    if (this.#client !== client) return;
    this.#client = null;
    this.#listening = new Set();
    client.end().catch(() => {});
    this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    if (this.#closed || this.#timer) return;
    this.#timer = setTimeout(() => {
      void this.#serial(async () => {
        this.#timer = null;
        if (this.#closed || this.#client) return;
        try {
          await this.#connect();
        } catch {
          this.#retryMs = Math.min(this.#retryMs * 2, 1_000);
          this.#scheduleReconnect();
          return;
        }
        for (const listeners of this.#channels.values()) for (const onNotify of listeners) onNotify('');
      });
    }, this.#retryMs);
    this.#timer.unref();
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const client = this.#client;
    this.#client = null;
    await client?.end().catch(() => {});
  }
}

/**
 * PostgreSQL's own page cache in the embedded store, in MB, unless its opener is given another
 * (`CHRONOS_EMBEDDED_SHARED_BUFFERS_MB`, which config.ts reads: kept here, beside LiteDb, so that
 * config.ts has it without loading PGlite). PostgreSQL's default is zeroed at every start and
 * stays resident; with a smaller one a start takes less memory and CPU. The operating system's
 * file cache still holds the files, and a page missed costs a file read rather than a disk seek
 * (bench/README.md, "Embedded store start").
 */
export const EMBEDDED_SHARED_BUFFERS_MB = 16;

/**
 * A PGlite instance (`@electric-sql/pglite`) as Chronos's types name it: declared here, so that
 * the library's declarations need PGlite (an optional peer dependency) only where it is used.
 * A real `PGlite` is one; `LiteDb` uses it as the real type inside.
 */
export interface PGliteLike {
  query<T = any>(query: string, params?: any[], options?: any): Promise<{ rows: T[]; affectedRows?: number }>;
  exec(query: string, options?: any): Promise<unknown[]>;
  transaction<T>(callback: (tx: any) => Promise<T>): Promise<T>;
  listen(channel: string, callback: (payload: string) => void): Promise<(...args: any[]) => Promise<void>>;
  close(): Promise<void>;
}

export class LiteDb implements Db {
  readonly kind = 'pglite' as const;
  readonly lite: PGliteLike;
  readonly schema: string;
  // TypeScript-private rather than `#`: a Proxy over this store (tests wrap one to hold a LISTEN or
  // count statements) calls these methods with the proxy as `this`, which `#` fields refuse.
  private readonly onClose: (() => Promise<void>) | undefined;

  constructor(lite: PGliteLike, onClose?: () => Promise<void>, schema: string = DEFAULT_SCHEMA) {
    this.lite = lite;
    this.onClose = onClose;
    this.schema = schema;
  }

  /** The full PGlite: `lite` is typed structurally so the declarations need no PGlite installed. */
  private get pglite(): PGlite {
    return this.lite as PGlite;
  }

  query<T = Row>(statement: Statement, values: readonly unknown[] = []): Promise<T[]> {
    return liteQuery<T>(this.pglite, inSchema(statement, this.schema), values);
  }

  async exec(script: string): Promise<void> {
    await mapped(this.pglite.exec(script));
  }

  transaction<T>(fn: (tx: Executor) => Promise<T>): Promise<T> {
    return mapped(this.pglite.transaction((tx) => fn(liteExecutor(tx, this.schema))));
  }

  async listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    return this.pglite.listen(channel, onNotify);
  }

  async close(): Promise<void> {
    await this.onClose?.();
  }
}

type LiteQueryable = Pick<PGlite | LiteTransaction, 'query' | 'exec'>;

async function liteQuery<T>(target: LiteQueryable, statement: Statement, values: readonly unknown[]) {
  const result = await mapped(target.query<T>(statement.text, [...values], { parsers: LITE_PARSERS }));
  return result.rows;
}

function liteExecutor(target: LiteQueryable, schema: string): Executor {
  return {
    schema,
    query: (statement, values = []) => liteQuery(target, inSchema(statement, schema), values),
    exec: async (script) => {
      await mapped(target.exec(script));
    },
  };
}

/** A statement (named unless `named` is false) with the store's type parsers (see timestamptz.ts). */
function pgQuery(statement: Statement, values: readonly unknown[], named: boolean): pg.QueryConfig {
  return {
    name: named ? statement.name : undefined,
    text: statement.text,
    values: values as unknown[],
    types: STORE_TYPES,
  };
}

function pgExecutor(client: pg.ClientBase, schema: string, named: boolean): Executor {
  return {
    schema,
    query: async (statement, values = []) => {
      const result = await mapped(client.query(pgQuery(inSchema(statement, schema), values, named)));
      return result.rows;
    },
    exec: async (script) => {
      await mapped(client.query(script));
    },
    copyIn: (text) => {
      const copy = new CopyInQuery(inSchema({ name: 'copy', text }, schema).text);
      client.query(copy as unknown as pg.QueryConfig);
      return {
        write: (chunk) => copy.write(chunk),
        get refused() {
          return copy.refused;
        },
        end: () => mapped(copy.end()),
        abort: (reason) => copy.abort(reason),
      };
    },
  };
}

/**
 * The caller's transaction as an Executor: a node-postgres client inside BEGIN, or a PGlite
 * transaction (or instance). Anything else is a programming error and says so. `named` false:
 * statements go unnamed (the caller's client is behind a transaction pooler too).
 */
export function executorOf(tx: unknown, schema: string = DEFAULT_SCHEMA, named = true): Executor {
  // Duck-typed as well, in case the application loads its own copy of pg.
  if (tx instanceof pg.Client || (isObject(tx) && typeof tx.query === 'function' && 'connection' in tx)) {
    return pgExecutor(tx as pg.ClientBase, schema, named);
  }
  if (isObject(tx) && typeof tx.query === 'function' && typeof tx.exec === 'function') {
    return liteExecutor(tx as unknown as LiteQueryable, schema);
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
