/**
 * `chronos serve` with the standard OTEL_* variables exports its spans over OTLP/HTTP to a real
 * collector endpoint (a local HTTP server standing in for one): the trace a caller started with
 * `traceparent` on the create reaches the collector with the request's, the create's and the
 * delivery's spans, and the router's webhook carries it on. Nothing secret is logged: the log
 * names the endpoint's origin only.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describePostgresOnly } from '../support/backends.js';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';
import { backdate, OWNER } from '../support/harness.js';
import { Sink } from '../support/sink.js';
import { Instance, stopAll } from '../scenarios/support/instance.js';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const OPERATOR = 'operator-token-for-the-tracing-test';

interface OtlpSpan {
  traceId: string;
  name: string;
}

/** The spans of every OTLP/HTTP JSON export the collector has received. */
function spansOf(collector: Sink): OtlpSpan[] {
  return collector.requests
    .filter((r) => r.path === '/v1/traces')
    .flatMap((r) => {
      const body = JSON.parse(r.body) as {
        resourceSpans: { resource: unknown; scopeSpans: { spans: OtlpSpan[] }[] }[];
      };
      return body.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans));
    });
}

describePostgresOnly('a chronos serve child process on a test database', 'chronos serve: OTLP export', () => {
  let t: TestDatabase;
  let router: Sink;
  let collector: Sink;
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
    router = await Sink.start();
    collector = await Sink.start();
  });
  afterAll(async () => {
    await stopAll(Instance.created());
    await router?.close();
    await collector?.close();
    await t?.close();
  });

  it('spans of the create and the delivery reach the OTLP endpoint in the caller’s trace', async () => {
    const instance = await Instance.create('traced', {
      DATABASE_URL: t.url!,
      CHRONOS_ROUTER_URL: router.url(),
      CHRONOS_OPERATOR_TOKEN: OPERATOR,
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://user:s3cret@127.0.0.1:${collector.port}`,
      OTEL_SERVICE_NAME: 'chronos-under-test',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    await instance.start();
    const response = await fetch(`${instance.url}/v1/alarms`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${OPERATOR}`,
        'x-chronos-owner': OWNER.did,
        'content-type': 'application/json',
        traceparent: `00-${TRACE_ID}-b7ad6b7169203331-01`,
      },
      body: JSON.stringify({ in_seconds: 60, label: 'traced' }),
    });
    expect(response.status).toBe(201);
    const { alarm } = (await response.json()) as { alarm: { id: string } };
    await backdate(t.db, alarm.id, 61_000);
    await router.waitFor(1);
    expect(router.requests[0]!.headers.traceparent).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));

    // Wait for exports, one arrival at a time, until the delivery's span is among them.
    const wanted = ['POST /v1/alarms', 'chronos.create', 'chronos.deliver'];
    const ours = () => spansOf(collector).filter((s) => s.traceId === TRACE_ID);
    while (!wanted.every((name) => ours().some((s) => s.name === name))) {
      await collector.waitFor(collector.received + 1);
    }
    const first = collector.requests.find((r) => r.path === '/v1/traces')!;
    expect(first.method).toBe('POST');
    expect(first.headers['content-type']).toBe('application/json');
    expect(first.body).toContain('"chronos-under-test"');

    // The log names where traces go, never the credentials in the URL.
    expect(instance.currentLines().join('\n')).toContain(`http://127.0.0.1:${collector.port}`);
    expect(instance.currentLines().join('\n')).not.toContain('s3cret');
  }, 60_000);
});
