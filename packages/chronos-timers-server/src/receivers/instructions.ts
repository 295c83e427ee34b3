/**
 * The `instructions` of a wake body (contract §6): text for the agent that receives the wake,
 * ready to be shown to it as is. It says what woke it, to act on the wake message, and — when
 * the wake requires an acknowledgement — how to give one (the `ack_wake` MCP tool, or the HTTP
 * route) and what happens without one. The nudge's says it is a reminder. Pure: the same fire
 * gives the same text.
 */
import { isoTime } from 'chronos-timers/internal';
import type { Fire } from 'chronos-timers/internal';

function named(fire: Fire): string {
  return fire.alarm.label === '' ? 'a scheduled wake' : `the scheduled wake "${fire.alarm.label}"`;
}

function howToAck(fire: Fire): string {
  return (
    `When you have acted, acknowledge it: call the ack_wake tool with wake_id "${fire.wakeId}" and a short ` +
    `note saying what you did (over HTTP: POST /v1/wakes/${fire.wakeId}/ack with {"note": "..."}).`
  );
}

function message(fire: Fire): string {
  return fire.alarm.wakeMessage === ''
    ? 'It carries no message: resume the work it was set for (see label and payload).'
    : `Its message, written for you when it was set:\n${fire.alarm.wakeMessage}`;
}

/**
 * The first delivery of a wake (`alarm.fired`). `scheduledFor` is the fire's due instant as the
 * body writes it, when the caller has it already.
 */
export function fireInstructions(fire: Fire, scheduledFor = isoTime(fire.scheduledFor)): string {
  const why =
    fire.trigger === 'manual'
      ? `Chronos woke you for ${named(fire)}: someone fired it by hand just now (not on its schedule).`
      : `Chronos woke you for ${named(fire)}, due ${scheduledFor}.`;
  const ack = fire.alarm.requireAck
    ? `${howToAck(fire)} Until then you will be reminded once, and then it may be escalated to a person.`
    : 'No acknowledgement is needed.';
  return `${why} ${message(fire)}\n\nAct on it now. ${ack}`;
}

/** The one reminder of a wake still unacknowledged (`alarm.nudge`). */
export function nudgeInstructions(fire: Fire): string {
  return (
    `Reminder: Chronos woke you for ${named(fire)} at ${isoTime(fire.firedAt)} and it has not been ` +
    `acknowledged yet. ${message(fire)}\n\nIf you have already acted on it, just acknowledge it. ` +
    `Otherwise act on it now. ${howToAck(fire)} An unacknowledged wake is escalated to a person.`
  );
}
