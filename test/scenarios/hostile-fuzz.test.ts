/**
 * Hostile input: random sequences of requests — POST, PATCH, DELETE and GET over HTTP, and the
 * six MCP tools through the SDK's own `Client` — with random and mutated arguments, aimed at the
 * caller's own alarms, another owner's, missing ids and malformed ones.
 *
 * After every request: never a 5xx (nor an MCP protocol error), every refusal a problem body (or
 * an `isError` tool result with a text saying what to send), and a refused request writes
 * nothing. After every sequence the database holds exactly what the accepted requests wrote:
 * the owner's alarms are exactly the ones accepted creates returned, each as the last accepted
 * answer showed it. (test/http/fuzz.test.ts throws single bodies at POST and PATCH; this covers
 * sequences, DELETE, the MCP tools and the reconciliation with the table.)
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import { sized } from './support/scenario.js';
import { call, isProblem, snapshot } from '../http/support.js';
import { httpClient, openMcpServer, OTHER, OWNER, textOf, type McpTestServer } from '../mcp/support.js';
import { ALARM_FIELDS, mutate } from '../support/mutations.js';

const ownersAlarms = sql(
  'fuzz_owner_alarm_ids',
  `SELECT id::text AS id FROM chronos.alarms WHERE owner_did = $1 ORDER BY id`,
);

const valid = fc.constantFrom<Record<string, unknown>>(
  { in_seconds: 600 },
  { in_seconds: 3_600, label: 'x', payload: { a: 1, big: '12345678901234567890' } },
  { cron: '*/5 * * * *', timezone: 'Europe/Paris' },
  { cron: '@every 1h30m', wake_message: 'hi', require_ack: false },
  { at: '2031-03-14T09:00:00+01:00', max_failures: 3 },
  { cron: '@daily', conversation_id: 'c', payload: { nested: [1, { x: null }] } },
  { in_seconds: 900, idempotency_key: 'same-key' },
  { label: 'only a label' },
);

const nasty = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom(
    0,
    -1,
    1.5,
    1e308,
    315_360_001,
    '',
    ' ',
    '\u0000',
    '\ud800',
    '\u2028',
    '2027-02-30T25:61:00Z',
    '1970-01-01T00:00:00Z',
    '2031-03-14T09:00:00',
    '@every 0s',
    '@every 1s',
    '* * * * * *',
    'Mars/Olympus_Mons',
    'Europe/Paris',
    '__proto__',
    'x'.repeat(201),
    [],
    {},
    null,
    true,
  ),
  fc.string({ maxLength: 40 }),
);

/** A valid body, or one with up to three fields set to odd values, dropped, or added. */
const mutatedArgs = fc
  .tuple(
    valid,
    fc.oneof(
      fc.constant([]),
      fc.array(
        fc.oneof(
          fc.record({ op: fc.constant('set' as const), key: fc.constantFrom(...ALARM_FIELDS), value: nasty }),
          fc.record({ op: fc.constant('drop' as const), key: fc.constantFrom(...ALARM_FIELDS) }),
          fc.record({ op: fc.constant('set' as const), key: fc.string({ maxLength: 12 }), value: nasty }),
        ),
        { minLength: 1, maxLength: 3 },
      ),
    ),
  )
  .map(([base, ops]) => mutate(base, ops));

type Target = { mine: number } | { theirs: true } | string;

/** Whom a request aims at: one of the owner's alarms (by index), the other owner's, a missing or malformed id. */
const target: fc.Arbitrary<Target> = fc.oneof(
  { weight: 6, arbitrary: fc.nat({ max: 20 }).map((i) => ({ mine: i })) },
  { weight: 1, arbitrary: fc.constant({ theirs: true as const }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('c0ffee00-0000-4000-8000-000000000000', 'not-a-uuid', '', '../alarms', '%00'),
  },
);

const command = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('POST' as const), body: mutatedArgs }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('PATCH' as const), target, body: mutatedArgs }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('DELETE' as const), target }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('GET' as const), target }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('schedule_alarm' as const), args: mutatedArgs }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('reschedule_alarm' as const), target, args: mutatedArgs }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('cancel_alarm' as const), target, args: fc.constant({}) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('get_alarm' as const), target, args: fc.constant({}) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('list_alarms' as const),
      args: fc.oneof(
        fc.record({
          status: fc.constantFrom('active', 'cancelled'),
          limit: fc.integer({ min: 1, max: 200 }),
        }),
        fc.record({ status: nasty, limit: nasty, cursor: nasty }, { requiredKeys: [] }),
      ),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('ack_wake' as const),
      target,
      args: fc.record({ note: nasty }, { requiredKeys: [] }),
    }),
  },
);

describeEachBackend('hostile input: random request sequences over HTTP and MCP', ({ t }) => {
  let server: McpTestServer;
  let client: Client;
  let auth: Record<string, string>;
  let theirs: string;
  beforeAll(async () => {
    server = await openMcpServer(t.db);
    auth = { authorization: `Bearer ${server.ownerKey}` };
    client = await httpClient(server.url, auth);
  });
  afterAll(async () => {
    await client?.close();
    await server?.close();
  });

  it('never a 5xx, every refusal a problem or an isError result that writes nothing, and the table holds exactly what was accepted', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 12 }), async (commands) => {
        await t.reset();
        await server.service.keys.create(OWNER.did, 'fuzz').then((k) => {
          auth = { authorization: `Bearer ${k.key}` };
        });
        await client.close();
        client = await httpClient(server.url, auth);
        const other = await server.service.keys.create(OTHER.did, 'fuzz-other');
        const made = await call(server.app, 'POST', '/v1/alarms', {
          headers: { authorization: `Bearer ${other.key}` },
          body: { in_seconds: 600, label: 'theirs', idempotency_key: 'same-key' },
        });
        theirs = made.body.alarm.id;

        /** The owner's alarms as the last accepted answer showed each. */
        const model = new Map<string, unknown>();
        const ids: string[] = [];
        const idOf = (aim: Target): string => {
          if (typeof aim === 'string') return aim;
          if ('theirs' in aim) return theirs;
          return ids.length === 0 ? 'c0ffee00-0000-4000-8000-000000000000' : ids[aim.mine % ids.length]!;
        };
        const accept = (alarm: { id: string } & Record<string, unknown>) => {
          if (!model.has(alarm.id)) ids.push(alarm.id);
          model.set(alarm.id, alarm);
        };

        // Two alarms to aim at from the start.
        for (const body of [
          { in_seconds: 600, label: 'seed' },
          { cron: '@hourly', label: 'seed cron' },
        ]) {
          accept((await call(server.app, 'POST', '/v1/alarms', { headers: auth, body })).body.alarm);
        }

        for (const c of commands) {
          const before = await snapshot(t.db);
          if (c.op === 'POST' || c.op === 'PATCH' || c.op === 'DELETE' || c.op === 'GET') {
            const id = c.op === 'POST' ? '' : idOf(c.target);
            const url = c.op === 'POST' ? '/v1/alarms' : `/v1/alarms/${encodeURIComponent(id)}`;
            const answer = await call(server.app, c.op, url, {
              headers: auth,
              body: 'body' in c ? JSON.stringify(c.body) : undefined,
            });
            const what = `${c.op} ${url} ${JSON.stringify('body' in c ? c.body : '')} → ${answer.status} ${answer.text}`;
            expect(answer.status, what).toBeLessThan(500);
            if (answer.status >= 400) {
              expect(isProblem(answer, answer.status), what).toBe(true);
              expect(await snapshot(t.db), what).toEqual(before);
            } else if (answer.body.alarms) {
              // `GET /v1/alarms/` (an empty id) is the list.
              for (const alarm of answer.body.alarms) expect(model.has(alarm.id), what).toBe(true);
            } else {
              expect(answer.body.alarm.id, what).not.toBe(theirs);
              accept(answer.body.alarm);
            }
            continue;
          }
          const args = {
            ...('args' in c ? c.args : {}),
            ...('target' in c
              ? c.op === 'ack_wake'
                ? { wake_id: idOf(c.target) }
                : { id: idOf(c.target) }
              : {}),
          };
          let result: CallToolResult;
          try {
            result = (await client.callTool({ name: c.op, arguments: args })) as CallToolResult;
          } catch (error) {
            throw new Error(
              `${c.op} ${JSON.stringify(args)} was a protocol error: ${(error as Error).message}`,
              {
                cause: error,
              },
            );
          }
          const what = `${c.op} ${JSON.stringify(args)} → ${textOf(result)}`;
          if (result.isError) {
            expect(textOf(result), what).toMatch(/\S/);
            expect(textOf(result), what).not.toMatch(/internal error|unexpected/i);
            expect(await snapshot(t.db), what).toEqual(before);
            continue;
          }
          const content = JSON.parse(textOf(result)) as { alarm?: { id: string }; alarms?: { id: string }[] };
          if (content.alarm) {
            expect(content.alarm.id, what).not.toBe(theirs);
            accept(content.alarm);
          }
          for (const alarm of content.alarms ?? []) expect(model.has(alarm.id), what).toBe(true);
        }

        // The table holds exactly the accepted alarms, each as last answered; theirs untouched.
        const rows = await t.db.query<{ id: string }>(ownersAlarms, [OWNER.did]);
        expect(rows.map((r) => r.id)).toEqual([...model.keys()].sort());
        for (const [id, last] of model) {
          const now = await call(server.app, 'GET', `/v1/alarms/${id}`, { headers: auth });
          expect(now.body.alarm, id).toEqual(last);
        }
        const theirsNow = await call(server.app, 'GET', `/v1/alarms/${theirs}`, {
          headers: { authorization: `Bearer ${other.key}` },
        });
        expect(theirsNow.body.alarm).toEqual(made.body.alarm);
      }),
      { numRuns: sized(25, 300) },
    );
  }, 180_000);
});
