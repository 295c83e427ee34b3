/**
 * A real PgBouncer (Debian's `pgbouncer`, 1.18) for the pooler tests: transaction pooling by
 * default, in a temporary directory, on a free port of 127.0.0.1, in front of one PostgreSQL
 * server (every database on it, `* = host=… port=…`), `auth_type = trust` with the connecting
 * users listed in its auth file (PgBouncer requires them there even under trust).
 *
 * PgBouncer refuses to run as root, so under root (CI) it runs as the `postgres` OS user. The
 * pool is small on purpose (`poolSize`, default 2 server connections per database and user), so
 * a test can tell which client lands on which server connection. `stop()` shuts it down
 * (SIGTERM, then SIGKILL) and removes the directory.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../cli/support.js';
import { waitUntil } from './scenario.js';

const AS_ROOT = userInfo().uid === 0;

function findPgbouncer(): string | null {
  for (const candidate of [process.env.PGBOUNCER_BIN, '/usr/sbin/pgbouncer', '/usr/bin/pgbouncer']) {
    if (candidate && existsSync(candidate)) return candidate;
  }
  return null;
}

const BINARY = findPgbouncer();

export interface PgBouncerOptions {
  /** The PostgreSQL server behind it. */
  serverHost: string;
  serverPort: number;
  /** Users allowed to connect (trust: no password is checked). */
  users: string[];
  poolMode?: 'transaction' | 'session' | 'statement';
  /** Server connections per database and user. */
  poolSize?: number;
}

export class PgBouncer {
  #child: ChildProcess | null = null;

  private constructor(
    readonly dir: string,
    readonly port: number,
    readonly options: Required<PgBouncerOptions>,
  ) {}

  /** Whether Debian's pgbouncer is installed (`apt-get install -y pgbouncer`). */
  static available(): boolean {
    return BINARY !== null;
  }

  static async start(options: PgBouncerOptions): Promise<PgBouncer> {
    if (!BINARY) throw new Error('pgbouncer is not installed (apt-get install -y pgbouncer)');
    const dir = await mkdtemp(join(tmpdir(), 'chronos-pgbouncer-'));
    const bouncer = new PgBouncer(dir, await freePort(), {
      poolMode: 'transaction',
      poolSize: 2,
      ...options,
    });
    try {
      await bouncer.#writeConfig();
      bouncer.#spawn();
      await waitUntil(() => canConnect(bouncer.port), {
        timeoutMs: 15_000,
        intervalMs: 50,
        what: 'pgbouncer to listen',
        describe: () => bouncer.log(),
      });
      return bouncer;
    } catch (error) {
      await bouncer.stop();
      throw error;
    }
  }

  /** The pgbouncer process (for its CPU time); undefined once stopped. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** A URL for `database` through PgBouncer. */
  url(database: string, user = this.options.users[0]!): string {
    return `postgres://${encodeURIComponent(user)}@127.0.0.1:${this.port}/${database}`;
  }

  async log(): Promise<string> {
    return readFile(join(this.dir, 'pgbouncer.log'), 'utf8').catch(() => '');
  }

  async stop(): Promise<void> {
    const child = this.#child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    this.#child = null;
    await rm(this.dir, { recursive: true, force: true });
  }

  async #writeConfig(): Promise<void> {
    const { serverHost, serverPort, users, poolMode, poolSize } = this.options;
    const ini = [
      '[databases]',
      `* = host=${serverHost} port=${serverPort}`,
      '',
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${this.port}`,
      "unix_socket_dir = ''",
      'auth_type = trust',
      `auth_file = ${join(this.dir, 'userlist.txt')}`,
      `pool_mode = ${poolMode}`,
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 200',
      // Server connections are reused last-in, first-out (PgBouncer's default), stated here
      // because the tests rely on it.
      'server_round_robin = 0',
      `logfile = ${join(this.dir, 'pgbouncer.log')}`,
      `pidfile = ${join(this.dir, 'pgbouncer.pid')}`,
      `admin_users = ${users.join(', ')}`,
      '',
    ].join('\n');
    await writeFile(join(this.dir, 'pgbouncer.ini'), ini);
    await writeFile(join(this.dir, 'userlist.txt'), users.map((u) => `"${u}" ""\n`).join(''));
    if (AS_ROOT) {
      const { uid, gid } = postgresUser();
      for (const file of ['', 'pgbouncer.ini', 'userlist.txt']) await chown(join(this.dir, file), uid, gid);
    }
  }

  #spawn(): void {
    const child = spawn(BINARY!, [join(this.dir, 'pgbouncer.ini')], {
      cwd: this.dir,
      stdio: 'ignore',
      ...(AS_ROOT ? postgresUser() : {}),
    });
    child.unref();
    this.#child = child;
  }
}

function postgresUser(): { uid: number; gid: number } {
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
