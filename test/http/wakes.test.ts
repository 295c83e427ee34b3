import { afterEach, beforeEach, expect, it } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { createApp } from '../../packages/chronos-timers-server/src/server.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import type { Wake } from '../../packages/chronos-timers/src/types.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import { backdate, RecordingReceiver, until } from '../support/harness.js';
import {
  call,
  isProblem,
  openTestApp,
  RFC3339_MS,
  snapshot,
  WAKE_VIEW_KEYS,
  type TestApp,
} from './support.js';

const ageWake = sql(
  'test_http_age_wake',
  `UPDATE chronos.wakes SET fired_at = fired_at - $2::int * interval '1 millisecond',
     created_at = created_at - $2::int * interval '1 millisecond' WHERE id = $1`,
);
const nudgeWake = sql('test_http_nudge_wake', `UPDATE chronos.wakes SET nudged_at = now() WHERE id = $1`);

describeEachBackend('HTTP: wakes', ({ t, kind }) => {
  let h: TestApp;
  let acknowledged: Wake[][];
  beforeEach(async () => {
    h = await openTestApp(t.db, { CHRONOS_REPLY_WINDOW: '2m' });
    acknowledged = [];
    h.service.wakes.onAcknowledged((wakes) => void acknowledged.push(wakes));
  });
  afterEach(async () => {
    await h.close();
  });

  /** Creates an alarm through the API and fires it now; returns its wake id. */
  async function fired(body: Record<string, unknown> = {}, auth = h.auth): Promise<string> {
    const r = await call(h.app, 'POST', '/v1/alarms', { headers: auth, body: { in_seconds: 60, ...body } });
    expect(r.status).toBe(201);
    await backdate(t.db, r.body.alarm.id, 61_000);
    await h.service.dispatcher.runOnce();
    const fire = h.receiver.firesOf(r.body.alarm.id).at(-1);
    if (!fire) throw new Error('the alarm did not fire');
    return fire.wakeId;
  }

  it('GET /v1/wakes lists the owner’s wakes with the exact wake view, newest first, paginated', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await fired({ label: `w${i}`, conversation_id: 'conv-a' }));
    await fired({}, h.otherAuth);

    const page1 = await call(h.app, 'GET', '/v1/wakes?limit=2', { headers: h.auth });
    expect(page1.status).toBe(200);
    expect(Object.keys(page1.body).sort()).toEqual(['next_cursor', 'wakes']);
    expect(page1.body.wakes.map((w: { id: string }) => w.id)).toEqual([ids[4], ids[3]]);
    const wake = page1.body.wakes[0];
    expect(Object.keys(wake)).toEqual(WAKE_VIEW_KEYS);
    expect(wake).toMatchObject({
      status: 'delivered',
      label: 'w4',
      wake_message: '',
      conversation_id: 'conv-a',
      attempts: 1,
      fire_count: 1,
      require_ack: true,
      nudged_at: null,
      escalated_at: null,
      acknowledged_at: null,
      ack_note: null,
      ack_inferred: false,
    });
    expect(wake.fired_at).toMatch(RFC3339_MS);
    expect(wake.delivered_at).toMatch(RFC3339_MS);
    // Measured when the delivery started, so at most the time from due to delivered.
    expect(Number.isInteger(wake.lateness_ms)).toBe(true);
    expect(wake.lateness_ms).toBeGreaterThanOrEqual(0);
    expect(wake.lateness_ms).toBeLessThanOrEqual(
      Date.parse(wake.delivered_at) - Date.parse(wake.scheduled_for),
    );

    const page2 = await call(h.app, 'GET', `/v1/wakes?limit=2&cursor=${page1.body.next_cursor}`, {
      headers: h.auth,
    });
    expect(page2.body.wakes.map((w: { id: string }) => w.id)).toEqual([ids[2], ids[1]]);
    const page3 = await call(h.app, 'GET', `/v1/wakes?limit=2&cursor=${page2.body.next_cursor}`, {
      headers: h.auth,
    });
    expect(page3.body.wakes.map((w: { id: string }) => w.id)).toEqual([ids[0]]);
    expect(page3.body.next_cursor).toBeNull();

    const delivered = await call(h.app, 'GET', '/v1/wakes?status=delivered', { headers: h.auth });
    expect(delivered.body.wakes).toHaveLength(5);
    const none = await call(h.app, 'GET', '/v1/wakes?status=acknowledged', { headers: h.auth });
    expect(none.body).toEqual({ wakes: [], next_cursor: null });
  });

  it('POST /v1/wakes/{id}/ack acknowledges with the trimmed note, once; again answers the same wake', async () => {
    const id = await fired();
    const first = await call(h.app, 'POST', `/v1/wakes/${id}/ack`, {
      headers: h.auth,
      body: { note: '  build is green ' },
    });
    expect(first.status).toBe(200);
    expect(Object.keys(first.body)).toEqual(['wake']);
    expect(first.body.wake).toMatchObject({
      id,
      status: 'acknowledged',
      ack_note: 'build is green',
      ack_inferred: false,
    });
    expect(first.body.wake.acknowledged_at).toMatch(RFC3339_MS);

    const again = await call(h.app, 'POST', `/v1/wakes/${id}/ack`, {
      headers: h.auth,
      body: { note: 'second note' },
    });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    await until(() => acknowledged.length > 0, 'the hook');
    expect(acknowledged.map((ws) => ws.map((w) => w.id))).toEqual([[id]]);
    expect(acknowledged[0]![0]!.ackNote).toBe('build is green');
  });

  it('another owner’s wake answers 404 and stays unacknowledged; a failed wake answers 409', async () => {
    const id = await fired();
    const before = await snapshot(t.db);
    const theirs = await call(h.app, 'POST', `/v1/wakes/${id}/ack`, {
      headers: h.otherAuth,
      body: { note: 'mine now' },
    });
    expect(isProblem(theirs, 404)).toBe(true);
    expect((await call(h.app, 'GET', `/v1/wakes/${id}`, { headers: h.otherAuth })).status).toBe(404);
    expect(await snapshot(t.db)).toEqual(before);

    h.receiver.behave = () => ({ ok: false, retryable: false, error: 'router said 400' });
    const failed = await fired();
    const wake = await call(h.app, 'GET', `/v1/wakes/${failed}`, { headers: h.auth });
    expect(wake.body.wake.status).toBe('failed');
    const refused = await call(h.app, 'POST', `/v1/wakes/${failed}/ack`, {
      headers: h.auth,
      body: { note: 'seen' },
    });
    expect(isProblem(refused, 409)).toBe(true);
    expect(acknowledged).toEqual([]);
  });

  it('a reported reply acknowledges (inferred) the owner’s open wakes in that conversation within the window', async () => {
    const recent = await fired({ conversation_id: 'conv-r' });
    const old = await fired({ conversation_id: 'conv-r' });
    const oldButNudged = await fired({ conversation_id: 'conv-r' });
    const elsewhere = await fired({ conversation_id: 'conv-other' });
    const otherOwners = await fired({ conversation_id: 'conv-r' }, h.otherAuth);
    const alreadyAcked = await fired({ conversation_id: 'conv-r' });
    await call(h.app, 'POST', `/v1/wakes/${alreadyAcked}/ack`, { headers: h.auth, body: { note: 'done' } });
    await t.db.query(ageWake, [old, 10 * 60_000]);
    await t.db.query(ageWake, [oldButNudged, 10 * 60_000]);
    await t.db.query(nudgeWake, [oldButNudged]);
    await until(() => acknowledged.length === 1, 'the explicit ack hook');

    const r = await call(h.app, 'POST', '/v1/conversations/conv-r/replies', { headers: h.auth, body: {} });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body)).toEqual(['acked']);
    expect([...r.body.acked].sort()).toEqual([recent, oldButNudged].sort());

    const get = async (id: string, auth = h.auth) =>
      (await call(h.app, 'GET', `/v1/wakes/${id}`, { headers: auth })).body.wake;
    expect(await get(recent)).toMatchObject({ status: 'acknowledged', ack_inferred: true, ack_note: null });
    expect((await get(old)).status).toBe('delivered');
    expect((await get(elsewhere)).status).toBe('delivered');
    expect((await get(otherOwners, h.otherAuth)).status).toBe('delivered');
    expect(await get(alreadyAcked)).toMatchObject({ status: 'acknowledged', ack_inferred: false });

    // Reported again: nothing left to acknowledge; the hook saw each wake once.
    const again = await call(h.app, 'POST', '/v1/conversations/conv-r/replies', {
      headers: h.auth,
      body: {},
    });
    expect(again.body).toEqual({ acked: [] });
    await until(() => acknowledged.length === 2, 'the reply hook');
    expect(acknowledged[1]!.map((w) => w.id).sort()).toEqual([recent, oldButNudged].sort());
    expect(acknowledged[1]!.every((w) => w.ackInferred)).toBe(true);
  });

  it('a reply with no body at all is accepted like {}', async () => {
    const id = await fired({ conversation_id: 'conv-empty' });
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/conversations/conv-empty/replies',
      headers: h.auth,
    });
    expect(r.statusCode).toBe(200);
    expect(JSON.parse(r.body)).toEqual({ acked: [id] });
  });

  postgresOnly(
    kind,
    'two instances need two connection pools',
    'each ack happens once across instances: concurrent acks and replies announce every wake once',
    async () => {
      const config = loadConfig({ CHRONOS_CREATE_RATE: '0', CHRONOS_MAX_ACTIVE_ALARMS: '0' });
      const second = await ChronosService.open(config, {
        db: t.openPool(),
        logger: silentLogger,
        receiver: new RecordingReceiver(),
      });
      const secondApp = await createApp(second);
      const seen: string[] = [];
      h.service.wakes.onAcknowledged((ws) => void seen.push(...ws.map((w) => w.id)));
      second.wakes.onAcknowledged((ws) => void seen.push(...ws.map((w) => w.id)));
      try {
        const ids: string[] = [];
        for (let i = 0; i < 6; i++) ids.push(await fired({ conversation_id: i % 2 ? 'conv-x' : 'conv-y' }));
        const apps = [h.app, secondApp];
        const answers = await Promise.all([
          ...ids.flatMap((id, i) =>
            apps.map((app) =>
              call(app, 'POST', `/v1/wakes/${id}/ack`, { headers: h.auth, body: { note: `n${i}` } }),
            ),
          ),
          ...apps.flatMap((app) =>
            ['conv-x', 'conv-y'].map((c) =>
              call(app, 'POST', `/v1/conversations/${c}/replies`, { headers: h.auth, body: {} }),
            ),
          ),
        ]);
        for (const a of answers) expect(a.status).toBe(200);
        await until(() => seen.length >= ids.length, 'every wake announced');
        expect([...seen].sort()).toEqual([...ids].sort());
      } finally {
        await secondApp.close();
        await second.stop(); // its pool is the test database's, closed with it
      }
    },
  );
});
