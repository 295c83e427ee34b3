/**
 * MCP over stdio for one owner, on a service this process opened: the SDK's stdio transport,
 * between two taps that read each message line as it passes — incoming, to note payload texts
 * (exact numbers, I4) and the requests awaiting an answer; outgoing, to see those answered.
 *
 * Serves until the client closes stdin — then answers what it was still working on (for at most
 * `drainMs`) before it closes, so `printf '…' | chronos mcp` gets every answer — or until
 * `signal` aborts (a signal: it stops at once).
 *
 * stdout carries the protocol and nothing else: whoever runs this must log to stderr.
 */
import { Transform, type Readable, type TransformCallback, type Writable } from 'node:stream';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { isJSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import { systemClock, type Clock } from 'chronos-timers/internal';
import type { Owner } from 'chronos-timers/internal';
import { RawPayloads } from './raw-payloads.js';
import { createMcpServer, type McpService } from './server.js';

export interface StdioStreams {
  stdin: Readable;
  stdout: Writable;
}

const DRAIN_MS = 30_000;

export interface StdioServeOptions {
  /** A sentence for the model about this server (which store it opened), added to its instructions. */
  about?: string;
  clock?: Clock;
}

export async function serveStdio(
  service: McpService,
  owner: Owner,
  { stdin, stdout }: StdioStreams,
  signal?: AbortSignal,
  options: StdioServeOptions = {},
): Promise<void> {
  const clock = options.clock ?? systemClock;
  const rawPayloads = new RawPayloads();
  const pending = new PendingRequests();
  const input = new LineTap((line) => {
    const message = parseLine(line);
    rawPayloads.note(line, message);
    pending.received(message);
  });
  const output = new LineTap((line) => pending.answered(parseLine(line)));
  stdin.pipe(input);
  output.pipe(stdout, { end: false });
  const server = createMcpServer(service, owner, { rawPayloads, about: options.about });
  const stopped = new Promise<'signal'>((resolve) => {
    if (signal?.aborted) resolve('signal');
    signal?.addEventListener('abort', () => resolve('signal'), { once: true });
  });
  const ended = new Promise<'end'>((resolve) => {
    input.once('end', () => resolve('end'));
    input.once('close', () => resolve('end'));
  });
  await server.connect(new StdioServerTransport(input, output));
  if ((await Promise.race([ended, stopped])) === 'end') {
    const drainTimer = new AbortController();
    await Promise.race([pending.drained(), stopped, clock.sleep(DRAIN_MS, drainTimer.signal)]);
    drainTimer.abort();
  }
  stdin.unpipe(input);
  await server.close();
  output.end();
}

function parseLine(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined; // the SDK refuses it on its own
  }
}

/** The ids of the JSON-RPC requests received and not yet answered. */
class PendingRequests {
  readonly #ids = new Set<unknown>();
  #waiters: (() => void)[] = [];

  /** Counts what the SDK will answer: valid requests only (it drops what it cannot parse). */
  received(message: unknown): void {
    if (isJSONRPCRequest(message)) this.#ids.add(message.id);
  }

  answered(message: unknown): void {
    const m = message as { id?: unknown } | undefined;
    if (!m || typeof m !== 'object' || !('result' in m || 'error' in m)) return;
    this.#ids.delete(m.id);
    if (this.#ids.size === 0) for (const resolve of this.#waiters.splice(0)) resolve();
  }

  drained(): Promise<void> {
    return this.#ids.size === 0 ? Promise.resolve() : new Promise((resolve) => this.#waiters.push(resolve));
  }
}

/** Passes bytes through unchanged, and calls `onLine` with each complete line as it goes by. */
class LineTap extends Transform {
  #partial = '';

  constructor(private readonly onLine: (line: string) => void) {
    super();
  }

  override _transform(chunk: Buffer | string, _encoding: BufferEncoding, done: TransformCallback): void {
    const lines = (this.#partial + chunk.toString()).split('\n');
    this.#partial = lines.pop()!;
    for (const line of lines) this.onLine(line);
    done(null, chunk);
  }
}
