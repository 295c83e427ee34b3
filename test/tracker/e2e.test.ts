import {
  escalationBodySchema,
  receiptBodySchema,
  wakeBodySchema,
} from '../../packages/chronos-timers/src/wire/webhooks.js';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import type { ChronosApp } from '../../packages/chronos-timers-server/src/http/app.js';
import { createApp } from '../../packages/chronos-timers-server/src/server.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import { WAKE_VIEW_KEYS } from '../http/support.js';
import { describeEachBackend } from '../support/backends.js';
import { OTHER, OWNER } from '../support/harness.js';
import { Sink } from '../support/sink.js';
import { expectSigned, SECRET } from './support.js';

describeEachBackend('tracker end to end, over real HTTP', ({ t }) => {
  let router: Sink;
  let fallback: Sink;
  let service: ChronosService;
  let app: ChronosApp;
  let base: string;
  let auth: Record<string, string>;
  let otherAuth: Record<string, string>;

  beforeAll(async () => {
    router = await Sink.start();
    fallback = await Sink.start();
  });
  afterEach(async () => {
    await app?.close();
    await service?.stop(); // the database belongs to the test file
    await service?.tracker.close();
  });
  afterAll(async () => {
    await router?.close();
    await fallback?.close();
  });

  /**
   * The service and its API on a real socket, loops running. Started inside the test: the
   * tables are emptied before each test, which must not race the loops.
   */
  async function serve(): Promise<void> {
    const config = loadConfig({
      CHRONOS_ROUTER_URL: router.url('/wakes'),
      CHRONOS_FALLBACK_URL: fallback.url('/human'),
      CHRONOS_WEBHOOK_SECRET: SECRET,
      CHRONOS_NUDGE_AFTER: '400ms',
      CHRONOS_ESCALATE_AFTER: '800ms',
      CHRONOS_TRACKER_INTERVAL: '100ms',
      CHRONOS_CREATE_RATE: '0',
      CHRONOS_MAX_ACTIVE_ALARMS: '0',
    });
    service = await ChronosService.open(config, { db: t.db, logger: silentLogger });
    app = await createApp(service);
    await app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    auth = { authorization: `Bearer ${(await service.keys.create(OWNER.did, 'e2e')).key}` };
    otherAuth = { authorization: `Bearer ${(await service.keys.create(OTHER.did, 'other')).key}` };
    await service.start();
  }

  async function send(method: string, path: string, body?: unknown, headers = auth) {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  }

  it('fire → nudge → escalation → ack → receipt, each once, signed, with the stages shown on the wake', async () => {
    await serve();
    const created = await send('POST', '/v1/alarms', {
      in_seconds: 1,
      label: 'check the build',
      conversation_id: 'conv-e2e',
      wake_message: 'Is the nightly build green?',
    });
    expect(created.status).toBe(201);
    expect(created.body.alarm.require_ack).toBe(true);
    const alarmId: string = created.body.alarm.id;

    // The fire.
    await router.waitFor(1);
    const fired = router.requests[0]!;
    const wakeId: string = JSON.parse(fired.body).wake_id;
    expectSigned(fired, wakeId);
    expect(JSON.parse(fired.body)).toMatchObject({ type: 'alarm.fired', alarm_id: alarmId });
    // Every body sent is the one the OpenAPI document's webhooks describe, key for key.
    expect(wakeBodySchema.safeParse(JSON.parse(fired.body)).error).toBeUndefined();

    // Nobody answers: the nudge, to the router.
    await router.waitFor(2);
    const nudge = router.requests[1]!;
    expectSigned(nudge, `${wakeId}:nudge`);
    expect(wakeBodySchema.safeParse(JSON.parse(nudge.body)).error).toBeUndefined();
    expect(JSON.parse(nudge.body)).toMatchObject({
      type: 'alarm.nudge',
      wake_id: wakeId,
      alarm_id: alarmId,
      conversation_id: 'conv-e2e',
      wake_message: 'Is the nightly build green?',
    });

    // Still nobody: the escalation, to the human.
    await fallback.waitFor(1);
    const escalation = fallback.requests[0]!;
    expectSigned(escalation, `${wakeId}:escalation`);
    expect(escalationBodySchema.safeParse(JSON.parse(escalation.body)).error).toBeUndefined();
    expect(JSON.parse(escalation.body)).toMatchObject({
      type: 'wake.escalated',
      wake_id: wakeId,
      alarm_id: alarmId,
      user_id: OWNER.userId,
      owner_did: OWNER.did,
      label: 'check the build',
      conversation_id: 'conv-e2e',
      wake_message: 'Is the nightly build green?',
    });

    // GET /v1/wakes shows the stages, filtered by status, with exactly the §7 keys; escalated_at
    // once the fallback's 2xx has been recorded, a moment after the fallback saw the request.
    let shown: Record<string, string | null> = {};
    for (let turn = 0; !shown.escalated_at; turn++) {
      if (turn > 1_000) throw new Error('the escalation was never recorded');
      const open = await send('GET', '/v1/wakes?status=delivered');
      expect(open.status).toBe(200);
      expect(open.body.wakes).toHaveLength(1);
      shown = open.body.wakes[0];
    }
    expect(Object.keys(shown).sort()).toEqual([...WAKE_VIEW_KEYS].sort());
    expect(shown).toMatchObject({ id: wakeId, status: 'delivered', acknowledged_at: null, ack_note: null });
    const fireMs = Date.parse(shown.fired_at!);
    expect(Date.parse(shown.nudged_at!) - fireMs).toBeGreaterThanOrEqual(400);
    expect(Date.parse(shown.escalated_at) - fireMs).toBeGreaterThanOrEqual(800);
    expect((await send('GET', '/v1/wakes?status=acknowledged')).body.wakes).toEqual([]);

    // Refused acks change nothing and send nothing.
    expect((await send('POST', `/v1/wakes/${wakeId}/ack`, { note: 'not mine' }, otherAuth)).status).toBe(404);
    expect((await send('POST', `/v1/wakes/${wakeId}/ack`, { note: '   ' })).status).toBe(400);

    // The agent acknowledges: the receipt, to the human.
    const acked = await send('POST', `/v1/wakes/${wakeId}/ack`, { note: 'green, 412 tests' });
    expect(acked.status).toBe(200);
    expect(acked.body.wake).toMatchObject({ status: 'acknowledged', ack_note: 'green, 412 tests' });
    await fallback.waitFor(2);
    const receipt = fallback.requests[1]!;
    expectSigned(receipt, `${wakeId}:receipt`);
    expect(receiptBodySchema.safeParse(JSON.parse(receipt.body)).error).toBeUndefined();
    expect(JSON.parse(receipt.body)).toEqual({
      type: 'wake.acknowledged',
      wake_id: wakeId,
      alarm_id: alarmId,
      user_id: OWNER.userId,
      owner_did: OWNER.did,
      label: 'check the build',
      note: 'green, 412 tests',
      inferred: false,
      acknowledged_at: acked.body.wake.acknowledged_at,
    });
    const done = await send('GET', '/v1/wakes?status=acknowledged');
    expect(done.body.wakes.map((w: { id: string }) => w.id)).toEqual([wakeId]);

    // Each once. Stopping lets the pass under way record the receipt; one more pass finds
    // nothing left to send.
    await service.stop();
    expect(await service.tracker.runOnce()).toMatchObject({ nudged: 0, escalated: 0, receipts: 0 });
    expect(router.requests.map((r) => r.headers['webhook-id'])).toEqual([wakeId, `${wakeId}:nudge`]);
    expect(fallback.requests.map((r) => r.headers['webhook-id'])).toEqual([
      `${wakeId}:escalation`,
      `${wakeId}:receipt`,
    ]);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^chronos_nudges_total 1$/m);
    expect(metrics).toMatch(/^chronos_escalations_total 1$/m);
    expect(metrics).toMatch(/^chronos_receipts_total 1$/m);
    expect(metrics).toMatch(/^chronos_wakes\{stage="acknowledged"\} 1$/m);
    expect(metrics).toMatch(/^chronos_time_to_ack_seconds_count\{inferred="false"\} 1$/m);
  });
});
