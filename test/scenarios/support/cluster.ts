/**
 * A private PostgreSQL server for the scenario that restarts the database: `initdb` into a
 * temporary directory, started on a free port with its socket in that directory, restarted
 * (fast shutdown) when the scenario says, and removed afterwards.
 *
 * The machine's own PostgreSQL is shared with other test runs and is never stopped; this one
 * belongs to one test file. PostgreSQL refuses to run as root, so under root (CI) every
 * command runs as the `postgres` OS user through `runuser`.
 *
 * The binaries are found through `PG_BIN`, `pg_config --bindir`, or the newest
 * `/usr/lib/postgresql/<version>/bin`; `PrivateCluster.available()` says whether they were.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../cli/support.js';

const run = promisify(execFile);

function findBinDir(): string | null {
  const candidates: string[] = [];
  if (process.env.PG_BIN) candidates.push(process.env.PG_BIN);
  try {
    candidates.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim());
  } catch {
    // no pg_config on the PATH
  }
  try {
    const versions = readdirSync('/usr/lib/postgresql')
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => `/usr/lib/postgresql/${v}/bin`));
  } catch {
    // not a Debian layout
  }
  return candidates.find((dir) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) ?? null;
}

const BIN_DIR = findBinDir();
const AS_ROOT = userInfo().uid === 0;

export class PrivateCluster {
  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  /** Whether a private cluster can be made here (the PostgreSQL server binaries are installed). */
  static available(): boolean {
    return BIN_DIR !== null;
  }

  /** initdb, then start. `settings` are extra `-c name=value` server settings. */
  static async create(settings: Record<string, string> = {}): Promise<PrivateCluster> {
    if (!BIN_DIR) throw new Error('no PostgreSQL server binaries found (set PG_BIN to their directory)');
    const dir = await mkdtemp(join(tmpdir(), 'chronos-pg-'));
    if (AS_ROOT) {
      const { uid, gid } = await postgresUser();
      await chown(dir, uid, gid);
    }
    const cluster = new PrivateCluster(dir, await freePort());
    await cluster.#pg('initdb', [
      '-D',
      cluster.dataDir,
      '--auth=trust',
      '-U',
      'postgres',
      '-E',
      'UTF8',
      '--no-sync',
    ]);
    cluster.#options = [
      `-p ${cluster.port}`,
      `-k ${dir}`,
      "-c listen_addresses='127.0.0.1'",
      '-c max_connections=200',
      ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`),
    ].join(' ');
    await cluster.start();
    return cluster;
  }

  #options = '';

  get dataDir(): string {
    return join(this.dir, 'data');
  }

  /** A URL for `database` on this server (user `postgres`, trusted). */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  async start(): Promise<void> {
    await this.#pg('pg_ctl', [
      'start',
      '-w',
      '-D',
      this.dataDir,
      '-l',
      join(this.dir, 'server.log'),
      '-o',
      this.#options,
    ]);
  }

  /** Stops the server; `fast` (the default) disconnects every client and rolls back their work. */
  async stop(mode: 'fast' | 'immediate' | 'smart' = 'fast'): Promise<void> {
    await this.#pg('pg_ctl', ['stop', '-w', '-D', this.dataDir, '-m', mode]);
  }

  /** `pg_ctl restart -m fast`. */
  async restart(): Promise<void> {
    await this.#pg('pg_ctl', [
      'restart',
      '-w',
      '-D',
      this.dataDir,
      '-m',
      'fast',
      '-l',
      join(this.dir, 'server.log'),
      '-o',
      this.#options,
    ]);
  }

  /** Creates a database and returns its URL. */
  async createDatabase(name: string): Promise<string> {
    await this.#pg('createdb', ['-h', '127.0.0.1', '-p', String(this.port), '-U', 'postgres', name]);
    return this.url(name);
  }

  async log(): Promise<string> {
    return readFile(join(this.dir, 'server.log'), 'utf8').catch(() => '');
  }

  /** Stops the server (immediately) and removes its directory. */
  async destroy(): Promise<void> {
    await this.stop('immediate').catch(() => {});
    await rm(this.dir, { recursive: true, force: true });
  }

  async #pg(program: string, args: string[]): Promise<string> {
    const path = join(BIN_DIR!, program);
    const [command, argv] = AS_ROOT ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, args];
    try {
      const { stdout } = await run(command, argv, { cwd: this.dir });
      return stdout;
    } catch (error) {
      const e = error as { stderr?: string; message: string };
      throw new Error(`${program} ${args.join(' ')} failed: ${e.stderr || e.message}\n${await this.log()}`, {
        cause: error,
      });
    }
  }
}

async function postgresUser(): Promise<{ uid: number; gid: number }> {
  const { stdout } = await run('id', ['-u', 'postgres']);
  const { stdout: gid } = await run('id', ['-g', 'postgres']);
  return { uid: Number(stdout.trim()), gid: Number(gid.trim()) };
}
