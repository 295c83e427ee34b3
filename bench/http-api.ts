/**
 * HTTP API throughput: creates per second and GET-by-id per second through `chronos serve`, from
 * a keep-alive undici client with 16 connections, on a dedicated PostgreSQL database.
 *
 * The server runs as its own process (`node bin/chronos.js serve`), as in production; the client
 * runs here. Both share the machine with PostgreSQL. Each request's latency is measured from
 * just before it is sent to its last byte. Every create goes through authentication, validation,
 * the per-owner quota checks and the insert: keys for `--owners` owners (default 256, so no
 * owner reaches the default create rate of 120 a minute) are used round-robin.
 *
 *   npm run bench:http -- [--runs=3] [--seconds=10] [--connections=16] [--owners=256] [--log=info]
 *                         [--quiet=30]   (wait before each phase until CPU pressure is under 30 %)
 *                         [--name=<result file name>] [--serve-with=<server script, for experiments>]
 * The server inherits this environment (e.g. CHRONOS_CREATE_RATE=0 to measure without quotas).
 *
 * `--pgbouncer` (issue 16): a second `chronos serve` on the same database through a real
 * PgBouncer in transaction mode (Debian's 1.18, test/scenarios/support/pgbouncer.ts, 20 server
 * connections: as many as one instance's pool, so it measures the hop rather than queueing), with
 * `CHRONOS_DB_POOLER=transaction` and `CHRONOS_LISTEN_URL` direct; each run measures both servers
 * in turn (creates direct, creates through PgBouncer, then the GETs), so drift falls on both.
 * PgBouncer's CPU is counted with PostgreSQL's. Result: bench/results/http-api-pgbouncer.json.
 *
 * Targets (issue 3): ≥ 1,500 creates/s with p99 ≤ 30 ms; ≥ 5,000 GET-by-id/s.
 */
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { KeyService } from '../packages/chronos-timers/src/core/key-service.js';
import { sql } from '../packages/chronos-timers/src/store/driver/db.js';
import { PgBouncer } from '../test/scenarios/support/pgbouncer.js';
import {
  createPostgres,
  log,
  numberArg,
  processCpuMs,
  summarize,
  writeResult,
  type Load,
} from './support.js';
import { quietEnough } from './webhook-support.js';

const BIN = fileURLToPath(new URL('../packages/chronos-timers-server/bin/chronos.js', import.meta.url));
const seconds = numberArg('seconds', 10);
const connections = numberArg('connections', 16);
const owners = numberArg('owners', 256);
const logLevel = process.argv.find((a) => a.startsWith('--log='))?.slice(6) ?? 'info';
const runCount = numberArg('runs', 3);
const viaPgBouncer = process.argv.includes('--pgbouncer');

type Measured = Awaited<ReturnType<typeof measureCpu>>;

function describe(m: Measured): string {
  return (
    `${m.perSecond}/s, p50 ${m.latencyMs.p50} ms, p99 ${m.latencyMs.p99} ms ${JSON.stringify(m.statuses)}; ` +
    `CPU µs/request ${JSON.stringify(m.cpuMicrosPerRequest)} → CPU-bound capacity on 2 cores ${m.cpuBoundPerSecondOn2Cores}/s`
  );
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** CPU seconds (user + system) a process has used so far; 0 once it is gone. */
function cpuSeconds(pid: number | 'self'): number {
  return (processCpuMs(pid) ?? 0) / 1000;
}

interface CpuUse {
  server: number;
  client: number;
  /** The database's backends, and PgBouncer when the server goes through it. */
  postgres: number;
}

/** CPU used by the server, this client and the database's backends, per request, in microseconds. */
async function measureCpu(
  serverPid: number,
  backends: () => Promise<number[]>,
  work: () => Promise<Phase>,
  bouncerPid?: number,
) {
  // Backends opened during the phase count from zero.
  const backendsBefore = new Map((await backends()).map((pid) => [pid, cpuSeconds(pid)]));
  const bouncer = () => (bouncerPid === undefined ? 0 : cpuSeconds(bouncerPid));
  const before: CpuUse = {
    server: cpuSeconds(serverPid),
    client: cpuSeconds('self'),
    postgres: [...backendsBefore.values()].reduce((a, b) => a + b, 0) + bouncer(),
  };
  const result = await work();
  const backendsAfter = new Set([...backendsBefore.keys(), ...(await backends())]);
  const after: CpuUse = {
    server: cpuSeconds(serverPid),
    client: cpuSeconds('self'),
    postgres: [...backendsAfter].reduce((a, pid) => a + cpuSeconds(pid), 0) + bouncer(),
  };
  // Counted over warm-up and measurement alike: divide by every request sent.
  const per = (k: keyof CpuUse) => Math.round(((after[k] - before[k]) / result.sent) * 1e6);
  const cpuMicrosPerRequest = { server: per('server'), client: per('client'), postgres: per('postgres') };
  const serverAndDb = cpuMicrosPerRequest.server + cpuMicrosPerRequest.postgres;
  return {
    ...result,
    cpuMicrosPerRequest,
    // What 2 otherwise idle cores could serve if CPU were the only limit (client excluded).
    cpuBoundPerSecondOn2Cores: serverAndDb > 0 ? Math.round((2 * 1e6) / serverAndDb) : null,
  };
}

interface Phase {
  /** Requests sent, warm-up included (for CPU accounting). */
  sent: number;
  requests: number;
  errors: number;
  perSecond: number;
  latencyMs: ReturnType<typeof summarize>;
  statuses: Record<string, number>;
}

/** Runs `connections` loops of `send` for `ms`, after a warm-up of `warmupMs` that is not counted. */
async function phase(send: (i: number) => Promise<number>, ms: number, warmupMs = 2_000): Promise<Phase> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let counting = false;
  let stop = false;
  let n = 0;
  const loops = Array.from({ length: connections }, async () => {
    while (!stop) {
      const i = n++;
      const started = performance.now();
      const status = await send(i);
      if (counting) {
        latencies.push(performance.now() - started);
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
    }
  });
  await new Promise((resolve) => setTimeout(resolve, warmupMs));
  counting = true;
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, ms));
  counting = false;
  const elapsed = performance.now() - started;
  stop = true;
  await Promise.all(loops);
  const ok = Object.entries(statuses)
    .filter(([s]) => Number(s) < 300)
    .reduce((a, [, c]) => a + c, 0);
  return {
    sent: n,
    requests: latencies.length,
    errors: latencies.length - ok,
    perSecond: Math.round((ok / elapsed) * 1000),
    latencyMs: summarize(latencies),
    statuses,
  };
}

interface Server {
  label: string;
  pid: number;
  client: Pool;
  /** PgBouncer's pid, when the server goes through it. */
  bouncerPid?: number;
  stop(): Promise<void>;
}

/** `chronos serve` (or `entry`) as its own process with `env`, and a client pool for it, once ready. */
async function startServer(
  label: string,
  entry: string | undefined,
  env: Record<string, string>,
): Promise<Server> {
  const port = await freePort();
  const child = spawn(process.execPath, entry ? ['--import', 'tsx', entry] : [BIN, 'serve'], {
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: logLevel },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const client = new Pool(`http://127.0.0.1:${port}`, { connections, pipelining: 1 });
  const server: Server = {
    label,
    pid: child.pid!,
    client,
    stop: async () => {
      await client.close();
      child.kill('SIGTERM');
      if (child.exitCode === null) await new Promise((resolve) => child.once('exit', resolve));
    },
  };
  // Ready when /readyz answers.
  for (;;) {
    try {
      const r = await client.request({ method: 'GET', path: '/readyz' });
      await r.body.dump();
      if (r.statusCode === 200) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null) throw new Error(`${label}: the server exited (${child.exitCode})`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  log(`${label}: server up on port ${port}`);
  return server;
}

async function main(): Promise<void> {
  const bench = await createPostgres('http');
  // --serve-with=<script>: run another server entry instead of `chronos serve` (experiments).
  const entry = process.argv.find((a) => a.startsWith('--serve-with='))?.slice('--serve-with='.length);
  const servers: Server[] = [];
  let bouncer: PgBouncer | null = null;
  try {
    servers.push(await startServer('direct', entry, { DATABASE_URL: bench.url! }));
    if (viaPgBouncer) {
      const url = new URL(bench.url!);
      bouncer = await PgBouncer.start({
        serverHost: url.hostname,
        serverPort: Number(url.port || 5432),
        users: [decodeURIComponent(url.username)],
        poolSize: 20,
      });
      const through = await startServer('pgbouncer', entry, {
        DATABASE_URL: bouncer.url(url.pathname.slice(1)),
        CHRONOS_DB_POOLER: 'transaction',
        CHRONOS_LISTEN_URL: bench.url!,
      });
      servers.push({ ...through, bouncerPid: bouncer.pid });
    }
    const keys = new KeyService(bench.db);
    const auth: string[] = [];
    // Owners of their own for every run and server, so none nears the create rate.
    for (let i = 0; i < owners * runCount * servers.length; i++) {
      const uuid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      auth.push(`Bearer ${(await keys.create(`did:matrix:${uuid}:bench`)).key}`);
    }
    log(`${owners} owners, ${connections} connections, ${seconds} s per phase`);

    const backends = async () =>
      (
        await bench.db.query<{ pid: number }>(
          sql(
            'bench_backends',
            'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
          ),
        )
      ).map((r) => r.pid);
    type RunResult = { server: string; load: Load; creates: Measured; getById: Measured };
    const runs: RunResult[] = [];
    for (let run = 0; run < runCount; run++) {
      const created = new Map(servers.map((s) => [s, [] as { id: string; owner: number }[]]));
      const results = new Map<Server, Partial<RunResult>>();
      for (const [n, server] of servers.entries()) {
        // Each run and server uses owners of its own, so no owner nears the create rate.
        const ownerOf = (i: number) => (run * servers.length + n) * owners + (i % owners);
        const mine = created.get(server)!;
        const load = await quietEnough();
        const creates = await measureCpu(
          server.pid,
          backends,
          () =>
            phase(async (i) => {
              const owner = ownerOf(i);
              const r = await server.client.request({
                method: 'POST',
                path: '/v1/alarms',
                headers: { authorization: auth[owner]!, 'content-type': 'application/json' },
                body: `{"in_seconds": 3600, "label": "bench ${i}", "payload": {"i": ${i}, "big": 12345678901234567890}}`,
              });
              const text = await r.body.text();
              if (r.statusCode === 201 && mine.length < 20_000) mine.push({ id: text.slice(16, 52), owner });
              return r.statusCode;
            }, seconds * 1_000),
          server.bouncerPid,
        );
        log(`run ${run + 1}, ${server.label}: creates ${describe(creates)}`);
        results.set(server, { server: server.label, load, creates });
      }
      for (const server of servers) {
        const mine = created.get(server)!;
        await quietEnough();
        const getById = await measureCpu(
          server.pid,
          backends,
          () =>
            phase(async (i) => {
              const alarm = mine[(i * 7919) % mine.length]!;
              const r = await server.client.request({
                method: 'GET',
                path: `/v1/alarms/${alarm.id}`,
                headers: { authorization: auth[alarm.owner]! },
              });
              await r.body.dump();
              return r.statusCode;
            }, seconds * 1_000),
          server.bouncerPid,
        );
        log(`run ${run + 1}, ${server.label}: GET by id ${describe(getById)}`);
        runs.push({ ...results.get(server)!, getById } as RunResult);
      }
    }
    const summaryOf = (label: string) => {
      const mine = runs.filter((r) => r.server === label);
      const median = (pick: (r: RunResult) => number) => {
        const values = mine.map(pick).sort((a, b) => a - b);
        return values[Math.floor(values.length / 2)]!;
      };
      return {
        createsPerSecond: median((r) => r.creates.perSecond),
        createP50Ms: median((r) => r.creates.latencyMs.p50),
        createP99Ms: median((r) => r.creates.latencyMs.p99),
        createCpuUs: {
          server: median((r) => r.creates.cpuMicrosPerRequest.server),
          postgres: median((r) => r.creates.cpuMicrosPerRequest.postgres),
        },
        getsPerSecond: median((r) => r.getById.perSecond),
        getP50Ms: median((r) => r.getById.latencyMs.p50),
        getP99Ms: median((r) => r.getById.latencyMs.p99),
        getCpuUs: {
          server: median((r) => r.getById.cpuMicrosPerRequest.server),
          postgres: median((r) => r.getById.cpuMicrosPerRequest.postgres),
        },
      };
    };
    const summary = viaPgBouncer
      ? Object.fromEntries(servers.map((s) => [s.label, summaryOf(s.label)]))
      : summaryOf('direct');
    log(`median of ${runCount}: ${JSON.stringify(summary)}`);

    const name = process.argv.find((a) => a.startsWith('--name='))?.slice('--name='.length);
    const fallbackName = viaPgBouncer
      ? 'http-api-pgbouncer'
      : entry
        ? 'http-api-experiment'
        : `http-api-log-${logLevel}`;
    const path = await writeResult(name ?? fallbackName, {
      command: `npm run bench:http -- ${process.argv.slice(2).join(' ')}`.trim(),
      settings: {
        seconds,
        connections,
        owners,
        logLevel,
        runs: runCount,
        ...(viaPgBouncer
          ? { pgbouncer: { version: '1.18 (Debian 12)', poolMode: 'transaction', defaultPoolSize: 20 } }
          : {}),
      },
      summary,
      runs,
      targets: { createsPerSecond: 1_500, createP99Ms: 30, getsPerSecond: 5_000 },
    });
    log(`wrote ${path}`);
  } finally {
    for (const server of servers) await server.stop();
    await bouncer?.stop();
    await bench.drop();
  }
}

await main();
