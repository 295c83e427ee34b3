import fc from 'fast-check';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ChronosError } from '../../errors.js';
import { describeHost, parseConnectionString, type HostPort } from './connection-string.js';

/** What node-postgres itself reads from a URL (a Client is built, never connected). */
function asPgReadsIt(url: string) {
  const client = new pg.Client({ connectionString: url });
  const { user, password, database, host, port } = client;
  return { user, password, database, host, port };
}

/** node-postgres reads hosts through WHATWG URL, which writes IPv6 addresses in their shortest form. */
function canonical(host: string): string {
  return host.includes(':') ? new URL(`http://[${host}]/`).hostname.slice(1, -1) : host;
}

function errorOf(fn: () => unknown): ChronosError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ChronosError);
    return error as ChronosError;
  }
  throw new Error('expected an error');
}

describe('parseConnectionString', () => {
  it('lists hosts with and without ports in the order given, and keeps the other parameters', () => {
    const parsed = parseConnectionString(
      'postgres://chronos:s%40cret@db1:5432,db2:5433,db3/chronos?target_session_attrs=read-write&sslmode=disable&application_name=chronos',
    );
    expect(parsed.hosts).toEqual([
      { host: 'db1', port: 5432 },
      { host: 'db2', port: 5433 },
      { host: 'db3', port: 5432 },
    ]);
    expect(parsed.targetSessionAttrs).toBe('read-write');
    expect(parsed.user).toBe('chronos');
    expect(parsed.database).toBe('chronos');
    expect(parsed.params).toEqual([
      ['sslmode', 'disable'],
      ['application_name', 'chronos'],
    ]);
  });

  it('gives node-postgres a single-host URL it reads back to the same user, password, database, host and port', () => {
    const parsed = parseConnectionString(
      'postgresql://app%20user:p%40ss%3Aw%2Frd%25@db1:5432,[::1]:6432/my%20db?sslmode=disable',
    );
    expect(asPgReadsIt(parsed.urlFor(parsed.hosts[1]!))).toEqual({
      user: 'app user',
      password: 'p@ss:w/rd%',
      database: 'my db',
      host: '::1',
      port: 6432,
    });
    expect(parsed.urlFor(parsed.hosts[0]!)).toBe(
      'postgres://app%20user:p%40ss%3Aw%2Frd%25@db1:5432/my%20db?sslmode=disable',
    );
  });

  it('reads IPv6 addresses in brackets, with and without a port', () => {
    expect(parseConnectionString('postgres://[::1]:5433,[fe80::1%25eth0]/db').hosts).toEqual([
      { host: '::1', port: 5433 },
      { host: 'fe80::1%eth0', port: 5432 },
    ]);
  });

  it('reads host= and port= lists from the query, one port for all or one per host', () => {
    expect(parseConnectionString('postgres:///db?host=a,b&port=5433,5434').hosts).toEqual([
      { host: 'a', port: 5433 },
      { host: 'b', port: 5434 },
    ]);
    expect(parseConnectionString('postgres:///db?host=a,b&port=6000').hosts).toEqual([
      { host: 'a', port: 6000 },
      { host: 'b', port: 6000 },
    ]);
    expect(parseConnectionString('postgres://a,b:7000/db?port=6000').hosts).toEqual([
      { host: 'a', port: 6000 },
      { host: 'b', port: 7000 },
    ]);
  });

  it('reads a percent-encoded Unix-socket directory as a host', () => {
    const parsed = parseConnectionString('postgres://%2Fvar%2Frun%2Fpostgresql/chronos');
    expect(parsed.hosts).toEqual([{ host: '/var/run/postgresql', port: 5432 }]);
    expect(asPgReadsIt(parsed.urlFor(parsed.hosts[0]!)).host).toBe('/var/run/postgresql');
  });

  it('defaults to localhost:5432, target_session_attrs any and no connect timeout', () => {
    const parsed = parseConnectionString('postgres:///chronos');
    expect(parsed.hosts).toEqual([{ host: 'localhost', port: 5432 }]);
    expect(parsed.targetSessionAttrs).toBe('any');
    expect(parsed.connectTimeoutMs).toBeUndefined();
    expect(parsed.user).toBeUndefined();
  });

  it('reads connect_timeout as libpq does: seconds per host, at least 2, none when 0 or less', () => {
    const timeout = (value: string) =>
      parseConnectionString(`postgres://h/db?connect_timeout=${value}`).connectTimeoutMs;
    expect(timeout('10')).toBe(10_000);
    expect(timeout('1')).toBe(2_000);
    expect(timeout('0')).toBeUndefined();
    expect(timeout('-5')).toBeUndefined();
  });

  it('accepts every libpq target_session_attrs value', () => {
    for (const value of ['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby']) {
      expect(parseConnectionString(`postgres://h/db?target_session_attrs=${value}`).targetSessionAttrs).toBe(
        value,
      );
    }
  });

  it('takes dbname= from the query', () => {
    expect(parseConnectionString('postgres://h?dbname=chronos').database).toBe('chronos');
  });

  it('redacts the password, in the authority and in password=, and shows every host', () => {
    expect(
      parseConnectionString(
        'postgres://u:hunter2@a:1,b:2/db?password=hunter3&target_session_attrs=read-write',
      ).redacted,
    ).toBe('postgres://u:***@a:1,b:2/db?password=***&target_session_attrs=read-write');
  });

  it.each([
    ['postgres://h1:99999/db', 'DATABASE_URL: expected a port from 1 to 65535 after "h1:", got "99999"'],
    ['postgres://h1:54x2/db', 'DATABASE_URL: expected a port from 1 to 65535 after "h1:", got "54x2"'],
    [
      'postgres://h/db?target_session_attrs=master',
      'DATABASE_URL: expected target_session_attrs "any", "read-write", "read-only", "primary", "standby" or "prefer-standby", got "master"',
    ],
    [
      'mysql://h/db',
      'DATABASE_URL: expected a URL starting "postgres://" or "postgresql://", got "mysql://"',
    ],
    [
      'host=h1 password=secret',
      'DATABASE_URL: expected a URL such as "postgres://user@host1:5432,host2:5432/db", got a keyword/value string',
    ],
    [
      'postgres://h1,,h2/db',
      'DATABASE_URL: expected a host name between the commas of the host list, got an empty one',
    ],
    [
      'postgres://::1:5432/db',
      'DATABASE_URL: expected an IPv6 address in brackets, such as [::1]:5432, got "::1:5432"',
    ],
    ['postgres://[::1/db', 'DATABASE_URL: expected an IPv6 address closed by "]", got "[::1"'],
    [
      'postgres://h/db?connect_timeout=soon',
      'DATABASE_URL: expected connect_timeout in whole seconds, such as connect_timeout=10, got "soon"',
    ],
    [
      'postgres://a/db?host=b',
      'DATABASE_URL: expected hosts either before the path or in host=, not both, got both',
    ],
    [
      'postgres:///db?host=a,b,c&port=1,2',
      'DATABASE_URL: expected one port, or one per host (3), got 2 ports; libpq pairs the lists of host= and port= one by one',
    ],
    [
      'postgres://h/db?hostaddr=10.0.0.1',
      'DATABASE_URL: expected host names or addresses in the host list, got hostaddr=; hostaddr is not supported: list the addresses as hosts',
    ],
    [
      'postgres://h/db?load_balance_hosts=random',
      'DATABASE_URL: expected load_balance_hosts=disable (hosts are tried in the order given), got load_balance_hosts=random',
    ],
    [
      'postgres://h/db?sslmode=require&sslmode=disable',
      'DATABASE_URL: expected each query parameter once, got "sslmode" twice',
    ],
  ])('refuses %s, naming what was wrong', (url, message) => {
    const error = errorOf(() => parseConnectionString(url));
    expect(error.code).toBe('invalid_input');
    expect(error.message).toBe(message);
    expect(error.errors).toEqual([{ path: 'DATABASE_URL', message }]);
  });

  it('names the variable it was given', () => {
    expect(errorOf(() => parseConnectionString('postgres://h:0/db', 'CHRONOS_LISTEN_URL')).message).toMatch(
      /^CHRONOS_LISTEN_URL: expected a port/,
    );
  });

  it('never echoes a password, even one written unencoded where it breaks the URL', () => {
    const secret = 'Zq9/vX?k';
    const error = errorOf(() => parseConnectionString(`postgres://chronos:${secret}@db1,db2/chronos`));
    expect(error.message).not.toContain('Zq9');
    expect(error.message).toBe(
      'DATABASE_URL: expected a user name and password with "/", "?" and "@" percent-encoded (%2F, %3F, %40), got an "@" after the host list',
    );
    const badEscape = errorOf(() => parseConnectionString('postgres://u:hunter%zz@h/db'));
    expect(badEscape.message).not.toContain('hunter');
  });
});

describe('parseConnectionString (properties)', () => {
  it('refuses "." and ".." as a database name, which no URL path carries (the property leaves them out)', () => {
    expect(errorOf(() => parseConnectionString('postgres://u@h/%2E')).message).toMatch(
      /a database name other than "\." or "\.\."/,
    );
    expect(errorOf(() => parseConnectionString('postgres://u@h/?dbname=..')).message).toMatch(/other than/);
  });

  const hostName = fc.stringMatching(/^[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10}){0,2}$/);
  const ipv6 = fc.ipV6();
  const host: fc.Arbitrary<HostPort> = fc.record({
    host: fc.oneof(hostName, fc.ipV4(), ipv6),
    port: fc.integer({ min: 1, max: 65_535 }),
  });
  const secret = fc.string({ minLength: 1, maxLength: 30, unit: 'binary' });

  it('reads back every host, port, user, password and database it is given', () => {
    fc.assert(
      fc.property(
        fc.array(host, { minLength: 1, maxLength: 5 }),
        secret,
        secret,
        fc.stringMatching(/^[^/?#]{1,20}$/).filter((d) => d !== '.' && d !== '..'),
        (hosts, user, password, database) => {
          const list = hosts.map(describeHost).join(',');
          const url = `postgres://${encodeURIComponent(user)}:${encodeURIComponent(password)}@${list}/${encodeURIComponent(database)}`;
          const parsed = parseConnectionString(url);
          expect(parsed.hosts).toEqual(hosts);
          for (const target of hosts) {
            expect(asPgReadsIt(parsed.urlFor(target))).toEqual({
              user,
              password,
              database,
              host: canonical(target.host),
              port: target.port,
            });
          }
          expect(parsed.redacted).not.toContain(`:${encodeURIComponent(password)}@`);
        },
      ),
    );
  });

  it('never shows the password in an error, whatever else is wrong with the URL', () => {
    const wrong = fc.constantFrom(
      ':0',
      ':70000',
      ':x',
      ',',
      ',,',
      '?target_session_attrs=nope',
      '?connect_timeout=x',
    );
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9]{8,16}$/), wrong, (password, defect) => {
        const url = `postgres://u:${password}@db1${defect}/db`;
        try {
          parseConnectionString(url);
        } catch (error) {
          expect((error as Error).message).not.toContain(password);
        }
      }),
    );
  });
});
