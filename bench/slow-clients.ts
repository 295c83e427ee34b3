/**
 * Slow clients (issue 45): 200 sockets each sending a chunked `POST /v1/alarms` body a byte a
 * second (half with a valid key, half with a wrong one), while `/healthz` is asked every 100 ms.
 * Reports `/healthz` latency while they dribble, and how many of the 200 sockets are still open
 * once `CHRONOS_REQUEST_TIMEOUT` (plus Node's 1 s check interval) has passed.
 *
 *   DATABASE_URL=postgres://root@127.0.0.1:5432/test npx tsx bench/slow-clients.ts \
 *     [--sockets=200] [--timeout=10s]
 *
 * Runs the server in this process on its own schema (`chronos_bench_slow`).
 */
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../packages/chronos-timers/src/config.js';
import { silentLogger } from '../packages/chronos-timers/src/logger.js';
import { startServer } from '../packages/chronos-timers-server/src/server.js';

const arg = (name: string, fallback: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const count = Number(arg('sockets', '200'));
const timeout = arg('timeout', '10s');

const config = loadConfig({
  ...process.env,
  CHRONOS_SCHEMA: 'chronos_bench_slow',
  PORT: '0',
  HOST: '127.0.0.1',
  CHRONOS_REQUEST_TIMEOUT: timeout,
});
const server = await startServer(config, { logger: silentLogger });
const { key } = await server.service.keys.create(
  'did:matrix:00000000-0000-4000-8000-000000000001:bench',
  'slow',
);

const sockets: Socket[] = [];
let open = 0;
for (let i = 0; i < count; i += 1) {
  const socket = connect({ port: server.port, host: '127.0.0.1' });
  socket.on('error', () => {});
  socket.on('connect', () => {
    open += 1;
    socket.write(
      `POST /v1/alarms HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${i % 2 ? key : 'chronos_wrong'}\r\n` +
        'Transfer-Encoding: chunked\r\n\r\n',
    );
  });
  socket.on('close', () => (open -= 1));
  socket.resume();
  sockets.push(socket);
}
const dribble = setInterval(() => {
  for (const s of sockets) if (s.writable) s.write('1\r\n \r\n');
}, 1_000);

const latencies: number[] = [];
const timeoutMs = Number(/^(\d+)s$/.exec(timeout)?.[1] ?? '10') * 1_000;
const until = performance.now() + timeoutMs + 2_000;
await new Promise((resolve) => setTimeout(resolve, 200));
const openAtStart = open;
while (performance.now() < until) {
  const started = performance.now();
  await fetch(`${server.url}/healthz`).then((r) => r.text());
  latencies.push(performance.now() - started);
  await new Promise((resolve) => setTimeout(resolve, 100));
}
clearInterval(dribble);
latencies.sort((a, b) => a - b);
const at = (q: number) =>
  latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(1);
console.log(
  JSON.stringify({
    sockets: count,
    request_timeout: timeout,
    open_after_200ms: openAtStart,
    healthz_ms: { n: latencies.length, p50: at(0.5), p99: at(0.99), max: at(1) },
    open_after_timeout_plus_2s: open,
  }),
);
sockets.forEach((s) => s.destroy());
await server.shutdown();
