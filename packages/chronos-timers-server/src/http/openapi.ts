/**
 * `/openapi.json`: the API described, generated from the zod schemas the routes validate with
 * (`createAlarmSchema`, `patchAlarmSchema`, `ackWakeSchema`, `replySchema`) plus schemas of the
 * answers. Built once per app.
 */
import { z } from 'zod';
import { ALARM_STATUSES, WAKE_STATUSES } from 'chronos-timers/internal';
import { VERSION } from 'chronos-timers/internal';
import {
  batchAlarmSchema,
  bulkCancelSchema,
  createAlarmSchema,
  patchAlarmSchema,
  previewScheduleSchema,
} from 'chronos-timers/internal';
import {
  alarmViewSchema,
  attemptViewSchema,
  latenessViewSchema,
  nextFiresSchema,
  ownersViewSchema,
  upcomingViewSchema,
  wakeViewSchema,
} from 'chronos-timers/internal';
import {
  escalationBodySchema,
  receiptBodySchema,
  scheduleChangedBodySchema,
  wakeBodySchema,
} from 'chronos-timers/internal';
import { FILTER_TEXT_CHARS } from 'chronos-timers/internal';
import { ackWakeSchema, replySchema } from 'chronos-timers/internal';
import { NEXT_FIRES_COUNT } from 'chronos-timers/internal';
import { PAGE_LIMIT } from 'chronos-timers/internal';

const problem = z.object({
  type: z.string().describe('urn:chronos:problem:<code>'),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  code: z.string(),
  errors: z
    .array(z.object({ path: z.string(), message: z.string() }))
    .optional()
    .describe('For 400: one entry per bad field; path "" is the body as a whole.'),
  limit: z.string().optional().describe('For 429: max_active_alarms or create_rate.'),
  request_id: z.string().optional(),
});

const readiness = z.object({
  status: z.enum(['ready', 'not ready']),
  reason: z
    .string()
    .optional()
    .describe('When not ready: shutting down, migrations pending, or why the database is unreachable.'),
  database: z
    .object({
      host: z
        .string()
        .nullable()
        .describe('`host:port` in use now; null while no listed host qualifies (during a failover).'),
      hosts: z.array(z.string()).describe('The hosts `DATABASE_URL` lists, in order.'),
      target_session_attrs: z.string().describe('As given in `DATABASE_URL` (default `any`).'),
      host_changes: z.number().int().describe('Times another host was chosen (failovers) since start.'),
      last_error: z.string().nullable().describe('While no host qualifies: each host and why not.'),
    })
    .optional()
    .describe('PostgreSQL only (absent on the embedded store and with an application’s own pool).'),
});

const json = (schema: z.ZodType) => z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' });
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const content = (name: string) => ({ 'application/json': { schema: ref(name) } });
const problemResponse = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: ref('Problem') } },
});

const ERRORS = {
  '400': problemResponse('Invalid input: `errors` says what to send instead.'),
  '401': problemResponse('No API key, or an unknown or revoked one.'),
  '403': problemResponse('An owner’s key naming another owner in X-Chronos-Owner.'),
  '503': problemResponse('The database is unreachable; retry after `Retry-After` seconds.'),
};

const idParam = (name: string, description: string) => ({
  name,
  in: 'path',
  required: true,
  schema: { type: 'string' },
  description,
});

const listParams = (statuses: readonly string[]) => [
  { name: 'status', in: 'query', schema: { type: 'string', enum: statuses } },
  {
    name: 'limit',
    in: 'query',
    schema: {
      type: 'integer',
      minimum: PAGE_LIMIT.min,
      maximum: PAGE_LIMIT.max,
      default: PAGE_LIMIT.default,
    },
  },
  {
    name: 'cursor',
    in: 'query',
    schema: { type: 'string' },
    description: 'The `next_cursor` of the previous page.',
  },
];

const envelope = (properties: Record<string, unknown>, required: string[]) => ({
  type: 'object',
  properties,
  required,
});

const EVERY_OWNER_NOTE =
  'The operator token without `X-Chronos-Owner` reads every owner here (the dashboard’s operator view); a list then carries `owners`, each item’s id → its owner’s DID.';

export function openApiDocument(): Record<string, unknown> {
  // `{alarm}` / `{wake}`: one item in its envelope.
  const itemAnswer = (key: 'alarm' | 'wake', description: string) => ({
    description,
    content: {
      'application/json': { schema: envelope({ [key]: ref(key === 'alarm' ? 'Alarm' : 'Wake') }, [key]) },
    },
  });
  const alarmAnswer = (description: string) => itemAnswer('alarm', description);
  // `{alarms, next_cursor}` / `{wakes, next_cursor}`: a page of a list.
  const pageAnswer = (key: 'alarms' | 'wakes', item: 'Alarm' | 'Wake', everyOwner = false) => ({
    description: 'A page; `next_cursor` is null on the last one.',
    content: {
      'application/json': {
        schema: envelope(
          {
            [key]: { type: 'array', items: ref(item) },
            next_cursor: { type: ['string', 'null'] },
            ...(everyOwner && { owners: ref('Owners') }),
          },
          [key, 'next_cursor'],
        ),
      },
    },
  });
  // `POST /v1/alarms/{id}/<action>`: no body (or `{}`), the alarm answered.
  const control = (action: string, summary: string, status: string, answer: string, conflict: string) => ({
    [`/v1/alarms/{id}/${action}`]: {
      parameters: [idParam('id', 'The alarm id.')],
      post: {
        summary,
        responses: {
          [status]: alarmAnswer(answer),
          ...ERRORS,
          '404': problemResponse('No such alarm.'),
          '409': problemResponse(conflict),
        },
      },
    },
  });
  // A body Chronos POSTs, as an OpenAPI 3.1 webhook.
  const webhook = (summary: string, schema: string) => ({
    post: {
      summary,
      requestBody: { required: true, content: content(schema) },
      responses: {
        '200': {
          description: 'Accepted (any 2xx). 408, 429, 5xx, timeouts and connection errors are retried.',
        },
      },
    },
  });
  return {
    openapi: '3.1.0',
    info: {
      title: 'Chronos',
      version: VERSION,
      description:
        'A durable timer service: schedule wake-ups ("in 10 minutes", "every weekday at 09:00 Europe/Paris") ' +
        'and get them delivered at least once, never early. Every /v1 route needs ' +
        '`Authorization: Bearer <api key>`; the operator token acts for the owner named by `X-Chronos-Owner`.',
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        CreateAlarm: json(createAlarmSchema),
        PatchAlarm: json(patchAlarmSchema),
        AckWake: json(ackWakeSchema),
        Reply: json(replySchema),
        BatchAlarms: json(batchAlarmSchema),
        BulkCancel: json(bulkCancelSchema),
        SchedulePreview: json(previewScheduleSchema),
        Alarm: json(alarmViewSchema),
        Wake: json(wakeViewSchema),
        Attempt: json(attemptViewSchema),
        Owners: json(ownersViewSchema),
        NextFires: json(nextFiresSchema),
        Lateness: json(latenessViewSchema),
        Upcoming: json(upcomingViewSchema),
        WakeBody: json(wakeBodySchema),
        EscalationBody: json(escalationBodySchema),
        ReceiptBody: json(receiptBodySchema),
        ScheduleChangedBody: json(scheduleChangedBodySchema),
        Problem: json(problem),
        Readiness: json(readiness),
      },
    },
    security: [{ bearer: [] }],
    webhooks: {
      'alarm.fired': webhook(
        'A due alarm, to CHRONOS_ROUTER_URL (signed; `webhook-id`: the wake id)',
        'WakeBody',
      ),
      'alarm.nudge': webhook(
        'The one reminder of a wake still unacknowledged, nudge-after after its delivery (`<wake_id>:nudge`)',
        'WakeBody',
      ),
      'wake.escalated': webhook(
        'A wake still unacknowledged, to CHRONOS_FALLBACK_URL (a human)',
        'EscalationBody',
      ),
      'wake.acknowledged': webhook('The receipt of an ack, to CHRONOS_FALLBACK_URL', 'ReceiptBody'),
      'schedule.changed': webhook(
        'A schedules-file edit created or changed one of the owner’s alarms: a heads-up for its agent, to CHRONOS_ROUTER_URL',
        'ScheduleChangedBody',
      ),
    },
    paths: {
      '/v1/alarms': {
        post: {
          summary: 'Schedule an alarm',
          description: 'Exactly one of `at`, `in_seconds` or `cron`. Body at most 128 KiB.',
          requestBody: { required: true, content: content('CreateAlarm') },
          responses: {
            '201': {
              description: 'Created.',
              content: {
                'application/json': {
                  schema: envelope({ alarm: ref('Alarm'), deduped: { const: false } }, ['alarm', 'deduped']),
                },
              },
            },
            '200': {
              description: 'This owner already has an alarm with this `idempotency_key`: that alarm.',
              content: {
                'application/json': {
                  schema: envelope({ alarm: ref('Alarm'), deduped: { const: true } }, ['alarm', 'deduped']),
                },
              },
            },
            ...ERRORS,
            '413': problemResponse('Body over 128 KiB.'),
            '429': problemResponse('A quota was hit: `limit` names it; retry after `Retry-After` seconds.'),
          },
        },
        get: {
          summary: 'List your alarms, newest first',
          description: EVERY_OWNER_NOTE,
          parameters: [
            ...listParams(ALARM_STATUSES),
            {
              name: 'q',
              in: 'query',
              schema: { type: 'string', maxLength: FILTER_TEXT_CHARS },
              description: 'Only alarms whose label contains this text, ignoring case.',
            },
          ],
          responses: {
            '200': pageAnswer('alarms', 'Alarm', true),
            ...ERRORS,
          },
        },
      },
      '/v1/alarms/{id}': {
        parameters: [idParam('id', 'The alarm id.')],
        get: {
          summary: 'One alarm',
          responses: {
            '200': alarmAnswer('The alarm.'),
            ...ERRORS,
            '404': problemResponse('No such alarm.'),
          },
        },
        patch: {
          summary: 'Reschedule and/or edit an active alarm',
          description: 'The create fields, all optional; a new schedule replaces the old one.',
          requestBody: { required: true, content: content('PatchAlarm') },
          responses: {
            '200': alarmAnswer('The alarm as changed.'),
            ...ERRORS,
            '404': problemResponse('No such alarm.'),
            '409': problemResponse('The alarm is not active.'),
            '413': problemResponse('Body over 128 KiB.'),
          },
        },
        delete: {
          summary: 'Cancel an alarm',
          responses: {
            '200': alarmAnswer('The cancelled alarm (again for one already cancelled).'),
            ...ERRORS,
            '404': problemResponse('No such alarm.'),
            '409': problemResponse('The alarm has fired or failed.'),
          },
        },
      },
      '/v1/alarms/batch': {
        post: {
          summary: 'Schedule up to 1,000 alarms at once',
          description:
            'All or nothing: one invalid item is a 400 whose `errors[].path` names it (`alarms.3.cron`) and ' +
            'nothing is written. Quotas count every item. Items whose `idempotency_key` exists answer that alarm.',
          requestBody: { required: true, content: content('BatchAlarms') },
          responses: {
            '201': {
              description: 'The results, in the order of the items.',
              content: {
                'application/json': {
                  schema: envelope(
                    {
                      results: {
                        type: 'array',
                        items: envelope({ alarm: ref('Alarm'), deduped: { type: 'boolean' } }, [
                          'alarm',
                          'deduped',
                        ]),
                      },
                    },
                    ['results'],
                  ),
                },
              },
            },
            ...ERRORS,
            '413': problemResponse('Body over 128 KiB.'),
            '429': problemResponse('A quota would be exceeded by the batch: `limit` names it.'),
          },
        },
      },
      '/v1/schedules/preview': {
        post: {
          summary:
            'The next due instants of a schedule (at, in_seconds, cron or rrule, with its window), nothing written',
          requestBody: { required: true, content: content('SchedulePreview') },
          responses: {
            '200': {
              description:
                'Up to `count` due instants, in UTC and in the zone (fewer when the schedule ends).',
              content: {
                'application/json': {
                  schema: envelope(
                    {
                      fires: {
                        type: 'array',
                        items: envelope({ utc: { type: 'string' }, local: { type: 'string' } }, [
                          'utc',
                          'local',
                        ]),
                      },
                      server_time: { type: 'string' },
                    },
                    ['fires', 'server_time'],
                  ),
                },
              },
            },
            ...ERRORS,
          },
        },
      },
      '/v1/alarms/bulk-cancel': {
        post: {
          summary: 'Cancel your active and paused alarms matching every given filter, in one statement',
          requestBody: { required: true, content: content('BulkCancel') },
          responses: {
            '200': {
              description: 'How many were cancelled.',
              content: {
                'application/json': { schema: envelope({ cancelled: { type: 'integer' } }, ['cancelled']) },
              },
            },
            ...ERRORS,
          },
        },
      },
      ...control(
        'pause',
        'Pause an active alarm: it is not claimed while paused',
        '200',
        'The paused alarm (again for one already paused).',
        'The alarm has fired, was cancelled or failed.',
      ),
      ...control(
        'resume',
        'Resume a paused alarm: a cron one at its next occurrence after now (no catching up), a one-shot whose time passed promptly',
        '200',
        'The active alarm (again for one already active).',
        'The alarm is neither paused nor active.',
      ),
      ...control(
        'fire',
        'Fire an active or paused alarm now, once more (`trigger: "manual"`); a cron alarm keeps its schedule',
        '202',
        'Accepted: it is delivered promptly.',
        'The alarm is not active or paused, or is being delivered right now.',
      ),
      ...control(
        'retry',
        'Make a failed alarm active again, its failures forgotten, due now',
        '200',
        'The active alarm.',
        'The alarm has not failed.',
      ),
      '/v1/alarms/{id}/next-fires': {
        parameters: [idParam('id', 'The alarm id.')],
        get: {
          summary: 'The alarm’s next due instants, in UTC and in its own zone (as MCP’s `next_fires`)',
          parameters: [
            {
              name: 'count',
              in: 'query',
              schema: {
                type: 'integer',
                minimum: NEXT_FIRES_COUNT.min,
                maximum: NEXT_FIRES_COUNT.max,
                default: NEXT_FIRES_COUNT.default,
              },
              description: 'How many (a one-shot has one; an alarm that is not active has none).',
            },
          ],
          responses: {
            '200': {
              description: 'The next fires.',
              content: {
                'application/json': { schema: envelope({ next_fires: ref('NextFires') }, ['next_fires']) },
              },
            },
            ...ERRORS,
            '404': problemResponse('No such alarm.'),
          },
        },
      },
      '/v1/stats/lateness': {
        get: {
          summary: 'Lateness of scheduled fires per minute (p50, p99) over the last minutes',
          description: `Lateness is a wake's fired_at minus its scheduled_for; manual fires are not counted. ${EVERY_OWNER_NOTE}`,
          parameters: [
            {
              name: 'minutes',
              in: 'query',
              schema: { type: 'integer', minimum: 1, maximum: 1440, default: 60 },
              description: 'How many minutes back, the current one included.',
            },
          ],
          responses: {
            '200': { description: 'Every minute of the window.', content: content('Lateness') },
            ...ERRORS,
          },
        },
      },
      '/v1/stats/upcoming': {
        get: {
          summary: 'Fires due per minute over the coming hours',
          description: `Cron alarms count every occurrence in the window. ${EVERY_OWNER_NOTE}`,
          parameters: [
            {
              name: 'hours',
              in: 'query',
              schema: { type: 'integer', minimum: 1, maximum: 48, default: 6 },
              description: 'How many hours ahead, from the start of the current minute.',
            },
          ],
          responses: {
            '200': { description: 'Every minute of the window.', content: content('Upcoming') },
            ...ERRORS,
          },
        },
      },
      '/v1/alarms/{id}/wakes': {
        parameters: [idParam('id', 'The alarm id.')],
        get: {
          summary: 'The alarm’s wakes, newest first',
          parameters: listParams(WAKE_STATUSES),
          responses: {
            '200': pageAnswer('wakes', 'Wake'),
            ...ERRORS,
            '404': problemResponse('No such alarm.'),
          },
        },
      },
      '/v1/wakes': {
        get: {
          summary: 'List your wakes (one per fire), newest first; the filters combine',
          description: EVERY_OWNER_NOTE,
          parameters: [
            ...listParams(WAKE_STATUSES),
            {
              name: 'alarm_id',
              in: 'query',
              schema: { type: 'string' },
              description: 'Only this alarm’s wakes.',
            },
            {
              name: 'conversation_id',
              in: 'query',
              schema: { type: 'string' },
              description: 'Only this conversation’s.',
            },
            {
              name: 'require_ack',
              in: 'query',
              schema: { type: 'string', enum: ['true', 'false'] },
              description:
                'Only wakes that do (`true`) or do not (`false`) wait for an acknowledgement; `status=delivered&require_ack=true` lists those still waiting.',
            },
          ],
          responses: {
            '200': pageAnswer('wakes', 'Wake', true),
            ...ERRORS,
          },
        },
      },
      '/v1/wakes/{id}': {
        parameters: [idParam('id', 'The wake id.')],
        get: {
          summary: 'One wake',
          responses: {
            '200': itemAnswer('wake', 'The wake.'),
            ...ERRORS,
            '404': problemResponse('No such wake.'),
          },
        },
      },
      '/v1/wakes/{id}/attempts': {
        parameters: [idParam('id', 'The wake id.')],
        get: {
          summary: 'Every delivery attempt of a wake, oldest first',
          responses: {
            '200': {
              description: 'The attempts.',
              content: {
                'application/json': {
                  schema: envelope({ attempts: { type: 'array', items: ref('Attempt') } }, ['attempts']),
                },
              },
            },
            ...ERRORS,
            '404': problemResponse('No such wake.'),
          },
        },
      },
      '/v1/wakes/{id}/ack': {
        parameters: [idParam('id', 'The wake id.')],
        post: {
          summary: 'Acknowledge a wake with a note',
          requestBody: { required: true, content: content('AckWake') },
          responses: {
            '200': itemAnswer('wake', 'The acknowledged wake (the same answer when acknowledged already).'),
            ...ERRORS,
            '404': problemResponse('No such wake.'),
            '409': problemResponse('The wake’s delivery failed; there is nothing to acknowledge.'),
          },
        },
      },
      '/v1/conversations/{conversation_id}/replies': {
        parameters: [idParam('conversation_id', 'The conversation the agent replied in.')],
        post: {
          summary: 'Report an agent reply (from the router)',
          description:
            'Acknowledges (inferred) your pending or delivered wakes in this conversation fired or nudged ' +
            'within the reply window.',
          requestBody: { required: false, content: content('Reply') },
          responses: {
            '200': {
              description: 'The ids of the wakes this acknowledged (possibly none).',
              content: {
                'application/json': {
                  schema: envelope({ acked: { type: 'array', items: { type: 'string' } } }, ['acked']),
                },
              },
            },
            ...ERRORS,
          },
        },
      },
      '/healthz': {
        get: {
          summary: 'Liveness',
          security: [],
          responses: { '200': { description: 'The process runs.' } },
        },
      },
      '/readyz': {
        get: {
          summary: 'Readiness: the database answers and every migration is applied',
          description: 'The body names the PostgreSQL host in use, which changes after a failover.',
          security: [],
          responses: {
            '200': { description: 'Ready.', content: content('Readiness') },
            '503': { description: 'Not ready, with the reason.', content: content('Readiness') },
          },
        },
      },
      '/metrics': {
        get: {
          summary: 'Prometheus metrics',
          security: [],
          responses: { '200': { description: 'Prometheus text format.' } },
        },
      },
      '/openapi.json': {
        get: {
          summary: 'This document',
          security: [],
          responses: { '200': { description: 'OpenAPI 3.1.' } },
        },
      },
    },
  };
}
