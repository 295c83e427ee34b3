/**
 * The heads-up an agent receives when a schedules-file edit creates or changes one of its alarms
 * (contract §13): a signed `schedule.changed` POST to the router, at a real sink, its signature
 * checked by the `standardwebhooks` library; retried like the tracker's other messages.
 */
import { afterEach, expect, it } from 'vitest';
import { writeFile } from 'node:fs/promises';
import { Webhook } from 'standardwebhooks';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { WebhookReceiver } from '../../packages/chronos-timers-server/src/receivers/webhook.js';
import { scheduleChangedBodySchema } from '../../packages/chronos-timers/src/wire/webhooks.js';
import { describeEachBackend } from '../support/backends.js';
import { makeService } from '../support/harness.js';
import { expectSigned, makeTracker, SECRET, useSinks } from '../tracker/support.js';
import { apply, file, headsUps, lapseHeadsUps, OWNER, recordingLogger, tempDir } from './support.js';

const BODY_KEYS = ['type', 'change', 'source', 'owner_did', 'user_id', 'alarm'];

const standup = {
  key: 'standup',
  label: 'standup',
  cron: '0 9 * * 1-5',
  timezone: 'Europe/Paris',
  wake_message: 'Ask for blockers.',
};

describeEachBackend('the schedules file: the heads-up', ({ t }) => {
  const { router } = useSinks();
  const services: ChronosService[] = [];
  afterEach(async () => {
    // The test database stays open: stop the loops and close their connections only.
    for (const service of services.splice(0)) {
      await service.stop();
      if (service.receiver instanceof WebhookReceiver) await service.receiver.close();
      await service.tracker.close();
    }
  });

  it('each alarm an edit creates or changes is announced once to the router, signed, with its own webhook-id', async () => {
    const tracker = makeTracker(t.db, { router });
    const text = JSON.stringify(file(standup)).replace(
      `"key":"standup"`,
      `"key":"standup","payload":{"build":12345678901234567890}`,
    );
    await apply(t.db, text);
    const alarm = (await makeService(t.db).getByKey(OWNER, 'standup'))!;

    expect(await tracker.runOnce()).toMatchObject({ headsUps: 1, failed: 0 });
    expect(router.requests).toHaveLength(1);
    const created = router.requests[0]!;
    expectSigned(created, `${alarm.id}:file:1`);
    expect(() => new Webhook(SECRET).verify(created.body, created.headers)).not.toThrow();
    expect(created.path).toBe('/wakes');
    expect(created.body).toContain('"payload":{"build": 12345678901234567890}');
    const body = JSON.parse(created.body);
    expect(Object.keys(body)).toEqual(BODY_KEYS);
    // The body the OpenAPI document's webhooks describe, key for key.
    expect(scheduleChangedBodySchema.safeParse(body).error).toBeUndefined();
    expect(body).toMatchObject({
      type: 'schedule.changed',
      change: 'created',
      source: 'file',
      owner_did: OWNER.did,
      user_id: OWNER.userId,
      alarm: {
        id: alarm.id,
        label: 'standup',
        kind: 'cron',
        cron_expr: '0 9 * * 1-5',
        timezone: 'Europe/Paris',
        next_fire_at: alarm.nextFireAt.toISOString(),
        wake_message: 'Ask for blockers.',
        status: 'active',
        idempotency_key: 'standup',
        require_ack: true,
      },
    });
    expect(body.alarm).not.toHaveProperty('owner_did');

    // Sent once: another pass, or the same file again, sends nothing.
    await apply(t.db, text);
    expect((await tracker.runOnce()).headsUps).toBe(0);

    await apply(t.db, file({ ...standup, cron: '0 10 * * 1-5' }));
    expect((await tracker.runOnce()).headsUps).toBe(1);
    const updated = router.requests[1]!;
    expectSigned(updated, `${alarm.id}:file:2`);
    expect(JSON.parse(updated.body)).toMatchObject({
      change: 'updated',
      alarm: { id: alarm.id, cron_expr: '0 10 * * 1-5' },
    });
    expect(router.requests).toHaveLength(2);
    expect((await headsUps(t.db)).every((h) => h.sent_at instanceof Date)).toBe(true);
  });

  it('a heads-up the router cannot take now is retried with the same webhook-id; one it refuses for good is not', async () => {
    const tracker = makeTracker(t.db, { router });
    await apply(t.db, file(standup));
    const { id } = (await makeService(t.db).getByKey(OWNER, 'standup'))!;
    router.answer({ status: 503, body: 'busy' });
    expect(await tracker.runOnce()).toMatchObject({ headsUps: 0, failed: 1 });
    const [waiting] = await headsUps(t.db);
    expect(waiting).toMatchObject({
      attempts: 1,
      sent_at: null,
      last_error: 'router answered 503 Service Unavailable: busy',
    });
    expect(waiting!.lease_until!.getTime()).toBeGreaterThan(Date.now());
    // Not before its backoff.
    expect((await tracker.runOnce()).headsUps).toBe(0);
    await lapseHeadsUps(t.db);
    expect((await tracker.runOnce()).headsUps).toBe(1);
    expect(router.withId(`${id}:file:1`)).toHaveLength(2);
    expect((await headsUps(t.db))[0]).toMatchObject({ attempts: 2, sent_at: expect.any(Date) });

    await apply(t.db, file({ ...standup, label: 'refused' }));
    router.answer({ status: 400, body: 'unknown type' });
    expect(await tracker.runOnce()).toMatchObject({ headsUps: 0, failed: 1 });
    await lapseHeadsUps(t.db);
    expect((await tracker.runOnce()).headsUps).toBe(0);
    expect(router.withId(`${id}:file:2`)).toHaveLength(1);
    expect((await headsUps(t.db))[1]).toMatchObject({
      failed_at: expect.any(Date),
      last_error: 'router answered 400 Bad Request: unknown type',
    });
  });

  it('with no router configured the heads-up is written to the log instead', async () => {
    const { logger, lines } = recordingLogger();
    const tracker = makeTracker(t.db, {}, { logger });
    await apply(t.db, file(standup));
    const { id } = (await makeService(t.db).getByKey(OWNER, 'standup'))!;
    expect((await tracker.runOnce()).headsUps).toBe(1);
    expect(lines).toContainEqual(
      expect.objectContaining({
        messageId: `${id}:file:1`,
        alarmId: id,
        change: 'created',
        msg: 'schedule.changed (no CHRONOS_ROUTER_URL: logged instead of delivered)',
      }),
    );
    expect((await headsUps(t.db))[0]!.sent_at).toBeInstanceOf(Date);
  });

  it('sent heads-ups are pruned after the retention period', async () => {
    const tracker = makeTracker(t.db, { router });
    await apply(t.db, file(standup));
    await tracker.runOnce();
    await t.db.query(
      sql('test_age_heads_ups', `UPDATE chronos.schedule_changes SET sent_at = now() - interval '8 days'`),
    );
    await tracker.runOnce();
    expect(await headsUps(t.db)).toEqual([]);
  });

  it('chronos serve reconciles CHRONOS_SCHEDULES_FILE at start and sends the heads-up at once', async () => {
    const files = await tempDir();
    try {
      await writeFile(files.path, JSON.stringify(file(standup)));
      const { logger, lines } = recordingLogger();
      const config = loadConfig({
        CHRONOS_SCHEDULES_FILE: files.path,
        CHRONOS_ROUTER_URL: router.url(),
        CHRONOS_WEBHOOK_SECRET: SECRET,
        // Far longer than the test: only the reconcile's poke can make the tracker send now.
        CHRONOS_TRACKER_INTERVAL: '1h',
      });
      const service = await ChronosService.open(config, { db: t.db, logger });
      services.push(service);
      await service.start();
      const { id } = (await makeService(t.db).getByKey(OWNER, 'standup'))!;
      await router.waitFor(1);
      expectSigned(router.requests[0]!, `${id}:file:1`);
      expect(lines).toContainEqual(
        expect.objectContaining({
          component: 'schedules-file',
          msg: `schedules file: alarms.0 (owner ${OWNER.did}, key "standup"): created alarm ${id}`,
        }),
      );
      expect(lines).toContainEqual(
        expect.objectContaining({
          msg: `schedules file ${files.path} reconciled: 1 created, 0 updated, 0 unchanged, 0 left alone`,
        }),
      );
    } finally {
      await files.remove();
    }
  });
});
