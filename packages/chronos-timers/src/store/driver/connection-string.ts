/**
 * Reads a libpq connection URL that may list several hosts — `postgres://u:pw@h1:5432,h2:5433/db
 * ?target_session_attrs=read-write` — which node-postgres cannot parse (its URL parser throws
 * "Invalid URL" on a host list).
 *
 * Pure: no I/O, no environment. The result lists the hosts in order and gives, for any one of
 * them, a single-host URL with every other parameter as written (`sslmode`, `application_name`,
 * `options`…), so node-postgres reads those exactly as it reads a single-host `DATABASE_URL`
 * today. libpq's rules, as its documentation states them ("Connection Strings", "Specifying
 * Multiple Hosts", "Parameter Key Words"):
 * - hosts are tried in the order given; `host:port` pairs separated by commas in the authority,
 *   or `host=` / `port=` comma lists in the query (one port applies to every host); an IPv6
 *   address is written in brackets, a Unix-socket directory percent-encoded (`%2Fvar%2Frun…`);
 * - `target_session_attrs`: `any` (the default), `read-write`, `read-only`, `primary`,
 *   `standby`, `prefer-standby`;
 * - `connect_timeout` is in seconds, applies to each host separately, 0 or less means none,
 *   and 1 counts as 2 (libpq's minimum).
 *
 * Not supported, refused with a message that says so: the keyword/value form (`host=… port=…`),
 * `hostaddr`, `load_balance_hosts=random`, a database name containing `/`, `?` or `#`, and hosts
 * given both in the authority and in `host=`. A host without a port gets 5432 (node-postgres'
 * default; `PGPORT` and `PGHOST` are not read here). Errors name the part that is wrong and never
 * contain the password.
 */
import { ChronosError, describeValue } from '../../errors.js';

export interface HostPort {
  /** A host name, an IP address (IPv6 without brackets), or a Unix-socket directory. */
  readonly host: string;
  readonly port: number;
}

export const TARGET_SESSION_ATTRS = [
  'any',
  'read-write',
  'read-only',
  'primary',
  'standby',
  'prefer-standby',
] as const;
export type TargetSessionAttrs = (typeof TARGET_SESSION_ATTRS)[number];

export interface ParsedConnectionString {
  /** In the order given; at least one. */
  readonly hosts: readonly HostPort[];
  readonly targetSessionAttrs: TargetSessionAttrs;
  /** `connect_timeout` in milliseconds, per host (libpq's 2 s minimum applied); undefined: none. */
  readonly connectTimeoutMs: number | undefined;
  readonly user: string | undefined;
  readonly database: string | undefined;
  /** The other query parameters, decoded, in the order given (passed on to node-postgres). */
  readonly params: ReadonlyArray<readonly [string, string]>;
  /** A URL for one host, with every other parameter as given: what node-postgres can parse. */
  urlFor(target: HostPort): string;
  /** The URL with the password shown as `***`, for logs and `/readyz`. */
  readonly redacted: string;
}

export const DEFAULT_PORT = 5432;
const DEFAULT_HOST = 'localhost';

/** Parameters this module interprets; all others go to node-postgres unchanged. */
const OWN_PARAMS = new Set([
  'host',
  'port',
  'hostaddr',
  'target_session_attrs',
  'connect_timeout',
  'load_balance_hosts',
  'dbname',
]);

/**
 * Parses `raw`; `name` is the variable it came from, used as the path of every error
 * (`DATABASE_URL: expected …, got …`).
 */
export function parseConnectionString(raw: string, name = 'DATABASE_URL'): ParsedConnectionString {
  // `got` is shown as given: a literal quoted with `q()`, or a description of what came.
  const fail: Fail = (expected, got, hint) => {
    const message = `${name}: expected ${expected}, got ${got}${hint ? `; ${hint}` : ''}`;
    return new ChronosError('invalid_input', message, { errors: [{ path: name, message }] });
  };
  const text = raw.trim();

  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(text);
  if (!scheme) {
    // A keyword/value string may well hold `password=…`: describe it, never echo it.
    const got = /^\s*\w+\s*=/.test(text) ? 'a keyword/value string' : 'a value without "scheme://"';
    throw fail('a URL such as "postgres://user@host1:5432,host2:5432/db"', got);
  }
  const protocol = scheme[1]!.toLowerCase();
  if (protocol !== 'postgres' && protocol !== 'postgresql') {
    throw fail('a URL starting "postgres://" or "postgresql://"', q(`${scheme[1]}://`));
  }

  const rest = text.slice(scheme[0].length);
  const authorityEnd = firstIndexOf(rest, ['/', '?']);
  const authority = rest.slice(0, authorityEnd);
  const afterAuthority = rest.slice(authorityEnd);
  const queryStart = afterAuthority.indexOf('?');
  const path = queryStart === -1 ? afterAuthority : afterAuthority.slice(0, queryStart);
  const query = queryStart === -1 ? '' : afterAuthority.slice(queryStart + 1);

  // A "/" or "?" in an unencoded password ends the authority early: say so without echoing it.
  if (!authority.includes('@') && afterAuthority.includes('@')) {
    throw fail(
      'a user name and password with "/", "?" and "@" percent-encoded (%2F, %3F, %40)',
      'an "@" after the host list',
    );
  }
  // userinfo: everything before the last '@' (an '@' in a password should be written %40).
  const at = authority.lastIndexOf('@');
  const userinfo = at === -1 ? '' : authority.slice(0, at);
  const hostList = at === -1 ? authority : authority.slice(at + 1);
  let user: string | undefined;
  let password: string | undefined;
  if (at !== -1) {
    const colon = userinfo.indexOf(':');
    const rawUser = colon === -1 ? userinfo : userinfo.slice(0, colon);
    user =
      rawUser === '' ? undefined : decode(rawUser, () => fail('a percent-encoded user name', q(rawUser)));
    if (colon !== -1) {
      password = decode(userinfo.slice(colon + 1), () =>
        fail('a percent-encoded password (write "%" as %25)', 'a password that is not'),
      );
    }
  }

  // Query parameters, decoded as libpq does ('+' is a plus sign, not a space).
  const params: [string, string][] = [];
  const seen = new Map<string, string>();
  if (query !== '') {
    for (const pair of query.split('&')) {
      if (pair === '') continue;
      const eq = pair.indexOf('=');
      if (eq === -1) throw fail('query parameters written key=value', q(pair));
      const key = decode(pair.slice(0, eq), () =>
        fail('a percent-encoded parameter name', q(pair.slice(0, eq))),
      );
      const value = decode(pair.slice(eq + 1), () =>
        fail(`a percent-encoded value for ${key}`, key === 'password' ? 'a value that is not' : q(pair)),
      );
      if (seen.has(key)) {
        throw fail(`each query parameter once`, `${q(key)} twice`);
      }
      seen.set(key, value);
      if (!OWN_PARAMS.has(key)) params.push([key, value]);
    }
  }

  if (seen.has('hostaddr')) {
    throw fail(
      'host names or addresses in the host list',
      'hostaddr=',
      'hostaddr is not supported: list the addresses as hosts',
    );
  }
  const loadBalance = seen.get('load_balance_hosts');
  if (loadBalance !== undefined && loadBalance !== 'disable') {
    throw fail(
      'load_balance_hosts=disable (hosts are tried in the order given)',
      `load_balance_hosts=${loadBalance}`,
    );
  }

  // Hosts: from the authority, or from host= and port= in the query, not both.
  let hosts: HostPort[];
  const hostParam = seen.get('host');
  const portParam = seen.get('port');
  if (hostList !== '') {
    if (hostParam !== undefined) {
      throw fail('hosts either before the path or in host=, not both', 'both');
    }
    const portForAll = portParam === undefined ? undefined : parsePort(portParam, 'port=', fail);
    hosts = hostList.split(',').map((entry) => parseHostEntry(entry, portForAll, fail));
  } else {
    const names = (hostParam ?? DEFAULT_HOST).split(',');
    const ports = portParam === undefined ? [] : portParam.split(',');
    if (ports.length > 1 && ports.length !== names.length) {
      throw fail(
        `one port, or one per host (${names.length})`,
        `${ports.length} ports`,
        'libpq pairs the lists of host= and port= one by one',
      );
    }
    hosts = names.map((hostName, i) => {
      if (hostName === '') throw fail('a host name between the commas of host=', 'an empty one');
      const portText = ports.length === 0 ? undefined : ports.length === 1 ? ports[0]! : ports[i]!;
      const port =
        portText === undefined || portText === '' ? DEFAULT_PORT : parsePort(portText, 'port=', fail);
      return { host: unbracket(hostName), port };
    });
  }

  const targetText = seen.get('target_session_attrs') ?? 'any';
  if (!(TARGET_SESSION_ATTRS as readonly string[]).includes(targetText)) {
    throw fail(`target_session_attrs ${listOf(TARGET_SESSION_ATTRS)}`, q(targetText));
  }
  const targetSessionAttrs = targetText as TargetSessionAttrs;

  const timeoutText = seen.get('connect_timeout');
  let connectTimeoutMs: number | undefined;
  if (timeoutText !== undefined && timeoutText.trim() !== '') {
    if (!/^\s*-?\d+\s*$/.test(timeoutText)) {
      throw fail('connect_timeout in whole seconds, such as connect_timeout=10', q(timeoutText));
    }
    const seconds = Number(timeoutText);
    // libpq: zero or negative waits indefinitely; the minimum is 2 seconds.
    connectTimeoutMs = seconds <= 0 ? undefined : Math.max(seconds, 2) * 1000;
  }

  const dbPath = path.startsWith('/') ? path.slice(1) : path;
  const dbParam = seen.get('dbname');
  const databaseText =
    dbParam ??
    (dbPath === '' ? undefined : decode(dbPath, () => fail('a percent-encoded database name', q(dbPath))));
  const database = databaseText === '' ? undefined : databaseText;
  if (database !== undefined && /[/?#]/.test(database)) {
    throw fail('a database name without "/", "?" or "#"', q(database));
  }
  // A URL's path cannot carry them: node-postgres's URL parser drops "/." and "/.." segments.
  if (database === '.' || database === '..') {
    throw fail('a database name other than "." or ".." (a URL path cannot carry them)', q(database));
  }

  const queryOf = (redact: boolean) =>
    params
      .map(
        ([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(redact && k === 'password' ? '***' : v)}`,
      )
      .join('&');
  const credentialsOf = (shownPassword: string) =>
    user === undefined && password === undefined
      ? ''
      : `${encodeURIComponent(user ?? '')}${password === undefined ? '' : `:${shownPassword}`}@`;
  const urlOf = (hostPart: string, credentials: string, query: string) =>
    `postgres://${credentials}${hostPart}/${encodePath(database)}${query ? `?${query}` : ''}`;

  const urlFor = (target: HostPort) =>
    urlOf(hostForUrl(target), credentialsOf(encodeURIComponent(password ?? '')), queryOf(false));
  const shown = [queryOf(true)];
  if (seen.has('target_session_attrs')) shown.push(`target_session_attrs=${targetSessionAttrs}`);
  if (timeoutText !== undefined) shown.push(`connect_timeout=${encodeURIComponent(timeoutText)}`);
  const redacted = urlOf(
    hosts.map(hostForUrl).join(','),
    credentialsOf('***'),
    shown.filter(Boolean).join('&'),
  );

  return {
    hosts,
    targetSessionAttrs,
    connectTimeoutMs,
    user,
    database,
    params,
    urlFor,
    redacted,
  };
}

/** `host:port` as a person reads it: `db1:5432`, `[::1]:5432`, `/var/run/postgresql:5432`. */
export function describeHost(target: HostPort): string {
  return `${target.host.includes(':') ? `[${target.host}]` : target.host}:${target.port}`;
}

export function sameHost(a: HostPort, b: HostPort): boolean {
  return a.host === b.host && a.port === b.port;
}

type Fail = (expected: string, got: string, hint?: string) => Error;

/** A received value, quoted and shortened for an error message. */
const q = (value: string) => describeValue(value);

function parseHostEntry(entry: string, portForAll: number | undefined, fail: Fail): HostPort {
  if (entry === '') throw fail('a host name between the commas of the host list', 'an empty one');
  let hostText: string;
  let portText: string | undefined;
  if (entry.startsWith('[')) {
    const close = entry.indexOf(']');
    if (close === -1) throw fail('an IPv6 address closed by "]"', q(entry));
    hostText = entry.slice(1, close);
    const after = entry.slice(close + 1);
    if (after !== '' && !after.startsWith(':')) throw fail('":port" after an IPv6 address', q(entry));
    portText = after === '' ? undefined : after.slice(1);
  } else {
    const colon = entry.lastIndexOf(':');
    if (entry.indexOf(':') !== colon) {
      throw fail('an IPv6 address in brackets, such as [::1]:5432', q(entry));
    }
    hostText = colon === -1 ? entry : entry.slice(0, colon);
    portText = colon === -1 ? undefined : entry.slice(colon + 1);
  }
  const host = decode(hostText, () => fail('a percent-encoded host name', q(hostText)));
  if (host === '') throw fail('a host name before ":port"', q(entry));
  if (/[\s/@]/.test(host) && !host.startsWith('/')) throw fail('a host name or IP address', q(host));
  const port =
    portText === undefined || portText === ''
      ? (portForAll ?? DEFAULT_PORT)
      : parsePort(portText, `"${describeHostText(host)}:"`, fail);
  return { host, port };
}

function parsePort(text: string, where: string, fail: Fail): number {
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port >= 1 && port <= 65_535)) throw fail(`a port from 1 to 65535 after ${where}`, q(text));
  return port;
}

function describeHostText(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

function unbracket(host: string): string {
  return /^\[.*\]$/.test(host) ? host.slice(1, -1) : host;
}

function hostForUrl(target: HostPort): string {
  const host = target.host.includes(':')
    ? `[${target.host}]`
    : target.host.startsWith('/')
      ? encodeURIComponent(target.host)
      : target.host;
  return `${host}:${target.port}`;
}

/**
 * The database as a URL path that node-postgres decodes back to the same name (it applies
 * `decodeURI`, which leaves reserved escapes such as %2C encoded, so reserved characters other
 * than "/", "?" and "#" — refused above — are written as they are).
 */
function encodePath(database: string | undefined): string {
  return database === undefined ? '' : encodeURI(database);
}

function decode(text: string, onError: () => Error): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw onError();
  }
}

function firstIndexOf(text: string, chars: readonly string[]): number {
  const found = chars.map((c) => text.indexOf(c)).filter((i) => i !== -1);
  return found.length === 0 ? text.length : Math.min(...found);
}

function listOf(values: readonly string[]): string {
  return `${values
    .slice(0, -1)
    .map((v) => `"${v}"`)
    .join(', ')} or "${values.at(-1)!}"`;
}
