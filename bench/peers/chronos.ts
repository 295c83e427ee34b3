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
 * `bench/support.ts`, which the other benchmarks share: if Chronos's tables move, those are the
 * places to change. Both run on a store of the adapter's own (`#store`), not the library's
 * connection, with `search_path` set to `chronos, public` so the unqualified names below find the
 * tables in the `chronos` schema or, before that schema, in `public`.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import {
  createChronos,
  type Chronos,
  type ChronosOptions,
  type TimerSpec,
  type WorkOptions,
} from '../../packages/chronos-timers/src/index.js';
import { PgDb, type Db } from '../../packages/chronos-timers/src/store/driver/db.js';
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
  purge: 'TRUNCATE alarms, wakes, wake_attempts CASCADE',
};

const CREATE_OPTIONS: Record<SettingsName, Partial<ChronosOptions>> = {
  // Finished timers kept 30 days, their keys taken meanwhile.
  defaults: {},
  // Finished timers kept for no time (docs/library.md, "What a fire writes"): a fired one-shot is
  // deleted as its fire is recorded, as graphile-worker deletes a finished job.
  fastest: { finishedTimerRetentionMs: 0 },
};

const WORK_OPTIONS: Record<SettingsName, WorkOptions> = {
  // The library's defaults: batch 200, concurrency 200, lease 30 s; poll 1 s as a fallback to
  // LISTEN/NOTIFY and to sleeping until the next due time.
  defaults: {},
  // The best drain in bench/README.md ("Drain": batch 500, concurrency 500). Claims leased: held
  // in a transaction (`BENCH_CHRONOS_CLAIM=transaction`) PostgreSQL does less a fire but this
  // process more, and on one two-CPU machine the drain was no faster (docs/comparison.md).
  fastest: {
    batchSize: 500,
    concurrency: 500,
    ...(process.env.BENCH_CHRONOS_CLAIM === 'transaction' ? { claim: 'transaction' as const } : {}),
  },
};

/** A Chronos before 0.2.0 has no `scheduleMany`: the adapter also runs on older commits, for comparison. */
type WithScheduleMany = Chronos & { scheduleMany?: (tx: unknown, specs: TimerSpec[]) => Promise<unknown> };

export class ChronosPeer implements Peer {
  readonly system = 'chronos' as const;
  readonly settings: SettingsName;
  // Every form of the claim (leased, at the row, held in a transaction): due rows of one queue,
  // locked with SKIP LOCKED (a pattern on the lease token's text stopped matching when the token
  // became `(SELECT gen_random_uuid())`).
  readonly claimStatement =
    /WHERE \(a?\.?status = 'active' OR a?\.?trigger = 'manual'\) AND a?\.?queue = \$3[\s\S]*FOR UPDATE SKIP LOCKED/;
  readonly #url: string;
  #chronos: WithScheduleMany | null = null;
  #storeDb: Db | null = null;

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
      options: {
        createChronos: { databaseUrl: '<fresh database>', ...CREATE_OPTIONS[this.settings] },
        work: WORK_OPTIONS[this.settings],
      },
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

  /** The adapter's own connection for loads and checks (opened on first use: a worker needs none). */
  get #store(): Db {
    this.#storeDb ??= PgDb.connect(this.#url, 2, { options: '-c search_path=chronos,public' });
    return this.#storeDb;
  }

  async setup(): Promise<void> {
    this.#chronos = await createChronos({ databaseUrl: this.#url, ...CREATE_OPTIONS[this.settings] });
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
      await loadDueAlarms(this.#store, Math.min(100_000, count - done), `${keyPrefix}${done}-`);
    }
  }

  async loadWaiting(count: number, keyPrefix: string): Promise<void> {
    const { loadWaitingAlarms } = await import('../support.js');
    await loadWaitingAlarms(this.#store, count, { keyPrefix });
  }

  async countWaiting(): Promise<number> {
    const [row] = await this.#store.query<{ n: number }>(TABLES.countWaiting);
    return row!.n;
  }

  async purge(): Promise<void> {
    await this.#store.exec(TABLES.purge);
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
    await this.#storeDb?.close();
    this.#chronos = null;
    this.#storeDb = null;
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
    version = commit ? `chronos ${commit}${dirty ? '+changes' : ''}` : 'chronos (commit unknown)';
  } catch {
    version = 'chronos (no git)';
  }
  return version;
}
