import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import { LogReceiver } from '../../packages/chronos-timers/src/receivers/log.js';
import { WebhookReceiver } from '../../packages/chronos-timers-server/src/receivers/webhook.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import { alarmRow, backdate, OWNER, wakesOf } from '../support/harness.js';
import { Sink } from '../support/sink.js';
import { newSecret } from './support.js';

const api = { source: 'api' } as const;
const autovacuumSetting = sql('test_autovacuum_setting', `SELECT current_setting('autovacuum') AS value`);

/** A logger whose lines are kept, parsed. */
function capturingLogger() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

describeEachBackend('the service chooses its receiver from the configuration', ({ t }) => {
  let sink: Sink;
  const services: ChronosService[] = [];
  const open = async (env: Record<string, string>) => {
    const { logger, lines } = capturingLogger();
    const service = await ChronosService.open(loadConfig({ CHRONOS_CONCURRENCY: '8', ...env }), {
      db: t.db,
      logger,
    });
    services.push(service);
    return { service, lines };
  };

  beforeAll(async () => {
    sink = await Sink.start();
  });
  afterEach(async () => {
    // The test database stays open: stop the loops and the receiver only.
    for (const service of services.splice(0)) {
      await service.stop();
      if (service.receiver instanceof WebhookReceiver) await service.receiver.close();
    }
    sink.reset();
  });
  afterAll(async () => {
    await sink.close();
  });

  it('with no router configured the service runs, warns once, and logs each wake as delivered', async () => {
    const { service, lines } = await open({});
    expect(service.receiver).toBeInstanceOf(LogReceiver);
    expect(lines.some((l) => l.level === 40 && /CHRONOS_ROUTER_URL is not set/.test(String(l.msg)))).toBe(
      true,
    );
    const { alarm } = await service.alarms.create(OWNER, { inSeconds: 60, wakeMessage: 'hello' }, api);
    await backdate(t.db, alarm.id, 61_000);
    expect(await service.dispatcher.runOnce()).toBe(1);

    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
    const [wake] = await wakesOf(t.db, alarm.id);
    expect(wake!.status).toBe('delivered');
    const fired = lines.find((l) => l.wakeId === wake!.id);
    expect(fired).toMatchObject({ alarmId: alarm.id, wakeMessage: 'hello', attempt: 1 });
    expect(sink.requests).toHaveLength(0);
  });

  it('with CHRONOS_ROUTER_URL set, wakes are POSTed there, signed with CHRONOS_WEBHOOK_SECRET', async () => {
    const secret = newSecret();
    const { service, lines } = await open({ CHRONOS_ROUTER_URL: sink.url(), CHRONOS_WEBHOOK_SECRET: secret });
    expect(service.receiver).toBeInstanceOf(WebhookReceiver);
    // Only the server's own settings may draw a warning here (autovacuum, next test).
    expect(lines.filter((l) => l.level === 40 && !/autovacuum/.test(String(l.msg)))).toEqual([]);
    const { alarm } = await service.alarms.create(OWNER, { inSeconds: 60 }, api);
    await backdate(t.db, alarm.id, 61_000);
    expect(await service.dispatcher.runOnce()).toBe(1);

    expect(sink.requests).toHaveLength(1);
    const request = sink.requests[0]!;
    expect(() => new Webhook(secret).verify(request.rawBody, request.headers)).not.toThrow();
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
  });

  it('with CHRONOS_ROUTER_PIPELINING set, a burst shares that many to a connection', async () => {
    // CHRONOS_CONCURRENCY 8: eight under way, on their own connections by default, on two at 4 apiece.
    const burst = async (env: Record<string, string>) => {
      const { service } = await open({
        CHRONOS_ROUTER_URL: sink.url(),
        CHRONOS_WEBHOOK_SECRET: newSecret(),
        ...env,
      });
      for (let i = 0; i < 8; i++) {
        const { alarm } = await service.alarms.create(OWNER, { inSeconds: 60, label: `burst-${i}` }, api);
        await backdate(t.db, alarm.id, 61_000);
      }
      sink.reset();
      expect(await service.dispatcher.runOnce()).toBe(8);
      expect(sink.requests).toHaveLength(8);
      return sink.connections;
    };
    expect(await burst({ CHRONOS_ROUTER_PIPELINING: '4' })).toBeLessThanOrEqual(2);
    expect(await burst({})).toBeGreaterThan(2);
  });

  it('warns at start when PostgreSQL runs with autovacuum off, and only then', async () => {
    const { lines } = await open({ CHRONOS_ROUTER_URL: sink.url(), CHRONOS_WEBHOOK_SECRET: newSecret() });
    const warned = lines.filter((l) => l.level === 40 && /autovacuum is off/.test(String(l.msg)));
    const [setting] = await t.db.query<{ value: string }>(autovacuumSetting);
    // The embedded store runs single-user, where autovacuum never runs and nothing is to be done.
    const expected = t.db.kind === 'postgres' && setting!.value === 'off' ? 1 : 0;
    expect(warned).toHaveLength(expected);
    if (expected) expect(String(warned[0]!.msg)).toMatch(/VACUUM ANALYZE on alarms, wakes and wake_attempts/);
  });

  it('warns when the router is configured without a secret, and sends unsigned', async () => {
    const { service, lines } = await open({ CHRONOS_ROUTER_URL: sink.url() });
    expect(lines.some((l) => l.level === 40 && /CHRONOS_WEBHOOK_SECRET is not set/.test(String(l.msg)))).toBe(
      true,
    );
    const { alarm } = await service.alarms.create(OWNER, { inSeconds: 60 }, api);
    await backdate(t.db, alarm.id, 61_000);
    await service.dispatcher.runOnce();
    expect(sink.requests[0]!.headers['webhook-signature']).toBeUndefined();
    expect(sink.requests[0]!.headers['webhook-id']).toBeDefined();
  });

  it('exports delivery metrics: outcomes, attempt latency by result, and the retry queue depth', async () => {
    const { service } = await open({ CHRONOS_ROUTER_URL: sink.url(), CHRONOS_WEBHOOK_SECRET: newSecret() });
    for (const label of ['ok', 'busy', 'gone']) {
      const { alarm } = await service.alarms.create(OWNER, { inSeconds: 60, label }, api);
      await backdate(t.db, alarm.id, 61_000);
    }
    sink.respond = (request) => {
      const { label } = JSON.parse(request.body) as { label: string };
      return { status: label === 'ok' ? 200 : label === 'busy' ? 503 : 404 };
    };
    expect(await service.dispatcher.runOnce()).toBe(3);

    const text = await service.metrics.render();
    expect(text).toMatch(/^chronos_retry_queue_depth 1$/m);
    expect(text).toMatch(/^chronos_router_held 0$/m);
    expect(text).toMatch(/^chronos_deliveries_total\{outcome="delivered"\} 1$/m);
    expect(text).toMatch(/^chronos_deliveries_total\{outcome="retry"\} 1$/m);
    expect(text).toMatch(/^chronos_deliveries_total\{outcome="failed"\} 1$/m);
    for (const result of ['2xx', '4xx', '5xx']) {
      expect(text).toMatch(
        new RegExp(`^chronos_webhook_attempt_seconds_count\\{result="${result}"\\} 1$`, 'm'),
      );
    }
  });
});
