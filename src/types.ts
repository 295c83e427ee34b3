/**
 * The vocabulary of Chronos, defined once. Statuses equal their database values.
 */
import type { RawJson } from './json.js';

export type AlarmKind = 'once' | 'cron';
export type AlarmStatus = 'active' | 'fired' | 'cancelled' | 'failed';
export type AlarmSource = 'api' | 'mcp' | 'library';
export type WakeStatus = 'pending' | 'delivered' | 'acknowledged' | 'failed';

/** One row of `alarms`: one scheduled wake (I1). */
export interface Alarm {
  id: string;
  ownerDid: string;
  userId: string;
  label: string;
  kind: AlarmKind;
  fireAt: Date | null;
  cronExpr: string;
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
  createdAt: Date;
  updatedAt: Date;
  lastFiredAt: Date | null;
}

/** The JSON object named `alarm` in every answer (contract §5). */
export interface AlarmView {
  id: string;
  label: string;
  kind: AlarmKind;
  cron_expr?: string;
  timezone: string;
  next_fire_at?: string;
  conversation_id?: string;
  wake_message: string;
  payload: RawJson;
  status: AlarmStatus;
  idempotency_key?: string;
  max_failures: number;
  failure_count: number;
  last_error?: string;
  created_at: string;
  last_fired_at?: string;
  require_ack: boolean;
}

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
}

/** The JSON object named `wake` (contract §7). Null timestamps are shown as null. */
export interface WakeView {
  id: string;
  alarm_id: string;
  status: WakeStatus;
  conversation_id: string;
  scheduled_for: string;
  fired_at: string;
  delivered_at: string | null;
  attempts: number;
  fire_count: number;
  require_ack: boolean;
  nudged_at: string | null;
  escalated_at: string | null;
  acknowledged_at: string | null;
  ack_note: string | null;
  ack_inferred: boolean;
}

/** A page of a keyset-paginated list. */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}
