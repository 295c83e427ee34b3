/**
 * The API the dashboard reads (contract §15, issue 17): the operator's every-owner lists with
 * their `owners` map, the label search, next fires, waiting wakes, and the lateness and upcoming
 * figures — each refusing bad input with a 400 naming the parameter.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { nextFires } from '../../packages/chronos-timers/src/schedule/resolve.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import { backdate } from '../support/harness.js';
import {
  ALARM_VIEW_KEYS,
  call,
  isProblem,
  OPERATOR_TOKEN,
  openTestApp,
  OTHER,
  OWNER,
  RFC3339_MS,
  type TestApp,
} from './support.js';

const operator = { authorization: `Bearer ${OPERATOR_TOKEN}` };

// Sets a wake's lateness (fired_at − scheduled_for) as a dispatcher this late would have left it.
const makeLate = sql(
  'test_dashboard_make_late',
  `UPDATE chronos.wakes SET scheduled_for = fired_at - $2::int * interval '1 millisecond' WHERE id = $1`,
);

describeEachBackend('HTTP: what the dashboard reads', ({ t }) => {
  let h: TestApp;
  beforeEach(async () => {
    h = await openTestApp(t.db);
  });
  afterEach(async () => {
    await h.close();
  });

  const create = async (body: Record<string, unknown>, auth = h.auth) => {
    const r = await call(h.app, 'POST', '/v1/alarms', { headers: auth, body });
    expect(r.status).toBe(201);
    return r.body.alarm as { id: string };
  };

  /** Fires an alarm as the dispatcher would, once due; returns its wake id. */
  const fire = async (id: string): Promise<string> => {
    await backdate(t.db, id, 3_600_000);
    await h.service.dispatcher.runOnce();
    const wake = h.receiver.firesOf(id).at(-1);
    if (!wake) throw new Error('the alarm did not fire');
    return wake.wakeId;
  };

  it('the operator token without X-Chronos-Owner lists every owner’s alarms, with their owners beside the exact views', async () => {
    const mine = await create({ in_seconds: 600, label: 'mine' });
    const theirs = await create({ in_seconds: 600, label: 'theirs' }, h.otherAuth);
    const all = await call(h.app, 'GET', '/v1/alarms', { headers: operator });
    expect(all.status).toBe(200);
    expect(Object.keys(all.body).sort()).toEqual(['alarms', 'next_cursor', 'owners']);
    expect(all.body.alarms.map((a: { id: string }) => a.id)).toEqual([theirs.id, mine.id]);
    for (const alarm of all.body.alarms) {
      expect(Object.keys(alarm).every((key) => ALARM_VIEW_KEYS.includes(key))).toBe(true);
    }
    expect(all.body.owners).toEqual({ [mine.id]: OWNER.did, [theirs.id]: OTHER.did });

    // Pages across owners keep the cursor's order.
    const first = await call(h.app, 'GET', '/v1/alarms?limit=1', { headers: operator });
    const second = await call(h.app, 'GET', `/v1/alarms?limit=1&cursor=${first.body.next_cursor}`, {
      headers: operator,
    });
    expect([first.body.alarms[0].id, second.body.alarms[0].id]).toEqual([theirs.id, mine.id]);
    expect(second.body.owners).toEqual({ [mine.id]: OWNER.did });

    // An owner's own list, and the operator naming an owner, carry no owners map.
    const own = await call(h.app, 'GET', '/v1/alarms', { headers: h.auth });
    expect(Object.keys(own.body).sort()).toEqual(['alarms', 'next_cursor']);
    const named = await call(h.app, 'GET', '/v1/alarms', {
      headers: { ...operator, 'x-chronos-owner': OTHER.did },
    });
    expect(named.body.alarms.map((a: { id: string }) => a.id)).toEqual([theirs.id]);
    expect(named.body.owners).toBeUndefined();
  });

  it('every other route still needs X-Chronos-Owner with the operator token', async () => {
    const alarm = await create({ in_seconds: 600 });
    for (const [method, url] of [
      ['GET', `/v1/alarms/${alarm.id}`],
      ['POST', `/v1/alarms/${alarm.id}/pause`],
      ['GET', `/v1/alarms/${alarm.id}/next-fires`],
      ['GET', `/v1/alarms/${alarm.id}/wakes`],
    ] as const) {
      const r = await call(h.app, method, url, { headers: operator });
      expect(isProblem(r, 400), `${method} ${url}`).toBe(true);
      expect(r.body.errors[0].path).toBe('X-Chronos-Owner');
    }
  });

  it('q keeps the alarms whose label contains it, in any case, with % and _ as plain characters', async () => {
    await create({ in_seconds: 600, label: 'Water the plants' });
    await create({ in_seconds: 600, label: 'water filter' });
    await create({ in_seconds: 600, label: 'stand-up' });
    await create({ in_seconds: 600, label: '100% done_now' });
    await create({ in_seconds: 600, label: 'WATER (theirs)' }, h.otherAuth);
    const labels = async (query: string, headers = h.auth) =>
      (await call(h.app, 'GET', `/v1/alarms?${query}`, { headers })).body.alarms
        .map((a: { label: string }) => a.label)
        .sort();
    expect(await labels('q=water')).toEqual(['Water the plants', 'water filter']);
    expect(await labels('q=WATER&status=active')).toEqual(['Water the plants', 'water filter']);
    expect(await labels('q=%25')).toEqual(['100% done_now']);
    expect(await labels('q=_')).toEqual(['100% done_now']);
    expect(await labels('q=water', operator)).toEqual(['WATER (theirs)', 'Water the plants', 'water filter']);
    expect(await labels('q=')).toHaveLength(4);
  });

  it('GET /v1/alarms/{id}/next-fires answers the next due instants as MCP’s next_fires shows them', async () => {
    const cron = await create({ cron: '0 9 * * 1-5', timezone: 'Europe/Berlin' });
    const r = await call(h.app, 'GET', `/v1/alarms/${cron.id}/next-fires?count=5`, { headers: h.auth });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body)).toEqual(['next_fires']);
    expect(r.body.next_fires).toHaveLength(5);
    const alarm = await h.service.alarms.get(OWNER, cron.id);
    expect(r.body.next_fires).toEqual(nextFires(alarm, 5));
    for (const fire of r.body.next_fires) {
      expect(fire.utc).toMatch(RFC3339_MS);
      expect(fire.local).toMatch(/T09:00:00(\.000)?\+0[12]:00$/);
    }
    const byDefault = await call(h.app, 'GET', `/v1/alarms/${cron.id}/next-fires`, { headers: h.auth });
    expect(byDefault.body.next_fires).toHaveLength(5);

    const once = await create({ in_seconds: 600 });
    const one = await call(h.app, 'GET', `/v1/alarms/${once.id}/next-fires?count=3`, { headers: h.auth });
    expect(one.body.next_fires).toHaveLength(1);
    await call(h.app, 'POST', `/v1/alarms/${cron.id}/pause`, { headers: h.auth });
    const paused = await call(h.app, 'GET', `/v1/alarms/${cron.id}/next-fires`, { headers: h.auth });
    expect(paused.body.next_fires).toEqual([]);

    const theirs = await call(h.app, 'GET', `/v1/alarms/${cron.id}/next-fires`, { headers: h.otherAuth });
    expect(isProblem(theirs, 404)).toBe(true);
  });

  it('GET /v1/wakes?require_ack=true&status=delivered lists the wakes waiting for an acknowledgement, for every owner to the operator', async () => {
    const waiting = await fire((await create({ in_seconds: 60, label: 'needs ack' })).id);
    await fire((await create({ in_seconds: 60, label: 'no ack', require_ack: false })).id);
    const theirs = await fire((await create({ in_seconds: 60, label: 'theirs' }, h.otherAuth)).id);
    const acked = await fire((await create({ in_seconds: 60, label: 'done' })).id);
    await call(h.app, 'POST', `/v1/wakes/${acked}/ack`, { headers: h.auth, body: { note: 'done' } });

    const own = await call(h.app, 'GET', '/v1/wakes?status=delivered&require_ack=true', { headers: h.auth });
    expect(own.status).toBe(200);
    expect(own.body.wakes.map((w: { id: string }) => w.id)).toEqual([waiting]);
    const all = await call(h.app, 'GET', '/v1/wakes?status=delivered&require_ack=true', {
      headers: operator,
    });
    expect(all.body.wakes.map((w: { id: string }) => w.id)).toEqual([theirs, waiting]);
    expect(all.body.owners).toEqual({ [theirs]: OTHER.did, [waiting]: OWNER.did });
    const noAck = await call(h.app, 'GET', '/v1/wakes?require_ack=false', { headers: h.auth });
    expect(noAck.body.wakes.map((w: { label: string }) => w.label)).toEqual(['no ack']);
  });

  it('GET /v1/stats/lateness answers p50 and p99 per minute of scheduled fires, every minute of the window', async () => {
    const lateMs = [100, 200, 300, 400, 10_000];
    for (const [i, ms] of lateMs.entries()) {
      const wake = await fire((await create({ in_seconds: 60, label: `l${i}` })).id);
      await t.db.query(makeLate, [wake, ms]);
    }
    const theirs = await fire((await create({ in_seconds: 60 }, h.otherAuth)).id);
    await t.db.query(makeLate, [theirs, 50_000]);
    // A manual fire had no due instant to be late for.
    const manual = await create({ in_seconds: 600 });
    await call(h.app, 'POST', `/v1/alarms/${manual.id}/fire`, { headers: h.auth });
    await h.service.dispatcher.runOnce();

    const r = await call(h.app, 'GET', '/v1/stats/lateness?minutes=5', { headers: h.auth });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(['from', 'minutes', 'to']);
    expect(r.body.minutes).toHaveLength(5);
    expect(r.body.minutes[0].minute).toBe(r.body.from);
    const busy = r.body.minutes.filter((m: { fires: number }) => m.fires > 0);
    expect(busy.reduce((n: number, m: { fires: number }) => n + m.fires, 0)).toBe(5);
    for (const m of r.body.minutes) {
      expect(m.minute).toMatch(/:00\.000Z$/);
      if (m.fires === 0) expect(m).toMatchObject({ p50_ms: null, p99_ms: null });
    }
    if (busy.length === 1) {
      expect(busy[0].p50_ms).toBe(300);
      expect(busy[0].p99_ms).toBeGreaterThan(9_000);
      expect(busy[0].p99_ms).toBeLessThanOrEqual(10_000);
    }
    const all = await call(h.app, 'GET', '/v1/stats/lateness', { headers: operator });
    expect(all.body.minutes).toHaveLength(60);
    expect(all.body.minutes.reduce((n: number, m: { fires: number }) => n + m.fires, 0)).toBe(6);
  });

  it('GET /v1/stats/upcoming counts every fire due per minute in the window, cron occurrences included', async () => {
    const cron = await create({ cron: '*/15 * * * *' });
    await create({ in_seconds: 90 });
    await create({ in_seconds: 3 * 3600 });
    await create({ cron: '*/15 * * * *' }, h.otherAuth);
    const r = await call(h.app, 'GET', '/v1/stats/upcoming?hours=2', { headers: h.auth });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(['from', 'minutes', 'to', 'truncated']);
    expect(r.body.minutes).toHaveLength(120);
    expect(new Date(r.body.to).getTime() - new Date(r.body.from).getTime()).toBe(2 * 3_600_000);
    expect(r.body.truncated).toBe(false);
    // The cron alarm's own occurrences in the window (7 or 8, by where in the quarter hour it is).
    const fires = await call(h.app, 'GET', `/v1/alarms/${cron.id}/next-fires?count=50`, { headers: h.auth });
    const cronFires = fires.body.next_fires.filter((f: { utc: string }) => f.utc < r.body.to).length;
    expect(cronFires).toBeGreaterThanOrEqual(7);
    const total = (body: { minutes: { fires: number }[] }) => body.minutes.reduce((n, m) => n + m.fires, 0);
    expect(total(r.body)).toBe(cronFires + 1);
    for (const m of r.body.minutes.filter((m: { fires: number }) => m.fires > 0)) {
      const minute = new Date(m.minute).getUTCMinutes();
      expect(minute % 15 === 0 || m.fires === 1).toBe(true);
    }
    const all = await call(h.app, 'GET', '/v1/stats/upcoming?hours=2', { headers: operator });
    expect(total(all.body)).toBe(2 * cronFires + 1);
  });

  it('bad parameters are a 400 naming the parameter as written, never a 500', async () => {
    const alarm = await create({ in_seconds: 600 });
    const cases: [string, string][] = [
      ['q', `/v1/alarms?q=${'x'.repeat(201)}`],
      ['q', '/v1/alarms?q=a%00b'],
      ['count', `/v1/alarms/${alarm.id}/next-fires?count=0`],
      ['count', `/v1/alarms/${alarm.id}/next-fires?count=51`],
      ['count', `/v1/alarms/${alarm.id}/next-fires?count=two`],
      ['require_ack', '/v1/wakes?require_ack=yes'],
      ['minutes', '/v1/stats/lateness?minutes=0'],
      ['minutes', '/v1/stats/lateness?minutes=1441'],
      ['minutes', '/v1/stats/lateness?minutes=1.5'],
      ['hours', '/v1/stats/upcoming?hours=49'],
      ['hours', '/v1/stats/upcoming?hours=-1'],
      ['bogus', '/v1/stats/upcoming?bogus=1'],
    ];
    for (const [path, url] of cases) {
      for (const headers of [h.auth, operator]) {
        const r = await call(h.app, 'GET', url, { headers });
        if (url.includes('next-fires') && headers === operator) {
          expect(r.body.errors[0].path).toBe('X-Chronos-Owner');
          continue;
        }
        expect(isProblem(r, 400), url).toBe(true);
        expect(r.body.errors.map((e: { path: string }) => e.path)).toEqual([path]);
      }
    }
    const missing = await call(h.app, 'GET', '/v1/alarms/not-a-uuid/next-fires', { headers: h.auth });
    expect(isProblem(missing, 404)).toBe(true);
  });

  it('/openapi.json describes the additions', async () => {
    const doc = (await call(h.app, 'GET', '/openapi.json')).body;
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/v1/alarms/{id}/next-fires', '/v1/stats/lateness', '/v1/stats/upcoming']),
    );
    const listParams = doc.paths['/v1/alarms'].get.parameters.map((p: { name: string }) => p.name);
    expect(listParams).toContain('q');
    const wakeParams = doc.paths['/v1/wakes'].get.parameters.map((p: { name: string }) => p.name);
    expect(wakeParams).toContain('require_ack');
    expect(Object.keys(doc.components.schemas)).toEqual(
      expect.arrayContaining(['Owners', 'NextFires', 'Lateness', 'Upcoming']),
    );
  });
});
