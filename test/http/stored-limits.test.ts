/**
 * Issue 45: the payload limits hold for what PostgreSQL stores and gives back (contract §5, third
 * edition). Each probe here crashed, stalled or altered something before the fix.
 */
import { mkdtemp, cp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import fc from 'fast-check';
import { afterEach, beforeEach, expect, it } from 'vitest';
import pino from 'pino';
import { storedForm } from '../../packages/chronos-timers/src/json.js';
import { Metrics } from '../../packages/chronos-timers-server/src/metrics.js';
import { reportStoredRepairs } from '../../packages/chronos-timers-server/src/service.js';
import { MIGRATIONS_DIR, migrate } from '../../packages/chronos-timers/src/store/driver/migrate.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import { libraryOn } from '../support/library.js';
import { call, isProblem, openTestApp, snapshot, type TestApp } from './support.js';

const nested = (depth: number) => `${'{"a":'.repeat(depth - 1)}{}${'}'.repeat(depth - 1)}`;
const storedBytes = sql('test_stored_bytes', 'SELECT octet_length($1::jsonb::text)::int AS bytes');

describeEachBackend('payload limits as stored', ({ t }) => {
  let h: TestApp;
  beforeEach(async () => {
    h = await openTestApp(t.db);
  });
  afterEach(async () => {
    await h.close();
  });

  const refused = async (body: string, pattern: RegExp) => {
    const before = await snapshot(t.db);
    const answer = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body });
    expect(answer.status, answer.text).toBe(400);
    expect(isProblem(answer, 400)).toBe(true);
    expect(answer.body.errors[0].path).toBe('payload');
    expect(answer.body.errors[0].message).toMatch(pattern);
    expect(await snapshot(t.db)).toEqual(before);
    return answer;
  };

  it('a 48 KB payload of 1e99999 (the crash loop) and an 8 KB one are a 400 on payload, nothing written', async () => {
    for (const count of [6_000, 1_000]) {
      const numbers = Array.from({ length: count }, () => '1e99999').join(',');
      const answer = await refused(`{"in_seconds": 60, "payload": {"a": [${numbers}]}}`, /as stored/);
      expect(answer.body.errors[0].message).toMatch(/1e99999 is stored as its 100,000 digits/);
    }
    // The list still answers (before the fix the 48 KB row crashed it).
    expect((await call(h.app, 'GET', '/v1/alarms?limit=1', { headers: h.auth })).status).toBe(200);
  });

  it('counts the spaces JSONB adds: a compact payload under 64 KiB sent may be over it stored', async () => {
    const members = Array.from({ length: 6_000 }, (_, i) => `"k${i}":1`).join(',');
    expect(Buffer.byteLength(`{${members}}`)).toBeLessThan(65_536);
    await refused(`{"in_seconds": 60, "payload": {${members}}}`, /at most 65536 bytes \(64 KiB\) as stored/);
  });

  it('a number PostgreSQL cannot store at all (1e-20000) is a 400 on payload, not its error', async () => {
    await refused('{"in_seconds": 60, "payload": {"a": 1e-20000}}', /numbers PostgreSQL can store/);
  });

  it('a payload 64 levels deep is accepted, 65 and 10,000 are a 400 on payload', async () => {
    const ok = await call(h.app, 'POST', '/v1/alarms', {
      headers: h.auth,
      body: `{"in_seconds": 60, "payload": ${nested(64)}}`,
    });
    expect(ok.status, ok.text).toBe(201);
    await refused(`{"in_seconds": 60, "payload": ${nested(65)}}`, /at most 64 levels deep, got 65 levels/);
    await refused(`{"in_seconds": 60, "payload": ${nested(10_000)}}`, /got 10000 levels/);
    await refused(
      `{"in_seconds": 60, "payload": {"a": ${'['.repeat(60_000)}${']'.repeat(60_000)}}}`,
      /64 KiB/,
    );
  });

  it('a batch and a PATCH are refused alike, on the item and field as sent', async () => {
    const batch = await call(h.app, 'POST', '/v1/alarms/batch', {
      headers: h.auth,
      body: `{"alarms": [{"in_seconds": 60}, {"in_seconds": 60, "payload": {"a": [${'1e99999,'.repeat(9)}1]}}]}`,
    });
    expect(batch.status, batch.text).toBe(400);
    expect(batch.body.errors[0].path).toBe('alarms.1.payload');
    const created = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 60 } });
    const patch = await call(h.app, 'PATCH', `/v1/alarms/${created.body.alarm.id}`, {
      headers: h.auth,
      body: `{"payload": ${nested(100)}}`,
    });
    expect(patch.status, patch.text).toBe(400);
    expect(patch.body.errors[0].path).toBe('payload');
  });

  it('\\u0000 inside a payload string is a 400 on payload, not PostgreSQL text', async () => {
    const answer = await refused('{"in_seconds": 60, "payload": {"a": "x\\u0000y"}}', /\\u0000/);
    expect(answer.text).not.toMatch(/unsupported Unicode|PostgreSQL refused|22P05/);
  });

  it("NUL in every text field is a 400 on that field, never the database's own text", async () => {
    const cases: (readonly [method: 'GET' | 'POST', url: string, body: string | undefined, path: string])[] =
      [
        ['GET', '/v1/wakes?conversation_id=%00', undefined, 'conversation_id'],
        ['POST', '/v1/conversations/%00/replies', '{}', 'conversation_id'],
        ['POST', '/v1/alarms/bulk-cancel', '{"label": "\\u0000"}', 'label'],
        ...['label', 'wake_message', 'idempotency_key', 'conversation_id', 'timezone'].map(
          (field) => ['POST', '/v1/alarms', `{"in_seconds": 60, "${field}": "a\\u0000"}`, field] as const,
        ),
        ['POST', '/v1/alarms', '{"in_seconds": 60, "payload": {"\\u0000": 1}}', 'payload'],
      ];
    for (const [method, url, body, path] of cases) {
      const before = await snapshot(t.db);
      const answer = await call(h.app, method, url, { headers: h.auth, body });
      expect(answer.status, `${url} ${body}`).toBe(400);
      expect(answer.body.errors[0].path, answer.text).toBe(path);
      expect(answer.text).not.toMatch(/database refused|byte sequence/);
      expect(await snapshot(t.db)).toEqual(before);
    }
  });

  it('a body that is not valid UTF-8 is a 400, nothing stored (never U+FFFD)', async () => {
    const before = await snapshot(t.db);
    const body = Buffer.concat([
      Buffer.from('{"in_seconds": 60, "label": "a'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}'),
    ]);
    const response = await h.app.inject({
      method: 'POST',
      url: '/v1/alarms',
      headers: { ...h.auth, 'content-type': 'application/json' },
      payload: body,
    });
    expect(response.statusCode, response.body).toBe(400);
    expect(JSON.parse(response.body).errors[0].message).toMatch(/not UTF-8 at byte 30 \(0xff\)/);
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('the library refuses the same, on specs.N.payload', async () => {
    const chronos = await libraryOn(t);
    try {
      const deep: Record<string, unknown> = {};
      let at = deep;
      for (let i = 0; i < 80; i++) at = at.a = {} as Record<string, unknown>;
      const many = { a: Array.from({ length: 300 }, () => 1e308) }; // 309 digits each
      for (const payload of [deep, many]) {
        const error = await chronos
          .scheduleMany(null, [
            { key: 'ok', inSeconds: 60 },
            { key: 'bad', inSeconds: 60, payload },
          ])
          .catch((e: unknown) => e);
        expect((error as { errors: { path: string }[] }).errors[0]!.path).toBe('specs.1.payload');
      }
    } finally {
      await chronos.close();
    }
  });

  it("storedForm's size is PostgreSQL's own octet_length(jsonb::text), exponents and escapes included", async () => {
    const number = fc
      .tuple(
        fc.boolean(),
        fc.oneof(fc.constant('0'), fc.stringMatching(/^[1-9]\d{0,5}$/)),
        fc.option(fc.stringMatching(/^\d{1,6}$/), { nil: undefined }),
        fc.option(
          fc.tuple(
            fc.constantFrom('e', 'E'),
            fc.constantFrom('', '+', '-'),
            fc.integer({ min: 0, max: 400 }),
          ),
          {
            nil: undefined,
          },
        ),
      )
      .map(
        ([neg, int, frac, exp]) =>
          `${neg ? '-' : ''}${int}${frac === undefined ? '' : `.${frac}`}${exp ? `${exp[0]}${exp[1]}${exp[2]}` : ''}`,
      );
    const string = fc
      .array(
        fc.oneof(
          fc
            .string({ unit: 'grapheme', maxLength: 4 })
            .filter((s) => !s.includes('\u0000'))
            .map((s) => JSON.stringify(s).slice(1, -1)),
          fc.constantFrom(
            '\\/',
            '\\"',
            '\\\\',
            '\\n',
            '\\u0001',
            '\\u00e9',
            '\\ud83d\\ude00',
            '\\u001f',
            '\\t',
            '\\u0041',
          ),
        ),
        { maxLength: 5 },
      )
      .map((parts) => `"${parts.join('')}"`);
    const { value } = fc.letrec<{ value: string }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        number,
        string,
        fc.constantFrom('true', 'false', 'null'),
        fc.array(tie('value'), { maxLength: 4 }).map((xs) => `[${xs.join(' ,\n')}]`),
        fc
          .uniqueArray(fc.tuple(string, tie('value')), {
            maxLength: 4,
            selector: ([k]) => JSON.parse(k) as string,
          })
          .map((ms) => `{${ms.map(([k, v]) => `${k}:${v}`).join(',')}}`),
      ),
    }));
    await fc.assert(
      fc.asyncProperty(value, async (text) => {
        const [row] = await t.db.query<{ bytes: number }>(storedBytes, [text]);
        expect(storedForm(text).bytes, text).toBe(row!.bytes);
      }),
      { numRuns: 300 },
    );
  }, 120_000);
});

const dropCheck = sql(
  'test_drop_payload_check',
  'ALTER TABLE chronos.alarms DROP CONSTRAINT alarms_payload_stored_limits',
);
const insertBad = sql(
  'test_insert_bad_payload',
  `INSERT INTO chronos.alarms (owner_did, user_id, kind, fire_at, next_fire_at, scheduled_for, payload, queue)
   SELECT owner_did, user_id, 'once', now() - interval '1 minute', now() - interval '1 minute',
          now() - interval '1 minute', $1::jsonb, 'router'
     FROM chronos.alarms WHERE id = $2 RETURNING id`,
);

describeEachBackend('migration 0018 repairs rows stored past the limits', ({ t }) => {
  it('fails each, replaces its payload by {}, says why; list, get and claim survive', async () => {
    const h = await openTestApp(t.db);
    try {
      const model = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 600 } });
      await t.db.exec(dropCheck.text);
      // 20 × 1e99999: 2 MB as stored (readable, so the test can be run before the fix too).
      const [big] = await t.db.query<{ id: string }>(insertBad, [
        `{"a": [${'1e99999,'.repeat(19)}1e99999]}`,
        model.body.alarm.id,
      ]);
      const [deep] = await t.db.query<{ id: string }>(insertBad, [nested(100), model.body.alarm.id]);
      const dir = await mkdtemp(join(tmpdir(), 'chronos-0018-'));
      await cp(MIGRATIONS_DIR, dir, { recursive: true });
      await t.db.exec(
        "DELETE FROM chronos.chronos_schema_migrations WHERE version = '0018_stored_payload_limits'",
      );
      const applied = await migrate(t.db, dir);
      expect(applied).toEqual(['0018_stored_payload_limits']);
      await rm(dir, { recursive: true });
      // Reported: a warning naming the repaired alarms, and the count as a metric.
      const lines: { level: number; msg: string; count?: number; alarms?: string[] }[] = [];
      const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
      const metrics = new Metrics();
      await reportStoredRepairs(t.db, applied, logger, metrics);
      const warning = lines.find((l) => l.msg.includes('stored past the payload limits'));
      expect(warning).toMatchObject({ level: 40, count: 2 });
      expect(new Set(warning!.alarms)).toEqual(new Set([big!.id, deep!.id]));
      expect(await metrics.registry.getSingleMetricAsString('chronos_stored_rows_repaired_total')).toMatch(
        /chronos_stored_rows_repaired_total 2$/m,
      );

      const one = await call(h.app, 'GET', `/v1/alarms/${big!.id}`, { headers: h.auth });
      expect(one.body.alarm).toMatchObject({ status: 'failed', payload: {} });
      expect(one.body.alarm.last_error).toMatch(
        /^payload was at least \d+ bytes as stored, over the 64 KiB limit; replaced by \{\}$/,
      );
      const other = await call(h.app, 'GET', `/v1/alarms/${deep!.id}`, { headers: h.auth });
      expect(other.body.alarm.last_error).toMatch(/nested deeper than 64 levels/);
      expect((await call(h.app, 'GET', '/v1/alarms?limit=200', { headers: h.auth })).status).toBe(200);
      expect(await h.service.dispatcher.runOnce()).toBe(0);
      // And the database itself now refuses such a payload, whatever path writes it.
      await expect(t.db.query(insertBad, [nested(65), model.body.alarm.id])).rejects.toThrow(
        /alarms_payload_stored_limits/,
      );
    } finally {
      await h.close();
    }
  }, 60_000);
});
