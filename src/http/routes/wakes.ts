/**
 * `/v1/wakes` and `/v1/conversations/{id}/replies`: an owner's wake records, acknowledging one
 * with a note, and the router's report of a reply — a thin layer over WakeService.
 */
import type { FastifyInstance } from 'fastify';
import { wakeView } from '../../wire/views.js';
import { readAckBody, readReplyBody } from '../../wire/wake-input.js';
import type { WakeService } from '../../core/wake-service.js';
import { callerOf, checkQuery } from '../context.js';
import { bodyOf, sendJson } from '../json-body.js';

export function registerWakeRoutes(app: FastifyInstance, wakes: WakeService): void {
  app.get('/wakes', async (request, reply) => {
    const query = checkQuery(request, ['status', 'limit', 'cursor']);
    const page = await wakes.list(callerOf(request).owner, query);
    return sendJson(reply, 200, { wakes: page.items.map(wakeView), next_cursor: page.nextCursor });
  });

  app.get<{ Params: { id: string } }>('/wakes/:id', async (request, reply) => {
    const wake = await wakes.get(callerOf(request).owner, request.params.id);
    return sendJson(reply, 200, { wake: wakeView(wake) });
  });

  app.post<{ Params: { id: string } }>('/wakes/:id/ack', async (request, reply) => {
    const note = readAckBody(bodyOf(request).value);
    const wake = await wakes.ack(callerOf(request).owner, request.params.id, note);
    return sendJson(reply, 200, { wake: wakeView(wake) });
  });

  app.post<{ Params: { conversation_id: string } }>(
    '/conversations/:conversation_id/replies',
    async (request, reply) => {
      readReplyBody(bodyOf(request).value);
      const acked = await wakes.reportReply(callerOf(request).owner, request.params.conversation_id);
      return sendJson(reply, 200, { acked: acked.map((w) => w.id) });
    },
  );
}
