/**
 * Reconciling the alarms with a schedules file (contract §13), on both backends: what each kind
 * of edit does, what a restart does (nothing), and export followed by apply (nothing).
 */
import { readFile } from 'node:fs/promises';
import { expect, it } from 'vitest';
import { RawJson } from '../../packages/chronos-timers/src/json.js';
import {
  applySchedulesFile,
  exportSchedulesFile,
} from '../../packages/chronos-timers-server/src/schedules-file/apply.js';
import { ROOT } from '../cli/support.js';
import { describeEachBackend } from '../support/backends.js';
import { makeService } from '../support/harness.js';
import {
  alarmCount,
  apply,
  file,
  fileService,
  finish,
  headsUps,
  inDays,
  OTHER,
  OWNER,
  pruneAlarm,
  sourceOf,
} from './support.js';

const api = { source: 'api' } as const;

const standup = {
  key: 'standup',
  label: 'standup',
  cron: '0 9 * * 1-5',
  timezone: 'Europe/Paris',
  wake_message: 'Ask the team for blockers.',
  payload: { room: '!abc:example.org' },
};

describeEachBackend('the schedules file: reconcile', ({ t }) => {
  it('creates an alarm per new entry, with source file, in the router queue, payload digit for digit', async () => {
    const text = `{"alarms": [
      {"owner": "${OWNER.did}", "key": "standup", "cron": "0 9 * * 1-5", "timezone": "Europe/Paris",
       "payload": {"build": 12345678901234567890, "tiny": 0.1000000000000000055511151231257827}},
      {"owner": "${OTHER.did}", "key": "launch", "at": "${inDays(30)}", "label": "launch"}
    ]}`;
    const report = await apply(t.db, text);
    expect(report).toMatchObject({ applied: true, errors: [], heads_ups: 2 });
    expect(report.results.map((r) => [r.index, r.owner_did, r.key, r.action])).toEqual([
      [0, OWNER.did, 'standup', 'created'],
      [1, OTHER.did, 'launch', 'created'],
    ]);
    const alarms = makeService(t.db);
    const made = (await alarms.getByKey(OWNER, 'standup'))!;
    expect(made).toMatchObject({
      kind: 'cron',
      cronExpr: '0 9 * * 1-5',
      timezone: 'Europe/Paris',
      requireAck: true,
    });
    expect(made.payload.text).toContain('12345678901234567890');
    expect(made.payload.text).toContain('0.1000000000000000055511151231257827');
    expect(await sourceOf(t.db, made.id)).toEqual({ source: 'file', queue: 'router', file_changes: 1 });
    expect((await alarms.getByKey(OTHER, 'launch'))!.label).toBe('launch');
    expect((await headsUps(t.db)).map((h) => [h.message_id, h.change])).toEqual([
      [`${made.id}:file:1`, 'created'],
      [`${report.results[1]!.alarm_id}:file:1`, 'created'],
    ]);
  });

  it('the same file again, also after a restart, changes nothing and owes no heads-up', async () => {
    const doc = file(standup, { key: 'launch', at: inDays(30) });
    await apply(t.db, doc);
    const before = await makeService(t.db).getByKey(OWNER, 'standup');
    await t.restart();
    const again = await apply(t.db, doc);
    expect(again.results.map((r) => r.action)).toEqual(['unchanged', 'unchanged']);
    expect(again.heads_ups).toBe(0);
    expect(await headsUps(t.db)).toHaveLength(2);
    expect(await makeService(t.db).getByKey(OWNER, 'standup')).toEqual(before);
    // Reformatted, keys reordered, the same instant written in another offset: still the same.
    const at = new Date(doc.alarms[1]!.at as string);
    const paris = new Date(at.getTime() + 3_600_000).toISOString().replace('Z', '+01:00');
    const reformatted = `{"alarms":[{"payload":{"room":"!abc:example.org"},${JSON.stringify(standup).slice(1, -1)},
      "owner":"${OWNER.did}"},{"owner":"${OWNER.did}","key":"launch","at":"${paris}","timezone":"UTC"}]}`;
    expect((await apply(t.db, reformatted)).results.map((r) => r.action)).toEqual(['unchanged', 'unchanged']);
  });

  it('an rrule entry with a window, jitter and expiry is created, unchanged when read again, changed by an edit, exported as written', async () => {
    const review = {
      key: 'review',
      rrule: 'RRULE:FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0',
      timezone: 'Europe/Paris',
      starts_at: '2030-01-01T00:00:00+01:00',
      ends_at: '2030-12-31T00:00:00+01:00',
      jitter_seconds: 60,
      expires_after_seconds: 3600,
    };
    expect((await apply(t.db, file(review))).results.map((r) => r.action)).toEqual(['created']);
    const made = (await makeService(t.db).getByKey(OWNER, 'review'))!;
    expect(made).toMatchObject({
      kind: 'rrule',
      rrule: 'FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0',
      jitterSeconds: 60,
      expiresAfterSeconds: 3600,
    });
    expect((await apply(t.db, file(review))).results.map((r) => r.action)).toEqual(['unchanged']);
    const edited = {
      ...review,
      rrule: 'FREQ=MONTHLY;BYDAY=1MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
      expires_after_seconds: 600,
    };
    expect((await apply(t.db, file(edited))).results.map((r) => r.action)).toEqual(['updated']);
    const after = (await makeService(t.db).getByKey(OWNER, 'review'))!;
    expect(after).toMatchObject({
      rrule: 'FREQ=MONTHLY;BYDAY=1MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
      expiresAfterSeconds: 600,
      jitterSeconds: 60,
    });
    expect(after.startsAt?.toISOString()).toBe('2029-12-31T23:00:00.000Z');
    const exported = JSON.parse((await exportSchedulesFile(fileService(t.db), OWNER.did)).file) as {
      alarms: Record<string, unknown>[];
    };
    expect(exported.alarms[0]).toMatchObject({
      key: 'review',
      rrule: 'FREQ=MONTHLY;BYDAY=1MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0',
      starts_at: '2029-12-31T23:00:00.000Z',
      ends_at: '2030-12-30T23:00:00.000Z',
      jitter_seconds: 60,
      expires_after_seconds: 600,
    });
  });

  it('a changed entry changes only what the edit changed, as a PATCH, and owes one heads-up', async () => {
    await apply(t.db, file(standup));
    const alarms = makeService(t.db);
    const original = (await alarms.getByKey(OWNER, 'standup'))!;
    // The agent changes the conversation over the API meanwhile.
    await alarms.update(OWNER, { id: original.id }, { conversationId: 'conv-7' }, api);

    const report = await apply(t.db, file({ ...standup, cron: '30 9 * * 1-5', wake_message: 'Blockers?' }));
    expect(report.results[0]).toMatchObject({
      action: 'updated',
      alarm_id: original.id,
      status: 'active',
      fields: ['cron', 'wake_message'],
    });
    const now = (await alarms.getByKey(OWNER, 'standup'))!;
    expect(now).toMatchObject({ id: original.id, cronExpr: '30 9 * * 1-5', wakeMessage: 'Blockers?' });
    expect(now.conversationId).toBe('conv-7'); // the agent's change is kept
    expect(now.nextFireAt.getTime()).not.toBe(original.nextFireAt.getTime());
    expect(await sourceOf(t.db, original.id)).toMatchObject({ source: 'file', file_changes: 2 });
    const [, updated] = await headsUps(t.db);
    expect(updated).toMatchObject({ message_id: `${original.id}:file:2`, change: 'updated' });
    expect(JSON.parse(updated!.body)).toMatchObject({
      type: 'schedule.changed',
      change: 'updated',
      source: 'file',
      owner_did: OWNER.did,
      user_id: OWNER.userId,
      alarm: {
        id: original.id,
        cron_expr: '30 9 * * 1-5',
        wake_message: 'Blockers?',
        conversation_id: 'conv-7',
      },
    });
  });

  it('an alarm an agent changed over the API is not reverted by an unchanged entry, nor by an edit of another field', async () => {
    await apply(t.db, file(standup));
    const alarms = makeService(t.db);
    const { id } = (await alarms.getByKey(OWNER, 'standup'))!;
    await alarms.update(OWNER, { id }, { cron: '0 10 * * *', label: 'moved by the agent' }, api);

    expect((await apply(t.db, file(standup))).results[0]!.action).toBe('unchanged');
    const report = await apply(t.db, file({ ...standup, max_failures: 3 }));
    expect(report.results[0]).toMatchObject({ action: 'updated', fields: ['max_failures'] });
    expect(await alarms.get(OWNER, id)).toMatchObject({
      cronExpr: '0 10 * * *',
      label: 'moved by the agent',
      maxFailures: 3,
    });
  });

  it('a removed field goes back to its default; a paused alarm is edited and stays paused', async () => {
    await apply(t.db, file({ ...standup, conversation_id: 'conv-1', require_ack: false }));
    const alarms = makeService(t.db);
    const { id } = (await alarms.getByKey(OWNER, 'standup'))!;
    await alarms.pause(OWNER, id);
    const { payload: _, ...noPayload } = standup;
    const report = await apply(t.db, file({ ...noPayload, conversation_id: 'conv-1' }));
    expect(report.results[0]).toMatchObject({
      action: 'updated',
      status: 'paused',
      fields: ['payload', 'require_ack'],
    });
    const now = await alarms.get(OWNER, id);
    expect(now).toMatchObject({ status: 'paused', requireAck: true, conversationId: 'conv-1' });
    expect(now.payload.text).toBe('{}');
  });

  it('an entry removed from the file is ignored: its alarm keeps running', async () => {
    await apply(t.db, file(standup, { key: 'launch', at: inDays(30) }));
    const report = await apply(t.db, file({ key: 'launch', at: inDays(30) }));
    expect(report.applied).toBe(true);
    expect((await makeService(t.db).getByKey(OWNER, 'standup'))!.status).toBe('active');
    // Back in the file as it was: still the same alarm, nothing to do.
    expect((await apply(t.db, file(standup))).results[0]!.action).toBe('unchanged');
    expect(await alarmCount(t.db)).toBe(2);
  });

  it('one invalid entry among good ones applies nothing and names every refusal by index and field', async () => {
    await apply(t.db, file(standup));
    const alarms = makeService(t.db);
    const before = await alarms.getByKey(OWNER, 'standup');
    const report = await apply(
      t.db,
      file(
        { ...standup, label: 'renamed' },
        { key: 'new-one', at: inDays(1) },
        { key: 'bad-cron', cron: '61 * * * *' },
        { key: 'bad-zone', cron: '@daily', timezone: 'Mars/Olympus' },
        { key: 'past', at: '2020-01-01T00:00:00Z' },
        { key: 'late', in_seconds: 600 },
        { key: 'typo', cron: '@daily', wake_mesage: 'x' },
        { owner: 'did:web:nope', key: 'who', cron: '@daily' },
        { key: 'standup', cron: '@daily' },
      ),
    );
    expect(report.applied).toBe(false);
    expect(report.results).toEqual([]);
    expect(report.errors.map((e) => e.path)).toEqual([
      'alarms.2.cron',
      'alarms.3.timezone',
      'alarms.4.at',
      'alarms.5.in_seconds',
      'alarms.6.wake_mesage',
      'alarms.7.owner',
      'alarms.8.key',
    ]);
    const messages = report.errors.map((e) => e.message);
    expect(messages[0]).toMatch(/^alarms\.2\.cron: expected a 5-field cron expression/);
    expect(messages[2]).toMatch(/^alarms\.4\.at: expected a time in the future, got "2020-01-01T00:00:00Z"/);
    expect(messages[3]).toMatch(/^alarms\.5\.in_seconds: expected "at" .* or "cron" instead.*, got 600$/);
    expect(messages[4]).toMatch(/did you mean "wake_message"\?$/);
    expect(messages[6]).toMatch(
      /^alarms\.8\.key: expected a key that no other entry of the same owner uses, got "standup", which alarms\.0\.key uses too/,
    );
    // Nothing written: not the good entries' changes, not a heads-up.
    expect(await alarms.getByKey(OWNER, 'standup')).toEqual(before);
    expect(await alarms.getByKey(OWNER, 'new-one')).toBeNull();
    expect(await alarmCount(t.db)).toBe(1);
    expect(await headsUps(t.db)).toHaveLength(1);
  });

  it('a file that is not valid JSON, or not a schedules file, applies nothing and says where', async () => {
    await apply(t.db, file(standup));
    const half = JSON.stringify(file(standup), null, 2).slice(0, 60);
    const cases: [string, RegExp][] = [
      [
        half,
        /^schedules file: expected a JSON object \{"alarms": \[entry, …\]\}, got invalid JSON at line 4, column \d+: /,
      ],
      ['', /got an empty file$/],
      [
        '{"alarms": [{"key": "x",}]}',
        /line 1, column 25: expected a property name, got "}" \(JSON allows no trailing comma\)$/,
      ],
      ['[]', /^schedules file: expected a JSON object, got an array$/],
      ['{"alarm": []}', /^alarm: unknown field; send only alarms; did you mean "alarms"\?$/],
    ];
    for (const [text, message] of cases) {
      const report = await apply(t.db, text);
      expect(report.applied, text).toBe(false);
      expect(report.errors[0]!.message, text).toMatch(message);
    }
    expect(await alarmCount(t.db)).toBe(1);
  });

  it('a cancelled, fired or failed alarm’s changed entry is left alone and said so; unchanged afterwards', async () => {
    await apply(t.db, file(standup, { key: 'once', at: inDays(1) }, { key: 'flaky', cron: '@daily' }));
    const alarms = makeService(t.db);
    const cancelled = (await alarms.getByKey(OWNER, 'standup'))!;
    await alarms.cancel(OWNER, { id: cancelled.id });
    const fired = (await alarms.getByKey(OWNER, 'once'))!;
    await finish(t.db, fired.id, 'fired');
    const failed = (await alarms.getByKey(OWNER, 'flaky'))!;
    await finish(t.db, failed.id, 'failed');

    const edited = file(
      { ...standup, cron: '0 8 * * *' },
      { key: 'once', at: inDays(2) },
      { key: 'flaky', cron: '@weekly' },
    );
    const report = await apply(t.db, edited);
    expect(report.results.map((r) => [r.action, r.status, r.fields])).toEqual([
      ['left_alone', 'cancelled', ['cron']],
      ['left_alone', 'fired', ['at']],
      ['left_alone', 'failed', ['cron']],
    ]);
    expect(report.heads_ups).toBe(0);
    expect((await alarms.get(OWNER, cancelled.id)).cronExpr).toBe('0 9 * * 1-5');
    expect((await apply(t.db, edited)).results.map((r) => r.action)).toEqual([
      'unchanged',
      'unchanged',
      'unchanged',
    ]);
  });

  it('an unchanged entry whose one-shot fired and was pruned does not come back, though its time has passed', async () => {
    const at = new Date(Date.now() + 30_000).toISOString();
    await apply(t.db, file({ key: 'soon', at }));
    const alarm = (await makeService(t.db).getByKey(OWNER, 'soon'))!;
    await pruneAlarm(t.db, alarm.id);
    const report = await apply(t.db, file({ key: 'soon', at }));
    expect(report.results[0]).toMatchObject({ action: 'unchanged', alarm_id: null });
    expect(await alarmCount(t.db)).toBe(0);
    // Edited, it is scheduled again.
    expect((await apply(t.db, file({ key: 'soon', at: inDays(1) }))).results[0]!.action).toBe('created');
  });

  it('an entry naming an alarm made through the API compares with the alarm itself', async () => {
    const alarms = makeService(t.db);
    const { alarm } = await alarms.create(
      OWNER,
      { idempotencyKey: 'standup', cron: '0 9 * * 1-5', timezone: 'Europe/Paris', label: 'standup' },
      api,
    );
    const report = await apply(
      t.db,
      file({
        key: 'standup',
        label: 'standup',
        cron: '0 9 * * 1-5',
        timezone: 'Europe/Paris',
        wake_message: 'hi',
      }),
    );
    expect(report.results[0]).toMatchObject({
      action: 'updated',
      alarm_id: alarm.id,
      fields: ['wake_message'],
    });
    expect(await sourceOf(t.db, alarm.id)).toMatchObject({ source: 'api', file_changes: 1 });
    expect((await headsUps(t.db))[0]!.message_id).toBe(`${alarm.id}:file:1`);
  });

  it('export then apply changes nothing; alarms without a key are left out of the export', async () => {
    await apply(t.db, file(standup, { key: 'launch', at: inDays(30), require_ack: false, max_failures: 9 }));
    const alarms = makeService(t.db);
    await alarms.create(
      OTHER,
      {
        idempotencyKey: 'theirs',
        inSeconds: 3_600,
        payload: new RawJson('{"n": 12345678901234567890}'),
        conversationId: 'c-1',
      },
      api,
    );
    const keyless = (await alarms.create(OTHER, { cron: '@hourly' }, api)).alarm;
    const paused = (await alarms.create(OTHER, { idempotencyKey: 'paused', cron: '@daily' }, api)).alarm;
    await alarms.pause(OTHER, paused.id);
    await alarms.cancel(OWNER, { id: (await alarms.getByKey(OWNER, 'launch'))!.id });

    const service = fileService(t.db);
    const all = await exportSchedulesFile(service);
    expect(all.skipped).toEqual([{ id: keyless.id, owner_did: OTHER.did }]);
    expect(all.file).toContain('"n": 12345678901234567890');
    const doc = JSON.parse(all.file) as { alarms: { owner: string; key: string }[] };
    // Live alarms only (the cancelled launch is not), every owner's.
    expect(doc.alarms.map((a) => [a.owner, a.key])).toEqual([
      [OWNER.did, 'standup'],
      [OTHER.did, 'theirs'],
      [OTHER.did, 'paused'],
    ]);
    const before = await headsUps(t.db);
    const report = await apply(t.db, all.file);
    expect(report.results.map((r) => r.action)).toEqual(['unchanged', 'unchanged', 'unchanged']);
    expect(await headsUps(t.db)).toEqual(before);
    expect((await alarms.get(OTHER, paused.id)).status).toBe('paused');

    const mine = await exportSchedulesFile(service, OWNER.did);
    expect(JSON.parse(mine.file)).toEqual({
      alarms: [
        {
          owner: OWNER.did,
          key: 'standup',
          label: 'standup',
          cron: '0 9 * * 1-5',
          timezone: 'Europe/Paris',
          wake_message: 'Ask the team for blockers.',
          payload: { room: '!abc:example.org' },
        },
      ],
    });
  });

  it('a dry run says what it would do and writes nothing', async () => {
    const report = await apply(t.db, file(standup), { dryRun: true });
    expect(report).toMatchObject({ applied: true, dry_run: true, heads_ups: 0 });
    expect(report.results[0]!.action).toBe('created');
    expect(await alarmCount(t.db)).toBe(0);
    expect(await headsUps(t.db)).toEqual([]);
    expect((await apply(t.db, file(standup))).results[0]!.action).toBe('created');
  });

  it('the owner’s quotas do not apply to the file, which is the operator’s', async () => {
    const service = fileService(t.db, { quotas: { maxActiveAlarms: 1, createRatePerMinute: 1 } });
    const doc = file(...['a', 'b', 'c'].map((key) => ({ key, cron: '@daily' })));
    const report = await applySchedulesFile(service, JSON.stringify(doc));
    expect(report.results.map((r) => r.action)).toEqual(['created', 'created', 'created']);
  });

  it('edits in quick succession are applied in turn, each heads-up numbered', async () => {
    await apply(t.db, file(standup));
    await apply(t.db, file({ ...standup, label: 'one' }));
    await apply(t.db, file({ ...standup, label: 'two' }));
    await apply(t.db, file({ ...standup, label: 'two' }));
    const { id } = (await makeService(t.db).getByKey(OWNER, 'standup'))!;
    expect((await headsUps(t.db)).map((h) => h.message_id)).toEqual([1, 2, 3].map((n) => `${id}:file:${n}`));
    expect(JSON.parse((await headsUps(t.db))[2]!.body).alarm.label).toBe('two');
  });

  it('the README’s example file applies as written', async () => {
    const readme = await readFile(`${ROOT}/README.md`, 'utf8');
    const section = readme.slice(readme.indexOf('## Schedules in a file'));
    const example = /```json\n([\s\S]*?)```/.exec(section)![1]!;
    const report = await apply(t.db, example);
    expect(report.errors).toEqual([]);
    expect(report.results.map((r) => [r.key, r.action])).toEqual([
      ['standup', 'created'],
      ['monthly-report', 'created'],
    ]);
  });
});
