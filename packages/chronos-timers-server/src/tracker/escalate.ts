/**
 * The escalation stage (contract §7): a wake fired `escalateAfterMs` ago and still not
 * acknowledged goes to a human, at the fallback URL. It counts from the fire, so a slow or broken
 * router cannot postpone it, and it is done only when the fallback answered 2xx. Run only with a
 * fallback URL; without one escalations wait in the table (see unsent.ts).
 */
import { wakesClaimEscalations } from 'chronos-timers/internal';
import { escalationBody, escalationId } from './messages.js';
import type { SendContext } from './sender.js';
import { sendWakeStage } from './wake-stage.js';

export interface EscalateOptions {
  /** From the fire to the escalation (`CHRONOS_ESCALATE_AFTER`). */
  escalateAfterMs: number;
  /** Where escalations go (`CHRONOS_FALLBACK_URL`). */
  fallbackUrl: string;
}

export class EscalateStage {
  readonly #ctx: SendContext;
  readonly #options: EscalateOptions;

  constructor(ctx: SendContext, options: EscalateOptions) {
    this.#ctx = ctx;
    this.#options = options;
  }

  /** Claims one batch of escalations due, sends them and records the outcomes. */
  async runOnce(): Promise<{ escalated: number; failed: number; more: boolean }> {
    const ctx = this.#ctx;
    const { escalateAfterMs, fallbackUrl } = this.#options;
    const claims = await wakesClaimEscalations(ctx.db, {
      escalateAfterMs,
      limit: ctx.batchSize,
      leaseMs: ctx.leaseMs,
    });
    const round = await sendWakeStage(ctx, 'escalation', claims, (c, signal) =>
      ctx.sender.post(fallbackUrl, 'fallback', escalationId(c.wakeId), escalationBody(c), signal),
    );
    return { escalated: round.sent, failed: round.failed, more: round.more };
  }
}
