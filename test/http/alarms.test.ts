import { afterEach, beforeEach, expect, it } from 'vitest';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import { backdate } from '../support/harness.js';
import { libraryOn } from '../support/library.js';
import {
  ALARM_VIEW_KEYS,
  call,
  isProblem,
  OPERATOR_TOKEN,
  openTestApp,
  OTHER,
  OWNER,
  RFC3339_MS,
  snapshot,
  type TestApp,
} from './support.js';

const rawPayload = sql(
  'test_http_raw_payload',
  'SELECT payload::text AS payload FROM chronos.alarms WHERE id = $1',
);

const deleteAlarm = sql('test_delete_alarm', 'DELETE FROM chronos.alarms WHERE id = $1::uuid');

describeEachBackend('HTTP: alarms', ({ t }) => {
  let h: TestApp;
  beforeEach(async () => {
    h = await openTestApp(t.db);
  });
  afterEach(async () => {
    await h.close();
  });

  it('POST /v1/alarms creates an alarm and answers 201 {alarm, deduped:false} with the exact view', async () => {
    const r = await call(h.app, 'POST', '/v1/alarms', {
      headers: h.auth,
      body: { in_seconds: 600, label: 'check the build', wake_message: 'look at CI' },
    });
    expect(r.status).toBe(201);
    expect(r.headers['content-type']).toMatch(/^application\/json/);
    expect(Object.keys(r.body).sort()).toEqual(['alarm', 'deduped']);
    expect(r.body.deduped).toBe(false);
    const alarm = r.body.alarm;
    // Empty optional strings and a null last_fired_at are omitted; payload and timezone always shown.
    expect(Object.keys(alarm).sort()).toEqual(
      [
        'id',
        'label',
        'kind',
        'timezone',
        'next_fire_at',
        'wake_message',
        'payload',
        'status',
        'max_failures',
        'failure_count',
        'created_at',
        'require_ack',
      ].sort(),
    );
    expect(Object.keys(alarm).every((k) => ALARM_VIEW_KEYS.includes(k))).toBe(true);
    expect(alarm).toMatchObject({
      label: 'check the build',
      kind: 'once',
      timezone: 'UTC',
      wake_message: 'look at CI',
      payload: {},
      status: 'active',
      max_failures: 5,
      failure_count: 0,
      require_ack: true,
    });
    expect(alarm.next_fire_at).toMatch(RFC3339_MS);
    expect(alarm.created_at).toMatch(RFC3339_MS);
    const dueIn = Date.parse(alarm.next_fire_at) - Date.parse(alarm.created_at);
    expect(dueIn).toBeGreaterThan(595_000);
    expect(dueIn).toBeLessThan(605_000);
  });

  it('a cron alarm shows cron_expr, and optional keys appear once they are set', async () => {
    const r = await call(h.app, 'POST', '/v1/alarms', {
      headers: h.auth,
      body: {
        cron: '0 9 * * MON-FRI',
        timezone: 'Europe/Paris',
        conversation_id: 'conv-1',
        idempotency_key: 'weekday-standup',
        require_ack: false,
        max_failures: 3,
      },
    });
    expect(r.status).toBe(201);
    expect(r.body.alarm).toMatchObject({
      kind: 'cron',
      cron_expr: '0 9 * * MON-FRI',
      timezone: 'Europe/Paris',
      conversation_id: 'conv-1',
      idempotency_key: 'weekday-standup',
      require_ack: false,
      max_failures: 3,
    });
  });

  it('the same idempotency_key again answers 200 {alarm, deduped:true} with the first alarm', async () => {
    const body = { in_seconds: 600, idempotency_key: 'once-only', label: 'first' };
    const first = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body });
    const second = await call(h.app, 'POST', '/v1/alarms', {
      headers: h.auth,
      body: { ...body, label: 'second' },
    });
    expect(first.status).toBe(201);
    expect(second.status).toBe(200);
    expect(second.body.deduped).toBe(true);
    expect(second.body.alarm).toEqual(first.body.alarm);
  });

  it('payloads round-trip verbatim: numbers past double precision keep every digit', async () => {
    const body =
      '{"in_seconds": 600, "payload": {"n": 12345678901234567890, "f": 0.1000000000000000055511151231257827, ' +
      '"s": "caf\\u00e9 \\ud83d\\ude00", "nested": {"big": -98765432109876543210.5e-3}}}';
    const created = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body });
    expect(created.status).toBe(201);
    const id = created.body.alarm.id as string;
    for (const text of [
      created.text,
      (await call(h.app, 'GET', `/v1/alarms/${id}`, { headers: h.auth })).text,
    ]) {
      expect(text).toContain('12345678901234567890');
      expect(text).toContain('0.1000000000000000055511151231257827');
      // JSONB keeps the number exactly, written without the exponent.
      expect(text).toContain('-98765432109876543.2105');
    }
    const [row] = await t.db.query<{ payload: string }>(rawPayload, [id]);
    expect(row!.payload).toContain('12345678901234567890');
    expect(row!.payload).toContain('0.1000000000000000055511151231257827');

    // A PATCH carries a new payload through verbatim too, and the wake delivers it as stored.
    const patched = await call(h.app, 'PATCH', `/v1/alarms/${id}`, {
      headers: h.auth,
      body: '{"payload": {"n": 98765432109876543210}}',
    });
    expect(patched.status).toBe(200);
    expect(patched.text).toContain('"n": 98765432109876543210');
    await backdate(t.db, id, 601_000);
    await h.service.dispatcher.runOnce();
    expect(h.receiver.fires).toHaveLength(1);
    expect(h.receiver.fires[0]!.alarm.payload.text).toContain('98765432109876543210');
  });

  it('GET /v1/alarms/{id} answers {alarm}; another owner’s id answers 404 exactly like a missing one', async () => {
    const created = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 60 } });
    const id = created.body.alarm.id as string;
    const mine = await call(h.app, 'GET', `/v1/alarms/${id}`, { headers: h.auth });
    expect(mine.status).toBe(200);
    expect(mine.body).toEqual({ alarm: created.body.alarm });

    const missingId = '7c0a4d4e-4a44-4f0e-9a3b-1d2e3f4a5b6c';
    const theirs = await call(h.app, 'GET', `/v1/alarms/${id}`, { headers: h.otherAuth });
    const missing = await call(h.app, 'GET', `/v1/alarms/${missingId}`, { headers: h.otherAuth });
    expect(isProblem(theirs, 404)).toBe(true);
    expect(isProblem(missing, 404)).toBe(true);
    const strip = (b: Record<string, unknown>) => ({
      ...b,
      detail: String(b.detail).replace(/"[^"]*"/, '"…"'),
      request_id: 0,
    });
    expect(strip(theirs.body)).toEqual(strip(missing.body));

    // Nor can the other owner change or cancel it, and their lists do not show it.
    const before = await snapshot(t.db);
    expect(
      (await call(h.app, 'PATCH', `/v1/alarms/${id}`, { headers: h.otherAuth, body: { label: 'x' } })).status,
    ).toBe(404);
    expect((await call(h.app, 'DELETE', `/v1/alarms/${id}`, { headers: h.otherAuth })).status).toBe(404);
    expect(await snapshot(t.db)).toEqual(before);
    const list = await call(h.app, 'GET', '/v1/alarms', { headers: h.otherAuth });
    expect(list.body).toEqual({ alarms: [], next_cursor: null });
  });

  it('GET /v1/alarms lists newest first with keyset pagination that is stable while alarms are created', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const r = await call(h.app, 'POST', '/v1/alarms', {
        headers: h.auth,
        body: { in_seconds: 600, label: `a${i}` },
      });
      ids.push(r.body.alarm.id);
    }
    await call(h.app, 'POST', '/v1/alarms', { headers: h.otherAuth, body: { in_seconds: 600 } });

    const page1 = await call(h.app, 'GET', '/v1/alarms?limit=3', { headers: h.auth });
    expect(page1.status).toBe(200);
    expect(Object.keys(page1.body).sort()).toEqual(['alarms', 'next_cursor']);
    expect(page1.body.alarms.map((a: { label: string }) => a.label)).toEqual(['a6', 'a5', 'a4']);
    expect(typeof page1.body.next_cursor).toBe('string');

    // New alarms created between pages do not shift the next page, and the page's last alarm
    // deleted meanwhile (as retention does) does not lose the place.
    await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 600, label: 'late' } });
    await t.db.query(deleteAlarm, [ids[4]]);
    const page2 = await call(h.app, 'GET', `/v1/alarms?limit=3&cursor=${page1.body.next_cursor}`, {
      headers: h.auth,
    });
    expect(page2.body.alarms.map((a: { label: string }) => a.label)).toEqual(['a3', 'a2', 'a1']);
    const page3 = await call(h.app, 'GET', `/v1/alarms?limit=3&cursor=${page2.body.next_cursor}`, {
      headers: h.auth,
    });
    expect(page3.body.alarms.map((a: { label: string }) => a.label)).toEqual(['a0']);
    expect(page3.body.next_cursor).toBeNull();

    const all = await call(h.app, 'GET', '/v1/alarms', { headers: h.auth });
    expect(all.body.alarms).toHaveLength(7);
    expect(all.body.next_cursor).toBeNull();
  });

  it('GET /v1/alarms lists the owner’s library timers among its alarms, newest first, page by page', async () => {
    // Migration 0016: an owner's library timers are not in the index that lists the others; the
    // listing reads them through their keys and merges the two in order.
    const chronos = await libraryOn(t);
    const made: string[] = [];
    try {
      for (let i = 0; i < 6; i++) {
        if (i % 2 === 0) {
          const r = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 600 } });
          made.push(r.body.alarm.id);
        } else {
          made.push((await chronos.schedule(null, { key: `app:${i}`, inSeconds: 600, owner: OWNER.did })).id);
        }
      }
      await chronos.schedule(null, { key: 'app:other', inSeconds: 600, owner: OTHER.did });
    } finally {
      await chronos.close();
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await call(h.app, 'GET', `/v1/alarms?limit=4${cursor ? `&cursor=${cursor}` : ''}`, {
        headers: h.auth,
      });
      seen.push(...page.body.alarms.map((a: { id: string }) => a.id));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual([...made].reverse());
    const active = await call(h.app, 'GET', '/v1/alarms?status=active&limit=2', { headers: h.auth });
    expect(active.body.alarms.map((a: { id: string }) => a.id)).toEqual([made[5], made[4]]);
  });

  it('GET /v1/alarms?status= filters by status', async () => {
    const a = await call(h.app, 'POST', '/v1/alarms', {
      headers: h.auth,
      body: { in_seconds: 600, label: 'keep' },
    });
    const b = await call(h.app, 'POST', '/v1/alarms', {
      headers: h.auth,
      body: { in_seconds: 600, label: 'drop' },
    });
    await call(h.app, 'DELETE', `/v1/alarms/${b.body.alarm.id}`, { headers: h.auth });
    const active = await call(h.app, 'GET', '/v1/alarms?status=active', { headers: h.auth });
    const cancelled = await call(h.app, 'GET', '/v1/alarms?status=cancelled', { headers: h.auth });
    expect(active.body.alarms.map((x: { id: string }) => x.id)).toEqual([a.body.alarm.id]);
    expect(cancelled.body.alarms.map((x: { id: string }) => x.id)).toEqual([b.body.alarm.id]);
    expect(cancelled.body.alarms[0]).not.toHaveProperty('next_fire_at');
  });

  it('PATCH reschedules (kind may change) and edits; 409 once the alarm is not active', async () => {
    const created = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 600 } });
    const id = created.body.alarm.id as string;
    const toCron = await call(h.app, 'PATCH', `/v1/alarms/${id}`, {
      headers: h.auth,
      body: { cron: '@every 2h', label: 'now repeating' },
    });
    expect(toCron.status).toBe(200);
    expect(Object.keys(toCron.body)).toEqual(['alarm']);
    expect(toCron.body.alarm).toMatchObject({ kind: 'cron', cron_expr: '@every 2h', label: 'now repeating' });
    const back = await call(h.app, 'PATCH', `/v1/alarms/${id}`, {
      headers: h.auth,
      body: { in_seconds: 30 },
    });
    expect(back.body.alarm.kind).toBe('once');
    expect(back.body.alarm).not.toHaveProperty('cron_expr');

    await call(h.app, 'DELETE', `/v1/alarms/${id}`, { headers: h.auth });
    const before = await snapshot(t.db);
    const refused = await call(h.app, 'PATCH', `/v1/alarms/${id}`, {
      headers: h.auth,
      body: { label: 'too late' },
    });
    expect(isProblem(refused, 409)).toBe(true);
    expect(refused.body.detail).toMatch(/cancelled/);
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('DELETE cancels, answers the cancelled alarm again, and 409 for a fired alarm', async () => {
    const created = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 600 } });
    const id = created.body.alarm.id as string;
    const first = await call(h.app, 'DELETE', `/v1/alarms/${id}`, { headers: h.auth });
    expect(first.status).toBe(200);
    expect(first.body.alarm.status).toBe('cancelled');
    const again = await call(h.app, 'DELETE', `/v1/alarms/${id}`, { headers: h.auth });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);

    const fired = await call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 60 } });
    await backdate(t.db, fired.body.alarm.id, 61_000);
    await h.service.dispatcher.runOnce();
    const got = await call(h.app, 'GET', `/v1/alarms/${fired.body.alarm.id}`, { headers: h.auth });
    expect(got.body.alarm.status).toBe('fired');
    expect(got.body.alarm.last_fired_at).toMatch(RFC3339_MS);
    const before = await snapshot(t.db);
    const refused = await call(h.app, 'DELETE', `/v1/alarms/${fired.body.alarm.id}`, { headers: h.auth });
    expect(isProblem(refused, 409)).toBe(true);
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('the operator token acts for the owner named by X-Chronos-Owner', async () => {
    const operator = { authorization: `Bearer ${OPERATOR_TOKEN}` };
    const created = await call(h.app, 'POST', '/v1/alarms', {
      headers: { ...operator, 'x-chronos-owner': OTHER.did },
      body: { in_seconds: 600, label: 'for other' },
    });
    expect(created.status).toBe(201);
    const asOther = await call(h.app, 'GET', `/v1/alarms/${created.body.alarm.id}`, { headers: h.otherAuth });
    expect(asOther.body.alarm.label).toBe('for other');
    const asOwner = await call(h.app, 'GET', `/v1/alarms/${created.body.alarm.id}`, {
      headers: { ...operator, 'x-chronos-owner': OWNER.did },
    });
    expect(asOwner.status).toBe(404);
    // A key naming its own owner in the header is fine.
    const own = await call(h.app, 'GET', '/v1/alarms', {
      headers: { ...h.auth, 'x-chronos-owner': OWNER.did },
    });
    expect(own.status).toBe(200);
  });
});
