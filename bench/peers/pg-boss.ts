/**
 * pg-boss (12.x) through its documented API: `new PgBoss(options)`, `start()`, `createQueue()`,
 * `insert(name, jobs, { db })` and `send(name, data, { startAfter, db })` on the caller's
 * transaction (the `db` option: an object with `executeSql(text, values)`, here the caller's
 * client), and `work(name, options, handler)`.
 *
 * A timer is a job on one queue, `timers`, with `{ key }` as its data and `startAfter` its due
 * time. pg-boss needs its queue created first (`createQueue`); the handler receives an array of
 * jobs (`batchSize` of them at most) and the adapter calls `onFire` for each as the array arrives.
 */
import pg from 'pg';
import { PgBoss, type ConstructorOptions, type WorkOptions } from 'pg-boss';
import {
  chunks,
  packageVersion,
  timersFrom,
  type FireHandler,
  type Peer,
  type PeerDescription,
  type PeerOptions,
  type PeerWorker,
  type SettingsName,
  type Timer,
} from './peer.js';

const QUEUE = 'timers';

interface Settings {
  constructor: Omit<ConstructorOptions, 'connectionString'>;
  queue: { notify?: boolean };
  work: WorkOptions;
}

const SETTINGS: Record<SettingsName, Settings> = {
  // Nothing but the connection: pool of 10, LISTEN/NOTIFY off, and work() takes one job per fetch
  // and polls every 2 s ("The default options for work() is 1 job every 2 seconds", docs/api/workers.md).
  defaults: { constructor: {}, queue: {}, work: {} },
  // From docs/api/workers.md and constructor.md: large fetches, several workers in the process
  // (500 × 8: the best of a small grid on this machine, bench/results/compare-pg-boss-tuning.txt;
  // the docs give no figures), fetching again at once while batches come back full, the shortest poll it accepts (0.5 s,
  // its documented floor; timers due in the future are found only by polling), and LISTEN/NOTIFY
  // (which wakes workers for jobs due now; its backstop poll is set to the same 0.5 s, since its
  // default of 30 s would otherwise replace the 0.5 s poll while the listener is up).
  fastest: {
    constructor: { useListenNotify: true },
    queue: { notify: true },
    work: {
      batchSize: 500,
      localConcurrency: 8,
      burstWhenBatchFull: true,
      pollingIntervalSeconds: 0.5,
      notifyPollingIntervalSeconds: 0.5,
    },
  },
};

/** pg-boss's `db` option over the caller's client: its statements run in the caller's transaction. */
function onClient(tx: pg.ClientBase) {
  return { executeSql: (text: string, values?: unknown[]) => tx.query(text, values) };
}

interface TimerData {
  key: string;
}

export class PgBossPeer implements Peer {
  readonly system = 'pg-boss' as const;
  readonly settings: SettingsName;
  readonly claimStatement = /FOR UPDATE OF j SKIP LOCKED[\s\S]*started_on = /;
  readonly #url: string;
  #boss: PgBoss | null = null;
  #workerId: string | null = null;
  /** A pool for the adapter's own checks (pg-boss's is private). */
  #pool: pg.Pool | null = null;

  constructor(options: PeerOptions) {
    this.#url = options.url;
    this.settings = options.settings;
  }

  get description(): PeerDescription {
    const s = SETTINGS[this.settings];
    return {
      version: packageVersion('pg-boss'),
      settings: this.settings,
      options: {
        constructor: { connectionString: '<fresh database>', ...s.constructor },
        createQueue: s.queue,
        work: s.work,
      },
      calls: {
        scheduleMany: `boss.insert('${QUEUE}', [{ data: { key }, startAfter }], { db: { executeSql: tx.query } }): one INSERT … SELECT FROM json_to_recordset`,
        scheduleOne: `boss.send('${QUEUE}', { key }, { startAfter, db: { executeSql: tx.query } })`,
        worker: `boss.work('${QUEUE}', ${JSON.stringify(s.work)}, handler)`,
        load: `boss.insert('${QUEUE}', jobs) in chunks of 50,000`,
      },
    };
  }

  get #b(): PgBoss {
    if (!this.#boss) throw new Error('pg-boss adapter: call setup() first');
    return this.#boss;
  }

  async setup(): Promise<void> {
    const s = SETTINGS[this.settings];
    const boss = new PgBoss({ connectionString: this.#url, ...s.constructor });
    boss.on('error', (error: Error) => process.stderr.write(`pg-boss error: ${error.message}\n`));
    await boss.start();
    if (!(await boss.getQueue(QUEUE))) await boss.createQueue(QUEUE, s.queue);
    this.#boss = boss;
    this.#pool = new pg.Pool({ connectionString: this.#url, max: 1 });
    this.#pool.on('error', () => {});
  }

  async scheduleMany(tx: pg.ClientBase, timers: readonly Timer[]): Promise<void> {
    await this.#b.insert(QUEUE, timers.map(toJob), { db: onClient(tx) });
  }

  async scheduleOne(tx: pg.ClientBase, timer: Timer): Promise<void> {
    await this.#b.send(QUEUE, { key: timer.key }, { startAfter: new Date(timer.dueAtMs), db: onClient(tx) });
  }

  async loadDue(count: number, keyPrefix: string): Promise<void> {
    await this.#load(timersFrom(count, keyPrefix, Date.now(), 0));
  }

  async loadWaiting(count: number, keyPrefix: string): Promise<void> {
    await this.#load(timersFrom(count, keyPrefix, Date.now() + 3_600_000, 10));
  }

  async #load(timers: Timer[]): Promise<void> {
    for (const chunk of chunks(timers, 50_000)) await this.#b.insert(QUEUE, chunk.map(toJob));
  }

  async countWaiting(): Promise<number> {
    // The job table is documented (docs/sql/job-table.md); default schema `pgboss`.
    const result = await this.#pool!.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state < 'active'`,
      [QUEUE],
    );
    return result.rows[0]!.n;
  }

  async purge(): Promise<void> {
    await this.#b.deleteQueuedJobs(QUEUE);
  }

  async startWorker(onFire: FireHandler): Promise<PeerWorker> {
    const boss = this.#b;
    this.#workerId = await boss.work<TimerData>(QUEUE, SETTINGS[this.settings].work, async (jobs) => {
      for (const job of jobs) onFire(job.data.key);
    });
    return {
      stop: async () => {
        await boss.offWork(QUEUE, { wait: true });
        this.#workerId = null;
      },
    };
  }

  wake(): void {
    // Documented (docs/api/workers.md, notifyWorker): the worker fetches now instead of at its next poll.
    if (this.#workerId) this.#b.notifyWorker(this.#workerId);
  }

  async close(): Promise<void> {
    await this.#boss?.stop({ graceful: true, timeout: 5_000 });
    await this.#pool?.end();
    this.#boss = null;
    this.#pool = null;
  }
}

function toJob(timer: Timer) {
  return { data: { key: timer.key }, startAfter: new Date(timer.dueAtMs) };
}
