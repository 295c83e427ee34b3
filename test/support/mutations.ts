/**
 * What the property tests mutate: the fields of an alarm body (contract §5), and how a list of
 * mutations is applied to a valid body to make an odd one.
 */

/** The fields POST /v1/alarms (and `schedule_alarm`) accept. */
export const ALARM_FIELDS = [
  'label',
  'at',
  'in_seconds',
  'cron',
  'timezone',
  'conversation_id',
  'wake_message',
  'payload',
  'idempotency_key',
  'max_failures',
  'require_ack',
] as const;

export type Mutation = { op: 'drop'; key: string } | { op: 'set' | 'add'; key: string; value: unknown };

/**
 * A copy of `base` with each mutation applied in turn: a field dropped, or set to a value —
 * by `defineProperty`, so that keys such as `__proto__` become own fields of the body, as they
 * would in parsed JSON.
 */
export function mutate(
  base: Record<string, unknown>,
  mutations: readonly Mutation[],
): Record<string, unknown> {
  const body: Record<string, unknown> = { ...base };
  for (const m of mutations) {
    if (m.op === 'drop') delete body[m.key];
    else
      Object.defineProperty(body, m.key, {
        value: m.value,
        enumerable: true,
        configurable: true,
        writable: true,
      });
  }
  return body;
}
