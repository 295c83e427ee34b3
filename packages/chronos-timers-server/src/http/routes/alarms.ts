/**
 * `/v1/alarms`: create (one or a batch), list, get, reschedule, cancel, and the operator
 * controls — pause, resume, fire now, retry, bulk cancel — and the next fires, each a thin layer
 * over AlarmService. The caller's owner scopes every call (the list alone may be read for every
 * owner by the operator, with an `owners` map beside it); a body is read into an AlarmSpec by the wire form, with
 * its `payload` as its own text.
 */
import type { FastifyInstance } from 'fastify';
import type { AlarmService } from 'chronos-timers/internal';
import {
  inWireNames,
  readAlarmBody,
  readBatchBody,
  readBulkCancelBody,
  readPreviewBody,
} from 'chronos-timers/internal';
import { readNoFields } from 'chronos-timers/internal';
import { readAlarmListQuery, readNextFiresQuery } from 'chronos-timers/internal';
import { alarmView, ownersView } from 'chronos-timers/internal';
import { callerOf, checkQuery, EVERY_OWNER, scopeOf, writeOf } from '../context.js';
import { bodyOf, sendJson } from '../json-body.js';

type IdParams = { Params: { id: string } };

export function registerAlarmRoutes(app: FastifyInstance, alarms: AlarmService): void {
  app.post('/alarms', async (request, reply) => {
    const body = bodyOf(request);
    const spec = readAlarmBody(body.value, { create: true, rawPayload: body.rawMember('payload') });
    const { alarm, deduped } = await alarms.create(callerOf(request).owner, spec, writeOf(request));
    return sendJson(reply, deduped ? 200 : 201, { alarm: alarmView(alarm), deduped });
  });

  app.post('/alarms/batch', async (request, reply) => {
    const body = bodyOf(request);
    const specs = readBatchBody(body.value, body.text);
    const owner = callerOf(request).owner;
    const created = await alarms
      .createMany(
        specs.map((spec) => ({ owner, spec })),
        writeOf(request),
      )
      .catch((error: unknown) => Promise.reject(inWireNames(error, 'alarms')));
    const results = created.map(({ alarm, deduped }) => ({ alarm: alarmView(alarm), deduped }));
    return sendJson(reply, 201, { results });
  });

  // The next due instants of a schedule, nothing written (contract §5, third edition).
  app.post('/schedules/preview', async (request, reply) => {
    const { spec, count } = readPreviewBody(bodyOf(request).value);
    const { fires, serverTime } = await alarms
      .preview(spec, count)
      .catch((error: unknown) => Promise.reject(inWireNames(error)));
    return sendJson(reply, 200, { fires, server_time: serverTime.toISOString() });
  });

  app.post('/alarms/bulk-cancel', async (request, reply) => {
    const filter = readBulkCancelBody(bodyOf(request).value);
    const cancelled = await alarms.bulkCancel(callerOf(request).owner, filter);
    return sendJson(reply, 200, { cancelled });
  });

  app.get('/alarms', EVERY_OWNER, async (request, reply) => {
    const filter = readAlarmListQuery(checkQuery(request, ['status', 'q', 'limit', 'cursor']));
    const scope = scopeOf(request);
    const page = await alarms.list(scope, filter);
    return sendJson(reply, 200, {
      alarms: page.items.map(alarmView),
      next_cursor: page.nextCursor,
      ...(scope === null && { owners: ownersView(page.items) }),
    });
  });

  app.get<IdParams>('/alarms/:id/next-fires', async (request, reply) => {
    const count = readNextFiresQuery(checkQuery(request, ['count']));
    const fires = await alarms.nextFires(callerOf(request).owner, request.params.id, count);
    return sendJson(reply, 200, { next_fires: fires });
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

  const control = (path: string, status: number, run: (service: AlarmService) => typeof alarms.pause) =>
    app.post<IdParams>(`/alarms/:id/${path}`, async (request, reply) => {
      readNoFields(bodyOf(request).value);
      const alarm = await run(alarms).call(alarms, callerOf(request).owner, request.params.id);
      return sendJson(reply, status, { alarm: alarmView(alarm) });
    });
  control('pause', 200, (s) => s.pause);
  control('resume', 200, (s) => s.resume);
  control('fire', 202, (s) => s.fireNow);
  control('retry', 200, (s) => s.retry);
}
