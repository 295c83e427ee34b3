import { readAlarmBody } from '../../packages/chronos-timers/src/wire/alarm-input.js';
/**
 * The tracker on a test database: wakes fired through the real dispatcher, then moved in time
 * by SQL (a wake fired 13 minutes ago is `fired_at = fired_at - 13 min`), and trackers pointed at
 * real local sinks standing in for the router and the fallback URL.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { Webhook } from 'standardwebhooks';
import type { Clock } from '../../packages/chronos-timers/src/clock.js';
import type { Logger } from '../../packages/chronos-timers/src/logger.js';
import type { Metrics } from '../../packages/chronos-timers-server/src/metrics.js';
import { sql, type Db, type Executor, type Row } from '../../packages/chronos-timers/src/store/driver/db.js';
import { Tracker, type TrackerOptions } from '../../packages/chronos-timers-server/src/tracker/tracker.js';
import type { Alarm } from '../../packages/chronos-timers/src/types.js';
import { WakeService } from '../../packages/chronos-timers/src/core/wake-service.js';
import { backdate, makeDispatcher, makeService, OWNER, RecordingReceiver } from '../support/harness.js';
import { lateBound } from '../support/late.js';
import { Sink, type SinkRequest } from '../support/sink.js';

export const MINUTE = 60_000;
export const NUDGE_AFTER = 5 * MINUTE;
export const ESCALATE_AFTER = 12 * MINUTE;
export const RETENTION = 7 * 24 * 60 * MINUTE;
export const SECRET = `whsec_${randomBytes(32).toString('base64')}`;

const api = { source: 'api' } as const;

const open = new Set<Tracker>();

/**
 * A tracker with the contract's default delays, signing with SECRET, posting to the sinks given.
 * closeTrackers() (after each test) stops and closes every one made.
 */
export function makeTracker(
  db: Db,
  targets: { router?: Sink; fallback?: Sink },
  options: Partial<TrackerOptions> & { clock?: Clock; logger?: Logger; metrics?: Metrics } = {},
): Tracker {
  const tracker = new Tracker({
    db,
    nudgeAfterMs: NUDGE_AFTER,
    escalateAfterMs: ESCALATE_AFTER,
    retentionMs: RETENTION,
    routerUrl: targets.router?.url('/wakes'),
    fallbackUrl: targets.fallback?.url('/human'),
    secrets: [SECRET],
    timeoutMs: 5_000,
    leaseMs: 30_000,
    retry: { baseMs: 1_000, maxMs: 60_000 },
    random: () => 0.5,
    ...options,
  });
  open.add(tracker);
  return tracker;
}

export async function closeTrackers(): Promise<void> {
  await Promise.all([...open].map((tracker) => tracker.close()));
  open.clear();
}

export interface Fired {
  alarm: Alarm;
  wakeId: string;
}

/**
 * Creates an alarm through the service (require_ack defaults to true, as through the API) and
 * fires it once through the dispatcher; `receiver` decides how the delivery goes.
 */
export async function fire(
  db: Db,
  body: Record<string, unknown> = {},
  receiver: RecordingReceiver = new RecordingReceiver(),
  owner = OWNER,
): Promise<Fired> {
  const schedule = 'cron' in body || 'at' in body ? {} : { in_seconds: 60 };
  const spec = readAlarmBody({ ...schedule, ...body }, { create: true });
  const { alarm } = await makeService(db).create(owner, spec, api);
  // Due a couple of seconds ago by any clock in the room.
  await backdate(db, alarm.id, Math.max(0, alarm.nextFireAt.getTime() - Date.now()) + 2_000);
  // A failed delivery retries an hour later: a wake left pending stays pending through the test.
  await makeDispatcher(db, receiver, { retry: { baseMs: 3_600_000, maxMs: 3_600_000 } }).runOnce();
  const wakeFire = receiver.firesOf(alarm.id).at(-1);
  if (!wakeFire) throw new Error('the alarm did not fire');
  return { alarm, wakeId: wakeFire.wakeId };
}

export function wakeService(db: Db, replyWindowMs = 2 * MINUTE): WakeService {
  return new WakeService({ db, replyWindowMs });
}

const ageStmt = sql(
  'test_tracker_age_wake',
  `UPDATE chronos.wakes SET fired_at = fired_at - $2::float8 * interval '1 millisecond',
     scheduled_for = scheduled_for - $2::float8 * interval '1 millisecond',
     delivered_at = delivered_at - $2::float8 * interval '1 millisecond',
     created_at = created_at - $2::float8 * interval '1 millisecond'
   WHERE id = $1`,
);

/** Moves a wake's fire (and delivery) `ms` into the past, as if that much time had gone by. */
export async function age(db: Executor, wakeId: string, ms: number): Promise<void> {
  await db.query(ageStmt, [wakeId, ms]);
}

const deliveredAgoStmt = sql(
  'test_tracker_delivered_ago',
  `UPDATE chronos.wakes SET delivered_at = now() - $2::float8 * interval '1 millisecond' WHERE id = $1`,
);

/** Sets a wake's delivery `ms` before the database's now. */
export async function deliveredAgo(db: Executor, wakeId: string, ms: number): Promise<void> {
  await db.query(deliveredAgoStmt, [wakeId, ms]);
}

const ageAckStmt = sql(
  'test_tracker_age_ack',
  `UPDATE chronos.wakes SET acknowledged_at = acknowledged_at - $2::float8 * interval '1 millisecond',
     fired_at = fired_at - $2::float8 * interval '1 millisecond'
   WHERE id = $1`,
);

/** Moves a wake's fire and acknowledgement `ms` into the past. */
export async function ageAck(db: Executor, wakeId: string, ms: number): Promise<void> {
  await db.query(ageAckStmt, [wakeId, ms]);
}

const ageEscalationStmt = sql(
  'test_tracker_age_escalation',
  `UPDATE chronos.wakes SET escalated_at = escalated_at - $2::float8 * interval '1 millisecond' WHERE id = $1`,
);

export async function ageEscalation(db: Executor, wakeId: string, ms: number): Promise<void> {
  await db.query(ageEscalationStmt, [wakeId, ms]);
}

const lapseStmts = {
  nudge: sql(
    'test_tracker_lapse_nudge',
    `UPDATE chronos.wakes SET nudge_lease_until = now() - interval '1 millisecond'
     WHERE id = $1 AND nudge_lease_until IS NOT NULL`,
  ),
  escalation: sql(
    'test_tracker_lapse_escalation',
    `UPDATE chronos.wakes SET escalation_lease_until = now() - interval '1 millisecond'
     WHERE id = $1 AND escalation_lease_until IS NOT NULL`,
  ),
  receipt: sql(
    'test_tracker_lapse_receipt',
    `UPDATE chronos.wakes SET receipt_lease_until = now() - interval '1 millisecond'
     WHERE id = $1 AND receipt_lease_until IS NOT NULL`,
  ),
};

/** Ends a stage's lease or retry wait now, as if its time had passed (a dead tracker's, a backoff). */
export async function lapse(db: Executor, wakeId: string, stage: keyof typeof lapseStmts): Promise<void> {
  await db.query(lapseStmts[stage], [wakeId]);
}

const rowStmt = sql(
  'test_tracker_wake_row',
  `SELECT id::text, status, require_ack, fired_at, delivered_at, nudged_at, escalated_at, acknowledged_at,
     ack_note, ack_inferred, receipt_sent_at, nudge_attempts, escalation_attempts, receipt_attempts,
     nudge_lease_until, nudge_lease_token::text, escalation_lease_until, escalation_lease_token::text,
     receipt_lease_until, receipt_lease_token::text, tracker_error, updated_at
   FROM chronos.wakes WHERE id = $1`,
);

/** The wake's row with its stage columns; null once pruned. */
export async function wakeRow(db: Executor, wakeId: string): Promise<Row | null> {
  const [row] = await db.query(rowStmt, [wakeId]);
  return row ?? null;
}

/** Asserts the request is signed with SECRET per Standard Webhooks, with this webhook-id. */
export function expectSigned(request: SinkRequest, webhookId: string): void {
  expect(request.method).toBe('POST');
  expect(request.headers['webhook-id']).toBe(webhookId);
  expect(request.headers['content-type']).toBe('application/json');
  expect(() => new Webhook(SECRET).verify(request.rawBody, request.headers)).not.toThrow();
}

/** How many requests each webhook-id received. */
export function countById(...sinks: Sink[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const sink of sinks) {
    for (const r of sink.requests) {
      const id = r.headers['webhook-id'] ?? '';
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
  }
  return counts;
}

/** A receiver that fails every delivery, retryably (the wake stays pending). */
export function failingReceiver(retryable = true): RecordingReceiver {
  const receiver = new RecordingReceiver();
  receiver.behave = () => ({
    ok: false,
    retryable,
    error: retryable ? 'router answered 503' : 'router answered 400',
  });
  return receiver;
}

/**
 * The router and the fallback (a human's channel) every tracker suite talks to: started before
 * the suite, emptied (and every tracker closed) after each test, closed after the suite.
 */
export function useSinks(): { router: Sink; fallback: Sink } {
  let router: Sink | null = null;
  let fallback: Sink | null = null;
  beforeAll(async () => {
    router = await Sink.start();
    fallback = await Sink.start();
  });
  afterEach(async () => {
    await closeTrackers();
    router?.reset();
    fallback?.reset();
  });
  afterAll(async () => {
    await router?.close();
    await fallback?.close();
  });
  return {
    router: lateBound('the router sink', () => router),
    fallback: lateBound('the fallback sink', () => fallback),
  };
}
