/**
 * CHRONOS_MAX_ACTIVE_ALARMS is exact under concurrency (issue 45): 200 concurrent creates or
 * batches with a limit of 50 leave exactly 50 live alarms, the rest refused 429 naming the
 * limit — on one instance (both backends) and on two instances sharing one PostgreSQL database.
 */
import { afterEach, expect, it } from 'vitest';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import { call, openTestApp, type TestApp } from './support.js';

const LIMIT = 50;
const CREATES = 200;

describeEachBackend('the active-alarm quota under concurrency', ({ kind, t }) => {
  const open: TestApp[] = [];
  afterEach(async () => {
    for (const h of open.splice(0)) await h.close();
  });

  async function app(db = t.db): Promise<TestApp> {
    const h = await openTestApp(db, { CHRONOS_MAX_ACTIVE_ALARMS: String(LIMIT) });
    open.push(h);
    return h;
  }

  async function live(): Promise<number> {
    const [row] = await t.db.query<{ n: number }>({
      name: 'test_quota_live',
      text: `SELECT count(*)::int AS n FROM chronos.alarms WHERE status IN ('active', 'paused')`,
    });
    return row!.n;
  }

  /** `CREATES` requests spread over the apps, all at once; the statuses and the 429s' limits. */
  async function burst(apps: TestApp[], batch: boolean) {
    const answers = await Promise.all(
      Array.from({ length: CREATES }, (_, i) => {
        const h = apps[i % apps.length]!;
        return batch
          ? call(h.app, 'POST', '/v1/alarms/batch', {
              headers: h.auth,
              body: { alarms: [{ in_seconds: 3600 }] },
            })
          : call(h.app, 'POST', '/v1/alarms', { headers: h.auth, body: { in_seconds: 3600 } });
      }),
    );
    const created = answers.filter((a) => a.status === 201).length;
    const refused = answers.filter((a) => a.status === 429);
    expect(created + refused.length).toBe(CREATES);
    for (const r of refused) expect(r.body.limit).toBe('max_active_alarms');
    return created;
  }

  it('200 concurrent creates on one instance: exactly the limit is active', async () => {
    const h = await app();
    expect(await burst([h], false)).toBe(LIMIT);
    expect(await live()).toBe(LIMIT);
  });

  it('200 concurrent batches on one instance: exactly the limit is active', async () => {
    const h = await app();
    expect(await burst([h], true)).toBe(LIMIT);
    expect(await live()).toBe(LIMIT);
  });

  postgresOnly(
    kind,
    'two instances need two pools on one server database (PGlite is one process)',
    '200 concurrent creates and batches over two instances on one database: exactly the limit is active',
    async () => {
      const apps = [await app(), await app(t.openPool(10))];
      expect(await burst(apps, false)).toBe(LIMIT);
      expect(await live()).toBe(LIMIT);
      await t.db.query({ name: 'test_quota_clear', text: `DELETE FROM chronos.alarms` });
      expect(await burst(apps, true)).toBe(LIMIT);
      expect(await live()).toBe(LIMIT);
    },
  );
});
