/**
 * The heads-up outbox (contract §13): the `schedule.changed` messages that schedules-file edits
 * owe agents, sent to the router (the log without one) with the same claim, lease, backoff and
 * fencing as a wake stage, and deleted once sent or given up longer than the retention period.
 */
import { retryDelayMs } from 'chronos-timers/internal';
import type { SignedDelivery } from '../receivers/http-post.js';
import { resultClass } from '../receivers/result-class.js';
import {
  scheduleChangesClaim,
  scheduleChangesPrune,
  scheduleChangesRecord,
  type ScheduleChangeOutcome,
} from 'chronos-timers/internal';
import type { SendContext } from './sender.js';

export interface OutboxOptions {
  /** Where heads-ups go; without one they are written to the log. */
  routerUrl: string | undefined;
  /** How long heads-ups sent or given up are kept (`CHRONOS_RETENTION`, as for wakes). */
  retentionMs: number;
  /** Heads-ups deleted per statement. */
  pruneBatchSize: number;
}

export class OutboxStage {
  readonly #ctx: SendContext;
  readonly #options: OutboxOptions;

  constructor(ctx: SendContext, options: OutboxOptions) {
    this.#ctx = ctx;
    this.#options = options;
  }

  /** One batch of heads-ups sent, then one of those finished past retention deleted. */
  async runOnce(): Promise<{ headsUps: number; failed: number; more: boolean }> {
    const round = await this.#send();
    const { retentionMs, pruneBatchSize } = this.#options;
    const pruned = await scheduleChangesPrune(this.#ctx.db, { retentionMs, limit: pruneBatchSize });
    round.more ||= pruned === pruneBatchSize;
    return round;
  }

  /**
   * Sends the heads-ups that are owed and records each under its claim: sent, retried with
   * backoff, or given up on a refusal that trying again cannot mend (a 4xx other than 408 and 429).
   */
  async #send(): Promise<{ headsUps: number; failed: number; more: boolean }> {
    const ctx = this.#ctx;
    const { logger, metrics } = ctx;
    const round = { headsUps: 0, failed: 0, more: false };
    const claims = await scheduleChangesClaim(ctx.db, { limit: ctx.batchSize, leaseMs: ctx.leaseMs });
    if (claims.length === 0) return round;
    round.more = claims.length >= ctx.batchSize;
    const routerUrl = this.#options.routerUrl;
    const signal = ctx.sender.signal;
    const results = await Promise.all(
      claims.map(async (claim) => {
        if (routerUrl) {
          return {
            claim,
            delivery: await ctx.sender.post(routerUrl, 'router', claim.messageId, claim.body, signal),
          };
        }
        logger.info(
          {
            messageId: claim.messageId,
            alarmId: claim.alarmId,
            ownerDid: claim.ownerDid,
            change: claim.change,
          },
          'schedule.changed (no CHRONOS_ROUTER_URL: logged instead of delivered)',
        );
        return { claim, delivery: { ok: true, kind: 'answered' } as SignedDelivery };
      }),
    );
    const outcomes: ScheduleChangeOutcome[] = results.map(({ claim, delivery }) => {
      if (delivery.ok) return { id: claim.id, token: claim.token, result: 'sent', error: '', retryMs: 0 };
      if (!delivery.retryable) {
        return { id: claim.id, token: claim.token, result: 'failed', error: delivery.error, retryMs: 0 };
      }
      const retryMs = retryDelayMs(claim.attempt, ctx.retry, ctx.random, delivery.retryAfterMs);
      return { id: claim.id, token: claim.token, result: 'retry', error: delivery.error, retryMs };
    });
    const recorded = await scheduleChangesRecord(ctx.db, outcomes);
    for (const [i, { claim, delivery }] of results.entries()) {
      const outcome = outcomes[i]!;
      const fields = {
        stage: 'schedule_change',
        messageId: claim.messageId,
        alarmId: claim.alarmId,
        attempt: claim.attempt,
        fenced: !recorded.has(claim.id),
      };
      if (delivery.ok) {
        round.headsUps++;
        logger.debug(fields, 'tracker: schedule.changed sent');
        continue;
      }
      round.failed++;
      metrics?.trackerFailures.inc({ stage: 'schedule_change', result: resultClass(delivery) });
      if (outcome.result === 'failed') {
        logger.warn(
          { ...fields, error: outcome.error },
          'tracker: schedule.changed refused by the router; not sent again',
        );
      } else {
        logger.warn(
          { ...fields, error: outcome.error, retryMs: outcome.retryMs },
          'tracker: schedule.changed not accepted; will try again',
        );
      }
    }
    return round;
  }
}
