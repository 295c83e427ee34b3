/**
 * The JSON shapes callers see (contract §5 and §7), defined once: the view functions, and the
 * zod schemas that describe them in OpenAPI and in the MCP tools' output schemas. Internal fields
 * — owner, user, fire_at, lease, queue, updated_at — never appear; empty optional strings are
 * omitted from the alarm view; null timestamps are shown as null in the wake view.
 */
import { z } from 'zod';
import type { LatenessStats, UpcomingStats } from '../core/fire-stats-service.js';
import type { RawJson } from '../json.js';
import {
  ALARM_KINDS,
  ALARM_STATUSES,
  WAKE_STATUSES,
  type Alarm,
  type Wake,
  type WakeAttempt,
} from '../types.js';
import { isoOrNull, isoTime } from './iso-time.js';

const time = (what: string) => z.string().describe(`${what}: RFC 3339 in UTC with milliseconds.`);
const nullableTime = (what: string) =>
  z.string().nullable().describe(`${what}: RFC 3339 in UTC with milliseconds, or null.`);

export const alarmViewSchema = z
  .strictObject({
    id: z.string().describe('The alarm id (UUID).'),
    label: z.string(),
    kind: z.enum(ALARM_KINDS),
    cron_expr: z.string().optional().describe('Present for cron alarms.'),
    timezone: z.string(),
    next_fire_at: time('When it is next due (present only while active)').optional(),
    conversation_id: z.string().optional().describe('Omitted when empty.'),
    wake_message: z.string(),
    payload: z.record(z.string(), z.unknown()).describe('As sent, digit for digit.'),
    status: z.enum(ALARM_STATUSES),
    idempotency_key: z.string().optional().describe('Omitted when empty.'),
    max_failures: z.number().int(),
    failure_count: z.number().int(),
    last_error: z.string().optional().describe('Omitted when empty.'),
    created_at: time('When it was created'),
    last_fired_at: time('When it last fired (omitted until it first fires)').optional(),
    require_ack: z.boolean(),
    rrule: z.string().optional().describe('The RFC 5545 rule, for rrule alarms.'),
    starts_at: time('No occurrence before it (omitted when not set)').optional(),
    ends_at: time('No occurrence after it (omitted when not set)').optional(),
    jitter_seconds: z
      .number()
      .int()
      .optional()
      .describe('Each occurrence is due up to this many seconds late.'),
    expires_after_seconds: z
      .number()
      .int()
      .optional()
      .describe('An occurrence not delivered this many seconds after it was due is given up.'),
  })
  .describe('An alarm.');

export const wakeViewSchema = z
  .strictObject({
    id: z.string().describe('The wake id (UUID); the `webhook-id` of its delivery.'),
    alarm_id: z.string(),
    status: z.enum(WAKE_STATUSES),
    label: z.string().describe("The alarm's label."),
    wake_message: z.string().describe("The alarm's wake message: what to do."),
    conversation_id: z.string(),
    scheduled_for: time('The due instant of the fire'),
    fired_at: time('When it fired'),
    delivered_at: nullableTime('When it was delivered'),
    lateness_ms: z
      .number()
      .int()
      .nullable()
      .describe('Delivered minus due, in milliseconds (null until delivered).'),
    attempts: z.number().int(),
    fire_count: z.number().int(),
    require_ack: z.boolean(),
    nudged_at: nullableTime('When the nudge was sent'),
    escalated_at: nullableTime('When it was escalated to a human'),
    acknowledged_at: nullableTime('When it was acknowledged'),
    ack_note: z.string().nullable(),
    ack_inferred: z.boolean(),
  })
  .describe('A wake: one fire of an alarm.');

/** The JSON object named `alarm` in every answer; `payload` is spliced in as its stored text. */
export type AlarmView = Omit<z.infer<typeof alarmViewSchema>, 'payload'> & { payload: RawJson };
/** The JSON object named `wake`. */
export type WakeView = z.infer<typeof wakeViewSchema>;

/**
 * When the alarm's schedule is next due. A manual fire of an active cron alarm is due now, with
 * the schedule's occurrence waiting in `heldOccurrence`: the schedule is not moved (§5 fire), so
 * that occurrence is what a reader sees.
 */
function scheduleNext(alarm: Alarm): Date {
  return alarm.kind !== 'once' && alarm.trigger === 'manual' && alarm.heldOccurrence
    ? alarm.heldOccurrence
    : alarm.nextFireAt;
}

export function alarmView(alarm: Alarm): AlarmView {
  return {
    id: alarm.id,
    label: alarm.label,
    kind: alarm.kind,
    ...(alarm.cronExpr !== '' && { cron_expr: alarm.cronExpr }),
    timezone: alarm.timezone,
    ...(alarm.status === 'active' && { next_fire_at: isoTime(scheduleNext(alarm)) }),
    ...(alarm.conversationId !== '' && { conversation_id: alarm.conversationId }),
    wake_message: alarm.wakeMessage,
    payload: alarm.payload,
    status: alarm.status,
    ...(alarm.idempotencyKey !== '' && { idempotency_key: alarm.idempotencyKey }),
    max_failures: alarm.maxFailures,
    failure_count: alarm.failureCount,
    ...(alarm.lastError !== '' && { last_error: alarm.lastError }),
    created_at: isoTime(alarm.createdAt),
    ...(alarm.lastFiredAt && { last_fired_at: isoTime(alarm.lastFiredAt) }),
    require_ack: alarm.requireAck,
    ...(alarm.rrule && { rrule: alarm.rrule }),
    ...(alarm.startsAt && { starts_at: isoTime(alarm.startsAt) }),
    ...(alarm.endsAt && { ends_at: isoTime(alarm.endsAt) }),
    ...(alarm.jitterSeconds && { jitter_seconds: alarm.jitterSeconds }),
    ...(alarm.expiresAfterSeconds && { expires_after_seconds: alarm.expiresAfterSeconds }),
  };
}

export function wakeView(wake: Wake): WakeView {
  return {
    id: wake.id,
    alarm_id: wake.alarmId,
    status: wake.status,
    label: wake.label,
    wake_message: wake.wakeMessage,
    conversation_id: wake.conversationId,
    scheduled_for: isoTime(wake.scheduledFor),
    fired_at: isoTime(wake.firedAt),
    delivered_at: isoOrNull(wake.deliveredAt),
    lateness_ms: wake.latenessMs,
    attempts: wake.attempts,
    fire_count: wake.fireCount,
    require_ack: wake.requireAck,
    nudged_at: isoOrNull(wake.nudgedAt),
    escalated_at: isoOrNull(wake.escalatedAt),
    acknowledged_at: isoOrNull(wake.acknowledgedAt),
    ack_note: wake.ackNote,
    ack_inferred: wake.ackInferred,
  };
}

export const attemptViewSchema = z
  .strictObject({
    attempt: z.number().int().describe('1 for the first delivery attempt of the wake.'),
    started_at: time('When the attempt started'),
    finished_at: time('When it ended'),
    outcome: z.enum(['delivered', 'retry', 'failed']),
    status_code: z.number().int().nullable().describe("The receiver's HTTP status, when it answered."),
    error: z.string().nullable().describe('What went wrong, when something did.'),
    duration_ms: z.number().int(),
  })
  .describe('One delivery attempt of a wake.');

export type AttemptView = z.infer<typeof attemptViewSchema>;

export function attemptView(attempt: WakeAttempt): AttemptView {
  return {
    attempt: attempt.attempt,
    started_at: isoTime(attempt.startedAt),
    finished_at: isoTime(attempt.finishedAt),
    outcome: attempt.outcome,
    status_code: attempt.statusCode,
    error: attempt.error,
    duration_ms: attempt.durationMs,
  };
}

/** `owners` beside a list read for every owner: each item's id → its owner's DID. */
export const ownersViewSchema = z
  .record(z.string(), z.string())
  .describe(
    "Only when the operator token lists every owner (no X-Chronos-Owner): each listed item's id → its owner's DID.",
  );

export function ownersView(items: readonly { id: string; ownerDid: string }[]): Record<string, string> {
  return Object.fromEntries(items.map((item) => [item.id, item.ownerDid]));
}

export const nextFiresSchema = z
  .array(
    z.strictObject({
      utc: time('A coming due instant'),
      local: z.string().describe('The same instant in the alarm time zone, RFC 3339 with that zone offset.'),
    }),
  )
  .describe(
    'The next due instants (one for a one-shot alarm; none unless active). Check them: a ' +
      'wrong hour here usually means a wrong time zone or offset.',
  );

export const latenessViewSchema = z
  .strictObject({
    from: time('The start of the first minute'),
    to: time('The end of the last minute (the start of the next one)'),
    minutes: z.array(
      z.strictObject({
        minute: time('The start of the minute'),
        fires: z.number().int().describe('Scheduled fires in the minute (manual fires are not counted).'),
        p50_ms: z
          .number()
          .int()
          .nullable()
          .describe('Median of fired_at minus scheduled_for, in milliseconds; null without fires.'),
        p99_ms: z.number().int().nullable().describe('99th percentile of the same; null without fires.'),
      }),
    ),
  })
  .describe('Lateness of scheduled fires per minute, oldest minute first.');

export function latenessView(stats: LatenessStats): z.infer<typeof latenessViewSchema> {
  return {
    from: isoTime(stats.from),
    to: isoTime(stats.to),
    minutes: stats.minutes.map((m) => ({
      minute: isoTime(m.minute),
      fires: m.fires,
      p50_ms: m.p50Ms,
      p99_ms: m.p99Ms,
    })),
  };
}

export const upcomingViewSchema = z
  .strictObject({
    from: time('The start of the current minute'),
    to: time('The end of the window'),
    minutes: z.array(
      z.strictObject({
        minute: time('The start of the minute'),
        fires: z.number().int().describe('Fires due in the minute (an overdue one counts in the first).'),
      }),
    ),
    truncated: z
      .boolean()
      .describe('True when more alarms or fires were due than are counted (10 000 alarms, 100 000 fires).'),
  })
  .describe('Fires due per minute over the coming hours, from the current minute on.');

export function upcomingView(stats: UpcomingStats): z.infer<typeof upcomingViewSchema> {
  return {
    from: isoTime(stats.from),
    to: isoTime(stats.to),
    minutes: stats.minutes.map((m) => ({ minute: isoTime(m.minute), fires: m.fires })),
    truncated: stats.truncated,
  };
}
