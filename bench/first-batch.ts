/**
 * A fresh process's first large batch: what `bench/compare.ts`'s "schedule 5,000 in one
 * transaction" measures, alone, with where its time goes. Each run is a new Node process that
 * opens Chronos on a database of its own (created and migrated by the parent), writes a warm-up of
 * 100 timers in one transaction, then `--count` timers in another (BEGIN, scheduleMany, COMMIT),
 * timed from BEGIN to the commit, with this process's CPU and the PostgreSQL backend's CPU (from
 * `/proc`, in 10 ms ticks) over the same span. With `--rounds=N` the child writes N - 1 more
 * batches of the same size afterwards, each timed: the same batch once the code is compiled.
 *
 * The figures are the median and the spread over `--runs` processes. For an A/B of two commits,
 * run it in a worktree of each, in turn (bench/README.md, "Bulk scheduling").
 *
 *   npx tsx bench/first-batch.ts [--count=5000] [--runs=7] [--rounds=1] [--profile=file.cpuprofile]
 *
 * `--profile` writes the V8 CPU profile of the first run's timed batch (sampled every 50 µs).
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createChronos } from '../packages/chronos-timers/src/index.js';
import { createPostgres, log, numberArg } from './support.js';

interface Measured {
  ms: number;
  cpuMs: number;
  postgresCpuMs: number;
  warmRoundsMs: number[];
}

const COUNT = numberArg('count', 5_000);
const RUNS = numberArg('runs', 7);
const ROUNDS = numberArg('rounds', 1);
const childArg = process.argv.find((a) => a.startsWith('--child='));

if (childArg) {
  const { url, profile } = JSON.parse(childArg.slice('--child='.length)) as {
    url: string;
    profile: string | null;
  };
  process.stdout.write(`${JSON.stringify(await child(url, profile))}\n`);
} else {
  await parent();
}

async function parent(): Promise<void> {
  const profileArg = process.argv.find((a) => a.startsWith('--profile='))?.slice('--profile='.length) ?? null;
  log(`first batch: ${COUNT} timers in a fresh process, ${RUNS} runs, ${ROUNDS} rounds each`);
  const runs: Measured[] = [];
  for (let run = 0; run < RUNS; run++) {
    const bench = await createPostgres('first_batch');
    try {
      const profile = run === 0 ? profileArg : null;
      const measured = await spawnChild(bench.url!, profile);
      runs.push(measured);
      const warm = measured.warmRoundsMs.length
        ? `; later rounds ${measured.warmRoundsMs.join(', ')} ms`
        : '';
      log(
        `run ${run + 1}: ${measured.ms} ms → ${perSecond(measured.ms)}/s; CPU: this process ${measured.cpuMs} ms, PostgreSQL ${measured.postgresCpuMs} ms${warm}`,
      );
    } finally {
      await bench.drop();
    }
  }
  const median = (pick: (m: Measured) => number) => {
    const sorted = runs.map(pick).sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)]!;
  };
  const all = runs.map((m) => m.ms).sort((a, b) => a - b);
  log(
    `median ${median((m) => m.ms)} ms → ${perSecond(median((m) => m.ms))}/s (${all[0]}–${all[all.length - 1]} ms); ` +
      `CPU: this process ${median((m) => m.cpuMs)} ms, PostgreSQL ${median((m) => m.postgresCpuMs)} ms`,
  );
}

function perSecond(ms: number): string {
  return Math.round((COUNT * 1000) / ms).toLocaleString('en');
}

function spawnChild(url: string, profile: string | null): Promise<Measured> {
  const self = fileURLToPath(import.meta.url);
  const args = [
    '--import',
    'tsx',
    self,
    `--child=${JSON.stringify({ url, profile })}`,
    ...process.argv.slice(2),
  ];
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    proc.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    proc.on('error', reject);
    proc.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`first-batch child exited with ${code}`));
      resolve(JSON.parse(out.trim().split('\n').pop()!) as Measured);
    });
  });
}

async function child(url: string, profile: string | null): Promise<Measured> {
  const chronos = await createChronos({ databaseUrl: url });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const base = Date.now() + 3_600_000;
    const batch = (n: number, prefix: string) =>
      Array.from({ length: n }, (_, i) => ({ key: `${prefix}${i}`, dueAtMs: base + i }));
    // As bench/peers/chronos.ts does: the specs are made from the timers inside the timed span.
    const write = async (timers: { key: string; dueAtMs: number }[]) => {
      await client.query('BEGIN');
      await chronos.scheduleMany(
        client,
        timers.map((t) => ({ key: t.key, at: new Date(t.dueAtMs) })),
      );
      await client.query('COMMIT');
    };
    await write(batch(100, 'warm-'));
    const timers = batch(COUNT, 'batch-');
    const [{ pid }] = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [
      { pid: number },
    ];
    const session = profile ? await startProfile() : null;
    const pg0 = backendCpuMs(pid);
    const cpu0 = process.cpuUsage();
    const started = performance.now();
    await write(timers);
    const ms = performance.now() - started;
    const cpu = process.cpuUsage(cpu0);
    const postgresCpuMs = backendCpuMs(pid) - pg0;
    if (session) {
      const { profile: taken } = await session.post('Profiler.stop');
      writeFileSync(profile!, JSON.stringify(taken));
      session.disconnect();
    }
    const warmRoundsMs: number[] = [];
    for (let round = 1; round < ROUNDS; round++) {
      const more = batch(COUNT, `round-${round}-`);
      const at = performance.now();
      await write(more);
      warmRoundsMs.push(Math.round(performance.now() - at));
    }
    return {
      ms: Math.round(ms * 10) / 10,
      cpuMs: Math.round((cpu.user + cpu.system) / 100) / 10,
      postgresCpuMs,
      warmRoundsMs,
    };
  } finally {
    await client.end();
    await chronos.close();
  }
}

async function startProfile(): Promise<Session> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 50 });
  await session.post('Profiler.start');
  return session;
}

/** A backend's CPU so far (user + system), in ms, from /proc (10 ms ticks). */
function backendCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}
