/**
 * `npm run scenarios [-- <file filter>…]`: every scenario in test/scenarios at full size, one
 * file after another, then a summary of their figures. Each full-size run writes its report to
 * test/scenarios/results/<scenario>.json (what docs/reliability.md quotes).
 *
 * The same files run scaled down in `npm test`; `CHRONOS_SCENARIO_SIZE=full` is the only
 * difference. A PostgreSQL at TEST_DATABASE_URL is needed, and for the database-restart
 * scenario the PostgreSQL server binaries (initdb, pg_ctl), found as test/scenarios/support/
 * cluster.ts says.
 */
import { spawn } from 'node:child_process';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Report } from './support/scenario.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RESULTS = fileURLToPath(new URL('./results/', import.meta.url));
const filters = process.argv.slice(2);
const started = Date.now();

const code = await new Promise<number>((resolve) => {
  const child = spawn(
    process.execPath,
    [
      join(ROOT, 'node_modules/vitest/vitest.mjs'),
      'run',
      // One file at a time: full-size scenarios measure lateness, which a neighbour would distort.
      '--no-file-parallelism',
      ...(filters.length > 0 ? filters : ['test/scenarios']),
    ],
    { cwd: ROOT, stdio: 'inherit', env: { ...process.env, CHRONOS_SCENARIO_SIZE: 'full' } },
  );
  child.on('close', (status) => resolve(status ?? 1));
});

// The reports this run wrote, summarised.
const rows: string[] = [];
for (const name of (await readdir(RESULTS).catch(() => [])).filter((f) => f.endsWith('.json')).sort()) {
  const path = join(RESULTS, name);
  if ((await stat(path)).mtimeMs < started) continue;
  const report = JSON.parse(await readFile(path, 'utf8')) as Report;
  const t = report.tally;
  rows.push(
    t
      ? `| ${report.scenario} | ${t.created} | ${t.delivered} | ${t.lost} | ${t.failed} | ${t.duplicated} | ${t.early} / ${t.earlyByDatabase} | ${t.latenessMs.p50} / ${t.latenessMs.p99} / ${t.latenessMs.max} |`
      : `| ${report.scenario} | see ${name} | | | | | | |`,
  );
}
if (rows.length > 0) {
  console.log(
    '\n| scenario | created | delivered | lost | failed | duplicated | early (router / db) | lateness ms p50 / p99 / max |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const row of rows) console.log(row);
  console.log(`\nreports: ${RESULTS}`);
}
process.exit(code);
