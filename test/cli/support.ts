/**
 * The built CLI as a user runs it: `node bin/chronos.js …` in the project root, in a child
 * process, with an environment of the test's choosing (never the developer's DATABASE_URL or
 * data directory). A spawned server is watched through its log lines: tests wait for a line,
 * never for a duration.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { startServer, type RunningServer } from '../../packages/chronos-timers-server/src/server.js';
import { TMP_DIR } from '../support/env.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BIN = join(ROOT, 'packages', 'chronos-timers-server', 'bin', 'chronos.js');

/** The environment of a child: this one without anything that would point it at a real store. */
export function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined || name === 'DATABASE_URL' || name === 'PORT' || name.startsWith('CHRONOS_'))
      continue;
    if (name === 'NODE_OPTIONS') continue; // vitest's loader hooks are not the CLI's
    env[name] = value;
  }
  return { ...env, LOG_LEVEL: 'info', ...extra };
}

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `chronos <args>` to completion with `env`, and `input` on its standard input (then closed). */
export function runChronos(args: string[], env: Record<string, string>, input = ''): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: childEnv(env) });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

export async function tempDataDir(): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(TMP_DIR, 'cli-'));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * For the suite it is called in: `chronos serve`'s server in this process, holding an embedded
 * store in a new directory (the CLI reaches it through the store's control socket). `dir` and
 * `server` are there once the suite's beforeAll has run.
 */
export function serverOnNewStore(): { readonly dir: string; readonly server: RunningServer } {
  let data: Awaited<ReturnType<typeof tempDataDir>> | null = null;
  let server: RunningServer | null = null;
  beforeAll(async () => {
    data = await tempDataDir();
    server = await startServer(loadConfig({ CHRONOS_DATA_DIR: data.dir, PORT: '0', HOST: '127.0.0.1' }), {
      logger: silentLogger,
    });
  });
  afterAll(async () => {
    await server?.shutdown();
    await data?.remove();
  });
  return {
    get dir() {
      if (!data) throw new Error('the store is made in a beforeAll hook');
      return data.dir;
    },
    get server() {
      if (!server) throw new Error('the server is started in a beforeAll hook');
      return server;
    },
  };
}

/** A port nobody listens on right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A long-running child (a server) whose output is kept and can be waited on line by line. */
export class Spawned {
  readonly child: ChildProcess;
  readonly lines: string[] = [];
  stderr = '';
  readonly exited: Promise<number | null>;
  #waiters: { test: (line: string) => boolean; resolve: (line: string) => void }[] = [];

  constructor(command: string, args: string[], options: { env: NodeJS.ProcessEnv; cwd?: string }) {
    // Its own process group, so the whole tree (npm → sh → node) can be signalled and cleaned up.
    this.child = spawn(command, args, { cwd: options.cwd ?? ROOT, env: options.env, detached: true });
    let partial = '';
    this.child.stdout!.on('data', (chunk: Buffer) => {
      partial += chunk.toString();
      const parts = partial.split('\n');
      partial = parts.pop()!;
      for (const line of parts) this.#line(line);
    });
    this.child.stderr!.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.exited = new Promise((resolve) => this.child.on('close', (code) => resolve(code)));
  }

  #line(line: string): void {
    this.lines.push(line);
    for (const waiter of [...this.#waiters]) {
      if (waiter.test(line)) {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
    }
  }

  /** Resolves with the first line (already seen or to come) matching `pattern`; rejects if the child exits first. */
  waitFor(pattern: RegExp): Promise<string> {
    const seen = this.lines.find((l) => pattern.test(l));
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      this.#waiters.push({ test: (l) => pattern.test(l), resolve });
      void this.exited.then((code) =>
        reject(
          new Error(`exited (${code}) before logging ${pattern}:\n${this.lines.join('\n')}\n${this.stderr}`),
        ),
      );
    });
  }

  /** Sends `signal` to the child's whole process group. */
  signal(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.child.pid!, signal);
    } catch {
      // already gone
    }
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.signal('SIGTERM');
    await this.exited;
  }
}
