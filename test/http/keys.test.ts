import { createHash } from 'node:crypto';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { createApp } from '../../packages/chronos-timers-server/src/server.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import { RecordingReceiver, until } from '../support/harness.js';
import { call, openTestApp, OWNER, type TestApp } from './support.js';

const keyRows = sql(
  'test_http_key_rows',
  'SELECT row_to_json(k)::text AS row, key_hash FROM chronos.api_keys k',
);

describeEachBackend('HTTP: API keys', ({ t, kind }) => {
  let h: TestApp;
  beforeEach(async () => {
    h = await openTestApp(t.db);
  });
  afterEach(async () => {
    await h.close();
  });

  it('only a SHA-256 of each key is stored, and a used key gets last_used_at', async () => {
    expect((await call(h.app, 'GET', '/v1/alarms', { headers: h.auth })).status).toBe(200);
    const rows = await t.db.query<{ row: string; key_hash: string }>(keyRows);
    expect(rows).toHaveLength(2);
    for (const { row } of rows) {
      expect(row).not.toContain(h.ownerKey);
      expect(row).not.toContain(h.otherKey);
    }
    const ownerHash = createHash('sha256').update(h.ownerKey).digest('hex');
    expect(rows.map((r) => r.key_hash)).toContain(ownerHash);
    // last_used_at is written in the background, not awaited by the request.
    let used: Date | null = null;
    for (let i = 0; i < 1_000 && !used; i++) {
      used = (await h.service.keys.list(OWNER.did))[0]!.lastUsedAt;
    }
    expect(used).toBeInstanceOf(Date);
  });

  it('a revoked key is refused from the next request on, on the instance that revoked it', async () => {
    expect((await call(h.app, 'GET', '/v1/alarms', { headers: h.auth })).status).toBe(200);
    const [key] = await h.service.keys.list(OWNER.did);
    const first = await h.service.keys.revoke(key!.id);
    expect(first.changed).toBe(true);
    expect(first.key.revokedAt).toBeInstanceOf(Date);
    expect((await call(h.app, 'GET', '/v1/alarms', { headers: h.auth })).status).toBe(401);
    const again = await h.service.keys.revoke(key!.id);
    expect(again.changed).toBe(false);
    expect(again.key.revokedAt).toEqual(first.key.revokedAt);
    await expect(h.service.keys.revoke('key_000000000000')).rejects.toMatchObject({ code: 'not_found' });
  });

  postgresOnly(
    kind,
    'two instances need two connection pools',
    'a key revoked on one instance is refused by another instance that had it cached',
    async () => {
      const other = await ChronosService.open(loadConfig({}), {
        db: t.openPool(),
        logger: silentLogger,
        receiver: new RecordingReceiver(),
      });
      const otherApp = await createApp(other);
      await other.start(); // listens for revocations
      let forgotten = 0;
      const forget = other.keys.forget.bind(other.keys);
      other.keys.forget = () => {
        forgotten++;
        forget();
      };
      try {
        expect((await call(otherApp, 'GET', '/v1/alarms', { headers: h.auth })).status).toBe(200);
        const [key] = await h.service.keys.list(OWNER.did);
        await h.service.keys.revoke(key!.id);
        await until(() => forgotten > 0, 'the revocation to reach the other instance');
        expect((await call(otherApp, 'GET', '/v1/alarms', { headers: h.auth })).status).toBe(401);
      } finally {
        await otherApp.close();
        await other.stop();
      }
    },
  );
});
