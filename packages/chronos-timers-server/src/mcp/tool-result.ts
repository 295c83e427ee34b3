/**
 * Tool answers and refusals as MCP `CallToolResult`s.
 *
 * An answer is the HTTP answer plus `server_time`, twice: as `structuredContent`, and as text
 * written by `stringifyJson` — the text keeps a stored payload's numbers digit for digit, where
 * the parsed structured form cannot (JSON numbers past 2^53 are rounded by every JSON.parse).
 *
 * A refusal is `isError: true` with a text for the model: what was wrong, what to send instead,
 * and `server_time`. It never carries structured content (a client would hold it to the output
 * schema). Errors Chronos did not expect are logged with their cause and answered blandly.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isChronosError } from 'chronos-timers/internal';
import { inWireNames } from 'chronos-timers/internal';
import { stringifyJson } from 'chronos-timers/internal';
import type { Logger } from 'chronos-timers/internal';

export function answerResult(answer: Record<string, unknown>, serverTime: string): CallToolResult {
  const text = stringifyJson({ ...answer, server_time: serverTime });
  return {
    content: [{ type: 'text', text }],
    structuredContent: JSON.parse(text) as Record<string, unknown>,
  };
}

export function refusalResult(
  tool: string,
  error: unknown,
  serverTime: string | undefined,
  logger: Logger,
): CallToolResult {
  const lines = refusal(tool, error, logger);
  if (serverTime !== undefined) lines.push(`server_time: ${serverTime}`);
  return { isError: true, content: [{ type: 'text', text: lines.join('\n') }] };
}

const ALARM_NOT_FOUND = 'no alarm with that id for you; call list_alarms to find your alarms and their ids.';
const WAKE_NOT_FOUND =
  'no wake with that id for you; send the wake_id that came with the wake you received (not the alarm id).';

function refusal(tool: string, thrown: unknown, logger: Logger): string[] {
  // The core names fields its own way (`inSeconds`); a model wrote them as the tools publish them.
  const error = inWireNames(thrown);
  if (isChronosError(error)) {
    switch (error.code) {
      case 'invalid_input':
      case 'too_large': {
        const messages = error.errors.length > 0 ? error.errors.map((e) => e.message) : [error.message];
        return [
          `${tool} refused its arguments; nothing was changed. Call it again with these corrected:`,
          ...messages.map((m) => `- ${m}`),
        ];
      }
      case 'not_found':
        return [tool === 'ack_wake' ? WAKE_NOT_FOUND : ALARM_NOT_FOUND];
      case 'conflict':
        return [`${tool} refused: ${error.message}.`, conflictHint(tool, error.message)];
      case 'quota':
        return quota(error.message, error.limit, error.retryAfterSeconds);
      case 'unavailable':
      case 'locked':
        return [unavailable()];
      default:
        break;
    }
  }
  logger.error({ err: error, tool }, 'MCP tool failed with an unexpected error');
  return [
    `${tool} failed unexpectedly (the error is logged on the Chronos server). Before trying again, check with ` +
      'list_alarms whether it took effect; if it keeps failing, tell the user the timer service has a problem.',
  ];
}

function conflictHint(tool: string, message: string): string {
  if (message.includes('idempotency key')) {
    return 'Choose an idempotency_key that none of your other alarms uses, or leave it out.';
  }
  if (tool === 'reschedule_alarm') {
    return 'Only an active or paused alarm can be changed. To be woken again, create a new alarm with schedule_alarm.';
  }
  if (tool === 'pause_alarm') return 'Only an active alarm can be paused; nothing was changed.';
  if (tool === 'resume_alarm') {
    return 'Only a paused alarm can be resumed. To be woken again after a fire or a cancel, use schedule_alarm.';
  }
  if (tool === 'cancel_alarm') return 'There is nothing to cancel: it will not fire again.';
  if (tool === 'ack_wake') return "Call get_alarm with the wake's alarm_id to see last_error.";
  return 'Nothing was changed.';
}

function quota(message: string, limit: string | undefined, retryAfterSeconds: number | undefined): string[] {
  const retry = Math.max(1, Math.ceil(retryAfterSeconds ?? 60));
  const lines = [`quota exceeded, ${message}. Nothing was scheduled.`];
  if (limit === 'max_active_alarms') {
    lines.push(
      'Call list_alarms with status "active", cancel_alarm the alarms no longer needed, then schedule again.',
    );
  } else {
    lines.push(
      `Wait ${retry} s before scheduling again (retry_after_seconds: ${retry}). If you are scheduling in a ` +
        'loop, stop and check list_alarms first.',
    );
  }
  return lines;
}

function unavailable(): string {
  return 'Chronos cannot reach its database right now; nothing was changed. Try again in a few seconds.';
}
