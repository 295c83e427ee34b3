/**
 * The router's receiver: each fire is one signed JSON POST to `CHRONOS_ROUTER_URL` (contract §6).
 *
 * The body is `{type:"alarm.fired", wake_id, alarm_id, user_id, owner_did, label, kind,
 * conversation_id, wake_message, payload, scheduled_for, fired_at, lateness_ms, attempt,
 * fire_count, require_ack, trigger, instructions}`; `payload` is spliced in as its stored JSON text, so numbers keep every digit (I4).
 * The `webhook-id` is the wake id, the same on every retry of the occurrence: receivers
 * deduplicate on it, because delivery is at-least-once (a worker that dies after the POST and
 * before recording it leaves the wake to be sent again).
 *
 * Connections are kept alive in one undici pool (`connections`, at most 64 by default); the
 * dispatcher keeps up to `concurrency` requests under way, the rest wait in the pool's queue.
 * With `pipelining` above 1, that many requests share a connection, and the pool is that many
 * times smaller: fewer system calls a wake on both sides (bench/README.md, "Webhook delivery").
 * Each attempt is given up after `timeoutMs`, and earlier when the dispatcher aborts it before
 * its lease would lapse.
 *
 * **Holding during an outage.** From the first attempt that finds the router unreachable (no
 * connection at all: refused, no such host, connect timeout; `holdAfter`, default 1), the
 * receiver asks the dispatcher to stop claiming (`holdMs()`) and probes the router with a bare TCP connect, after
 * 250 ms and then backing off to `probeMaxMs`. Wakes due meanwhile stay in the table, unclaimed
 * and unattempted, so an outage makes them late instead of spending their `max_failures`; the
 * first probe that connects (or any answer from the router) resumes deliveries. The attempts that
 * found it unreachable, and those of a batch already under way, do not count against the wakes'
 * `max_failures` either (see dispatch/outcome.ts). Answers of any status, timeouts and broken
 * connections do not hold anything: those failures count as usual.
 */
import { connect } from 'node:net';
import type { Agent } from 'undici';
import { systemClock, type Clock } from 'chronos-timers/internal';
import { silentLogger, type Logger } from 'chronos-timers/internal';
import type { Metrics } from '../metrics.js';
import { createDeliveryAgent, postSigned, type SignedDelivery } from './http-post.js';
import type { Delivery, Fire, Receiver } from 'chronos-timers/internal';
import { resultClass } from './result-class.js';
import { wakeBody } from './wake-body.js';

export interface WebhookReceiverOptions {
  url: string;
  /** `whsec_…`: one, or two during a rotation (both signatures are sent). */
  secrets: readonly string[];
  /** Per attempt (`CHRONOS_DELIVERY_TIMEOUT`). */
  timeoutMs: number;
  /** Requests to the router under way at once (the dispatcher's concurrency). */
  concurrency: number;
  /**
   * Keep-alive connections to the router (default: `concurrency / pipelining`, at most 64);
   * requests beyond them wait in the pool's queue, their timeout running.
   */
  connections?: number;
  /**
   * Requests sent on one connection before their answers come back (HTTP/1.1 pipelining,
   * `CHRONOS_ROUTER_PIPELINING`; default 1, none). The router answers them in order, so a slow
   * answer holds up those behind it on its connection; each is still cut at `timeoutMs`.
   */
  pipelining?: number;
  clock?: Clock;
  metrics?: Metrics;
  logger?: Logger;
  /** Unreachable attempts in a row after which deliveries are held (default 1). */
  holdAfter?: number;
  /** The longest wait between two probes of an unreachable router (default 5 s). */
  probeMaxMs?: number;
}

const FIRST_PROBE_MS = 250;

export class WebhookReceiver implements Receiver {
  readonly name = 'webhook';
  readonly #options: WebhookReceiverOptions;
  readonly #agent: Agent;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #target: { host: string; port: number };
  #unreachableInARow = 0;
  #held = false;
  #probeDelayMs = FIRST_PROBE_MS;
  #nextProbeAt = 0;
  #probing: Promise<boolean> | null = null;

  constructor(options: WebhookReceiverOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger;
    const pipelining = Math.max(1, options.pipelining ?? 1);
    const connections = options.connections ?? Math.min(Math.ceil(options.concurrency / pipelining), 64);
    this.#agent = createDeliveryAgent({ connections: Math.max(1, connections), pipelining });
    const url = new URL(options.url);
    this.#target = {
      host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
    };
  }

  async deliver(fire: Fire, signal: AbortSignal): Promise<Delivery> {
    const started = performance.now();
    let delivery: SignedDelivery;
    try {
      delivery = await postSigned({
        url: this.#options.url,
        msgId: fire.wakeId,
        body: wakeBody(fire),
        // The trace of the request that created the alarm continues at the router.
        headers: fire.traceparent ? { traceparent: fire.traceparent } : undefined,
        secrets: this.#options.secrets,
        timeoutMs: this.#options.timeoutMs,
        signal,
        target: 'router',
        dispatcher: this.#agent,
        now: () => this.#clock.now().getTime(),
      });
    } catch (error) {
      // postSigned does not throw; building the body could only fail on a corrupt row.
      const text = `webhook not sent: ${(error as Error).message}`;
      delivery = { ok: false, retryable: true, error: text, kind: 'connection' };
    }
    this.#options.metrics?.webhookAttemptSeconds.observe(
      { result: resultClass(delivery) },
      (performance.now() - started) / 1000,
    );
    this.#observe(delivery);
    return delivery;
  }

  /** Milliseconds the dispatcher should wait before claiming: 0 unless the router is down. */
  holdMs(): number {
    if (!this.#held) return 0;
    const now = this.#clock.now().getTime();
    if (!this.#probing && now >= this.#nextProbeAt) void this.probe();
    return this.#probing ? 50 : Math.max(1, this.#nextProbeAt - now);
  }

  /** True while deliveries are held because the router cannot be reached. */
  get held(): boolean {
    return this.#held;
  }

  /**
   * Tries to connect to the router now; when it connects, held deliveries resume. The dispatcher
   * triggers this through `holdMs()`; tests call it directly instead of waiting.
   */
  probe(): Promise<boolean> {
    this.#probing ??= this.#canConnect().then((ok) => {
      this.#probing = null;
      if (ok) {
        this.#resume();
      } else {
        this.#nextProbeAt = this.#clock.now().getTime() + this.#probeDelayMs;
        this.#probeDelayMs = Math.min(this.#probeDelayMs * 2, this.#options.probeMaxMs ?? 5_000);
      }
      return ok;
    });
    return this.#probing;
  }

  /** Closes the kept-alive connections; requests still under way are cut off. */
  async close(): Promise<void> {
    await this.#agent.destroy().catch(() => undefined);
  }

  #observe(delivery: SignedDelivery): void {
    if (delivery.kind === 'answered') {
      this.#unreachableInARow = 0;
      if (this.#held) this.#resume();
      return;
    }
    if (delivery.kind !== 'unreachable') return;
    this.#unreachableInARow++;
    if (!this.#held && this.#unreachableInARow >= (this.#options.holdAfter ?? 1)) {
      this.#held = true;
      this.#probeDelayMs = FIRST_PROBE_MS;
      this.#nextProbeAt = this.#clock.now().getTime() + this.#probeDelayMs;
      this.#options.metrics?.routerHeld.set(1);
      this.#logger.warn(
        { error: delivery.ok ? '' : delivery.error, unreachableInARow: this.#unreachableInARow },
        'router unreachable: holding deliveries until it accepts connections again',
      );
    }
  }

  #resume(): void {
    if (!this.#held) return;
    this.#held = false;
    this.#unreachableInARow = 0;
    this.#options.metrics?.routerHeld.set(0);
    this.#logger.info('router reachable again: resuming deliveries');
  }

  #canConnect(): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = connect({ ...this.#target, timeout: Math.min(this.#options.timeoutMs, 5_000) });
      const done = (ok: boolean) => {
        socket.destroy();
        resolve(ok);
      };
      socket.once('connect', () => done(true));
      socket.once('timeout', () => done(false));
      socket.once('error', () => done(false));
    });
  }
}
