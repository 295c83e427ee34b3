/**
 * `reschedule_alarm`: `PATCH /v1/alarms/{id}` — a new schedule and/or new fields for an active
 * alarm, in one UPDATE; answered with `{alarm}` plus `next_fires`. Unlike the HTTP API, a call
 * that changes nothing is refused: a model that sends only the id has forgotten what to change.
 */
import { ChronosError } from 'chronos-timers/internal';
import { readAlarmBody } from 'chronos-timers/internal';
import { alarmView } from 'chronos-timers/internal';
import { rescheduleAlarmInput, rescheduleAlarmOutput } from '../schemas.js';
import { stringArg, type ChronosTool } from '../tool.js';
import { ALARM_ID_EXPECTED } from './alarm-id.js';
import { upcomingFires } from './upcoming-fires.js';

export const rescheduleAlarm: ChronosTool = {
  name: 'reschedule_alarm',
  title: 'Reschedule or edit an alarm',
  description: `Change one of your active (or paused) alarms in place, keeping its id: prefer this to cancelling and scheduling again. Send the alarm's id and only the fields to change:
- a new time: exactly one of in_seconds (relative, seconds from now), at (absolute, RFC 3339 with an offset), cron (repeating, read in timezone, the IANA zone the user lives in) or rrule (an RFC 5545 rule such as "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0;BYSECOND=0", for every other week, the last Friday "BYDAY=-1FR", until a date "UNTIL=20270331T220000Z"). It replaces the old schedule and may turn a one-shot into a repeating alarm or back;
- timezone alone: the same cron or rrule read in another zone;
- starts_at, ends_at, jitter_seconds (cron and rrule only): a new window or jitter for the same schedule;
- expires_after_seconds: give up an occurrence not delivered this many seconds after it was due (e.g. 10800: not after three hours);
- null for starts_at, ends_at, jitter_seconds or expires_after_seconds clears it (e.g. {"ends_at": null}: no end any more);
- label, wake_message (instructions to your future self), payload, conversation_id, idempotency_key, max_failures, require_ack: replaced by the new value.

Only an active or paused alarm can be changed (a paused one stays paused); for one that fired or was cancelled, use schedule_alarm. Check next_fires in the answer (local times are in the alarm's zone).

Example: {"id": "2f1e8c7a-5b3d-4e8f-9a1b-6c2d3e4f5a6b", "at": "2027-03-14T10:30:00+01:00"}`,
  input: rescheduleAlarmInput,
  output: rescheduleAlarmOutput,
  // Not idempotent: in_seconds counts from the moment of each call.
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  async run(args, { service, owner, rawPayload }) {
    const id = stringArg(args, 'id', ALARM_ID_EXPECTED);
    const { id: _id, ...changes } = args;
    if (Object.keys(changes).length === 0) {
      const message =
        'arguments: expected at least one field to change besides "id" (at, in_seconds, cron or rrule for a new time; ' +
        'timezone, label, wake_message, payload, ...), got only "id"';
      throw new ChronosError('invalid_input', message, { errors: [{ path: '', message }] });
    }
    const spec = readAlarmBody(changes, { create: false, rawPayload: rawPayload(changes.payload) });
    const alarm = await service.alarms.update(owner, { id }, spec, { source: 'mcp' });
    return { alarm: alarmView(alarm), next_fires: upcomingFires(alarm) };
  },
};
