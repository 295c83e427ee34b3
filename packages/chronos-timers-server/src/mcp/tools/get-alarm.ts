/** `get_alarm`: `GET /v1/alarms/{id}` — one of the caller's alarms. */
import { alarmView } from 'chronos-timers/internal';
import { alarmOutput, getAlarmInput } from '../schemas.js';
import { onlyFields, stringArg, type ChronosTool } from '../tool.js';
import { ALARM_ID_EXPECTED } from './alarm-id.js';

export const getAlarm: ChronosTool = {
  name: 'get_alarm',
  title: 'Read one alarm',
  description: `Read one of your alarms by its id: when it is next due (next_fire_at, UTC, while active), its status ("active", "paused", "fired", "cancelled" or "failed"), delivery problems (failure_count, last_error) and what it will deliver (wake_message, payload). Read-only. Use list_alarms when you do not know the id.

Example: {"id": "2f1e8c7a-5b3d-4e8f-9a1b-6c2d3e4f5a6b"}`,
  input: getAlarmInput,
  output: alarmOutput,
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, { service, owner }) {
    onlyFields(args, ['id']);
    const alarm = await service.alarms.get(owner, stringArg(args, 'id', ALARM_ID_EXPECTED));
    return { alarm: alarmView(alarm) };
  },
};
