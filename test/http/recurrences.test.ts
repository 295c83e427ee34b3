/**
 * Contract §3a and §5 over HTTP: rrule, starts_at, ends_at, jitter_seconds and
 * expires_after_seconds on create, batch and PATCH; the alarm view; `POST /v1/schedules/preview`.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { describeEachBackend } from '../support/backends.js';
import { call, isProblem, openTestApp, type TestApp } from './support.js';

describeEachBackend('HTTP: recurrences, windows, jitter and expiry', ({ t }) => {
  let h: TestApp;
  beforeEach(async () => {
    h = await openTestApp(t.db);
  });
  afterEach(async () => {
    await h.close();
  });

  const create = (body: unknown) => call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body });

  it('creates an rrule alarm and shows every new field, each omitted when not set', async () => {
    const r = await create({
      rrule: 'RRULE:FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0',
      timezone: 'Europe/Paris',
      starts_at: '2030-01-01T00:00:00+01:00',
      ends_at: '2030-12-31T23:59:59+01:00',
      jitter_seconds: 120,
      expires_after_seconds: 3600,
    });
    expect(r.status).toBe(201);
    const alarm = r.body.alarm;
    expect(alarm).toMatchObject({
      kind: 'rrule',
      rrule: 'FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0',
      starts_at: '2029-12-31T23:00:00.000Z',
      ends_at: '2030-12-31T22:59:59.000Z',
      jitter_seconds: 120,
      expires_after_seconds: 3600,
    });
    expect(alarm).not.toHaveProperty('cron_expr');
    // The last Friday of January 2030 is the 25th: 17:00 Paris, plus its jitter.
    const next = Date.parse(alarm.next_fire_at);
    expect(next).toBeGreaterThanOrEqual(Date.parse('2030-01-25T16:00:00Z'));
    expect(next).toBeLessThan(Date.parse('2030-01-25T16:02:00Z'));
    const read = await call(h.app, 'GET', `/v1/alarms/${alarm.id}`, { headers: h.auth });
    expect(read.body.alarm).toEqual(alarm);

    const plain = await create({ in_seconds: 600 });
    for (const key of ['rrule', 'starts_at', 'ends_at', 'jitter_seconds', 'expires_after_seconds']) {
      expect(plain.body.alarm).not.toHaveProperty(key);
    }
  });

  it.each([
    [{ rrule: 'FREQ=DAILY;BYHOUR=25' }, 'rrule', /BYHOUR=25: hours are 0 to 23/],
    [{ rrule: 'FREQ=MONTHLY;BYMONTH=2;BYDAY=5FR' }, 'rrule', /BYDAY=5FR never occurs in February.*-1FR/],
    [{ rrule: 'FREQ=SECONDLY' }, 'rrule', /FREQ is one of MINUTELY HOURLY DAILY WEEKLY MONTHLY YEARLY/],
    [{ rrule: 'FREQ=DAILY', cron: '@daily' }, '', /exactly one of "at", "in_seconds", "cron" or "rrule"/],
    [{ in_seconds: 60, starts_at: '2030-01-01T00:00:00Z' }, 'starts_at', /for "cron" and "rrule" only/],
    [
      { cron: '@daily', starts_at: '2030-01-02T00:00:00Z', ends_at: '2030-01-01T00:00:00Z' },
      'ends_at',
      /after starts_at/,
    ],
    [{ cron: '@daily', ends_at: '2020-01-01T00:00:00Z' }, 'ends_at', /in the future/],
    [{ cron: '@daily', starts_at: '2030-01-01T00:00:00' }, 'starts_at', /offset/],
    [{ cron: '@daily', jitter_seconds: 0 }, 'jitter_seconds', /1 to 3600/],
    [{ cron: '*/5 * * * *', jitter_seconds: 300 }, 'jitter_seconds', /shortest gap/],
    [{ in_seconds: 60, expires_after_seconds: 31_536_001 }, 'expires_after_seconds', /1 to 31536000/],
  ])('refuses %j with a 400 on %s, writing nothing', async (body, path, message) => {
    const r = await create(body);
    expect(r.status).toBe(400);
    expect(isProblem(r, 400)).toBe(true);
    const error = r.body.errors.find((e: { path: string }) => e.path === path);
    expect(error?.message).toMatch(message);
    const list = await call(h.app, 'GET', '/v1/alarms', { headers: h.auth });
    expect(list.body.alarms).toHaveLength(0);
  });

  it('a batch names the item at fault; PATCH changes the window and the rule', async () => {
    const batch = await call(h.app, 'POST', '/v1/alarms/batch', {
      headers: h.auth,
      body: {
        alarms: [{ rrule: 'FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0' }, { rrule: 'FREQ=DAILY;BYMINUTE=61' }],
      },
    });
    expect(batch.status).toBe(400);
    expect(batch.body.errors.map((e: { path: string }) => e.path)).toEqual(['alarms.1.rrule']);

    const { body } = await create({ cron: '0 9 * * *', timezone: 'Europe/Paris' });
    // 2030-03-01 is a Friday: its week's Tuesday is before the start, so the first is two weeks on (RFC 5545).
    const patched = await call(h.app, 'PATCH', `/v1/alarms/${body.alarm.id}`, {
      headers: h.auth,
      body: {
        rrule: 'FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
        starts_at: '2030-03-01T00:00:00+01:00',
      },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.alarm).toMatchObject({
      kind: 'rrule',
      rrule: 'FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
      next_fire_at: '2030-03-12T08:00:00.000Z',
      starts_at: '2030-02-28T23:00:00.000Z',
    });
    expect(patched.body.alarm).not.toHaveProperty('cron_expr');
    const expiry = await call(h.app, 'PATCH', `/v1/alarms/${body.alarm.id}`, {
      headers: h.auth,
      body: { expires_after_seconds: 600 },
    });
    expect(expiry.body.alarm).toMatchObject({
      expires_after_seconds: 600,
      next_fire_at: '2030-03-12T08:00:00.000Z',
    });
  });

  it('PATCH with null clears the window, the jitter and the expiry; a create still refuses null', async () => {
    const { body } = await create({
      rrule: 'FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
      starts_at: '2030-01-10T00:00:00Z',
      ends_at: '2030-12-31T00:00:00Z',
      jitter_seconds: 600,
      expires_after_seconds: 3600,
    });
    const id = body.alarm.id as string;
    const patch = (b: unknown) => call(h.app, 'PATCH', `/v1/alarms/${id}`, { headers: h.auth, body: b });
    const cleared = await patch({ starts_at: null, jitter_seconds: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body.alarm).not.toHaveProperty('starts_at');
    expect(cleared.body.alarm).not.toHaveProperty('jitter_seconds');
    // The rest carries over, and without its jitter the alarm is due on the hour.
    expect(cleared.body.alarm).toMatchObject({
      ends_at: '2030-12-31T00:00:00.000Z',
      expires_after_seconds: 3600,
    });
    expect(cleared.body.alarm.next_fire_at).toMatch(/T09:00:00\.000Z$/);
    expect(Date.parse(cleared.body.alarm.next_fire_at)).toBeLessThan(Date.parse('2030-01-10T00:00:00Z'));

    const all = await patch({ ends_at: null, expires_after_seconds: null });
    expect(all.status).toBe(200);
    for (const key of ['starts_at', 'ends_at', 'jitter_seconds', 'expires_after_seconds']) {
      expect(all.body.alarm).not.toHaveProperty(key);
    }
    const read = await call(h.app, 'GET', `/v1/alarms/${id}`, { headers: h.auth });
    expect(read.body.alarm).toEqual(all.body.alarm);

    const refused = await create({ cron: '@daily', starts_at: null });
    expect(refused.status).toBe(400);
    expect(refused.body.errors.map((e: { path: string }) => e.path)).toEqual(['starts_at']);
    // null is for the clearable fields only.
    const label = await patch({ label: null });
    expect(label.status).toBe(400);
    expect(label.body.errors.map((e: { path: string }) => e.path)).toEqual(['label']);
  });

  it('resuming a paused recurring alarm whose window ended while paused finishes it (fired), not 409', async () => {
    const { body } = await create({
      rrule: 'FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
      ends_at: new Date(Date.now() + 3 * 86_400_000).toISOString(),
    });
    const id = body.alarm.id as string;
    const control = (action: string) =>
      call(h.app, 'POST', `/v1/alarms/${id}/${action}`, { headers: h.auth });
    expect((await control('pause')).body.alarm.status).toBe('paused');
    // Its window ends while it is paused (the row backdated, as if the days had gone by).
    await t.db.query(
      {
        name: 'test_window_ended',
        text: `UPDATE chronos.alarms SET ends_at = now() - interval '1 hour' WHERE id = $1`,
      },
      [id],
    );
    const resumed = await control('resume');
    expect(resumed.status).toBe(200);
    expect(resumed.body.alarm).toMatchObject({ id, status: 'fired' });
    // Final as any fired alarm: resuming again is a 409.
    expect((await control('resume')).status).toBe(409);
  });

  it('POST /v1/schedules/preview shows the next due instants and writes nothing', async () => {
    const r = await call(h.app, 'POST', '/v1/schedules/preview', {
      headers: h.auth,
      body: {
        rrule: 'FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8;BYMINUTE=30;BYSECOND=0',
        timezone: 'America/New_York',
        starts_at: '2030-03-08T00:00:00-05:00',
        ends_at: '2030-03-12T23:00:00-04:00',
        count: 10,
        jitter_seconds: 60,
        expires_after_seconds: 600,
      },
    });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(['fires', 'server_time']);
    // Friday, then Monday and Tuesday after the spring change (fewer than count: the window ends).
    expect(r.body.fires).toEqual([
      { utc: '2030-03-08T13:30:00.000Z', local: '2030-03-08T08:30:00.000-05:00' },
      { utc: '2030-03-11T12:30:00.000Z', local: '2030-03-11T08:30:00.000-04:00' },
      { utc: '2030-03-12T12:30:00.000Z', local: '2030-03-12T08:30:00.000-04:00' },
    ]);
    const defaults = await call(h.app, 'POST', '/v1/schedules/preview', {
      headers: h.auth,
      body: { cron: '@hourly' },
    });
    expect(defaults.body.fires).toHaveLength(5);
    const once = await call(h.app, 'POST', '/v1/schedules/preview', {
      headers: h.auth,
      body: { in_seconds: 60 },
    });
    expect(once.body.fires).toHaveLength(1);

    for (const [body, path] of [
      [{ rrule: 'FREQ=DAILY;BYHOUR=25' }, 'rrule'],
      [{ cron: '@daily', count: 51 }, 'count'],
      [{ cron: '@daily', label: 'x' }, 'label'],
      [{}, ''],
    ] as const) {
      const refused = await call(h.app, 'POST', '/v1/schedules/preview', { headers: h.auth, body });
      expect(refused.status).toBe(400);
      expect(refused.body.errors.map((e: { path: string }) => e.path)).toContain(path);
    }
    const list = await call(h.app, 'GET', '/v1/alarms', { headers: h.auth });
    expect(list.body.alarms).toHaveLength(0);
  });
});
