/**
 * The JSON shapes users see (contract §5 and §7). Internal fields — owner, user, fire_at, lease,
 * updated_at — never appear; empty optional strings are omitted from the alarm view.
 */
import type { Alarm, AlarmView, Wake, WakeView } from '../types.js';

/** RFC 3339 UTC with milliseconds: `2027-03-14T07:00:00.000Z`. */
export function isoTime(date: Date): string {
  return date.toISOString();
}

const isoOrNull = (date: Date | null) => (date ? date.toISOString() : null);

export function alarmView(alarm: Alarm): AlarmView {
  return {
    id: alarm.id,
    label: alarm.label,
    kind: alarm.kind,
    ...(alarm.cronExpr !== '' && { cron_expr: alarm.cronExpr }),
    timezone: alarm.timezone,
    ...(alarm.status === 'active' && { next_fire_at: isoTime(alarm.nextFireAt) }),
    ...(alarm.conversationId !== '' && { conversation_id: alarm.conversationId }),
    wake_message: alarm.wakeMessage,
    payload: alarm.payload,
    status: alarm.status,
    ...(alarm.idempotencyKey !== '' && { idempotency_key: alarm.idempotencyKey }),
    max_failures: alarm.maxFailures,
    failure_count: alarm.failureCount,
    ...(alarm.lastError !== '' && { last_error: alarm.lastError }),
    created_at: isoTime(alarm.createdAt),
    ...(alarm.lastFiredAt && { last_fired_at: isoTime(alarm.lastFiredAt) }),
    require_ack: alarm.requireAck,
  };
}

export function wakeView(wake: Wake): WakeView {
  return {
    id: wake.id,
    alarm_id: wake.alarmId,
    status: wake.status,
    conversation_id: wake.conversationId,
    scheduled_for: isoTime(wake.scheduledFor),
    fired_at: isoTime(wake.firedAt),
    delivered_at: isoOrNull(wake.deliveredAt),
    attempts: wake.attempts,
    fire_count: wake.fireCount,
    require_ack: wake.requireAck,
    nudged_at: isoOrNull(wake.nudgedAt),
    escalated_at: isoOrNull(wake.escalatedAt),
    acknowledged_at: isoOrNull(wake.acknowledgedAt),
    ack_note: wake.ackNote,
    ack_inferred: wake.ackInferred,
  };
}
