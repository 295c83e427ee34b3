/**
 * The `payload` of a tool call as the client wrote it, so that its numbers reach the database
 * digit for digit (I4): the SDK parses every message with JSON.parse, which rounds integers past
 * 2^53 and long decimals. A transport notes each message text it receives; a tool takes the
 * raw `arguments.payload` of its own request by the request's JSON-RPC id.
 *
 * Only single-message texts are read (batches are no longer part of MCP); anything else is
 * ignored, and the tool falls back to the parsed payload. The raw text is used only when it
 * parses to the payload the tool was given, so a mismatch can never store something else.
 */
import { rawMember } from 'chronos-timers/internal';

const MAX_ENTRIES = 64;

export class RawPayloads {
  readonly #byId = new Map<string, string>();

  /** Notes the raw payload of `text` (parsed: `message`) when it is a `tools/call` request that has one. */
  note(text: string, message: unknown): void {
    const m = message as { method?: unknown; id?: unknown; params?: { arguments?: { payload?: unknown } } };
    if (typeof m !== 'object' || m === null || Array.isArray(m) || m.method !== 'tools/call') return;
    if (m.params?.arguments?.payload === undefined) return;
    if (typeof m.id !== 'string' && typeof m.id !== 'number') return;
    const payload = rawMember(rawMember(rawMember(text, 'params')!, 'arguments')!, 'payload');
    if (payload === undefined) return;
    // A request that never reaches its tool (an unknown tool name) leaves its entry behind.
    if (this.#byId.size >= MAX_ENTRIES) this.#byId.delete(this.#byId.keys().next().value!);
    this.#byId.set(keyOf(m.id), payload);
  }

  /** The raw payload of request `id`, when it parses to `parsed`; forgets it either way. */
  take(id: string | number, parsed: unknown): string | undefined {
    const key = keyOf(id);
    const raw = this.#byId.get(key);
    this.#byId.delete(key);
    if (raw === undefined) return undefined;
    return JSON.stringify(JSON.parse(raw)) === JSON.stringify(parsed) ? raw : undefined;
  }
}

// JSON-RPC ids are strings or numbers, and "1" is not 1.
function keyOf(id: unknown): string {
  return `${typeof id}:${String(id)}`;
}
