/**
 * MCP over Streamable HTTP at `/mcp`, on the API's own Fastify app and with its authentication:
 * `Authorization: Bearer <api key>`, or the operator token with `X-Chronos-Owner`. A request
 * without valid credentials is refused (401, a problem body) before any MCP handling.
 *
 * Stateless: every POST is answered by a fresh server and transport (streamable.ts). With no
 * session there is no stream to GET and nothing to DELETE: both answer 405, as in the SDK's
 * stateless example. Bodies are read by the app (at most 128 KiB, 413 beyond).
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Authenticator } from '../core/authenticator.js';
import { callerOf } from '../http/context.js';
import { bodyOf } from '../http/json-body.js';
import type { McpService } from './server.js';
import { answerMcpPost, jsonRpcError, MCP_PATH, STATELESS_METHODS } from './streamable.js';

export function registerMcpRoute(app: FastifyInstance, service: McpService, auth: Authenticator): void {
  app.route({
    method: ['POST', 'GET', 'DELETE'],
    url: MCP_PATH,
    onRequest: async (request) => {
      request.caller = await auth.authenticate(request.headers);
    },
    handler: async (request, reply) => {
      if (request.method !== 'POST') {
        return reply
          .code(405)
          .header('allow', 'POST')
          .type('application/json')
          .send(jsonRpcError(STATELESS_METHODS));
      }
      const body = bodyOf(request);
      takeOver(reply);
      await answerMcpPost(
        service,
        callerOf(request).owner,
        { req: request.raw, res: reply.raw, text: body.text, value: body.value },
        request.log,
      );
    },
  });
}

/** The transport writes the answer itself: Fastify must not, but its headers (x-request-id) go too. */
function takeOver(reply: FastifyReply): void {
  reply.hijack();
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined) reply.raw.setHeader(name, value);
  }
}
