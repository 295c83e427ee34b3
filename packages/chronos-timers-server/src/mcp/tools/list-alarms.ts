/** `list_alarms`: `GET /v1/alarms` — the caller's alarms, newest first, a page at a time. */
import { readAlarmListQuery } from 'chronos-timers/internal';
import { alarmView } from 'chronos-timers/internal';
import { listAlarmsInput, listAlarmsOutput } from '../schemas.js';
import { onlyFields, type ChronosTool } from '../tool.js';

export const listAlarms: ChronosTool = {
  name: 'list_alarms',
  title: 'List your alarms',
  description: `List your alarms, newest first: to find an alarm's id, or to see what is already scheduled before scheduling more. Read-only.

Filter with status: "active" (still to fire), "paused" (kept, not firing until resumed), "fired" (one-shots that went off), "cancelled" or "failed".

Example: {"status": "active", "limit": 20}`,
  input: listAlarmsInput,
  output: listAlarmsOutput,
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, { service, owner }) {
    onlyFields(args, ['status', 'limit', 'cursor']);
    const page = await service.alarms.list(owner, readAlarmListQuery(args));
    return { alarms: page.items.map(alarmView), next_cursor: page.nextCursor };
  },
};
