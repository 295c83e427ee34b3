/**
 * `chronos wakes list|get|attempts` and `chronos alarms list` (every owner) / `fire` / `retry`, the
 * built CLI as a user runs it: on PostgreSQL with wakes really delivered to a local HTTP receiver,
 * through the running server that holds the embedded store (its control socket), and on an
 * embedded store no server holds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import { describePostgresOnly } from '../support/backends.js';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';
import { backdate, OTHER, OWNER } from '../support/harness.js';
import { Sink } from '../support/sink.js';
import { runChronos, serverOnNewStore, tempDataDir } from './support.js';

const api = { source: 'api' } as const;
const MISSING = '00000000-0000-4000-8000-000000000000';

describePostgresOnly('the command and the test share one database', 'chronos wakes on PostgreSQL', () => {
  let t: TestDatabase;
  let sink: Sink;
  let service: ChronosService;
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
    sink = await Sink.start();
    // The router answers 500 for the alarm labelled "fails", 200 for any other.
    sink.respond = (request) => ({ status: request.body.includes('"fails"') ? 500 : 200 });
    service = await ChronosService.open(
      loadConfig({ DATABASE_URL: t.url!, CHRONOS_ROUTER_URL: sink.url() }),
      {
        logger: silentLogger,
      },
    );
  });
  afterAll(async () => {
    await service?.close();
    await sink?.close();
    await t?.close();
  });

  it('lists every owner’s wakes or one’s, shows one, and its attempts; alarms list, fire and retry', async () => {
    const env = { DATABASE_URL: t.url! };
    const { alarm: delivered } = await service.alarms.create(OWNER, { inSeconds: 60, label: 'ok' }, api);
    const { alarm: failing } = await service.alarms.create(
      OTHER,
      { inSeconds: 60, label: 'fails', maxFailures: 1 },
      api,
    );
    await backdate(service.db, delivered.id, 61_000);
    await backdate(service.db, failing.id, 61_000);
    expect(await service.dispatcher.runOnce()).toBe(2);
    expect(sink.requests).toHaveLength(2);
    expect((await service.alarms.get(OTHER, failing.id)).status).toBe('failed');

    // Every owner's, with an OWNER column.
    const all = await runChronos(['wakes', 'list'], env);
    expect(all.code, all.stderr).toBe(0);
    const [header, ...rows] = all.stdout.trim().split('\n');
    expect(header).toMatch(
      /^ID\s+OWNER\s+ALARM\s+STATUS\s+SCHEDULED FOR\s+FIRED AT\s+DELIVERED AT\s+LATENESS/,
    );
    expect(rows).toHaveLength(2);
    expect(rows.find((r) => r.includes(delivered.id))).toMatch(
      new RegExp(`${OWNER.did}\\s+${delivered.id}\\s+delivered`),
    );
    expect(rows.find((r) => r.includes(failing.id))).toMatch(
      new RegExp(`${OTHER.did}\\s+${failing.id}\\s+failed`),
    );

    // One owner's, by status, as JSON.
    const mine = await runChronos(
      ['wakes', 'list', '--owner', OWNER.did, '--status', 'delivered', '--json'],
      env,
    );
    expect(mine.code, mine.stderr).toBe(0);
    const page = JSON.parse(mine.stdout) as { wakes: { id: string; alarm_id: string }[]; owners?: unknown };
    expect(page.wakes.map((w) => w.alarm_id)).toEqual([delivered.id]);
    expect(page.owners).toBeUndefined();
    const wakeId = page.wakes[0]!.id;
    const none = await runChronos(['wakes', 'list', '--owner', OWNER.did, '--status', 'failed'], env);
    expect(none.stdout.trim()).toBe('No wakes.');

    const shown = await runChronos(['wakes', 'get', wakeId, '--owner', OWNER.did], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout).wake).toMatchObject({
      id: wakeId,
      alarm_id: delivered.id,
      status: 'delivered',
      label: 'ok',
      attempts: 1,
    });

    const attempts = await runChronos(['wakes', 'attempts', wakeId, '--owner', OWNER.did], env);
    expect(attempts.code, attempts.stderr).toBe(0);
    const lines = attempts.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ATTEMPT\s+STARTED AT\s+FINISHED AT\s+OUTCOME\s+HTTP\s+DURATION\s+ERROR$/);
    expect(lines.slice(1)).toEqual([
      expect.stringMatching(/^1\s+\S+Z\s+\S+Z\s+delivered\s+200\s+\d+ ms\s+-$/),
    ]);
    const failedWake = (await service.wakes.list(OTHER, { alarmId: failing.id })).items[0]!;
    const failedAttempts = await runChronos(
      ['wakes', 'attempts', failedWake.id, '--owner', OTHER.did, '--json'],
      env,
    );
    expect(JSON.parse(failedAttempts.stdout).attempts).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'failed', status_code: 500 }),
    ]);

    // Another owner's wake is as missing as a missing one.
    const theirs = await runChronos(['wakes', 'get', wakeId, '--owner', OTHER.did], env);
    expect(theirs.code).toBe(1);
    expect(theirs.stderr.trim()).toBe(`chronos wakes: wake "${wakeId}" not found`);
    const noOwner = await runChronos(['wakes', 'attempts', wakeId], env);
    expect(noOwner.code).toBe(2);
    expect(noOwner.stderr).toMatch(/--owner <did> is required/);

    // The operator's alarm list: every owner's, with an OWNER column.
    const alarms = await runChronos(['alarms', 'list'], env);
    expect(alarms.code, alarms.stderr).toBe(0);
    expect(alarms.stdout).toMatch(/^ID\s+OWNER\s+STATUS\s+KIND/);
    expect(alarms.stdout).toMatch(new RegExp(`${delivered.id}\\s+${OWNER.did}\\s+fired`));
    expect(alarms.stdout).toMatch(new RegExp(`${failing.id}\\s+${OTHER.did}\\s+failed`));
    const one = await runChronos(['alarms', 'list', '--owner', OWNER.did], env);
    expect(one.stdout).toMatch(/^ID\s+STATUS\s+KIND/);
    expect(one.stdout).not.toContain(failing.id);

    // Fire and retry: refusals say the status and what would work.
    const fireFired = await runChronos(['alarms', 'fire', delivered.id, '--owner', OWNER.did], env);
    expect(fireFired.code).toBe(1);
    expect(fireFired.stderr.trim()).toBe(
      `chronos alarms: alarm ${delivered.id} has already fired; only an active or paused alarm can be fired now`,
    );
    const retryFired = await runChronos(['alarms', 'retry', delivered.id, '--owner', OWNER.did], env);
    expect(retryFired.stderr.trim()).toBe(
      `chronos alarms: alarm ${delivered.id} has already fired; only a failed alarm can be retried`,
    );
    const unknown = await runChronos(['alarms', 'fire', MISSING, '--owner', OWNER.did], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr.trim()).toBe(`chronos alarms: alarm "${MISSING}" not found`);

    sink.respond = () => ({ status: 200 });
    const retried = await runChronos(['alarms', 'retry', failing.id, '--owner', OTHER.did], env);
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stdout.trim()).toMatch(
      new RegExp(`^Alarm ${failing.id} retried: active, next fire \\S+Z \\(fails\\)\\.$`),
    );
    expect(await service.dispatcher.runOnce()).toBe(1);
    expect((await service.alarms.get(OTHER, failing.id)).status).toBe('fired');
    const history = await runChronos(
      ['wakes', 'list', '--owner', OTHER.did, '--alarm', failing.id, '--json'],
      env,
    );
    expect(JSON.parse(history.stdout).wakes.map((w: { status: string }) => w.status)).toEqual([
      'delivered',
      'failed',
    ]);
  }, 120_000);
});

describe('chronos alarms fire|retry and chronos wakes, through the server that holds the embedded store', () => {
  const held = serverOnNewStore();

  it('fires an alarm now, lists its delivered wake, shows it and its attempts', async () => {
    const env = { CHRONOS_DATA_DIR: held.dir };
    const { service } = held.server;
    // The test delivers, one pass at a time, instead of the server's loop.
    await service.dispatcher.stop();
    const { alarm } = await service.alarms.create(OWNER, { cron: '0 9 * * *', label: 'standup' }, api);
    await service.alarms.create(OTHER, { inSeconds: 600, label: 'theirs' }, api);

    const all = await runChronos(['alarms', 'list'], env);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toMatch(new RegExp(`${alarm.id}\\s+${OWNER.did}\\s+active\\s+cron`));
    expect(all.stdout).toContain(OTHER.did);

    const fired = await runChronos(['alarms', 'fire', alarm.id, '--owner', OWNER.did], env);
    expect(fired.code, fired.stderr).toBe(0);
    expect(fired.stdout).toMatch(
      new RegExp(`^Alarm ${alarm.id} fired now: active, next fire \\S+Z \\(standup\\)\\.`),
    );
    expect(await service.dispatcher.runOnce()).toBe(1);

    const list = await runChronos(['wakes', 'list', '--owner', OWNER.did], env);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`^ID\\s+ALARM\\s+STATUS`));
    const row = list.stdout.split('\n').find((line) => line.includes(alarm.id))!;
    expect(row).toMatch(/\sdelivered\s/);
    const wakeId = row.split(/\s+/)[0]!;
    const shown = await runChronos(['wakes', 'get', wakeId, '--owner', OWNER.did, '--json'], env);
    expect(JSON.parse(shown.stdout).wake).toMatchObject({
      id: wakeId,
      status: 'delivered',
      label: 'standup',
    });
    const attempts = await runChronos(['wakes', 'attempts', wakeId, '--owner', OWNER.did], env);
    expect(attempts.stdout.trim().split('\n')[1]).toMatch(/^1\s+\S+Z\s+\S+Z\s+delivered\s/);
    const every = await runChronos(['wakes', 'list', '--json'], env);
    expect(JSON.parse(every.stdout).owners).toEqual({ [wakeId]: OWNER.did });

    const retry = await runChronos(['alarms', 'retry', alarm.id, '--owner', OWNER.did], env);
    expect(retry.code).toBe(1);
    expect(retry.stderr.trim()).toBe(
      `chronos alarms: alarm ${alarm.id} is active; only a failed alarm can be retried`,
    );
    const missing = await runChronos(['wakes', 'get', MISSING, '--owner', OWNER.did], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toBe(`chronos wakes: wake "${MISSING}" not found`);
    const badStatus = await runChronos(['wakes', 'list', '--status', 'done'], env);
    expect(badStatus.code).toBe(1);
    expect(badStatus.stderr).toMatch(
      /^chronos wakes: status: expected one of pending, delivered, acknowledged, failed, expired, got "done"/,
    );
  }, 120_000);
});

describe('chronos wakes on an embedded store no server holds', () => {
  it('is in chronos help, and says its usage', async () => {
    const help = await runChronos(['help'], {});
    expect(help.stdout).toMatch(/^ {2}wakes +list the wakes/m);
    expect(help.stdout).toMatch(/^ {2}alarms +list every owner's alarms or one's; .*fire now, retry/m);
    const usage = await runChronos(['wakes', 'get'], {});
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(
      /^chronos wakes: expected <wake id>, got nothing for <wake id>\nusage: chronos wakes list/,
    );
  }, 60_000);

  it('lists the wake a service delivered before it closed', async () => {
    const data = await tempDataDir();
    try {
      const service = await ChronosService.open(loadConfig({ CHRONOS_DATA_DIR: data.dir }), {
        logger: silentLogger,
      });
      let alarmId: string;
      try {
        const { alarm } = await service.alarms.create(OWNER, { inSeconds: 60, label: 'local' }, api);
        alarmId = alarm.id;
        await backdate(service.db, alarm.id, 61_000);
        expect(await service.dispatcher.runOnce()).toBe(1);
      } finally {
        await service.close();
      }
      const list = await runChronos(['wakes', 'list', '--json'], { CHRONOS_DATA_DIR: data.dir });
      expect(list.code, list.stderr).toBe(0);
      const page = JSON.parse(list.stdout) as { wakes: { alarm_id: string; status: string }[] };
      expect(page.wakes).toEqual([expect.objectContaining({ alarm_id: alarmId, status: 'delivered' })]);
    } finally {
      await data.remove();
    }
  }, 120_000);
});
