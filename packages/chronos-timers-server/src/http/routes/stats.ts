/**
 * `/v1/stats`: the dashboard's figures — lateness per minute over the last minutes, fires due per
 * minute over the coming hours — for the caller's owner, or every owner for the operator token
 * without `X-Chronos-Owner`. A thin layer over FireStatsService.
 */
import type { FastifyInstance } from 'fastify';
import type { FireStatsService } from 'chronos-timers/internal';
import { latenessView, upcomingView } from 'chronos-timers/internal';
import { checkQuery, EVERY_OWNER, scopeOf } from '../context.js';
import { sendJson } from '../json-body.js';

export function registerStatsRoutes(app: FastifyInstance, stats: FireStatsService): void {
  app.get('/stats/lateness', EVERY_OWNER, async (request, reply) => {
    const lateness = await stats.lateness(scopeOf(request), checkQuery(request, ['minutes']));
    return sendJson(reply, 200, latenessView(lateness));
  });

  app.get('/stats/upcoming', EVERY_OWNER, async (request, reply) => {
    const upcoming = await stats.upcoming(scopeOf(request), checkQuery(request, ['hours']));
    return sendJson(reply, 200, upcomingView(upcoming));
  });
}
