/**
 * What an alarm is made from, as the core takes it: the typed `AlarmSpec`, and the rule each of
 * its fields obeys (type and limits as a zod schema, and what to send instead), defined once.
 *
 * Every door reads its caller's own form into an AlarmSpec with these rules (wire/fields.ts):
 * HTTP, MCP and the schedules file from snake_case JSON (`in_seconds`), the library from its
 * camelCase spec (`inSeconds`), so each refusal names the field as its caller wrote it. Shape is
 * checked there; meaning (is the time in the past, is the zone real, is the cron too frequent)
 * is checked by the alarm service when it resolves the schedule.
 */
import { z } from 'zod';
import type { RawJson } from '../json.js';
import { MAX_IN_SECONDS } from '../schedule/duration.js';
import { codePoints, isStorable } from './text.js';

/** A new alarm, or the fields of one to change (all optional). */
export interface AlarmSpec {
  label?: string;
  /** A one-shot's instant: RFC 3339 with an offset (or, from the library, a Date). */
  at?: string | Date;
  /** A one-shot's delay from now, in whole seconds. */
  inSeconds?: number;
  /** A repeating schedule: 5-field cron, a descriptor, or `@every <duration>`. */
  cron?: string;
  /** A repeating schedule as an RFC 5545 recurrence rule (contract §3a). */
  rrule?: string;
  timezone?: string;
  /** No occurrence of a cron or rrule schedule before it (RFC 3339, or a Date from the library). */
  startsAt?: string | Date;
  /** No occurrence after it; the alarm is `fired` once past it. */
  endsAt?: string | Date;
  /** Spread each occurrence up to this many seconds later (1–3,600), never earlier. */
  jitterSeconds?: number;
  /** Give an occurrence up when not delivered this many seconds after it was due (1–31,536,000). */
  expiresAfterSeconds?: number;
  conversationId?: string;
  wakeMessage?: string;
  /** A JSON object as its own text (I4). */
  payload?: RawJson;
  idempotencyKey?: string;
  maxFailures?: number;
  requireAck?: boolean;
  /** Who delivers it (contract §4a); a door that has no such field fixes it. */
  queue?: string;
}

export type SpecField = keyof AlarmSpec;

export const LIMITS = {
  labelChars: 200,
  conversationIdChars: 200,
  idempotencyKeyChars: 200,
  wakeMessageBytes: 16 * 1024,
  payloadBytes: 64 * 1024,
  /** How deeply objects and arrays may nest in a payload (the payload object itself is 1). */
  payloadDepth: 64,
  bodyBytes: 128 * 1024,
  inSecondsMax: MAX_IN_SECONDS,
  maxFailures: 100,
  queueChars: 64,
  rruleChars: 1_000,
  jitterSecondsMax: 3_600,
  expiresAfterSecondsMax: 31_536_000,
} as const;

/** The schedule fields: a create gives exactly one, a change at most one. */
export const SCHEDULE_FIELDS = ['at', 'inSeconds', 'cron', 'rrule'] as const satisfies readonly SpecField[];
/** The fields that shape a recurring schedule besides its expression: a change re-reads it. */
export const WINDOW_FIELDS = ['startsAt', 'endsAt', 'jitterSeconds'] as const satisfies readonly SpecField[];

/**
 * The fields a change may clear (PATCH and reschedule_alarm with `null`): the window, the jitter
 * and the expiry, each optional on the alarm. Every other field has a value an alarm always holds.
 */
export const CLEARABLE_FIELDS = [
  'startsAt',
  'endsAt',
  'jitterSeconds',
  'expiresAfterSeconds',
] as const satisfies readonly SpecField[];
export type ClearableField = (typeof CLEARABLE_FIELDS)[number];

/** A change of an alarm: new values, and the optional fields it clears. */
export interface AlarmChange extends AlarmSpec {
  clear?: ClearableField[];
}

export interface FieldRule {
  /** The shape of the value, as it arrives from JSON (payload: a plain object). */
  schema: z.ZodType;
  /** What to send instead, for `path: expected X, got Y`. */
  expected: string;
  /** For published schemas (OpenAPI, MCP). */
  description: string;
}

const text = (maxChars: number) =>
  z
    .string()
    .refine(isStorable, { message: 'storable' })
    .refine((s) => codePoints(s) <= maxChars, { message: 'too long' });

/** A whole number of seconds from 1 to `max`: its schema and what a refusal says was expected. */
const seconds = (max: number) => ({
  schema: z.number().int().min(1).max(max),
  expected: `a whole number of seconds from 1 to ${max}`,
});

export const QUEUE_NAME = /^[a-z0-9_.-]{1,64}$/;

export const SPEC_RULES: Record<SpecField, FieldRule> = {
  label: {
    schema: text(LIMITS.labelChars),
    expected: `a string of at most ${LIMITS.labelChars} characters`,
    description: 'A short name for the alarm, shown in lists and wakes (at most 200 characters).',
  },
  at: {
    schema: z.string(),
    expected: 'an RFC 3339 time with an offset, like "2027-03-14T09:00:00+01:00"',
    description: 'When a one-shot alarm fires: RFC 3339 with an offset, e.g. "2027-03-14T09:00:00+01:00".',
  },
  inSeconds: {
    ...seconds(LIMITS.inSecondsMax),
    description: `When a one-shot alarm fires, in seconds from now (1 to ${LIMITS.inSecondsMax}), e.g. 600 for ten minutes.`,
  },
  cron: {
    schema: z.string(),
    expected: 'a 5-field cron expression like "0 9 * * MON-FRI", a descriptor like "@daily", or "@every 15m"',
    description:
      'A repeating schedule: 5-field cron ("0 9 * * MON-FRI"), a descriptor ("@daily"), or "@every 15m".',
  },
  rrule: {
    schema: z.string().max(LIMITS.rruleChars),
    expected: 'an RFC 5545 recurrence rule like "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0"',
    description:
      'A repeating schedule as an RFC 5545 recurrence rule, read in "timezone" from "starts_at" (else from now), ' +
      'e.g. "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0;BYSECOND=0" (every other Tuesday at 09:00). ' +
      'Use it for what cron cannot say: every other week, the last Friday (BYDAY=-1FR), a fixed number of times (COUNT).',
  },
  timezone: {
    schema: z.string(),
    expected: 'an IANA time zone like "Europe/Paris" or "UTC"',
    description:
      'IANA time zone the cron expression or rrule is read in, e.g. "Europe/Paris" (default "UTC").',
  },
  startsAt: {
    schema: z.string(),
    expected: 'an RFC 3339 time with an offset, like "2027-03-14T09:00:00+01:00"',
    description:
      'For cron and rrule: no occurrence before this time (RFC 3339 with an offset); an rrule counts from it.',
  },
  endsAt: {
    schema: z.string(),
    expected: 'an RFC 3339 time with an offset, like "2027-03-31T18:00:00+02:00"',
    description: 'For cron and rrule: no occurrence after this time; the alarm is then fired (done).',
  },
  jitterSeconds: {
    ...seconds(LIMITS.jitterSecondsMax),
    description:
      'For cron and rrule: each occurrence is due up to this many seconds after its time (never before), the same for every read, ' +
      'so alarms that share a schedule do not all fire at once (1 to 3600).',
  },
  expiresAfterSeconds: {
    ...seconds(LIMITS.expiresAfterSecondsMax),
    description:
      'Give an occurrence up when it could not be delivered within this many seconds of its due time (an outage, a long pause, ' +
      'retries): it is then never delivered, and a one-shot becomes "expired". E.g. 10800 for a 09:00 reminder that is pointless after noon.',
  },
  conversationId: {
    schema: text(LIMITS.conversationIdChars),
    expected: `a string of at most ${LIMITS.conversationIdChars} characters`,
    description: 'The conversation the wake resumes ("" starts a fresh one).',
  },
  wakeMessage: {
    schema: z
      .string()
      .refine(isStorable, { message: 'storable' })
      .refine((s) => Buffer.byteLength(s) <= LIMITS.wakeMessageBytes, { message: 'too long' }),
    expected: `a string of at most ${LIMITS.wakeMessageBytes} bytes (16 KiB) in UTF-8`,
    description: 'The text delivered back when the alarm fires, verbatim (at most 16 KiB).',
  },
  payload: {
    schema: z.record(z.string(), z.unknown()),
    expected: 'a JSON object, like {"task": "check the build"}',
    description: 'Any JSON object, echoed back verbatim on every wake (at most 64 KiB).',
  },
  idempotencyKey: {
    schema: text(LIMITS.idempotencyKeyChars),
    expected: `a string of at most ${LIMITS.idempotencyKeyChars} characters`,
    description: 'Your own key for this alarm: creating again with the same key returns the existing alarm.',
  },
  maxFailures: {
    schema: z.number().int().min(1).max(LIMITS.maxFailures),
    expected: `a whole number from 1 to ${LIMITS.maxFailures}`,
    description: 'Failed deliveries before giving up on a fire (1 to 100, default 5).',
  },
  requireAck: {
    schema: z.boolean(),
    expected: 'true or false',
    description: 'Whether the wake must be acknowledged; unacknowledged wakes are nudged, then escalated.',
  },
  queue: {
    schema: z.string().regex(QUEUE_NAME),
    expected: 'a queue name of 1 to 64 characters of a-z, 0-9, "_", "." and "-", like "default" or "billing"',
    description: 'Who delivers the timer: a library work() of this queue ("router": chronos serve).',
  },
};
