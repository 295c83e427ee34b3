/**
 * Every environment variable Chronos reads, its default and its validation, in one place.
 * The README's configuration table is this list. A bad value stops start-up with one line per
 * variable: `CHRONOS_LEASE: expected a duration such as "30s", got "thirty"`.
 */
import { resolve } from 'node:path';
import { ChronosError, describeValue, type FieldError } from './errors.js';
import { parseDuration } from './schedule/duration.js';
import { parseConnectionString } from './store/driver/connection-string.js';
import {
  DEFAULT_SCHEMA,
  EMBEDDED_SHARED_BUFFERS_MB,
  POOLER_MODES,
  schemaName,
  type PoolerMode,
} from './store/driver/db.js';

/** The schema a store's tables live in when none is named (the library's default too). */
export { DEFAULT_SCHEMA };

/** Where the embedded store keeps its files when no folder is named (`CHRONOS_DATA_DIR`, `dataDir`). */
export const DEFAULT_DATA_DIR = './.chronos';

export interface Config {
  /** PostgreSQL; when absent, the embedded store in `dataDir`. May list several hosts (libpq's form). */
  databaseUrl: string | undefined;
  /** `CHRONOS_DB_POOLER`: `transaction` when `DATABASE_URL` goes through PgBouncer in transaction mode. */
  dbPooler: PoolerMode;
  /** `CHRONOS_LISTEN_URL`: a direct URL for LISTEN, past the pooler. */
  listenUrl: string | undefined;
  /** The PostgreSQL schema Chronos's tables live in (`CHRONOS_SCHEMA`, default `chronos`). */
  schema: string;
  dataDir: string;
  /** `CHRONOS_EMBEDDED_SHARED_BUFFERS_MB`: the embedded store's PostgreSQL page cache. */
  embeddedSharedBuffersMB: number;
  port: number;
  host: string;
  routerUrl: string | undefined;
  /** `whsec_…` secrets; during a rotation two are given and both signatures are sent. */
  webhookSecrets: string[];
  fallbackUrl: string | undefined;
  operatorToken: string | undefined;
  leaseMs: number;
  nudgeAfterMs: number;
  escalateAfterMs: number;
  replyWindowMs: number;
  retentionMs: number;
  /** Finished alarms (fired, cancelled, failed) are deleted, with their wakes, this long after their last change. */
  alarmRetentionMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  deliveryTimeoutMs: number;
  minCronIntervalMs: number;
  maxActiveAlarms: number;
  createRatePerMinute: number;
  pollIntervalMs: number;
  trackerIntervalMs: number;
  batchSize: number | undefined;
  concurrency: number;
  /** Wakes sent on one connection to the router before their answers (HTTP/1.1 pipelining); 1: none. */
  routerPipelining: number;
  shutdownGraceMs: number;
  /** How long a request waits for a PostgreSQL connection before it fails (503) instead of hanging. */
  dbConnectTimeoutMs: number;
  /** `CHRONOS_REQUEST_TIMEOUT`: the longest a request may take to arrive, headers and body (408 past it). */
  requestTimeoutMs: number;
  /** `CHRONOS_IDLE_TIMEOUT`: a connection that sends and receives nothing this long is closed. */
  idleTimeoutMs: number;
  /** `CHRONOS_KEEP_ALIVE_TIMEOUT`: how long an idle keep-alive connection waits for its next request. */
  keepAliveTimeoutMs: number;
  logLevel: string;
  /** `CHRONOS_LOG_FORMAT`: `json` (the default for a service) or `pretty`; unset, pretty on a TTY. */
  logFormat: 'json' | 'pretty';
  /** The schedules file (contract §13), reconciled at start and on every change; absolute. */
  schedulesFile: string | undefined;
  /** For `chronos mcp` (stdio): the owner, by key or by DID. */
  apiKey: string | undefined;
  ownerDid: string | undefined;
  /**
   * Test only (`CHRONOS_TEST_CLOCK_OFFSET`, a signed duration such as `+1h` or `-10m`): shifts
   * this process's wall clock, so a scenario can run an instance whose host clock is wrong and
   * show that due-ness still follows the database clock (I5). 0 (unset) in every real deployment.
   */
  testClockOffsetMs: number;
}

type Env = Record<string, string | undefined>;

/**
 * The process's environment: the one place a command reads it (`chronos`'s main hands it on as
 * `io.env`), so every variable is read through this module.
 */
export function processEnv(): Env {
  return process.env;
}

/**
 * The data directory whose embedded store `chronos <argv>` is about to open when starting it
 * ahead pays (PGlite compiled, a new store's template unzipped while the commands load), or null:
 * only `chronos serve` with no other argument (not `--help` or a wrong one, which open nothing) and
 * no DATABASE_URL. The directory is read as `loadConfig` reads it, default and all, so what is
 * started ahead is what the store then takes.
 */
export function embeddedAheadDir(env: Env, argv: readonly string[]): string | null {
  const [command, ...args] = argv;
  if (command !== 'serve' || args.length > 0) return null;
  if (env.DATABASE_URL?.trim()) return null;
  return env.CHRONOS_DATA_DIR?.trim() || DEFAULT_DATA_DIR;
}

/** Reads the configuration from `env`; throws `invalid_input` naming every bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const errors: FieldError[] = [];
  const fail = (name: string, expected: string, got: unknown) =>
    errors.push({ path: name, message: `${name}: expected ${expected}, got ${describeValue(got)}` });

  const text = (name: string) => {
    const value = env[name]?.trim();
    return value === undefined || value === '' ? undefined : value;
  };
  const duration = (name: string, fallback: string, minMs = 0) => {
    const raw = text(name) ?? fallback;
    try {
      const ms = parseDuration(raw, name);
      if (ms < minMs) fail(name, `a duration of at least ${minMs} ms`, raw);
      return ms;
    } catch {
      fail(name, 'a duration such as "250ms", "30s", "5m" or "1h"', raw);
      return parseDuration(fallback, name);
    }
  };
  const integer = (name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER) => {
    const raw = text(name);
    if (raw === undefined) return fallback;
    const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      fail(name, `a whole number from ${min} to ${max}`, raw);
      return fallback;
    }
    return n;
  };
  const logFormat = (): 'json' | 'pretty' => {
    const raw = text('CHRONOS_LOG_FORMAT');
    if (raw === undefined) return process.stdout.isTTY ? 'pretty' : 'json';
    if (raw === 'json' || raw === 'pretty') return raw;
    fail('CHRONOS_LOG_FORMAT', '"json" or "pretty"', raw);
    return 'json';
  };
  const url = (name: string) => {
    const raw = text(name);
    if (raw === undefined) return undefined;
    try {
      const parsed = new URL(raw);
      if (parsed.protocol === 'http:' || parsed.protocol === 'https:') return raw;
    } catch {
      // reported below
    }
    fail(name, 'an http(s) URL such as "https://router.example/wakes"', raw);
    return undefined;
  };
  const signedDuration = (name: string) => {
    const raw = text(name);
    if (raw === undefined) return 0;
    const sign = raw.startsWith('-') ? -1 : 1;
    try {
      return sign * parseDuration(raw.replace(/^[+-]/, ''), name);
    } catch {
      fail(name, 'a signed duration such as "+1h" or "-10m"', raw);
      return 0;
    }
  };
  const schema = () => {
    const raw = text('CHRONOS_SCHEMA') ?? DEFAULT_SCHEMA;
    try {
      return schemaName(raw, 'CHRONOS_SCHEMA');
    } catch (error) {
      errors.push(...(error as ChronosError).errors);
      return DEFAULT_SCHEMA;
    }
  };
  const postgresUrl = (name: string) => {
    const raw = text(name);
    if (raw === undefined) return undefined;
    const error = databaseUrlError(raw, name);
    if (error) errors.push(error);
    return error ? undefined : raw;
  };
  const pooler = (): PoolerMode => {
    const raw = text('CHRONOS_DB_POOLER') ?? 'none';
    if ((POOLER_MODES as readonly string[]).includes(raw)) return raw as PoolerMode;
    fail('CHRONOS_DB_POOLER', '"none" or "transaction" (PgBouncer in transaction mode)', raw);
    return 'none';
  };
  const schedulesFile = () => {
    const raw = text('CHRONOS_SCHEDULES_FILE');
    if (raw === undefined) return undefined;
    if (/[\\/]$/.test(raw) || raw.includes('\0')) {
      fail('CHRONOS_SCHEDULES_FILE', 'the path of a JSON file such as "./schedules.json"', raw);
      return undefined;
    }
    return resolve(raw);
  };
  const secrets = (text('CHRONOS_WEBHOOK_SECRET') ?? '').split(/[\s,]+/).filter(Boolean);
  for (const secret of secrets) {
    const body = secret.startsWith('whsec_') ? secret.slice(6) : '';
    if (body === '' || !/^[A-Za-z0-9+/]+={0,2}$/.test(body)) {
      errors.push({
        path: 'CHRONOS_WEBHOOK_SECRET',
        message:
          'CHRONOS_WEBHOOK_SECRET: expected "whsec_" followed by base64 (two, separated by a space, during a rotation), got a value of another form',
      });
    }
  }

  const config: Config = {
    databaseUrl: postgresUrl('DATABASE_URL'),
    dbPooler: pooler(),
    listenUrl: postgresUrl('CHRONOS_LISTEN_URL'),
    schema: schema(),
    dataDir: text('CHRONOS_DATA_DIR') ?? DEFAULT_DATA_DIR,
    embeddedSharedBuffersMB: integer(
      'CHRONOS_EMBEDDED_SHARED_BUFFERS_MB',
      EMBEDDED_SHARED_BUFFERS_MB,
      1,
      4_096,
    ),
    port: integer('PORT', 8080, 0, 65_535),
    host: text('HOST') ?? '0.0.0.0',
    routerUrl: url('CHRONOS_ROUTER_URL'),
    webhookSecrets: secrets,
    fallbackUrl: url('CHRONOS_FALLBACK_URL'),
    operatorToken: text('CHRONOS_OPERATOR_TOKEN'),
    leaseMs: duration('CHRONOS_LEASE', '30s', 1_000),
    nudgeAfterMs: duration('CHRONOS_NUDGE_AFTER', '5m'),
    escalateAfterMs: duration('CHRONOS_ESCALATE_AFTER', '12m'),
    replyWindowMs: duration('CHRONOS_REPLY_WINDOW', '2m'),
    retentionMs: duration('CHRONOS_RETENTION', '7d'),
    alarmRetentionMs: duration('CHRONOS_ALARM_RETENTION', '30d', 60_000),
    retryBaseMs: duration('CHRONOS_RETRY_BASE', '1s', 1),
    retryMaxMs: duration('CHRONOS_RETRY_MAX', '1h', 1),
    deliveryTimeoutMs: duration('CHRONOS_DELIVERY_TIMEOUT', '10s', 1),
    minCronIntervalMs: duration('CHRONOS_MIN_CRON_INTERVAL', '60s'),
    maxActiveAlarms: integer('CHRONOS_MAX_ACTIVE_ALARMS', 1_000, 0),
    createRatePerMinute: integer('CHRONOS_CREATE_RATE', 120, 0),
    pollIntervalMs: duration('CHRONOS_POLL_INTERVAL', '1s', 10),
    trackerIntervalMs: duration('CHRONOS_TRACKER_INTERVAL', '5s', 10),
    batchSize:
      text('CHRONOS_BATCH_SIZE') === undefined ? undefined : integer('CHRONOS_BATCH_SIZE', 200, 1, 5_000),
    concurrency: integer('CHRONOS_CONCURRENCY', 200, 1, 10_000),
    routerPipelining: integer('CHRONOS_ROUTER_PIPELINING', 1, 1, 100),
    shutdownGraceMs: duration('CHRONOS_SHUTDOWN_GRACE', '10s'),
    dbConnectTimeoutMs: duration('CHRONOS_DB_CONNECT_TIMEOUT', '5s', 1),
    requestTimeoutMs: duration('CHRONOS_REQUEST_TIMEOUT', '30s', 100),
    idleTimeoutMs: duration('CHRONOS_IDLE_TIMEOUT', '30s', 100),
    keepAliveTimeoutMs: duration('CHRONOS_KEEP_ALIVE_TIMEOUT', '5s', 100),
    logLevel: text('LOG_LEVEL') ?? 'info',
    logFormat: logFormat(),
    schedulesFile: schedulesFile(),
    apiKey: text('CHRONOS_API_KEY'),
    ownerDid: text('CHRONOS_OWNER_DID'),
    testClockOffsetMs: signedDuration('CHRONOS_TEST_CLOCK_OFFSET'),
  };
  if (config.escalateAfterMs < config.nudgeAfterMs) {
    fail(
      'CHRONOS_ESCALATE_AFTER',
      'a duration no shorter than CHRONOS_NUDGE_AFTER',
      text('CHRONOS_ESCALATE_AFTER'),
    );
  }
  // Both concern a PostgreSQL server; with the embedded store they would silently do nothing.
  for (const name of ['CHRONOS_DB_POOLER', 'CHRONOS_LISTEN_URL']) {
    if (text(name) !== undefined && text('DATABASE_URL') === undefined) {
      errors.push({ path: name, message: `${name}: expected only with DATABASE_URL, got it without` });
    }
  }
  if (errors.length > 0) {
    throw new ChronosError('invalid_input', errors.map((e) => e.message).join('\n'), { errors });
  }
  return config;
}

/**
 * Why `raw` cannot be Chronos's PostgreSQL URL (`name` is where it came from), or null: a libpq
 * URL, possibly listing several hosts, whose `target_session_attrs` (if any) lets Chronos write.
 * The message never contains the password.
 */
export function databaseUrlError(raw: string, name: string): FieldError | null {
  try {
    const { targetSessionAttrs } = parseConnectionString(raw, name);
    if (targetSessionAttrs === 'read-write' || targetSessionAttrs === 'any') return null;
    const message = `${name}: expected target_session_attrs "read-write" or "any" (Chronos writes), got "${targetSessionAttrs}"`;
    return { path: name, message };
  } catch (error) {
    if (error instanceof ChronosError && error.errors.length > 0) return error.errors[0]!;
    throw error;
  }
}
