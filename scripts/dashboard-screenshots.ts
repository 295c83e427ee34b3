/**
 * Screenshots of the dashboard's views for the docs (`npm run screenshots`): a Chronos on a
 * fresh in-memory PGlite with demonstration alarms and fires, shown in headless Chromium
 * (/usr/bin/chromium), written to docs/screenshots/*.png.
 *
 * The demonstration's past (fires spread over the last hour, their lateness) is set up the way
 * the tests set rows up: by moving timestamps back with SQL, as elapsed time would have.
 */
import { PGlite } from '@electric-sql/pglite';
import { mkdirSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { sql } from '../packages/chronos-timers/src/store/driver/db.js';
import { launchChromium, startDashboardServer } from '../test/ui/browser.js';

const OUT = new URL('../docs/screenshots/', import.meta.url);
const OWNER = 'did:matrix:6f1c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10:laptop';

const dueAgo = sql(
  'screenshots_due_ago',
  `UPDATE chronos.alarms SET next_fire_at = now() - $2::int * interval '1 millisecond',
     scheduled_for = now() - $2::int * interval '1 millisecond',
     fire_at = now() - $2::int * interval '1 millisecond' WHERE id = $1`,
);
const firedAgo = sql(
  'screenshots_fired_ago',
  `UPDATE chronos.wakes SET fired_at = fired_at - $2::int * interval '1 second',
     scheduled_for = scheduled_for - $2::int * interval '1 second',
     delivered_at = delivered_at - $2::int * interval '1 second',
     created_at = created_at - $2::int * interval '1 second' WHERE alarm_id = $1`,
);

const server = await startDashboardServer({ pglite: new PGlite() });
const { service } = server;
const { key } = await service.keys.create(OWNER, 'laptop');

async function api(method: string, path: string, body?: unknown) {
  const response = await fetch(server.url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  return (await response.json()) as any;
}

// An hour of heartbeats, three a minute, each a little late (now and then much later).
let seed = 7;
const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
for (let minute = 59; minute >= 0; minute -= 1) {
  const { results } = await api('POST', '/v1/alarms/batch', {
    alarms: [1, 2, 3].map((n) => ({
      in_seconds: 60,
      label: `heartbeat ${60 - minute}.${n}`,
      require_ack: false,
    })),
  });
  for (const { alarm } of results) {
    const slow = minute % 13 === 0 && random() < 0.5;
    await service.db.query(dueAgo, [alarm.id, Math.round(15 + random() ** 2 * (slow ? 2_500 : 250))]);
  }
  await service.dispatcher.runOnce();
  for (const { alarm } of results) await service.db.query(firedAgo, [alarm.id, minute * 60]);
}

const waiting = await api('POST', '/v1/alarms', {
  in_seconds: 60,
  label: 'Water the plants',
  wake_message: 'Water the plants on the balcony; the basil twice.',
  conversation_id: 'home',
});
await service.db.query(dueAgo, [waiting.alarm.id, 120]);
await service.dispatcher.runOnce();
await service.db.query(firedAgo, [waiting.alarm.id, 7 * 60]);

await api('POST', '/v1/alarms', { cron: '*/15 * * * *', label: 'Check the build', require_ack: false });
await api('POST', '/v1/alarms', { in_seconds: 5400, label: 'Call the dentist', conversation_id: 'errands' });
const paused = await api('POST', '/v1/alarms', {
  cron: '0 18 * * 5',
  timezone: 'Europe/London',
  label: 'Weekly review',
});
await api('POST', `/v1/alarms/${paused.alarm.id}/pause`, {});
await api('POST', '/v1/alarms', { cron: '30 7 * * *', timezone: 'Asia/Tokyo', label: 'Tokyo market open' });
const standUp = await api('POST', '/v1/alarms', {
  cron: '0 9 * * 1-5',
  timezone: 'Europe/Berlin',
  label: 'Stand-up',
  wake_message: 'Post yesterday’s progress in #team before the call.',
  conversation_id: 'team',
  payload: { channel: '#team' },
});
await api('POST', `/v1/alarms/${standUp.alarm.id}/fire`, {});
await service.dispatcher.runOnce();

mkdirSync(OUT, { recursive: true });
const chromium = await launchChromium();

async function shoot(page: Page, name: string, fullPage = false) {
  await page.waitForSelector('body[data-ready="yes"]');
  await page.screenshot({ path: new URL(`${name}.png`, OUT).pathname, fullPage });
  console.log(`docs/screenshots/${name}.png`);
}

for (const scheme of ['light', 'dark'] as const) {
  const context = await chromium.browser.newContext({
    viewport: { width: 1280, height: 720 },
    colorScheme: scheme,
    timezoneId: 'America/New_York',
    locale: 'en-US',
  });
  const page = await context.newPage();
  const suffix = scheme === 'dark' ? '-dark' : '';
  await page.goto(`${server.url}/ui`);
  await page.getByLabel('API key or operator token').waitFor();
  if (scheme === 'light') await shoot(page, 'sign-in');
  await page.getByLabel('API key or operator token').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#alarms-table tbody tr').nth(10).waitFor();
  await shoot(page, `alarms${suffix}`);
  if (scheme === 'dark') {
    await context.close();
    break;
  }
  await page.getByRole('link', { name: 'Stand-up' }).click();
  await page.locator('#alarm-wakes tr[data-wake] button').click();
  await page.locator('#alarm-wakes tr.attempts').waitFor();
  await shoot(page, 'alarm', true);
  await page.getByRole('link', { name: 'Waiting wakes' }).click();
  await page.locator('#wakes-table tr[data-wake]').first().waitFor();
  await page.getByLabel('Note for Water the plants').fill('watered, basil twice');
  await shoot(page, 'waiting-wakes');
  await page.getByRole('link', { name: 'Lateness' }).click();
  await page.locator('#upcoming-chart svg').waitFor();
  await shoot(page, 'lateness', true);
  await context.close();
}

await chromium.close();
await server.close();
