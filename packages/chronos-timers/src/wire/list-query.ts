/**
 * The query of a read (contract §5, §7) as every door sends it — an HTTP query string, MCP tool
 * arguments, the parameters the CLI sends through the control socket — read into the core's typed
 * filters with the one form reader, as bodies are: each refusal names the parameter as the caller
 * wrote it (`alarm_id`, `cursor`) and says what to send. An empty value (`?status=`) counts as
 * none; which parameters a door takes at all is that door's to check first.
 */
import { z } from 'zod';
import { NEXT_FIRES_COUNT, type AlarmListFilter } from '../core/alarm-service.js';
import { PAGE_LIMIT, timeCursor, type PageRequest } from '../core/page.js';
import { codePoints, isStorable, STORABLE_EXPECTED } from '../core/text.js';
import type { WakeListFilter } from '../core/wake-service.js';
import { ALARM_STATUSES, WAKE_STATUSES } from '../types.js';
import { readForm, type FieldRule, type Form } from './fields.js';

/** What a query rule's reading gives for a value it refuses. */
const REFUSED = Symbol('refused');

/**
 * A query parameter's rule: `read` turns a value sent (a string from a query string, or JSON
 * from a tool call) into the core's, or REFUSED; an empty string is no value at all.
 */
function queryRule(expected: string, read: (value: unknown) => unknown): FieldRule {
  const schema = z.unknown().transform((value, ctx) => {
    if (value === '') return undefined;
    const typed = read(value);
    if (typed !== REFUSED) return typed;
    ctx.addIssue({ code: 'custom', message: expected, input: value });
    return z.NEVER;
  });
  return { schema, expected };
}

/** A status filter: one of `allowed`. */
const statusRule = (allowed: readonly string[]) =>
  queryRule(`one of ${allowed.join(', ')}`, (value) =>
    typeof value === 'string' && allowed.includes(value) ? value : REFUSED,
  );

/** The longest text filter (`q`, `alarm_id`, `conversation_id`), in characters. */
export const FILTER_TEXT_CHARS = 200;
const textRule = (expected: string) =>
  queryRule(expected, (value) =>
    typeof value === 'string' && codePoints(value) <= FILTER_TEXT_CHARS && isStorable(value)
      ? value
      : REFUSED,
  );

/** A whole number from `min` to `max`: a JSON number, or its digits in a query string. */
const wholeRule = ({ min, max }: { min: number; max: number }, digits: RegExp, numbers: boolean) =>
  queryRule(`a whole number from ${min} to ${max}`, (value) => {
    const n =
      numbers && typeof value === 'number'
        ? value
        : typeof value === 'string' && digits.test(value)
          ? Number(value)
          : NaN;
    return Number.isInteger(n) && n >= min && n <= max ? n : REFUSED;
  });

const pageRules = {
  limit: wholeRule(PAGE_LIMIT, /^\d+$/, true),
  after: queryRule('the next_cursor of a previous page', (value) =>
    value === null ? undefined : typeof value === 'string' ? (timeCursor.decode(value) ?? REFUSED) : REFUSED,
  ),
} satisfies Record<keyof PageRequest, FieldRule>;

const pageNames = { limit: 'limit', after: 'cursor' } as const;

const alarmListForm: Form<keyof AlarmListFilter> = {
  names: { status: 'status', labelContains: 'q', ...pageNames },
  rules: {
    status: statusRule(ALARM_STATUSES),
    labelContains: textRule(`text of at most ${FILTER_TEXT_CHARS} characters to look for in labels`),
    ...pageRules,
  },
  aliases: { search: 'labelContains', label: 'labelContains', query: 'labelContains' },
};

const wakeListForm: Form<keyof WakeListFilter> = {
  names: {
    status: 'status',
    alarmId: 'alarm_id',
    conversationId: 'conversation_id',
    requireAck: 'require_ack',
    ...pageNames,
  },
  rules: {
    status: statusRule(WAKE_STATUSES),
    alarmId: textRule(`a string of at most ${FILTER_TEXT_CHARS} characters of ${STORABLE_EXPECTED}`),
    conversationId: textRule(`a string of at most ${FILTER_TEXT_CHARS} characters of ${STORABLE_EXPECTED}`),
    requireAck: queryRule('"true" or "false"', (value) =>
      value === 'true' || value === true ? true : value === 'false' || value === false ? false : REFUSED,
    ),
    ...pageRules,
  },
  aliases: { alarm: 'alarmId', conversation: 'conversationId', ack: 'requireAck' },
};

/** The query of `GET /v1/alarms` (and `list_alarms`, `chronos alarms list`): which alarms. */
export function readAlarmListQuery(query: unknown): AlarmListFilter {
  return readForm(query, alarmListForm) as AlarmListFilter;
}

/** The query of `GET /v1/wakes` (and `list_wakes`, an alarm's wakes): which wakes. */
export function readWakeListQuery(query: unknown): WakeListFilter {
  return readForm(query, wakeListForm) as WakeListFilter;
}

const nextFiresForm: Form<'count'> = {
  names: { count: 'count' },
  rules: { count: wholeRule(NEXT_FIRES_COUNT, /^\d{1,3}$/, false) },
};

/** The query of `GET /v1/alarms/{id}/next-fires`: how many, or undefined for the default. */
export function readNextFiresQuery(query: unknown): number | undefined {
  return readForm(query, nextFiresForm).count as number | undefined;
}
