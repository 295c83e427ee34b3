/**
 * Retention (contract §7): deletes finished wakes — and, with an alarm retention, finished
 * alarms with theirs — once their periods are over, a batch of each per pass. The tracker runs
 * it after its sending stages; a library worker runs it alone, on a loop of its own, for its
 * queue's rows (`ChronosService.pruner`). It sends nothing and needs nothing else of the tracker.
 */
import type { Logger } from '../logger.js';
import type { LoopMetrics } from '../loop-metrics.js';
import { alarmsPruneFinished } from '../store/alarms.js';
import type { Db } from '../store/driver/db.js';
import { wakesPrune } from '../store/wake-stages.js';

export interface PruneOptions {
  db: Db;
  /** How long finished wakes are kept (`CHRONOS_RETENTION`). */
  retentionMs: number;
  /** How long finished alarms are kept, with their wakes (`CHRONOS_ALARM_RETENTION`); none pruned when absent. */
  alarmRetentionMs?: number;
  /** Rows deleted per statement. */
  batchSize?: number;
  /** Only these queues' alarms and wakes (a library worker's own); every queue's when absent. */
  queues?: readonly string[];
  logger: Logger;
  metrics?: LoopMetrics;
}

/** What one pass deleted. */
export interface PrunePass {
  /** Finished wakes deleted. */
  pruned: number;
  /** Finished alarms deleted (with their wakes). */
  prunedAlarms: number;
  /** A batch came back full: more may be due right now. */
  more: boolean;
}

export class PruneStage {
  readonly #options: PruneOptions;
  readonly #batchSize: number;

  constructor(options: PruneOptions) {
    this.#options = options;
    this.#batchSize = options.batchSize ?? 500;
  }

  /** One batch of finished wakes, and one of finished alarms, past their retention. */
  async runOnce(): Promise<PrunePass> {
    const { db, retentionMs, alarmRetentionMs, queues, logger, metrics } = this.#options;
    const limit = this.#batchSize;
    const pass: PrunePass = { pruned: 0, prunedAlarms: 0, more: false };
    pass.pruned = await wakesPrune(db, { retentionMs, limit, queues });
    if (alarmRetentionMs !== undefined) {
      pass.prunedAlarms = await alarmsPruneFinished(db, { retentionMs: alarmRetentionMs, limit, queues });
      pass.more ||= pass.prunedAlarms === limit;
    }
    if (pass.pruned > 0) {
      metrics?.wakesPruned.inc(pass.pruned);
      logger.debug({ pruned: pass.pruned }, 'tracker: pruned finished wakes past retention');
    }
    pass.more ||= pass.pruned === limit;
    return pass;
  }
}
