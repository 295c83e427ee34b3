/**
 * The create and reschedule bodies (contract §5), defined once with zod and used by every
 * surface: HTTP validates with them and publishes them in /openapi.json, MCP gives them to its
 * tools. Shape is checked here; meaning (is the time in the past, is the zone real, is the cron
 * too frequent) is checked when the schedule is resolved.
 *
 * Refusals are `invalid_input` errors whose field errors read `path: expected X, got Y`.
 */
import { z } from 'zod';
import { describeValue, invalidFields, type FieldError } from '../errors.js';

export const LIMITS = {
  labelChars: 200,
  conversationIdChars: 200,
  idempotencyKeyChars: 200,
  wakeMessageBytes: 16 * 1024,
  payloadBytes: 64 * 1024,
  bodyBytes: 128 * 1024,
  inSecondsMax: 315_360_000,
} as const;

const codePoints = (s: string) => {
  let n = 0;
  for (const _ of s) n++;
  return n;
};
// PostgreSQL text cannot hold NUL, and an unpaired surrogate cannot be stored as UTF-8: both would
// come back changed, so they are refused rather than altered (I4).
const storable = (s: string) => s.isWellFormed() && !s.includes('\u0000');

const text = (maxChars: number, description: string) =>
  z
    .string()
    .refine(storable, { message: 'storable' })
    .refine((s) => codePoints(s) <= maxChars, { message: `max ${maxChars}` })
    .describe(description);

export const alarmFields = {
  label: text(
    LIMITS.labelChars,
    'A short name for the alarm, shown in lists and wakes (at most 200 characters).',
  ),
  at: z
    .string()
    .describe('When a one-shot alarm fires: RFC 3339 with an offset, e.g. "2027-03-14T09:00:00+01:00".'),
  in_seconds: z
    .number()
    .int()
    .min(1)
    .max(LIMITS.inSecondsMax)
    .describe('When a one-shot alarm fires, in seconds from now (1 to 315360000), e.g. 600 for ten minutes.'),
  cron: z
    .string()
    .describe(
      'A repeating schedule: 5-field cron ("0 9 * * MON-FRI"), a descriptor ("@daily"), or "@every 15m".',
    ),
  timezone: z
    .string()
    .describe('IANA time zone the cron expression is read in, e.g. "Europe/Paris" (default "UTC").'),
  conversation_id: text(
    LIMITS.conversationIdChars,
    'The conversation the wake resumes ("" starts a fresh one).',
  ),
  wake_message: z
    .string()
    .refine(storable, { message: 'storable' })
    .refine((s) => Buffer.byteLength(s) <= LIMITS.wakeMessageBytes, { message: 'max bytes' })
    .describe('The text delivered back when the alarm fires, verbatim (at most 16 KiB).'),
  payload: z
    .record(z.string(), z.unknown())
    .describe('Any JSON object, echoed back verbatim on every wake (at most 64 KiB).'),
  idempotency_key: text(
    LIMITS.idempotencyKeyChars,
    'Your own key for this alarm: creating again with the same key returns the existing alarm.',
  ),
  max_failures: z
    .number()
    .int()
    .min(1)
    .max(100)
    .describe('Failed deliveries before giving up on a fire (1 to 100, default 5).'),
  require_ack: z
    .boolean()
    .describe('Whether the wake must be acknowledged; unacknowledged wakes are nudged, then escalated.'),
} as const;

export const createAlarmSchema = z.strictObject({
  label: alarmFields.label.optional(),
  at: alarmFields.at.optional(),
  in_seconds: alarmFields.in_seconds.optional(),
  cron: alarmFields.cron.optional(),
  timezone: alarmFields.timezone.optional(),
  conversation_id: alarmFields.conversation_id.optional(),
  wake_message: alarmFields.wake_message.optional(),
  payload: alarmFields.payload.optional(),
  idempotency_key: alarmFields.idempotency_key.optional(),
  max_failures: alarmFields.max_failures.optional(),
  require_ack: alarmFields.require_ack.optional(),
});

/** PATCH takes the same fields, all optional; a new schedule replaces the old one. */
export const patchAlarmSchema = createAlarmSchema;

export type CreateAlarmBody = z.infer<typeof createAlarmSchema>;
export type PatchAlarmBody = z.infer<typeof patchAlarmSchema>;

const EXPECTED: Record<string, string> = {
  label: `a string of at most ${LIMITS.labelChars} characters`,
  at: 'an RFC 3339 time with an offset, like "2027-03-14T09:00:00+01:00"',
  in_seconds: `a whole number of seconds from 1 to ${LIMITS.inSecondsMax}`,
  cron: 'a 5-field cron expression like "0 9 * * MON-FRI", a descriptor like "@daily", or "@every 15m"',
  timezone: 'an IANA time zone like "Europe/Paris" or "UTC"',
  conversation_id: `a string of at most ${LIMITS.conversationIdChars} characters`,
  wake_message: `a string of at most ${LIMITS.wakeMessageBytes} bytes (16 KiB) in UTF-8`,
  payload: 'a JSON object, like {"task": "check the build"}',
  idempotency_key: `a string of at most ${LIMITS.idempotencyKeyChars} characters`,
  max_failures: 'a whole number from 1 to 100',
  require_ack: 'true or false',
};

const FIELDS = Object.keys(alarmFields);

/** Parses a body against a schema, or throws `invalid_input` with one error per bad field. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalidFields([{ path: '', message: `body: expected a JSON object, got ${describeValue(body)}` }]);
  }
  const result = schema.safeParse(body, { reportInput: true });
  if (result.success) return result.data;
  throw invalidFields(result.error.issues.flatMap(issueToFieldErrors));
}

function issueToFieldErrors(issue: z.core.$ZodIssue): FieldError[] {
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((key) => ({
      path: [...issue.path, key].join('.'),
      message: `${key}: unknown field; send only ${FIELDS.join(', ')}${didYouMean(key)}`,
    }));
  }
  const path = issue.path.map(String).join('.');
  const expected = EXPECTED[path] ?? issue.message;
  const got = 'input' in issue ? issue.input : undefined;
  let shown = describeValue(got);
  if (issue.code === 'custom' && issue.message === 'storable') {
    return [
      { path, message: `${path}: expected text without NUL characters or unpaired surrogates, got ${shown}` },
    ];
  }
  if (typeof got === 'string' && (issue.code === 'custom' || issue.code === 'too_big')) {
    shown = `${codePoints(got)} characters (${Buffer.byteLength(got)} bytes)`;
  }
  return [{ path, message: `${path}: expected ${expected}, got ${shown}` }];
}

function didYouMean(key: string): string {
  const lower = key.toLowerCase().replace(/[-\s]/g, '_');
  const aliases: Record<string, string> = {
    name: 'label',
    title: 'label',
    message: 'wake_message',
    time: 'at',
    when: 'at',
    fire_at: 'at',
    delay: 'in_seconds',
    seconds: 'in_seconds',
    tz: 'timezone',
    time_zone: 'timezone',
    schedule: 'cron',
    data: 'payload',
  };
  const guess = FIELDS.find((f) => f === lower) ?? aliases[lower];
  return guess ? `; did you mean "${guess}"?` : '';
}
