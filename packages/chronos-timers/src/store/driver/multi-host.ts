/**
 * Connects node-postgres to whichever listed host qualifies now — for `read-write`, the one that
 * accepts writes — and finds another when it stops qualifying (a failover), without a restart.
 *
 * `MultiHost` owns the choice. Its `Client` class is given to `pg.Pool` (`{ Client }`) and to
 * any dedicated connection (LISTEN): each new connection goes to the host chosen last while a
 * connection to it is open; when none is chosen, or every connection to the chosen one has closed
 * (an idle pool cannot have seen it die), the hosts are probed in order, starting with that one
 * or after the one that failed last, each within the per-host connect timeout. A connection is checked as libpq checks it: for `read-write`,
 * the session must not be read-only (`default_transaction_read_only` and `in_hot_standby`, which
 * PostgreSQL 14+ reports at start-up; on older servers and through PgBouncer, one `SELECT`).
 *
 * A host stops being chosen when a connection to it fails to connect or to qualify, emits
 * 'error' (a lost connection), or is released to its pool with an error that `isFailoverError`
 * recognises: SQLSTATE 25006 (read-only transaction), 57P01–57P03 (shut down, crashed, not
 * accepting connections), class 08 (connection exception), or a socket error. Pool clients
 * released with such an error are discarded by the pool itself (node-postgres drops a client
 * released with an error), so the next connection goes through the probe.
 *
 * Not guaranteed: a statement that was running when the primary died may or may not have
 * committed (the caller sees a connection error either way, as with one host); clients already
 * idle in a pool on a host that turned read-only without dropping its connections fail once
 * each before they are discarded (a failover manager restarts the old primary, which drops
 * them all). With `any`, the first reachable host is used, as libpq does, even a standby.
 */
import type { EventEmitter } from 'node:events';
import pg from 'pg';
import {
  describeHost,
  parseConnectionString,
  sameHost,
  type HostPort,
  type ParsedConnectionString,
  type TargetSessionAttrs,
} from './connection-string.js';

/**
 * What a multi-host pool reports about itself (for logs and `/readyz`). `previous` is the host
 * chosen before this one (null the first time), even when it was lost in between.
 */
export type MultiHostEvent =
  | { type: 'chosen'; host: HostPort; previous: HostPort | null; probeMs: number }
  | { type: 'lost'; host: HostPort; reason: string }
  | { type: 'none'; reason: string };

export interface MultiHostOptions {
  /** Per host, when the URL gives no `connect_timeout`. Default 5 s. */
  connectTimeoutMs?: number;
  /** Extra settings for the connections this module opens itself (probes, `connect()`). */
  clientConfig?: Omit<pg.ClientConfig, 'connectionString' | 'host' | 'port'>;
  onEvent?: (event: MultiHostEvent) => void;
  /**
   * After a probe found no qualifying host, connections within this many milliseconds fail
   * at once with the same error instead of probing again. Default 200.
   */
  probeBackoffMs?: number;
}

export interface MultiHostStatus {
  /** `host:port` in use now; null while no host qualifies (or none was tried yet). */
  host: string | null;
  targetSessionAttrs: TargetSessionAttrs;
  hosts: string[];
  /**
   * How many times another host than the one before was chosen (a failover); the first choice,
   * and the same host chosen again after a lost connection, count as none.
   */
  changes: number;
  /** Why the last probe found no host, when it did not. */
  lastError: string | null;
}

/** A connection that reached its host but does not qualify (e.g. a standby for read-write). */
export class HostNotQualifiedError extends Error {
  readonly code = 'CHRONOS_HOST_NOT_QUALIFIED';
}

/** No listed host qualified: the message lists each host and why. */
export class NoHostError extends Error {
  readonly code = 'CHRONOS_NO_HOST';
}

const FAILOVER_SQLSTATES = new Set(['25006', '57P01', '57P02', '57P03']);
const SOCKET_ERRORS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'CHRONOS_HOST_NOT_QUALIFIED',
  'CHRONOS_NO_HOST',
]);
// node-postgres' own messages for a connection that is gone (they carry no code).
const LOST_CONNECTION =
  /^(Connection terminated|Client has encountered a connection error|Client was closed and is not queryable|timeout expired)/;

/**
 * Whether `error` means "this connection is no longer to a host that qualifies": its pooled
 * client must be discarded (`release(error)`) and the host chosen again.
 */
export function isFailoverError(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 3) return false;
  const { code, message, cause } = error as { code?: unknown; message?: unknown; cause?: unknown };
  if (typeof code === 'string') {
    if (FAILOVER_SQLSTATES.has(code) || code.startsWith('08') || SOCKET_ERRORS.has(code)) return true;
  }
  if (typeof message === 'string' && LOST_CONNECTION.test(message)) return true;
  return isFailoverError(cause, depth + 1);
}

/** What decides whether a session qualifies. */
interface SessionState {
  readOnly: boolean;
  hotStandby: boolean;
}

type ClientClass = new (config?: string | pg.ClientConfig) => pg.Client;

/** The host a client of a `MultiHost.Client` class is connected to (null before it connects). */
export function hostOf(client: pg.ClientBase): HostPort | null {
  return (client as { multiHostTarget?: HostPort | null }).multiHostTarget ?? null;
}

export class MultiHost {
  readonly parsed: ParsedConnectionString;
  /** Give to `new pg.Pool({ Client })`; every connection it makes goes to the chosen host. */
  readonly Client: ClientClass;
  readonly #options: MultiHostOptions;
  #current: HostPort | null = null;
  /** Where the next probe starts: the host after the one lost last. */
  #next = 0;
  #probing: Promise<HostPort> | null = null;
  #lastFailure: { at: number; error: NoHostError } | null = null;
  #changes = 0;
  /** The host chosen last, kept while none is (a change is a choice of another host). */
  #lastChosen: HostPort | null = null;
  /** Connections of this MultiHost's `Client` open now, by `host:port`. */
  readonly #open = new Map<string, number>();

  constructor(parsed: ParsedConnectionString, options: MultiHostOptions = {}) {
    this.parsed = parsed;
    this.#options = options;
    this.Client = this.#clientClass();
  }

  /** Parses `url` (errors as `DATABASE_URL: expected …, got …`) and builds a MultiHost for it. */
  static fromUrl(url: string, options: MultiHostOptions = {}, name = 'DATABASE_URL'): MultiHost {
    return new MultiHost(parseConnectionString(url, name), options);
  }

  /**
   * The pool settings that route connections through this MultiHost: `connectionString` is a
   * single-host form of the URL (node-postgres reads every other parameter from it as usual),
   * `Client` picks the host.
   */
  poolConfig(): { connectionString: string; Client: ClientClass } {
    return { connectionString: this.parsed.urlFor(this.parsed.hosts[0]!), Client: this.Client };
  }

  /**
   * Watches `pool`: a client released with a failover error marks its host lost. (pg's
   * `pool.query` releases with every error it meets; a transaction must release with the error
   * itself when `isFailoverError` says so.)
   */
  watch(pool: pg.Pool): void {
    pool.on('release', (error: Error | undefined, client: pg.PoolClient) => {
      const host = hostOf(client);
      if (error && host && isFailoverError(error)) this.lost(host, error);
    });
  }

  /** The host connections go to now; null while none qualifies or before the first connection. */
  get current(): HostPort | null {
    return this.#current;
  }

  status(): MultiHostStatus {
    return {
      host: this.#current ? describeHost(this.#current) : null,
      targetSessionAttrs: this.parsed.targetSessionAttrs,
      hosts: this.parsed.hosts.map(describeHost),
      changes: this.#changes,
      lastError: this.#current ? null : (this.#lastFailure?.error.message ?? null),
    };
  }

  /** A new connection to the host that qualifies now: for LISTEN, which a pool cannot hold. */
  async connect(): Promise<pg.Client> {
    const client = new this.Client({ ...this.#options.clientConfig, ...this.poolConfig() });
    await client.connect();
    return client;
  }

  /** `host` no longer qualifies: the next connection probes again, starting after it. */
  lost(host: HostPort, reason: unknown): void {
    if (!this.#current || !sameHost(this.#current, host)) return;
    this.#current = null;
    const index = this.parsed.hosts.findIndex((h) => sameHost(h, host));
    this.#next = (index + 1) % this.parsed.hosts.length;
    this.#emit({ type: 'lost', host, reason: reasonOf(reason) });
  }

  get #perHostTimeoutMs(): number {
    return this.parsed.connectTimeoutMs ?? this.#options.connectTimeoutMs ?? 5_000;
  }

  /**
   * The chosen host while a connection to it is open (one that died would have said so), or the
   * result of one probe shared by every connection that asks meanwhile.
   */
  async #pick(): Promise<HostPort> {
    if (this.#current && (this.#open.get(describeHost(this.#current)) ?? 0) > 0) return this.#current;
    const failure = this.#lastFailure;
    if (!this.#current && failure && Date.now() - failure.at < (this.#options.probeBackoffMs ?? 200)) {
      throw failure.error;
    }
    this.#probing ??= this.#probe().finally(() => {
      this.#probing = null;
    });
    return this.#probing;
  }

  async #probe(): Promise<HostPort> {
    const started = Date.now();
    const hosts = this.parsed.hosts;
    const order = hosts.map((_, i) => hosts[(this.#next + i) % hosts.length]!);
    const mode = this.parsed.targetSessionAttrs;
    const reasons: string[] = [];
    let fallback: HostPort | null = null;
    for (const host of order) {
      const client = new pg.Client({
        ...this.#options.clientConfig,
        connectionString: this.parsed.urlFor(host),
        connectionTimeoutMillis: this.#perHostTimeoutMs,
      });
      const reported = trackReportedParameters(client);
      client.on('error', () => {});
      try {
        await client.connect();
        const state = await sessionState(client, reported);
        const verdict = judge(mode === 'prefer-standby' ? 'standby' : mode, state);
        if (verdict === null) return this.#choose(host, started);
        if (mode === 'prefer-standby') fallback ??= host;
        reasons.push(`${describeHost(host)} (${verdict})`);
      } catch (error) {
        reasons.push(`${describeHost(host)} (${reasonOf(error)})`);
        // The host chosen before, found gone while the pool was idle.
        if (this.#current && sameHost(this.#current, host)) this.lost(host, error);
      } finally {
        await client.end().catch(() => {});
      }
    }
    if (fallback) return this.#choose(fallback, started);
    const error = new NoHostError(`no listed host accepts ${mode} sessions: ${reasons.join(', ')}`);
    this.#lastFailure = { at: Date.now(), error };
    this.#emit({ type: 'none', reason: error.message });
    throw error;
  }

  #choose(host: HostPort, started: number): HostPort {
    const previous = this.#current;
    this.#current = host;
    this.#lastFailure = null;
    // The chosen host confirmed after an idle spell: nothing to report.
    if (previous && sameHost(previous, host)) return host;
    this.#next = this.parsed.hosts.findIndex((h) => sameHost(h, host));
    const before = previous ?? this.#lastChosen;
    if (before && !sameHost(before, host)) this.#changes += 1;
    this.#lastChosen = host;
    this.#emit({ type: 'chosen', host, previous: before, probeMs: Date.now() - started });
    return host;
  }

  /** After `client` connected to `host`: does the session qualify? Throws when it does not. */
  async #admit(client: pg.Client, host: HostPort, reported: Map<string, string>): Promise<void> {
    const mode = this.parsed.targetSessionAttrs;
    // prefer-standby settles on a host in the probe; any later connection to it is fine.
    if (mode === 'any' || mode === 'prefer-standby') return;
    const verdict = judge(mode, await sessionState(client, reported));
    if (verdict !== null) {
      const error = new HostNotQualifiedError(
        `${describeHost(host)} does not accept ${mode} sessions: ${verdict}`,
      );
      this.lost(host, error);
      throw error;
    }
  }

  #emit(event: MultiHostEvent): void {
    this.#options.onEvent?.(event);
  }

  #clientClass(): ClientClass {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the class below belongs to this MultiHost
    const owner = this;
    return class MultiHostClient extends pg.Client {
      multiHostTarget: HostPort | null = null;
      readonly #reported: Map<string, string>;

      constructor(config?: string | pg.ClientConfig) {
        super(config);
        this.#reported = trackReportedParameters(this);
        // A lost connection (also while it sits idle in a pool) means its host may be gone.
        this.on('error', (error) => {
          if (this.multiHostTarget) owner.lost(this.multiHostTarget, error);
        });
      }

      override connect(): Promise<pg.Client>;
      override connect(callback: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): void;
      override connect(
        callback?: ((err: Error) => void) | ((err: null, c: pg.Client) => void),
      ): Promise<pg.Client> | void {
        const connecting = (async () => {
          // The connect timeout the pool gave (CHRONOS_DB_CONNECT_TIMEOUT) bounds the probe and
          // the connection together, so a request still fails within it.
          const internals = this as unknown as { _connectionTimeoutMillis: number };
          const budgetMs = internals._connectionTimeoutMillis;
          const started = Date.now();
          const host = budgetMs > 0 ? await withDeadline(owner.#pick(), budgetMs) : await owner.#pick();
          if ((this.connection as unknown as { stream: { destroyed: boolean } }).stream.destroyed) {
            // The pool gave up on this client meanwhile (its connection timeout).
            throw new Error('Connection terminated due to connection timeout');
          }
          if (budgetMs > 0)
            internals._connectionTimeoutMillis = Math.max(1, budgetMs - (Date.now() - started));
          // node-postgres reads host and port when it opens the socket, not before.
          this.host = host.host;
          this.port = host.port;
          const parameters = (this as unknown as { connectionParameters: { host: string; port: number } })
            .connectionParameters;
          parameters.host = host.host;
          parameters.port = host.port;
          try {
            await super.connect();
          } catch (error) {
            owner.lost(host, error);
            throw error;
          }
          try {
            await owner.#admit(this, host, this.#reported);
          } catch (error) {
            await this.end().catch(() => {});
            throw error;
          }
          this.multiHostTarget = host;
          const key = describeHost(host);
          owner.#open.set(key, (owner.#open.get(key) ?? 0) + 1);
          this.once('end', () => {
            const left = (owner.#open.get(key) ?? 1) - 1;
            if (left > 0) owner.#open.set(key, left);
            else owner.#open.delete(key);
          });
          return this as pg.Client;
        })();
        if (!callback) return connecting;
        connecting.then(
          (client) => (callback as (err: null, c: pg.Client) => void)(null, client),
          (error: Error) => (callback as (err: Error) => void)(error),
        );
      }
    };
  }
}

/** `promise`, or a "timeout expired" error after `ms` (the promise goes on for whoever else waits). */
async function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timeout expired while choosing a host (${ms} ms)`)), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Collects the parameters the server reports (ParameterStatus), as libpq does. */
function trackReportedParameters(client: pg.Client): Map<string, string> {
  const reported = new Map<string, string>();
  (client.connection as unknown as EventEmitter).on(
    'parameterStatus',
    (message: { parameterName: string; parameterValue: string }) => {
      reported.set(message.parameterName, message.parameterValue);
    },
  );
  return reported;
}

/**
 * PostgreSQL 14+ reports both settings when a session starts, so no query is needed; older
 * servers, and PgBouncer (which passes on only a few parameters), are asked.
 */
async function sessionState(client: pg.Client, reported: Map<string, string>): Promise<SessionState> {
  const defaultReadOnly = reported.get('default_transaction_read_only');
  const hotStandby = reported.get('in_hot_standby');
  if (defaultReadOnly !== undefined && hotStandby !== undefined) {
    return { readOnly: defaultReadOnly === 'on' || hotStandby === 'on', hotStandby: hotStandby === 'on' };
  }
  const { rows } = await client.query<{ read_only: string; in_recovery: boolean }>(
    "SELECT pg_catalog.current_setting('transaction_read_only') AS read_only, pg_catalog.pg_is_in_recovery() AS in_recovery",
  );
  const row = rows[0]!;
  return { readOnly: row.read_only === 'on', hotStandby: row.in_recovery };
}

/** null when a session in `state` qualifies for `mode`; otherwise why not. */
function judge(mode: Exclude<TargetSessionAttrs, 'prefer-standby'>, state: SessionState): string | null {
  switch (mode) {
    case 'any':
      return null;
    case 'read-write':
      return state.readOnly ? (state.hotStandby ? 'a standby' : 'read-only') : null;
    case 'read-only':
      return state.readOnly ? null : 'read-write';
    case 'primary':
      return state.hotStandby ? 'a standby' : null;
    case 'standby':
      return state.hotStandby ? null : 'not a standby';
  }
}

function reasonOf(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' && !error.message.includes(code)
      ? `${error.message} [${code}]`
      : error.message;
  }
  return String(error);
}

/** The two levels `hostEventLog` writes at (a pino logger is one). */
interface HostEventSink {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/**
 * Logs what a MultiHost reports: a host chosen (info), a host lost (warn), no host qualifying
 * (warn, at most once every `noneEveryMs`, with how many were not logged since). `url` names the
 * setting the hosts came from (`DATABASE_URL`, `CHRONOS_LISTEN_URL`). Host names and ports only:
 * a MultiHost's reasons never contain the password.
 */
export function hostEventLog(
  logger: HostEventSink,
  url: string,
  noneEveryMs = 5_000,
): (event: MultiHostEvent) => void {
  let lastNoneAt = -Infinity;
  let unlogged = 0;
  return (event) => {
    switch (event.type) {
      case 'chosen': {
        const host = describeHost(event.host);
        const previous = event.previous ? describeHost(event.previous) : null;
        const moved = previous !== null && previous !== host;
        logger.info(
          { url, host, previous, probeMs: event.probeMs },
          moved ? `database host changed: ${previous} -> ${host}` : `database host chosen: ${host}`,
        );
        lastNoneAt = -Infinity;
        unlogged = 0;
        return;
      }
      case 'lost':
        logger.warn(
          { url, host: describeHost(event.host), reason: event.reason },
          `database host lost: ${describeHost(event.host)}; looking for the one that qualifies`,
        );
        return;
      case 'none': {
        const now = Date.now();
        if (now - lastNoneAt < noneEveryMs) {
          unlogged += 1;
          return;
        }
        logger.warn({ url, reason: event.reason, notLoggedSince: unlogged }, event.reason);
        lastNoneAt = now;
        unlogged = 0;
        return;
      }
    }
  };
}
