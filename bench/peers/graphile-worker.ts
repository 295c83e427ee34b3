/**
 * graphile-worker (0.18) through its documented API: `runMigrations()`, the SQL functions
 * `graphile_worker.add_jobs(specs)` and `graphile_worker.add_job(...)` on the caller's transaction
 * (docs: "Adding jobs through SQL"; the statements are the ones `WorkerUtils.addJobs` and
 * `addJob` send, which cannot join a transaction of the caller's), and `run({ taskList, ... })`.
 *
 * A timer is a job of the task `timer`, with `{ key }` as its payload and `run_at` its due time.
 * The worker gets a pg pool made as graphile-worker makes its own (`max` = `maxPoolSize`, with
 * the error handlers its docs ask for), created once in `setup()` so that a worker started again
 * finds its connections open, as the other systems' do.
 */
import pg from 'pg';
import { Logger, run, runMigrations, type Runner, type RunnerOptions } from 'graphile-worker';
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

const TASK = 'timer';

interface Settings {
  maxPoolSize: number;
  run: Pick<RunnerOptions, 'concurrency' | 'pollInterval' | 'preset'>;
}

const SETTINGS: Record<SettingsName, Settings> = {
  // Nothing but the connection (docs/config.md): one job at a time, a 2 s poll for jobs that
  // become due later (new jobs due now arrive by LISTEN/NOTIFY), pool of 10, no local queue, each
  // job completed in its own statement.
  defaults: { maxPoolSize: 10, run: {} },
  // The configuration of the documented best run (docs/performance.md, "Quick stats": 24
  // concurrent jobs, pool of 25, a local queue of 500, completions and failures batched with no
  // delay), and a 0.5 s poll: the docs name no floor ("you can change the poll frequency depending
  // on how accurate you need these to be", faq.md), so this uses pg-boss's documented floor.
  fastest: {
    maxPoolSize: 25,
    run: {
      concurrency: 24,
      pollInterval: 500,
      preset: { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
    },
  },
};

// The statements WorkerUtils.addJobs and addJob send (src/helpers.ts), with the default schema.
const ADD_JOBS = `select * from graphile_worker.add_jobs(
  array(select json_populate_recordset(null::graphile_worker.job_spec, $1::json)), $2::boolean)`;
const ADD_JOB = `select * from graphile_worker.add_job(identifier => $1::text, payload => $2::json,
  queue_name => $3::text, run_at => $4::timestamptz, max_attempts => $5::int, job_key => $6::text,
  priority => $7::int, flags => $8::text[], job_key_mode => $9::text)`;
// Loads: the same function, counting instead of returning every job.
const LOAD_JOBS = `select count(*) from graphile_worker.add_jobs(
  array(select json_populate_recordset(null::graphile_worker.job_spec, $1::json)), false)`;

/** Warnings and errors to stderr; graphile-worker's default logger writes a line per job at `info`. */
const quietLogger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning')
    process.stderr.write(`graphile-worker ${level}: ${message}\n`);
});

export class GraphileWorkerPeer implements Peer {
  readonly system = 'graphile-worker' as const;
  readonly settings: SettingsName;
  readonly claimStatement = /for update\s+skip locked[\s\S]*locked_by = \$1::text/;
  readonly #url: string;
  #pool: pg.Pool | null = null;

  constructor(options: PeerOptions) {
    this.#url = options.url;
    this.settings = options.settings;
  }

  get description(): PeerDescription {
    const s = SETTINGS[this.settings];
    return {
      version: packageVersion('graphile-worker'),
      settings: this.settings,
      options: { pgPool: { max: s.maxPoolSize }, run: s.run },
      calls: {
        scheduleMany:
          'select * from graphile_worker.add_jobs(array(select json_populate_recordset(null::graphile_worker.job_spec, $1::json)), false) on tx (what WorkerUtils.addJobs sends): one statement',
        scheduleOne:
          'select * from graphile_worker.add_job(identifier => …, payload => …, run_at => …) on tx',
        worker: `run({ pgPool, taskList: { ${TASK} }, noHandleSignals: true, logger: warnings only, ...${JSON.stringify(s.run)} })`,
        load: 'graphile_worker.add_jobs in chunks of 50,000',
      },
    };
  }

  get #p(): pg.Pool {
    if (!this.#pool) throw new Error('graphile-worker adapter: call setup() first');
    return this.#pool;
  }

  async setup(): Promise<void> {
    await runMigrations({ connectionString: this.#url, logger: quietLogger });
    const pool = new pg.Pool({ connectionString: this.#url, max: SETTINGS[this.settings].maxPoolSize });
    const report = (error: Error) => process.stderr.write(`graphile-worker pool: ${error.message}\n`);
    pool.on('error', report);
    pool.on('connect', (client) => void client.on('error', report));
    this.#pool = pool;
  }

  async scheduleMany(tx: pg.ClientBase, timers: readonly Timer[]): Promise<void> {
    await tx.query(ADD_JOBS, [JSON.stringify(timers.map(toSpec)), false]);
  }

  async scheduleOne(tx: pg.ClientBase, timer: Timer): Promise<void> {
    const runAt = new Date(timer.dueAtMs).toISOString();
    await tx.query(ADD_JOB, [
      TASK,
      JSON.stringify({ key: timer.key }),
      null,
      runAt,
      null,
      null,
      null,
      null,
      null,
    ]);
  }

  async loadDue(count: number, keyPrefix: string): Promise<void> {
    await this.#load(timersFrom(count, keyPrefix, Date.now(), 0));
  }

  async loadWaiting(count: number, keyPrefix: string): Promise<void> {
    await this.#load(timersFrom(count, keyPrefix, Date.now() + 3_600_000, 10));
  }

  async #load(timers: Timer[]): Promise<void> {
    for (const chunk of chunks(timers, 50_000)) {
      await this.#p.query(LOAD_JOBS, [JSON.stringify(chunk.map(toSpec))]);
    }
  }

  async countWaiting(): Promise<number> {
    // The documented view (docs/jobs-view.md); a completed job is deleted.
    const result = await this.#p.query<{ n: number }>(`select count(*)::int as n from graphile_worker.jobs`);
    return result.rows[0]!.n;
  }

  async purge(): Promise<void> {
    // The documented admin function (docs/admin-functions.md): completing a job deletes it.
    await this.#p.query(`select graphile_worker.complete_jobs(array(select id from graphile_worker.jobs))`);
  }

  async startWorker(onFire: FireHandler): Promise<PeerWorker> {
    const runner: Runner = await run({
      pgPool: this.#p,
      taskList: { [TASK]: (payload) => onFire((payload as { key: string }).key) },
      noHandleSignals: true,
      logger: quietLogger,
      ...SETTINGS[this.settings].run,
    });
    return { stop: () => runner.stop() };
  }

  wake(): void {
    // add_job on a job due now sends NOTIFY "jobs:insert": the worker wakes by itself.
  }

  async close(): Promise<void> {
    await this.#pool?.end();
    this.#pool = null;
  }
}

function toSpec(timer: Timer) {
  return { identifier: TASK, payload: { key: timer.key }, run_at: new Date(timer.dueAtMs).toISOString() };
}
