/**
 * The receipt stage (contract §7): every acknowledged wake (an ack, or a reported reply) owes a
 * receipt at the fallback URL; the row owes it (`receipt_sent_at` is NULL), so nothing is lost
 * across a restart. Run only with a fallback URL; without one receipts wait (see unsent.ts).
 */
import { wakesClaimReceipts } from 'chronos-timers/internal';
import { receiptBody, receiptId } from './messages.js';
import type { SendContext } from './sender.js';
import { sendWakeStage } from './wake-stage.js';

export class ReceiptStage {
  readonly #ctx: SendContext;
  /** Where receipts go (`CHRONOS_FALLBACK_URL`). */
  readonly #fallbackUrl: string;

  constructor(ctx: SendContext, fallbackUrl: string) {
    this.#ctx = ctx;
    this.#fallbackUrl = fallbackUrl;
  }

  /** Claims one batch of receipts owed, sends them and records the outcomes. */
  async runOnce(): Promise<{ receipts: number; failed: number; more: boolean }> {
    const ctx = this.#ctx;
    const fallbackUrl = this.#fallbackUrl;
    const claims = await wakesClaimReceipts(ctx.db, { limit: ctx.batchSize, leaseMs: ctx.leaseMs });
    const round = await sendWakeStage(ctx, 'receipt', claims, (c, signal) =>
      ctx.sender.post(fallbackUrl, 'fallback', receiptId(c.wakeId), receiptBody(c), signal),
    );
    return { receipts: round.sent, failed: round.failed, more: round.more };
  }
}
