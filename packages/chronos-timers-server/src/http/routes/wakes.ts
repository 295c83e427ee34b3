/**
 * `/v1/wakes`, an alarm's wakes, and `/v1/conversations/{id}/replies`: an owner's wake records and
 * their delivery attempts, acknowledging one with a note, and the router's report of a reply — a
 * thin layer over WakeService (and AlarmService, to tell a missing alarm from one with no wakes).
 */
import type { FastifyInstance } from 'fastify';
import type { AlarmService } from 'chronos-timers/internal';
import type { WakeService } from 'chronos-timers/internal';
import { attemptView, ownersView, wakeView } from 'chronos-timers/internal';
import { readWakeListQuery } from 'chronos-timers/internal';
import { readAckBody, readReplyBody } from 'chronos-timers/internal';
import { callerOf, checkQuery, EVERY_OWNER, scopeOf } from '../context.js';
import { bodyOf, sendJson } from '../json-body.js';

type IdParams = { Params: { id: string } };

export function registerWakeRoutes(app: FastifyInstance, wakes: WakeService, alarms: AlarmService): void {
  app.get('/wakes', EVERY_OWNER, async (request, reply) => {
    const filter = readWakeListQuery(
      checkQuery(request, ['status', 'alarm_id', 'conversation_id', 'require_ack', 'limit', 'cursor']),
    );
    const scope = scopeOf(request);
    const page = await wakes.list(scope, filter);
    return sendJson(reply, 200, {
      wakes: page.items.map(wakeView),
      next_cursor: page.nextCursor,
      ...(scope === null && { owners: ownersView(page.items) }),
    });
  });

  app.get<IdParams>('/alarms/:id/wakes', async (request, reply) => {
    const query = checkQuery(request, ['status', 'limit', 'cursor']);
    const owner = callerOf(request).owner;
    const alarm = await alarms.get(owner, request.params.id);
    const page = await wakes.list(owner, { ...readWakeListQuery(query), alarmId: alarm.id });
    return sendJson(reply, 200, { wakes: page.items.map(wakeView), next_cursor: page.nextCursor });
  });

  app.get<IdParams>('/wakes/:id', async (request, reply) => {
    const wake = await wakes.get(callerOf(request).owner, request.params.id);
    return sendJson(reply, 200, { wake: wakeView(wake) });
  });

  app.get<IdParams>('/wakes/:id/attempts', async (request, reply) => {
    const attempts = await wakes.attempts(callerOf(request).owner, request.params.id);
    return sendJson(reply, 200, { attempts: attempts.map(attemptView) });
  });

  app.post<IdParams>('/wakes/:id/ack', async (request, reply) => {
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
