/**
 * The schedules file's form (contract §13): `{"alarms": [entry, …]}`, where an entry is the
 * create body of `POST /v1/alarms` plus `owner` (a DID) and `key` (required: the alarm's
 * idempotency key, which names the entry from one version of the file to the next).
 *
 * - `readSchedulesFile` reads a file's text into typed entries, or into every refusal at once,
 *   each named as written in the file (`alarms.3.cron: expected …, got …`), with a "did you
 *   mean". A file is valid only as a whole: bad JSON, an invalid entry, or two entries with the
 *   same owner and key refuse all of it.
 * - `in_seconds` is refused: a file is read again at every start and every edit, and "in 600
 *   seconds" would name a new instant each time. `at` (an instant) or `cron` say what is meant.
 * - `idempotency_key` is not a field: `key` is.
 * - Payloads keep every digit: each entry's `payload` is taken as its own text (I4).
 *
 * `writeSchedulesFile` is the other way round (`chronos schedules export`), and
 * `scheduleChangedBody` is the heads-up an agent receives when the file created or changed one
 * of its alarms.
 */
import { z } from 'zod';
import { SPEC_RULES } from '../core/alarm-spec.js';
import { OWNER_EXPECTED, parseOwner } from '../core/owner.js';
import type { FileEntry } from '../core/schedules-file-service.js';
import { describeValue, type FieldError } from '../errors.js';
import { jsonSyntaxError, rawElements, rawMember, stringifyJson } from '../json.js';
import { DEFAULT_MAX_FAILURES, pairKey, type Alarm } from '../types.js';
import { SPEC_ALIASES, toSpec, WIRE_NAMES, type WireField } from './alarm-input.js';
import { formErrors, type Form } from './fields.js';
import { isoTime } from './iso-time.js';
import { alarmView } from './views.js';

/**
 * A file read: the entries that are right, and every refusal. A file with any refusal is refused
 * whole; the entries read are for finding the rest of its refusals (a schedule's meaning).
 */
export interface FileRead {
  entries: FileEntry[];
  errors: FieldError[];
}

/** The field an entry's member stands for: the wire's but in_seconds, `owner`, and `key` for the idempotency key. */
export type FileField = Exclude<WireField, 'inSeconds'> | 'owner';

export const FILE_NAMES = {
  owner: 'owner',
  idempotencyKey: 'key',
  label: WIRE_NAMES.label,
  at: WIRE_NAMES.at,
  cron: WIRE_NAMES.cron,
  rrule: WIRE_NAMES.rrule,
  timezone: WIRE_NAMES.timezone,
  startsAt: WIRE_NAMES.startsAt,
  endsAt: WIRE_NAMES.endsAt,
  jitterSeconds: WIRE_NAMES.jitterSeconds,
  expiresAfterSeconds: WIRE_NAMES.expiresAfterSeconds,
  conversationId: WIRE_NAMES.conversationId,
  wakeMessage: WIRE_NAMES.wakeMessage,
  payload: WIRE_NAMES.payload,
  maxFailures: WIRE_NAMES.maxFailures,
  requireAck: WIRE_NAMES.requireAck,
} as const satisfies Record<FileField, string>;

const IN_SECONDS_REFUSAL =
  'expected "at" (an RFC 3339 time with an offset, like "2027-03-14T09:00:00+01:00") or "cron" instead: ' +
  'a schedules file is read again at every start and every edit, and in_seconds would mean a new time at each read';

const entryForm: Form<FileField> = {
  names: FILE_NAMES,
  rules: {
    ...SPEC_RULES,
    idempotencyKey: {
      schema: SPEC_RULES.idempotencyKey.schema.refine((key) => key !== ''),
      expected:
        'a non-empty string of at most 200 characters that names this entry in every version of the file, ' +
        'like "daily-standup" (it is the alarm\'s idempotency key)',
    },
    owner: {
      schema: z.string().refine((did) => isOwner(did)),
      expected: OWNER_EXPECTED,
    },
  },
  aliases: {
    // Words for a delay would lead to in_seconds, which a file cannot use.
    ...Object.fromEntries(Object.entries(SPEC_ALIASES).filter(([, field]) => field !== 'inSeconds')),
    idempotencykey: 'idempotencyKey',
    did: 'owner',
    ownerdid: 'owner',
  },
};

const fileForm: Form<'alarms'> = {
  names: { alarms: 'alarms' },
  rules: {
    alarms: {
      schema: z.array(z.unknown()),
      expected:
        'an array of entries, like [{"owner": "did:matrix:<user uuid>:<name>", "key": "standup", "cron": "0 9 * * 1-5"}]',
    },
  },
};

const FILE_EXPECTED = 'a JSON object {"alarms": [entry, …]}';

/** The largest schedules file read: 8 MiB (128 entries with a full 64 KiB payload each). */
export const MAX_SCHEDULES_FILE_BYTES = 8 * 1024 * 1024;

/** The file's text as entries, and every refusal of its form (see FileRead). */
export function readSchedulesFile(text: string): FileRead {
  if (text.trim() === '') return refused(`schedules file: expected ${FILE_EXPECTED}, got an empty file`);
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_SCHEDULES_FILE_BYTES) {
    return refused(
      `schedules file: expected at most ${MAX_SCHEDULES_FILE_BYTES} bytes (8 MiB), got ${bytes} bytes`,
    );
  }
  const syntax = jsonSyntaxError(text);
  if (syntax) {
    return refused(
      `schedules file: expected ${FILE_EXPECTED}, got invalid JSON at line ${syntax.line}, column ${syntax.column}: ${syntax.message}`,
    );
  }
  const value: unknown = JSON.parse(text);
  const outer = formErrors(value, fileForm, { required: ['alarms'], noun: 'schedules file' });
  if (outer.errors.length > 0) return { entries: [], errors: outer.errors };
  const items = outer.values.alarms as unknown[];
  const raws = rawElements(rawMember(text, 'alarms') ?? '[]');

  const errors: FieldError[] = [];
  const entries: FileEntry[] = [];
  const seen = new Map<string, number>();
  items.forEach((item, index) => {
    const path = `alarms.${index}`;
    let body = item;
    const inSeconds = isObject(item) && item.in_seconds !== undefined;
    if (inSeconds) {
      const { in_seconds: given, ...rest } = item;
      errors.push({
        path: `${path}.in_seconds`,
        message: `${path}.in_seconds: ${IN_SECONDS_REFUSAL}, got ${describeValue(given)}`,
      });
      body = rest;
    }
    const { values, errors: refusals } = formErrors(body, entryForm, {
      path,
      required: ['owner', 'idempotencyKey'],
      // An entry with in_seconds was told what to write instead.
      ...(!inSeconds && { oneOf: { fields: ['at', 'cron', 'rrule'] as const, exactly: true } }),
    });
    if (refusals.length > 0 || inSeconds) {
      errors.push(...refusals);
      return;
    }
    const { owner: did, ...fields } = values;
    const owner = parseOwner(did, `${path}.owner`);
    const key = fields.idempotencyKey as string;
    const pair = pairKey(owner.did, key);
    const first = seen.get(pair);
    if (first !== undefined) {
      const message =
        `${path}.key: expected a key that no other entry of the same owner uses, got ${JSON.stringify(key)}, ` +
        `which alarms.${first}.key uses too; give each entry its own key`;
      errors.push({ path: `${path}.key`, message });
      return;
    }
    seen.set(pair, index);
    const raw = raws[index];
    entries.push({ index, owner, key, spec: toSpec(fields, raw && rawMember(raw, 'payload')) });
  });
  return { entries, errors };
}

/** A core field's path (`cron`, `requireAck`) as the file names it for entry `index` (`alarms.3.require_ack`). */
export function filePath(index: number, corePath: string): string {
  const [field, ...rest] = corePath.split('.').filter((s) => s !== '');
  const named =
    field === undefined
      ? undefined
      : Object.hasOwn(FILE_NAMES, field)
        ? FILE_NAMES[field as FileField]
        : field;
  return ['alarms', String(index), named, ...rest].filter((s) => s !== undefined).join('.');
}

function refused(message: string): FileRead {
  return { entries: [], errors: [{ path: '', message }] };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isOwner(did: string): boolean {
  try {
    parseOwner(did);
    return true;
  } catch {
    return false;
  }
}

// ---- Export -------------------------------------------------------------------------------------

/**
 * A schedules file holding `alarms` (live alarms, in the order given), each entry as short as
 * says the same: optional fields only when they differ from a create's defaults. An alarm with no
 * idempotency key cannot be named by a file: it is left out and returned in `skipped`.
 */
export function writeSchedulesFile(alarms: readonly Alarm[]): { text: string; skipped: Alarm[] } {
  const skipped = alarms.filter((a) => a.idempotencyKey === '');
  const entries = alarms
    .filter((a) => a.idempotencyKey !== '')
    .map((a) => ({
      owner: a.ownerDid,
      key: a.idempotencyKey,
      label: a.label,
      ...(a.kind === 'cron'
        ? { cron: a.cronExpr }
        : a.kind === 'rrule'
          ? { rrule: a.rrule }
          : { at: isoTime(a.fireAt ?? a.scheduledFor) }),
      timezone: a.timezone,
      ...(a.startsAt && { starts_at: isoTime(a.startsAt) }),
      ...(a.endsAt && { ends_at: isoTime(a.endsAt) }),
      ...(a.jitterSeconds && { jitter_seconds: a.jitterSeconds }),
      ...(a.expiresAfterSeconds && { expires_after_seconds: a.expiresAfterSeconds }),
      wake_message: a.wakeMessage,
      ...(a.conversationId !== '' && { conversation_id: a.conversationId }),
      ...(a.payload.text.replace(/\s/g, '') !== '{}' && { payload: a.payload }),
      ...(a.maxFailures !== DEFAULT_MAX_FAILURES && { max_failures: a.maxFailures }),
      ...(!a.requireAck && { require_ack: false }),
    }));
  return { text: stringifyJson({ alarms: entries }, 2), skipped };
}

// ---- The heads-up ----------------------------------------------------------------------------------

/**
 * The body of a heads-up to the owner's agent: `{type: "schedule.changed", change, source:
 * "file", owner_did, user_id, alarm}`, `alarm` the alarm view as the change left it (payload
 * verbatim).
 */
export function scheduleChangedBody(change: 'created' | 'updated', alarm: Alarm): string {
  return stringifyJson({
    type: 'schedule.changed',
    change,
    source: 'file',
    owner_did: alarm.ownerDid,
    user_id: alarm.userId,
    alarm: alarmView(alarm),
  });
}
