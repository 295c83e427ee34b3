/**
 * The vocabulary of Chronos, defined once. Statuses equal their database values.
 */
import type { RawJson } from './json.js';

export const ALARM_KINDS = ['once', 'cron', 'rrule'] as const;
export type AlarmKind = (typeof ALARM_KINDS)[number];
export const ALARM_STATUSES = ['active', 'paused', 'fired', 'cancelled', 'failed', 'expired'] as const;
export type AlarmStatus = (typeof ALARM_STATUSES)[number];
export type AlarmSource = 'api' | 'mcp' | 'library' | 'file';
/** What brought a fire: the alarm's schedule, or a "fire now" (contract §5, §6). */
export type Trigger = 'schedule' | 'manual';
export const WAKE_STATUSES = ['pending', 'delivered', 'acknowledged', 'failed', 'expired'] as const;
export type WakeStatus = (typeof WAKE_STATUSES)[number];

/** The queue whose alarms `chronos serve` delivers to the router (contract §4a). */
export const ROUTER_QUEUE = 'router';
/** The queue of a library timer that names none. */
export const DEFAULT_QUEUE = 'default';
/** Failed deliveries of one occurrence before it is given up, when an alarm says nothing (§2: the column's default). */
export const DEFAULT_MAX_FAILURES = 5;

/**
 * The Map key of an (owner, key) pair — an idempotency or schedules-file key of one owner: the
 * two joined by a NUL, which no stored text holds, so no two pairs share one.
 */
export const pairKey = (ownerDid: string, key: string): string => `${ownerDid}\u0000${key}`;

/** One row of `alarms`: one scheduled wake (I1). */
export interface Alarm {
  id: string;
  ownerDid: string;
  userId: string;
  label: string;
  kind: AlarmKind;
  fireAt: Date | null;
  cronExpr: string;
  /** An RFC 5545 rule for kind `rrule` (contract §3a); '' otherwise. */
  rrule?: string;
  /** The rule's DTSTART: `startsAt`, else the creation instant to the whole second. */
  rruleStart?: Date | null;
  /** No occurrence is due before it (cron and rrule). */
  startsAt?: Date | null;
  /** No occurrence is due after it; past it the alarm is `fired`. */
  endsAt?: Date | null;
  /** Each occurrence is due up to this many seconds after its instant; 0 for none. */
  jitterSeconds?: number;
  /** An occurrence not delivered this many seconds after it was due is given up; 0 for never. */
  expiresAfterSeconds?: number;
  timezone: string;
  /** The claim key: when the alarm is next due (a retry moves it past `scheduledFor`). */
  nextFireAt: Date;
  /** The due instant of the occurrence in hand; lateness is measured from it. */
  scheduledFor: Date;
  conversationId: string;
  wakeMessage: string;
  /** The payload as its stored JSON text (I4). */
  payload: RawJson;
  status: AlarmStatus;
  idempotencyKey: string;
  maxFailures: number;
  failureCount: number;
  lastError: string;
  claimedAt: Date | null;
  requireAck: boolean;
  source: AlarmSource;
  /** Who delivers it (contract §4a): `router` for `chronos serve`, another for a library `work()`. */
  queue: string;
  /** What brought the occurrence in hand. */
  trigger: Trigger;
  /** For a manual fire of an active cron alarm: the scheduled occurrence it goes back to. */
  heldOccurrence: Date | null;
  /** The W3C traceparent of the span that created it ('' without one): its deliveries continue that trace. */
  traceparent: string;
  createdAt: Date;
  updatedAt: Date;
  lastFiredAt: Date | null;
}

/**
 * What a dispatch reads of a claimed alarm: enough to hand the fire to an in-process handler and
 * to decide its outcome. A claim without history (a library worker's) reads only these columns.
 */
export type ClaimedAlarm = Pick<
  Alarm,
  | 'id'
  | 'kind'
  | 'cronExpr'
  | 'rrule'
  | 'rruleStart'
  | 'startsAt'
  | 'endsAt'
  | 'jitterSeconds'
  | 'expiresAfterSeconds'
  | 'timezone'
  | 'nextFireAt'
  | 'scheduledFor'
  | 'payload'
  | 'status'
  | 'idempotencyKey'
  | 'maxFailures'
  | 'failureCount'
  | 'lastError'
  | 'trigger'
  | 'heldOccurrence'
  | 'traceparent'
>;

/** One row of `wakes`: a fire, written before anything is sent. */
export interface Wake {
  id: string;
  alarmId: string;
  ownerDid: string;
  userId: string;
  conversationId: string;
  status: WakeStatus;
  scheduledFor: Date;
  firedAt: Date;
  deliveredAt: Date | null;
  latenessMs: number | null;
  attempts: number;
  fireCount: number;
  requireAck: boolean;
  lastError: string;
  nudgedAt: Date | null;
  escalatedAt: Date | null;
  acknowledgedAt: Date | null;
  ackNote: string | null;
  ackInferred: boolean;
  createdAt: Date;
  trigger: Trigger;
  /** The alarm's label and wake message as they are now. */
  label: string;
  wakeMessage: string;
}

/** One delivery attempt of a wake (contract §5: `GET /v1/wakes/{id}/attempts`). */
export interface WakeAttempt {
  attempt: number;
  startedAt: Date;
  finishedAt: Date;
  outcome: 'delivered' | 'retry' | 'failed';
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/**
 * Where a page of a list kept by creation time ends: the last row's `created_at` in microseconds
 * since the epoch (exact), and its id. Carried in the cursor itself, so a row pruned between
 * pages does not lose the place.
 */
export interface TimeCursor {
  createdUs: string;
  id: string;
}
