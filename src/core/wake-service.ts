/**
 * Wakes as every surface sees them (contract §7): list an owner's wakes, acknowledge one with a
 * note, and acknowledge by a reply the router reports in a conversation.
 *
 * Each acknowledgement happens once, whatever the number of instances or repeated requests (a
 * conditional UPDATE decides), and only then are the `onAcknowledged` hooks called — with the
 * wakes this call acknowledged. A hook is a prompt trigger, not a durable outbox: it runs after
 * the commit, is not awaited by the caller, and a hook that fails is logged, not retried.
 */
import { z } from 'zod';
import { parseLimit } from './alarm-service.js';
import { ChronosError, describeValue, invalidFields, invalidInput, notFound } from '../errors.js';
import { silentLogger, type Logger } from '../logger.js';
import { isUuid, type Owner } from './owner.js';
import type { Executor } from '../store/db.js';
import { wakesAck, wakesAckByReply, wakesGet, wakesList, type WakeCursor } from '../store/wakes.js';
import type { Page, Wake, WakeStatus } from '../types.js';

export const WAKE_STATUSES: readonly WakeStatus[] = ['pending', 'delivered', 'acknowledged', 'failed'];
export const NOTE_MAX_CHARS = 2_000;

/** The body of `POST /v1/wakes/{id}/ack`. */
export const ackWakeSchema = z.strictObject({
  note: z
    .string()
    .describe(
      `What was done about the wake, in a few words (1 to ${NOTE_MAX_CHARS} characters), e.g. "build checked, all green".`,
    ),
});

/** The body of `POST /v1/conversations/{conversation_id}/replies`: nothing yet. */
export const replySchema = z.strictObject({});

const NOTE_EXPECTED = 'a non-empty note saying what was done about the wake, e.g. "build checked, all green"';

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

  async list(
    owner: Owner,
    query: { status?: unknown; limit?: unknown; cursor?: unknown },
  ): Promise<Page<Wake>> {
    const status = parseWakeStatus(query.status);
    const limit = parseLimit(query.limit);
    const after = parseWakeCursor(query.cursor);
    const rows = await wakesList(this.#db, owner.did, { status, limit: limit + 1, after });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      items: page.map((r) => r.wake),
      nextCursor: rows.length > limit && last ? encodeWakeCursor(last.cursor) : null,
    };
  }

  async get(owner: Owner, id: string): Promise<Wake> {
    const wake = isUuid(id) ? await wakesGet(this.#db, owner.did, id) : null;
    if (!wake) throw notFound(`wake ${JSON.stringify(id)}`);
    return wake;
  }

  /**
   * Acknowledges one wake with a note. Acknowledging it again answers the wake as it is (the
   * first note stays); a wake whose delivery failed cannot be acknowledged (`conflict`).
   */
  async ack(owner: Owner, id: string, body: unknown): Promise<Wake> {
    const note = parseNote(body);
    if (!isUuid(id)) throw notFound(`wake ${JSON.stringify(id)}`);
    const acked = await wakesAck(this.#db, owner.did, id, note);
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
  async reportReply(owner: Owner, conversationId: string, body: unknown = {}): Promise<Wake[]> {
    parseReplyBody(body);
    if (conversationId === '' || [...conversationId].length > 200) {
      throw invalidInput('conversation_id', 'a conversation id of 1 to 200 characters', conversationId);
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

function parseNote(body: unknown): string {
  const parsed = parseSmallBody(ackWakeSchema, body, 'note');
  const note = parsed.note.trim();
  if (note === '') {
    throw invalidInput('note', NOTE_EXPECTED, parsed.note);
  }
  if (!note.isWellFormed() || note.includes('\u0000') || [...note].length > NOTE_MAX_CHARS) {
    throw invalidInput('note', `text of 1 to ${NOTE_MAX_CHARS} characters`, `${[...note].length} characters`);
  }
  return note;
}

function parseReplyBody(body: unknown): void {
  if (body === undefined || body === null) return;
  parseSmallBody(replySchema, body, '');
}

/** Shape errors as `path: expected X, got Y`, and unknown fields named with what to send. */
function parseSmallBody<S extends z.ZodObject>(schema: S, body: unknown, fields: string): z.infer<S> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalidFields([
      {
        path: '',
        message: `body: expected a JSON object${fields ? ` like {"${fields}": "…"}` : ' ({})'}, got ${describeValue(body)}`,
      },
    ]);
  }
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  throw invalidFields(
    result.error.issues.flatMap((issue) => {
      if (issue.code === 'unrecognized_keys') {
        return issue.keys.map((key) => ({
          path: key,
          message: `${key}: unknown field; send ${fields ? `only "${fields}"` : 'an empty object {}'}`,
        }));
      }
      const path = issue.path.map(String).join('.');
      const got = path === '' ? body : (body as Record<string, unknown>)[path];
      const expected = path === 'note' ? NOTE_EXPECTED : 'a string';
      return [{ path, message: `${path}: expected ${expected}, got ${describeValue(got)}` }];
    }),
  );
}

function parseWakeStatus(value: unknown): WakeStatus | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value === 'string' && (WAKE_STATUSES as readonly string[]).includes(value)) {
    return value as WakeStatus;
  }
  throw invalidInput('status', `one of ${WAKE_STATUSES.join(', ')}`, value);
}

function encodeWakeCursor(cursor: WakeCursor): string {
  return Buffer.from(`${cursor.createdUs}.${cursor.id}`).toString('base64url');
}

function parseWakeCursor(value: unknown): WakeCursor | undefined {
  if (value === undefined || value === '' || value === null) return undefined;
  const text = typeof value === 'string' ? Buffer.from(value, 'base64url').toString() : '';
  const match = /^(\d{1,19})\.(.+)$/.exec(text);
  if (!match || !isUuid(match[2])) {
    throw invalidInput('cursor', 'the next_cursor of a previous page', value);
  }
  return { createdUs: match[1]!, id: match[2] };
}
