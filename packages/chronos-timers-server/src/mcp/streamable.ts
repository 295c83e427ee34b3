/**
 * One Streamable HTTP exchange: a POSTed JSON-RPC message answered by a fresh McpServer and
 * transport for the authenticated owner, both closed when the answer has been sent. Used by the
 * API's `/mcp` route and by the control socket of a server that holds the embedded store.
 *
 * Nothing is shared between requests (the SDK's guidance since its cross-client data leak
 * advisory), so no client can ever receive another's answer, and any instance can serve any
 * request. Answers are JSON rather than SSE streams: no tool sends progress.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Owner } from 'chronos-timers/internal';
import { RawPayloads } from './raw-payloads.js';
import type { McpService } from './server.js';

/**
 * The MCP SDK and the tools, loaded at the first exchange rather than when a server starts (they
 * are much of what `chronos serve` would otherwise load before it is ready; bench/README.md,
 * "Embedded store start"), and kept.
 */
let mcp: Promise<{
  StreamableHTTPServerTransport: typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js').StreamableHTTPServerTransport;
  createMcpServer: typeof import('./server.js').createMcpServer;
}> | null = null;
const loadMcp = () =>
  (mcp ??= Promise.all([
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    import('./server.js'),
  ]).then(([{ StreamableHTTPServerTransport }, { createMcpServer }]) => ({
    StreamableHTTPServerTransport,
    createMcpServer,
  })));

/** Where MCP is served: on the API's port, and on the embedded store's control socket. */
export const MCP_PATH = '/mcp';

export interface McpExchange {
  req: IncomingMessage;
  res: ServerResponse;
  /** The request body as sent, and parsed (undefined when empty). */
  text: string;
  value: unknown;
  /** The W3C traceparent of the HTTP request, when it is traced. */
  trace?: string;
}

export async function answerMcpPost(
  service: McpService,
  owner: Owner,
  { req, res, text, value, trace }: McpExchange,
  logger: { error(details: object, message: string): void },
): Promise<void> {
  const { StreamableHTTPServerTransport, createMcpServer } = await loadMcp();
  const rawPayloads = new RawPayloads();
  rawPayloads.note(text, value);
  const server = createMcpServer(service, owner, { rawPayloads, trace });
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  res.on('close', () => void server.close());
  try {
    await server.connect(transport);
    // An empty body reaches the transport as null: refused as "not a JSON-RPC message".
    await transport.handleRequest(req, res, value ?? null);
  } catch (error) {
    logger.error({ err: error }, 'MCP request failed with an unexpected error');
    if (!res.headersSent) {
      res
        .writeHead(500, { 'content-type': 'application/json' })
        .end(jsonRpcError('Internal error; it has been logged', -32603));
    }
  }
}

/** A JSON-RPC error answer that belongs to no request (`id: null`). */
export function jsonRpcError(message: string, code = -32000): string {
  return JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null });
}

export const STATELESS_METHODS =
  'Method not allowed: this MCP endpoint is stateless (no session, no stream); send every JSON-RPC message as a POST';
