/**
 * The dashboard's weight and speed (issue 17): the bytes of the page (HTML, CSS, JS; raw and
 * gzipped), and in a real headless Chromium the time from "Sign in" to the first 200 alarms
 * shown, and to 1,000 alarms shown (the first page and four "Show more", 200 a page: the API's
 * largest). The owner has 1,000 alarms, created over HTTP in one batch.
 *
 *   npx tsx bench/dashboard.ts                      # PGlite, then PostgreSQL
 *   npx tsx bench/dashboard.ts --backend=pglite --runs=5
 *
 * Results: bench/results/dashboard-<backend>.json.
 */
import { writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import type { BackendKind } from '../packages/chronos-timers/src/store/driver/db.js';
import { launchChromium, startDashboardServer } from '../test/ui/browser.js';
import { createBench, machineLoad, RESULTS_DIR, summarize } from './support.js';

const argv = process.argv.slice(2);
const option = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const backends = (option('backend')?.split(',') ?? ['pglite', 'postgres']) as BackendKind[];
const runs = Number(option('runs') ?? 5);
const OWNER = 'did:matrix:6f1c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10:bench';
const ROWS = '#alarms-table tbody tr';

for (const kind of backends) {
  const bench = await createBench(kind, 'dashboard');
  const server = await startDashboardServer({ db: bench.db });
  const chromium = await launchChromium();
  try {
    const { key } = await server.service.keys.create(OWNER, 'bench');
    const zones = ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Tokyo'];
    const alarms = Array.from({ length: 1_000 }, (_, i) =>
      i % 3 === 0
        ? { cron: `${i % 60} ${i % 24} * * *`, timezone: zones[i % 4], label: `daily ${i}` }
        : { in_seconds: 3_600 + i, timezone: zones[i % 4], label: `once ${i}` },
    );
    const created = await fetch(`${server.url}/v1/alarms/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ alarms }),
    });
    if (created.status !== 201) throw new Error(`batch: ${created.status} ${await created.text()}`);

    const weight: Record<string, { bytes: number; gzip: number }> = {};
    for (const path of ['/ui', '/ui/dashboard.css', '/ui/dashboard.js']) {
      const body = Buffer.from(await (await fetch(server.url + path)).arrayBuffer());
      weight[path] = { bytes: body.length, gzip: gzipSync(body).length };
    }
    const total = Object.values(weight).reduce(
      (sum, w) => ({ bytes: sum.bytes + w.bytes, gzip: sum.gzip + w.gzip }),
      { bytes: 0, gzip: 0 },
    );

    const first: number[] = [];
    const thousand: number[] = [];
    const inPageFirst: number[] = [];
    const inPageThousand: number[] = [];
    for (let run = 0; run < runs; run++) {
      const context = await chromium.browser.newContext({ viewport: { width: 1280, height: 860 } });
      const page = await context.newPage();
      await page.goto(`${server.url}/ui`);
      await page.getByLabel('API key or operator token').fill(key);
      const start = performance.now();
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.locator(ROWS).nth(199).waitFor();
      first.push(performance.now() - start);
      for (let shown = 400; shown <= 1_000; shown += 200) {
        await page.getByRole('button', { name: 'Show more' }).click();
        await page
          .locator(ROWS)
          .nth(shown - 1)
          .waitFor();
      }
      thousand.push(performance.now() - start);
      if ((await page.locator(ROWS).count()) !== 1_000) throw new Error('not 1,000 rows');
      // The page's own User Timing: the sign-in probe, then each page's request and rendering.
      const measures = (await page.evaluate(
        "performance.getEntriesByType('measure').map((m) => [m.name, m.duration])",
      )) as [string, number][];
      const pages = measures.filter(([name]) => name === 'chronos:alarms-page').map(([, ms]) => ms);
      const signIn = measures.find(([name]) => name === 'chronos:sign-in')?.[1] ?? 0;
      inPageFirst.push(signIn + pages[0]!);
      inPageThousand.push(signIn + pages.reduce((a, b) => a + b, 0));
      await context.close();
    }
    const result = {
      benchmark: 'dashboard',
      backend: kind,
      at: new Date().toISOString(),
      command: `npx tsx bench/dashboard.ts --backend=${kind} --runs=${runs}`,
      load: machineLoad(),
      weight,
      total,
      note:
        'firstPageMs/thousandMs: from the Sign in click to the rows present, as the driver sees it (Playwright polls, ' +
        'and clicks "Show more" four times); inPage*: the page\'s own User Timing (sign-in probe + each page requested ' +
        'and rendered), without the driver.',
      firstPageMs: summarize(first),
      thousandMs: summarize(thousand),
      inPageFirstPageMs: summarize(inPageFirst),
      inPageThousandMs: summarize(inPageThousand),
      runs: { first, thousand, inPageFirst, inPageThousand },
    };
    writeFileSync(`${RESULTS_DIR}dashboard-${kind}.json`, JSON.stringify(result, null, 2) + '\n');
    console.log(
      `${kind}: page ${total.bytes} B (${total.gzip} B gzipped); sign in → 200 alarms p50 ` +
        `${result.firstPageMs.p50.toFixed(0)} ms; → 1,000 alarms p50 ${result.thousandMs.p50.toFixed(0)} ms ` +
        `(${runs} runs; max ${result.thousandMs.max.toFixed(0)} ms); in the page itself: 200 in ` +
        `${result.inPageFirstPageMs.p50.toFixed(0)} ms, 1,000 in ${result.inPageThousandMs.p50.toFixed(0)} ms`,
    );
  } finally {
    await chromium.close();
    await server.close();
    await bench.drop();
  }
}
