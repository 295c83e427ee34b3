/**
 * What the tracker's sending stages share: the webhook client that signs and posts their
 * messages to the router or the fallback URL, and the settings every claim-send-record round
 * reads (the batch, the lease, the backoff).
 */
import type { Agent } from 'undici';
import type { Clock } from 'chronos-timers/internal';
import type { RetryPolicy } from 'chronos-timers/internal';
import type { Logger } from 'chronos-timers/internal';
import type { Metrics } from '../metrics.js';
import type { postSigned, SignedDelivery } from '../receivers/http-post.js';
import type { Db } from 'chronos-timers/internal';

export interface SenderOptions {
  /** `whsec_…` secrets signing every message, as for fires. */
  secrets: readonly string[];
  /** One send is given up after this long (and always before its lease lapses). */
  timeoutMs: number;
  leaseMs: number;
  clock: Clock;
}

/**
 * Signed POSTs over kept-alive connections, and the signal that aborts those under way (the
 * tracker's stop() after its grace period).
 */
export class Sender {
  readonly #options: SenderOptions;
  /**
   * The webhook client and its keep-alive connections to the router and the fallback URL, loaded
   * at the first send (a tracker that never sends never loads it); closed by close().
   */
  #http: Promise<{ post: typeof postSigned; agent: Agent }> | null = null;
  #sends = new AbortController();

  constructor(options: SenderOptions) {
    this.#options = options;
  }

  /** Aborts the sends under way when the tracker gives them up. */
  get signal(): AbortSignal {
    return this.#sends.signal;
  }

  /** A fresh signal for a tracker (re)started. */
  rearm(): void {
    this.#sends = new AbortController();
  }

  /** Aborts every send under way; each is recorded as failed, to be sent again. */
  abort(): void {
    this.#sends.abort();
  }

  /** One signed POST; never throws. */
  async post(
    url: string,
    target: 'router' | 'fallback',
    msgId: string,
    body: string,
    signal: AbortSignal,
    headers?: Record<string, string>,
  ): Promise<SignedDelivery> {
    const { secrets, timeoutMs, leaseMs, clock } = this.#options;
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
      secrets,
      // Given up well before the lease lapses, so a hung receiver never lets a second tracker in.
      timeoutMs: Math.min(timeoutMs, Math.max(1, Math.floor(leaseMs * 0.8))),
      signal,
      target,
      dispatcher: agent,
      now: () => clock.now().getTime(),
    });
  }

  /** Closes the kept-alive connections. */
  async close(): Promise<void> {
    const http = await this.#http;
    await http?.agent.destroy().catch(() => undefined);
  }
}

/** What a sending stage works with. */
export interface SendContext {
  db: Db;
  sender: Sender;
  /** Rows claimed per stage and statement. */
  batchSize: number;
  /** How long a claimed row is held before another tracker may send it. */
  leaseMs: number;
  /** Backoff between sends that failed. */
  retry: RetryPolicy;
  random: () => number;
  logger: Logger;
  metrics: Metrics | undefined;
}
