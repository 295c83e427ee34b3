import { existsSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
/**
 * The CLI smoke test: `chronos keys …`, `migrate`, `mcp`, and their failures, on the embedded
 * store, on PostgreSQL, and on an embedded store held by a running server.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';
import { childEnv, freePort, runChronos, Spawned, tempDataDir, BIN } from './support.js';
import { describePostgresOnly } from '../support/backends.js';

const DID = 'did:matrix:6f1c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10:laptop';
const KEY_LINE = /^chronos_[A-Za-z0-9_-]{43}$/;

const lastLine = (text: string) => text.trimEnd().split('\n').at(-1)!;

describe('CLI: usage and failures', () => {
  it('a wrong command line exits 2 with the usage on stderr; mcp without an owner exits 1 saying so', async () => {
    const noSub = await runChronos(['keys'], {});
    expect(noSub.code).toBe(2);
    expect(noSub.stderr).toMatch(/expected a subcommand/);
    expect(noSub.stderr).toMatch(/usage: chronos keys create --owner <did>/);

    const noOwner = await runChronos(['keys', 'create'], {});
    expect(noOwner.code).toBe(2);
    expect(noOwner.stderr).toMatch(/--owner <did> is required/);

    const unknown = await runChronos(['frobnicate'], {});
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(
      /unknown command "frobnicate"; expected one of serve, migrate, keys, alarms, schedules, mcp/,
    );

    const mcp = await runChronos(['mcp'], {});
    expect(mcp.code).toBe(1);
    expect(mcp.stderr.trim().split('\n')).toHaveLength(1);
    expect(mcp.stderr).toMatch(/^chronos mcp: CHRONOS_API_KEY or CHRONOS_OWNER_DID: expected the owner/);

    const help = await runChronos(['help'], {});
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/serve\s+run the HTTP API/);
  });

  it('every command and subcommand answers --help with its usage, exit 0, touching no store; --version prints the version', async () => {
    const { version, name } = JSON.parse(
      await readFile(new URL('../../packages/chronos-timers/package.json', import.meta.url), 'utf8'),
    );
    for (const argv of [['--version'], ['-V']]) {
      const run = await runChronos(argv, {});
      expect(run.code).toBe(0);
      expect(run.stdout.trim()).toBe(`${name} ${version}`);
    }
    // A data directory that does not exist: --help must not create a store there.
    const env = { CHRONOS_DATA_DIR: '/nonexistent/chronos-help-check' };
    for (const argv of [
      ['serve', '--help'],
      ['migrate', '--help'],
      ['mcp', '--help'],
      ['keys', '--help'],
      ['keys', 'create', '--help'],
      ['keys', 'list', '-h'],
      ['alarms', '--help'],
      ['alarms', 'pause', '--help'],
    ]) {
      const run = await runChronos(argv, env);
      expect(run.code, argv.join(' ')).toBe(0);
      expect(run.stdout, argv.join(' ')).toMatch(new RegExp(`usage: chronos ${argv[0]}`));
      expect(run.stderr).toBe('');
    }
    // Ten processes through tsx, one after another: ~20 s alone, more beside the other files.
  }, 60_000);

  it('a mistyped option is named, with what the command takes, and exits 2', async () => {
    const run = await runChronos(['keys', 'create', '--ownr', 'x'], {});
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      /^chronos keys: unknown option --ownr; expected --owner, --label; did you mean --owner\?/,
    );
    const missing = await runChronos(['keys', 'create', '--owner'], {});
    expect(missing.stderr).toMatch(/--owner needs a value: --owner <did>/);
    const extra = await runChronos(['serve', 'now'], {});
    expect(extra.code).toBe(2);
    expect(extra.stderr).toMatch(/^chronos serve: unexpected argument "now"/);
  });

  it('a port already in use is refused at once, before any store is opened or created', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as AddressInfo;
    const data = await tempDataDir();
    try {
      const dir = join(data.dir, 'never-made');
      const run = await runChronos(['serve'], {
        PORT: String(port),
        HOST: '127.0.0.1',
        CHRONOS_DATA_DIR: dir,
      });
      expect(run.code).toBe(1);
      expect(run.stderr.trim()).toBe(
        `chronos serve: port ${port} on 127.0.0.1 is already in use; stop what listens there or set PORT`,
      );
      expect(existsSync(dir)).toBe(false);
    } finally {
      taken.close();
      await data.remove();
    }
  });

  it('several bad variables are reported one line per variable', async () => {
    const run = await runChronos(['migrate'], {
      CHRONOS_LEASE: 'thirty',
      PORT: 'eighty',
      CHRONOS_SCHEMA: 'Bad',
    });
    expect(run.code).toBe(1);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toEqual([
      'chronos migrate: CHRONOS_SCHEMA: expected a schema name of lower-case letters, digits and "_" (up to 63, not starting with a digit), like "chronos", got "Bad"',
      'chronos migrate: PORT: expected a whole number from 0 to 65535, got "eighty"',
      'chronos migrate: CHRONOS_LEASE: expected a duration such as "250ms", "30s", "5m" or "1h", got "thirty"',
    ]);
  });
});

describe('CLI: keys on the embedded store', () => {
  let data: Awaited<ReturnType<typeof tempDataDir>>;
  beforeAll(async () => {
    data = await tempDataDir();
  });
  afterAll(async () => {
    await data.remove();
  });

  it('create prints the key last; list shows it; revoke revokes it, once; failures exit 1 with one line', async () => {
    const env = { CHRONOS_DATA_DIR: data.dir };
    const created = await runChronos(['keys', 'create', '--owner', DID, '--label', 'laptop'], env);
    expect(created.code, created.stderr).toBe(0);
    expect(lastLine(created.stdout)).toMatch(KEY_LINE);
    const id = /Created key (key_[0-9a-f]{12})/.exec(created.stdout)?.[1];
    expect(id).toBeDefined();
    // Only the hash is stored: the key is nowhere in the store's files' plain text.
    expect(await readFile(join(data.dir, 'chronos.lock'), 'utf8').catch(() => '')).not.toContain('chronos_');

    const listed = await runChronos(['keys', 'list', '--json'], env);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ id, owner_did: DID, label: 'laptop', revoked_at: null }),
    ]);

    const revoked = await runChronos(['keys', 'revoke', id!], env);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toMatch(/^Revoked key/);
    const again = await runChronos(['keys', 'revoke', id!], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/already revoked/);

    const missing = await runChronos(['keys', 'revoke', 'key_000000000000'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('chronos keys: key "key_000000000000" not found\n');
    const badOwner = await runChronos(['keys', 'create', '--owner', 'did:matrix:alice'], env);
    expect(badOwner.code).toBe(1);
    expect(badOwner.stderr).toMatch(
      /^chronos keys: owner: expected a DID like "did:matrix:<user uuid>:<key fingerprint>".*got "did:matrix:alice"\n$/,
    );
  }, 60_000);
});

describePostgresOnly(
  'the DATABASE_URL path of the CLI',
  'CLI: keys and migrate on PostgreSQL (DATABASE_URL)',
  () => {
    let t: TestDatabase;
    beforeAll(async () => {
      t = await createTestDatabase('postgres');
    });
    afterAll(async () => {
      await t.close();
    });

    it('migrate is a no-op on a migrated database; keys create, list, revoke work', async () => {
      const env = { DATABASE_URL: t.url! };
      const migrated = await runChronos(['migrate'], env);
      expect(migrated.code, migrated.stderr).toBe(0);
      expect(migrated.stdout).toMatch(/Schema of PostgreSQL \(DATABASE_URL\) is up to date/);
      const created = await runChronos(['keys', 'create', '--owner', DID], env);
      expect(created.code, created.stderr).toBe(0);
      expect(lastLine(created.stdout)).toMatch(KEY_LINE);
      const list = JSON.parse((await runChronos(['keys', 'list', '--owner', DID, '--json'], env)).stdout);
      expect(list).toHaveLength(1);
      expect((await runChronos(['keys', 'revoke', list[0].id], env)).code).toBe(0);
    }, 60_000);
  },
);

describe('CLI: keys while a server runs on the embedded store', () => {
  let data: Awaited<ReturnType<typeof tempDataDir>>;
  let server: Spawned;
  let base: string;
  beforeAll(async () => {
    data = await tempDataDir();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    server = new Spawned(process.execPath, [BIN, 'serve'], {
      env: childEnv({ CHRONOS_DATA_DIR: data.dir, PORT: String(port), HOST: '127.0.0.1' }),
    });
    await server.waitFor(/chronos is serving/);
  }, 60_000);
  afterAll(async () => {
    await server.stop();
    await data.remove();
  });

  it('the server hints at the first key; keys create reaches it, the key works, and revoke ends it at once', async () => {
    expect(server.lines.some((l) => l.includes('no API keys yet'))).toBe(true);
    const env = { CHRONOS_DATA_DIR: data.dir };
    const created = await runChronos(['keys', 'create', '--owner', DID], env);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/in the running server \(process \d+\)/);
    const key = lastLine(created.stdout);
    expect(key).toMatch(KEY_LINE);

    const auth = { authorization: `Bearer ${key}` };
    const made = await fetch(`${base}/v1/alarms`, {
      method: 'POST',
      headers: auth,
      body: '{"in_seconds": 600}',
    });
    expect(made.status).toBe(201);

    const list = JSON.parse((await runChronos(['keys', 'list', '--json'], env)).stdout);
    expect(list.map((k: { owner_did: string }) => k.owner_did)).toEqual([DID]);
    const table = await runChronos(['keys', 'list'], env);
    expect(table.stdout).toMatch(
      new RegExp(
        `^ID\\s+OWNER\\s+LABEL\\s+CREATED\\s+LAST USED\\s+STATUS\n${list[0].id}\\s+${DID}\\s+-\\s.*active$`,
        'm',
      ),
    );
    expect((await runChronos(['migrate'], env)).stdout).toMatch(/running server .* is up to date/);

    expect((await runChronos(['keys', 'revoke', list[0].id], env)).code).toBe(0);
    const refused = await fetch(`${base}/v1/alarms`, { headers: auth });
    expect(refused.status).toBe(401);
    // No key in the server's log.
    expect(server.lines.join('\n')).not.toContain(key);
  }, 60_000);

  it('a second server on the same data directory exits non-zero at once, naming the lock and the holder', async () => {
    const second = await runChronos(['serve'], {
      CHRONOS_DATA_DIR: data.dir,
      PORT: String(await freePort()),
    });
    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(
      /chronos serve: the embedded store .* is in use by process \d+ .*chronos\.lock/,
    );
  }, 30_000);

  it('after the server is killed (-9), the key commands take over its stale lock', async () => {
    server.signal('SIGKILL');
    await server.exited;
    const listed = await runChronos(['keys', 'list', '--json'], { CHRONOS_DATA_DIR: data.dir });
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toHaveLength(1);
  }, 30_000);
});
