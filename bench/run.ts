/**
 * Runs the core benchmarks, each in its own process (so one's heap and timers cannot colour
 * another's), one after the other. Raw results land in `bench/results/`; `bench/README.md` says
 * what they mean.
 *
 *   npm run bench                          all four, on PostgreSQL and PGlite
 *   npm run bench -- drain lateness        only these
 *   npm run bench -- --backend=postgres    options are passed to every benchmark
 *   npm run bench -- --quiet=30            before each measurement, wait (up to a minute) until the
 *                                          machine's CPU pressure is under 30 %
 *   npm run bench -- compare --size=small  Chronos against pg-boss and graphile-worker (bench/compare.ts,
 *                                          its options passed through); not part of the default set
 *   npm run bench -- embedded-start        `chronos serve` on a new and a reopened embedded store: time
 *                                          to ready, peak and steady RSS (bench/embedded-start.ts); on
 *                                          request only
 *
 * PostgreSQL is `BENCH_DATABASE_URL` (default postgres://root@127.0.0.1:5432/postgres); each
 * benchmark creates and drops its own `chronos_bench_*` database there.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { log } from './support.js';

const BENCHMARKS = ['claim-depth', 'drain', 'lateness', 'memory'] as const;
/** Run only when named. */
const ON_REQUEST = ['compare', 'embedded-start'] as const;

const args = process.argv.slice(2);
const names = args.filter((a) => !a.startsWith('--'));
const options = args.filter((a) => a.startsWith('--'));

for (const name of names) {
  if (![...BENCHMARKS, ...ON_REQUEST].includes(name as never)) {
    console.error(
      `bench: expected one of ${[...BENCHMARKS, ...ON_REQUEST].join(', ')}, got ${JSON.stringify(name)}`,
    );
    process.exit(2);
  }
}

function run(name: string): Promise<number> {
  const script = fileURLToPath(new URL(`./${name}.ts`, import.meta.url));
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...options], { stdio: 'inherit' });
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

let failed = 0;
for (const name of names.length > 0 ? names : BENCHMARKS) {
  log(`== ${name} ${options.join(' ')}`);
  const code = await run(name);
  if (code !== 0) {
    failed++;
    log(`== ${name} failed (exit ${code})`);
  }
}
process.exit(failed > 0 ? 1 : 0);
