/**
 * Follows every wake that needs an acknowledgement until someone acts on it (contract §7):
 * nudges the agent through the router, escalates to a human at the fallback URL, sends a
 * receipt for every ack, and prunes finished wakes — and finished alarms with theirs — after their
 * retention periods. It also sends the heads-ups (`schedule.changed`) that schedules-file edits
 * owe agents (contract §13): an outbox with the same claim, lease, backoff and fencing as a stage.
 *
 * Nothing is held in memory: each pass derives what is due from the wakes' own timestamps and
 * the database's `now()` (`delivered_at` + `nudgeAfterMs`, `fired_at` + `escalateAfterMs`, an
 * acknowledged wake without a receipt), claims it with one conditional `UPDATE … RETURNING` per
 * batch, sends, and records the outcome under the claim's token. A restart needs no re-arming;
 * any number of trackers may run against one database.
 *
 * What it guarantees:
 * - each stage is claimed by one tracker at a time; a send that fails is retried with backoff,
 *   and a tracker that dies mid-send leaves a lease that lapses, so the stage is sent again:
 *   never lost, possibly twice (receivers deduplicate on `webhook-id`);
 * - an escalation counts as done only when the fallback answered 2xx;
 * - a nudge counts from the wake's delivery (a wake never delivered is never nudged), escalation
 *   from its fire, so a slow or broken router cannot postpone escalation.
 *
 * What it does not do: send anything to a fallback URL that is not configured (escalations and
 * receipts then wait in the table, logged and counted as backlog), or nudge/escalate a wake its
 * owner withdrew (see src/store/wake-stages.ts). docs/tracker.md has the whole story.
 */
import { systemClock, type Clock } from '../clock.js';
import { retryDelayMs, type RetryPolicy } from '../dispatch/retry-policy.js';
import { silentLogger, type Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { Agent } from 'undici';
import type { postSigned, SignedDelivery } from '../receivers/http-post.js';
import { resultClass } from '../receivers/result-class.js';
import { alarmsPruneFinished } from '../store/alarms.js';
import type { Db } from '../store/db.js';
import {
  scheduleChangesClaim,
  scheduleChangesOwed,
  scheduleChangesPrune,
  scheduleChangesRecord,
  type ScheduleChangeOutcome,
} from '../store/schedule-changes.js';
import {
  wakesClaimEscalations,
  wakesClaimNudges,
  wakesClaimReceipts,
  wakesCountByStage,
  wakesNextStageDueMs,
  wakesPrune,
  wakesRecordStage,
  wakesStageBacklog,
  type Stage,
  type StageClaim,
  type StageOutcome,
} from '../store/wake-stages.js';
import type { Wake } from '../types.js';
import {
  escalationBody,
  escalationId,
  nudgeBody,
  nudgeFire,
  nudgeId,
  receiptBody,
  receiptId,
} from './messages.js';

export interface TrackerOptions {
  db: Db;
  /** From the fire to the nudge (`CHRONOS_NUDGE_AFTER`). */
  nudgeAfterMs: number;
  /** From the fire to the escalation (`CHRONOS_ESCALATE_AFTER`). */
  escalateAfterMs: number;
  /** How long finished wakes are kept (`CHRONOS_RETENTION`). */
  retentionMs: number;
  /** How long finished alarms are kept, with their wakes (`CHRONOS_ALARM_RETENTION`); none pruned when absent. */
  alarmRetentionMs?: number;
  /** Where nudges go; without one they are written to the log, as fires are. */
  routerUrl?: string;
  /** Where escalations and receipts go; without one they are not sent. */
  fallbackUrl?: string;
  /** `whsec_…` secrets signing every message, as for fires. */
  secrets?: readonly string[];
  /** One send is given up after this long (and always before its lease lapses). */
  timeoutMs?: number;
  /** How long a claimed stage is held before another tracker may send it. */
  leaseMs?: number;
  /** The longest a started tracker sleeps without looking (`CHRONOS_TRACKER_INTERVAL`). */
  intervalMs?: number;
  /** Wakes claimed per stage and statement. */
  batchSize?: number;
  /** Backoff between sends of a stage that failed. */
  retry?: RetryPolicy;
  random?: () => number;
  clock?: Clock;
  logger?: Logger;
  metrics?: Metrics;
  /** Finished wakes deleted per statement. */
  pruneBatchSize?: number;
  /**
   * Only retention, of these queues' alarms and wakes: no nudges, escalations or receipts (they
   * are `chronos serve`'s). What a library worker runs for its queue.
   */
  pruneOnly?: { queues: readonly string[] };
}

/** What one pass did. */
export interface TrackerPass {
  /** Sends the receiver accepted (2xx), per stage. */
  nudged: number;
  escalated: number;
  receipts: number;
  /** Schedules-file heads-ups (`schedule.changed`) the router accepted, or the log took. */
  headsUps: number;
  /** Sends that failed (they are retried later). */
  failed: number;
  /** Finished wakes deleted. */
  pruned: number;
  /** Finished alarms deleted (with their wakes) past their retention. */
  prunedAlarms: number;
  /** True when a batch came back full: more may be due right now. */
  more: boolean;
}

export class Tracker {
  readonly #db: Db;
  readonly #nudgeAfterMs: number;
  readonly #escalateAfterMs: number;
  readonly #retentionMs: number;
  readonly #alarmRetentionMs: number | undefined;
  readonly #routerUrl: string | undefined;
  readonly #fallbackUrl: string | undefined;
  readonly #secrets: readonly string[];
  readonly #timeoutMs: number;
  readonly #leaseMs: number;
  readonly #intervalMs: number;
  readonly #batchSize: number;
  readonly #retry: RetryPolicy;
  readonly #random: () => number;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #metrics: Metrics | undefined;
  readonly #pruneBatchSize: number;
  readonly #pruneOnly: { queues: readonly string[] } | undefined;
  /**
   * The webhook client and its keep-alive connections to the router and the fallback URL, loaded
   * at the first send (a library worker's pruner never sends); closed by close().
   */
  #http: Promise<{ post: typeof postSigned; agent: Agent }> | null = null;

  #loop: Promise<void> | null = null;
  #stopping = false;
  #wake = new AbortController();
  /** Aborts the sends under way (stop() after its grace period). */
  #sends = new AbortController();
  /** The backlog with no fallback URL last reported, so the log says it once, not every pass. */
  #unsentReported = { escalation: 0, receipt: 0 };

  constructor(options: TrackerOptions) {
    this.#db = options.db;
    this.#nudgeAfterMs = options.nudgeAfterMs;
    this.#escalateAfterMs = options.escalateAfterMs;
    this.#retentionMs = options.retentionMs;
    this.#alarmRetentionMs = options.alarmRetentionMs;
    this.#routerUrl = options.routerUrl;
    this.#fallbackUrl = options.fallbackUrl;
    this.#secrets = options.secrets ?? [];
    this.#leaseMs = options.leaseMs ?? 30_000;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#intervalMs = options.intervalMs ?? 5_000;
    this.#batchSize = options.batchSize ?? (options.db.kind === 'pglite' ? 25 : 100);
    this.#retry = options.retry ?? { baseMs: 1_000, maxMs: 3_600_000 };
    this.#random = options.random ?? Math.random;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger;
    this.#metrics = options.metrics;
    this.#pruneBatchSize = options.pruneBatchSize ?? 500;
    this.#pruneOnly = options.pruneOnly;
    this.#metrics?.onScrape(() => this.#collect());
  }

  /**
   * One pass: escalations, then nudges, then receipts, then one batch of pruning (only that,
   * with `pruneOnly`). Tests call this directly instead of starting the loop. A failed send is counted and retried later; a
   * database error is thrown (the loop logs it and tries again).
   */
  async runOnce(): Promise<TrackerPass> {
    const pass: TrackerPass = {
      nudged: 0,
      escalated: 0,
      receipts: 0,
      headsUps: 0,
      failed: 0,
      pruned: 0,
      prunedAlarms: 0,
      more: false,
    };
    if (!this.#pruneOnly) await this.#send(pass);
    await this.#prune(pass);
    return pass;
  }

  /** The pass's sends: escalations, nudges, receipts, schedules-file heads-ups. */
  async #send(pass: TrackerPass): Promise<void> {
    const leaseMs = this.#leaseMs;
    const limit = this.#batchSize;

    const fallbackUrl = this.#fallbackUrl;
    const routerUrl = this.#routerUrl;
    if (fallbackUrl) {
      const claims = await wakesClaimEscalations(this.#db, {
        escalateAfterMs: this.#escalateAfterMs,
        limit,
        leaseMs,
      });
      await this.#stage('escalation', claims, pass, (c, signal) =>
        this.#post(fallbackUrl, 'fallback', escalationId(c.wakeId), escalationBody(c), signal),
      );
    }

    const nudges = await wakesClaimNudges(this.#db, { nudgeAfterMs: this.#nudgeAfterMs, limit, leaseMs });
    await this.#stage('nudge', nudges, pass, (c, signal) => {
      if (routerUrl) {
        const trace = c.alarm.traceparent ? { traceparent: c.alarm.traceparent } : undefined;
        return this.#post(routerUrl, 'router', nudgeId(c.wakeId), nudgeBody(c), signal, trace);
      }
      const fire = nudgeFire(c);
      this.#logger.info(
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

    if (fallbackUrl) {
      const receipts = await wakesClaimReceipts(this.#db, { limit, leaseMs });
      await this.#stage('receipt', receipts, pass, (c, signal) =>
        this.#post(fallbackUrl, 'fallback', receiptId(c.wakeId), receiptBody(c), signal),
      );
    } else {
      await this.#reportUnsent();
    }

    await this.#headsUps(pass);
  }

  /** One batch of finished wakes, and one of finished alarms, past their retention. */
  async #prune(pass: TrackerPass): Promise<void> {
    const queues = this.#pruneOnly?.queues;
    pass.pruned = await wakesPrune(this.#db, {
      retentionMs: this.#retentionMs,
      limit: this.#pruneBatchSize,
      queues,
    });
    if (this.#alarmRetentionMs !== undefined) {
      const alarms = await alarmsPruneFinished(this.#db, {
        retentionMs: this.#alarmRetentionMs,
        limit: this.#pruneBatchSize,
        queues,
      });
      pass.prunedAlarms = alarms;
      pass.more ||= alarms === this.#pruneBatchSize;
    }
    if (pass.pruned > 0) {
      this.#metrics?.wakesPruned.inc(pass.pruned);
      this.#logger.debug({ pruned: pass.pruned }, 'tracker: pruned finished wakes past retention');
    }
    pass.more ||= pass.pruned === this.#pruneBatchSize;
    if (!this.#pruneOnly) {
      const headsUps = await scheduleChangesPrune(this.#db, {
        retentionMs: this.#retentionMs,
        limit: this.#pruneBatchSize,
      });
      pass.more ||= headsUps === this.#pruneBatchSize;
    }
  }

  /**
   * Sends the schedules-file heads-ups that are owed, to the router (the log without one), and
   * records each under its claim: sent, retried with backoff, or given up on a refusal that
   * trying again cannot mend (a 4xx other than 408 and 429).
   */
  async #headsUps(pass: TrackerPass): Promise<void> {
    const claims = await scheduleChangesClaim(this.#db, { limit: this.#batchSize, leaseMs: this.#leaseMs });
    if (claims.length === 0) return;
    pass.more ||= claims.length >= this.#batchSize;
    const routerUrl = this.#routerUrl;
    const signal = this.#sends.signal;
    const results = await Promise.all(
      claims.map(async (claim) => {
        if (routerUrl) {
          return {
            claim,
            delivery: await this.#post(routerUrl, 'router', claim.messageId, claim.body, signal),
          };
        }
        this.#logger.info(
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
      const retryMs = retryDelayMs(claim.attempt, this.#retry, this.#random, delivery.retryAfterMs);
      return { id: claim.id, token: claim.token, result: 'retry', error: delivery.error, retryMs };
    });
    const recorded = await scheduleChangesRecord(this.#db, outcomes);
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
        pass.headsUps++;
        this.#logger.debug(fields, 'tracker: schedule.changed sent');
        continue;
      }
      pass.failed++;
      this.#metrics?.trackerFailures.inc({ stage: 'schedule_change', result: resultClass(delivery) });
      if (outcome.result === 'failed') {
        this.#logger.warn(
          { ...fields, error: outcome.error },
          'tracker: schedule.changed refused by the router; not sent again',
        );
      } else {
        this.#logger.warn(
          { ...fields, error: outcome.error, retryMs: outcome.retryMs },
          'tracker: schedule.changed not accepted; will try again',
        );
      }
    }
  }

  /**
   * Called with the wakes an ack (or a reported reply) just acknowledged: counts the time to
   * ack, and wakes a started tracker so the receipt goes out now rather than at the next poll.
   * The receipt itself is owed by the row (`receipt_sent_at` is NULL), not by this call.
   */
  acknowledged(wakes: readonly Wake[]): void {
    for (const wake of wakes) {
      if (!wake.acknowledgedAt) continue;
      this.#metrics?.timeToAck.observe(
        { inferred: String(wake.ackInferred) },
        Math.max(0, wake.acknowledgedAt.getTime() - wake.firedAt.getTime()) / 1000,
      );
    }
    this.poke();
  }

  /** Wakes a sleeping tracker for a pass now. */
  poke(): void {
    this.#wake.abort();
  }

  /** Runs passes until stop(). */
  async start(): Promise<void> {
    if (this.#loop) return;
    this.#stopping = false;
    this.#sends = new AbortController();
    if (!this.#fallbackUrl && !this.#pruneOnly) {
      this.#logger.warn(
        'CHRONOS_FALLBACK_URL is not set: escalations and ack receipts are not sent; they wait in the table ' +
          '(chronos_tracker_backlog) until a fallback URL is configured',
      );
    }
    this.#loop = this.#run();
  }

  /**
   * Stops after the pass under way. Its sends may finish for up to `graceMs`; the rest are
   * aborted and recorded as failed, to be sent again by the next tracker to run.
   */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.#loop) return;
    this.#stopping = true;
    this.poke();
    const grace = new AbortController();
    await Promise.race([this.#loop, this.#clock.sleep(graceMs, grace.signal)]);
    grace.abort();
    this.#sends.abort();
    await this.#loop;
    this.#loop = null;
  }

  /** Stops, and closes the kept-alive connections. */
  async close(): Promise<void> {
    await this.stop();
    const http = await this.#http;
    await http?.agent.destroy().catch(() => undefined);
  }

  async #run(): Promise<void> {
    let errorDelayMs = 100;
    while (!this.#stopping) {
      try {
        const pass = await this.runOnce();
        errorDelayMs = 100;
        if (pass.more) continue;
        if (this.#stopping) break;
        await this.#sleep(await this.#untilNextDue());
      } catch (error) {
        this.#metrics?.loopErrors.inc({ loop: 'tracker' });
        this.#logger.error({ err: error }, 'tracker: pass failed; retrying');
        await this.#sleep(errorDelayMs);
        errorDelayMs = Math.min(errorDelayMs * 2, 5_000);
      }
    }
  }

  /**
   * Until the next nudge or escalation falls due, at most the interval. A stage due already
   * was just passed over (another tracker holds it, or it waits out a retry): that waits for
   * the poll, so nothing spins.
   */
  async #untilNextDue(): Promise<number> {
    if (this.#pruneOnly) return this.#intervalMs;
    const ms = await wakesNextStageDueMs(this.#db, {
      nudgeAfterMs: this.#nudgeAfterMs,
      escalateAfterMs: this.#fallbackUrl ? this.#escalateAfterMs : null,
    });
    if (ms === null || ms <= 0) return this.#intervalMs;
    return Math.min(this.#intervalMs, Math.max(5, Math.ceil(ms)));
  }

  async #sleep(ms: number): Promise<void> {
    if (this.#stopping) return;
    const signal = this.#wake.signal;
    if (!signal.aborted) await this.#clock.sleep(ms, signal);
    if (signal.aborted) this.#wake = new AbortController();
  }

  /** Sends every claim of one stage at once, then records the outcomes in one statement. */
  async #stage<C extends StageClaim>(
    stage: Stage,
    claims: readonly C[],
    pass: TrackerPass,
    send: (claim: C, signal: AbortSignal) => Promise<SignedDelivery>,
  ): Promise<void> {
    if (claims.length === 0) return;
    pass.more ||= claims.length >= this.#batchSize;
    const signal = this.#sends.signal;
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
            retryMs: retryDelayMs(claim.attempt, this.#retry, this.#random, delivery.retryAfterMs),
          },
    );
    const recorded = await wakesRecordStage(this.#db, stage, outcomes);

    for (const [i, { claim, delivery }] of results.entries()) {
      const outcome = outcomes[i]!;
      const fenced = !recorded.has(claim.wakeId);
      if (delivery.ok) {
        if (stage === 'nudge') pass.nudged++;
        else if (stage === 'escalation') pass.escalated++;
        else pass.receipts++;
        this.#sentCounter(stage)?.inc();
        const log = stage === 'escalation' ? this.#logger.info : this.#logger.debug;
        log.call(
          this.#logger,
          { stage, wakeId: claim.wakeId, attempt: claim.attempt, fenced },
          `tracker: ${stage} sent`,
        );
      } else {
        pass.failed++;
        this.#metrics?.trackerFailures.inc({ stage, result: resultClass(delivery) });
        this.#logger.warn(
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
  }

  /** One signed POST; never throws. */
  async #post(
    url: string,
    target: 'router' | 'fallback',
    msgId: string,
    body: string,
    signal: AbortSignal,
    headers?: Record<string, string>,
  ): Promise<SignedDelivery> {
    this.#http ??= import('../receivers/http-post.js').then((http) => ({
      post: http.postSigned,
      agent: http.createDeliveryAgent({ connections: 16 }),
    }));
    const { post, agent } = await this.#http;
    return post({
      url,
      msgId,
      body,
      headers,
      secrets: this.#secrets,
      // Given up well before the lease lapses, so a hung receiver never lets a second tracker in.
      timeoutMs: Math.min(this.#timeoutMs, Math.max(1, Math.floor(this.#leaseMs * 0.8))),
      signal,
      target,
      dispatcher: agent,
      now: () => this.#clock.now().getTime(),
    });
  }

  #sentCounter(stage: Stage) {
    const metrics = this.#metrics;
    if (!metrics) return undefined;
    return { nudge: metrics.nudges, escalation: metrics.escalations, receipt: metrics.receipts }[stage];
  }

  /** With no fallback URL: says once, when it grows, how many escalations and receipts wait. */
  async #reportUnsent(): Promise<void> {
    const backlog = await wakesStageBacklog(this.#db, {
      nudgeAfterMs: this.#nudgeAfterMs,
      escalateAfterMs: this.#escalateAfterMs,
    });
    const grew =
      backlog.escalation > this.#unsentReported.escalation || backlog.receipt > this.#unsentReported.receipt;
    if (grew) {
      this.#logger.warn(
        { escalations: backlog.escalation, receipts: backlog.receipt },
        'tracker: escalations or ack receipts are due but not sent: CHRONOS_FALLBACK_URL is not set',
      );
    }
    this.#unsentReported = { escalation: backlog.escalation, receipt: backlog.receipt };
  }

  async #collect(): Promise<void> {
    const metrics = this.#metrics;
    if (!metrics) return;
    const [stages, backlog, headsUps] = await Promise.all([
      wakesCountByStage(this.#db),
      wakesStageBacklog(this.#db, {
        nudgeAfterMs: this.#nudgeAfterMs,
        escalateAfterMs: this.#escalateAfterMs,
      }),
      scheduleChangesOwed(this.#db),
    ]);
    for (const [stage, n] of Object.entries(stages)) metrics.wakesByStage.set({ stage }, n);
    for (const [stage, n] of Object.entries(backlog)) metrics.trackerBacklog.set({ stage }, n);
    metrics.trackerBacklog.set({ stage: 'schedule_change' }, headsUps);
  }
}
