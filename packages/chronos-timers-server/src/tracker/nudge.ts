/**
 * The nudge stage (contract §7): a wake delivered `nudgeAfterMs` ago and not acknowledged is
 * nudged once, through the router — or written to the log without one, as fires are. It counts
 * from the delivery: a wake never delivered is never nudged.
 */
import type { SignedDelivery } from '../receivers/http-post.js';
import { wakesClaimNudges } from 'chronos-timers/internal';
import { nudgeBody, nudgeFire, nudgeId } from './messages.js';
import type { SendContext } from './sender.js';
import { sendWakeStage } from './wake-stage.js';

export interface NudgeOptions {
  /** From the delivery to the nudge (`CHRONOS_NUDGE_AFTER`). */
  nudgeAfterMs: number;
  /** Where nudges go; without one they are written to the log. */
  routerUrl: string | undefined;
}

export class NudgeStage {
  readonly #ctx: SendContext;
  readonly #options: NudgeOptions;

  constructor(ctx: SendContext, options: NudgeOptions) {
    this.#ctx = ctx;
    this.#options = options;
  }

  /** Claims one batch of nudges due, sends them and records the outcomes. */
  async runOnce(): Promise<{ nudged: number; failed: number; more: boolean }> {
    const ctx = this.#ctx;
    const { nudgeAfterMs, routerUrl } = this.#options;
    const claims = await wakesClaimNudges(ctx.db, {
      nudgeAfterMs,
      limit: ctx.batchSize,
      leaseMs: ctx.leaseMs,
    });
    const round = await sendWakeStage(ctx, 'nudge', claims, (c, signal) => {
      if (routerUrl) {
        const trace = c.alarm.traceparent ? { traceparent: c.alarm.traceparent } : undefined;
        return ctx.sender.post(routerUrl, 'router', nudgeId(c.wakeId), nudgeBody(c), signal, trace);
      }
      const fire = nudgeFire(c);
      ctx.logger.info(
        {
          wakeId: c.wakeId,
          alarmId: fire.alarm.id,
          label: fire.alarm.label,
          firedAt: fire.firedAt.toISOString(),
          wakeMessage: fire.alarm.wakeMessage,
        },
        'alarm.nudge (no CHRONOS_ROUTER_URL: logged instead of delivered)',
      );
      return Promise.resolve<SignedDelivery>({ ok: true, kind: 'answered' });
    });
    return { nudged: round.sent, failed: round.failed, more: round.more };
  }
}
