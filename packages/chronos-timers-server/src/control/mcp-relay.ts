/**
 * `chronos mcp` through the process that holds the embedded store (a running `chronos serve`):
 * the embedded store is one process's, so instead of opening it, `chronos mcp` relays its stdio
 * to that process's control socket, `POST /mcp` (control.ts), one JSON-RPC message per request.
 *
 * The relay passes message texts through untouched — no parse and re-serialise, so a payload's
 * numbers arrive exact — and learns the protocol version from the `initialize` answer, sending
 * it on later requests as a Streamable HTTP client does. Credentials are checked once at start
 * (a ping), so a bad key stops `chronos mcp` with one clear line instead of failing every call.
 * If the server stops later, each request is answered with a JSON-RPC error saying so, and the
 * relay carries on: calls work again once the server is back.
 */
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { Client } from 'undici';
import { ChronosError, type ErrorCode } from 'chronos-timers/internal';
import type { Logger } from 'chronos-timers/internal';

export interface RelayOptions {
  socketPath: string;
  /** Where the server answers MCP on its socket (`/mcp`). */
  path: string;
  /** The server's pid, for messages. */
  holderPid: number;
  /** Which store the key must come from, for the refusal of an unknown key (`keyStoreHint`). */
  keyHint?: string;
  /** `authorization` and/or `x-chronos-owner`. */
  credentials: Record<string, string>;
  stdin: Readable;
  stdout: Writable;
  logger: Logger;
  signal?: AbortSignal;
}

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

export async function relayStdio(options: RelayOptions): Promise<void> {
  const { stdin, stdout, logger } = options;
  const socket = new Client('http://chronos.local', { socketPath: options.socketPath });
  let protocolVersion: string | undefined;

  const post = async (body: string) => {
    const response = await socket.request({
      path: options.path,
      method: 'POST',
      headers: {
        ...JSON_HEADERS,
        ...options.credentials,
        ...(protocolVersion && { 'mcp-protocol-version': protocolVersion }),
      },
      body,
    });
    return { status: response.statusCode, text: await response.body.text() };
  };
  const unreachable = (error: unknown) =>
    `the Chronos server (process ${options.holderPid}) that holds the embedded store does not answer on its ` +
    `control socket ${options.socketPath} (${(error as Error).message}); start it again with \`chronos serve\``;

  const forward = async (line: string): Promise<void> => {
    let id: unknown = null;
    let initialize = false;
    try {
      const message = JSON.parse(line) as { id?: unknown; method?: unknown };
      id = message.id ?? null;
      initialize = message.method === 'initialize';
    } catch {
      // Sent on as it is: the server answers a parse error.
    }
    let problem: string;
    try {
      const { status, text } = await post(line);
      if (status === 202) return;
      if (status === 200) {
        if (initialize) protocolVersion = versionOf(text) ?? protocolVersion;
        // JSON has newlines only as whitespace (inside strings they are escaped): one line out.
        stdout.write(`${text.replace(/[\r\n]+/g, '')}\n`);
        return;
      }
      problem = messageOf(text) ?? `the server answered ${status}`;
    } catch (error) {
      problem = unreachable(error);
    }
    logger.error({ problem }, 'MCP request refused by the Chronos server');
    if (id !== null) {
      stdout.write(`${JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32000, message: problem } })}\n`);
    }
  };

  try {
    let preflight: { status: number; text: string };
    try {
      preflight = await post('{"jsonrpc":"2.0","id":"chronos-preflight","method":"ping"}');
    } catch (error) {
      throw new ChronosError('unavailable', unreachable(error), { cause: error });
    }
    if (preflight.status !== 200) throw refusal(preflight.status, preflight.text, options.keyHint);
    const pending = new Set<Promise<void>>();
    const lines = createInterface({ input: stdin, crlfDelay: Infinity });
    options.signal?.addEventListener('abort', () => lines.close(), { once: true });
    for await (const line of lines) {
      if (line.trim() === '') continue;
      const sent = forward(line).finally(() => pending.delete(sent));
      pending.add(sent);
    }
    await Promise.all(pending);
  } finally {
    await socket.close();
  }
}

function parse(text: string): Record<string, any> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? (value as Record<string, any>) : undefined;
  } catch {
    return undefined;
  }
}

function versionOf(text: string): string | undefined {
  const version = parse(text)?.result?.protocolVersion;
  return typeof version === 'string' ? version : undefined;
}

/** The message of a control-socket refusal `{code, message}` or of a JSON-RPC error. */
function messageOf(text: string): string | undefined {
  const body = parse(text);
  const message = body?.message ?? body?.error?.message;
  return typeof message === 'string' ? message : undefined;
}

/** The server's refusal of our credentials, in the words of the variables that gave them. */
function refusal(status: number, text: string, keyHint: string | undefined): ChronosError {
  const code = parse(text)?.code;
  const message = messageOf(text) ?? `the server refused with status ${status}`;
  switch (code) {
    case 'unauthorized':
      return new ChronosError(
        code,
        'CHRONOS_API_KEY: the API key is unknown or revoked; create one with `chronos keys create --owner <did>` ' +
          `(it works while the server runs)${keyHint ? `; ${keyHint}` : ''}`,
      );
    case 'forbidden':
      return new ChronosError(
        code,
        'CHRONOS_OWNER_DID names another owner than the one CHRONOS_API_KEY belongs to; set only one of them',
      );
    case 'invalid_input':
      return new ChronosError(code, message.replace(/^X-Chronos-Owner/, 'CHRONOS_OWNER_DID'));
    default:
      return new ChronosError((typeof code === 'string' ? code : 'unavailable') as ErrorCode, message);
  }
}
