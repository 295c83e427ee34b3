/**
 * The tracker's three messages as JSON text, and the `webhook-id` of each (contract §7). Pure.
 *
 * - `alarm.nudge`, to the router: the §6 body of the fire with that type (`wakeBody`), the same
 *   `wake_id`; `webhook-id` `<wake_id>:nudge`.
 * - `wake.escalated`, to the fallback URL; `webhook-id` `<wake_id>:escalation`.
 * - `wake.acknowledged`, the receipt, to the fallback URL; `webhook-id` `<wake_id>:receipt`.
 *
 * Each `webhook-id` is the same on every retry of that message: receivers deduplicate on it.
 * Strings pass through as stored, code unit for code unit (I4).
 */
import type { Fire } from 'chronos-timers/internal';
import { wakeBody } from '../receivers/wake-body.js';
import type { EscalationClaim, NudgeClaim, ReceiptClaim } from 'chronos-timers/internal';

export const nudgeId = (wakeId: string): string => `${wakeId}:nudge`;
export const escalationId = (wakeId: string): string => `${wakeId}:escalation`;
export const receiptId = (wakeId: string): string => `${wakeId}:receipt`;

/**
 * The fire a nudge repeats: the wake's own instants, conversation and fire count, the alarm's
 * current label, message and payload; `attempt` counts the nudge's own sends.
 */
export function nudgeFire(claim: NudgeClaim): Fire {
  const lateness = claim.latenessMs ?? claim.firedAt.getTime() - claim.scheduledFor.getTime();
  return {
    alarm: { ...claim.alarm, conversationId: claim.conversationId },
    wakeId: claim.wakeId,
    attempt: claim.attempt,
    fireCount: claim.fireCount,
    trigger: claim.trigger,
    traceparent: claim.alarm.traceparent,
    scheduledFor: claim.scheduledFor,
    firedAt: claim.firedAt,
    latenessMs: Math.max(0, lateness),
  };
}

export function nudgeBody(claim: NudgeClaim): string {
  return wakeBody(nudgeFire(claim), 'alarm.nudge');
}

export function escalationBody(claim: EscalationClaim): string {
  return JSON.stringify({
    type: 'wake.escalated',
    wake_id: claim.wakeId,
    alarm_id: claim.alarmId,
    user_id: claim.userId,
    owner_did: claim.ownerDid,
    label: claim.label,
    conversation_id: claim.conversationId,
    wake_message: claim.wakeMessage,
    fired_at: claim.firedAt.toISOString(),
    age_seconds: claim.ageSeconds,
  });
}

/** `note` is null for an inferred ack (a reported reply carries none). */
export function receiptBody(claim: ReceiptClaim): string {
  return JSON.stringify({
    type: 'wake.acknowledged',
    wake_id: claim.wakeId,
    alarm_id: claim.alarmId,
    user_id: claim.userId,
    owner_did: claim.ownerDid,
    label: claim.label,
    note: claim.note,
    inferred: claim.inferred,
    acknowledged_at: claim.acknowledgedAt.toISOString(),
  });
}
