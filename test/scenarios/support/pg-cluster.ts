/**
 * A real high-availability PostgreSQL pair for the failover tests: pg_auto_failover (Debian's
 * `postgresql-<v>-auto-failover` and `pg-auto-failover-cli`) runs a monitor and two data nodes,
 * a primary and a standby with synchronous replication (`replication-quorum` on both nodes:
 * the primary's `synchronous_standby_names` is `ANY 1 (<standby>)`, so a transaction commits only
 * once the standby has its WAL), all in one temporary directory, on free ports, listening on
 * 127.0.0.1 only, with trust authentication.
 *
 * PostgreSQL refuses to run as root, so under root (CI) every command runs as the `postgres` OS
 * user (spawned with its uid and gid). pg_autoctl keeps its configuration and state under the XDG
 * directories, which point into the temporary directory too, so nothing outside it is touched.
 *
 * The failover timings are shortened for a test (see `FAST_FAILOVER`): with pg_auto_failover's
 * defaults a dead primary is replaced after about 50 s here; with these, after about 10 s.
 * `killPrimary()` kills -9 the primary's whole node — its pg_autoctl keeper, its postmaster and
 * every backend — as a machine dying would. (Killing the postmaster alone is repaired in place
 * by its keeper, which restarts it: no failover at all.) `destroy()` stops everything, removes
 * what a killed PostgreSQL leaves in shared memory, and deletes the directory.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { appendFile, chown, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from '../../cli/support.js';
import { waitUntil } from './scenario.js';

const run = promisify(execFile);
const AS_ROOT = userInfo().uid === 0;

/** Monitor settings (milliseconds) that make a failover take seconds instead of a minute. */
export const FAST_FAILOVER = {
  'pgautofailover.health_check_period': 1_000,
  'pgautofailover.health_check_timeout': 2_000,
  'pgautofailover.health_check_max_retries': 2,
  'pgautofailover.health_check_retry_delay': 500,
  'pgautofailover.node_considered_unhealthy_timeout': 4_000,
  // Must stay above the keepers' network_partition_timeout: an old primary cut off from the
  // monitor demotes itself within that, before the standby is promoted (no split brain).
  'pgautofailover.primary_demote_timeout': 6_000,
} as const;
/** Seconds; the data nodes' keepers demote a primary that cannot reach the monitor for this long. */
const NETWORK_PARTITION_TIMEOUT_S = 3;

function findBinDir(): string | null {
  const candidates: string[] = [];
  if (process.env.PG_BIN) candidates.push(process.env.PG_BIN);
  try {
    const versions = readdirSync('/usr/lib/postgresql')
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => `/usr/lib/postgresql/${v}/bin`));
  } catch {
    // not a Debian layout
  }
  return candidates.find((dir) => existsSync(join(dir, 'pg_ctl'))) ?? null;
}

function findAutoctl(): string | null {
  try {
    return execFileSync('sh', ['-c', 'command -v pg_autoctl'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

const BIN_DIR = findBinDir();
const AUTOCTL = findAutoctl();

/** The pg_auto_failover states in which a node serves writes. */
const WRITABLE_STATES = new Set(['single', 'wait_primary', 'primary']);

export interface ClusterNode {
  readonly name: string;
  readonly port: number;
  readonly pgdata: string;
}

export interface NodeState {
  name: string;
  port: number;
  reported: string;
  goal: string;
}

export interface ClusterTimings {
  monitorMs: number;
  primaryMs: number;
  standbyMs: number;
  totalMs: number;
}

export class FailoverCluster {
  readonly timings: ClusterTimings = { monitorMs: 0, primaryMs: 0, standbyMs: 0, totalMs: 0 };
  readonly #keepers = new Map<string, ChildProcess>();
  /** PIDs of postmasters this cluster had (their System V segments are removed at the end). */
  readonly #postmasters = new Set<number>();
  /** POSIX shared-memory files of killed servers, which nobody else will remove. */
  readonly #orphanedShm = new Set<string>();
  #destroyed = false;

  private constructor(
    readonly dir: string,
    readonly monitorPort: number,
    readonly nodes: readonly ClusterNode[],
    readonly database: string,
  ) {}

  /** Whether the binaries are here; `missing()` says what to install when not. */
  static available(): boolean {
    return FailoverCluster.missing() === null;
  }

  static missing(): string | null {
    if (!BIN_DIR) return 'the PostgreSQL server binaries (set PG_BIN)';
    if (!AUTOCTL) return 'pg_autoctl (apt-get install -y pg-auto-failover-cli)';
    const version = /\/(\d+)\/bin$/.exec(BIN_DIR)?.[1] ?? '<version>';
    if (!existsSync(join(BIN_DIR, '..', 'lib', 'pgautofailover.so'))) {
      return `the pg_auto_failover extension (apt-get install -y postgresql-${version}-auto-failover)`;
    }
    if (AS_ROOT) {
      try {
        execFileSync('id', ['-u', 'postgres'], { stdio: 'ignore' });
      } catch {
        return 'the postgres OS user (PostgreSQL refuses to run as root)';
      }
    }
    return null;
  }

  /**
   * Creates the monitor, the primary (`node1`) and the standby (`node2`), and returns once the
   * standby is a synchronous `secondary` and the primary is `primary`.
   */
  static async create(options: { database?: string; fastFailover?: boolean } = {}): Promise<FailoverCluster> {
    const missing = FailoverCluster.missing();
    if (missing) throw new Error(`pg_auto_failover cannot run here: missing ${missing}`);
    const started = Date.now();
    const dir = await mkdtemp(join(tmpdir(), 'chronos-ha-'));
    const [monitorPort, port1, port2] = [await freePort(), await freePort(), await freePort()];
    const cluster = new FailoverCluster(
      dir,
      monitorPort,
      [
        { name: 'node1', port: port1, pgdata: join(dir, 'node1') },
        { name: 'node2', port: port2, pgdata: join(dir, 'node2') },
      ],
      options.database ?? 'chronos',
    );
    try {
      for (const sub of ['config', 'share', 'run']) await mkdir(join(dir, sub));
      if (AS_ROOT) {
        const { uid, gid } = postgresUser();
        for (const path of [dir, ...['config', 'share', 'run'].map((s) => join(dir, s))])
          await chown(path, uid, gid);
      }
      await cluster.#createMonitor(options.fastFailover ?? true);
      cluster.timings.monitorMs = Date.now() - started;
      const primaryStarted = Date.now();
      await cluster.#createNode(cluster.nodes[0]!);
      await cluster.#waitForStates({ node1: ['single'] }, 60_000);
      cluster.timings.primaryMs = Date.now() - primaryStarted;
      const standbyStarted = Date.now();
      await cluster.#createNode(cluster.nodes[1]!);
      await cluster.#waitForStates({ node1: ['primary'], node2: ['secondary'] }, 120_000, () =>
        // pg_basebackup waits for a spread checkpoint (minutes on an idle server); ask for one now.
        cluster.#sql(cluster.nodes[0]!.port, 'postgres', 'CHECKPOINT').catch(() => {}),
      );
      cluster.timings.standbyMs = Date.now() - standbyStarted;
      cluster.timings.totalMs = Date.now() - started;
      return cluster;
    } catch (error) {
      const logs = await cluster.logs();
      await cluster.destroy();
      throw new Error(`${(error as Error).message}\n${logs}`, { cause: error });
    }
  }

  /** `postgres://postgres@127.0.0.1:<p1>,127.0.0.1:<p2>/<db>?target_session_attrs=read-write`. */
  url(targetSessionAttrs = 'read-write', database = this.database): string {
    const hosts = this.nodes.map((n) => `127.0.0.1:${n.port}`).join(',');
    return `postgres://postgres@${hosts}/${database}?target_session_attrs=${targetSessionAttrs}`;
  }

  /** A URL for one node alone. */
  nodeUrl(node: ClusterNode, database = this.database): string {
    return `postgres://postgres@127.0.0.1:${node.port}/${database}`;
  }

  /** Each data node's state as the monitor has it. */
  async states(): Promise<NodeState[]> {
    const rows = await this.#sql<{
      nodename: string;
      nodeport: number;
      reportedstate: string;
      goalstate: string;
    }>(
      this.monitorPort,
      'pg_auto_failover',
      'SELECT nodename, nodeport, reportedstate::text, goalstate::text FROM pgautofailover.node ORDER BY nodeid',
    );
    return rows.map((r) => ({
      name: r.nodename,
      port: r.nodeport,
      reported: r.reportedstate,
      goal: r.goalstate,
    }));
  }

  /** The node the monitor has as primary (reported and assigned). */
  async primary(): Promise<ClusterNode> {
    const states = await this.states();
    const state = states.find((s) => WRITABLE_STATES.has(s.reported) && WRITABLE_STATES.has(s.goal));
    const node = state && this.nodes.find((n) => n.name === state.name);
    if (!node) throw new Error(`no primary: ${JSON.stringify(states)}`);
    return node;
  }

  /**
   * kill -9 of the primary's whole node (keeper, postmaster, every backend) at once, as if its
   * machine died. Returns the node and when it was killed (Date.now()).
   */
  async killPrimary(): Promise<{ node: ClusterNode; killedAt: number }> {
    const node = await this.primary();
    const killedAt = await this.#killNode(node);
    return { node, killedAt };
  }

  /**
   * Waits until a node other than `previous` is primary for the monitor and accepts writes;
   * returns it and when that was first seen.
   */
  async waitForPromotion(
    previous: ClusterNode,
    timeoutMs = 120_000,
  ): Promise<{ node: ClusterNode; at: number }> {
    return waitUntil(
      async () => {
        const states = await this.states().catch(() => []);
        const state = states.find(
          (s) => s.name !== previous.name && WRITABLE_STATES.has(s.reported) && WRITABLE_STATES.has(s.goal),
        );
        const node = state && this.nodes.find((n) => n.name === state.name);
        if (!node) return null;
        const rows = await this.#sql<{ read_only: string }>(
          node.port,
          this.database,
          "SELECT current_setting('transaction_read_only') AS read_only",
        ).catch(() => []);
        return rows[0]?.read_only === 'off' ? { node, at: Date.now() } : null;
      },
      { timeoutMs, intervalMs: 100, what: 'a standby promoted to primary', describe: () => this.states() },
    );
  }

  /** Every log pg_autoctl wrote, for a failure message. */
  async logs(): Promise<string> {
    const parts: string[] = [];
    for (const name of ['monitor', ...this.nodes.map((n) => n.name)]) {
      for (const kind of ['create', 'run']) {
        const text = await readFile(join(this.dir, `${name}-${kind}.log`), 'utf8').catch(() => '');
        if (text) parts.push(`--- ${name} ${kind} ---\n${text.split('\n').slice(-40).join('\n')}`);
      }
    }
    return parts.join('\n');
  }

  /** Stops every process (gracefully, then with SIGKILL), frees what they left, removes the directory. */
  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    const leftovers = new Set<number>();
    for (const pgdata of [join(this.dir, 'monitor'), ...this.nodes.map((n) => n.pgdata)]) {
      const pid = postmasterPid(pgdata);
      if (pid !== null && alive(pid)) {
        this.#postmasters.add(pid);
        leftovers.add(pid);
        for (const child of descendants(pid)) leftovers.add(child);
      }
    }
    await Promise.all(
      [...this.#keepers.values()].map(async (keeper) => {
        if (keeper.exitCode !== null || keeper.signalCode !== null) return;
        const exited = new Promise<void>((resolve) => keeper.once('close', () => resolve()));
        signalGroup(keeper, 'SIGTERM');
        const timer = setTimeout(() => signalGroup(keeper, 'SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      }),
    );
    for (const pid of leftovers) kill(pid, 'SIGKILL');
    await this.#freeSharedMemory();
    await rm(this.dir, { recursive: true, force: true });
  }

  async #createMonitor(fastFailover: boolean): Promise<void> {
    const pgdata = join(this.dir, 'monitor');
    await this.#autoctl('monitor-create', [
      'create',
      'monitor',
      '--pgdata',
      pgdata,
      '--pgport',
      String(this.monitorPort),
      '--hostname',
      '127.0.0.1',
      '--auth',
      'trust',
      '--no-ssl',
      '--pgctl',
      join(BIN_DIR!, 'pg_ctl'),
    ]);
    await this.#autoctl('monitor-config', [
      'config',
      'set',
      '--pgdata',
      pgdata,
      'postgresql.listen_addresses',
      '127.0.0.1',
    ]);
    await this.#tuneServer(pgdata);
    this.#startKeeper('monitor', pgdata);
    await waitUntil(
      () =>
        this.#sql(this.monitorPort, 'pg_auto_failover', 'SELECT 1').then(
          () => true,
          () => false,
        ),
      {
        timeoutMs: 30_000,
        what: 'the monitor to accept connections',
      },
    );
    if (fastFailover) {
      for (const [name, value] of Object.entries(FAST_FAILOVER)) {
        await this.#sql(this.monitorPort, 'pg_auto_failover', `ALTER SYSTEM SET ${name} = ${value}`);
      }
      await this.#sql(this.monitorPort, 'pg_auto_failover', 'SELECT pg_reload_conf()');
    }
  }

  async #createNode(node: ClusterNode): Promise<void> {
    await this.#autoctl(`${node.name}-create`, [
      'create',
      'postgres',
      '--pgdata',
      node.pgdata,
      '--pgport',
      String(node.port),
      '--listen',
      '127.0.0.1',
      '--hostname',
      '127.0.0.1',
      '--name',
      node.name,
      '--dbname',
      this.database,
      '--auth',
      'trust',
      '--no-ssl',
      '--pgctl',
      join(BIN_DIR!, 'pg_ctl'),
      '--monitor',
      `postgres://autoctl_node@127.0.0.1:${this.monitorPort}/pg_auto_failover?sslmode=disable`,
      '--replication-quorum',
      'true',
      '--candidate-priority',
      '50',
    ]);
    await this.#autoctl(`${node.name}-config`, [
      'config',
      'set',
      '--pgdata',
      node.pgdata,
      'timeout.network_partition_timeout',
      String(NETWORK_PARTITION_TIMEOUT_S),
    ]);
    await this.#tuneServer(node.pgdata);
    this.#startKeeper(node.name, node.pgdata);
  }

  /**
   * Dynamic shared memory in files under the data directory, so a killed server leaves nothing
   * in /dev/shm; a small server, as befits a test on a shared machine.
   */
  async #tuneServer(pgdata: string): Promise<void> {
    await appendFile(
      join(pgdata, 'postgresql.conf'),
      "\n# chronos test cluster\ndynamic_shared_memory_type = 'mmap'\nshared_buffers = '32MB'\nmax_connections = 100\nfsync = off\n",
    );
  }

  #startKeeper(name: string, pgdata: string): void {
    const log = join(this.dir, `${name}-run.log`);
    // Its own process group: the keeper, its services and the postmaster go down together.
    const child = spawn('sh', ['-c', `exec "$0" run --pgdata "$1" >>"$2" 2>&1`, AUTOCTL!, pgdata, log], {
      detached: true,
      stdio: 'ignore',
      env: this.#env(),
      ...this.#identity(),
    });
    child.unref();
    this.#keepers.set(name, child);
  }

  async #killNode(node: ClusterNode): Promise<number> {
    const keeper = this.#keepers.get(node.name);
    const postmaster = postmasterPid(node.pgdata);
    const tree: number[] = [];
    if (postmaster !== null) {
      this.#postmasters.add(postmaster);
      // Stopped first, so it forks nothing while its children are listed.
      kill(postmaster, 'SIGSTOP');
      tree.push(postmaster, ...descendants(postmaster));
      for (const pid of tree) for (const file of shmFilesOf(pid)) this.#orphanedShm.add(file);
    }
    const killedAt = Date.now();
    if (keeper) signalGroup(keeper, 'SIGKILL');
    // Backends are in process groups of their own (PostgreSQL calls setsid for each).
    for (const pid of tree) kill(pid, 'SIGKILL');
    return killedAt;
  }

  async #freeSharedMemory(): Promise<void> {
    for (const file of this.#orphanedShm) await rm(file, { force: true });
    try {
      const { stdout } = await run('ipcs', ['-m', '-p']);
      for (const line of stdout.split('\n')) {
        const [shmid, , cpid] = line.trim().split(/\s+/);
        if (shmid && /^\d+$/.test(shmid) && this.#postmasters.has(Number(cpid))) {
          await run('ipcrm', ['-m', shmid]).catch(() => {});
        }
      }
    } catch {
      // no ipcs here: nothing to free
    }
  }

  async #waitForStates(
    wanted: Record<string, string[]>,
    timeoutMs: number,
    whileWaiting?: () => Promise<unknown>,
  ): Promise<void> {
    await waitUntil(
      async () => {
        await whileWaiting?.();
        const states = await this.states().catch(() => []);
        return Object.entries(wanted).every(([name, accepted]) => {
          const state = states.find((s) => s.name === name);
          return !!state && accepted.includes(state.reported) && accepted.includes(state.goal);
        });
      },
      {
        timeoutMs,
        intervalMs: 250,
        what: `node states ${JSON.stringify(wanted)}`,
        describe: () => this.states(),
      },
    );
  }

  async #sql<T extends pg.QueryResultRow = pg.QueryResultRow>(
    port: number,
    database: string,
    text: string,
  ): Promise<T[]> {
    const client = new pg.Client({
      connectionString: `postgres://postgres@127.0.0.1:${port}/${database}`,
      connectionTimeoutMillis: 2_000,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      return (await client.query<T>(text)).rows;
    } finally {
      await client.end().catch(() => {});
    }
  }

  async #autoctl(logName: string, args: string[]): Promise<string> {
    try {
      const { stdout, stderr } = await run(AUTOCTL!, args, {
        cwd: this.dir,
        env: this.#env(),
        ...this.#identity(),
      });
      await appendFile(join(this.dir, `${logName}.log`), stdout + stderr).catch(() => {});
      return stdout;
    } catch (error) {
      const e = error as { stderr?: string; stdout?: string; message: string };
      throw new Error(`pg_autoctl ${args.slice(0, 2).join(' ')} failed: ${e.stderr || e.message}`, {
        cause: error,
      });
    }
  }

  /** Runs as the `postgres` OS user when this process is root (PostgreSQL refuses root). */
  #identity(): { uid?: number; gid?: number } {
    return AS_ROOT ? postgresUser() : {};
  }

  #env(): Record<string, string> {
    return {
      PATH: `${BIN_DIR}:/usr/bin:/bin`,
      HOME: this.dir,
      XDG_CONFIG_HOME: join(this.dir, 'config'),
      XDG_DATA_HOME: join(this.dir, 'share'),
      XDG_RUNTIME_DIR: join(this.dir, 'run'),
      PG_CONFIG: join(BIN_DIR!, 'pg_config'),
      PGHOST: '127.0.0.1',
    };
  }
}

let postgresIds: { uid: number; gid: number } | null = null;

function postgresUser(): { uid: number; gid: number } {
  if (postgresIds) return postgresIds;
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  postgresIds = { uid, gid };
  return postgresIds;
}

function postmasterPid(pgdata: string): number | null {
  try {
    const pid = Number(readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Every process below `root`, read from /proc. */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(entry));
      children.set(ppid, list);
    } catch {
      // exited meanwhile
    }
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** The /dev/shm files a process maps (PostgreSQL's dynamic shared memory, if any is there). */
function shmFilesOf(pid: number): string[] {
  try {
    const files = new Set<string>();
    for (const line of readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n')) {
      const match = /(\/dev\/shm\/PostgreSQL\.\d+)/.exec(line);
      if (match) files.add(match[1]!);
    }
    // The mapped file may be gone already; keep only those still there.
    return [...files].filter((f) => existsSync(f) && !readlinkSafe(f));
  } catch {
    return [];
  }
}

function readlinkSafe(path: string): string | null {
  try {
    return readlinkSync(path);
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function kill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid !== undefined) kill(-child.pid, signal);
}
