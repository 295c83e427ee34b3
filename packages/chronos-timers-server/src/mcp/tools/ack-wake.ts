/** `ack_wake`: `POST /v1/wakes/{id}/ack` — the agent has dealt with a wake. */
import { wakeView } from 'chronos-timers/internal';
import { readAckBody } from 'chronos-timers/internal';
import { ackWakeInput, ackWakeOutput } from '../schemas.js';
import { onlyFields, stringArg, type ChronosTool } from '../tool.js';

export const ackWake: ChronosTool = {
  name: 'ack_wake',
  title: 'Acknowledge a wake',
  description: `Acknowledge a wake you received, once you have dealt with it: send its wake_id (it comes with the wake; it is not the alarm id) and a short note saying what you did. Until then, a wake whose alarm requires acknowledgement is delivered again as a nudge after a few minutes, and later escalated to a human. Acknowledging a wake twice is harmless (the first note stays).

Example: {"wake_id": "9b2c4d6e-8f1a-4b3c-9d5e-7f6a8b9c0d1e", "note": "Reminded the user of the 10:00 meeting."}`,
  input: ackWakeInput,
  output: ackWakeOutput,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, { service, owner }) {
    onlyFields(args, ['wake_id', 'note']);
    const wakeId = stringArg(
      args,
      'wake_id',
      'the wake_id of a wake you received (a UUID), not the alarm id',
    );
    const note = readAckBody('note' in args ? { note: args.note } : {});
    const wake = await service.wakes.ack(owner, wakeId, note);
    return { wake: wakeView(wake) };
  },
};
