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
 *
 * Each job is a stage of its own file, with a `runOnce()` that does one batch of it: escalate.ts,
 * nudge.ts, receipts.ts (unsent.ts in its place without a fallback URL), outbox.ts, prune.ts. This
 * class runs them in that order, one pass after another, on the shared loop (dispatch/loop.ts),
 * and adds what each did to the pass.
 */
import { systemClock, type Clock } from 'chronos-timers/internal';
import { Loop } from 'chronos-timers/internal';
import type { RetryPolicy } from 'chronos-timers/internal';
import { silentLogger, type Logger } from 'chronos-timers/internal';
import type { Metrics } from '../metrics.js';
import type { Db } from 'chronos-timers/internal';
import { scheduleChangesOwed } from 'chronos-timers/internal';
import { wakesCountByStage, wakesNextStageDueMs, wakesStageBacklog } from 'chronos-timers/internal';
import type { Wake } from 'chronos-timers/internal';
import { EscalateStage } from './escalate.js';
import { NudgeStage } from './nudge.js';
import { OutboxStage } from './outbox.js';
import { PruneStage } from 'chronos-timers/internal';
import { ReceiptStage } from './receipts.js';
import { Sender, type SendContext } from './sender.js';
import { UnsentReport } from './unsent.js';

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

/** One job of the tracker: a batch of it per call, and what it did, in the pass's terms. */
interface TrackerStage {
  runOnce(): Promise<Partial<TrackerPass>>;
}

export class Tracker {
  readonly #db: Db;
  readonly #nudgeAfterMs: number;
  readonly #escalateAfterMs: number;
  readonly #fallbackUrl: string | undefined;
  readonly #intervalMs: number;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #metrics: Metrics | undefined;
  readonly #sender: Sender;
  /** In the order a pass runs them: escalations first, retention last. */
  readonly #stages: readonly TrackerStage[];
  readonly #loop: Loop;

  constructor(options: TrackerOptions) {
    const { db, nudgeAfterMs, escalateAfterMs, retentionMs, routerUrl, fallbackUrl } = options;
    this.#db = db;
    this.#nudgeAfterMs = nudgeAfterMs;
    this.#escalateAfterMs = escalateAfterMs;
    this.#fallbackUrl = fallbackUrl;
    this.#intervalMs = options.intervalMs ?? 5_000;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger;
    this.#metrics = options.metrics;
    const leaseMs = options.leaseMs ?? 30_000;
    const pruneBatchSize = options.pruneBatchSize ?? 500;
    this.#sender = new Sender({
      secrets: options.secrets ?? [],
      timeoutMs: options.timeoutMs ?? 10_000,
      leaseMs,
      clock: this.#clock,
    });
    const ctx: SendContext = {
      db,
      sender: this.#sender,
      batchSize: options.batchSize ?? (db.kind === 'pglite' ? 25 : 100),
      leaseMs,
      retry: options.retry ?? { baseMs: 1_000, maxMs: 3_600_000 },
      random: options.random ?? Math.random,
      logger: this.#logger,
      metrics: this.#metrics,
    };
    this.#stages = [
      ...(fallbackUrl ? [new EscalateStage(ctx, { escalateAfterMs, fallbackUrl })] : []),
      new NudgeStage(ctx, { nudgeAfterMs, routerUrl }),
      fallbackUrl
        ? new ReceiptStage(ctx, fallbackUrl)
        : new UnsentReport({ db, logger: this.#logger, nudgeAfterMs, escalateAfterMs }),
      new OutboxStage(ctx, { routerUrl, retentionMs, pruneBatchSize }),
      new PruneStage({
        db,
        retentionMs,
        alarmRetentionMs: options.alarmRetentionMs,
        batchSize: pruneBatchSize,
        logger: this.#logger,
        metrics: this.#metrics,
      }),
    ];
    this.#loop = new Loop({
      name: 'tracker',
      errorMessage: 'tracker: pass failed; retrying',
      look: () => this.#look(),
      clock: this.#clock,
      logger: this.#logger,
      metrics: this.#metrics,
    });
    this.#metrics?.onScrape(() => this.#collect());
  }

  /**
   * One pass: escalations, then nudges, then receipts, then heads-ups, then one batch of pruning.
   * Tests call this directly instead of starting the loop. A failed send is counted and retried
   * later; a database error is thrown (the loop logs it and tries again).
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
    for (const stage of this.#stages) {
      const { more, ...counts } = await stage.runOnce();
      pass.more ||= more ?? false;
      for (const [key, n] of Object.entries(counts) as [keyof typeof counts, number][]) pass[key] += n;
    }
    return pass;
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
    this.#loop.poke();
  }

  /** Runs passes until stop(). */
  async start(): Promise<void> {
    if (this.#loop.running) return;
    this.#sender.rearm();
    if (!this.#fallbackUrl) {
      this.#logger.warn(
        'CHRONOS_FALLBACK_URL is not set: escalations and ack receipts are not sent; they wait in the table ' +
          '(chronos_tracker_backlog) until a fallback URL is configured',
      );
    }
    this.#loop.start();
  }

  /**
   * Stops after the pass under way. Its sends may finish for up to `graceMs`; the rest are
   * aborted and recorded as failed, to be sent again by the next tracker to run.
   */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.#loop.running) return;
    const ended = this.#loop.stop();
    const grace = new AbortController();
    await Promise.race([ended, this.#clock.sleep(graceMs, grace.signal)]);
    grace.abort();
    this.#sender.abort();
    await ended;
  }

  /** Stops, and closes the kept-alive connections. */
  async close(): Promise<void> {
    await this.stop();
    await this.#sender.close();
  }

  /** One look of the loop: a pass, then until the next stage is due (none when more is due now). */
  async #look(): Promise<number> {
    const pass = await this.runOnce();
    if (pass.more || this.#loop.stopping) return 0;
    return this.#untilNextDue();
  }

  /**
   * Until the next nudge or escalation falls due, at most the interval. A stage due already
   * was just passed over (another tracker holds it, or it waits out a retry): that waits for
   * the poll, so nothing spins.
   */
  async #untilNextDue(): Promise<number> {
    const ms = await wakesNextStageDueMs(this.#db, {
      nudgeAfterMs: this.#nudgeAfterMs,
      escalateAfterMs: this.#fallbackUrl ? this.#escalateAfterMs : null,
    });
    if (ms === null || ms <= 0) return this.#intervalMs;
    return Math.min(this.#intervalMs, Math.max(5, Math.ceil(ms)));
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
