import { expect, it } from 'vitest';
import { describeEachBackend } from '../support/backends.js';
import { makeService, OWNER } from '../support/harness.js';
import {
  age,
  deliveredAgo,
  expectSigned,
  failingReceiver,
  fire,
  lapse,
  makeTracker,
  MINUTE,
  NUDGE_AFTER,
  wakeRow,
  wakeService,
  useSinks,
} from './support.js';

describeEachBackend('tracker: the nudge', ({ t }) => {
  const { router, fallback } = useSinks();

  it('an unacknowledged wake gets one alarm.nudge, the §6 body of its fire, once the nudge delay has passed', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { alarm, wakeId } = await fire(t.db, {
      label: 'standup',
      conversation_id: 'conv-7',
      wake_message: 'ask for blockers',
      payload: { build: 42, note: 'é 😀' },
    });

    await age(t.db, wakeId, NUDGE_AFTER - 5_000);
    expect((await tracker.runOnce()).nudged).toBe(0);
    expect(router.requests).toHaveLength(0);

    await age(t.db, wakeId, 10_000);
    expect(await tracker.runOnce()).toMatchObject({ nudged: 1, escalated: 0, failed: 0 });
    expect(router.requests).toHaveLength(1);
    const request = router.requests[0]!;
    expect(request.path).toBe('/wakes');
    expectSigned(request, `${wakeId}:nudge`);
    const row = (await wakeRow(t.db, wakeId))!;
    // The payload is spliced in as stored (I4), as in the fire itself.
    expect(request.body).toContain(`"payload":${alarm.payload.text},`);
    expect(JSON.parse(request.body)).toEqual({
      type: 'alarm.nudge',
      wake_id: wakeId,
      alarm_id: alarm.id,
      user_id: OWNER.userId,
      owner_did: OWNER.did,
      label: 'standup',
      kind: 'once',
      conversation_id: 'conv-7',
      wake_message: 'ask for blockers',
      payload: { note: 'é 😀', build: 42 },
      scheduled_for: expect.any(String),
      fired_at: (row.fired_at as Date).toISOString(),
      lateness_ms: expect.any(Number),
      attempt: 1,
      fire_count: 1,
      require_ack: true,
      trigger: 'schedule',
      instructions: expect.stringMatching(/^Reminder: .*ask for blockers/s),
    });
    expect(row.nudged_at).toBeInstanceOf(Date);
    expect(row).toMatchObject({ status: 'delivered', nudge_attempts: 1, nudge_lease_token: null });
    expect(row.escalated_at).toBeNull();

    // Once: later passes send nothing more, however long it stays unacknowledged (short of escalation).
    await age(t.db, wakeId, MINUTE);
    expect((await tracker.runOnce()).nudged).toBe(0);
    expect(router.requests).toHaveLength(1);
  });

  it('a wake that needs no ack, an acknowledged one and a failed one are never nudged', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const noAck = await fire(t.db, { require_ack: false });
    const acked = await fire(t.db);
    await wakeService(t.db).ack(OWNER, acked.wakeId, 'done');
    const failed = await fire(t.db, {}, failingReceiver(false));
    expect((await wakeRow(t.db, failed.wakeId))!.status).toBe('failed');
    for (const w of [noAck, acked, failed]) await age(t.db, w.wakeId, NUDGE_AFTER + MINUTE);

    expect((await tracker.runOnce()).nudged).toBe(0);
    expect(router.requests).toHaveLength(0);
    for (const w of [noAck, acked, failed]) expect((await wakeRow(t.db, w.wakeId))!.nudged_at).toBeNull();
  });

  it('a wake the router never received is never nudged, however old: nudges count from delivery', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { wakeId } = await fire(t.db, {}, failingReceiver());
    expect((await wakeRow(t.db, wakeId))!.status).toBe('pending');
    await age(t.db, wakeId, NUDGE_AFTER + MINUTE);

    expect((await tracker.runOnce()).nudged).toBe(0);
    expect(router.withId(`${wakeId}:nudge`)).toHaveLength(0);
  });

  it('a wake delivered late is nudged the nudge delay after its delivery, not after its fire', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { wakeId } = await fire(t.db);
    // Fired long ago, delivered just now (after an outage, say).
    await age(t.db, wakeId, NUDGE_AFTER + MINUTE);
    await deliveredAgo(t.db, wakeId, 1_000);
    expect((await tracker.runOnce()).nudged).toBe(0);

    await deliveredAgo(t.db, wakeId, NUDGE_AFTER + 1_000);
    expect((await tracker.runOnce()).nudged).toBe(1);
    expect(router.withId(`${wakeId}:nudge`)).toHaveLength(1);
  });

  it('a withdrawn wake is not nudged: its cron alarm cancelled, or its pending occurrence rescheduled away', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const alarms = makeService(t.db);
    const cron = await fire(t.db, { cron: '@every 1h' });
    await alarms.cancel(OWNER, { id: cron.alarm.id });
    const pending = await fire(t.db, {}, failingReceiver());
    await alarms.update(OWNER, { id: pending.alarm.id }, { inSeconds: 3_600 }, { source: 'api' });
    const current = await fire(t.db);
    for (const w of [cron, pending, current]) await age(t.db, w.wakeId, NUDGE_AFTER + MINUTE);

    expect((await tracker.runOnce()).nudged).toBe(1);
    expect([...new Set(router.requests.map((r) => r.headers['webhook-id']))]).toEqual([
      `${current.wakeId}:nudge`,
    ]);
  });

  it('a nudge the router refuses is not recorded and is sent again after its backoff, then once only', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { wakeId } = await fire(t.db);
    await age(t.db, wakeId, NUDGE_AFTER + 1_000);
    router.answer({ status: 503, body: 'busy' });

    expect(await tracker.runOnce()).toMatchObject({ nudged: 0, failed: 1 });
    let row = (await wakeRow(t.db, wakeId))!;
    expect(row.nudged_at).toBeNull();
    expect(row.tracker_error).toBe('router answered 503 Service Unavailable: busy');
    expect(row.nudge_lease_token).toBeNull();
    // The first retry waits 0.75 s (base 1 s, jitter fixed at 0.5); not before.
    const waitMs = (row.nudge_lease_until as Date).getTime() - (row.updated_at as Date).getTime();
    expect(waitMs).toBe(750);
    expect((await tracker.runOnce()).failed).toBe(0);
    expect(router.requests).toHaveLength(1);

    await lapse(t.db, wakeId, 'nudge');
    expect((await tracker.runOnce()).nudged).toBe(1);
    row = (await wakeRow(t.db, wakeId))!;
    expect(row).toMatchObject({ nudge_attempts: 2, nudge_lease_until: null });
    expect(row.nudged_at).toBeInstanceOf(Date);
    expect(router.withId(`${wakeId}:nudge`)).toHaveLength(2);
    expect(JSON.parse(router.requests[1]!.body).attempt).toBe(2);

    await lapse(t.db, wakeId, 'nudge');
    expect((await tracker.runOnce()).nudged).toBe(0);
  });

  it('a reply reported while the nudge is on its way is within the reply window (nudged_at is set at the claim)', async () => {
    const wakes = wakeService(t.db);
    const tracker = makeTracker(t.db, { router, fallback });
    const { wakeId } = await fire(t.db, { conversation_id: 'conv-fast' });
    await age(t.db, wakeId, NUDGE_AFTER + 1_000);
    // The agent answers before the router has even answered the nudge.
    let acked: string[] = [];
    router.respond = async () => {
      acked = (await wakes.reportReply(OWNER, 'conv-fast')).map((w) => w.id);
      return { status: 200 };
    };

    await tracker.runOnce();
    expect(acked).toEqual([wakeId]);
    expect((await wakeRow(t.db, wakeId))!).toMatchObject({ status: 'acknowledged', ack_inferred: true });
  });

  it('with no router configured the nudge is written to the log and recorded, as fires are', async () => {
    const lines: string[] = [];
    const { pino } = await import('pino');
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const tracker = makeTracker(t.db, { fallback }, { logger });
    const { wakeId } = await fire(t.db, { wake_message: 'hello' });
    await age(t.db, wakeId, NUDGE_AFTER + 1_000);

    expect((await tracker.runOnce()).nudged).toBe(1);
    expect((await wakeRow(t.db, wakeId))!.nudged_at).toBeInstanceOf(Date);
    const logged = lines.map((l) => JSON.parse(l)).find((l) => l.wakeId === wakeId);
    expect(logged).toMatchObject({ wakeMessage: 'hello', msg: expect.stringMatching(/alarm\.nudge/) });
    expect(router.requests).toHaveLength(0);
  });
});
