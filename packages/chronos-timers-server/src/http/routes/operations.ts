/**
 * The routes that need no credentials: liveness, readiness, Prometheus metrics, and the OpenAPI
 * document.
 */
import type { FastifyInstance } from 'fastify';
import type { ChronosService } from '../../service.js';
import type { DatabaseStatus } from '../../service.js';
import { openApiDocument } from '../openapi.js';

export function registerOperationRoutes(
  app: FastifyInstance,
  service: Pick<ChronosService, 'readiness' | 'metrics'>,
  state: { closing: boolean },
): void {
  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    if (state.closing) return reply.code(503).send({ status: 'not ready', reason: 'shutting down' });
    const readiness = await service.readiness();
    const database = readiness.database ? databaseView(readiness.database) : undefined;
    return readiness.ready
      ? { status: 'ready', database }
      : reply.code(503).send({ status: 'not ready', reason: readiness.reason, database });
  });

  app.get('/metrics', async (_request, reply) => {
    const text = await service.metrics.render();
    return reply.type(service.metrics.registry.contentType).send(text);
  });

  const openapi = JSON.stringify(openApiDocument());
  app.get('/openapi.json', async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(openapi),
  );
}

/** `/readyz`'s `database`: which PostgreSQL host is in use (issue 16; OpenAPI `Readiness`). */
function databaseView(status: DatabaseStatus) {
  return {
    host: status.host,
    hosts: status.hosts,
    target_session_attrs: status.targetSessionAttrs,
    host_changes: status.changes,
    // Which hosts failed and why (addresses, the driver's text) is in the server's log, not here.
    last_error: status.lastError === null ? null : 'database unreachable',
  };
}
