/**
 * `chronos mcp` spawned as an MCP client would (node bin/chronos.js mcp), driven by the SDK's
 * StdioClientTransport: on PostgreSQL (DATABASE_URL), on an embedded store it opens itself, and
 * on an embedded store held by a running server (relayed over the server's control socket).
 * Its failures — no owner, a bad key — exit non-zero with one line saying what to do.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { startServer, type RunningServer } from '../../packages/chronos-timers-server/src/server.js';
import { lockPath, openEmbedded } from '../../packages/chronos-timers/src/store/driver/embedded.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';
import { dueNow } from '../support/harness.js';
import {
  BIN,
  childEnv,
  fire,
  ok,
  openMcpServer,
  OTHER,
  OWNER,
  rawSession,
  refused,
  ROOT,
  runChronos,
  stdioClient,
  tempDataDir,
  type McpTestServer,
  type StdioSession,
} from './support.js';
import { describePostgresOnly } from '../support/backends.js';

const SLOW = 120_000;

const sources = sql('test_mcp_sources', 'SELECT source, label FROM chronos.alarms ORDER BY created_at');

describePostgresOnly(
  'chronos mcp and the test share one database',
  'chronos mcp over stdio on PostgreSQL',
  () => {
    let t: TestDatabase;
    let server: McpTestServer;
    const sessions: StdioSession[] = [];
    beforeAll(async () => {
      t = await createTestDatabase('postgres');
      server = await openMcpServer(t.db);
    });
    afterAll(async () => {
      await server?.close();
      await t?.close();
    });
    afterEach(async () => {
      await Promise.all(sessions.splice(0).map((s) => s.close()));
      await t.reset();
      await server.service.keys.create(OWNER.did, 'again').then(({ key }) => (server.ownerKey = key));
    });

    async function spawnMcp(env: Record<string, string>): Promise<StdioSession> {
      const session = await stdioClient({ DATABASE_URL: t.url!, ...env });
      sessions.push(session);
      return session;
    }

    it(
      'serves every tool for the owner of CHRONOS_API_KEY',
      async () => {
        const { client } = await spawnMcp({ CHRONOS_API_KEY: server.ownerKey });
        const { tools } = await client.listTools();
        expect(tools.map((tool) => tool.name).sort()).toEqual(
          [
            'ack_wake',
            'cancel_alarm',
            'list_wakes',
            'pause_alarm',
            'resume_alarm',
            'get_alarm',
            'list_alarms',
            'reschedule_alarm',
            'schedule_alarm',
            'preview_schedule',
          ].sort(),
        );

        const daily = await ok(client, 'schedule_alarm', {
          cron: '0 9 1 1,7 *',
          timezone: 'Europe/Paris',
          label: 'twice a year',
        });
        expect(daily.next_fires.map((f: { local: string }) => f.local.slice(-6)).sort()).toEqual(
          expect.arrayContaining(['+01:00', '+02:00']),
        );
        const once = await ok(client, 'schedule_alarm', { in_seconds: 60, label: 'once' });
        expect((await ok(client, 'list_alarms', {})).alarms.map((a: { label: string }) => a.label)).toEqual([
          'once',
          'twice a year',
        ]);
        expect((await ok(client, 'get_alarm', { id: daily.alarm.id })).alarm).toEqual(daily.alarm);
        const moved = await ok(client, 'reschedule_alarm', { id: daily.alarm.id, cron: '30 8 * * *' });
        expect(moved.next_fires[0].local).toMatch(/T08:30:00\.000\+0[12]:00$/);
        expect((await ok(client, 'cancel_alarm', { id: daily.alarm.id })).alarm.status).toBe('cancelled');

        const wakeId = await fire(server, t.db, once.alarm.id);
        const acked = await ok(client, 'ack_wake', { wake_id: wakeId, note: 'done over stdio' });
        expect(acked.wake).toMatchObject({ id: wakeId, status: 'acknowledged', ack_note: 'done over stdio' });

        expect(await refused(client, 'schedule_alarm', { at: '2020-01-01T09:00:00+01:00' })).toMatch(
          /check the time zone offset/,
        );
        expect(await refused(client, 'ack_wake', { wake_id: wakeId, note: '' })).toMatch(/non-empty note/);
        const rows = await t.db.query<{ source: string }>(sources);
        expect(rows.map((r) => r.source)).toEqual(['mcp', 'mcp']);
      },
      SLOW,
    );

    it(
      'acts for CHRONOS_OWNER_DID, and another owner’s alarms answer like missing ones',
      async () => {
        const theirs = await server.service.alarms.create(OTHER, { inSeconds: 60 }, { source: 'api' });
        const { client } = await spawnMcp({ CHRONOS_OWNER_DID: OWNER.did });
        await ok(client, 'schedule_alarm', { in_seconds: 60, label: 'mine' });
        expect((await ok(client, 'list_alarms', {})).alarms.map((a: { label: string }) => a.label)).toEqual([
          'mine',
        ]);
        expect(await refused(client, 'get_alarm', { id: theirs.alarm.id })).toMatch(
          /^no alarm with that id for you; call list_alarms/,
        );
        expect(await refused(client, 'cancel_alarm', { id: theirs.alarm.id })).toMatch(
          /^no alarm with that id/,
        );
        expect((await server.service.alarms.get(OTHER, theirs.alarm.id)).status).toBe('active');
      },
      SLOW,
    );

    it(
      'passes payload numbers through digit for digit',
      async () => {
        const run = await runChronos(
          ['mcp'],
          { DATABASE_URL: t.url!, CHRONOS_OWNER_DID: OWNER.did },
          rawSession([
            '{"name":"schedule_alarm","arguments":{"in_seconds":60,"payload":{"id":12345678901234567890,"x":0.1000000000000000055511151231257827}}}',
          ]),
        );
        expect(run.code, run.stderr).toBe(0);
        const answer = run.stdout.split('\n').find((line) => line.includes('"id":2'))!;
        const text = (JSON.parse(answer) as { result: { content: { text: string }[] } }).result.content[0]!
          .text;
        expect(text).toContain('"id": 12345678901234567890');
        expect(text).toContain('"x": 0.1000000000000000055511151231257827');
      },
      SLOW,
    );

    it(
      'exits 1 with what to set when no owner is given, or the key is unknown, or the owners disagree',
      async () => {
        const none = await runChronos(['mcp'], { DATABASE_URL: t.url! });
        expect(none.code).toBe(1);
        expect(none.stderr).toMatch(
          /CHRONOS_API_KEY or CHRONOS_OWNER_DID: expected the owner this MCP server acts for/,
        );
        expect(none.stdout).toBe('');

        const badKey = await runChronos(['mcp'], {
          DATABASE_URL: t.url!,
          CHRONOS_API_KEY: 'chronos_notakeynotakeynotakeynotakeynotakeynotakeyn',
        });
        expect(badKey.code).toBe(1);
        expect(badKey.stderr).toMatch(/CHRONOS_API_KEY: the API key is unknown or revoked; create one with/);
        // Keys belong to one store: the refusal says which one this server uses, without the password.
        const pgUrl = new URL(t.url!);
        expect(badKey.stderr).toContain(
          `keys belong to the store they were created in, and this server uses PostgreSQL at ${pgUrl.hostname}:${pgUrl.port || 5432}`,
        );

        const badDid = await runChronos(['mcp'], { DATABASE_URL: t.url!, CHRONOS_OWNER_DID: 'alice' });
        expect(badDid.code).toBe(1);
        expect(badDid.stderr).toMatch(/CHRONOS_OWNER_DID: expected a DID like/);

        const mismatch = await runChronos(['mcp'], {
          DATABASE_URL: t.url!,
          CHRONOS_API_KEY: server.ownerKey,
          CHRONOS_OWNER_DID: OTHER.did,
        });
        expect(mismatch.code).toBe(1);
        expect(mismatch.stderr).toMatch(/CHRONOS_OWNER_DID names another owner/);

        const usage = await runChronos(['mcp', '--port', '1'], { DATABASE_URL: t.url! });
        expect(usage.code).toBe(2);
      },
      SLOW,
    );
  },
);

describe('chronos mcp over stdio on the embedded store', () => {
  it(
    'opens a free store itself, fires what it schedules, and serves keys commands and other chronos mcp meanwhile',
    async () => {
      const data = await tempDataDir();
      try {
        await (await openEmbedded(data.dir)).close();
        const first = await stdioClient({
          CHRONOS_DATA_DIR: data.dir,
          CHRONOS_OWNER_DID: OWNER.did,
          LOG_LEVEL: 'info',
        });
        try {
          expect(first.stderr()).toContain(`Chronos opened the embedded store ${data.dir}.`);
          expect(first.stderr()).toMatch(/This process also fires the alarms while it runs/);
          // The model is told too: MCP clients rarely show stderr.
          expect(first.client.getInstructions()).toContain(`Chronos opened the embedded store ${data.dir}.`);
          // Due at once: the dispatcher this process runs delivers it (to its log, with no router).
          const due = await ok(first.client, 'schedule_alarm', {
            at: new Date().toISOString(),
            label: 'now',
          });
          await first.stderrShows(
            (text) => text.includes(`"alarmId":"${due.alarm.id}"`),
            'the wake in its log',
          );
          const { alarm } = await ok(first.client, 'schedule_alarm', { in_seconds: 60, label: 'embedded' });
          // A second process cannot open the store: it goes through the first one.
          const second = await stdioClient({ CHRONOS_DATA_DIR: data.dir, CHRONOS_OWNER_DID: OWNER.did });
          try {
            expect((await ok(second.client, 'get_alarm', { id: alarm.id })).alarm.label).toBe('embedded');
          } finally {
            await second.close();
          }
          const keys = await runChronos(['keys', 'create', '--owner', OWNER.did], {
            CHRONOS_DATA_DIR: data.dir,
          });
          expect(keys.code, keys.stderr).toBe(0);
        } finally {
          await first.close();
        }
        // The lock is released on exit: the store opens again, with the alarm made over MCP.
        const db = await openEmbedded(data.dir);
        try {
          expect(await db.query(sources)).toEqual([
            { source: 'mcp', label: 'now' },
            { source: 'mcp', label: 'embedded' },
          ]);
        } finally {
          await db.close();
        }
      } finally {
        await data.remove();
      }
    },
    SLOW,
  );

  it.each([
    ['an empty directory', ''],
    ['an absent directory', '/not/yet/made'],
  ])(
    'makes a new store in %s, says so, and serves: schedule_alarm then list_alarms',
    async (_, sub) => {
      const data = await tempDataDir();
      const dir = data.dir + sub;
      try {
        const session = await stdioClient({
          CHRONOS_DATA_DIR: dir,
          CHRONOS_OWNER_DID: OWNER.did,
          LOG_LEVEL: 'info',
        });
        try {
          expect(session.stderr()).toContain(`there was no embedded store at ${dir}; making a new one there`);
          expect(session.client.getInstructions()).toContain(
            `Chronos made a new store, the embedded store ${dir}.`,
          );
          expect(session.client.getInstructions()).toContain('This process also fires the alarms');
          const made = await ok(session.client, 'schedule_alarm', { in_seconds: 60, label: 'first' });
          const listed = await ok(session.client, 'list_alarms', {});
          expect(listed.alarms.map((a: { id: string }) => a.id)).toEqual([made.alarm.id]);
        } finally {
          await session.close();
        }
        expect(existsSync(`${dir}/pgdata`)).toBe(true);
      } finally {
        await data.remove();
      }
    },
    SLOW,
  );

  it(
    'refuses a directory that holds other files but no store, naming the path, and creates nothing there',
    async () => {
      const data = await tempDataDir();
      try {
        await writeFile(`${data.dir}/notes.txt`, 'not a store');
        const run = await runChronos(['mcp'], { CHRONOS_DATA_DIR: data.dir, CHRONOS_OWNER_DID: OWNER.did });
        expect(run.code).toBe(1);
        expect(run.stderr).toContain(
          `there is no embedded store at ${data.dir}, and the directory holds other files`,
        );
        expect(existsSync(lockPath(data.dir))).toBe(false);
        expect(existsSync(`${data.dir}/pgdata`)).toBe(false);
      } finally {
        await data.remove();
      }
    },
    SLOW,
  );

  it(
    'stops on SIGTERM, closing the store and releasing its lock',
    async () => {
      const data = await tempDataDir();
      try {
        await (await openEmbedded(data.dir)).close();
        const child = spawn(process.execPath, [BIN, 'mcp'], {
          cwd: ROOT,
          env: childEnv({ CHRONOS_DATA_DIR: data.dir, CHRONOS_OWNER_DID: OWNER.did, LOG_LEVEL: 'info' }),
        });
        const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
        let stderr = '';
        await new Promise<void>((resolve, reject) => {
          child.stderr.on('data', (chunk: Buffer) => {
            stderr += chunk.toString();
            if (stderr.includes('serving MCP over stdio')) resolve();
          });
          void exited.then(() => reject(new Error(`exited early:\n${stderr}`)));
        });
        expect(existsSync(lockPath(data.dir))).toBe(true);
        child.kill('SIGTERM');
        expect(await exited).toBe(0);
        expect(existsSync(lockPath(data.dir))).toBe(false);
      } finally {
        await data.remove();
      }
    },
    SLOW,
  );

  describe('held by a running server', () => {
    let data: { dir: string; remove(): Promise<void> };
    let running: RunningServer;
    let key: string;
    beforeAll(async () => {
      data = await tempDataDir();
      running = await startServer(
        loadConfig({ CHRONOS_DATA_DIR: data.dir, PORT: '0', HOST: '127.0.0.1', CHRONOS_CREATE_RATE: '0' }),
        { logger: silentLogger },
      );
      key = (await running.service.keys.create(OWNER.did, 'stdio')).key;
    });
    afterAll(async () => {
      await running?.shutdown();
      await data?.remove();
    });

    it(
      'relays to the server over its control socket, which fires the alarms',
      async () => {
        const session = await stdioClient({ CHRONOS_DATA_DIR: data.dir, CHRONOS_API_KEY: key });
        try {
          expect(session.stderr()).not.toMatch(/fire only while/);
          const { alarm, next_fires } = await ok(session.client, 'schedule_alarm', {
            in_seconds: 60,
            label: 'through the server',
          });
          expect(next_fires).toHaveLength(1);
          expect((await running.service.alarms.get(OWNER, alarm.id)).source).toBe('mcp');

          await dueNow(running.service.db, alarm.id);
          await running.service.dispatcher.runOnce();
          const [wake] = (await running.service.wakes.list(OWNER, {})).items;
          expect(wake?.alarmId).toBe(alarm.id);
          const acked = await ok(session.client, 'ack_wake', { wake_id: wake!.id, note: 'relayed' });
          expect(acked.wake.status).toBe('acknowledged');
          expect(await refused(session.client, 'schedule_alarm', { cron: 'nope' })).toMatch(/cron: expected/);
        } finally {
          await session.close();
        }
      },
      SLOW,
    );

    it(
      'acts for CHRONOS_OWNER_DID through the server, and keeps payload numbers exact',
      async () => {
        const run = await runChronos(
          ['mcp'],
          { CHRONOS_DATA_DIR: data.dir, CHRONOS_OWNER_DID: OTHER.did },
          rawSession([
            '{"name":"schedule_alarm","arguments":{"in_seconds":60,"payload":{"n":12345678901234567890}}}',
          ]),
        );
        expect(run.code, run.stderr).toBe(0);
        expect(run.stdout).toContain('\\"n\\": 12345678901234567890');
        const { items } = await running.service.alarms.list(OTHER, {});
        expect(items.map((a) => a.payload.text)).toEqual(['{"n": 12345678901234567890}']);
      },
      SLOW,
    );

    it(
      'exits 1 with one clear line when the server refuses the key',
      async () => {
        const run = await runChronos(['mcp'], {
          CHRONOS_DATA_DIR: data.dir,
          CHRONOS_API_KEY: 'chronos_notakeynotakeynotakeynotakeynotakeynotakeyn',
        });
        expect(run.code).toBe(1);
        expect(run.stderr).toMatch(/chronos mcp: CHRONOS_API_KEY: the API key is unknown or revoked/);
        // The relayed refusal says which store the key must come from, as the direct one does.
        expect(run.stderr).toContain(
          `keys belong to the store they were created in, and this server uses the embedded store at ${data.dir}`,
        );
        expect(run.stdout).toBe('');
      },
      SLOW,
    );
  });
});
