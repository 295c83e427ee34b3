/**
 * The worker process of the `rss` workload: one system's worker and nothing else, compiled to
 * JavaScript by `buildRssWorker()` and run on plain `node --expose-gc`. It starts the worker on a
 * database the parent has loaded, idles (`idleMs`), runs the GC twice and records RSS; prints
 * `IDLE`; the parent then writes timers due now and answers `GO` on stdin. From then it samples
 * RSS every 10 ms until they are all handled (or under 1 % are by `stallMs` after `GO`, or
 * `capMs` passes), and prints `REPORT <json>`.
 *
 *   node --expose-gc .tmp/compare-build/bench/peers/rss-worker.js \
 *     '{"system":…,"settings":…,"url":…,"drain":5000,"idleMs":3000,"capMs":60000,"stallMs":8000}'
 */
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { openPeer, type SettingsName, type SystemName } from './peer.js';

const MB = 2 ** 20;
const spec = JSON.parse(process.argv[2] ?? '{}') as {
  system: SystemName;
  settings: SettingsName;
  url: string;
  drain: number;
  idleMs: number;
  capMs: number;
  stallMs: number;
};
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('rss-worker: run with node --expose-gc');

const peer = await openPeer(spec.system, { url: spec.url, settings: spec.settings });
await peer.setup();
let drained = 0;
let firstAt = 0;
let lastAt = 0;
let done: () => void = () => {};
const finished = new Promise<void>((resolve) => (done = resolve));
const worker = await peer.startWorker(() => {
  lastAt = performance.now();
  if (drained++ === 0) firstAt = lastAt;
  if (drained === spec.drain) done();
});
await new Promise((resolve) => setTimeout(resolve, spec.idleMs));
gc();
await new Promise((resolve) => setTimeout(resolve, 100));
gc();
const idle = process.memoryUsage();
let peak = idle.rss;
const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 10);
process.stdout.write('IDLE\n');
const input = createInterface({ input: process.stdin });
await new Promise<void>((resolve) => input.on('line', (line) => line === 'GO' && resolve()));
input.close();
const cap = new Promise<void>((resolve) => setTimeout(resolve, spec.capMs).unref());
const stalled = new Promise<void>((resolve) =>
  setTimeout(() => drained < spec.drain / 100 && resolve(), spec.stallMs).unref(),
);
await Promise.race([finished, cap, stalled]);
clearInterval(sampler);
peak = Math.max(peak, process.memoryUsage.rss());
await worker.stop();
await peer.close();
process.stdout.write(
  `REPORT ${JSON.stringify({
    idleRssMB: idle.rss / MB,
    idleHeapUsedMB: idle.heapUsed / MB,
    drainPeakRssMB: peak / MB,
    drained,
    drainMs: lastAt - firstAt,
  })}\n`,
);
process.exit(0);
