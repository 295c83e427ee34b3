/** `pause_alarm`: `POST /v1/alarms/{id}/pause` — the alarm stops firing until resumed. */
import { alarmView } from 'chronos-timers/internal';
import { alarmOutput, pauseAlarmInput } from '../schemas.js';
import { onlyFields, stringArg, type ChronosTool } from '../tool.js';
import { ALARM_ID_EXPECTED } from './alarm-id.js';

export const pauseAlarm: ChronosTool = {
  name: 'pause_alarm',
  title: 'Pause an alarm',
  description: `Pause one of your active alarms: it keeps everything (schedule, message, payload) but does not fire until you call resume_alarm. Use it for "hold my standup reminder while I am away" instead of cancelling, which is final. While paused, occurrences that come and go are skipped, not saved up. Pausing a paused alarm answers it again; a fired, cancelled or failed one cannot be paused.

Example: {"id": "2f1e8c7a-5b3d-4e8f-9a1b-6c2d3e4f5a6b"}`,
  input: pauseAlarmInput,
  output: alarmOutput,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, { service, owner }) {
    onlyFields(args, ['id']);
    const alarm = await service.alarms.pause(owner, stringArg(args, 'id', ALARM_ID_EXPECTED));
    return { alarm: alarmView(alarm) };
  },
};
