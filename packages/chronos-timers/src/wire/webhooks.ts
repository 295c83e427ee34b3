/**
 * The bodies Chronos POSTs (contract §6, §7, §13), described once as zod schemas for the OpenAPI
 * document's `webhooks` section. They are built as text elsewhere — `receivers/webhook.ts` for
 * fires and nudges (the payload spliced in verbatim), `tracker/messages.ts` for escalations and
 * receipts, `wire/schedules-file.ts` for the schedules file's heads-up — and the delivery tests
 * hold what is sent to these schemas, key for key.
 */
import { z } from 'zod';
import { ALARM_KINDS } from '../types.js';
import { alarmViewSchema } from './views.js';

const time = (what: string) => z.string().describe(`${what}: RFC 3339 in UTC with milliseconds.`);

const wakeFields = {
  wake_id: z.string().describe('The wake (UUID): the receiver deduplicates on it (also the `webhook-id`).'),
  alarm_id: z.string(),
  user_id: z.string().describe('Whom to wake: the user part of the owner DID.'),
  owner_did: z.string(),
  label: z.string(),
};

/** `alarm.fired` (and `alarm.nudge`, the one reminder: the same body). */
export const wakeBodySchema = z
  .strictObject({
    type: z.enum(['alarm.fired', 'alarm.nudge']),
    ...wakeFields,
    kind: z.enum(ALARM_KINDS),
    conversation_id: z.string().describe('The conversation to resume ("": a fresh one).'),
    wake_message: z.string(),
    payload: z.record(z.string(), z.unknown()).describe('As given, digit for digit.'),
    scheduled_for: time('The due instant'),
    fired_at: time('When this delivery started'),
    lateness_ms: z.number().int().describe('fired_at minus scheduled_for.'),
    attempt: z.number().int().describe('1 for the first delivery attempt of this wake.'),
    fire_count: z.number().int().describe('Fires of a cron alarm folded into this unacknowledged wake.'),
    require_ack: z.boolean().describe('Whether the agent must acknowledge it (ack_wake).'),
    trigger: z.enum(['schedule', 'manual']).describe('"manual" for a fire-now.'),
    instructions: z
      .string()
      .describe('Text for the agent, ready to show as is: what to do, and how to acknowledge.'),
  })
  .describe('Signed per Standard Webhooks; `webhook-id` is the wake id (`<wake_id>:nudge` for the nudge).');

/** `wake.escalated`, to the fallback URL. */
export const escalationBodySchema = z
  .strictObject({
    type: z.literal('wake.escalated'),
    ...wakeFields,
    conversation_id: z.string(),
    wake_message: z.string(),
    fired_at: time('When it fired'),
    age_seconds: z.number().int().describe('Seconds since it fired, unacknowledged.'),
  })
  .describe('To a human: `webhook-id` `<wake_id>:escalation`; recorded only when answered 2xx.');

/** `wake.acknowledged`, the receipt, to the fallback URL. */
export const receiptBodySchema = z
  .strictObject({
    type: z.literal('wake.acknowledged'),
    ...wakeFields,
    note: z.string().nullable().describe('The note of the ack; null for one inferred from a reply.'),
    inferred: z.boolean(),
    acknowledged_at: time('When it was acknowledged'),
  })
  .describe('`webhook-id` `<wake_id>:receipt`.');

/** `schedule.changed`, to the router: a schedules-file edit created or changed one of the owner's alarms. */
export const scheduleChangedBodySchema = z
  .strictObject({
    type: z.literal('schedule.changed'),
    change: z.enum(['created', 'updated']),
    source: z.literal('file').describe('What made the change: the schedules file.'),
    owner_did: z.string(),
    user_id: z.string().describe('Whom to tell: the user part of the owner DID.'),
    alarm: alarmViewSchema.describe('The alarm as the change left it (payload digit for digit).'),
  })
  .describe(
    "`webhook-id` `<alarm id>:file:<n>`, n counting the file's changes to that alarm (1: its creation).",
  );
