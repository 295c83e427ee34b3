/**
 * `preview_schedule`: `POST /v1/schedules/preview` — the next due instants of a schedule, nothing
 * written, so a model checks "is this what the person meant" before it commits.
 */
import { readPreviewBody } from 'chronos-timers/internal';
import { previewScheduleInput, previewScheduleOutput } from '../schemas.js';
import type { ChronosTool } from '../tool.js';

export const previewSchedule: ChronosTool = {
  name: 'preview_schedule',
  title: 'Preview a schedule',
  description: `See when a schedule would fire, without scheduling anything. Use it before schedule_alarm whenever the user's words are not a plain "in N minutes": a recurring rule, a time zone, a window. Give exactly one of at, in_seconds, cron or rrule, with timezone, starts_at and ends_at as you would send them to schedule_alarm; count says how many instants to show (default 5). The answer's local times are in the zone: read them back against what the user said. A schedule that schedule_alarm would refuse is refused here with the same message.

Use rrule rather than cron for "every other Tuesday" (FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0;BYSECOND=0), "the last Friday of each month" (FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0) or "every weekday at 8:30 until the end of March" (FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8;BYMINUTE=30;BYSECOND=0;UNTIL=20270331T220000Z).

Example: {"rrule": "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0", "timezone": "Europe/Paris", "count": 3}`,
  input: previewScheduleInput,
  output: previewScheduleOutput,
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, { service }) {
    const { spec, count } = readPreviewBody(args);
    const { fires } = await service.alarms.preview(spec, count);
    return { fires };
  },
};
