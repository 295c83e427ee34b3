/**
 * The dashboard (contract §15) in a real headless Chromium, on PostgreSQL and on the embedded
 * store: sign in, see, pause, fire, acknowledge — each checked through the API as well — and no
 * console errors on the way. Deliveries go to a real webhook receiver; nothing waits on a timer
 * (the dispatcher is run once by the test, the page is waited on by its own elements).
 */
import { existsSync } from 'node:fs';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { describeEachBackend } from '../support/backends.js';
import { backdate, OTHER, OWNER } from '../support/harness.js';
import {
  CHROMIUM,
  launchChromium,
  OPERATOR_TOKEN,
  startDashboardServer,
  type Chromium,
  type DashboardServer,
} from './browser.js';

// A browser shares the CPUs with every other test file: give a case room on a busy machine.
vi.setConfig({ testTimeout: 60_000 });

// CI installs Chromium (.ci/run); a developer without it is told, loudly, that these were skipped.
const withChromium = existsSync(CHROMIUM) || process.env.CI === 'true';
if (!withChromium) {
  describe.skip(`Dashboard in headless Chromium (skipped: no ${CHROMIUM}; apt-get install chromium)`, () => {
    it('needs Chromium', () => {});
  });
  console.warn(`test/ui skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);
}

(withChromium ? describeEachBackend : () => {})('Dashboard in headless Chromium', ({ t }) => {
  let chromium: Chromium;
  let server: DashboardServer;
  let context: BrowserContext;
  let page: Page;
  let key: string;
  let otherKey: string;
  /** Console errors and uncaught exceptions of the page. */
  let errors: string[];

  beforeAll(async () => {
    chromium = await launchChromium();
  });
  afterAll(async () => {
    await chromium?.close();
  });
  beforeEach(async () => {
    server = await startDashboardServer({ db: t.db });
    key = (await server.service.keys.create(OWNER.did, 'dashboard')).key;
    otherKey = (await server.service.keys.create(OTHER.did, 'other')).key;
    // The viewer's zone differs from the alarms' (UTC, Europe/Berlin), as a real viewer's may.
    context = await chromium.browser.newContext({ timezoneId: 'America/New_York' });
    page = await context.newPage();
    errors = [];
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(error.message));
  });
  afterEach(async () => {
    await context?.close();
    await server?.close();
  });

  /** One call to the API, as any client would make it. */
  async function api(method: string, path: string, body?: unknown, as = key, owner?: string) {
    const response = await fetch(server.url + path, {
      method,
      headers: {
        authorization: `Bearer ${as}`,
        ...(owner && { 'x-chronos-owner': owner }),
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  }

  async function signIn(secret = key) {
    await page.goto(`${server.url}/ui`);
    await page.getByLabel('API key or operator token').fill(secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  /** Creates an alarm over HTTP and makes it fire once: the wake is delivered to the sink. */
  async function deliveredWake(label: string): Promise<string> {
    const { body } = await api('POST', '/v1/alarms', { in_seconds: 60, label });
    await backdate(t.db, body.alarm.id, 61_000);
    await server.service.dispatcher.runOnce();
    const wakes = await api('GET', `/v1/alarms/${body.alarm.id}/wakes`);
    expect(wakes.body.wakes[0]?.status).toBe('delivered');
    return wakes.body.wakes[0].id;
  }

  it('an owner signs in with an API key, kept for the tab only, and sees an alarm created over HTTP', async () => {
    const { body } = await api('POST', '/v1/alarms', {
      cron: '0 9 * * 1-5',
      timezone: 'Europe/Berlin',
      label: 'Stand-up',
    });
    await signIn();
    const row = page.locator(`#alarms-table tr[data-id="${body.alarm.id}"]`);
    await row.waitFor();
    const cells = await row.locator('td').allTextContents();
    expect(cells.slice(0, 3)).toEqual(['active', 'Stand-up', 'cron 0 9 * * 1-5']);
    // 09:00 in Berlin; 03:00 (winter) or 04:00 in New York, the viewer's zone.
    expect(cells[3]).toMatch(/09:00:00/);
    expect(cells[4]).toMatch(/0[34]:00:00/);
    expect(await page.evaluate('Object.values(sessionStorage)')).toEqual([key]);
    expect(await page.evaluate('Object.values(localStorage)')).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('an rrule alarm shows its rule in the list and its window, jitter and expiry in the detail; an edit sends the new rule', async () => {
    const rule = 'FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=9;BYMINUTE=0;BYSECOND=0';
    const { status, body } = await api('POST', '/v1/alarms', {
      rrule: rule,
      timezone: 'Europe/Berlin',
      starts_at: '2030-01-01T00:00:00Z',
      ends_at: '2030-12-31T00:00:00Z',
      jitter_seconds: 30,
      expires_after_seconds: 600,
      label: 'Gym',
    });
    expect(status).toBe(201);
    await signIn();
    const row = page.locator(`#alarms-table tr[data-id="${body.alarm.id}"]`);
    await row.waitFor();
    expect((await row.locator('td').allTextContents()).slice(0, 3)).toEqual([
      'active',
      'Gym',
      `rrule ${rule}`,
    ]);

    await page.getByRole('link', { name: 'Gym' }).click();
    const fields = async () => {
      const names = await page.locator('#alarm-fields dt').allTextContents();
      const values = await page.locator('#alarm-fields dd').allTextContents();
      return Object.fromEntries(names.map((name, i) => [name, values[i]]));
    };
    await page.locator('#alarm-fields dt', { hasText: 'Jitter' }).waitFor();
    const shown = await fields();
    expect(shown).toMatchObject({
      Kind: `rrule ${rule}`,
      Jitter: 'up to 30 s late',
      Expires: '600 s after it is due, if not delivered',
    });
    // Midnight UTC is 01:00 in Berlin (the alarm's zone) and 7 PM the day before in New York.
    expect(shown.Starts).toMatch(/2030.*01:00:00 AM.*\(.*2029.*07:00:00 PM/);
    expect(shown.Ends).toMatch(/2030.*01:00:00 AM.*\(.*2030.*07:00:00 PM/);

    // The form holds the rule and the window; a new rule, the jitter emptied and a new expiry go
    // as one PATCH of what changed, with the wire names.
    const form = page.locator('#edit-form');
    expect(await form.locator('[name=kind]').inputValue()).toBe('rrule');
    expect(await form.locator('[name=value]').inputValue()).toBe(rule);
    expect(await form.locator('[name=starts_at]').inputValue()).toBe('2030-01-01T00:00:00.000Z');
    const newRule = 'FREQ=DAILY;BYHOUR=7;BYMINUTE=30;BYSECOND=0';
    await form.locator('[name=value]').fill(newRule);
    await form.locator('[name=jitter_seconds]').fill('');
    await form.locator('[name=expires_after_seconds]').fill('900');
    const patch = page.waitForRequest((r) => r.method() === 'PATCH');
    await page.getByRole('button', { name: 'Save schedule' }).click();
    expect((await patch).postDataJSON()).toEqual({
      rrule: newRule,
      timezone: 'Europe/Berlin',
      jitter_seconds: null,
      expires_after_seconds: 900,
    });
    await page.getByText('Schedule saved').waitFor();
    const saved = (await api('GET', `/v1/alarms/${body.alarm.id}`)).body.alarm;
    expect(saved).toMatchObject({
      kind: 'rrule',
      rrule: newRule,
      starts_at: '2030-01-01T00:00:00.000Z',
      expires_after_seconds: 900,
    });
    expect(saved).not.toHaveProperty('jitter_seconds');
    const after = await fields();
    expect(after).toMatchObject({
      Kind: `rrule ${newRule}`,
      Expires: '900 s after it is due, if not delivered',
    });
    expect(after).not.toHaveProperty('Jitter');
    // The first 07:30 in Berlin on or after the start.
    expect(await page.locator('#next-fires tbody td').nth(2).textContent()).toBe('2030-01-01T06:30:00.000Z');

    // A rule the API refuses is shown in its words, as any refused edit is.
    await form.locator('[name=value]').fill('FREQ=DAILY;BYHOUR=25');
    await page.getByRole('button', { name: 'Save schedule' }).click();
    await page.locator('#error', { hasText: 'BYHOUR=25' }).waitFor();
    expect((await api('GET', `/v1/alarms/${body.alarm.id}`)).body.alarm.rrule).toBe(newRule);
    // The browser logs the refused request itself; nothing else may go wrong.
    expect(errors.filter((e) => !/status of 400/.test(e))).toEqual([]);
  });

  it('the page is served from the package with its content types and a strict CSP', async () => {
    for (const [path, type] of [
      ['/ui', 'text/html'],
      ['/ui/dashboard.js', 'text/javascript'],
      ['/ui/dashboard.css', 'text/css'],
    ]) {
      const response = await fetch(server.url + path);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toContain(type);
      expect(response.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(response.headers.get('content-security-policy')).toContain("script-src 'self'");
    }
    const html = await (await fetch(`${server.url}/ui`)).text();
    expect(html).not.toMatch(/https?:\/\//);
  });

  it('a wrong key is refused, and the page says so (signing in by keyboard alone)', async () => {
    await page.goto(`${server.url}/ui`);
    // The key field has the focus, visibly; typing and Enter sign in.
    await page.locator('#signin-key:focus').waitFor();
    expect(await page.evaluate('getComputedStyle(document.activeElement).outlineStyle')).toBe('solid');
    await page.keyboard.type('chronos_' + 'x'.repeat(43));
    await page.keyboard.press('Enter');
    const refusal = page.locator('#signin-error');
    await refusal.waitFor();
    expect(await refusal.textContent()).toMatch(/refused/);
    expect(await page.locator('#view-alarms').isHidden()).toBe(true);
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    // The browser logs the refused request itself; nothing else may go wrong.
    expect(errors.filter((e) => !/status of 401/.test(e))).toEqual([]);
  });

  it('pausing from the page pauses the alarm: the API reports it paused, and resuming too', async () => {
    const { body } = await api('POST', '/v1/alarms', { in_seconds: 3600, label: 'Tea' });
    await signIn();
    await page.getByRole('link', { name: 'Tea' }).click();
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByText('Paused.').waitFor();
    expect((await api('GET', `/v1/alarms/${body.alarm.id}`)).body.alarm.status).toBe('paused');
    expect(await page.getByRole('button', { name: 'Pause' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByText('Resumed.').waitFor();
    expect((await api('GET', `/v1/alarms/${body.alarm.id}`)).body.alarm.status).toBe('active');
    expect(errors).toEqual([]);
  });

  it('fire now from the page: the router receives the wake, and the page shows it with its attempt', async () => {
    const { body } = await api('POST', '/v1/alarms', { cron: '0 9 * * *', label: 'Report' });
    await signIn();
    await page.getByRole('link', { name: 'Report' }).click();
    await page.getByRole('button', { name: 'Fire now' }).click();
    await page.getByText('Fired now').waitFor();
    await server.service.dispatcher.runOnce();
    expect(server.sink.requests).toHaveLength(1);
    const delivered = JSON.parse(server.sink.requests[0]!.body);
    expect(delivered).toMatchObject({ alarm_id: body.alarm.id, trigger: 'manual' });

    await page.reload();
    const wake = page.locator(`#alarm-wakes tr[data-wake="${delivered.wake_id}"]`);
    await wake.waitFor();
    expect(await wake.locator('td').nth(1).textContent()).toBe('delivered');
    await wake.getByRole('button').click();
    const attempt = page.locator('#alarm-wakes tr.attempts tbody tr');
    await attempt.waitFor();
    expect(await attempt.locator('td').allTextContents()).toEqual([
      '1',
      expect.any(String),
      'delivered',
      '200',
      '—',
      expect.stringMatching(/^\d+ ms$/),
    ]);
    expect(errors).toEqual([]);
  });

  it('a waiting wake is acknowledged from the page with a note', async () => {
    const wakeId = await deliveredWake('Water the plants');
    await signIn();
    await page.getByRole('link', { name: 'Waiting wakes' }).click();
    const row = page.locator(`#wakes-table tr[data-wake="${wakeId}"]`);
    await row.waitFor();
    await row.getByLabel('Note for Water the plants').fill('watered, all of them');
    await row.getByRole('button', { name: 'Acknowledge' }).click();
    await page.getByText('Acknowledged “Water the plants”.').waitFor();
    const { body } = await api('GET', `/v1/wakes/${wakeId}`);
    expect(body.wake).toMatchObject({ status: 'acknowledged', ack_note: 'watered, all of them' });
    expect(errors).toEqual([]);
  });

  it('the operator token shows every owner’s alarms with the owner, filters by owner, and acts for that owner', async () => {
    await api('POST', '/v1/alarms', { in_seconds: 3600, label: 'mine' });
    const theirs = (await api('POST', '/v1/alarms', { in_seconds: 3600, label: 'theirs' }, otherKey)).body;
    await signIn(OPERATOR_TOKEN);
    await page.locator('#alarms-table tbody tr').nth(1).waitFor();
    expect(await page.locator('#alarms-table td.owner').allTextContents()).toEqual([OTHER.did, OWNER.did]);
    expect(await page.locator('#who-text').textContent()).toMatch(/every owner/);

    await page.getByLabel('Owner').fill(OTHER.did);
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByText('Alarms, newest first: 1 shown').waitFor();
    await page.getByRole('link', { name: 'theirs' }).click();
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByText('Paused.').waitFor();
    const seen = await api('GET', `/v1/alarms/${theirs.alarm.id}`, undefined, otherKey);
    expect(seen.body.alarm.status).toBe('paused');
    expect(errors).toEqual([]);
  });

  it('the lateness view charts the last hour and the coming fires', async () => {
    await deliveredWake('late one');
    await api('POST', '/v1/alarms', { cron: '*/10 * * * *', label: 'often' });
    await signIn();
    await page.getByRole('link', { name: 'Lateness' }).click();
    await page.locator('#lateness-chart svg path.p50').waitFor({ state: 'attached' });
    await page.locator('#upcoming-chart svg rect.bar').first().waitFor({ state: 'attached' });
    expect(await page.locator('#lateness-summary').textContent()).toMatch(/^1 scheduled fires/);
    expect(await page.locator('#upcoming-summary').textContent()).toMatch(
      /^3[56] fires due in the next 6 hours\.$/,
    );
    expect(errors).toEqual([]);
  });
});
