/**
 * A database that cannot be reached is named (issue 46): the log line and the library's error say
 * which host:port and the system's error, never the password; an HTTP answer says the database is
 * unreachable without the address, which is not the API client's to know.
 */
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { expect } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { isChronosError } from '../../packages/chronos-timers/src/errors.js';
import { createApp } from '../../packages/chronos-timers-server/src/server.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import { PgDb } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import { OWNER } from '../support/harness.js';
import { call, capturingLogger, isProblem } from './support.js';

/** A port nothing listens on: bound once, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Forwards 127.0.0.1:port to PostgreSQL until `down()`: new connections refused, open ones cut. */
async function forwarder(host: string, port: number) {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(port, host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    down: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describeEachBackend('A database that cannot be reached', ({ t, kind }) => {
  const reason = 'a wrong port in a PostgreSQL URL';

  postgresOnly(
    kind,
    reason,
    "the library's error names host:port and ECONNREFUSED, never the password",
    async () => {
      const port = await closedPort();
      const db = PgDb.connect(`postgres://chronos:s3cret-pass@127.0.0.1:${port}/test`, 1, {
        connectionTimeoutMillis: 2_000,
      });
      try {
        const error = await db.query({ name: 'test_one', text: 'SELECT 1' }).then(
          () => null,
          (e: unknown) => e,
        );
        expect(isChronosError(error, 'unavailable')).toBe(true);
        const message = (error as Error).message;
        expect(message).toBe(
          `the database at 127.0.0.1:${port} is unreachable (ECONNREFUSED); nothing was changed; try again in a few seconds`,
        );
        expect(message).not.toContain('s3cret');
      } finally {
        await db.close();
      }
    },
  );

  postgresOnly(kind, reason, 'the log line names the address; the 503 answer does not', async () => {
    const target = new URL(t.url!);
    const proxy = await forwarder(target.hostname, Number(target.port || 5432));
    const through = new URL(t.url!);
    through.hostname = '127.0.0.1';
    through.port = String(proxy.port);
    const logs: string[] = [];
    const service = await ChronosService.open(
      loadConfig({
        DATABASE_URL: through.toString(),
        CHRONOS_DB_CONNECT_TIMEOUT: '300ms',
        CHRONOS_CREATE_RATE: '0',
      }),
      { logger: capturingLogger(logs) },
    );
    const app = await createApp(service);
    try {
      const key = (await service.keys.create(OWNER.did)).key;
      await proxy.down();
      const refused = await call(app, 'POST', '/v1/alarms', {
        headers: { authorization: `Bearer ${key}` },
        body: { in_seconds: 600 },
      });
      expect(isProblem(refused, 503), refused.text).toBe(true);
      expect(refused.body.detail).toBe(
        'the database is unreachable right now; nothing was changed; try again in a few seconds',
      );
      expect(refused.text).not.toContain(String(proxy.port));
      const line = logs
        .map((l) => JSON.parse(l))
        .find((l) => l.msg === 'request refused: database unavailable');
      expect(line?.err?.message).toMatch(
        new RegExp(
          `^the database at 127\\.0\\.0\\.1:${proxy.port} is unreachable \\(.+\\); nothing was changed`,
        ),
      );
    } finally {
      await app.close();
      await service.close();
    }
  });
});
