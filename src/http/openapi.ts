/**
 * `/openapi.json`: the API described, generated from the zod schemas the routes validate with
 * (`createAlarmSchema`, `patchAlarmSchema`, `ackWakeSchema`, `replySchema`) plus schemas of the
 * answers. Built once per app.
 */
import { z } from 'zod';
import { ALARM_STATUSES, WAKE_STATUSES } from '../types.js';
import { createAlarmSchema, patchAlarmSchema } from '../wire/alarm-input.js';
import { alarmViewSchema, wakeViewSchema } from '../wire/views.js';
import { ackWakeSchema, replySchema } from '../wire/wake-input.js';

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
    schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 },
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
  const pageAnswer = (key: 'alarms' | 'wakes', item: 'Alarm' | 'Wake') => ({
    description: 'A page; `next_cursor` is null on the last one.',
    content: {
      'application/json': {
        schema: envelope(
          { [key]: { type: 'array', items: ref(item) }, next_cursor: { type: ['string', 'null'] } },
          [key, 'next_cursor'],
        ),
      },
    },
  });
  return {
    openapi: '3.1.0',
    info: {
      title: 'Chronos',
      version: '1',
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
        Alarm: json(alarmViewSchema),
        Wake: json(wakeViewSchema),
        Problem: json(problem),
      },
    },
    security: [{ bearer: [] }],
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
          parameters: listParams(ALARM_STATUSES),
          responses: {
            '200': pageAnswer('alarms', 'Alarm'),
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
      '/v1/wakes': {
        get: {
          summary: 'List your wakes (one per fire), newest first',
          parameters: listParams(WAKE_STATUSES),
          responses: {
            '200': pageAnswer('wakes', 'Wake'),
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
          security: [],
          responses: {
            '200': { description: 'Ready.' },
            '503': { description: 'Not ready, with the reason.' },
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
