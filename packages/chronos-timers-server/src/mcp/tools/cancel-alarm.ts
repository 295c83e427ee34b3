/** `cancel_alarm`: `DELETE /v1/alarms/{id}` — the alarm never fires again. */
import { alarmView } from 'chronos-timers/internal';
import { alarmOutput, cancelAlarmInput } from '../schemas.js';
import { onlyFields, stringArg, type ChronosTool } from '../tool.js';
import { ALARM_ID_EXPECTED } from './alarm-id.js';

export const cancelAlarm: ChronosTool = {
  name: 'cancel_alarm',
  title: 'Cancel an alarm',
  description: `Cancel one of your alarms so that it never fires again (for a repeating alarm: none of its future fires). Final: a cancelled alarm cannot be resumed; to change a time, use reschedule_alarm instead. Cancelling an alarm that is already cancelled answers it again; one that already fired or failed cannot be cancelled (there is nothing left to stop).

Example: {"id": "2f1e8c7a-5b3d-4e8f-9a1b-6c2d3e4f5a6b"}`,
  input: cancelAlarmInput,
  output: alarmOutput,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  async run(args, { service, owner }) {
    onlyFields(args, ['id']);
    const alarm = await service.alarms.cancel(owner, { id: stringArg(args, 'id', ALARM_ID_EXPECTED) });
    return { alarm: alarmView(alarm) };
  },
};
