import { expect, it } from 'vitest';
import { wakesGet } from '../../packages/chronos-timers/src/store/wakes.js';
import { describeEachBackend } from '../support/backends.js';
import { backdate, makeDispatcher, makeService, OWNER, RecordingReceiver } from '../support/harness.js';

const api = { source: 'api' } as const;

describeEachBackend('one fire, one instant', ({ t }) => {
  it("the fire handed to the receiver (the log's firedAt, the webhook's fired_at) carries the wake's own fired_at", async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { inSeconds: 60, requireAck: false }, api);
    await backdate(t.db, alarm.id, 61_000);
    const receiver = new RecordingReceiver();
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(1);
    const [fire] = receiver.fires;
    const wake = await wakesGet(t.db, OWNER.did, fire!.wakeId);
    expect(fire!.firedAt.toISOString()).toBe(wake!.firedAt.toISOString());
  });
});
