/**
 * `chronos alarms`: an operator's view of one owner's alarms, through the running server that
 * holds the embedded store (its control socket), and directly on PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { RawJson } from '../../packages/chronos-timers/src/json.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { startServer } from '../../packages/chronos-timers-server/src/server.js';
import { describePostgresOnly } from '../support/backends.js';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';
import {
  OTHER,
  OWNER,
  RecordingReceiver,
  backdate,
  makeDispatcher,
  makeService,
} from '../support/harness.js';
import { runChronos, serverOnNewStore } from './support.js';

describe('chronos alarms, through the server that holds the embedded store', () => {
  const held = serverOnNewStore();

  it('lists, shows, pauses, resumes and cancels an owner’s alarms, keeping payload digits', async () => {
    const env = { CHRONOS_DATA_DIR: held.dir };
    const { alarms } = held.server.service;
    const { alarm } = await alarms.create(
      OWNER,
      {
        cron: '0 9 * * *',
        timezone: 'Europe/Paris',
        label: 'standup',
        payload: new RawJson('{"n": 12345678901234567890}'),
      },
      { source: 'api' },
    );
    await alarms.create(OTHER, { inSeconds: 600, label: 'not theirs' }, { source: 'api' });

    const list = await runChronos(['alarms', 'list', '--owner', OWNER.did], env);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/ID\s+STATUS\s+KIND\s+SCHEDULE/);
    expect(list.stdout).toContain(alarm.id);
    expect(list.stdout).toContain('0 9 * * * (Europe/Paris)');
    expect(list.stdout).not.toContain('not theirs');

    const shown = await runChronos(['alarms', 'get', alarm.id, '--owner', OWNER.did, '--json'], env);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('"payload":{"n": 12345678901234567890}');

    const paused = await runChronos(['alarms', 'pause', alarm.id, '--owner', OWNER.did], env);
    expect(paused.stdout.trim()).toBe(`Alarm ${alarm.id} paused: paused (standup).`);
    expect((await alarms.get(OWNER, alarm.id)).status).toBe('paused');
    const onlyPaused = await runChronos(
      ['alarms', 'list', '--owner', OWNER.did, '--status', 'paused', '--json'],
      env,
    );
    expect(JSON.parse(onlyPaused.stdout).alarms.map((a: { id: string }) => a.id)).toEqual([alarm.id]);

    const resumed = await runChronos(['alarms', 'resume', alarm.id, '--owner', OWNER.did], env);
    expect(resumed.stdout).toMatch(
      new RegExp(`^Alarm ${alarm.id} resumed: active, next fire \\S+Z \\(standup\\)\\.`),
    );
    const cancelled = await runChronos(['alarms', 'cancel', alarm.id, '--owner', OWNER.did], env);
    expect(cancelled.stdout).toMatch(/cancelled: cancelled/);

    // Refusals: one line each, exit 1 (another owner's alarm is as missing as a missing one).
    const theirs = await runChronos(['alarms', 'pause', alarm.id, '--owner', OTHER.did], env);
    expect(theirs.code).toBe(1);
    expect(theirs.stderr.trim()).toBe(`chronos alarms: alarm "${alarm.id}" not found`);
    const again = await runChronos(['alarms', 'resume', alarm.id, '--owner', OWNER.did], env);
    expect(again.stderr).toMatch(/is cancelled; only a paused alarm can be resumed/);
    const bad = await runChronos(['alarms', 'list', '--owner', OWNER.did, '--status', 'done'], env);
    expect(bad.stderr.trim()).toBe(
      'chronos alarms: status: expected one of active, paused, fired, cancelled, failed, expired, got "done"',
    );
    const noOwner = await runChronos(['alarms', 'get', alarm.id], env);
    expect(noOwner.code).toBe(2);
    expect(noOwner.stderr).toMatch(/--owner <did> is required/);
    // Without --owner, the list is the operator's: every owner's, each row naming its owner.
    const every = await runChronos(['alarms', 'list'], env);
    expect(every.code, every.stderr).toBe(0);
    expect(every.stdout).toMatch(/^ID\s+OWNER\s+STATUS\s+KIND/);
    expect(every.stdout).toMatch(new RegExp(`${alarm.id}\\s+${OWNER.did}\\s+cancelled`));
    expect(every.stdout).toContain('not theirs');
    expect(every.stdout).toContain(OTHER.did);
  }, 120_000);
});

describePostgresOnly('the command and the test share one database', 'chronos alarms on PostgreSQL', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('lists and pauses with DATABASE_URL', async () => {
    const server = await startServer(loadConfig({ DATABASE_URL: t.url!, PORT: '0', HOST: '127.0.0.1' }), {
      logger: silentLogger,
    });
    try {
      const { alarm } = await server.service.alarms.create(
        OWNER,
        { inSeconds: 600, label: 'pg' },
        { source: 'api' },
      );
      const env = { DATABASE_URL: t.url! };
      expect((await runChronos(['alarms', 'list', '--owner', OWNER.did], env)).stdout).toContain(alarm.id);
      expect((await runChronos(['alarms', 'pause', alarm.id, '--owner', OWNER.did], env)).code).toBe(0);
      expect((await server.service.alarms.get(OWNER, alarm.id)).status).toBe('paused');
    } finally {
      await server.shutdown();
    }
  }, 60_000);

  it('shows an rrule alarm’s rule, window, jitter and expiry, and an expired alarm’s status', async () => {
    const service = makeService(t.db);
    const rule = 'FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9';
    const { alarm } = await service.create(
      OWNER,
      {
        rrule: rule,
        timezone: 'Europe/Paris',
        startsAt: '2030-01-01T00:00:00Z',
        endsAt: '2031-01-01T00:00:00Z',
        jitterSeconds: 120,
        expiresAfterSeconds: 600,
        label: 'fortnightly',
      },
      { source: 'api' },
    );
    // A one-shot claimed past its deadline is expired: the dispatcher gives it up.
    const late = (
      await service.create(
        OWNER,
        { inSeconds: 60, expiresAfterSeconds: 30, label: 'late' },
        { source: 'api' },
      )
    ).alarm;
    await backdate(t.db, late.id, 60_000 + 31_000);
    expect(await makeDispatcher(t.db, new RecordingReceiver()).runOnce()).toBe(1);
    const env = { DATABASE_URL: t.url! };

    const list = await runChronos(['alarms', 'list', '--owner', OWNER.did], env);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(
      new RegExp(
        `${alarm.id}\\s+active\\s+rrule\\s+${rule} \\(Europe/Paris\\)\\s+\\S+Z\\s+-\\s+0\\s+fortnightly`,
      ),
    );
    expect(list.stdout).toMatch(new RegExp(`${late.id}\\s+expired\\s+once\\s+-\\s+-\\s+-\\s+0\\s+late`));

    const shown = await runChronos(['alarms', 'get', alarm.id, '--owner', OWNER.did], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`"rrule": "${rule}"`);
    expect(shown.stdout).toContain('"starts_at": "2030-01-01T00:00:00.000Z"');
    expect(shown.stdout).toContain('"ends_at": "2031-01-01T00:00:00.000Z"');
    expect(shown.stdout).toContain('"jitter_seconds": 120');
    expect(shown.stdout).toContain('"expires_after_seconds": 600');
    const expired = await runChronos(['alarms', 'get', late.id, '--owner', OWNER.did], env);
    expect(expired.stdout).toContain('"status": "expired"');
    expect(expired.stdout).toContain('"expires_after_seconds": 30');
    expect(expired.stdout).not.toContain('"rrule"');
    expect(expired.stdout).not.toContain('"starts_at"');
  }, 60_000);
});
