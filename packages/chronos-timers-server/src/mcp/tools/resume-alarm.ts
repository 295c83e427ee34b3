/** `resume_alarm`: `POST /v1/alarms/{id}/resume` — a paused alarm fires again. */
import { alarmView } from 'chronos-timers/internal';
import { resumeAlarmInput, rescheduleAlarmOutput } from '../schemas.js';
import { onlyFields, stringArg, type ChronosTool } from '../tool.js';
import { ALARM_ID_EXPECTED } from './alarm-id.js';
import { upcomingFires } from './upcoming-fires.js';

export const resumeAlarm: ChronosTool = {
  name: 'resume_alarm',
  title: 'Resume a paused alarm',
  description: `Resume one of your paused alarms so that it fires again. A repeating alarm fires next at its first occurrence after now (occurrences missed while paused are not fired); a one-shot whose time passed while paused fires right away, otherwise at its time. Check next_fires in the answer. Resuming an active alarm answers it again.

Example: {"id": "2f1e8c7a-5b3d-4e8f-9a1b-6c2d3e4f5a6b"}`,
  input: resumeAlarmInput,
  output: rescheduleAlarmOutput,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, { service, owner }) {
    onlyFields(args, ['id']);
    const alarm = await service.alarms.resume(owner, stringArg(args, 'id', ALARM_ID_EXPECTED));
    return { alarm: alarmView(alarm), next_fires: upcomingFires(alarm) };
  },
};
