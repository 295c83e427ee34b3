import { expect, it } from 'vitest';
import { mkdtemp, writeFile, cp } from 'node:fs/promises';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import {
  MIGRATIONS_DIR,
  migrate,
  migrationFiles,
  pendingMigrations,
} from '../../packages/chronos-timers/src/store/driver/migrate.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';

const versions = sql(
  'test_versions',
  'SELECT version FROM chronos.chronos_schema_migrations ORDER BY version',
);

describeEachBackend('migrations', ({ t, kind }) => {
  it('are recorded in chronos_schema_migrations, and applying them again is a no-op', async () => {
    const files = await migrationFiles();
    const recorded = (await t.db.query<{ version: string }>(versions)).map((r) => r.version);
    expect(recorded).toEqual(files.map((f) => f.replace(/\.sql$/, '')));
    expect(await migrate(t.db)).toEqual([]);
    expect(await pendingMigrations(t.db)).toEqual([]);
  });

  it('apply a new file once, in lexical order, and a failing file leaves nothing half-applied', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'chronos-migrations-'));
    await cp(MIGRATIONS_DIR, dir, { recursive: true });
    await writeFile(join(dir, '9998_extra.sql'), 'CREATE TABLE extra_a (id INT);');
    await writeFile(
      join(dir, '9999_broken.sql'),
      'CREATE TABLE extra_b (id INT); SELECT no_such_function();',
    );
    await expect(migrate(t.db, dir)).rejects.toThrow(/no_such_function/);
    const exists = sql(
      'test_extra_exists',
      "SELECT to_regclass('chronos.extra_a') IS NOT NULL AS a, to_regclass('chronos.extra_b') IS NOT NULL AS b",
    );
    expect((await t.db.query(exists))[0]).toEqual({ a: false, b: false });

    await writeFile(join(dir, '9999_broken.sql'), 'CREATE TABLE extra_b (id INT);');
    expect(await migrate(t.db, dir)).toEqual(['9998_extra', '9999_broken']);
    expect(await migrate(t.db, dir)).toEqual([]);
    expect((await t.db.query(exists))[0]).toEqual({ a: true, b: true });
    await t.db.exec('DROP TABLE chronos.extra_a; DROP TABLE chronos.extra_b');
    await t.db.exec("DELETE FROM chronos.chronos_schema_migrations WHERE version LIKE '999%'");
  });

  postgresOnly(
    kind,
    'two instances need two connections',
    'two instances migrating at once apply each file once',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'chronos-migrations-'));
      await cp(MIGRATIONS_DIR, dir, { recursive: true });
      await writeFile(join(dir, '9997_race.sql'), 'CREATE TABLE race_once (id INT); SELECT pg_sleep(0.2);');
      const [a, b] = await Promise.all([migrate(t.openPool(1), dir), migrate(t.openPool(1), dir)]);
      expect([...a, ...b]).toEqual(['9997_race']);
      await t.db.exec(
        "DROP TABLE chronos.race_once; DELETE FROM chronos.chronos_schema_migrations WHERE version = '9997_race'",
      );
    },
  );
});
