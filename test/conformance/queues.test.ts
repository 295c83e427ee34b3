import { expect, it } from 'vitest';
import { isChronosError, type ChronosError } from '../../packages/chronos-timers/src/errors.js';
import type { TimerFire } from '../../packages/chronos-timers/src/receivers/handler.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend } from '../support/backends.js';
import {
  backdate,
  makeDispatcher,
  makeService,
  OWNER,
  RecordingReceiver,
  until,
} from '../support/harness.js';
import { inCallerTransaction, libraryOn } from '../support/library.js';

const queueOf = sql('test_queue_of', 'SELECT queue FROM chronos.alarms WHERE id = $1');
const alarmCount = sql('test_alarm_count', 'SELECT count(*)::int AS n FROM chronos.alarms');

/** The caller's transaction, with every statement sent on it counted. */
function counted(tx: unknown): { tx: unknown; statements: string[] } {
  const statements: string[] = [];
  const proxy = new Proxy(tx as object, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (property !== 'query' || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const first = args[0] as string | { text: string };
        statements.push(typeof first === 'string' ? first : first.text);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { tx: proxy, statements };
}

describeEachBackend('conformance: queues and scheduleMany', ({ t }) => {
  it('queues-are-separate: the service claims only the router queue, a worker only its own', async () => {
    const chronos = await libraryOn(t);
    const agent = await makeService(t.db).create(OWNER, { inSeconds: 60 }, { source: 'api' });
    const timers = await inCallerTransaction(t, (tx) =>
      chronos.scheduleMany(tx, [
        { key: 'invoice:1', inSeconds: 60 },
        { key: 'mail:1', inSeconds: 60, queue: 'mail' },
        { key: 'agent-wake', inSeconds: 60, queue: 'router', wakeMessage: 'resume the order' },
      ]),
    );
    for (const id of [agent.alarm.id, ...timers.map((a) => a.id)]) await backdate(t.db, id, 61_000);
    expect((await t.db.query<{ queue: string }>(queueOf, [agent.alarm.id]))[0]!.queue).toBe('router');
    expect(timers.map((a) => a.queue)).toEqual(['default', 'mail', 'router']);

    // The service's dispatcher: the agent's alarm and the library's wake written for the router.
    const router = new RecordingReceiver();
    expect(await makeDispatcher(t.db, router).runOnce()).toBe(2);
    expect(router.fires.map((f) => f.alarm.id).sort()).toEqual([agent.alarm.id, timers[2]!.id].sort());
    expect(router.firesOf(timers[2]!.id)[0]!.alarm.wakeMessage).toBe('resume the order');

    // Two workers side by side, each on its own queue with its own concurrency.
    const defaults: TimerFire[] = [];
    const mails: TimerFire[] = [];
    const worker = chronos.work((fire) => void defaults.push(fire), { concurrency: 1 });
    const mailer = chronos.work((fire) => void mails.push(fire), { queue: 'mail', concurrency: 5 });
    await until(() => defaults.length > 0 && mails.length > 0, 'both queues to fire');
    await Promise.all([worker.stop(), mailer.stop()]);
    expect(defaults.map((f) => f.key)).toEqual(['invoice:1']);
    expect(mails.map((f) => f.key)).toEqual(['mail:1']);
  });

  it('queues-are-separate: a due alarm of another queue never delays a queue’s claim', async () => {
    const chronos = await libraryOn(t);
    // Many overdue timers of a queue nobody works on, due before the one that matters.
    await inCallerTransaction(t, (tx) =>
      chronos.scheduleMany(
        tx,
        Array.from({ length: 300 }, (_, i) => ({
          key: `idle:${i}`,
          at: new Date(Date.now() - 30_000),
          queue: 'idle',
        })),
      ),
    );
    const { alarm } = await makeService(t.db).create(OWNER, { inSeconds: 60 }, { source: 'api' });
    await backdate(t.db, alarm.id, 61_000);
    const router = new RecordingReceiver();
    expect(await makeDispatcher(t.db, router, { batchSize: 1 }).runOnce()).toBe(1);
    expect(router.fires[0]!.alarm.id).toBe(alarm.id);
  });

  it('schedule-many-is-one-statement: many timers in one statement on the caller’s transaction, in order', async () => {
    const chronos = await libraryOn(t);
    // Warm the estimate of the database clock, which a first call may read on the transaction.
    await inCallerTransaction(t, (tx) => chronos.schedule(tx, { key: 'warm', inSeconds: 60 }));
    const specs = Array.from({ length: 250 }, (_, i) => ({
      key: `batch:${i}`,
      inSeconds: 60 + i,
      payload: { i },
    }));
    const { made, statements } = await inCallerTransaction(t, async (tx) => {
      const c = counted(tx);
      return { made: await chronos.scheduleMany(c.tx, specs), statements: c.statements };
    });
    expect(statements).toHaveLength(1);
    expect(made.map((a) => a.idempotencyKey)).toEqual(specs.map((s) => s.key));
    expect(made.map((a) => a.payload)).toEqual(specs.map((s) => s.payload));
    expect((await t.db.query<{ n: number }>(alarmCount))[0]!.n).toBe(251);

    // Again with the same keys: nothing new, each answer the existing timer.
    const again = await inCallerTransaction(t, (tx) => chronos.scheduleMany(tx, specs));
    expect(again.map((a) => a.id)).toEqual(made.map((a) => a.id));
    expect((await t.db.query<{ n: number }>(alarmCount))[0]!.n).toBe(251);
  });

  it('schedule-many-is-one-statement: one bad spec refuses the whole call, naming it as written, nothing written', async () => {
    const chronos = await libraryOn(t);
    const error = await inCallerTransaction(t, (tx) =>
      chronos
        .scheduleMany(tx, [
          { key: 'a', inSeconds: 60 },
          { key: 'b', inSeconds: 60 },
          { key: 'c', inSeconds: 60 },
          { key: 'd', at: '2020-01-01T00:00:00Z' },
          { key: 'e', inSeconds: -1 },
          { key: 'f', cron: '* * * * *', tz: 'UTC' } as never,
        ])
        .then(
          () => null,
          (e: unknown) => e as ChronosError,
        ),
    );
    expect(isChronosError(error, 'invalid_input')).toBe(true);
    const paths = error!.errors.map((e) => e.path);
    expect(paths).toEqual(expect.arrayContaining(['specs.4.inSeconds', 'specs.5.tz']));
    expect(error!.errors.find((e) => e.path === 'specs.4.inSeconds')!.message).toMatch(
      /^specs\.4\.inSeconds: expected a whole number of seconds from 1 to 315360000, got -1/,
    );
    expect(error!.errors.find((e) => e.path === 'specs.5.tz')!.message).toMatch(/did you mean "timezone"\?/);
    expect((await t.db.query<{ n: number }>(alarmCount))[0]!.n).toBe(0);

    // A meaning error (an `at` in the past) is named the same way, and still nothing is written.
    const past = await chronos
      .scheduleMany(null, [
        { key: 'a', inSeconds: 60 },
        { key: 'd', at: '2020-01-01T00:00:00Z' },
      ])
      .catch((e: unknown) => e as ChronosError);
    expect((past as ChronosError).errors.map((e) => e.path)).toEqual(['specs.1.at']);
    expect((past as ChronosError).errors[0]!.message).toMatch(/^specs\.1\.at: expected a time in the future/);
    expect((await t.db.query<{ n: number }>(alarmCount))[0]!.n).toBe(0);
  });
});
