import { expect, it } from 'vitest';
import { describeEachBackend } from '../support/backends.js';
import { OTHER, OWNER } from '../support/harness.js';
import {
  age,
  expectSigned,
  fire,
  lapse,
  makeTracker,
  NUDGE_AFTER,
  wakeRow,
  wakeService,
  useSinks,
} from './support.js';

const RECEIPT_KEYS = [
  'type',
  'wake_id',
  'alarm_id',
  'user_id',
  'owner_did',
  'label',
  'note',
  'inferred',
  'acknowledged_at',
];

describeEachBackend('tracker: the receipt', ({ t }) => {
  const { router, fallback } = useSinks();

  it('an ack with a note sends one wake.acknowledged receipt to the fallback, signed', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { alarm, wakeId } = await fire(t.db, { label: 'water the plants' });
    const acked = await wakeService(t.db).ack(OWNER, wakeId, 'watered, all three');

    expect(await tracker.runOnce()).toMatchObject({ receipts: 1, nudged: 0, escalated: 0 });
    expect(fallback.requests).toHaveLength(1);
    const request = fallback.requests[0]!;
    expectSigned(request, `${wakeId}:receipt`);
    const body = JSON.parse(request.body);
    expect(Object.keys(body)).toEqual(RECEIPT_KEYS);
    expect(body).toEqual({
      type: 'wake.acknowledged',
      wake_id: wakeId,
      alarm_id: alarm.id,
      user_id: OWNER.userId,
      owner_did: OWNER.did,
      label: 'water the plants',
      note: 'watered, all three',
      inferred: false,
      acknowledged_at: acked.acknowledgedAt!.toISOString(),
    });
    expect((await wakeRow(t.db, wakeId))!.receipt_sent_at).toBeInstanceOf(Date);

    // Once, also when the ack is repeated.
    await wakeService(t.db).ack(OWNER, wakeId, 'again');
    expect((await tracker.runOnce()).receipts).toBe(0);
    expect(fallback.requests).toHaveLength(1);
  });

  it('an inferred ack (a reported reply) sends a receipt with inferred true and a null note', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { wakeId } = await fire(t.db, { conversation_id: 'conv-r' });
    await wakeService(t.db).reportReply(OWNER, 'conv-r');

    expect((await tracker.runOnce()).receipts).toBe(1);
    expect(JSON.parse(fallback.requests[0]!.body)).toMatchObject({
      type: 'wake.acknowledged',
      wake_id: wakeId,
      note: null,
      inferred: true,
    });
  });

  it('every ack gets its receipt, also of a wake that needed none, and of a nudged one', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const noAck = await fire(t.db, { require_ack: false });
    const nudged = await fire(t.db);
    await age(t.db, nudged.wakeId, NUDGE_AFTER + 1_000);
    await tracker.runOnce();
    const wakes = wakeService(t.db);
    await wakes.ack(OWNER, noAck.wakeId, 'seen');
    await wakes.ack(OWNER, nudged.wakeId, 'seen late');

    expect((await tracker.runOnce()).receipts).toBe(2);
    expect(fallback.withId(`${noAck.wakeId}:receipt`)).toHaveLength(1);
    expect(fallback.withId(`${nudged.wakeId}:receipt`)).toHaveLength(1);
  });

  it('a receipt the fallback refuses is retried after its backoff, and recorded once accepted', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { wakeId } = await fire(t.db);
    await wakeService(t.db).ack(OWNER, wakeId, 'done');
    fallback.answer({ status: 429, headers: { 'retry-after': '30' } });

    expect(await tracker.runOnce()).toMatchObject({ receipts: 0, failed: 1 });
    const row = (await wakeRow(t.db, wakeId))!;
    expect(row.receipt_sent_at).toBeNull();
    // The fallback asked for 30 s: honoured over the 0.75 s backoff.
    expect((row.receipt_lease_until as Date).getTime() - (row.updated_at as Date).getTime()).toBe(30_000);
    expect((await tracker.runOnce()).receipts).toBe(0);

    await lapse(t.db, wakeId, 'receipt');
    expect((await tracker.runOnce()).receipts).toBe(1);
    expect(fallback.withId(`${wakeId}:receipt`)).toHaveLength(2);
    expect((await wakeRow(t.db, wakeId))!.receipt_sent_at).toBeInstanceOf(Date);
  });

  it('the receipt is owed by the row, not by the process: an ack made before a restart is sent after it', async () => {
    const { wakeId } = await fire(t.db);
    await wakeService(t.db).ack(OWNER, wakeId, 'done before the restart');
    await t.restart();

    const tracker = makeTracker(t.db, { router, fallback });
    expect((await tracker.runOnce()).receipts).toBe(1);
    expect(JSON.parse(fallback.requests[0]!.body).note).toBe('done before the restart');
  });

  it('a refused ack (another owner’s wake, a blank note) sends no receipt and changes nothing', async () => {
    const tracker = makeTracker(t.db, { router, fallback });
    const { wakeId } = await fire(t.db);
    const wakes = wakeService(t.db);
    const before = await wakeRow(t.db, wakeId);
    await expect(wakes.ack(OTHER, wakeId, 'mine now')).rejects.toMatchObject({ code: 'not_found' });
    await expect(wakes.ack(OWNER, wakeId, ' \n\t ')).rejects.toMatchObject({
      code: 'invalid_input',
    });
    expect(await wakeRow(t.db, wakeId)).toEqual(before);

    expect((await tracker.runOnce()).receipts).toBe(0);
    expect(fallback.requests).toHaveLength(0);
  });
});
