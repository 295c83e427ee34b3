/**
 * Several instances on one database, configured as a scenario needs them, and the waits that
 * follow them: every alarm delivered, every alarm settled in the table.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import type { Db } from '../../../packages/chronos-timers/src/store/driver/db.js';
import { createTestDatabase, type TestDatabase } from '../../support/databases.js';
import type { Responder } from '../../support/sink.js';
import { Instance, stopAll } from './instance.js';
import { Router } from './router.js';
import { alarmStates } from './rows.js';
import { waitUntil } from './scenario.js';

export const WEBHOOK_SECRET = `whsec_${randomBytes(24).toString('base64')}`;

export interface ScenarioParts {
  t: TestDatabase;
  router: Router;
}

/**
 * The hooks every delivery scenario shares: before the file's tests, a fresh database on the
 * test PostgreSQL and a router stand-in answering as `respond` says (200 at once by default);
 * after them, every instance the file started stopped, the router closed, the database dropped.
 * The parts are filled in by the time a test (or a later `beforeAll`) runs.
 */
export function useScenario(respond?: Responder): ScenarioParts {
  const parts = {} as ScenarioParts;
  beforeAll(async () => {
    parts.t = await createTestDatabase('postgres');
    parts.router = await Router.start(respond);
  });
  afterAll(async () => {
    await stopAll(Instance.created());
    await parts.router?.close();
    await parts.t?.close();
  });
  return parts;
}

/** The environment of a `chronos serve` on `databaseUrl` delivering to `router`. */
export function serveEnv(
  databaseUrl: string,
  router: Router,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    CHRONOS_ROUTER_URL: router.url(),
    CHRONOS_WEBHOOK_SECRET: WEBHOOK_SECRET,
    // Scenarios load alarms in bulk; the quotas are another scenario's subject.
    CHRONOS_MAX_ACTIVE_ALARMS: '0',
    CHRONOS_CREATE_RATE: '0',
    ...extra,
  };
}

/** Creates and starts `count` instances with the same environment. */
export async function startFleet(count: number, env: Record<string, string>): Promise<Instance[]> {
  const fleet = await Promise.all(
    Array.from({ length: count }, (_, i) => Instance.create(`chronos-${i + 1}`, env)),
  );
  await Promise.all(fleet.map((instance) => instance.start()));
  return fleet;
}

/** Waits until the router has answered 2xx for every alarm in `due`. */
export async function allDelivered(
  router: Router,
  due: ReadonlyMap<string, number>,
  timeoutMs: number,
): Promise<void> {
  await waitUntil(() => router.deliveredCount(due.keys()) === due.size, {
    timeoutMs,
    intervalMs: 200,
    what: `all ${due.size} alarms delivered`,
    describe: () => ({ delivered: router.deliveredCount(due.keys()), received: router.sink.received }),
  });
}

/** Waits until no alarm in `due` is active any more (each fired, failed or cancelled). */
export async function allSettled(db: Db, due: ReadonlyMap<string, number>, timeoutMs: number): Promise<void> {
  let active = -1;
  await waitUntil(
    async () => {
      const states = await alarmStates(db, [...due.keys()]);
      active = [...states.values()].filter((s) => s.status === 'active').length;
      return active === 0;
    },
    { timeoutMs, intervalMs: 250, what: 'every alarm settled', describe: () => ({ active }) },
  );
}

/** Lines logged by the dispatcher when an outcome was fenced out (its lease had lapsed). */
export function fencedLines(instances: readonly Instance[]): number {
  return instances.flatMap((i) => i.logs()).filter((l) => String(l.msg).startsWith('outcome not recorded'))
    .length;
}

/** Error-level log lines (pino level ≥ 50), for the report. */
export function errorLines(instances: readonly Instance[]): Record<string, unknown>[] {
  return instances.flatMap((i) => i.logs()).filter((l) => Number(l.level) >= 50);
}
