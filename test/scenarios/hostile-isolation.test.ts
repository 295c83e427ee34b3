/**
 * Hostile input: owner isolation. Owner A has an active alarm, a fired one with its wake, a
 * conversation, an idempotency key and pages to list; owner B (with its own key, and through the
 * operator token) tries every route and tool on A's ids.
 *
 * Each attempt is made twice — with A's id and with a missing id of the same shape — and the two
 * answers must be identical (status, content type and body, request ids aside): B cannot even
 * learn that A's id exists. Afterwards everything of A's is as it was.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../support/backends.js';
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../support/databases.js';
import { backdate } from '../support/harness.js';
import { call, type Answer } from '../http/support.js';
import {
  httpClient,
  openMcpServer,
  OPERATOR_TOKEN,
  OTHER,
  textOf,
  type McpTestServer,
} from '../mcp/support.js';

const MISSING = 'c0ffee00-0000-4000-8000-000000000000';

/** What A owns, by the name the table uses. */
interface Mine {
  active: string;
  fired: string;
  wake: string;
  conversation: string;
  idempotencyKey: string;
  alarmCursor: string;
  wakeCursor: string;
}

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
interface HttpAttempt {
  name: string;
  method: Method;
  /** The URL aimed at `id` (A's, or the missing one). */
  url: (id: string) => string;
  body?: unknown;
  /** Which of A's ids it aims at. */
  aim: keyof Mine;
  /** The answer to both (404 unless said). */
  status?: number;
}

const HTTP_ATTEMPTS: HttpAttempt[] = [
  { name: 'GET an alarm', method: 'GET', url: (id) => `/v1/alarms/${id}`, aim: 'active' },
  { name: 'GET a fired alarm', method: 'GET', url: (id) => `/v1/alarms/${id}`, aim: 'fired' },
  {
    name: 'PATCH an alarm',
    method: 'PATCH',
    url: (id) => `/v1/alarms/${id}`,
    body: { label: 'mine now' },
    aim: 'active',
  },
  {
    name: 'PATCH a schedule',
    method: 'PATCH',
    url: (id) => `/v1/alarms/${id}`,
    body: { in_seconds: 5 },
    aim: 'active',
  },
  // A itself would get 409 here: B must get the 404 of a missing id, not a hint that it exists.
  {
    name: 'PATCH a fired alarm',
    method: 'PATCH',
    url: (id) => `/v1/alarms/${id}`,
    body: { label: 'x' },
    aim: 'fired',
  },
  { name: 'DELETE an alarm', method: 'DELETE', url: (id) => `/v1/alarms/${id}`, aim: 'active' },
  { name: 'DELETE a fired alarm', method: 'DELETE', url: (id) => `/v1/alarms/${id}`, aim: 'fired' },
  { name: 'GET a wake', method: 'GET', url: (id) => `/v1/wakes/${id}`, aim: 'wake' },
  {
    name: 'ack a wake',
    method: 'POST',
    url: (id) => `/v1/wakes/${id}/ack`,
    body: { note: 'done' },
    aim: 'wake',
  },
  {
    name: 'ack a wake, empty note',
    method: 'POST',
    url: (id) => `/v1/wakes/${id}/ack`,
    body: { note: '' },
    aim: 'wake',
    status: 400,
  },
  {
    name: 'report a reply in a conversation',
    method: 'POST',
    url: (id) => `/v1/conversations/${id}/replies`,
    body: {},
    aim: 'conversation',
    status: 200,
  },
];

interface ToolAttempt {
  name: string;
  tool: string;
  args: (id: string) => Record<string, unknown>;
  aim: keyof Mine;
}

const TOOL_ATTEMPTS: ToolAttempt[] = [
  { name: 'get_alarm', tool: 'get_alarm', args: (id) => ({ id }), aim: 'active' },
  { name: 'get_alarm on a fired alarm', tool: 'get_alarm', args: (id) => ({ id }), aim: 'fired' },
  {
    name: 'reschedule_alarm',
    tool: 'reschedule_alarm',
    args: (id) => ({ id, in_seconds: 5 }),
    aim: 'active',
  },
  {
    name: 'reschedule_alarm on a fired alarm',
    tool: 'reschedule_alarm',
    args: (id) => ({ id, label: 'x' }),
    aim: 'fired',
  },
  { name: 'cancel_alarm', tool: 'cancel_alarm', args: (id) => ({ id }), aim: 'active' },
  { name: 'cancel_alarm on a fired alarm', tool: 'cancel_alarm', args: (id) => ({ id }), aim: 'fired' },
  { name: 'ack_wake', tool: 'ack_wake', args: (id) => ({ wake_id: id, note: 'done' }), aim: 'wake' },
];

/**
 * The answer without what differs between any two requests: the request id, and the id the
 * caller sent (a refusal names what it was sent; `<id>` stands for it).
 */
function comparable(answer: Answer, sent: string): unknown {
  const text = answer.text.replaceAll(sent, '<id>').replace(/"request_id":"[^"]*"/, '');
  return { status: answer.status, type: answer.headers['content-type'], text };
}

function comparableTool(result: CallToolResult, sent: string): unknown {
  const text = textOf(result)
    .replaceAll(sent, '<id>')
    .replace(/\nserver_time: .*$/, '');
  return { isError: result.isError ?? false, text };
}

for (const kind of BACKENDS) {
  describe.skipIf(kind === 'postgres' && !postgresAvailable())(
    `hostile input: another owner’s ids answer exactly like missing ones [${kind}]`,
    () => {
      let t: TestDatabase;
      let server: McpTestServer;
      let mine: Mine;
      let viewsBefore: string[];
      const clients: Client[] = [];
      const asOwnerA = () => ({ authorization: `Bearer ${server.ownerKey}` });
      // B, two ways: its own key, and the operator token naming B.
      const asB = {
        'B’s key': () => ({ authorization: `Bearer ${server.otherKey}` }),
        'the operator for B': () => ({
          authorization: `Bearer ${OPERATOR_TOKEN}`,
          'x-chronos-owner': OTHER.did,
        }),
      };

      async function viewsOfA(): Promise<string[]> {
        const a = asOwnerA();
        return Promise.all([
          call(server.app, 'GET', `/v1/alarms/${mine.active}`, { headers: a }).then((r) => r.text),
          call(server.app, 'GET', `/v1/alarms/${mine.fired}`, { headers: a }).then((r) => r.text),
          call(server.app, 'GET', `/v1/wakes/${mine.wake}`, { headers: a }).then((r) => r.text),
          call(server.app, 'GET', '/v1/alarms?limit=200', { headers: a }).then((r) => r.text),
        ]);
      }

      beforeAll(async () => {
        t = await createTestDatabase(kind);
        server = await openMcpServer(t.db);
        const a = asOwnerA();
        const create = async (body: Record<string, unknown>) =>
          (await call(server.app, 'POST', '/v1/alarms', { headers: a, body })).body.alarm.id as string;
        const active = await create({
          cron: '@hourly',
          label: 'A’s',
          idempotency_key: 'a-key',
          conversation_id: 'conv-a',
        });
        const fired = await create({ in_seconds: 60, label: 'A’s fired', conversation_id: 'conv-a' });
        await backdate(t.db, fired, 61_000);
        await server.service.dispatcher.runOnce();
        const wake = server.receiver.firesOf(fired)[0]!.wakeId;
        for (let i = 0; i < 3; i++) await create({ in_seconds: 600 + i });
        const alarmCursor = (await call(server.app, 'GET', '/v1/alarms?limit=2', { headers: a })).body
          .next_cursor;
        await create({ in_seconds: 60, label: 'another fire' }).then(async (id) => {
          await backdate(t.db, id, 61_000);
          await server.service.dispatcher.runOnce();
        });
        const wakeCursor = (await call(server.app, 'GET', '/v1/wakes?limit=1', { headers: a })).body
          .next_cursor;
        expect(alarmCursor).toBeTruthy();
        expect(wakeCursor).toBeTruthy();
        mine = {
          active,
          fired,
          wake,
          conversation: 'conv-a',
          idempotencyKey: 'a-key',
          alarmCursor,
          wakeCursor,
        };
        viewsBefore = await viewsOfA();
      });
      afterAll(async () => {
        await Promise.all(clients.map((c) => c.close()));
        await server?.close();
        await t?.close();
      });

      for (const [who, headers] of Object.entries(asB)) {
        describe(`over HTTP, as ${who}`, () => {
          it.each(HTTP_ATTEMPTS)('$name with A’s id answers like a missing id', async (attempt) => {
            const answer = (id: string) =>
              call(server.app, attempt.method, attempt.url(id), { headers: headers(), body: attempt.body });
            const missingId = attempt.aim === 'conversation' ? 'conv-missing' : MISSING;
            const theirs = await answer(mine[attempt.aim]);
            const missing = await answer(missingId);
            expect(comparable(theirs, mine[attempt.aim])).toEqual(comparable(missing, missingId));
            expect(theirs.status).toBe(attempt.status ?? 404);
          });

          it('A’s list cursors show B only B’s own alarms and wakes', async () => {
            await call(server.app, 'POST', '/v1/alarms', {
              headers: headers(),
              body: { in_seconds: 900, label: 'B’s' },
            });
            const alarms = await call(server.app, 'GET', `/v1/alarms?cursor=${mine.alarmCursor}`, {
              headers: headers(),
            });
            const wakes = await call(
              server.app,
              'GET',
              `/v1/wakes?cursor=${encodeURIComponent(mine.wakeCursor)}`,
              {
                headers: headers(),
              },
            );
            for (const page of [alarms, wakes]) {
              expect(page.status).toBeLessThan(500);
              expect(page.text).not.toContain(mine.active);
              expect(page.text).not.toContain(mine.fired);
              expect(page.text).not.toContain(mine.wake);
            }
            expect(alarms.body.alarms.every((x: { label: string }) => x.label === 'B’s')).toBe(true);
          });

          it('A’s idempotency key makes B a new alarm, not A’s', async () => {
            const made = await call(server.app, 'POST', '/v1/alarms', {
              headers: headers(),
              body: { in_seconds: 900, idempotency_key: mine.idempotencyKey },
            });
            expect([200, 201]).toContain(made.status);
            expect(made.body.alarm.id).not.toBe(mine.active);
          });
        });

        describe(`over MCP, as ${who}`, () => {
          let client: Client;
          beforeAll(async () => {
            client = await httpClient(server.url, headers());
            clients.push(client);
          });

          it.each(TOOL_ATTEMPTS)('$name with A’s id answers like a missing id', async (attempt) => {
            const answer = async (id: string) =>
              (await client.callTool({ name: attempt.tool, arguments: attempt.args(id) })) as CallToolResult;
            const theirs = await answer(mine[attempt.aim]);
            expect(comparableTool(theirs, mine[attempt.aim])).toEqual(
              comparableTool(await answer(MISSING), MISSING),
            );
            expect(theirs.isError).toBe(true);
          });

          it('list_alarms with A’s cursor, and schedule_alarm with A’s idempotency key, show nothing of A’s', async () => {
            const listed = (await client.callTool({
              name: 'list_alarms',
              arguments: { cursor: mine.alarmCursor },
            })) as CallToolResult;
            const scheduled = (await client.callTool({
              name: 'schedule_alarm',
              arguments: { in_seconds: 900, idempotency_key: mine.idempotencyKey },
            })) as CallToolResult;
            for (const result of [listed, scheduled]) {
              expect(textOf(result)).not.toContain(mine.active);
              expect(textOf(result)).not.toContain(mine.fired);
            }
            expect(scheduled.isError ?? false).toBe(false);
          });
        });
      }

      it('left everything of A’s as it was', async () => {
        expect(await viewsOfA()).toEqual(viewsBefore);
      });
    },
  );
}
