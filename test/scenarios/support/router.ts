/**
 * The router stand-in for scenarios: the test suite's Sink (a real HTTP receiver on 127.0.0.1)
 * plus the accounting every scenario reports — per alarm, which deliveries arrived, when, and
 * whether they were answered 2xx.
 *
 * "Early" is judged on one host clock: the sink's receipt time (`Date.now()` in this process)
 * against `scheduled_for` in the body, which the database clock wrote. The database runs on
 * this host, so both are the same clock.
 */
import { Sink, type Responder, type SinkRequest } from '../../support/sink.js';
import type { Db } from '../../../packages/chronos-timers/src/store/driver/db.js';
import { alarmStates, wakesFiredEarly } from './rows.js';
import { spread, type Tally } from './scenario.js';

export interface Receipt {
  type: string;
  wakeId: string;
  /** The `webhook-id` header: the wake id, or `<wake id>:nudge`. */
  webhookId: string;
  alarmId: string;
  ownerDid: string;
  label: string;
  scheduledFor: number;
  firedAt: number;
  attempt: number;
  /** `webhook-timestamp` × 1000: the sending host's clock. */
  timestampMs: number;
  receivedAt: number;
  /** Answered 2xx (the answer was written, not cut off by the client going away). */
  ok: boolean;
  request: SinkRequest;
}

export class Router {
  readonly #parsed = new Map<SinkRequest, Omit<Receipt, 'ok' | 'request'>>();

  private constructor(readonly sink: Sink) {}

  static async start(respond?: Responder): Promise<Router> {
    return new Router(await Sink.start({ respond }));
  }

  url(): string {
    return this.sink.url();
  }

  /** Every request received so far, parsed. */
  receipts(): Receipt[] {
    return this.sink.requests.map((request) => {
      let parsed = this.#parsed.get(request);
      if (!parsed) {
        const body = JSON.parse(request.body) as Record<string, unknown>;
        parsed = {
          type: String(body.type),
          wakeId: String(body.wake_id),
          webhookId: request.headers['webhook-id'] ?? '',
          alarmId: String(body.alarm_id),
          ownerDid: String(body.owner_did),
          label: String(body.label),
          scheduledFor: Date.parse(String(body.scheduled_for)),
          firedAt: Date.parse(String(body.fired_at)),
          attempt: Number(body.attempt),
          timestampMs: Number(request.headers['webhook-timestamp']) * 1000,
          receivedAt: request.receivedAt,
        };
        this.#parsed.set(request, parsed);
      }
      const answer = request.answer;
      const ok = 'status' in answer && answer.status >= 200 && answer.status < 300 && !request.clientGone;
      return { ...parsed, ok, request };
    });
  }

  /** `alarm.fired` receipts answered 2xx, grouped by alarm. */
  deliveredByAlarm(): Map<string, Receipt[]> {
    const byAlarm = new Map<string, Receipt[]>();
    for (const r of this.receipts()) {
      if (r.type !== 'alarm.fired' || !r.ok) continue;
      const list = byAlarm.get(r.alarmId) ?? [];
      list.push(r);
      byAlarm.set(r.alarmId, list);
    }
    return byAlarm;
  }

  /** How many of `ids` have been delivered (answered 2xx) at least once. */
  deliveredCount(ids: Iterable<string>): number {
    const delivered = this.deliveredByAlarm();
    let n = 0;
    for (const id of ids) if (delivered.has(id)) n++;
    return n;
  }

  /**
   * The scenario's figures for `expected` (alarm id → due instant, ms): delivered, lost, failed
   * (visible in the database with a `last_error`), duplicated, early (by the router's receipt and
   * by the wake rows), and lateness of the first 2xx receipt.
   */
  async tally(expected: ReadonlyMap<string, number>, db: Db): Promise<Tally> {
    const delivered = this.deliveredByAlarm();
    const states = await alarmStates(db, [...expected.keys()]);
    let failed = 0;
    let lost = 0;
    let duplicated = 0;
    const lateness: number[] = [];
    for (const [id, due] of expected) {
      const receipts = delivered.get(id);
      if (receipts) {
        const wakes = new Map<string, number>();
        for (const r of receipts) wakes.set(r.wakeId, (wakes.get(r.wakeId) ?? 0) + 1);
        if ([...wakes.values()].some((n) => n > 1)) duplicated++;
        lateness.push(Math.min(...receipts.map((r) => r.receivedAt)) - due);
        continue;
      }
      const state = states.get(id);
      if (state?.status === 'failed' && state.lastError !== '') failed++;
      else lost++;
    }
    const early = this.receipts().filter(
      (r) => r.type === 'alarm.fired' && expected.has(r.alarmId) && r.receivedAt < r.scheduledFor,
    ).length;
    return {
      created: expected.size,
      delivered: expected.size - failed - lost,
      lost,
      failed,
      duplicated,
      early,
      earlyByDatabase: await wakesFiredEarly(db),
      latenessMs: spread(lateness),
    };
  }

  async close(): Promise<void> {
    await this.sink.close();
  }
}
