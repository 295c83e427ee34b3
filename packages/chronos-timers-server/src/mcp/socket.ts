/**
 * MCP on the control socket of the process that holds the embedded store, so that `chronos mcp`
 * processes started while it runs go through it: the embedded store is one process's, and they
 * could not open it themselves (see control/mcp-relay.ts).
 *
 * The exchange is the `/mcp` one (streamable.ts), at `POST /mcp` on the socket. Credentials: an
 * API key in `Authorization: Bearer`, checked as over HTTP; or an owner DID alone in
 * `X-Chronos-Owner` — trusted, as `CHRONOS_OWNER_DID` is by `chronos mcp` on a store it opens,
 * because the socket is reachable only by the store's own OS user, who can open its files anyway.
 * Refusals answer `{code, message}`, as the rest of the control socket does.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { LIMITS } from 'chronos-timers/internal';
import { ChronosError, isChronosError } from 'chronos-timers/internal';
import { Authenticator, OWNER_HEADER } from 'chronos-timers/internal';
import { parseOwner, type Owner } from 'chronos-timers/internal';
import type { ChronosService } from '../service.js';
import type { McpService } from './server.js';
import { answerMcpPost, jsonRpcError, STATELESS_METHODS } from './streamable.js';

export type ControlMcpHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

const STATUS: Partial<Record<string, number>> = {
  unauthorized: 401,
  forbidden: 403,
  invalid_input: 400,
  too_large: 413,
};

export function controlMcpHandler(service: McpService & Pick<ChronosService, 'keys'>): ControlMcpHandler {
  // No operator token here: a DID alone is already trusted on this socket.
  const auth = new Authenticator(service.keys, undefined);
  const logger = service.logger.child({ component: 'mcp', via: 'control-socket' });
  return async (req, res) => {
    let owner: Owner;
    let text: string;
    try {
      owner =
        req.headers.authorization === undefined
          ? parseOwner(req.headers[OWNER_HEADER], 'X-Chronos-Owner')
          : (await auth.authenticate(req.headers)).owner;
      if (req.method !== 'POST') {
        res
          .writeHead(405, { allow: 'POST', 'content-type': 'application/json' })
          .end(jsonRpcError(STATELESS_METHODS));
        return;
      }
      text = await readBody(req);
    } catch (error) {
      if (!isChronosError(error)) throw error;
      res
        .writeHead(STATUS[error.code] ?? 400, { 'content-type': 'application/json' })
        .end(JSON.stringify({ code: error.code, message: error.message }));
      return;
    }
    let value: unknown;
    try {
      value = text === '' ? undefined : JSON.parse(text);
    } catch {
      res
        .writeHead(400, { 'content-type': 'application/json' })
        .end(jsonRpcError('Parse error: not JSON', -32700));
      return;
    }
    await answerMcpPost(service, owner, { req, res, text, value }, logger);
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > LIMITS.bodyBytes) {
      throw new ChronosError('too_large', `body: expected at most ${LIMITS.bodyBytes} bytes (128 KiB)`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
