/**
 * Webhook delivery on a test database: a real local sink, the WebhookReceiver pointed at it, and
 * a dispatcher over both. Rows are moved in time, never waited for.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type {
  Dispatcher,
  DispatcherSettings,
} from '../../packages/chronos-timers/src/dispatch/dispatcher.js';
import {
  WebhookReceiver,
  type WebhookReceiverOptions,
} from '../../packages/chronos-timers-server/src/receivers/webhook.js';
import { sql, type Db, type Executor, type Row } from '../../packages/chronos-timers/src/store/driver/db.js';
import { ATTEMPTS_OF_WAKE } from '../../packages/chronos-timers/src/store/wakes.js';
import { makeDispatcher } from '../support/harness.js';
import { lateBound } from '../support/late.js';
import { Sink } from '../support/sink.js';

export const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

export interface Delivery {
  receiver: WebhookReceiver;
  dispatcher: Dispatcher;
}

/** A WebhookReceiver posting to `sink`, and a dispatcher delivering through it. */
export function webhookDispatcher(
  db: Db,
  sink: Sink,
  options: {
    receiver?: Partial<WebhookReceiverOptions>;
    dispatcher?: Partial<Omit<DispatcherSettings, 'db'>>;
  } = {},
): Delivery {
  const receiver = new WebhookReceiver({
    url: sink.url(),
    secrets: [],
    timeoutMs: 5_000,
    concurrency: 16,
    ...options.receiver,
  });
  const dispatcher = makeDispatcher(db, receiver, options.dispatcher);
  return { receiver, dispatcher };
}

/**
 * For a suite of webhook tests: a sink started before them, reset after each and closed after all,
 * and `delivering(db, options)`, a webhook dispatcher to it whose receiver is closed after the test.
 */
export function useDelivery(): {
  sink: Sink;
  delivering(db: Db, options?: Parameters<typeof webhookDispatcher>[2]): Delivery;
} {
  let sink: Sink | null = null;
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    sink = await Sink.start();
  });
  afterEach(async () => {
    await Promise.all(closers.splice(0).map((close) => close()));
    sink?.reset();
  });
  afterAll(async () => {
    await sink?.close();
  });
  const late = lateBound('the sink', () => sink);
  return {
    sink: late,
    delivering: (db, options = {}) => {
      const delivery = webhookDispatcher(db, late, options);
      closers.push(() => delivery.receiver.close());
      return delivery;
    },
  };
}

const attemptsStmt = sql(
  'test_attempts_of',
  `SELECT t.attempt, t.outcome, t.status_code, t.error, t.started_at, t.duration_ms
   FROM chronos.wakes w CROSS JOIN LATERAL ${ATTEMPTS_OF_WAKE} t
   WHERE w.alarm_id = $1 ORDER BY t.started_at, t.attempt`,
);

/** The fire history of an alarm: one row per delivery attempt, oldest first. */
export async function attemptsOf(db: Executor, alarmId: string): Promise<Row[]> {
  return db.query(attemptsStmt, [alarmId]);
}

/**
 * How far past the end of the attempt `next_fire_at` was set: the backoff the dispatcher chose
 * (to the millisecond: the attempt's start and duration are recorded in whole milliseconds).
 */
export function backoffMs(row: Row, attempt: Row): number {
  const finished = (attempt.started_at as Date).getTime() + (attempt.duration_ms as number);
  return (row.next_fire_at as Date).getTime() - finished;
}
