/**
 * `schedule_alarm`: the create body of `POST /v1/alarms`, answered with `{alarm, deduped}` plus
 * `next_fires`. Alarms made here carry `source: 'mcp'` and require an acknowledgement by default.
 */
import { readAlarmBody } from 'chronos-timers/internal';
import { alarmView } from 'chronos-timers/internal';
import { scheduleAlarmInput, scheduleAlarmOutput } from '../schemas.js';
import type { ChronosTool } from '../tool.js';
import { upcomingFires } from './upcoming-fires.js';

export const scheduleAlarm: ChronosTool = {
  name: 'schedule_alarm',
  title: 'Schedule a wake-up',
  description: `Schedule a wake-up for yourself. When the alarm fires you receive its wake_message (in conversation_id when given), even after this session has ended. Use it whenever the user asks to be reminded, for a follow-up, to check something later, or to do something on a schedule.

Give exactly one of:
- in_seconds: relative, seconds from now ("in 10 minutes" -> 600);
- at: absolute, RFC 3339 with the user's UTC offset ("2027-03-14T09:00:00+01:00"); never a bare local time;
- cron: repeating, read in timezone, the IANA zone the user lives in ("0 9 * * MON-FRI" with "Europe/Paris" = weekdays at 09:00 Paris time). Without timezone, cron runs in UTC;
- rrule: repeating, an RFC 5545 recurrence rule read in timezone, for what cron cannot say. Three examples: "every other Tuesday at 9" = "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0;BYSECOND=0"; "the last Friday of each month at 17:00" = "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0"; "every weekday at 8:30 until the end of March" = "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8;BYMINUTE=30;BYSECOND=0;UNTIL=20270331T220000Z". Always give BYHOUR, BYMINUTE and BYSECOND: parts left out take the start time. Prefer cron for plain "every day/weekday at HH:MM"; check an rrule with preview_schedule first.

For cron and rrule, starts_at and ends_at bound the occurrences (the alarm is done after ends_at), and jitter_seconds spreads background work that many agents share (never early; not for reminders the user expects on the minute). Set expires_after_seconds when a late wake would be worse than none: "remind me at 9, but not if it's already noon" is at 09:00 with expires_after_seconds 10800; an occurrence that could not be delivered in time (an outage, a pause, failed retries) is then given up, and a one-shot becomes "expired".

Write wake_message as instructions to your future self, who will not remember this conversation. Set idempotency_key to a key of your own: calling again with it returns the same alarm (deduped: true) instead of a second one, so a retry after a timeout or an error is safe. Check next_fires in the answer: its local times are in the alarm's zone, so a time-zone mistake shows at once (fix it with reschedule_alarm).

Example: {"in_seconds": 600, "label": "tea", "wake_message": "Tell the user their tea has steeped for 10 minutes.", "idempotency_key": "tea-2027-03-14"}`,
  input: scheduleAlarmInput,
  output: scheduleAlarmOutput,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  async run(args, { service, owner, rawPayload, trace }) {
    const spec = readAlarmBody(args, { create: true, rawPayload: rawPayload(args.payload) });
    const { alarm, deduped } = await service.alarms.create(owner, spec, { source: 'mcp', trace });
    return { alarm: alarmView(alarm), deduped, next_fires: upcomingFires(alarm) };
  },
};
