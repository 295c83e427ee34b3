/**
 * Chronos head to head with pg-boss and graphile-worker (issue 18): the same workloads through
 * each system's own API (`bench/peers/`), interleaved, and one table of ratios.
 *
 * Every measurement is its own process on a fresh database of its own (`chronos_bench_cmp_*`,
 * dropped afterwards, also on Ctrl-C). Runs are interleaved: in each run, each workload is
 * measured on every system back to back, in an order that rotates from run to run and from
 * workload to workload, so drift in the machine's load falls on all systems alike; only ratios
 * from the same run say where Chronos stands. The table shows each system's median over the runs
 * (min–max), and Chronos against each peer at the same settings.
 *
 *   npm run bench -- compare [options]           (the same as npx tsx bench/compare.ts [options])
 *   --size=full|small        full: the issue's sizes (default); small: a quick check in about two
 *                            minutes (smaller counts, one run, the fastest settings unless told)
 *   --runs=3                 interleaved runs (default 3 at full size, 1 at small)
 *   --workloads=drain5k,…    any of drain5k drain50k bulk5k bulk50k pertx16 lateness-bulk
 *                            lateness-live claim rss (default all)
 *   --settings=both          defaults, fastest or both (default both; fastest at --size=small)
 *   --systems=…              a subset of chronos, graphile-worker, pg-boss (default all three)
 *   --quiet=<percent>        before each measurement wait (up to a minute) for CPU pressure under it
 *
 * `BENCH_CHRONOS_CLAIM=transaction` in the environment runs Chronos's fastest workers with claims
 * held in a transaction (`work({ claim: 'transaction' })`) instead of leased.
 *
 * Raw results: `bench/results/compare-<date>.json` (machine, command, the load before every
 * measurement, every run's figures and what each adapter called) and the table as
 * `compare-<date>.md`; `--size=small` writes `compare-small.json` and `.md` instead, overwritten
 * each time. `docs/comparison.md` explains the figures.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import {
  ADMIN_URL,
  createEmptyPostgres,
  describeMachine,
  log,
  machineLoad,
  numberArg,
  percentile,
  waitForQuiet,
  writeResult,
  writeText,
  type Load,
} from './support.js';
import {
  openPeer,
  SETTINGS,
  SYSTEMS,
  type PeerDescription,
  type SettingsName,
  type SystemName,
} from './peers/peer.js';
import {
  buildRssWorker,
  runWorkload,
  SETTINGS_FREE,
  SIZES,
  WORKLOADS,
  type Figure,
  type SizeName,
  type WorkloadName,
} from './peers/workloads.js';

interface Job {
  run: number;
  workload: WorkloadName;
  system: SystemName;
  /** `defaults` or `fastest`; a settings-free workload runs once, at the defaults. */
  settings: SettingsName;
  size: SizeName;
}

interface ChildResult {
  figures: Figure[];
  detail: Record<string, unknown>;
  description: PeerDescription;
  scheduleManyPath?: string;
  loadAtStart: Load;
}

interface Measurement extends Job {
  loadBefore: Load;
  ok: boolean;
  error?: string;
  result?: ChildResult;
  seconds: number;
}

const NAMES: Record<SystemName, string> = {
  chronos: 'Chronos',
  'graphile-worker': 'graphile-worker',
  'pg-boss': 'pg-boss',
};

// ---------------------------------------------------------------------------------------------
// Child: one workload on one system, on a fresh database.

async function child(job: Job): Promise<void> {
  const loadAtStart = machineLoad();
  const bench = await createEmptyPostgres(`cmp_${job.system.replace(/[^a-z]/g, '')}`);
  // The parent drops it too if this process dies before it does.
  process.stdout.write(`DATABASE ${new URL(bench.url!).pathname.slice(1)}\n`);
  try {
    const peer = await openPeer(job.system, { url: bench.url!, settings: job.settings });
    try {
      await peer.setup();
      const output = await runWorkload(
        { peer, url: bench.url!, sizes: SIZES[job.size], system: job.system, settings: job.settings },
        job.workload,
      );
      const path = (peer as { scheduleManyPath?: string }).scheduleManyPath;
      const result: ChildResult = {
        ...output,
        description: peer.description,
        ...(path ? { scheduleManyPath: path } : {}),
        loadAtStart,
      };
      process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
    } finally {
      await peer.close();
    }
  } finally {
    // DROP … WITH (FORCE) ends any connection a library still holds; its pool may then report the
    // termination (57P01) as an 'error' nobody listens to. That is the drop working, not a failure.
    process.on('uncaughtException', (error: Error & { code?: string }) => {
      if (error.code === '57P01') return;
      console.error(error);
      process.exit(1);
    });
    await bench.drop();
  }
}

function runChild(job: Job): Promise<ChildResult> {
  const self = fileURLToPath(import.meta.url);
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', self, `--child=${JSON.stringify(job)}`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let result: ChildResult | null = null;
    let database: string | null = null;
    createInterface({ input: proc.stdout }).on('line', (line) => {
      if (line.startsWith('RESULT ')) result = JSON.parse(line.slice('RESULT '.length)) as ChildResult;
      else if (line.startsWith('DATABASE ')) database = line.slice('DATABASE '.length);
      else process.stderr.write(`${line}\n`);
    });
    proc.on('error', reject);
    proc.on('exit', (code, signal) => {
      const settle = () => {
        if (result) {
          // Measured and reported; a failure while tearing down does not undo the figures.
          if (code !== 0)
            log(`    (${job.system} ${job.workload} exited with ${signal ?? code} after reporting)`);
          resolve(result);
        } else reject(new Error(`${job.system} ${job.workload}: exited with ${signal ?? code}`));
      };
      if (database) void dropIfLeft(database).then(settle, settle);
      else settle();
    });
  });
}

/** Drops a child's database if the child died before dropping it. */
async function dropIfLeft(name: string): Promise<void> {
  if (!/^chronos_bench_cmp_[a-z0-9_]+$/.test(name)) return;
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------
// The table

interface Cell {
  median: number;
  min: number;
  max: number;
  runs: number;
  figure: Figure;
  atLeast: boolean;
  capped: string[];
  extra: Record<string, number>;
}

function cellOf(figures: Figure[]): Cell | null {
  if (figures.length === 0) return null;
  const values = figures.map((f) => f.value);
  const median = percentile(values, 50);
  const extra: Record<string, number> = {};
  for (const name of Object.keys(figures[0]!.extra ?? {})) {
    const xs = figures.map((f) => f.extra?.[name] ?? Number.NaN);
    // Early fires are counted over all runs; other extras are medians.
    extra[name] = name === 'early' ? xs.reduce((a, b) => a + b, 0) : percentile(xs, 50);
  }
  return {
    median,
    min: Math.min(...values),
    max: Math.max(...values),
    runs: figures.length,
    figure: figures[0]!,
    atLeast: figures.some((f) => f.atLeast && f.value <= median),
    capped: figures.flatMap((f) => (f.capped ? [f.capped] : [])),
    extra,
  };
}

function num(x: number, unit: Figure['unit']): string {
  if (!Number.isFinite(x)) return '–';
  if (unit === 'MB') return x.toFixed(1);
  if (Number.isInteger(x) || x >= 100) return Math.round(x).toLocaleString('en');
  if (x >= 10) return x.toFixed(1);
  return x < 1 ? x.toFixed(3) : x.toFixed(2);
}

function formatCell(cell: Cell | null): string {
  if (!cell) return '';
  const { unit } = cell.figure;
  const suffix = unit === '/s' ? '/s' : ` ${unit}`;
  let text = `${cell.atLeast ? '≥ ' : ''}${num(cell.median, unit)}${suffix}`;
  if (cell.runs > 1) text += ` (${num(cell.min, unit)}–${num(cell.max, unit)})`;
  if ('p50' in cell.extra) text += `; p50 ${num(cell.extra.p50!, 'ms')}`;
  if ('early' in cell.extra) text += `; early ${cell.extra.early}`;
  if (cell.capped.length > 0) text += ' †';
  return text;
}

const WORDS: Record<string, [string, string]> = {
  '/s': ['faster', 'slower'],
  ms: ['faster', 'slower'],
  lateness: ['less late', 'later'],
  MB: ['smaller', 'larger'],
};

/** Chronos against a peer, as "N× faster" or "N× slower" (lower-is-better metrics inverted). */
function ratio(chronos: Cell | null, peer: Cell | null): string {
  if (!chronos || !peer) return '';
  const f = chronos.figure;
  const [better, worse] = WORDS[f.metric.startsWith('lateness') ? 'lateness' : f.unit]!;
  const r = f.better === 'higher' ? chronos.median / peer.median : peer.median / chronos.median;
  if (!Number.isFinite(r) || r === 0) return '–';
  // A lower bound on the peer's lateness makes Chronos's lead a lower bound too.
  const bound = peer.atLeast && !chronos.atLeast ? '≥ ' : chronos.atLeast && !peer.atLeast ? '≤ ' : '';
  const shown = r >= 1 ? r : 1 / r;
  const digits = shown >= 100 ? 0 : shown >= 10 ? 1 : 2;
  const text = shown.toLocaleString('en', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  return `${bound}${text}× ${r >= 1 ? better : worse}`;
}

const ROW_ORDER = [
  'drain5k',
  'drain50k',
  'bulk5k',
  'bulk50k',
  'pertx16',
  'lateness-bulk',
  'lateness-live',
  'claim',
  'rss-idle',
  'rss-drain',
];

interface Row {
  metric: string;
  label: string;
  settings: SettingsName | 'any';
  cells: Partial<Record<SystemName, Cell | null>>;
  /** Median CPU pressure (PSI some avg10, %) before this row's measurements. */
  pressure: number;
}

function buildRows(measurements: Measurement[], systems: readonly SystemName[]): Row[] {
  const rows = new Map<string, Row>();
  for (const m of measurements) {
    if (!m.ok || !m.result) continue;
    const settings = SETTINGS_FREE.includes(m.workload) ? 'any' : m.settings;
    for (const f of m.result.figures) {
      const id = `${f.metric}|${settings}`;
      if (!rows.has(id))
        rows.set(id, { metric: f.metric, label: f.label, settings, cells: {}, pressure: NaN });
    }
  }
  for (const row of rows.values()) {
    for (const system of systems) {
      const figures = measurements.flatMap((m) =>
        m.ok && m.system === system && (row.settings === 'any' || m.settings === row.settings)
          ? (m.result?.figures ?? []).filter(
              (f) =>
                f.metric === row.metric && (row.settings !== 'any' || SETTINGS_FREE.includes(m.workload)),
            )
          : [],
      );
      row.cells[system] = cellOf(figures);
    }
    const pressures = measurements
      .filter(
        (m) =>
          m.ok &&
          (row.settings === 'any' ? SETTINGS_FREE.includes(m.workload) : m.settings === row.settings) &&
          m.result?.figures.some((f) => f.metric === row.metric),
      )
      .map((m) => m.loadBefore.cpuPressureAvg10 ?? Number.NaN)
      .filter(Number.isFinite);
    row.pressure = pressures.length ? percentile(pressures, 50) : Number.NaN;
  }
  const order = (r: Row) => {
    const [base, depth] = r.metric.split('@');
    return [ROW_ORDER.indexOf(base!), Number(depth ?? 0), r.settings === 'fastest' ? 1 : 0];
  };
  return [...rows.values()].sort((a, b) => {
    const x = order(a);
    const y = order(b);
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
    return 0;
  });
}

function markdownTable(header: string[], body: string[][], align: ('l' | 'r')[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (align[i] === 'r' ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (align[i] === 'r' ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w))).join(' | ')} |`;
  return [line(header), rule, ...body.map(line)].join('\n');
}

function renderTable(rows: Row[], systems: readonly SystemName[]): string {
  const peers = systems.filter((s) => s !== 'chronos');
  const header = [
    'workload',
    'settings',
    ...systems.map((s) => NAMES[s]),
    ...(systems.includes('chronos') ? peers.map((p) => `Chronos vs ${NAMES[p]}`) : []),
    'CPU pressure',
  ];
  const body = rows.map((r) => [
    r.label,
    r.settings,
    ...systems.map((s) => formatCell(r.cells[s] ?? null)),
    ...(systems.includes('chronos')
      ? peers.map((p) => ratio(r.cells.chronos ?? null, r.cells[p] ?? null))
      : []),
    Number.isFinite(r.pressure) ? `${Math.round(r.pressure)} %` : '',
  ]);
  return markdownTable(header, body, [
    'l',
    'l',
    ...systems.map(() => 'r' as const),
    ...peers.map(() => 'r' as const),
    'r',
  ]);
}

function cappedNotes(rows: Row[], systems: readonly SystemName[]): string[] {
  const notes: string[] = [];
  for (const r of rows) {
    for (const s of systems) {
      const cell = r.cells[s];
      if (cell && cell.capped.length > 0) {
        notes.push(`- † ${NAMES[s]}, ${r.label} (${r.settings}): ${[...new Set(cell.capped)].join('; ')}`);
      }
    }
  }
  return notes;
}

/** The issue's targets for Chronos, each system at its better settings. */
function targets(rows: Row[]): string[] {
  const best = (metric: string, system: SystemName): Cell | null => {
    const cells = rows.filter((r) => r.metric === metric).map((r) => r.cells[system] ?? null);
    const present = cells.filter((c): c is Cell => c !== null);
    if (present.length === 0) return null;
    return present.reduce((a, b) =>
      a.figure.better === 'higher' ? (b.median > a.median ? b : a) : b.median < a.median ? b : a,
    );
  };
  const lines: string[] = [];
  const verdict = (ok: boolean) => (ok ? 'met' : 'not met');
  for (const metric of ['drain5k', 'drain50k']) {
    const c = best(metric, 'chronos');
    const g = best(metric, 'graphile-worker');
    if (c && g) {
      const r = c.median / g.median;
      lines.push(
        `- ${c.figure.label}: Chronos ${r.toFixed(2)}× graphile-worker (target ≥ 1.5×): ${verdict(r >= 1.5)}`,
      );
    }
  }
  for (const metric of ['bulk5k', 'bulk50k', 'pertx16']) {
    const c = best(metric, 'chronos');
    const peers = (['graphile-worker', 'pg-boss'] as const)
      .map((p) => best(metric, p))
      .filter((x) => x !== null);
    if (c && peers.length > 0) {
      const fastest = Math.max(...peers.map((p) => p!.median));
      const want = metric === 'pertx16' ? 1 : 1.5;
      const r = c.median / fastest;
      lines.push(
        `- ${c.figure.label}: Chronos ${r.toFixed(2)}× the faster peer (target ≥ ${want}×): ${verdict(r >= want)}`,
      );
    }
  }
  for (const metric of ['lateness-bulk', 'lateness-live']) {
    for (const r of rows.filter((x) => x.metric === metric)) {
      const c = r.cells.chronos;
      if (!c) continue;
      const ok = c.median <= 25 && c.max <= 25 && (c.extra.early ?? 0) === 0;
      lines.push(
        `- ${c.figure.label} (${r.settings}): Chronos p99 ${num(c.median, 'ms')} ms (max of runs ${num(c.max, 'ms')}), early ${c.extra.early ?? 0} (target p99 ≤ 25 ms, 0 early): ${verdict(ok)}`,
      );
    }
  }
  for (const settings of SETTINGS) {
    const claims = rows.filter(
      (r) => r.metric.startsWith('claim@') && r.settings === settings && r.cells.chronos,
    );
    if (claims.length === 0) continue;
    const first = claims[0]!.cells.chronos!;
    const last = claims.at(-1)!.cells.chronos!;
    const worst = Math.max(...claims.map((r) => r.cells.chronos!.median));
    const flat = last.median / first.median;
    lines.push(
      `- claim (${settings}): Chronos p50 ${claims.map((r) => num(r.cells.chronos!.median, 'ms')).join(' / ')} ms at ${claims.map((r) => Number(r.metric.split('@')[1]).toLocaleString('en')).join(' / ')}; deepest ${flat.toFixed(2)}× the shallowest (target flat, ≤ 1.5×, and ≤ 1 ms): ${verdict(flat <= 1.5 && worst <= 1)}`,
    );
  }
  return lines;
}

// ---------------------------------------------------------------------------------------------
// Coordinator

function listArg<T extends string>(name: string, allowed: readonly T[], fallback: readonly T[]): T[] {
  const raw = process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  if (raw === undefined) return [...fallback];
  const values = raw.split(',').filter(Boolean);
  for (const v of values) {
    if (!(allowed as readonly string[]).includes(v)) {
      throw new Error(`--${name}: expected some of ${allowed.join(', ')}, got ${JSON.stringify(v)}`);
    }
  }
  return values as T[];
}

function stringArg(name: string): string | undefined {
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}

async function coordinator(): Promise<void> {
  const size = (stringArg('size') ?? 'full') as SizeName;
  if (!(size in SIZES)) throw new Error(`--size: expected full or small, got ${JSON.stringify(size)}`);
  const runs = numberArg('runs', size === 'full' ? 3 : 1);
  const workloads = listArg('workloads', WORKLOADS, WORKLOADS);
  const settingsArg = stringArg('settings') ?? (size === 'full' ? 'both' : 'fastest');
  if (!['both', ...SETTINGS].includes(settingsArg)) {
    throw new Error(`--settings: expected defaults, fastest or both, got ${JSON.stringify(settingsArg)}`);
  }
  const settingsList: SettingsName[] = settingsArg === 'both' ? [...SETTINGS] : [settingsArg as SettingsName];
  const systems = listArg('systems', SYSTEMS, SYSTEMS);

  const jobs: Job[] = [];
  for (let run = 0; run < runs; run++) {
    workloads.forEach((workload, wi) => {
      const k = (run + wi) % systems.length;
      const order = [...systems.slice(k), ...systems.slice(0, k)];
      const settingsFor = SETTINGS_FREE.includes(workload) ? (['defaults'] as const) : settingsList;
      for (const settings of settingsFor) {
        for (const system of order) jobs.push({ run: run + 1, workload, system, settings, size });
      }
    });
  }
  if (workloads.includes('rss')) {
    log('compare: compiling the rss worker (bench/peers/rss-worker.ts) to .tmp/compare-build/');
    buildRssWorker();
  }
  log(
    `compare: ${jobs.length} measurements (${runs} runs × ${workloads.length} workloads, ${systems.join(', ')}; size ${size})`,
  );
  const started = Date.now();
  const measurements: Measurement[] = [];
  for (const [i, job] of jobs.entries()) {
    const loadBefore = await waitForQuiet();
    const t0 = Date.now();
    log(
      `[${i + 1}/${jobs.length}] run ${job.run}: ${job.workload} on ${job.system} (${job.settings}); CPU pressure ${loadBefore.cpuPressureAvg10} %`,
    );
    try {
      const result = await runChild(job);
      measurements.push({ ...job, loadBefore, ok: true, result, seconds: (Date.now() - t0) / 1000 });
      log(`    ${result.figures.map((f) => `${f.metric} ${formatFigure(f)}`).join(', ')}`);
    } catch (error) {
      const message = (error as Error).message;
      measurements.push({ ...job, loadBefore, ok: false, error: message, seconds: (Date.now() - t0) / 1000 });
      log(`    failed: ${message}`);
    }
  }

  const rows = buildRows(measurements, systems);
  const table = renderTable(rows, systems);
  const notes = cappedNotes(rows, systems);
  const goals = systems.includes('chronos') ? targets(rows) : [];
  const pressures = measurements
    .map((m) => m.loadBefore.cpuPressureAvg10 ?? Number.NaN)
    .filter(Number.isFinite);
  const machine = await describeMachine();
  const chronosMeasurement = measurements.find((m) => m.system === 'chronos' && m.result);
  const chronosAt = chronosMeasurement?.result?.description.version ?? '';
  const paths = [
    ...new Set(measurements.flatMap((m) => (m.result?.scheduleManyPath ? [m.result.scheduleManyPath] : []))),
  ];
  const command = `npx tsx bench/compare.ts ${process.argv.slice(2).join(' ')}`.trim();
  const failed = measurements.filter((m) => !m.ok);
  const versions = Object.fromEntries(
    systems.map((s) => [
      s,
      measurements.find((m) => m.system === s && m.result)?.result?.description.version ?? '',
    ]),
  );
  const markdown = [
    `# Chronos vs pg-boss vs graphile-worker (${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC)`,
    '',
    `Command: \`${command}\` (size ${size}, ${runs} interleaved run${runs === 1 ? '' : 's'}; ${Math.round((Date.now() - started) / 1000)} s).`,
    `Versions: ${systems.map((s) => versions[s]).join(', ')}${paths.length ? `; Chronos scheduleMany path: ${paths.join(', ')}` : ''}.`,
    `Machine: ${machine.cpus} vCPUs (${machine.cpuModel}), ${machine.memoryGiB} GiB, Node ${machine.node}, ${machine.postgres.split(' on ')[0]} (autovacuum ${machine.settings.autovacuum}, fsync ${machine.settings.fsync}, synchronous_commit ${machine.settings.synchronous_commit}, shared_buffers ${pages(machine.settings.shared_buffers)}).`,
    `CPU pressure (PSI some avg10) before each measurement: ${pressures.length ? `${Math.min(...pressures)}–${Math.max(...pressures)} %, median ${percentile(pressures, 50)} %` : 'not available'}.`,
    '',
    'Each cell: median over the runs (min–max). Ratios: Chronos against the peer at the same settings, from the medians. CPU pressure: the median, before the row’s measurements.',
    '',
    table,
    '',
    ...(notes.length ? [...notes, ''] : []),
    ...(goals.length ? ['Targets (issue 18; each system at its better settings):', '', ...goals, ''] : []),
    ...(failed.length
      ? [
          'Failed measurements:',
          '',
          ...failed.map((m) => `- run ${m.run} ${m.workload} ${m.system} ${m.settings}: ${m.error}`),
          '',
        ]
      : []),
  ].join('\n');
  process.stdout.write(`\n${markdown}\n`);

  const name =
    size === 'small'
      ? 'compare-small'
      : `compare-${new Date().toISOString().slice(0, 16).replace(/[:T]/g, '-')}`;
  const json = await writeResult(name, {
    size,
    sizes: SIZES[size],
    runs,
    workloads,
    settings: settingsList,
    systems,
    chronosAt,
    versions,
    seconds: Math.round((Date.now() - started) / 1000),
    table: rows.map((r) => ({
      metric: r.metric,
      label: r.label,
      settings: r.settings,
      cpuPressureMedian: r.pressure,
      cells: Object.fromEntries(
        Object.entries(r.cells).map(([s, c]) => [
          s,
          c
            ? {
                median: c.median,
                min: c.min,
                max: c.max,
                runs: c.runs,
                atLeast: c.atLeast,
                capped: c.capped,
                extra: c.extra,
              }
            : null,
        ]),
      ),
    })),
    targets: goals,
    measurements,
  });
  const md = await writeText(`${name}.md`, `${markdown}\n`);
  log(`wrote ${json} and ${md}`);
  if (failed.length > 0) process.exitCode = 1;
}

/** `16384 8kB` (a setting in pages, as pg_settings gives it) as `128 MB`. */
function pages(setting: string | undefined): string {
  const m = /^(\d+) 8kB$/.exec(setting ?? '');
  return m ? `${(Number(m[1]) * 8) / 1024} MB` : (setting ?? '?');
}

function formatFigure(f: Figure): string {
  const unit = f.unit === '/s' ? '/s' : ` ${f.unit}`;
  const extra = f.extra
    ? ` (${Object.entries(f.extra)
        .map(([k, v]) => `${k} ${num(v, 'ms')}`)
        .join(', ')})`
    : '';
  return `${f.atLeast ? '≥ ' : ''}${num(f.value, f.unit)}${unit}${extra}${f.capped ? ` [capped: ${f.capped}]` : ''}`;
}

const childArg = process.argv.find((a) => a.startsWith('--child='));
if (childArg) {
  await child(JSON.parse(childArg.slice('--child='.length)) as Job);
} else {
  await coordinator();
}
