/**
 * Issue 45's noisy neighbours and small leaks, on the dispatcher's side: the error text kept of a
 * failed delivery is capped; the loops have database connections the API cannot take.
 */
import { expect, it } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import { LAST_ERROR_MAX_CHARS } from '../../packages/chronos-timers/src/store/last-error.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import {
  alarmRow,
  gate,
  makeDispatcher,
  makeService,
  OWNER,
  RecordingReceiver,
  until,
  wakesOf,
} from '../support/harness.js';

const api = { source: 'api' } as const;

describeEachBackend('isolation and caps', ({ t, kind }) => {
  postgresOnly(
    kind,
    'the service opens pools of its own from DATABASE_URL only (PGlite is one connection, shared in turn)',
    'a burst that holds every connection of the API’s pool does not stop the dispatcher’s claim',
    async () => {
      const config = loadConfig({
        DATABASE_URL: t.url!,
        CHRONOS_OPERATOR_TOKEN: 'operator-token-for-tests-0123456789',
        CHRONOS_DB_CONNECT_TIMEOUT: '1s',
      });
      const receiver = new RecordingReceiver();
      const service = await ChronosService.open(config, { logger: silentLogger, receiver, metrics: false });
      const released = gate();
      const held: Promise<unknown>[] = [];
      try {
        const { alarm } = await makeService(t.db).create(
          OWNER,
          { at: new Date(Date.now() - 1_000).toISOString() },
          api,
        );
        // Every connection of the API's pool taken and kept, as a burst of slow requests would.
        let taken = 0;
        for (let i = 0; i < 20; i++) {
          held.push(
            service.db.transaction(async () => {
              taken++;
              await released.promise;
            }),
          );
        }
        await until(() => taken === 20, 'the API pool to be taken');
        await service.dispatcher.runOnce();
        expect(receiver.fires.map((f) => f.alarm.id)).toEqual([alarm.id]);
      } finally {
        released.open();
        await Promise.allSettled(held);
        await service.close();
      }
    },
  );

  it('last_error keeps at most 1,000 characters of a router’s answer, cut with "…"', async () => {
    const receiver = new RecordingReceiver();
    const answer = `router said: ${'x'.repeat(50_000)}`;
    receiver.behave = () => ({ ok: false, retryable: false, error: answer });
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { at: new Date(Date.now() - 1_000).toISOString() }, api);
    await makeDispatcher(t.db, receiver).runOnce();
    const row = await alarmRow(t.db, alarm.id);
    expect(row.status).toBe('failed');
    const kept = String(row.last_error);
    expect(kept).toHaveLength(LAST_ERROR_MAX_CHARS);
    expect(kept.endsWith('…')).toBe(true);
    expect(kept.startsWith('router said: xxx')).toBe(true);
    const [wake] = await wakesOf(t.db, alarm.id);
    expect(String(wake!.last_error)).toBe(kept);
    const got = await service.get(OWNER, alarm.id);
    expect(got.lastError).toBe(kept);
  });
});
