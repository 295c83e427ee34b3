/**
 * The HTTP app over a test database: a ChronosService built on the test file's database (not
 * closed by the test: the database belongs to the file), keys for two owners, and helpers to
 * call the app without a port (`inject`) and to count rows by SQL.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import type { ChronosApp } from '../../packages/chronos-timers-server/src/http/app.js';
import { createApp } from '../../packages/chronos-timers-server/src/server.js';
import { silentLogger, type Logger } from '../../packages/chronos-timers/src/logger.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import { sql, type Db } from '../../packages/chronos-timers/src/store/driver/db.js';
import { OTHER, OWNER, RecordingReceiver } from '../support/harness.js';

export { OTHER, OWNER };

export const OPERATOR_TOKEN = 'operator-token-for-tests-0123456789';

export interface TestApp {
  app: ChronosApp;
  service: ChronosService;
  receiver: RecordingReceiver;
  /** Headers carrying OWNER's key. */
  auth: Record<string, string>;
  /** Headers carrying OTHER's key. */
  otherAuth: Record<string, string>;
  ownerKey: string;
  otherKey: string;
  /** Every log line written, as text. */
  logs: string[];
  close(): Promise<void>;
}

/** A logger that keeps every line it writes, to look for secrets in it. */
export function capturingLogger(lines: string[]): Logger {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  return pino({ level: 'debug', base: { service: 'chronos' } }, sink);
}

export async function openTestApp(
  db: Db,
  env: Record<string, string> = {},
  options: { captureLogs?: boolean } = {},
): Promise<TestApp> {
  const config = loadConfig({
    CHRONOS_OPERATOR_TOKEN: OPERATOR_TOKEN,
    CHRONOS_CREATE_RATE: '0',
    CHRONOS_MAX_ACTIVE_ALARMS: '0',
    CHRONOS_MIN_CRON_INTERVAL: '60s',
    ...env,
  });
  const logs: string[] = [];
  const logger = options.captureLogs ? capturingLogger(logs) : silentLogger;
  const receiver = new RecordingReceiver();
  const service = await ChronosService.open(config, { db, logger, receiver });
  const app = await createApp(service);
  const owner = await service.keys.create(OWNER.did, 'test');
  const other = await service.keys.create(OTHER.did, 'other');
  return {
    app,
    service,
    receiver,
    logs,
    ownerKey: owner.key,
    otherKey: other.key,
    auth: { authorization: `Bearer ${owner.key}` },
    otherAuth: { authorization: `Bearer ${other.key}` },
    async close() {
      await app.close();
      await service.stop();
    },
  };
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: any;
  text: string;
}

/** One request through the app without a port; a JSON body is sent as given (string) or stringified. */
export async function call(
  app: ChronosApp,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'HEAD',
  url: string,
  options: { headers?: Record<string, string>; body?: unknown } = {},
): Promise<Answer> {
  const payload =
    options.body === undefined
      ? undefined
      : typeof options.body === 'string'
        ? options.body
        : JSON.stringify(options.body);
  const response = await app.inject({
    method,
    url,
    headers: {
      ...(payload !== undefined ? { 'content-type': 'application/json' } : {}),
      ...options.headers,
    },
    payload,
  });
  let body: unknown;
  try {
    body = response.body === '' ? undefined : JSON.parse(response.body);
  } catch {
    body = undefined;
  }
  return { status: response.statusCode, headers: response.headers, body, text: response.body };
}

const counts = sql(
  'test_http_counts',
  `SELECT (SELECT count(*)::int FROM chronos.alarms) AS alarms, (SELECT count(*)::int FROM chronos.wakes) AS wakes,
     (SELECT count(*)::int FROM chronos.api_keys) AS keys,
     (SELECT coalesce(max(updated_at), 'epoch')::text FROM chronos.alarms) AS alarms_changed,
     (SELECT coalesce(max(updated_at), 'epoch')::text FROM chronos.wakes) AS wakes_changed`,
);

/** A fingerprint of everything a request could write: equal before and after means nothing was. */
export async function snapshot(db: Db): Promise<Record<string, unknown>> {
  const [row] = await db.query(counts);
  return row!;
}

/** Asserts the shape of an RFC 9457 problem body. */
export function isProblem(answer: Answer, status: number): boolean {
  const b = answer.body;
  return (
    answer.status === status &&
    String(answer.headers['content-type']).startsWith('application/problem+json') &&
    typeof b?.type === 'string' &&
    typeof b?.title === 'string' &&
    b?.status === status &&
    typeof b?.detail === 'string'
  );
}

export const ALARM_VIEW_KEYS = [
  'id',
  'label',
  'kind',
  'cron_expr',
  'timezone',
  'next_fire_at',
  'conversation_id',
  'wake_message',
  'payload',
  'status',
  'idempotency_key',
  'max_failures',
  'failure_count',
  'last_error',
  'created_at',
  'last_fired_at',
  'require_ack',
];

export const WAKE_VIEW_KEYS = [
  'id',
  'alarm_id',
  'status',
  'label',
  'wake_message',
  'conversation_id',
  'scheduled_for',
  'fired_at',
  'delivered_at',
  'lateness_ms',
  'attempts',
  'fire_count',
  'require_ack',
  'nudged_at',
  'escalated_at',
  'acknowledged_at',
  'ack_note',
  'ack_inferred',
];

export const RFC3339_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
