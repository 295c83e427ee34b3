/**
 * In place of the receipt stage when no fallback URL is configured: escalations and receipts
 * then wait in the table, and this says how many — once, when the number grows, not every pass.
 */
import type { Logger } from 'chronos-timers/internal';
import type { Db } from 'chronos-timers/internal';
import { wakesStageBacklog } from 'chronos-timers/internal';

export interface UnsentOptions {
  db: Db;
  logger: Logger;
  nudgeAfterMs: number;
  escalateAfterMs: number;
}

export class UnsentReport {
  readonly #options: UnsentOptions;
  /** The backlog last reported. */
  #reported = { escalation: 0, receipt: 0 };

  constructor(options: UnsentOptions) {
    this.#options = options;
  }

  /** Reads the backlog; logs it if it grew since the last report. Sends nothing. */
  async runOnce(): Promise<Record<never, never>> {
    const { db, logger, nudgeAfterMs, escalateAfterMs } = this.#options;
    const backlog = await wakesStageBacklog(db, { nudgeAfterMs, escalateAfterMs });
    const grew = backlog.escalation > this.#reported.escalation || backlog.receipt > this.#reported.receipt;
    if (grew) {
      logger.warn(
        { escalations: backlog.escalation, receipts: backlog.receipt },
        'tracker: escalations or ack receipts are due but not sent: CHRONOS_FALLBACK_URL is not set',
      );
    }
    this.#reported = { escalation: backlog.escalation, receipt: backlog.receipt };
    return {};
  }
}
