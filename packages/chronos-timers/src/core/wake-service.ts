/**
 * Wakes as every door sees them (contract §7): list an owner's wakes, acknowledge one with a
 * note, and acknowledge by a reply the router reports in a conversation.
 *
 * Each acknowledgement happens once, whatever the number of instances or repeated requests (a
 * conditional UPDATE decides), and only then are the `onAcknowledged` hooks called — with the
 * wakes this call acknowledged. A hook is a prompt trigger, not a durable outbox: it runs after
 * the commit, is not awaited by the caller, and a hook that fails is logged, not retried.
 */
import { ChronosError, Described, invalidInput, notFound } from '../errors.js';
import { silentLogger, type Logger } from '../logger.js';
import type { Executor } from '../store/driver/db.js';
import { wakesAck, wakesAckByReply, wakesAttempts, wakesGet, wakesList } from '../store/wakes.js';
import type { Wake, WakeAttempt, WakeStatus } from '../types.js';
import { idInMessage, isUuid, type Owner } from './owner.js';
import { timePage, type Page, type PageRequest } from './page.js';
import { codePoints, isStorable, STORABLE_EXPECTED } from './text.js';

export const NOTE_MAX_CHARS = 2_000;
export const NOTE_EXPECTED =
  'a non-empty note saying what was done about the wake, e.g. "build checked, all green"';

/** Which of the wakes a list reads (wire/list-query.ts reads a caller's query into one). */
export interface WakeListFilter extends PageRequest {
  status?: WakeStatus;
  alarmId?: string;
  conversationId?: string;
  requireAck?: boolean;
}

export type AcknowledgedHook = (wakes: Wake[]) => void | Promise<void>;

export interface WakeServiceOptions {
  db: Executor;
  /** A reply acknowledges wakes fired (or nudged) at most this long before it. */
  replyWindowMs: number;
  logger?: Logger;
}

export class WakeService {
  readonly #db: Executor;
  readonly #replyWindowMs: number;
  readonly #logger: Logger;
  readonly #hooks = new Set<AcknowledgedHook>();

  constructor(options: WakeServiceOptions) {
    this.#db = options.db;
    this.#replyWindowMs = options.replyWindowMs;
    this.#logger = options.logger ?? silentLogger;
  }

  /** Calls `hook` with the wakes each ack or reply acknowledged (never empty). Returns the removal. */
  onAcknowledged(hook: AcknowledgedHook): () => void {
    this.#hooks.add(hook);
    return () => this.#hooks.delete(hook);
  }

  /**
   * One page of the owner's wakes (every owner's when `owner` is null: the operator's view),
   * newest first; the filters combine.
   */
  async list(owner: Owner | null, filter: WakeListFilter): Promise<Page<Wake>> {
    const { status, alarmId, conversationId, requireAck } = filter;
    // An alarm id that is no UUID names no alarm: an empty page, as for another owner's.
    if (alarmId !== undefined && !isUuid(alarmId)) return { items: [], nextCursor: null };
    return timePage(
      filter,
      (limit, after) =>
        wakesList(this.#db, owner?.did ?? null, {
          status,
          alarmId,
          conversationId,
          requireAck,
          limit,
          after,
        }),
      (r) => r.wake,
    );
  }

  /** Every delivery attempt of one of the owner's wakes, oldest first. */
  async attempts(owner: Owner, id: string): Promise<WakeAttempt[]> {
    const attempts = isUuid(id) ? await wakesAttempts(this.#db, owner.did, id) : null;
    if (!attempts) throw notFound(`wake ${idInMessage(id)}`);
    return attempts;
  }

  async get(owner: Owner, id: string): Promise<Wake> {
    const wake = isUuid(id) ? await wakesGet(this.#db, owner.did, id) : null;
    if (!wake) throw notFound(`wake ${idInMessage(id)}`);
    return wake;
  }

  /**
   * Acknowledges one wake with a note. Acknowledging it again answers the wake as it is (the
   * first note stays); a wake whose delivery failed cannot be acknowledged (`conflict`).
   */
  async ack(owner: Owner, id: string, note: string): Promise<Wake> {
    const text = checkNote(note);
    if (!isUuid(id)) throw notFound(`wake ${idInMessage(id)}`);
    const acked = await wakesAck(this.#db, owner.did, id, text);
    if (acked) {
      this.#announce([acked]);
      return acked;
    }
    const wake = await this.get(owner, id);
    if (wake.status === 'acknowledged') return wake;
    throw new ChronosError(
      'conflict',
      `wake ${wake.id} is ${wake.status}: its delivery gave up, so there is nothing to acknowledge; see the alarm's last_error`,
    );
  }

  /**
   * The router reports that the agent replied in `conversationId`: acknowledges (inferred) the
   * owner's pending or delivered wakes there whose fire or nudge was within the reply window.
   */
  async reportReply(owner: Owner, conversationId: string): Promise<Wake[]> {
    if (conversationId === '' || codePoints(conversationId) > 200 || !isStorable(conversationId)) {
      throw invalidInput(
        'conversation_id',
        `a conversation id of 1 to 200 characters of ${STORABLE_EXPECTED}`,
        conversationId,
      );
    }
    if (conversationId.includes('\u0000')) {
      throw invalidInput(
        'conversation_id',
        'a conversation id without NUL characters (U+0000, %00)',
        conversationId,
      );
    }
    const acked = await wakesAckByReply(this.#db, owner.did, conversationId, this.#replyWindowMs);
    if (acked.length > 0) this.#announce(acked);
    return acked;
  }

  #announce(wakes: Wake[]): void {
    for (const hook of this.#hooks) {
      Promise.resolve()
        .then(() => hook(wakes))
        .catch((error: unknown) =>
          this.#logger.error(
            { err: error, wakeIds: wakes.map((w) => w.id) },
            'onAcknowledged hook failed; the wakes stay acknowledged',
          ),
        );
    }
  }
}

/** The note, trimmed: not empty, storable, at most NOTE_MAX_CHARS characters. */
function checkNote(note: string): string {
  const text = note.trim();
  if (text === '') throw invalidInput('note', NOTE_EXPECTED, note);
  if (!isStorable(text) || codePoints(text) > NOTE_MAX_CHARS) {
    throw invalidInput(
      'note',
      `text of 1 to ${NOTE_MAX_CHARS} characters`,
      new Described(`${codePoints(text)} characters`),
    );
  }
  return text;
}
