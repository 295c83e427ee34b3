/**
 * OpenTelemetry with a tracer provider registered (as an application, or `chronos serve` with
 * OTEL_* set, would): one trace from the HTTP request that creates an alarm to the webhook that
 * delivers it, and the claim and record spans beside it. Spans are caught by an in-memory
 * exporter; the webhook by a real sink.
 */
import { trace } from '@opentelemetry/api';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { createApp } from '../../packages/chronos-timers-server/src/server.js';
import { WebhookReceiver } from '../../packages/chronos-timers-server/src/receivers/webhook.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import { backdate, OWNER } from '../support/harness.js';
import { Sink } from '../support/sink.js';
import { call } from '../http/support.js';

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

beforeAll(() => {
  provider.register();
});
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
});

/** Stops what the service runs, leaving the test's database open. */
async function release(service: ChronosService): Promise<void> {
  await service.stop();
  if (service.receiver instanceof WebhookReceiver) await service.receiver.close();
  await service.tracker.close();
}

const storedTrace = sql('test_stored_traceparent', 'SELECT traceparent FROM chronos.alarms WHERE id = $1');
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const INCOMING = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

describeEachBackend('tracing: one trace from the creating request to the router', ({ t }) => {
  let sink: Sink;
  beforeAll(async () => {
    sink = await Sink.start();
  });
  afterAll(async () => {
    await sink.close();
  });
  afterEach(() => {
    exporter.reset();
    sink.reset();
  });

  it('the create, deliver and webhook continue the caller’s trace; claim and record are spans too', async () => {
    const service = await ChronosService.open(
      loadConfig({
        CHRONOS_ROUTER_URL: sink.url(),
        CHRONOS_CREATE_RATE: '0',
        CHRONOS_MAX_ACTIVE_ALARMS: '0',
      }),
      { db: t.db, logger: silentLogger },
    );
    const app = await createApp(service);
    try {
      const { key } = await service.keys.create(OWNER.did, 'traced');
      const created = await call(app, 'POST', '/v1/alarms', {
        headers: { authorization: `Bearer ${key}`, traceparent: INCOMING },
        body: { in_seconds: 60, label: 'traced' },
      });
      expect(created.status).toBe(201);
      const id = created.body.alarm.id as string;
      await backdate(t.db, id, 61_000);
      expect(await service.dispatcher.runOnce()).toBe(1);
      await sink.waitFor(1);

      const spans = exporter.getFinishedSpans();
      const named = (name: string) => spans.filter((s) => s.name === name);
      const server = spans.find((s) => s.name === 'POST /v1/alarms')!;
      expect(server.spanContext().traceId).toBe(TRACE_ID);
      expect(server.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
      const [create] = named('chronos.create');
      expect(create!.parentSpanContext?.spanId).toBe(server.spanContext().spanId);
      expect(create!.attributes).toMatchObject({ 'chronos.source': 'api', 'chronos.alarms': 1 });

      // Stored with the alarm: the create span's traceparent.
      const [row] = await t.db.query<{ traceparent: string }>(storedTrace, [id]);
      expect(row!.traceparent).toBe(`00-${TRACE_ID}-${create!.spanContext().spanId}-01`);

      const [deliver] = named('chronos.deliver');
      expect(deliver!.spanContext().traceId).toBe(TRACE_ID);
      expect(deliver!.parentSpanContext?.spanId).toBe(create!.spanContext().spanId);
      expect(deliver!.attributes).toMatchObject({ 'chronos.alarm_id': id, 'chronos.attempt': 1 });
      expect(named('chronos.claim')[0]!.attributes).toMatchObject({
        'chronos.queue': 'router',
        'chronos.claimed': 1,
      });
      expect(named('chronos.record')[0]!.attributes).toMatchObject({ 'chronos.outcomes': 1 });

      // The router receives the trace: the deliver span is its parent.
      expect(sink.requests[0]!.headers.traceparent).toBe(
        `00-${TRACE_ID}-${deliver!.spanContext().spanId}-01`,
      );
    } finally {
      await app.close();
      await release(service);
    }
  });

  it('an untraced create starts a trace of its own, which its delivery continues', async () => {
    const service = await ChronosService.open(loadConfig({ CHRONOS_ROUTER_URL: sink.url() }), {
      db: t.db,
      logger: silentLogger,
    });
    try {
      const { alarm } = await service.alarms.create(OWNER, { inSeconds: 60 }, { source: 'api' });
      await backdate(t.db, alarm.id, 61_000);
      await service.dispatcher.runOnce();
      await sink.waitFor(1);
      const [create] = exporter.getFinishedSpans().filter((s) => s.name === 'chronos.create');
      const [deliver] = exporter.getFinishedSpans().filter((s) => s.name === 'chronos.deliver');
      expect(deliver!.spanContext().traceId).toBe(create!.spanContext().traceId);
      expect(sink.requests[0]!.headers.traceparent).toMatch(
        new RegExp(`^00-${create!.spanContext().traceId}-`),
      );
    } finally {
      await release(service);
    }
  });
});
