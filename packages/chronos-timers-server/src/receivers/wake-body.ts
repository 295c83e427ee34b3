/**
 * The JSON body of a fire (contract §6): what the router's webhook sends, and the tracker's nudge
 * repeats. Pure.
 */
import { isoTime } from 'chronos-timers/internal';
import { fireInstructions, nudgeInstructions } from './instructions.js';
import type { Fire } from 'chronos-timers/internal';

export type WakeEventType = 'alarm.fired' | 'alarm.nudge';

/**
 * The §6 body of a fire as JSON text. `type` is `alarm.nudge` for the tracker's reminder, which
 * carries the same fields.
 *
 * `payload` is spliced in as the stored JSONB text (I4), between two ordinary JSON.stringify
 * halves: the same output as `stringifyJson` with a RawJson member, at a fraction of its cost,
 * which matters at thousands of wakes a second (bench/README.md, "Webhook delivery").
 */
export function wakeBody(fire: Fire, type: WakeEventType = 'alarm.fired'): string {
  const { alarm } = fire;
  const scheduledFor = isoTime(fire.scheduledFor);
  const head = JSON.stringify({
    type,
    wake_id: fire.wakeId,
    alarm_id: alarm.id,
    user_id: alarm.userId,
    owner_did: alarm.ownerDid,
    label: alarm.label,
    kind: alarm.kind,
    conversation_id: alarm.conversationId,
    wake_message: alarm.wakeMessage,
  });
  const tail = JSON.stringify({
    scheduled_for: scheduledFor,
    fired_at: isoTime(fire.firedAt),
    lateness_ms: Math.max(0, Math.round(fire.latenessMs)),
    attempt: fire.attempt,
    fire_count: fire.fireCount,
    require_ack: alarm.requireAck,
    trigger: fire.trigger,
    instructions: type === 'alarm.nudge' ? nudgeInstructions(fire) : fireInstructions(fire, scheduledFor),
  });
  return `${head.slice(0, -1)},"payload":${alarm.payload.text},${tail.slice(1)}`;
}
