/**
 * Chronos through its public library API (`src/index.ts`), as an application uses it:
 * `createChronos({ databaseUrl })`, `schedule(tx, spec)` on the caller's transaction, and
 * `work(handler, options)`.
 *
 * `scheduleMany(tx, specs)` (contract §9) is used when this Chronos has it; otherwise the
 * adapter calls `schedule()` once per timer inside the same transaction, and says so in
 * `description.calls.scheduleMany`.
 *
 * The only SQL here is `TABLES` below (counting and purging for checks) and the bulk loaders in
 * `bench/support.ts`, which the other benchmarks share: if Chronos's tables move (a `chronos`
 * schema), those are the places to change.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { createChronos, type Chronos, type TimerSpec, type WorkOptions } from '../../src/index.js';
import type {
  FireHandler,
  Peer,
  PeerDescription,
  PeerOptions,
  PeerWorker,
  SettingsName,
  Timer,
} from './peer.js';

/** Every statement of this adapter that names a Chronos table. */
const TABLES = {
  countWaiting: {
    name: 'bench_peer_chronos_waiting',
    text: `SELECT count(*)::int AS n FROM alarms WHERE status = 'active'`,
  },
  purge: 'TRUNCATE alarms, wakes, wake_attempts',
};

const WORK_OPTIONS: Record<SettingsName, WorkOptions> = {
  // The library's defaults: batch 200, concurrency 200, lease 30 s; poll 1 s as a fallback to
  // LISTEN/NOTIFY and to sleeping until the next due time.
  defaults: {},
  // The best drain in bench/README.md ("Drain": batch 500, concurrency 500).
  fastest: { batchSize: 500, concurrency: 500 },
};

/** `scheduleMany` is being added to the library (contract §9); typed here until it lands. */
type WithScheduleMany = Chronos & { scheduleMany?: (tx: unknown, specs: TimerSpec[]) => Promise<unknown> };

export class ChronosPeer implements Peer {
  readonly system = 'chronos' as const;
  readonly settings: SettingsName;
  readonly claimStatement = /lease_token = gen_random_uuid\(\)[\s\S]*FOR UPDATE SKIP LOCKED/;
  readonly #url: string;
  #chronos: WithScheduleMany | null = null;

  constructor(options: PeerOptions) {
    this.#url = options.url;
    this.settings = options.settings;
  }

  get description(): PeerDescription {
    const many = this.#hasScheduleMany()
      ? 'chronos.scheduleMany(tx, specs): one statement'
      : 'chronos.schedule(tx, spec) once per timer, all in the one transaction (this Chronos has no scheduleMany)';
    return {
      version: chronosVersion(),
      settings: this.settings,
      options: { createChronos: { databaseUrl: '<fresh database>' }, work: WORK_OPTIONS[this.settings] },
      calls: {
        scheduleMany: many,
        scheduleOne: 'chronos.schedule(tx, { key, at })',
        worker: `chronos.work(handler, ${JSON.stringify(WORK_OPTIONS[this.settings])})`,
        load: 'INSERT … SELECT generate_series into alarms (bench/support.ts loadDueAlarms, loadWaitingAlarms)',
      },
    };
  }

  /** Which call `scheduleMany` makes, for the results. */
  get scheduleManyPath(): 'scheduleMany' | 'schedule loop' {
    return this.#hasScheduleMany() ? 'scheduleMany' : 'schedule loop';
  }

  #hasScheduleMany(): boolean {
    return typeof this.#chronos?.scheduleMany === 'function';
  }

  get #c(): WithScheduleMany {
    if (!this.#chronos) throw new Error('chronos adapter: call setup() first');
    return this.#chronos;
  }

  async setup(): Promise<void> {
    this.#chronos = await createChronos({ databaseUrl: this.#url });
    await this.#chronos.migrate();
  }

  async scheduleMany(tx: pg.ClientBase, timers: readonly Timer[]): Promise<void> {
    const specs = timers.map(toSpec);
    const c = this.#c;
    if (typeof c.scheduleMany === 'function') {
      await c.scheduleMany(tx, specs);
      return;
    }
    for (const spec of specs) await c.schedule(tx, spec);
  }

  async scheduleOne(tx: pg.ClientBase, timer: Timer): Promise<void> {
    await this.#c.schedule(tx, toSpec(timer));
  }

  async loadDue(count: number, keyPrefix: string): Promise<void> {
    // Imported here, not above, so that a worker process (rss-worker.ts) holds no benchmark code.
    const { loadDueAlarms } = await import('../support.js');
    for (let done = 0; done < count; done += 100_000) {
      await loadDueAlarms(this.#c.db, Math.min(100_000, count - done), `${keyPrefix}${done}-`);
    }
  }

  async loadWaiting(count: number, keyPrefix: string): Promise<void> {
    const { loadWaitingAlarms } = await import('../support.js');
    await loadWaitingAlarms(this.#c.db, count, { keyPrefix });
  }

  async countWaiting(): Promise<number> {
    const [row] = await this.#c.db.query<{ n: number }>(TABLES.countWaiting);
    return row!.n;
  }

  async purge(): Promise<void> {
    await this.#c.db.exec(TABLES.purge);
  }

  async startWorker(onFire: FireHandler): Promise<PeerWorker> {
    const worker = this.#c.work((fire) => onFire(fire.key), WORK_OPTIONS[this.settings]);
    return { stop: () => worker.stop() };
  }

  wake(): void {
    // schedule() of a timer due within the poll interval sends NOTIFY: the worker wakes by itself.
  }

  async close(): Promise<void> {
    await this.#chronos?.close();
    this.#chronos = null;
  }
}

function toSpec(timer: Timer): TimerSpec {
  return { key: timer.key, at: new Date(timer.dueAtMs) };
}

let version: string | null = null;

/**
 * `chronos <commit>`: the last commit that changed src/ or migrations/ (Chronos's code, not the
 * benchmark's), with `+changes` when the work tree differs from it there.
 */
export function chronosVersion(): string {
  if (version) return version;
  const cwd = fileURLToPath(new URL('../..', import.meta.url));
  try {
    const commit = execFileSync(
      'git',
      ['log', '-1', '--format=%h', '--abbrev=10', '--', 'src', 'migrations'],
      {
        cwd,
        encoding: 'utf8',
      },
    ).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'migrations'], {
      cwd,
      encoding: 'utf8',
    }).trim();
    version = `chronos ${commit}${dirty ? '+changes' : ''}`;
  } catch {
    version = 'chronos (no git)';
  }
  return version;
}
