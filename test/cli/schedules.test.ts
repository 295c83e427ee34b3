/**
 * `chronos schedules apply|export`, the built CLI as a user runs it: through the running server
 * that holds the embedded store (its control socket), on an embedded store no server holds, and
 * on PostgreSQL.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { RawJson } from '../../packages/chronos-timers/src/json.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { startServer } from '../../packages/chronos-timers-server/src/server.js';
import { describePostgresOnly } from '../support/backends.js';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';
import { OTHER, OWNER } from '../support/harness.js';
import { runChronos, serverOnNewStore, tempDataDir } from './support.js';

const entries = (extra: Record<string, unknown> = {}) => ({
  alarms: [
    {
      owner: OWNER.did,
      key: 'standup',
      label: 'standup',
      cron: '0 9 * * 1-5',
      timezone: 'Europe/Paris',
      wake_message: 'Ask for blockers.',
      ...extra,
    },
    { owner: OTHER.did, key: 'launch', at: '2031-03-14T09:00:00+01:00' },
  ],
});

describe('chronos schedules, through the server that holds the embedded store', () => {
  const held = serverOnNewStore();

  it('applies a file, says what it did per entry, exports it back, and export then apply changes nothing', async () => {
    const env = { CHRONOS_DATA_DIR: held.dir };
    const path = join(held.dir, 'schedules.json');
    await writeFile(
      path,
      JSON.stringify(entries()).replace('"label"', '"payload":{"n":12345678901234567890},"label"'),
    );

    const dry = await runChronos(['schedules', 'apply', path, '--dry-run'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(
      /Dry run of .*: 2 created, 0 updated, 0 unchanged, 0 left alone; nothing was written\.\n$/,
    );
    expect(await held.server.service.alarms.getByKey(OWNER, 'standup')).toBeNull();

    const applied = await runChronos(['schedules', 'apply', path], env);
    expect(applied.code, applied.stderr).toBe(0);
    const standup = (await held.server.service.alarms.getByKey(OWNER, 'standup'))!;
    const launch = (await held.server.service.alarms.getByKey(OTHER, 'launch'))!;
    expect(applied.stdout.split('\n')).toEqual([
      `alarms.0 (owner ${OWNER.did}, key "standup"): created alarm ${standup.id}`,
      `alarms.1 (owner ${OTHER.did}, key "launch"): created alarm ${launch.id}`,
      `Applied ${path}: 2 created, 0 updated, 0 unchanged, 0 left alone.`,
      '',
    ]);
    expect(standup.payload.text).toBe('{"n": 12345678901234567890}');

    const exported = await runChronos(['schedules', 'export', '--owner', OWNER.did], env);
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stdout).toContain('"payload": {"n": 12345678901234567890}');
    expect(JSON.parse(exported.stdout).alarms.map((a: { key: string }) => a.key)).toEqual(['standup']);

    // Every owner's, then applied: nothing changes.
    await held.server.service.alarms.create(OTHER, { cron: '@hourly' }, { source: 'api' });
    const all = await runChronos(['schedules', 'export'], env);
    expect(all.code).toBe(0);
    expect(all.stderr).toMatch(/left out alarm \S+ of did:matrix:2222.*: it has no idempotency key/);
    const exportedPath = join(held.dir, 'exported.json');
    await writeFile(exportedPath, all.stdout);
    const again = await runChronos(['schedules', 'apply', exportedPath], env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/: 0 created, 0 updated, 2 unchanged, 0 left alone\.\n$/);

    // An edit: one line for the changed entry.
    await writeFile(path, JSON.stringify(entries({ cron: '30 9 * * 1-5' })));
    const edited = await runChronos(['schedules', 'apply', path], env);
    expect(edited.stdout).toContain(`key "standup"): updated alarm ${standup.id} (cron, payload)`);
    expect((await held.server.service.alarms.get(OWNER, standup.id)).cronExpr).toBe('30 9 * * 1-5');
  }, 120_000);

  it('export says on stderr how many library timers it left out, by queue, and why', async () => {
    const env = { CHRONOS_DATA_DIR: held.dir };
    const { alarms } = held.server.service;
    const before = await runChronos(['schedules', 'export', '--owner', OTHER.did], env);
    expect(before.code, before.stderr).toBe(0);
    expect(before.stderr).not.toMatch(/library timer/);

    const library = { source: 'library' } as const;
    await alarms.create(OTHER, { inSeconds: 600, idempotencyKey: 'lib-1' }, library);
    await alarms.create(OTHER, { inSeconds: 600, idempotencyKey: 'lib-2', queue: 'emails' }, library);
    await alarms.create(OTHER, { inSeconds: 600, idempotencyKey: 'lib-3', queue: 'emails' }, library);
    const cancelled = await alarms.create(OTHER, { inSeconds: 600, queue: 'emails' }, library);
    await alarms.cancel(OTHER, { id: cancelled.alarm.id }); // not live: not counted

    const run = await runChronos(['schedules', 'export', '--owner', OTHER.did], env);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout).alarms.map((a: { key: string }) => a.key)).not.toContain('lib-1');
    expect(run.stderr).toContain(
      'chronos schedules: left out 3 library timers (1 in queue "default", 2 in queue "emails"): ' +
        'a schedules file holds the service\'s alarms (queue "router") only; ' +
        "a library's timers are its application's to schedule",
    );
    // Another owner's export counts only its own.
    const mine = await runChronos(['schedules', 'export', '--owner', OWNER.did], env);
    expect(mine.stderr).not.toMatch(/library timer/);
  }, 60_000);

  it('an invalid file exits 1 with every error on a line of its own, and nothing written', async () => {
    const env = { CHRONOS_DATA_DIR: held.dir };
    const path = join(held.dir, 'bad.json');
    await writeFile(
      path,
      JSON.stringify({
        alarms: [
          { owner: OWNER.did, key: 'fine', cron: '@daily' },
          { owner: OWNER.did, key: 'soon', in_seconds: 600 },
          { owner: OWNER.did, key: 'tz', cron: '@daily', timezone: 'CEST' },
        ],
      }),
    );
    const run = await runChronos(['schedules', 'apply', path], env);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^chronos schedules: alarms\.1\.in_seconds: expected "at" .* or "cron" instead/),
      'chronos schedules: alarms.2.timezone: expected an IANA time zone like "Europe/Paris" or "UTC", got "CEST"; did you mean "Europe/Paris" or "Europe/Berlin"?',
      `chronos schedules: ${path} refused: nothing applied`,
    ]);
    expect(await held.server.service.alarms.getByKey(OWNER, 'fine')).toBeNull();

    const missing = await runChronos(['schedules', 'apply', join(held.dir, 'nope.json')], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toBe(`chronos schedules: ${join(held.dir, 'nope.json')}: no such file`);
    const usage = await runChronos(['schedules', 'apply'], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(
      /^chronos schedules: expected <file>, got nothing for <file>\nusage: chronos schedules apply/,
    );
    const badOwner = await runChronos(['schedules', 'export', '--owner', 'bob'], env);
    expect(badOwner.code).toBe(1);
    expect(badOwner.stderr).toMatch(/^chronos schedules: owner: expected a DID/);
  }, 60_000);
});

describe('chronos schedules on an embedded store no server holds', () => {
  it('applies, and applying again changes nothing', async () => {
    const data = await tempDataDir();
    try {
      const env = { CHRONOS_DATA_DIR: data.dir };
      const path = join(data.dir, 'schedules.json');
      await writeFile(path, JSON.stringify(entries()));
      const first = await runChronos(['schedules', 'apply', path], env);
      expect(first.code, first.stderr).toBe(0);
      expect(first.stdout).toMatch(/2 created/);
      const second = await runChronos(['schedules', 'apply', path], env);
      expect(second.stdout).toMatch(/0 created, 0 updated, 2 unchanged/);
    } finally {
      await data.remove();
    }
  }, 120_000);
});

describePostgresOnly('the command and the test share one database', 'chronos schedules on PostgreSQL', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('applies with DATABASE_URL and exports every owner’s alarms, digit for digit', async () => {
    const data = await tempDataDir();
    try {
      const env = { DATABASE_URL: t.url! };
      const path = join(data.dir, 'schedules.json');
      await writeFile(path, JSON.stringify(entries()));
      const applied = await runChronos(['schedules', 'apply', path], env);
      expect(applied.code, applied.stderr).toBe(0);
      const server = await startServer(loadConfig({ DATABASE_URL: t.url!, PORT: '0', HOST: '127.0.0.1' }), {
        logger: silentLogger,
      });
      try {
        await server.service.alarms.create(
          OWNER,
          {
            idempotencyKey: 'api',
            inSeconds: 600,
            payload: new RawJson('{"big": 0.1000000000000000055511151231257827}'),
          },
          { source: 'api' },
        );
      } finally {
        await server.shutdown();
      }
      const exported = await runChronos(['schedules', 'export'], env);
      expect(exported.code, exported.stderr).toBe(0);
      expect(exported.stdout).toContain('0.1000000000000000055511151231257827');
      expect(JSON.parse(exported.stdout).alarms.map((a: { key: string }) => a.key)).toEqual([
        'standup',
        'api',
        'launch',
      ]);
      await writeFile(path, exported.stdout);
      const again = await runChronos(['schedules', 'apply', path], env);
      expect(again.stdout).toMatch(/0 created, 0 updated, 3 unchanged, 0 left alone/);
    } finally {
      await data.remove();
    }
  }, 60_000);
});
