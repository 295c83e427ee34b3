/**
 * Every refusal of §5, each with its problem body, and proof by SQL that nothing was written.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { describeEachBackend } from '../support/backends.js';
import { libraryOn } from '../support/library.js';
import {
  call,
  isProblem,
  OPERATOR_TOKEN,
  openTestApp,
  OTHER,
  OWNER,
  snapshot,
  type Answer,
  type TestApp,
} from './support.js';

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

describeEachBackend('HTTP: refusals write nothing', ({ t }) => {
  let h: TestApp;
  let existing: string;
  beforeEach(async () => {
    h = await openTestApp(t.db);
    const r = await call(h.app, 'POST', '/v1/alarms', {
      headers: h.auth,
      body: { in_seconds: 600, label: 'mine' },
    });
    existing = r.body.alarm.id;
  });
  afterEach(async () => {
    await h.close();
  });

  /** Sends the request, asserts the problem and its status, and that no row changed. */
  async function refused(
    status: number,
    method: Method,
    url: string,
    options: { headers?: Record<string, string>; body?: unknown } = {},
  ): Promise<Answer> {
    const before = await snapshot(t.db);
    const answer = await call(h.app, method, url, { headers: h.auth, ...options });
    expect(answer.status, answer.text).toBe(status);
    expect(isProblem(answer, status), answer.text).toBe(true);
    expect(answer.body.type).toMatch(/^urn:chronos:problem:/);
    expect(await snapshot(t.db)).toEqual(before);
    return answer;
  }

  /** A 400 whose errors name `path` with a message saying what to send. */
  async function invalid(
    path: string,
    method: Method,
    url: string,
    body?: unknown,
    headers?: Record<string, string>,
  ) {
    const answer = await refused(400, method, url, { body, headers: headers ?? h.auth });
    expect(answer.body.errors.map((e: { path: string }) => e.path)).toContain(path);
    for (const e of answer.body.errors) expect(e.message).toMatch(/expected|send|unknown/);
    return answer;
  }

  describe('400', () => {
    it('an unknown field is refused, naming it and what to send', async () => {
      const a = await invalid('when', 'POST', '/v1/alarms', { in_seconds: 60, when: 'soon' });
      expect(a.body.errors[0].message).toMatch(/unknown field.*did you mean "at"/);
      await invalid('colour', 'PATCH', `/v1/alarms/${existing}`, { colour: 'red' });
    });

    it('an `at` more than 60 s in the past is refused with a message about time zones', async () => {
      const a = await invalid('at', 'POST', '/v1/alarms', {
        at: new Date(Date.now() - 3_600_000).toISOString(),
      });
      expect(a.body.errors[0].message).toMatch(/time zone|timezone|offset/i);
    });

    it('schedules: none, two at once, out of range, a bad zone, a bad cron, too frequent a cron', async () => {
      await invalid('', 'POST', '/v1/alarms', { label: 'no schedule' });
      const both = await refused(400, 'POST', '/v1/alarms', { body: { in_seconds: 60, cron: '@daily' } });
      expect(both.body.errors.length).toBeGreaterThan(0);
      await invalid('in_seconds', 'POST', '/v1/alarms', { in_seconds: 0 });
      await invalid('in_seconds', 'POST', '/v1/alarms', { in_seconds: 315_360_001 });
      await invalid('in_seconds', 'POST', '/v1/alarms', { in_seconds: 1.5 });
      await invalid('timezone', 'POST', '/v1/alarms', { cron: '@daily', timezone: 'CEST' });
      await invalid('cron', 'POST', '/v1/alarms', { cron: '61 * * * *' });
      await invalid('cron', 'POST', '/v1/alarms', { cron: '@every 10s' });
      await invalid('at', 'POST', '/v1/alarms', { at: 'tomorrow at nine' });
    });

    it('field limits: label, conversation_id, idempotency_key, wake_message, max_failures, types', async () => {
      await invalid('label', 'POST', '/v1/alarms', { in_seconds: 60, label: 'x'.repeat(201) });
      await invalid('conversation_id', 'POST', '/v1/alarms', {
        in_seconds: 60,
        conversation_id: 'c'.repeat(201),
      });
      await invalid('idempotency_key', 'POST', '/v1/alarms', {
        in_seconds: 60,
        idempotency_key: 'k'.repeat(201),
      });
      await invalid('wake_message', 'POST', '/v1/alarms', {
        in_seconds: 60,
        wake_message: 'w'.repeat(16 * 1024 + 1),
      });
      await invalid('max_failures', 'POST', '/v1/alarms', { in_seconds: 60, max_failures: 101 });
      await invalid('require_ack', 'POST', '/v1/alarms', { in_seconds: 60, require_ack: 'yes' });
      await invalid('payload', 'POST', '/v1/alarms', { in_seconds: 60, payload: [1, 2] });
      await invalid('payload', 'POST', '/v1/alarms', { in_seconds: 60, payload: 'text' });
    });

    it('a payload over 64 KiB inside a body under 128 KiB is a 400 on payload', async () => {
      const body = { in_seconds: 60, payload: { blob: 'p'.repeat(70 * 1024) } };
      expect(JSON.stringify(body).length).toBeLessThan(128 * 1024);
      const answer = await invalid('payload', 'POST', '/v1/alarms', body);
      // The size as a size, not a quoted string.
      expect(answer.body.errors[0].message).toBe(
        `payload: expected a JSON object of at most 65536 bytes (64 KiB), got ${JSON.stringify(body.payload).length} bytes`,
      );
      await invalid('payload', 'PATCH', `/v1/alarms/${existing}`, {
        payload: { blob: 'p'.repeat(70 * 1024) },
      });
    });

    it('a body that is not a JSON object is refused on path ""', async () => {
      await invalid('', 'POST', '/v1/alarms', '{"in_seconds": 60');
      await invalid('', 'POST', '/v1/alarms', '[1, 2, 3]');
      await invalid('', 'POST', '/v1/alarms', '"text"');
      await invalid('', 'POST', '/v1/alarms', 'null');
      await invalid('', 'PATCH', `/v1/alarms/${existing}`, '');
    });

    it('list parameters: limit outside 1–200, a bad cursor, a bad status, an unknown parameter', async () => {
      await invalid('limit', 'GET', '/v1/alarms?limit=0');
      await invalid('limit', 'GET', '/v1/alarms?limit=201');
      await invalid('limit', 'GET', '/v1/alarms?limit=ten');
      await invalid('cursor', 'GET', '/v1/alarms?cursor=not-a-cursor');
      await invalid('status', 'GET', '/v1/alarms?status=sleeping');
      await invalid('stauts', 'GET', '/v1/alarms?stauts=active');
      await invalid('limit', 'GET', '/v1/wakes?limit=500');
      await invalid('status', 'GET', '/v1/wakes?status=fired');
      await invalid('cursor', 'GET', '/v1/wakes?cursor=zzz');
    });

    it('a malformed DID in X-Chronos-Owner, or the operator token without one', async () => {
      const operator = { authorization: `Bearer ${OPERATOR_TOKEN}` };
      await invalid(
        'X-Chronos-Owner',
        'POST',
        '/v1/alarms',
        { in_seconds: 60 },
        { ...operator, 'x-chronos-owner': 'did:matrix:nope' },
      );
      await invalid('X-Chronos-Owner', 'POST', '/v1/alarms', { in_seconds: 60 }, operator);
      await invalid('X-Chronos-Owner', 'GET', '/v1/alarms', undefined, {
        ...h.auth,
        'x-chronos-owner': 'alice',
      });
    });

    it('an ack with an empty (or blank, or missing) note changes nothing', async () => {
      const wake = '5d2c1b0a-0000-4000-8000-000000000001';
      await invalid('note', 'POST', `/v1/wakes/${wake}/ack`, { note: '' });
      await invalid('note', 'POST', `/v1/wakes/${wake}/ack`, { note: '   ' });
      await invalid('note', 'POST', `/v1/wakes/${wake}/ack`, {});
      await invalid('note', 'POST', `/v1/wakes/${wake}/ack`, { note: 42 });
      await invalid('mood', 'POST', `/v1/wakes/${wake}/ack`, { note: 'ok', mood: 'happy' });
      await invalid('', 'POST', `/v1/wakes/${wake}/ack`, '');
      await invalid('extra', 'POST', '/v1/conversations/conv-1/replies', { extra: true });
    });
  });

  describe('401', () => {
    it('no Authorization, another scheme, an unknown key, a revoked key', async () => {
      const none = await refused(401, 'POST', '/v1/alarms', { headers: {}, body: { in_seconds: 60 } });
      expect(none.headers['www-authenticate']).toMatch(/^Bearer/);
      expect(none.body.detail).toMatch(/keys create/);
      await refused(401, 'GET', '/v1/alarms', { headers: { authorization: 'Basic dXNlcjpwYXNz' } });
      await refused(401, 'GET', '/v1/alarms', {
        headers: { authorization: 'Bearer chronos_' + 'A'.repeat(43) },
      });
      await refused(401, 'GET', '/v1/wakes', { headers: { authorization: 'Bearer not-a-key' } });
      const keys = await h.service.keys.list(OWNER.did);
      await h.service.keys.revoke(keys[0]!.id);
      const revoked = await refused(401, 'GET', '/v1/alarms', { headers: h.auth });
      expect(revoked.body.detail).toMatch(/unknown or revoked/);
      // The refusal never echoes what was sent.
      expect(revoked.text).not.toContain(h.ownerKey);
    });

    it('is checked before the body is read: an unauthenticated oversized body is a 401', async () => {
      await refused(401, 'POST', '/v1/alarms', { headers: {}, body: 'x'.repeat(200 * 1024) });
    });
  });

  describe('403', () => {
    it('an owner’s key with X-Chronos-Owner naming another owner', async () => {
      const a = await refused(403, 'POST', '/v1/alarms', {
        headers: { ...h.auth, 'x-chronos-owner': OTHER.did },
        body: { in_seconds: 60 },
      });
      expect(a.body.detail).toMatch(/own owner/);
      await refused(403, 'GET', `/v1/alarms/${existing}`, {
        headers: { ...h.auth, 'x-chronos-owner': OTHER.did },
      });
    });
  });

  describe('404', () => {
    it('a missing alarm, another owner’s, a malformed id, a missing wake, an unknown route', async () => {
      const missing = 'c0ffee00-0000-4000-8000-000000000000';
      for (const method of ['GET', 'DELETE'] as const) {
        await refused(404, method, `/v1/alarms/${missing}`);
        await refused(404, method, `/v1/alarms/${existing}`, { headers: h.otherAuth });
        await refused(404, method, '/v1/alarms/not-a-uuid');
      }
      await refused(404, 'PATCH', `/v1/alarms/${missing}`, { body: { label: 'x' } });
      await refused(404, 'POST', `/v1/wakes/${missing}/ack`, { body: { note: 'done' } });
      await refused(404, 'GET', `/v1/wakes/${missing}`);
      await refused(404, 'GET', '/v1/nothing-here');
      await refused(404, 'PUT' as Method, `/v1/alarms/${existing}`, { body: { label: 'x' } });
    });
  });

  describe('409', () => {
    it('PATCH on a cancelled alarm', async () => {
      await call(h.app, 'DELETE', `/v1/alarms/${existing}`, { headers: h.auth });
      const a = await refused(409, 'PATCH', `/v1/alarms/${existing}`, { body: { in_seconds: 60 } });
      expect(a.body.detail).toMatch(/only an active or paused alarm can be changed/);
    });
  });

  describe('413', () => {
    it('a body over 128 KiB', async () => {
      const body = JSON.stringify({ in_seconds: 60, payload: { blob: 'p'.repeat(128 * 1024) } });
      const a = await refused(413, 'POST', '/v1/alarms', { body });
      expect(a.body.detail).toMatch(/128 KiB/);
      await refused(413, 'PATCH', `/v1/alarms/${existing}`, { body });
    });
  });

  describe('429', () => {
    it('max_active_alarms: Retry-After and a problem naming the limit', async () => {
      await h.close();
      h = await openTestApp(t.db, { CHRONOS_MAX_ACTIVE_ALARMS: '2' });
      // With the beforeEach alarm, one more reaches the limit.
      for (let i = 0; i < 1; i++) {
        expect(
          (await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 60 } })).status,
        ).toBe(201);
      }
      const a = await refused(429, 'POST', '/v1/alarms', { body: { in_seconds: 60 } });
      expect(a.body.limit).toBe('max_active_alarms');
      expect(Number(a.headers['retry-after'])).toBeGreaterThan(0);
      // Another owner is not limited by this owner's alarms.
      expect(
        (await call(h.app, 'POST', '/v1/alarms', { headers: h.otherAuth, body: { in_seconds: 60 } })).status,
      ).toBe(201);
      // Only active alarms count: cancelling one frees its slot.
      const mine = await call(h.app, 'GET', '/v1/alarms?status=active', { headers: h.auth });
      const cancelled = await call(h.app, 'DELETE', `/v1/alarms/${mine.body.alarms[0].id}`, {
        headers: h.auth,
      });
      expect(cancelled.status).toBe(200);
      expect(
        (await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 60 } })).status,
      ).toBe(201);
    });

    it('max_active_alarms leaves out the owner’s timers an application wrote through the library', async () => {
      await h.close();
      h = await openTestApp(t.db, { CHRONOS_MAX_ACTIVE_ALARMS: '2' });
      const chronos = await libraryOn(t);
      const owner = OWNER.did;
      await chronos.scheduleMany(
        null,
        [1, 2, 3].map((i) => ({ key: `app:${i}`, inSeconds: 600, owner, queue: 'router' })),
      );
      await chronos.close();
      // With the beforeEach alarm, one more reaches the limit: the three library timers are not counted.
      expect(
        (await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 60 } })).status,
      ).toBe(201);
      const a = await refused(429, 'POST', '/v1/alarms', { body: { in_seconds: 60 } });
      expect(a.body.limit).toBe('max_active_alarms');
      const listed = await call(h.app, 'GET', '/v1/alarms?status=active', { headers: h.auth });
      expect(listed.body.alarms).toHaveLength(5);
    });

    it('create_rate: Retry-After and a problem naming the limit', async () => {
      await h.close();
      h = await openTestApp(t.db, { CHRONOS_CREATE_RATE: '3' });
      // The beforeEach alarm was made under the old app; this owner has made 1 create this minute.
      for (let i = 0; i < 2; i++) {
        expect(
          (await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 60 } })).status,
        ).toBe(201);
      }
      const a = await refused(429, 'POST', '/v1/alarms', { body: { in_seconds: 60 } });
      expect(a.body.limit).toBe('create_rate');
      const retryAfter = Number(a.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
    });

    it('create_rate leaves out the owner’s timers an application wrote through the library', async () => {
      await h.close();
      h = await openTestApp(t.db, { CHRONOS_CREATE_RATE: '3' });
      const chronos = await libraryOn(t);
      await chronos.scheduleMany(
        null,
        [1, 2, 3, 4].map((i) => ({ key: `app:${i}`, inSeconds: 600, owner: OWNER.did, queue: 'router' })),
      );
      await chronos.close();
      // The beforeEach alarm and two more make three creates this minute; the library's four are not counted.
      for (let i = 0; i < 2; i++) {
        expect(
          (await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 60 } })).status,
        ).toBe(201);
      }
      expect((await refused(429, 'POST', '/v1/alarms', { body: { in_seconds: 60 } })).body.limit).toBe(
        'create_rate',
      );
    });
  });
});
