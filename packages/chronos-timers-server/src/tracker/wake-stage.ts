/**
 * The round the nudge, escalation and receipt stages share: send every claim of one batch at
 * once, record the outcomes in one statement under the claims' tokens, then count and log each.
 */
import { retryDelayMs } from 'chronos-timers/internal';
import type { SignedDelivery } from '../receivers/http-post.js';
import { resultClass } from '../receivers/result-class.js';
import { wakesRecordStage, type Stage, type StageClaim, type StageOutcome } from 'chronos-timers/internal';
import type { SendContext } from './sender.js';

/** What one stage's round did. */
export interface StageRound {
  /** Sends the receiver accepted (2xx). */
  sent: number;
  /** Sends that failed (they are retried later). */
  failed: number;
  /** The batch came back full: more may be due right now. */
  more: boolean;
}

/** Sends every claim of one stage at once, then records the outcomes in one statement. */
export async function sendWakeStage<C extends StageClaim>(
  ctx: SendContext,
  stage: Stage,
  claims: readonly C[],
  send: (claim: C, signal: AbortSignal) => Promise<SignedDelivery>,
): Promise<StageRound> {
  const round: StageRound = { sent: 0, failed: 0, more: false };
  if (claims.length === 0) return round;
  round.more = claims.length >= ctx.batchSize;
  const { logger, metrics } = ctx;
  const signal = ctx.sender.signal;
  const results = await Promise.all(
    claims.map(async (claim) => {
      let delivery: SignedDelivery;
      try {
        delivery = await send(claim, signal);
      } catch (error) {
        // Sending does not throw; building a body could only fail on a corrupt row.
        delivery = {
          ok: false,
          retryable: true,
          error: `not sent: ${(error as Error).message}`,
          kind: 'connection',
        };
      }
      return { claim, delivery };
    }),
  );
  const outcomes: StageOutcome[] = results.map(({ claim, delivery }) =>
    delivery.ok
      ? { wakeId: claim.wakeId, token: claim.token, ok: true, error: '', retryMs: 0 }
      : {
          wakeId: claim.wakeId,
          token: claim.token,
          ok: false,
          error: delivery.error,
          retryMs: retryDelayMs(claim.attempt, ctx.retry, ctx.random, delivery.retryAfterMs),
        },
  );
  const recorded = await wakesRecordStage(ctx.db, stage, outcomes);

  for (const [i, { claim, delivery }] of results.entries()) {
    const outcome = outcomes[i]!;
    const fenced = !recorded.has(claim.wakeId);
    if (delivery.ok) {
      round.sent++;
      sentCounter(ctx, stage)?.inc();
      const log = stage === 'escalation' ? logger.info : logger.debug;
      log.call(
        logger,
        { stage, wakeId: claim.wakeId, attempt: claim.attempt, fenced },
        `tracker: ${stage} sent`,
      );
    } else {
      round.failed++;
      metrics?.trackerFailures.inc({ stage, result: resultClass(delivery) });
      logger.warn(
        {
          stage,
          wakeId: claim.wakeId,
          attempt: claim.attempt,
          error: outcome.error,
          retryMs: outcome.retryMs,
          fenced,
        },
        `tracker: ${stage} not accepted; will try again`,
      );
    }
  }
  return round;
}

function sentCounter(ctx: SendContext, stage: Stage) {
  const { metrics } = ctx;
  if (!metrics) return undefined;
  return { nudge: metrics.nudges, escalation: metrics.escalations, receipt: metrics.receipts }[stage];
}
