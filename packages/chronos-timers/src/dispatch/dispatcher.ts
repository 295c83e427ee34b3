/**
 * Claims due alarms of one queue for one worker and delivers them.
 *
 * Claim → deliver → record. Claims and outcomes are batched: one statement claims up to
 * `batchSize` alarms, and the outcomes that finish while a recording is under way are written
 * together by the next one.
 *
 * The dispatcher sleeps until exactly the earliest `next_fire_at` (measured by the database
 * clock), is woken early by a NOTIFY when a nearer alarm is written, and polls every
 * `pollIntervalMs` in any case — for notifications lost while a LISTEN connection was down, and
 * for leases that lapsed.
 *
 * Delivery is at-least-once: a worker that was slow rather than dead may still deliver after its
 * lease lapsed, so receivers deduplicate on the wake id. A delivery is aborted before its lease
 * would lapse, and its outcome is written only under its own lease token.
 */
import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { systemClock, type Clock } from '../clock.js';
import { silentLogger, type Logger } from '../logger.js';
import type { LoopMetrics } from '../loop-metrics.js';
import { dueChannel } from '../store/alarms.js';
import {
  alarmsClaimDue,
  alarmsClaimHeld,
  alarmsNextDueMs,
  alarmsRecordOutcomes,
  alarmsRelease,
  alarmsOthersDue,
  alarmsReleaseUnsent,
  type Claim,
  type Outcome,
  type RecordMode,
} from '../store/claims.js';
import type { Db } from '../store/driver/db.js';
import type { Alarm, ClaimedAlarm } from '../types.js';
import type { Delivery, Fire, Receiver } from '../receivers/receiver.js';
import {
  contextOf,
  inSpan,
  SpanKind,
  SpanStatusCode,
  startSpan,
  traceparentOf,
  tracingOn,
  type Span,
} from '../tracing.js';
import { decideOutcome, isExpired } from './outcome.js';
import { LogLimiter } from './log-limiter.js';
import { Loop } from './loop.js';
import type { RetryPolicy } from './retry-policy.js';

/**
 * Where fires go, and whether each fire's history is kept. With history (the default) a wake row
 * is opened by the claim and an attempt row added per delivery, and the receiver is given the
 * whole alarm: `chronos serve` needs both (its wake tracking, §7; the webhook body). Without
 * (`history: false`, a library worker's), a fire is kept on the alarm's row alone and the
 * receiver is given what a `ClaimedAlarm` holds.
 */
export type DispatcherDelivery =
  | { receiver: Receiver; history?: true }
  | {
      receiver: Receiver<ClaimedAlarm>;
      history: false;
      /** A one-shot alarm delivered is deleted, not kept `fired` (finished alarms kept for no time). */
      deleteFired?: boolean;
      /**
       * `lease` (the default): a claim leases its rows and ends; outcomes are recorded as they come.
       * `transaction`: a claim locks its rows in a transaction that stays open while their
       * deliveries run, records their outcomes in it and commits (PostgreSQL only: the embedded
       * store has one connection, which a batch would hold; there it leases).
       */
      claim?: ClaimMode;
    };

/** How a claim holds its rows (see `DispatcherDelivery`). */
export type ClaimMode = 'lease' | 'transaction';
export const CLAIM_MODES: readonly ClaimMode[] = ['lease', 'transaction'];

export type DispatcherOptions = DispatcherSettings & DispatcherDelivery;

export interface DispatcherSettings {
  db: Db;
  /** The queue whose alarms this dispatcher claims (contract §4a). */
  queue: string;
  clock?: Clock;
  logger?: Logger;
  metrics?: LoopMetrics;
  /** How long a claim holds an alarm before another worker may take it. */
  leaseMs?: number;
  batchSize?: number;
  /** Deliveries under way at once. */
  concurrency?: number;
  /** The fallback poll: the longest the dispatcher sleeps without looking. */
  pollIntervalMs?: number;
  /** A delivery is aborted after this long (and always before its lease lapses). */
  deliveryTimeoutMs?: number;
  retry?: RetryPolicy;
  random?: () => number;
}

/** One delivery under way: when it started, its span, and the receiver's answer or its promise. */
interface Attempt {
  startedPerf: number;
  startedAt: Date;
  latenessMs: number;
  span: Span | null;
  delivery: Delivery | 'coalesced' | 'expired' | Promise<Delivery>;
}

/** The `done` of a delivery that ended as it started. */
const ENDED: Promise<void> = Promise.resolve();

/** A receiver that threw instead of answering: a retryable failure. */
function receiverError(error: unknown): Delivery {
  return { ok: false, retryable: true, error: `receiver error: ${(error as Error).message}` };
}

interface InFlight {
  claim: Claim<ClaimedAlarm>;
  /** Shared by the flight's batch. */
  abort: AbortController;
  /** Its outcome is not to be recorded (stop() gave it up, or its held batch went on without it). */
  released: boolean;
  done: Promise<void>;
  /** The delivery has ended (its outcome decided, or given up). */
  settled: boolean;
  time: DbTime;
  /** When the delivery started (set as it starts). */
  startedAt: Date | null;
  latenessMs: number;
}

/** Maps performance.now() onto the database clock, from the `now()` a claim returned. */
class DbTime {
  constructor(
    private readonly dbMs: number,
    private readonly perfAtRequest: number,
  ) {}
  at(perf: number): Date {
    return new Date(this.dbMs + (perf - this.perfAtRequest));
  }
}

export class Dispatcher {
  readonly #db: Db;
  readonly #queue: string;
  /** Given whole alarms when `#history` is on (the claim reads them), as its type asks. */
  readonly #receiver: Receiver<ClaimedAlarm>;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #metrics: LoopMetrics | undefined;
  readonly #leaseMs: number;
  readonly #batchSize: number;
  readonly #concurrency: number;
  /** The delivery slots one owner may hold at once (see ownerShare). */
  readonly #ownerShare: number;
  readonly #pollIntervalMs: number;
  readonly #deliveryTimeoutMs: number;
  readonly #retry: RetryPolicy;
  readonly #random: () => number;
  readonly #recordMode: RecordMode;
  /** Claims lock their rows in a transaction held while they are delivered (`claim: 'transaction'`). */
  readonly #held: boolean;
  /** The open transactions of held claims, each settled once committed or rolled back. */
  readonly #batches = new Set<Promise<void>>();

  /** By claim: the same alarm may be held twice when a lease lapsed under a slow handler, and a
   * lease token is shared by the alarms one claim took. */
  readonly #inFlight = new Map<Claim<ClaimedAlarm>, InFlight>();
  #pending: Outcome[] = objectList();
  /** An outcome decided by a leased claim's delivery: recorded with those that come with it. */
  readonly #toRecord = (outcome: Outcome): void => {
    this.#pending.push(outcome);
    this.#scheduleFlush();
  };
  #recording: Promise<void> | null = null;
  #flushScheduled = false;
  /** The claiming loop: a look claims what is free and sleeps until the next alarm is due. */
  readonly #loop: Loop;
  /** Looks in a row that were due yet claimed nothing (see #look). */
  #emptyClaims = 0;
  #unlisten: (() => Promise<void>) | null = null;
  /** Retry and failure lines: at most 20 of each per 10 s, then a summary (see #logOutcome). */
  readonly #logLimiter: LogLimiter<'retry' | 'failed'>;

  constructor(options: DispatcherOptions) {
    this.#db = options.db;
    this.#queue = options.queue;
    this.#receiver = options.receiver as Receiver<ClaimedAlarm>;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger;
    this.#logLimiter = new LogLimiter(this.#clock);
    this.#metrics = options.metrics;
    this.#leaseMs = options.leaseMs ?? 30_000;
    this.#batchSize = options.batchSize ?? (options.db.kind === 'pglite' ? 100 : 200);
    this.#concurrency = options.concurrency ?? 200;
    this.#ownerShare = ownerShare(this.#concurrency);
    this.#pollIntervalMs = options.pollIntervalMs ?? 1_000;
    this.#deliveryTimeoutMs = options.deliveryTimeoutMs ?? this.#leaseMs;
    this.#retry = options.retry ?? { baseMs: 1_000, maxMs: 3_600_000 };
    this.#random = options.random ?? Math.random;
    this.#held =
      options.history === false && options.claim === 'transaction' && options.db.kind === 'postgres';
    this.#recordMode =
      options.history === false
        ? { history: false, deleteFired: options.deleteFired ?? false, held: this.#held }
        : { history: true, deleteFired: false };
    this.#loop = new Loop({
      name: 'dispatcher',
      errorMessage: 'dispatcher: claim failed; retrying',
      look: () => this.#look(),
      clock: this.#clock,
      logger: this.#logger,
      metrics: this.#metrics,
    });
  }

  /** Deliveries under way now. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /**
   * One pass: claims one batch, delivers it, records the outcomes. Returns how many alarms it
   * claimed. Tests call this directly instead of starting the loop.
   */
  async runOnce(): Promise<number> {
    this.#logSummaries();
    if ((this.#receiver.holdMs?.() ?? 0) > 0) return 0;
    const claims = await this.#claim(
      Math.max(0, Math.min(this.#batchSize, this.#concurrency - this.inFlight)),
    );
    // A held batch ends at its deadline even if a delivery never does: wait for the batch.
    if (!this.#held) await Promise.all(claims.map((c) => this.#inFlight.get(c)?.done));
    await this.#flushAll();
    return claims.length;
  }

  /** Runs the loop until stop(). */
  async start(): Promise<void> {
    if (this.#loop.running) return;
    this.#emptyClaims = 0;
    // The payload names the queue of the alarm that fell due; '' (a listener that reconnected and
    // may have missed some) concerns every queue.
    const listening = this.#db.listen(dueChannel(this.#db.schema), (queue) => {
      if (queue === '' || queue === this.#queue) this.#poke();
    });
    // The loop claims what is due while the LISTEN connection is made (a new connection, tens of
    // milliseconds); once it listens, a look again covers what was written in between.
    this.#loop.start();
    try {
      this.#unlisten = await listening;
    } catch (error) {
      await this.#loop.stop();
      throw error;
    }
    this.#poke();
  }

  /**
   * Stops claiming, lets deliveries under way finish for up to `graceMs`, then aborts the rest
   * and gives their leases back so another worker fires them at once.
   */
  async stop(graceMs = 10_000): Promise<void> {
    await this.#loop.stop();
    await this.#unlisten?.();
    this.#unlisten = null;
    const running = [...this.#inFlight.values()];
    if (running.length > 0) {
      const grace = new AbortController();
      await Promise.race([Promise.all(running.map((f) => f.done)), this.#clock.sleep(graceMs, grace.signal)]);
      grace.abort();
    }
    const left = [...this.#inFlight.values()];
    for (const f of left) {
      f.released = true;
      f.abort.abort();
    }
    await this.#flushAll();
    // A held claim's rows are given back by its transaction, which commits without them.
    if (left.length > 0 && !this.#held) {
      await alarmsRelease(
        this.#db,
        left.map((f) => ({ alarmId: f.claim.alarm.id, leaseToken: f.claim.leaseToken })),
      ).catch((error) =>
        this.#logger.warn({ err: error }, 'could not release leases; they lapse by themselves'),
      );
    }
    this.#logSummaries(true);
  }

  #poke(): void {
    this.#loop.poke();
  }

  /**
   * One look of the loop: claims what the free slots allow and resolves with how long to sleep
   * (0 when the claim came back full: more is due now).
   */
  async #look(): Promise<number> {
    this.#logSummaries();
    // The receiver's target is known to be down: claiming now would only spend retries.
    const holdMs = this.#receiver.holdMs?.() ?? 0;
    if (holdMs > 0) return Math.min(holdMs, this.#pollIntervalMs);
    const free = Math.min(this.#batchSize, this.#concurrency - this.inFlight);
    if (free > 0) {
      const claims = await this.#claim(free);
      if (claims.length === free) return 0;
      this.#emptyClaims = claims.length === 0 ? this.#emptyClaims + 1 : 0;
    }
    let waitMs = free > 0 ? await this.#untilNextDue() : this.#pollIntervalMs;
    // Due, yet nothing to claim: rows held by an open transaction (a batch of this worker's,
    // which pokes the loop when it commits, or another worker's) still look unclaimed. Back
    // off, doubling, rather than asking every 2 ms while they are held.
    if (this.#held && this.#emptyClaims > 0 && waitMs <= 2) {
      waitMs = Math.min(this.#pollIntervalMs, 2 ** this.#emptyClaims);
    }
    return waitMs;
  }

  async #untilNextDue(): Promise<number> {
    const ms = await alarmsNextDueMs(this.#db, this.#queue);
    if (ms === null) return this.#pollIntervalMs;
    // A row another worker is claiming right now still looks unclaimed: do not spin on it.
    return Math.min(this.#pollIntervalMs, Math.max(2, Math.ceil(ms)));
  }

  async #claim(limit: number): Promise<Claim<ClaimedAlarm>[]> {
    if (limit <= 0) return [];
    if (this.#held) return this.#claimHeld(limit);
    const requestedAt = performance.now();
    const history = this.#recordMode.history;
    const held = history ? this.#slotsByOwner() : null;
    // The share holds an owner back only while another owner has something due: slots nobody
    // else wants are not left idle, so a lone owner's burst goes out at the full concurrency.
    const atShare = held ? [...held].filter(([, n]) => n >= this.#ownerShare).map(([owner]) => owner) : [];
    const passOver = atShare.length > 0 && (await this.#othersDue(atShare)) ? atShare : [];
    const claimed = await this.#timed(limit, () =>
      alarmsClaimDue(this.#db, this.#queue, limit, this.#leaseMs, history, passOver),
    );
    let { claims, over } = held ? this.#withinShares(claimed, held) : { claims: claimed, over: [] };
    // A claim short of its limit took everything due outside the owners it passed over.
    if (over.length > 0) {
      const busy = [...passOver, ...new Set(over.map(ownerOf))];
      if (claimed.length < limit || !(await this.#othersDue(busy))) {
        claims = claims.concat(over);
        over = [];
      }
    }
    this.#deliverAll(claims, requestedAt, this.#toRecord);
    if (over.length > 0) {
      await alarmsReleaseUnsent(
        this.#db,
        over.map((c) => ({ alarmId: c.alarm.id, leaseToken: c.leaseToken })),
      ).catch((error) =>
        this.#logger.warn(
          { err: error },
          'could not release claims past an owner’s share; they lapse by themselves',
        ),
      );
    }
    return claims;
  }

  /** Whether an owner other than `owners` has a due alarm nobody holds (a failed look says yes). */
  async #othersDue(owners: readonly string[]): Promise<boolean> {
    return alarmsOthersDue(this.#db, this.#queue, this.#leaseMs, owners).catch(() => true);
  }

  /** The delivery slots each owner holds now (coalesced fires hold none). */
  #slotsByOwner(): Map<string, number> {
    const held = new Map<string, number>();
    for (const f of this.#inFlight.values()) {
      if (f.settled || f.claim.coalesced) continue;
      const owner = ownerOf(f.claim);
      held.set(owner, (held.get(owner) ?? 0) + 1);
    }
    return held;
  }

  /** A claim split into what its owners' shares let start now and what goes back (`over`). */
  #withinShares(
    claimed: Claim<ClaimedAlarm>[],
    held: Map<string, number>,
  ): { claims: Claim<ClaimedAlarm>[]; over: Claim<ClaimedAlarm>[] } {
    const claims: Claim<ClaimedAlarm>[] = [];
    const over: Claim<ClaimedAlarm>[] = [];
    for (const c of claimed) {
      const n = held.get(ownerOf(c)) ?? 0;
      if (c.coalesced || n < this.#ownerShare) {
        if (!c.coalesced) held.set(ownerOf(c), n + 1);
        claims.push(c);
      } else over.push(c);
    }
    return { claims, over };
  }

  /**
   * A claim held by its transaction: the rows are locked, delivered, their outcomes recorded in the
   * same transaction, and the commit lets them go. Resolves with the claims as soon as they are
   * taken; the transaction goes on in `#batches`. Should it fail after the claim (the connection
   * lost, the recording refused), it rolls back and the rows, unchanged, are due again at once.
   */
  #claimHeld(limit: number): Promise<Claim<ClaimedAlarm>[]> {
    return new Promise((resolve, reject) => {
      let claimed = false;
      const batch = this.#db.transaction(async (tx) => {
        const requestedAt = performance.now();
        const claims = await this.#timed(limit, () => alarmsClaimHeld(tx, this.#queue, limit, this.#leaseMs));
        claimed = true;
        const outcomes: Outcome[] = [];
        const flights = this.#deliverAll(claims, requestedAt, (outcome) => outcomes.push(outcome));
        resolve(claims);
        if (flights.length > 0) {
          // The rows stay locked until the commit: a receiver that ignores the batch's deadline
          // must not hold them past it. Those still delivering then count as timed out.
          const { signal } = flights[0]!.abort;
          const late = await Promise.race([
            Promise.all(flights.map((f) => f.done)).then(() => false),
            new Promise<boolean>((resolve) => {
              if (signal.aborted) resolve(true);
              else signal.addEventListener('abort', () => resolve(true), { once: true });
            }),
          ]);
          if (late) for (const f of flights) if (!f.settled && !f.released) outcomes.push(this.#timedOut(f));
        }
        if (outcomes.length === 0) return;
        this.#counted(outcomes, await alarmsRecordOutcomes(tx, outcomes, this.#recordMode));
      });
      const settled: Promise<void> = batch
        .then(
          () => {},
          (error: unknown) => {
            if (!claimed) return reject(error);
            this.#metrics?.loopErrors.inc({ loop: 'recorder' });
            this.#logger.error(
              { err: error },
              'dispatcher: a held batch could not be recorded; it was rolled back and its timers fire again',
            );
          },
        )
        .finally(() => {
          this.#batches.delete(settled);
          this.#poke();
        });
      this.#batches.add(settled);
    });
  }

  /** Runs one claim statement in a span (when tracing), and counts it. */
  async #timed(limit: number, claim: () => Promise<Claim<ClaimedAlarm>[]>): Promise<Claim<ClaimedAlarm>[]> {
    const requestedAt = performance.now();
    const span = tracingOn()
      ? startSpan('chronos.claim', { 'chronos.queue': this.#queue, 'chronos.limit': limit })
      : null;
    let claims: Claim<ClaimedAlarm>[];
    try {
      claims = await claim();
      span?.setAttribute('chronos.claimed', claims.length);
    } finally {
      span?.end();
    }
    this.#metrics?.claimSeconds.observe((performance.now() - requestedAt) / 1000);
    if (claims.length > 0) this.#metrics?.claims.inc(claims.length);
    return claims;
  }

  /** Starts delivering a batch just claimed; each outcome goes to `onOutcome` as it is decided. */
  #deliverAll(
    claims: Claim<ClaimedAlarm>[],
    requestedAt: number,
    onOutcome: (outcome: Outcome) => void,
  ): InFlight[] {
    if (claims.length === 0) return [];
    const tracing = tracingOn();
    const time = new DbTime(claims[0]!.dbNow.getTime(), requestedAt);
    // The batch's deliveries start together, so they share one deadline and one abort signal
    // (an AbortController per delivery costs microseconds a fire). Abort well before the lease
    // lapses, so a hung receiver never outlives it.
    const abort = new AbortController();
    // Each delivery under way may listen on it: no limit to warn about.
    setMaxListeners(0, abort.signal);
    const timer = setTimeout(() => abort.abort(), Math.min(this.#deliveryTimeoutMs, this.#leaseMs * 0.8));
    let left = claims.length;
    const settled = () => {
      if (--left === 0) clearTimeout(timer);
    };
    return claims.map((claim) => this.#begin(claim, time, abort, settled, tracing, onOutcome));
  }

  #begin(
    claim: Claim<ClaimedAlarm>,
    time: DbTime,
    abort: AbortController,
    settled: () => void,
    tracing: boolean,
    onOutcome: (outcome: Outcome) => void,
  ): InFlight {
    const flight: InFlight = {
      claim,
      abort,
      released: false,
      done: ENDED,
      settled: false,
      time,
      startedAt: null,
      latenessMs: 0,
    };
    this.#inFlight.set(claim, flight);
    this.#metrics?.inFlight.set(this.#inFlight.size);
    const attempt = this.#start(flight, time, tracing);
    const { delivery } = attempt;
    if (delivery instanceof Promise) {
      flight.done = delivery
        .then(
          (d) => this.#finish(flight, attempt, d),
          (error: unknown) => this.#finish(flight, attempt, receiverError(error)),
        )
        .then(
          (outcome) => this.#end(flight, outcome, settled, onOutcome),
          () => this.#end(flight, null, settled, onOutcome),
        );
    } else {
      // Answered at once (an in-process handler that returned): finished now, with no promise
      // and no closure (a fire's CPU in a cold worker, bench/README.md "Drain").
      let outcome: Outcome | null = null;
      try {
        outcome = this.#finish(flight, attempt, delivery);
      } finally {
        this.#end(flight, outcome, settled, onOutcome);
      }
    }
    return flight;
  }

  /** A delivery has ended: its outcome (if any) handed on, its slot freed. */
  #end(
    flight: InFlight,
    outcome: Outcome | null,
    settled: () => void,
    onOutcome: (outcome: Outcome) => void,
  ): void {
    if (outcome) onOutcome(outcome);
    flight.settled = true;
    settled();
    this.#inFlight.delete(flight.claim);
    this.#metrics?.inFlight.set(this.#inFlight.size);
    if (this.#inFlight.size === this.#concurrency - 1) this.#poke();
  }

  /** Starts delivering one claim: what was handed to the receiver, and its answer (or the promise of one). */
  #start(flight: InFlight, time: DbTime, tracing: boolean): Attempt {
    const { claim } = flight;
    const startedPerf = performance.now();
    const startedAt = time.at(startedPerf);
    // Counted from the fire's one instant, the wake's fired_at (the claim's now()), so that
    // lateness_ms = fired_at − scheduled_for holds in the body, the log and the stored wake.
    const latenessMs = Math.max(0, claim.dbNow.getTime() - claim.alarm.scheduledFor.getTime());
    flight.startedAt = startedAt;
    flight.latenessMs = latenessMs;
    if (claim.coalesced) return { startedPerf, startedAt, latenessMs, span: null, delivery: 'coalesced' };
    // Claimed past its deadline (the claim's now(), the database clock): never sent (contract §3a).
    if (isExpired(claim.alarm, claim.dbNow)) {
      return { startedPerf, startedAt, latenessMs, span: null, delivery: 'expired' };
    }
    // A child of the span that created the alarm: one trace from the request to the webhook.
    const span = tracing
      ? startSpan(
          'chronos.deliver',
          {
            'chronos.alarm_id': claim.alarm.id,
            'chronos.wake_id': claim.wakeId,
            'chronos.attempt': claim.attempt,
            'chronos.lateness_ms': latenessMs,
            'chronos.trigger': claim.alarm.trigger,
          },
          contextOf(claim.alarm.traceparent),
          SpanKind.PRODUCER,
        )
      : null;
    const fire: Fire<ClaimedAlarm> = {
      alarm: claim.alarm,
      wakeId: claim.wakeId,
      attempt: claim.attempt,
      fireCount: claim.fireCount,
      trigger: claim.alarm.trigger,
      traceparent: (span && traceparentOf(span)) || claim.alarm.traceparent,
      scheduledFor: claim.alarm.scheduledFor,
      firedAt: claim.dbNow,
      latenessMs,
    };
    let delivery: Delivery | Promise<Delivery>;
    try {
      delivery = this.#receiver.deliver(fire, flight.abort.signal);
    } catch (error) {
      delivery = receiverError(error);
    }
    return { startedPerf, startedAt, latenessMs, span, delivery };
  }

  /** Ends one delivery with its answer: its outcome, or null when it was released meanwhile (stop). */
  #finish(flight: InFlight, attempt: Attempt, delivery: Delivery | 'coalesced' | 'expired'): Outcome | null {
    const { startedPerf, startedAt, latenessMs, span } = attempt;
    if (delivery !== 'coalesced' && delivery !== 'expired') {
      this.#metrics?.attemptSeconds.observe(
        { receiver: this.#receiver.name },
        (performance.now() - startedPerf) / 1000,
      );
      if (span) {
        if (delivery.statusCode !== undefined)
          span.setAttribute('http.response.status_code', delivery.statusCode);
        if (!delivery.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: delivery.error });
        span.end();
      }
    }
    if (flight.released) return null;
    const finishedAt = flight.time.at(performance.now());
    const outcome = decideOutcome(
      flight.claim,
      delivery,
      { startedAt, finishedAt, latenessMs },
      this.#retry,
      this.#random,
    );
    if (outcome.result === 'delivered' || outcome.result === 'coalesced') {
      this.#metrics?.lateness.observe(latenessMs / 1000);
    }
    this.#logOutcome(outcome);
    return outcome;
  }

  /**
   * A retry (info) or a failure (warn: a once alarm given up, or a cron occurrence skipped) as a
   * log line with the alarm, wake, attempt, status code and error (never the payload), at most
   * 20 of each per 10 s; the rest are counted, and summarised once their window has ended.
   */
  #logOutcome(outcome: Outcome): void {
    this.#logSummaries();
    if (outcome.result !== 'retry' && outcome.result !== 'failed') return;
    const { write, summary } = this.#logLimiter.admit(outcome.result);
    if (summary) this.#logSummary(summary.kind, summary.suppressed, summary.windowMs);
    if (!write) return;
    const fields = {
      alarmId: outcome.alarmId,
      wakeId: outcome.wakeId,
      attempt: outcome.attempt,
      statusCode: outcome.statusCode,
      error: outcome.lastError,
    };
    if (outcome.result === 'retry') {
      this.#logger.info({ ...fields, retryAt: outcome.nextFireAt }, 'delivery failed; retrying');
    } else if (outcome.status === 'failed') {
      this.#logger.warn(fields, 'delivery failed; the alarm has failed');
    } else {
      this.#logger.warn(
        { ...fields, nextFireAt: outcome.nextFireAt },
        'delivery failed; this occurrence is skipped, the alarm stays active',
      );
    }
  }

  /** Writes the summaries of the rate-limit windows that have ended (all of them with `all`). */
  #logSummaries(all = false): void {
    for (const { kind, suppressed, windowMs } of this.#logLimiter.ended(all)) {
      this.#logSummary(kind, suppressed, windowMs);
    }
  }

  #logSummary(kind: 'retry' | 'failed', suppressed: number, windowMs: number): void {
    const seconds = Math.round(windowMs / 1000);
    if (kind === 'retry') {
      this.#logger.info({ suppressed }, `… and ${suppressed} more delivery retries in the last ${seconds} s`);
    } else {
      this.#logger.warn(
        { suppressed },
        `… and ${suppressed} more delivery failures in the last ${seconds} s`,
      );
    }
  }

  /** Flushes on the next turn of the event loop, so outcomes finishing together share a statement. */
  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => {
      this.#flushScheduled = false;
      void this.#flush();
    });
  }

  /** Writes every pending outcome; one recording at a time, each taking all that waits. */
  #flush(): Promise<void> {
    if (!this.#recording) {
      this.#recording = this.#record().finally(() => {
        this.#recording = null;
        if (this.#pending.length > 0) this.#scheduleFlush();
      });
    }
    return this.#recording;
  }

  /** Resolves once nothing waits to be recorded and no recording is under way. */
  async #flushAll(): Promise<void> {
    while (this.#pending.length > 0 || this.#recording || this.#batches.size > 0) {
      await Promise.all([this.#flush(), ...this.#batches]);
    }
  }

  /** A held delivery still under way at its batch's deadline: given up, a timed-out attempt. */
  #timedOut(flight: InFlight): Outcome {
    flight.released = true;
    const finishedAt = flight.time.at(performance.now());
    const startedAt = flight.startedAt ?? finishedAt;
    const times = { startedAt, finishedAt, latenessMs: flight.latenessMs };
    const outcome = decideOutcome(flight.claim, TIMED_OUT, times, this.#retry, this.#random);
    this.#logOutcome(outcome);
    return outcome;
  }

  /** Counts recorded outcomes; those not updated were fenced out. */
  #counted(outcomes: readonly Outcome[], updated: Set<string>): void {
    for (const outcome of outcomes) {
      const fenced = !updated.has(outcome.alarmId);
      this.#metrics?.deliveries.inc({ outcome: fenced ? 'fenced' : outcome.result });
      if (fenced) {
        this.#logger.info(
          { alarmId: outcome.alarmId, wakeId: outcome.wakeId },
          'outcome not recorded: the alarm was cancelled, rescheduled or reclaimed meanwhile',
        );
      }
    }
  }

  async #record(): Promise<void> {
    let delayMs = 50;
    let failingSince: number | null = null;
    while (this.#pending.length > 0) {
      const batch = this.#pending.splice(0);
      try {
        const updated = await inSpanIf(
          tracingOn(),
          'chronos.record',
          { 'chronos.outcomes': batch.length },
          () => alarmsRecordOutcomes(this.#db, batch, this.#recordMode),
        );
        failingSince = null;
        this.#counted(batch, updated);
      } catch (error) {
        this.#metrics?.loopErrors.inc({ loop: 'recorder' });
        failingSince ??= performance.now();
        // Past the lease the outcomes are moot: the rows are claimable again and will fire again.
        const moot = performance.now() - failingSince > this.#leaseMs;
        this.#logger.error(
          { err: error, outcomes: batch.length, dropped: moot },
          'dispatcher: recording outcomes failed',
        );
        if (moot) continue;
        this.#pending = batch.concat(this.#pending);
        await this.#clock.sleep(delayMs);
        delayMs = Math.min(delayMs * 2, 2_000);
      }
    }
  }
}

/**
 * An empty array made for objects. A `[]` starts out made for small integers and changes kind on
 * its first object; the optimised code that pushes outcomes, shared by every dispatcher of the
 * process, was deoptimised by each new one (V8: "not a Smi"), and the delivery code it is inlined
 * in compiled again (bench/README.md, "Drain"). `#pending` starts this way and is emptied in
 * place (or replaced by a concatenation, also made for objects), never by a new `[]`.
 */
function objectList<T extends object>(): T[] {
  const list: (T | null)[] = [null];
  list.pop();
  return list as T[];
}

/**
 * The delivery slots one owner may hold at once on a dispatcher with history (the router's):
 * a quarter of its concurrency, at least one (50 of the default 200). An owner whose router
 * hangs holds no more than that; the others' wakes are claimed past its due rows.
 */
export function ownerShare(concurrency: number): number {
  return Math.max(1, Math.ceil(concurrency / 4));
}

/** The owner of a claim with history (whose alarm is whole). */
function ownerOf(claim: Claim<ClaimedAlarm>): string {
  return (claim.alarm as Alarm).ownerDid;
}

const TIMED_OUT: Delivery = { ok: false, retryable: true, error: 'delivery timed out' };

/** `fn` in a span when tracing is on; as it is otherwise (no span objects on the hot path). */
function inSpanIf<T>(
  on: boolean,
  name: string,
  attributes: Record<string, number>,
  fn: () => Promise<T>,
): Promise<T> {
  return on ? inSpan(name, attributes, fn) : fn();
}
