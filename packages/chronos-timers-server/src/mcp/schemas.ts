/**
 * The MCP tools' schemas: what each tool publishes as its input, and the exact shape of its
 * structured content (the HTTP answer of the same operation plus `server_time`, contract §8).
 *
 * Inputs reuse the create/patch fields of `alarm-input.ts`, with descriptions that tell a model
 * what each one is for. They are published, not enforced by the SDK: see `published` below.
 */
import { z } from 'zod';
import { ALARM_STATUSES, WAKE_STATUSES } from 'chronos-timers/internal';
import { PAGE_LIMIT } from 'chronos-timers/internal';
import { alarmFields, clearableShape, LIMITS } from 'chronos-timers/internal';
import { alarmViewSchema, nextFiresSchema, wakeViewSchema } from 'chronos-timers/internal';

const time = (what: string) => z.string().describe(`${what}: RFC 3339 in UTC with milliseconds.`);

// ---- Inputs -----------------------------------------------------------------------------------

/** The alarm fields as a model should read them; types and limits are those of the HTTP API. */
export const toolAlarmFields = {
  ...alarmFields,
  at: alarmFields.at.describe(
    'Absolute time of a one-shot alarm: RFC 3339 WITH an offset, e.g. "2027-03-14T09:00:00+01:00" ' +
      '(09:00 in Paris in winter) or "2027-03-14T08:00:00Z". Use the offset of the zone the user means; ' +
      'a time more than 60 s in the past is refused.',
  ),
  in_seconds: alarmFields.in_seconds.describe(
    `Relative time of a one-shot alarm: seconds from now (1 to ${LIMITS.inSecondsMax}), e.g. 600 for "in ten minutes". ` +
      'Prefer this for "in N minutes/hours": no time zone involved.',
  ),
  cron: alarmFields.cron.describe(
    'A repeating schedule, read in `timezone`: 5-field cron "minute hour day-of-month month day-of-week" ' +
      '("0 9 * * MON-FRI" = weekdays at 09:00), a descriptor ("@daily", "@hourly", "@weekly"), or ' +
      '"@every 15m" / "@every 1h30m" (real elapsed time). At most one fire a minute by default.',
  ),
  rrule: alarmFields.rrule.describe(
    'A repeating schedule as an RFC 5545 recurrence rule (what calendars export), read in `timezone` as wall-clock ' +
      'time. Use it instead of cron for what cron cannot say: every other week, the Nth or last weekday of a month, ' +
      'a fixed number of times, until a date. Give BYHOUR, BYMINUTE and BYSECOND: parts left out take the start ' +
      '(starts_at, else now). Examples: "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0;BYSECOND=0" (every other ' +
      'Tuesday 09:00); "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0" (last Friday of each month 17:00); ' +
      '"FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8;BYMINUTE=30;BYSECOND=0;UNTIL=20270331T220000Z" (weekdays 08:30 ' +
      'until the end of March). FREQ is MINUTELY to YEARLY; a leading "RRULE:" is fine.',
  ),
  timezone: alarmFields.timezone.describe(
    'IANA time zone the user lives in, e.g. "Europe/Paris", "America/New_York" (default "UTC"). ' +
      'Needed for cron and rrule: "0 9 * * *" means 09:00 in this zone, across DST changes. Not an abbreviation ' +
      'like "CET" and not an offset like "+01:00".',
  ),
  starts_at: alarmFields.starts_at.describe(
    'For cron and rrule: no occurrence before this time, RFC 3339 with an offset, e.g. "2027-04-01T00:00:00+02:00". ' +
      'An rrule counts from it (its DTSTART).',
  ),
  ends_at: alarmFields.ends_at.describe(
    'For cron and rrule: no occurrence after this time, RFC 3339 with an offset; the alarm is then done (fired).',
  ),
  jitter_seconds: alarmFields.jitter_seconds.describe(
    'For cron and rrule: each occurrence fires up to this many seconds late, never early, at an offset fixed per ' +
      'alarm and occurrence (1 to 3600). Use it for background work many agents share ("every day at 09:00"), not ' +
      'for a reminder the user expects on the minute.',
  ),
  expires_after_seconds: alarmFields.expires_after_seconds.describe(
    'For reminders that are pointless late: if an occurrence cannot be delivered within this many seconds of its ' +
      'due time (an outage, a long pause, failed retries), it is given up and never delivered (a one-shot becomes ' +
      '"expired"). E.g. 10800 for "remind me at 9, but not if it is already noon". Without it, a late wake is ' +
      'still delivered.',
  ),
  wake_message: alarmFields.wake_message.describe(
    'The text you will receive when the alarm fires, verbatim (at most 16 KiB). Write it as ' +
      'instructions to your future self, who will not remember this conversation: what to do and why, ' +
      'e.g. "Check whether the nightly build of repo X passed; if it failed, summarise the error for the user."',
  ),
  payload: alarmFields.payload.describe(
    'Any JSON object handed back verbatim with every wake (at most 64 KiB), e.g. {"ticket": "OPS-42"}.',
  ),
  idempotency_key: alarmFields.idempotency_key.describe(
    'Your own unique key for this alarm, e.g. "build-check-2027-03-14". Scheduling again with the same key ' +
      'returns the existing alarm (deduped: true) instead of creating a second one, so a retry after a ' +
      'timeout or an error is safe.',
  ),
  conversation_id: alarmFields.conversation_id.describe(
    'The conversation the wake should resume, as your platform names it ("" or absent: a fresh one).',
  ),
  require_ack: alarmFields.require_ack.describe(
    'Whether you must acknowledge the wake with ack_wake (default true). An unacknowledged wake is ' +
      'delivered again as a nudge after a few minutes, then escalated to a human.',
  ),
} as const;

const alarmId = z.string().describe('The alarm id (a UUID), as returned by schedule_alarm or list_alarms.');

const scheduleFields = {
  label: toolAlarmFields.label.optional(),
  at: toolAlarmFields.at.optional(),
  in_seconds: toolAlarmFields.in_seconds.optional(),
  cron: toolAlarmFields.cron.optional(),
  rrule: toolAlarmFields.rrule.optional(),
  timezone: toolAlarmFields.timezone.optional(),
  starts_at: toolAlarmFields.starts_at.optional(),
  ends_at: toolAlarmFields.ends_at.optional(),
  jitter_seconds: toolAlarmFields.jitter_seconds.optional(),
  expires_after_seconds: toolAlarmFields.expires_after_seconds.optional(),
  wake_message: toolAlarmFields.wake_message.optional(),
  payload: toolAlarmFields.payload.optional(),
  idempotency_key: toolAlarmFields.idempotency_key.optional(),
  conversation_id: toolAlarmFields.conversation_id.optional(),
  max_failures: toolAlarmFields.max_failures.optional(),
  require_ack: toolAlarmFields.require_ack.optional(),
};

/** A list's page fields: how many `items` a page holds, and where the next begins. */
function pageFields(items?: string) {
  const { min, max, default: limit } = PAGE_LIMIT;
  return {
    limit: z
      .number()
      .int()
      .min(min)
      .max(max)
      .optional()
      .describe(`How many ${items ? `${items} ` : ''}per page, ${min} to ${max} (default ${limit}).`),
    cursor: z
      .string()
      .optional()
      .describe('The next_cursor of the previous page, to read the next one. Absent: the first page.'),
  };
}

export const scheduleAlarmInput = z.strictObject(scheduleFields);

export const previewScheduleInput = z.strictObject({
  at: toolAlarmFields.at.optional(),
  in_seconds: toolAlarmFields.in_seconds.optional(),
  cron: toolAlarmFields.cron.optional(),
  rrule: toolAlarmFields.rrule.optional(),
  timezone: toolAlarmFields.timezone.optional(),
  starts_at: toolAlarmFields.starts_at.optional(),
  ends_at: toolAlarmFields.ends_at.optional(),
  jitter_seconds: toolAlarmFields.jitter_seconds
    .optional()
    .describe('Accepted and not applied in a preview.'),
  expires_after_seconds: toolAlarmFields.expires_after_seconds
    .optional()
    .describe('Accepted and not applied in a preview.'),
  count: z
    .number()
    .int()
    .min(1)
    .max(50)
    .optional()
    .describe('How many due instants to show, 1 to 50 (default 5).'),
});

export const listAlarmsInput = z.strictObject({
  status: z
    .enum(ALARM_STATUSES)
    .optional()
    .describe(
      'Only alarms in this status: active (still to fire), paused (kept, not firing), fired, cancelled or ' +
        'failed. Default: all.',
    ),
  ...pageFields('alarms'),
});

export const getAlarmInput = z.strictObject({ id: alarmId });

export const rescheduleAlarmInput = z.strictObject({ id: alarmId, ...scheduleFields, ...clearableShape() });

export const cancelAlarmInput = z.strictObject({ id: alarmId });

export const pauseAlarmInput = z.strictObject({ id: alarmId });

export const resumeAlarmInput = z.strictObject({ id: alarmId });

export const listWakesInput = z.strictObject({
  status: z
    .enum(WAKE_STATUSES)
    .optional()
    .describe(
      'Only wakes in this status: pending (not delivered yet), delivered (waiting for your ack when it ' +
        'requires one), acknowledged, or failed. Default: all.',
    ),
  alarm_id: z.string().optional().describe('Only the wakes of this alarm (its id).'),
  ...pageFields(),
});

export const ackWakeInput = z.strictObject({
  wake_id: z.string().describe('The wake_id you received with the wake (a UUID); not the alarm id.'),
  note: z
    .string()
    .describe(
      'What you did about the wake, in a few words (1 to 2000 characters), e.g. "build checked, all green".',
    ),
});

// ---- Outputs ----------------------------------------------------------------------------------

const serverTime = time('The server (database) clock when this answer was made');

const nextFires = nextFiresSchema.describe(
  'The next due instants (up to three; one for a one-shot alarm; none unless active). Check them: a ' +
    'wrong hour here usually means a wrong time zone or offset.',
);

export const scheduleAlarmOutput = z.strictObject({
  alarm: alarmViewSchema,
  deduped: z.boolean().describe('True when idempotency_key matched an existing alarm, which is returned.'),
  next_fires: nextFires,
  server_time: serverTime,
});

export const previewScheduleOutput = z.strictObject({
  fires: nextFiresSchema.describe(
    'The next due instants, in UTC and in the zone (fewer when the schedule ends).',
  ),
  server_time: serverTime,
});

export const listAlarmsOutput = z.strictObject({
  alarms: z.array(alarmViewSchema).describe('Your alarms, newest first.'),
  next_cursor: z.string().nullable().describe('Pass as cursor to read the next page; null at the end.'),
  server_time: serverTime,
});

export const alarmOutput = z.strictObject({ alarm: alarmViewSchema, server_time: serverTime });

export const rescheduleAlarmOutput = z.strictObject({
  alarm: alarmViewSchema,
  next_fires: nextFires,
  server_time: serverTime,
});

export const ackWakeOutput = z.strictObject({ wake: wakeViewSchema, server_time: serverTime });

export const listWakesOutput = z.strictObject({
  wakes: z.array(wakeViewSchema).describe('Your wakes, newest first.'),
  next_cursor: z.string().nullable().describe('Pass as cursor to read the next page; null at the end.'),
  server_time: serverTime,
});

// ---- Publishing -------------------------------------------------------------------------------

/**
 * The schema to give the SDK as a tool's `inputSchema`: it publishes `schema` (its JSON Schema is
 * attached as metadata, which `tools/list` copies out) but accepts any object when called.
 *
 * Why: the SDK validates arguments itself before a tool runs, and answers a failure in zod's own
 * words ("Invalid input: expected number, received string at in_seconds"). Chronos refuses bad
 * input with messages of one shape that say what to send instead — the very messages the HTTP API
 * gives, because the same AlarmService and WakeService validate — so the tools take the
 * arguments as sent and let the service judge them.
 */
export function published(schema: z.ZodObject): z.ZodObject {
  const { $schema: _ignored, ...jsonSchema } = z.toJSONSchema(schema, { target: 'draft-7', io: 'input' });
  return z.looseObject({}).meta(jsonSchema);
}
