/**
 * `/v1/alarms`: create, list, get, reschedule, cancel — a thin layer over AlarmService. The
 * caller's owner scopes every call; a body is read into an AlarmSpec by the wire form, with its
 * `payload` as its own text.
 */
import type { FastifyInstance } from 'fastify';
import type { AlarmService } from '../../core/alarm-service.js';
import { readAlarmBody } from '../../wire/alarm-input.js';
import { alarmView } from '../../wire/views.js';
import { callerOf, checkQuery } from '../context.js';
import { bodyOf, sendJson } from '../json-body.js';

type IdParams = { Params: { id: string } };

export function registerAlarmRoutes(app: FastifyInstance, alarms: AlarmService): void {
  app.post('/alarms', async (request, reply) => {
    const body = bodyOf(request);
    const spec = readAlarmBody(body.value, { create: true, rawPayload: body.rawMember('payload') });
    const { alarm, deduped } = await alarms.create(callerOf(request).owner, spec, { source: 'api' });
    return sendJson(reply, deduped ? 200 : 201, { alarm: alarmView(alarm), deduped });
  });

  app.get('/alarms', async (request, reply) => {
    const query = checkQuery(request, ['status', 'limit', 'cursor']);
    const page = await alarms.list(callerOf(request).owner, query);
    return sendJson(reply, 200, { alarms: page.items.map(alarmView), next_cursor: page.nextCursor });
  });

  app.get<IdParams>('/alarms/:id', async (request, reply) => {
    const alarm = await alarms.get(callerOf(request).owner, request.params.id);
    return sendJson(reply, 200, { alarm: alarmView(alarm) });
  });

  app.patch<IdParams>('/alarms/:id', async (request, reply) => {
    const body = bodyOf(request);
    const spec = readAlarmBody(body.value, { create: false, rawPayload: body.rawMember('payload') });
    const alarm = await alarms.update(callerOf(request).owner, { id: request.params.id }, spec, {
      source: 'api',
    });
    return sendJson(reply, 200, { alarm: alarmView(alarm) });
  });

  app.delete<IdParams>('/alarms/:id', async (request, reply) => {
    const alarm = await alarms.cancel(callerOf(request).owner, { id: request.params.id });
    return sendJson(reply, 200, { alarm: alarmView(alarm) });
  });
}
