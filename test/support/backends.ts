/**
 * Runs a suite once per storage backend, each on its own database copied from the template.
 *
 * `postgresOnly(reason)` (a case) and `describePostgresOnly(reason)` (a suite) are the one way to
 * opt out of PGlite, and they say why. When no
 * PostgreSQL is reachable outside CI, the PostgreSQL leg is skipped loudly (global setup warns);
 * in CI that is a failure before any test runs.
 */
import { afterAll, beforeAll, beforeEach, describe, it } from 'vitest';
import type { BackendKind } from '../../packages/chronos-timers/src/store/driver/db.js';
import { createTestDatabase, postgresAvailable, type TestDatabase } from './databases.js';
import { lateBound } from './late.js';

export interface Backend {
  readonly kind: BackendKind;
  /** The test file's database (usable once the suite has started); emptied before each test. */
  readonly t: TestDatabase;
}

export const BACKENDS: readonly BackendKind[] = ['postgres', 'pglite'];

export function describeEachBackend(title: string, body: (backend: Backend) => void): void {
  for (const kind of BACKENDS) {
    const skip = kind === 'postgres' && !postgresAvailable();
    describe.skipIf(skip)(`${title} [${kind}]`, () => {
      let t: TestDatabase | null = null;
      // Forwards to the database opened in beforeAll, so suites can destructure it up front.
      const backend: Backend = { kind, t: lateBound('the test database', () => t) };
      beforeAll(async () => {
        t = await createTestDatabase(kind);
      });
      afterAll(async () => {
        await t?.close();
      });
      beforeEach(async () => {
        await t?.reset();
      });
      body(backend);
    });
  }
}

/** A case that needs several connections at once, which PGlite (one connection) cannot give. */
export function postgresOnly(
  kind: BackendKind,
  reason: string,
  name: string,
  fn: () => Promise<void>,
  timeout?: number,
): void {
  it.skipIf(kind !== 'postgres')(`${name} (PostgreSQL only: ${reason})`, fn, timeout);
}

/**
 * A suite that runs on PostgreSQL alone — several processes on one database, the `DATABASE_URL`
 * path of a command, a server to restart — and says why. Like the PostgreSQL leg of
 * `describeEachBackend`, it is skipped (loudly) only when no PostgreSQL is reachable outside CI.
 */
export function describePostgresOnly(reason: string, title: string, body: () => void): void {
  describe.skipIf(!postgresAvailable())(`${title} (PostgreSQL only: ${reason})`, body);
}
