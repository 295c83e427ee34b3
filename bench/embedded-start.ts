/**
 * Embedded store start (issue 18): `chronos serve` on the embedded store (no DATABASE_URL), as a
 * process of its own, first on a directory that does not exist yet and then again on the same
 * directory (a restart). Targets: ready in ≤ 1.5 s with ≤ 300 MB peak RSS, and ≤ 200 MB RSS in
 * steady state.
 *
 * Ready is the server's `chronos is serving on …` log line (the store is open and migrated, the
 * loops run, the port listens), timed from the spawn. RSS is read from `/proc/<pid>/status`:
 * `VmHWM` (the peak) when ready and again at the end, `VmRSS` every second while the server
 * idles `--steady` seconds with its dispatcher and tracker running; steady RSS is the last one.
 *
 * Each checkout given is measured in turn within every run (interleaved, so the machine's load
 * falls on each alike), and every run records the CPU pressure it started under:
 *
 *   npx tsx bench/embedded-start.ts [--runs=5] [--steady=20] [--quiet=30]
 *     [--entry=source|built]       source: the server's `bin/chronos.js`, as `npm start` runs it
 *                                   in a checkout (dist/ while current, else the sources through
 *                                   tsx); built: its `dist/cli/main.js` (as installed; needs
 *                                   `npm run build`)
 *     [--compare=<checkout>]       also measure another checkout (e.g. the code before a change,
 *                                   `git archive <commit> | tar -x -C <dir>`, node_modules linked)
 *     [--name=embedded-start]      the results file: bench/results/<name>.json
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { log, numberArg, processCpuMs, sleep, waitForQuiet, writeResult, type Load } from './support.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const option = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

interface Start {
  load: Load;
  /** Spawn to the `chronos is serving on` line. */
  readyMs: number;
  /** CPU (user + system) the process had used when ready: steadier than wall time on a busy machine. */
  cpuMsAtReady: number;
  /** VmHWM when ready. */
  peakAtReadyMB: number;
  /** VmHWM at the end of the idle period: the peak over the process's life. */
  peakMB: number;
  /** VmRSS after the idle period. */
  steadyMB: number;
  /** VmRSS at each second after ready. */
  rssBySecondMB: number[];
}

function status(pid: number): { rssMB: number; hwmMB: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(text)?.[1] ?? Number.NaN);
    return { rssMB: round(kb('VmRSS') / 1024), hwmMB: round(kb('VmHWM') / 1024) };
  } catch {
    return null;
  }
}

function round(x: number): number {
  return Math.round(x * 10) / 10;
}

/** Starts `chronos serve` from `checkout` on `dataDir`, waits for ready, idles, stops it. */
async function start(checkout: string, dataDir: string, entry: string, steadyS: number): Promise<Start> {
  const load = await waitForQuiet();
  const server = join(checkout, 'packages/chronos-timers-server');
  const script = entry === 'built' ? join(server, 'dist/cli/main.js') : join(server, 'bin/chronos.js');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    CHRONOS_DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
  };
  delete env.DATABASE_URL;
  const began = performance.now();
  const child = spawn(process.execPath, [script, 'serve'], {
    cwd: checkout,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  let out = '';
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const readyMs = await new Promise<number>((done, fail) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('chronos is serving on')) done(performance.now() - began);
    });
    void exited.then((code) => fail(new Error(`chronos serve exited (${code}) before ready:\n${out}`)));
  });
  const peakAtReadyMB = status(child.pid!)?.hwmMB ?? Number.NaN;
  const cpuMsAtReady = processCpuMs(child.pid!) ?? Number.NaN;
  const rssBySecondMB: number[] = [];
  for (let s = 0; s < steadyS; s++) {
    await sleep(1_000);
    rssBySecondMB.push(status(child.pid!)?.rssMB ?? Number.NaN);
  }
  const end = status(child.pid!);
  child.kill('SIGTERM');
  const code = await exited;
  if (code !== 0) throw new Error(`chronos serve exited with ${code} after SIGTERM:\n${out}`);
  return {
    load,
    readyMs: Math.round(readyMs),
    cpuMsAtReady,
    peakAtReadyMB,
    peakMB: end?.hwmMB ?? Number.NaN,
    steadyMB: end?.rssMB ?? Number.NaN,
    rssBySecondMB,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : round((sorted[mid - 1]! + sorted[mid]!) / 2);
}

function summary(starts: Start[]) {
  return {
    readyMs: median(starts.map((s) => s.readyMs)),
    cpuMsAtReady: median(starts.map((s) => s.cpuMsAtReady)),
    peakAtReadyMB: median(starts.map((s) => s.peakAtReadyMB)),
    peakMB: median(starts.map((s) => s.peakMB)),
    steadyMB: median(starts.map((s) => s.steadyMB)),
    cpuPressureAvg10: starts.map((s) => s.load.cpuPressureAvg10),
  };
}

const runs = numberArg('runs', 5);
const steadyS = numberArg('steady', 20);
const entry = option('entry') ?? 'source';
if (entry !== 'source' && entry !== 'built') {
  console.error(`--entry: expected source or built, got ${JSON.stringify(entry)}`);
  process.exit(2);
}
const checkouts = [ROOT, ...args.filter((a) => a.startsWith('--compare=')).map((a) => resolve(a.slice(10)))];
const results = new Map<string, { fresh: Start[]; restart: Start[] }>(
  checkouts.map((c) => [c, { fresh: [], restart: [] }]),
);

for (let run = 1; run <= runs; run++) {
  for (const checkout of checkouts) {
    const dir = await mkdtemp(join(tmpdir(), 'chronos-embedded-start-'));
    const dataDir = join(dir, 'store');
    try {
      const fresh = await start(checkout, dataDir, entry, steadyS);
      const restart = await start(checkout, dataDir, entry, steadyS);
      results.get(checkout)!.fresh.push(fresh);
      results.get(checkout)!.restart.push(restart);
      for (const [kind, s] of [
        ['fresh', fresh],
        ['restart', restart],
      ] as const) {
        log(
          `run ${run} ${checkout === ROOT ? 'this checkout' : checkout} ${kind}: ready ${s.readyMs} ms (CPU ${s.cpuMsAtReady} ms), ` +
            `peak ${s.peakAtReadyMB} MB at ready, ${s.peakMB} MB over ${steadyS} s, steady ${s.steadyMB} MB ` +
            `(CPU pressure ${s.load.cpuPressureAvg10} %)`,
        );
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}

const report = {
  targets: { readyMs: 1500, peakMB: 300, steadyMB: 200 },
  entry,
  runs,
  steadySeconds: steadyS,
  checkouts: checkouts.map((checkout) => {
    const r = results.get(checkout)!;
    return {
      checkout: checkout === ROOT ? 'this checkout' : checkout,
      fresh: summary(r.fresh),
      restart: summary(r.restart),
      starts: r,
    };
  }),
};
for (const c of report.checkouts) {
  log(
    `${c.checkout}: fresh ready ${c.fresh.readyMs} ms (CPU ${c.fresh.cpuMsAtReady} ms), peak ${c.fresh.peakMB} MB, ` +
      `steady ${c.fresh.steadyMB} MB; restart ready ${c.restart.readyMs} ms (CPU ${c.restart.cpuMsAtReady} ms), ` +
      `peak ${c.restart.peakMB} MB, steady ${c.restart.steadyMB} MB (medians of ${runs})`,
  );
}
const path = await writeResult(option('name') ?? 'embedded-start', report);
log(`wrote ${path}`);
