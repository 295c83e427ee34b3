/**
 * The bulk routes through `chronos serve` (issue 14): `POST /v1/alarms/batch` with 1,000 alarms
 * and `POST /v1/alarms/bulk-cancel` of 1,000 alarms by id, one request at a time, latency from
 * just before the request is sent to its last byte. Target (PostgreSQL): each ≤ 100 ms p50.
 *
 * The server runs as its own process (`node bin/chronos.js serve`) on a dedicated PostgreSQL
 * database with quotas off (an operator's bulk work); each round creates a batch, then cancels
 * it by ids. The first `--warmup` rounds are not counted.
 *
 *   npx tsx bench/http-batch.ts [--rounds=30] [--warmup=3] [--size=1000] [--quiet=20]
 */
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { KeyService } from '../packages/chronos-timers/src/core/key-service.js';
import { createPostgres, log, numberArg, summarize, waitForQuiet, writeResult } from './support.js';

const BIN = fileURLToPath(new URL('../packages/chronos-timers-server/bin/chronos.js', import.meta.url));
const OWNER = 'did:matrix:6f1c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10:bench';
const rounds = numberArg('rounds', 30);
const warmup = numberArg('warmup', 3);
const size = numberArg('size', 1_000);

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const bench = await createPostgres('http_batch');
const port = await freePort();
const server = spawn(process.execPath, [BIN, 'serve'], {
  env: {
    ...process.env,
    DATABASE_URL: bench.url!,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    CHRONOS_CREATE_RATE: '0',
    CHRONOS_MAX_ACTIVE_ALARMS: '0',
  },
  stdio: ['ignore', 'inherit', 'inherit'],
});
const client = new Pool(`http://127.0.0.1:${port}`, { connections: 1 });
try {
  const { key } = await new KeyService(bench.db).create(OWNER, 'bench');
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  for (let i = 0; ; i++) {
    try {
      const r = await client.request({ method: 'GET', path: '/readyz' });
      await r.body.text();
      if (r.statusCode === 200) break;
    } catch {
      // not listening yet
    }
    if (i > 300) throw new Error('the server did not become ready');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const post = async (path: string, body: string) => {
    const started = performance.now();
    const response = await client.request({ method: 'POST', path, headers, body });
    const text = await response.body.text();
    const ms = performance.now() - started;
    if (response.statusCode >= 300) throw new Error(`${path}: ${response.statusCode} ${text.slice(0, 300)}`);
    return { ms, json: JSON.parse(text) as Record<string, unknown> };
  };

  const load = await waitForQuiet();
  const created: number[] = [];
  const cancelled: number[] = [];
  for (let round = 0; round < warmup + rounds; round++) {
    const alarms = Array.from({ length: size }, (_, i) => ({
      in_seconds: 3_600 + i,
      label: `bulk-${round}`,
      payload: { i, round },
    }));
    const batch = await post('/v1/alarms/batch', JSON.stringify({ alarms }));
    const ids = (batch.json.results as { alarm: { id: string } }[]).map((r) => r.alarm.id);
    const cancel = await post('/v1/alarms/bulk-cancel', JSON.stringify({ ids }));
    if (cancel.json.cancelled !== size)
      throw new Error(`cancelled ${String(cancel.json.cancelled)} of ${size}`);
    if (round >= warmup) {
      created.push(batch.ms);
      cancelled.push(cancel.ms);
    }
  }
  const result = {
    size,
    rounds,
    load,
    batchCreateMs: summarize(created),
    bulkCancelMs: summarize(cancelled),
  };
  log(`batch create of ${size}: p50 ${result.batchCreateMs.p50} ms, p99 ${result.batchCreateMs.p99} ms`);
  log(`bulk cancel of ${size}: p50 ${result.bulkCancelMs.p50} ms, p99 ${result.bulkCancelMs.p99} ms`);
  await writeResult('http-batch', result);
} finally {
  await client.close();
  server.kill('SIGTERM');
  await new Promise((resolve) => server.once('exit', resolve));
  await bench.drop();
}
