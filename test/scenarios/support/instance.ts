/**
 * One Chronos instance as production runs it: `node bin/chronos.js serve` in a child process of
 * its own (its own process group), on a port it keeps across restarts. A scenario kills it
 * (SIGKILL), stops it (SIGTERM), restarts it, and reads its `/readyz`, `/metrics` and log lines.
 *
 * Every instance started is killed when the test file ends (`stopAll`), and with SIGKILL if the
 * test process itself exits, so a failed scenario leaves no server behind.
 */
import { childEnv, freePort, BIN, Spawned } from '../../cli/support.js';

const running = new Set<Spawned>();
/** Every instance this test process created, so a file's teardown can stop them all. */
const created = new Set<Instance>();
process.once('exit', () => {
  for (const child of running) child.signal('SIGKILL');
});

export interface Incarnation {
  pid: number;
  startedAt: number;
  /** When it was killed or stopped, and how. */
  endedAt?: number;
  ending?: 'SIGKILL' | 'SIGTERM';
  exitCode?: number | null;
}

export class Instance {
  readonly incarnations: Incarnation[] = [];
  /** Log lines of every incarnation, oldest first. */
  readonly lines: string[] = [];
  /** Standard error of every incarnation. */
  stderr = '';
  #process: Spawned | null = null;
  #linesBefore = 0;

  private constructor(
    readonly name: string,
    readonly port: number,
    private env: Record<string, string>,
  ) {}

  static async create(name: string, env: Record<string, string>): Promise<Instance> {
    const instance = new Instance(name, await freePort(), env);
    created.add(instance);
    return instance;
  }

  /** Every instance created in this test process so far. */
  static created(): Instance[] {
    return [...created];
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    const child = this.#process?.child;
    return !!child && child.exitCode === null && child.signalCode === null;
  }

  get pid(): number | undefined {
    return this.#process?.child.pid;
  }

  /** Changes the environment of the next start. */
  configure(env: Record<string, string>): void {
    this.env = { ...this.env, ...env };
  }

  /** Starts the server and resolves once it logs that it serves. */
  async start(): Promise<void> {
    if (this.running) throw new Error(`${this.name} is already running`);
    this.#collect();
    const spawned = new Spawned(process.execPath, [BIN, 'serve'], {
      env: childEnv({ LOG_LEVEL: 'info', HOST: '127.0.0.1', ...this.env, PORT: String(this.port) }),
    });
    this.#process = spawned;
    running.add(spawned);
    void spawned.exited.then(() => running.delete(spawned));
    this.incarnations.push({ pid: spawned.child.pid!, startedAt: Date.now() });
    await spawned.waitFor(/chronos is serving/);
  }

  /** SIGKILL: the process dies where it stands. */
  async kill(): Promise<Incarnation> {
    return this.#end('SIGKILL');
  }

  /** SIGTERM: the graceful shutdown. Resolves with the exit code once the process has exited. */
  async terminate(): Promise<Incarnation> {
    return this.#end('SIGTERM');
  }

  async #end(signal: 'SIGKILL' | 'SIGTERM'): Promise<Incarnation> {
    const spawned = this.#process;
    const incarnation = this.incarnations.at(-1);
    if (!spawned || !incarnation || !this.running) throw new Error(`${this.name} is not running`);
    incarnation.endedAt = Date.now();
    incarnation.ending = signal;
    spawned.signal(signal);
    incarnation.exitCode = await spawned.exited;
    return incarnation;
  }

  /** Log lines of the current (or last) incarnation. */
  currentLines(): string[] {
    return this.#process ? this.#process.lines : [];
  }

  /** Log lines of every incarnation, parsed (non-JSON lines are skipped). */
  logs(): Record<string, unknown>[] {
    this.#collect();
    const parsed: Record<string, unknown>[] = [];
    for (const line of this.lines) {
      try {
        parsed.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // not a log line
      }
    }
    return parsed;
  }

  /** Moves the current incarnation's output into `lines`/`stderr` (once per incarnation). */
  #collect(): void {
    const spawned = this.#process;
    if (!spawned) return;
    this.lines.push(...spawned.lines.slice(this.#linesBefore));
    this.#linesBefore = spawned.lines.length;
    if (!this.running) {
      this.stderr += spawned.stderr;
      spawned.stderr = '';
      this.#process = null;
      this.#linesBefore = 0;
    }
  }

  /** `GET /readyz`'s status, or 0 when nothing answers. */
  async readyz(timeoutMs = 2_000): Promise<number> {
    try {
      const response = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(timeoutMs) });
      await response.arrayBuffer();
      return response.status;
    } catch {
      return 0;
    }
  }

  /** The sum of a Prometheus series' samples whose labels include `labels`, from `/metrics`. */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    const text = await (await fetch(`${this.url}/metrics`)).text();
    let total = 0;
    for (const line of text.split('\n')) {
      if (!line.startsWith(name)) continue;
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$/.exec(line);
      if (!match || match[1] !== name) continue;
      const labelText = match[2] ?? '';
      if (Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`))) {
        total += Number(match[3]);
      }
    }
    return total;
  }

  /** Stops it if it runs (SIGKILL: at the end of a test nothing more is to be learnt from it). */
  async stop(): Promise<void> {
    if (this.running) await this.kill();
    this.#collect();
  }
}

/** Kills every instance given that still runs. */
export async function stopAll(instances: readonly Instance[]): Promise<void> {
  await Promise.all(instances.map((i) => i.stop()));
}
