/**
 * Hostile input: authentication against a real `chronos serve` (keys made, listed and revoked
 * with the CLI, as an operator would), and a hunt for the keys afterwards.
 *
 * Every request with a missing, malformed, altered, revoked or other owner's credential is
 * refused (401, 403 or 404 — never a 5xx, never served); then the server's whole log output
 * (at `debug`), every table of its database, everything it sent to the router, and the CLI's
 * own output apart from the one line that shows a new key, are searched for the keys, the
 * operator token and the webhook secret: none may appear in clear.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { randomBytes } from 'node:crypto';
import { beforeAll, expect, it } from 'vitest';
import { hashKey, KeyService } from '../../packages/chronos-timers/src/core/key-service.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { runChronos } from '../cli/support.js';
import { OTHER, OWNER } from '../support/harness.js';
import { serveEnv, useScenario, WEBHOOK_SECRET } from './support/fleet.js';
import { Instance } from './support/instance.js';
import { Router } from './support/router.js';
import { describePostgresOnly } from '../support/backends.js';

const OPERATOR_TOKEN = `op-${randomBytes(24).toString('base64url')}`;

const tables = sql(
  'auth_scan_tables',
  `SELECT table_name::text AS name FROM information_schema.tables
   WHERE table_schema = 'chronos' AND table_type = 'BASE TABLE' ORDER BY table_name`,
);

describePostgresOnly(
  'the server, the CLI and the test read one database at once',
  'hostile input: credentials',
  () => {
    const scenario = useScenario();
    let server: Instance;
    const cliOutput: string[] = [];
    const keys = { a: '', b: '', revoked: '' };
    let alarmOfA = '';

    async function cli(args: string[]): Promise<string> {
      const run = await runChronos(args, { DATABASE_URL: scenario.t.url! });
      expect(run.code, run.stderr).toBe(0);
      return run.stdout;
    }
    /** Creates a key with the CLI; its output, minus the key line, is kept for the hunt. */
    async function newKey(owner: string): Promise<{ key: string; id: string }> {
      const lines = (await cli(['keys', 'create', '--owner', owner])).trimEnd().split('\n');
      cliOutput.push(...lines.slice(0, -1));
      return { key: lines.at(-1)!, id: /Created key (key_[0-9a-f]+)/.exec(lines[0]!)![1]! };
    }

    beforeAll(async () => {
      keys.a = (await newKey(OWNER.did)).key;
      keys.b = (await new KeyService(scenario.t.db).create(OTHER.did, 'b')).key;
      const revoked = await newKey(OWNER.did);
      keys.revoked = revoked.key;
      cliOutput.push(await cli(['keys', 'list']));
      cliOutput.push(await cli(['keys', 'revoke', revoked.id]));
      server = await Instance.create('chronos-auth', {
        ...serveEnv(scenario.t.url!, scenario.router, { CHRONOS_OPERATOR_TOKEN: OPERATOR_TOKEN }),
        LOG_LEVEL: 'debug',
      });
      await server.start();
    }, 60_000);

    const answers: { what: string; status: number; text: string }[] = [];
    async function request(
      what: string,
      path: string,
      headers: Record<string, string>,
      init: { method?: string; body?: unknown } = {},
    ) {
      const response = await fetch(`${server.url}${path}`, {
        method: init.method ?? 'GET',
        headers: { 'content-type': 'application/json', ...headers },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
      });
      const answer = { what, status: response.status, text: await response.text() };
      answers.push(answer);
      return answer;
    }

    it('refuses every missing, malformed, altered, revoked or foreign credential, and serves the right ones', async () => {
      const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
      const made = await request('A creates', '/v1/alarms', bearer(keys.a), {
        method: 'POST',
        body: { in_seconds: 1, label: 'A’s', require_ack: false },
      });
      expect(made.status).toBe(201);
      alarmOfA = (JSON.parse(made.text) as { alarm: { id: string } }).alarm.id;

      const flip = (key: string) => key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');
      const refusals: [string, Record<string, string>, number][] = [
        ['no Authorization', {}, 401],
        ['an empty Bearer', { authorization: 'Bearer ' }, 401],
        ['the scheme alone', { authorization: 'Bearer' }, 401],
        [
          'Basic with the key',
          { authorization: `Basic ${Buffer.from(`${keys.a}:`).toString('base64')}` },
          401,
        ],
        ['the key without a scheme', { authorization: keys.a }, 401],
        ['the key cut short', bearer(keys.a.slice(0, -1)), 401],
        ['the key with one character changed', bearer(flip(keys.a)), 401],
        ['the key and more', bearer(`${keys.a}x`), 401],
        ['two keys', { authorization: `Bearer ${keys.a} ${keys.b}` }, 401],
        ['a revoked key', bearer(keys.revoked), 401],
        ['the key’s SHA-256 (what the table holds)', bearer(hashKey(keys.a)), 401],
        ['a wrong operator token', bearer(`${OPERATOR_TOKEN}x`), 401],
        ['A’s key naming B in X-Chronos-Owner', { ...bearer(keys.a), 'x-chronos-owner': OTHER.did }, 403],
        ['the operator token naming nobody', bearer(OPERATOR_TOKEN), 400],
        ['the operator token naming a key', { ...bearer(OPERATOR_TOKEN), 'x-chronos-owner': keys.a }, 400],
      ];
      for (const [what, headers, status] of refusals) {
        for (const [method, path] of [
          ['GET', '/v1/alarms'],
          ['GET', `/v1/alarms/${alarmOfA}`],
          ['DELETE', `/v1/alarms/${alarmOfA}`],
        ] as const) {
          // The operator reads every owner's list without naming one (the dashboard's view):
          // asserted below; every other route still needs X-Chronos-Owner.
          if (what === 'the operator token naming nobody' && method === 'GET' && path === '/v1/alarms')
            continue;
          const answer = await request(`${what}: ${method} ${path}`, path, headers, { method });
          expect(answer.status, `${what}: ${method} ${path} → ${answer.text}`).toBe(status);
          expect(answer.text).toMatch(/"type":"urn:chronos:problem:/);
        }
      }
      const everyOwner = await request(
        'the operator lists every owner',
        '/v1/alarms',
        bearer(OPERATOR_TOKEN),
      );
      expect(everyOwner.status).toBe(200);
      expect(JSON.parse(everyOwner.text).owners[alarmOfA]).toMatch(/^did:/);
      // B's valid key sees nothing of A's.
      expect((await request('B reads A’s alarm', `/v1/alarms/${alarmOfA}`, bearer(keys.b))).status).toBe(404);
      expect((await request('B lists', '/v1/alarms', bearer(keys.b))).text).not.toContain(alarmOfA);
      // Keys where no key belongs: a path, a query parameter, a request id, a cursor.
      await request('a key as an alarm id', `/v1/alarms/${keys.a}`, bearer(keys.b));
      await request('a key in the query', `/v1/alarms?cursor=${keys.a}`, bearer(keys.a));
      await request('a key as the request id', '/v1/alarms', { ...bearer(keys.a), 'x-request-id': keys.b });
      await request('the operator token as the request id', '/v1/alarms', {
        ...bearer(keys.a),
        'x-request-id': OPERATOR_TOKEN,
      });
      await request('the operator token in the query', `/v1/alarms?token=${OPERATOR_TOKEN}`, bearer(keys.a));
      // The right credentials are served.
      expect((await request('A lists', '/v1/alarms', bearer(keys.a))).status).toBe(200);
      expect(
        (
          await request('the operator for A', `/v1/alarms/${alarmOfA}`, {
            ...bearer(OPERATOR_TOKEN),
            'x-chronos-owner': OWNER.did,
          })
        ).status,
      ).toBe(200);

      // MCP over HTTP: the revoked key is refused before any MCP handling; A's key works.
      const mcp = async (token: string) => {
        const client = new Client({ name: 'auth-test', version: '1' });
        await client.connect(
          new StreamableHTTPClientTransport(new URL('/mcp', server.url), {
            requestInit: { headers: bearer(token) },
          }),
        );
        return client;
      };
      await expect(mcp(keys.revoked)).rejects.toThrow(/401/);
      await expect(mcp(flip(keys.a))).rejects.toThrow(/401/);
      const client = await mcp(keys.a);
      const listed = await client.callTool({ name: 'list_alarms', arguments: {} });
      expect(listed.isError ?? false).toBe(false);
      await client.close();

      // `chronos mcp` (stdio) with a revoked key exits 1 with one line that does not repeat the key.
      const stdio = await runChronos(['mcp'], {
        DATABASE_URL: scenario.t.url!,
        CHRONOS_API_KEY: keys.revoked,
      });
      expect(stdio.code).toBe(1);
      cliOutput.push(stdio.stdout, stdio.stderr);

      // Let A's alarm fire, so the router has received something to search too.
      await waitForDelivery(scenario.router, alarmOfA);
    }, 60_000);

    it('no key, token or secret in the server’s logs, any table, the router’s requests or the CLI’s output', async () => {
      const secrets = {
        'A’s key': keys.a,
        'B’s key': keys.b,
        'the revoked key': keys.revoked,
        'the operator token': OPERATOR_TOKEN,
        'the webhook secret': WEBHOOK_SECRET.slice('whsec_'.length),
      };
      const places: Record<string, string> = {
        'the server’s log output': [...server.lines, ...server.currentLines(), server.stderr].join('\n'),
        'the router’s requests': scenario.router.sink.requests
          .map((r) => `${JSON.stringify(r.headers)}\n${r.body}`)
          .join('\n'),
        'the CLI’s output (the key lines aside)': cliOutput.join('\n'),
      };
      for (const { name } of await scenario.t.db.query<{ name: string }>(tables)) {
        const rows = await scenario.t.db.query<{ row: string }>(
          sql(`auth_scan_${name}`, `SELECT t::text AS row FROM chronos."${name}" t`),
        );
        places[`table ${name}`] = rows.map((r) => r.row).join('\n');
      }
      expect(Object.keys(places)).toContain('table api_keys');
      expect(Object.keys(places)).toContain('table alarms');
      expect(server.lines.length + server.currentLines().length).toBeGreaterThan(answers.length);
      // The key table holds each key's hash — the scan reads what is there.
      expect(places['table api_keys']).toContain(hashKey(keys.a));

      const found: string[] = [];
      for (const [place, text] of Object.entries(places)) {
        for (const [secret, value] of Object.entries(secrets))
          if (text.includes(value)) found.push(`${secret} in ${place}`);
      }
      expect(found).toEqual([]);
      // Refusals of a credential never repeat it.
      for (const answer of answers.filter((a) => a.status === 401)) {
        for (const value of Object.values(secrets)) expect(answer.text, answer.what).not.toContain(value);
      }
    });
  },
);

async function waitForDelivery(router: Router, alarmId: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (router.deliveredByAlarm().has(alarmId)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`alarm ${alarmId} was not delivered`);
}
