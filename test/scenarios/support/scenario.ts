/**
 * What every scenario shares: its size (fast in `npm test`, full in `npm run scenarios`), waiting
 * on real processes with a deadline, percentiles, and the report each scenario writes.
 *
 * Scenarios run whole `chronos serve` processes, so they wait for real time to pass; they never
 * assert on how fast anything was. Their figures go to the report (and from there, for full
 * runs, to docs/reliability.md).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { format, resolveConfig } from 'prettier';
import { TMP_DIR } from '../../support/env.js';

export type Size = 'fast' | 'full';

/** `CHRONOS_SCENARIO_SIZE=full` (set by `npm run scenarios`) runs each scenario at full size. */
export const SIZE: Size = process.env.CHRONOS_SCENARIO_SIZE === 'full' ? 'full' : 'fast';

/** The fast value in `npm test`, the full one in `npm run scenarios`. */
export function sized<T>(fast: T, full: T): T {
  return SIZE === 'full' ? full : fast;
}

export const RESULTS_DIR = fileURLToPath(new URL('../results/', import.meta.url));

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Polls `check` until it returns true (or a truthy value, which is returned), failing after
 * `timeoutMs` with `what` and the last state `describe()` gives.
 */
export async function waitUntil<T>(
  check: () => T | Promise<T>,
  options: { timeoutMs: number; intervalMs?: number; what: string; describe?: () => unknown },
): Promise<NonNullable<T>> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) {
      const state = options.describe ? ` (${JSON.stringify(await options.describe())})` : '';
      throw new Error(`timed out after ${options.timeoutMs} ms waiting for ${options.what}${state}`);
    }
    await sleep(options.intervalMs ?? 100);
  }
}

/** Nearest-rank percentile of an unsorted list; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export interface Spread {
  p50: number;
  p99: number;
  max: number;
}

export function spread(values: readonly number[]): Spread {
  const round = (x: number) => (Number.isFinite(x) ? Math.round(x) : x);
  return {
    p50: round(percentile(values, 50)),
    p99: round(percentile(values, 99)),
    max: round(values.length ? Math.max(...values) : Number.NaN),
  };
}

/** The figures every delivery scenario reports. */
export interface Tally {
  /** Alarms committed. */
  created: number;
  /** Alarms whose wake the router answered 2xx at least once. */
  delivered: number;
  /** Alarms neither delivered nor visible as `failed` with a `last_error` (must be 0). */
  lost: number;
  /** Alarms visibly `failed`, with their `last_error`. */
  failed: number;
  /** Alarms the router answered 2xx more than once (the same `webhook-id`). */
  duplicated: number;
  /** Deliveries (any attempt) the router received before `scheduled_for` (must be 0). */
  early: number;
  /** Wakes whose `fired_at` precedes their `scheduled_for` by the database clock (must be 0). */
  earlyByDatabase: number;
  /** First 2xx receipt − due instant, milliseconds. */
  latenessMs: Spread;
}

export interface Report {
  scenario: string;
  size: Size;
  command: string;
  startedAt: string;
  durationS: number;
  tally?: Tally;
  [more: string]: unknown;
}

/**
 * Writes the report: always under `.tmp/scenarios/`, and for full runs also as
 * `test/scenarios/results/<scenario>.json` (the figures docs/reliability.md quotes). Prints a
 * summary line so a run shows its figures.
 */
export async function writeReport(report: Report): Promise<void> {
  const target = join(RESULTS_DIR, `${report.scenario}.json`);
  // Formatted as `prettier --check` (in `npm test`) expects the committed reports to be.
  const text = await format(JSON.stringify(report), { ...(await resolveConfig(target)), parser: 'json' });
  const scratch = join(TMP_DIR, 'scenarios');
  await mkdir(scratch, { recursive: true });
  await writeFile(join(scratch, `${report.scenario}-${report.size}.json`), text);
  if (report.size === 'full') {
    await mkdir(RESULTS_DIR, { recursive: true });
    await writeFile(target, text);
  }
  const t = report.tally;
  const line = t
    ? `created ${t.created}, delivered ${t.delivered}, lost ${t.lost}, failed ${t.failed}, duplicated ${t.duplicated}, ` +
      `early ${t.early}/${t.earlyByDatabase}, lateness p50 ${t.latenessMs.p50} ms p99 ${t.latenessMs.p99} ms max ${t.latenessMs.max} ms`
    : JSON.stringify(
        Object.fromEntries(
          Object.entries(report).filter(([, v]) => typeof v === 'number' || typeof v === 'object'),
        ),
      ).slice(0, 400);
  console.log(`[scenario ${report.scenario} (${report.size})] ${line}`);
}

/** The command that produced a report: what docs/reliability.md cites. */
export function commandFor(file: string): string {
  return SIZE === 'full'
    ? `npm run scenarios -- ${file}`
    : `npx vitest run ${file}   # fast size, as in npm test`;
}

/** A report under way: start time and command filled in. */
export function startReport(scenario: string, file: string): Report & { finish(): Promise<Report> } {
  const started = Date.now();
  const report: Report = {
    scenario,
    size: SIZE,
    command: commandFor(file),
    startedAt: new Date(started).toISOString(),
    durationS: 0,
  };
  return Object.assign(report, {
    async finish() {
      report.durationS = Math.round((Date.now() - started) / 100) / 10;
      const { finish: _finish, ...plain } = report as Report & { finish?: unknown };
      await writeReport(plain);
      return plain;
    },
  });
}
