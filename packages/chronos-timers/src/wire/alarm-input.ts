/**
 * The JSON wire form of an alarm's fields (contract §5): snake_case names over the core's
 * `AlarmSpec` rules, defined once and used by HTTP (bodies and OpenAPI), MCP (tool inputs) and
 * the schedules file. `readAlarmBody` turns a body into an AlarmSpec; refusals name the fields
 * as sent (`in_seconds`, `alarms.3.cron`).
 */
import { z } from 'zod';
import { invalidFields, renameFieldErrors, type FieldError } from '../errors.js';
import { jsonbText, RawJson, rawElements, rawMember } from '../json.js';
import {
  CLEARABLE_FIELDS,
  LIMITS,
  SCHEDULE_FIELDS,
  SPEC_RULES,
  type AlarmChange,
  type AlarmSpec,
  type ClearableField,
  type SpecField,
} from '../core/alarm-spec.js';
import { formErrors, type Form } from './fields.js';

export { LIMITS };

/** The fields a wire body may hold: every AlarmSpec field but the queue (the router's, always). */
export type WireField = Exclude<SpecField, 'queue'>;

export const WIRE_NAMES = {
  label: 'label',
  at: 'at',
  inSeconds: 'in_seconds',
  cron: 'cron',
  rrule: 'rrule',
  timezone: 'timezone',
  startsAt: 'starts_at',
  endsAt: 'ends_at',
  jitterSeconds: 'jitter_seconds',
  expiresAfterSeconds: 'expires_after_seconds',
  conversationId: 'conversation_id',
  wakeMessage: 'wake_message',
  payload: 'payload',
  idempotencyKey: 'idempotency_key',
  maxFailures: 'max_failures',
  requireAck: 'require_ack',
} as const satisfies Record<WireField, string>;

export type WireName = (typeof WIRE_NAMES)[WireField];

/** Words people use for a field, by their normalised form (lower case, no `_`/`-`). */
export const SPEC_ALIASES: Readonly<Record<string, SpecField>> = {
  name: 'label',
  title: 'label',
  message: 'wakeMessage',
  text: 'wakeMessage',
  time: 'at',
  when: 'at',
  fireat: 'at',
  datetime: 'at',
  delay: 'inSeconds',
  seconds: 'inSeconds',
  after: 'inSeconds',
  tz: 'timezone',
  zone: 'timezone',
  schedule: 'cron',
  every: 'cron',
  recurrence: 'rrule',
  rule: 'rrule',
  start: 'startsAt',
  from: 'startsAt',
  end: 'endsAt',
  until: 'endsAt',
  jitter: 'jitterSeconds',
  expires: 'expiresAfterSeconds',
  expiry: 'expiresAfterSeconds',
  ttl: 'expiresAfterSeconds',
  data: 'payload',
  key: 'idempotencyKey',
  conversation: 'conversationId',
  ack: 'requireAck',
};

const WIRE_FIELDS = Object.keys(WIRE_NAMES) as WireField[];

export const alarmForm: Form<WireField> = {
  names: WIRE_NAMES,
  rules: SPEC_RULES,
  aliases: SPEC_ALIASES,
};

/** A core path (`inSeconds`, `3.cron`) as the wire names it (`in_seconds`, `3.cron`). */
export function wirePath(path: string, prefix = ''): string {
  const named = path
    .split('.')
    .filter((s) => s !== '')
    .map((s) => (Object.hasOwn(WIRE_NAMES, s) ? WIRE_NAMES[s as WireField] : s))
    .join('.');
  return [prefix, named].filter((s) => s !== '').join('.');
}

/** A refusal of the core in the wire's names, under `prefix` (`alarms`, for a batch). */
export function inWireNames(error: unknown, prefix = ''): unknown {
  return renameFieldErrors(error, (path) => wirePath(path, prefix));
}

// ---- Published schemas (OpenAPI, MCP) ---------------------------------------------------------

/** Each wire field's zod schema with its description, by wire name. */
export const alarmFields = Object.fromEntries(
  WIRE_FIELDS.map((f) => [WIRE_NAMES[f], SPEC_RULES[f].schema.describe(SPEC_RULES[f].description)]),
) as Record<WireName, z.ZodType>;

const optionalShape = () =>
  Object.fromEntries(Object.entries(alarmFields).map(([name, schema]) => [name, schema.optional()]));

/** The create body of `POST /v1/alarms` (exactly one of at, in_seconds, cron, rrule). */
export const createAlarmSchema = z.strictObject(optionalShape());
/**
 * PATCH takes the same fields, all optional; a new schedule replaces the old one. `null` clears
 * the window, the jitter or the expiry.
 */
export const patchAlarmSchema = z.strictObject({ ...optionalShape(), ...clearableShape() });

/** The clearable fields' schemas, each also taking `null` ("clear it"), by wire name. */
export function clearableShape(): Record<string, z.ZodType> {
  return Object.fromEntries(
    CLEARABLE_FIELDS.map((f) => [
      WIRE_NAMES[f],
      SPEC_RULES[f].schema.nullable().optional().describe(`${SPEC_RULES[f].description} null clears it.`),
    ]),
  );
}
export const MAX_BATCH = 1_000;
/** The body of `POST /v1/alarms/batch`. */
export const batchAlarmSchema = z.strictObject({
  alarms: z.array(createAlarmSchema).min(1).max(MAX_BATCH).describe('Up to 1,000 create bodies.'),
});

// ---- Reading bodies ----------------------------------------------------------------------------

export interface BodyOptions {
  /** A create needs exactly one schedule field; a change at most one. */
  create: boolean;
  /** The raw JSON text of `payload` as sent, so its numbers pass through digit for digit (I4). */
  rawPayload?: string;
}

/**
 * A create or PATCH body as an AlarmSpec; throws `invalid_input` naming every bad field. A change
 * (not a create) may send `null` for a clearable field: it is then listed in `clear`.
 */
export function readAlarmBody(body: unknown, options: BodyOptions): AlarmChange {
  let clear: ClearableField[] | undefined;
  let read = body;
  if (!options.create && typeof body === 'object' && body !== null && !Array.isArray(body)) {
    const rest = { ...(body as Record<string, unknown>) };
    for (const field of CLEARABLE_FIELDS) {
      if (rest[WIRE_NAMES[field]] !== null) continue;
      delete rest[WIRE_NAMES[field]];
      (clear ??= []).push(field);
    }
    if (clear) read = rest;
  }
  const { spec, errors } = readOne(read, options, '');
  if (errors.length > 0) throw invalidFields(errors);
  return clear ? { ...spec, clear } : spec;
}

/**
 * The body of a batch create, `{alarms: [...]}`: every item read, every refusal collected
 * (`alarms.3.cron`), nothing returned unless all are right. `text` is the body as sent, for the
 * items' raw payloads.
 */
export function readBatchBody(body: unknown, text?: string): AlarmSpec[] {
  const outer = formErrors(body, batchForm, { required: ['alarms'] });
  if (outer.errors.length > 0) throw invalidFields(outer.errors);
  const items = outer.values.alarms as unknown[];
  const raws = text === undefined ? [] : rawElements(rawMember(text, 'alarms') ?? '[]');
  const errors: FieldError[] = [];
  const specs = items.map((item, i) => {
    const raw = raws[i];
    const read = readOne(item, { create: true, rawPayload: raw && rawMember(raw, 'payload') }, `alarms.${i}`);
    errors.push(...read.errors);
    return read.spec;
  });
  if (errors.length > 0) throw invalidFields(errors);
  return specs;
}

const batchForm: Form<'alarms'> = {
  names: { alarms: 'alarms' },
  rules: {
    alarms: {
      schema: z.array(z.unknown()).min(1).max(MAX_BATCH),
      expected: `an array of 1 to ${MAX_BATCH} create bodies, like [{"in_seconds": 600}]`,
    },
  },
};

function readOne(
  body: unknown,
  options: BodyOptions,
  path: string,
): { spec: AlarmSpec; errors: FieldError[] } {
  const { values, errors } = formErrors(body, alarmForm, {
    path,
    oneOf: { fields: SCHEDULE_FIELDS, exactly: options.create },
  });
  return { spec: toSpec(values, options.rawPayload), errors };
}

/**
 * Read field values as an AlarmSpec, the payload as its raw text when the caller had it. The spec
 * is `values` itself (not a copy: a batch reads 50,000 of them), which the caller gives up.
 */
export function toSpec(values: Partial<Record<SpecField, unknown>>, rawPayload?: string): AlarmSpec {
  const payload = values.payload;
  const spec = values as AlarmSpec;
  if (payload !== undefined) {
    // A value (not the caller's own text) is sent as JSON.stringify writes it; its stored form is
    // then known here too, and the insert need not send it back (see store/alarm-inserts.ts).
    spec.payload =
      rawPayload === undefined
        ? new RawJson(JSON.stringify(payload), jsonbText(payload))
        : new RawJson(rawPayload);
  }
  return spec;
}

// ---- Bulk cancel -------------------------------------------------------------------------------

/** The body of `POST /v1/alarms/bulk-cancel`: every filter given must match; at least one. */
export const bulkCancelSchema = z.strictObject({
  ids: z.array(z.string()).min(1).max(MAX_BATCH).optional().describe('Alarm ids (up to 1,000).'),
  label: alarmFields.label.optional().describe('Alarms with exactly this label.'),
  conversation_id: alarmFields.conversation_id.optional().describe('Alarms of this conversation.'),
});

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

const bulkForm: Form<'ids' | 'label' | 'conversationId'> = {
  names: { ids: 'ids', label: 'label', conversationId: 'conversation_id' },
  rules: {
    ids: {
      schema: z.array(z.string().regex(UUID)).min(1).max(MAX_BATCH),
      expected: `an array of 1 to ${MAX_BATCH} alarm ids (UUIDs), like ["2f1e8c7a-5b3d-4e8f-9a1b-6c2d3e4f5a6b"]`,
    },
    label: SPEC_RULES.label,
    conversationId: SPEC_RULES.conversationId,
  },
  aliases: { alarms: 'ids', alarmids: 'ids', conversation: 'conversationId' },
};

/** A bulk-cancel body: its filters, at least one. */
export function readBulkCancelBody(body: unknown): {
  ids?: string[];
  label?: string;
  conversationId?: string;
} {
  const { values, errors } = formErrors(body, bulkForm);
  if (errors.length === 0 && Object.keys(values).length === 0) {
    const message =
      'body: expected at least one of "ids", "label" or "conversation_id" to choose the alarms to cancel, got none';
    errors.push({ path: '', message });
  }
  if (errors.length > 0) throw invalidFields(errors);
  return values as { ids?: string[]; label?: string; conversationId?: string };
}

// ---- Preview -----------------------------------------------------------------------------------

/** The fields of `POST /v1/schedules/preview` (and MCP `preview_schedule`) besides `count`. */
const PREVIEW_FIELDS = [
  'at',
  'inSeconds',
  'cron',
  'rrule',
  'timezone',
  'startsAt',
  'endsAt',
  'jitterSeconds',
  'expiresAfterSeconds',
] as const satisfies readonly WireField[];
type PreviewField = (typeof PREVIEW_FIELDS)[number] | 'count';

export const PREVIEW_COUNT = { min: 1, max: 50, default: 5 } as const;

const previewForm: Form<PreviewField> = {
  names: {
    ...(Object.fromEntries(PREVIEW_FIELDS.map((f) => [f, WIRE_NAMES[f]])) as Record<
      (typeof PREVIEW_FIELDS)[number],
      string
    >),
    count: 'count',
  },
  rules: {
    ...SPEC_RULES,
    count: {
      schema: z.number().int().min(PREVIEW_COUNT.min).max(PREVIEW_COUNT.max),
      expected: `a whole number from ${PREVIEW_COUNT.min} to ${PREVIEW_COUNT.max}`,
    },
  },
  aliases: SPEC_ALIASES,
};

/** The preview body's schema, for OpenAPI and MCP. */
export const previewScheduleSchema = z.strictObject({
  ...Object.fromEntries(PREVIEW_FIELDS.map((f) => [WIRE_NAMES[f], alarmFields[WIRE_NAMES[f]].optional()])),
  count: z
    .number()
    .int()
    .min(PREVIEW_COUNT.min)
    .max(PREVIEW_COUNT.max)
    .optional()
    .describe(
      `How many due instants to show (${PREVIEW_COUNT.min} to ${PREVIEW_COUNT.max}, default ${PREVIEW_COUNT.default}).`,
    ),
});

/** A preview body: the schedule as an AlarmSpec, and how many instants to show. */
export function readPreviewBody(body: unknown): { spec: AlarmSpec; count: number } {
  const { values, errors } = formErrors(body, previewForm, {
    oneOf: { fields: ['at', 'inSeconds', 'cron', 'rrule'], exactly: true },
  });
  if (errors.length > 0) throw invalidFields(errors);
  const { count, ...spec } = values;
  return { spec: spec as AlarmSpec, count: (count as number | undefined) ?? PREVIEW_COUNT.default };
}
