import { expect, it } from 'vitest';
import { TestClock } from '../../packages/chronos-timers/src/clock.js';
import type { Delivery } from '../../packages/chronos-timers/src/receivers/receiver.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import {
  alarmRow,
  backdate,
  countingDb,
  gate,
  makeDispatcher,
  makeService,
  OWNER,
  RecordingReceiver,
  until,
  wakesOf,
} from '../support/harness.js';

const api = { source: 'api' } as const;
const HOUR = 3_600_000;

describeEachBackend('dispatcher', ({ t, kind }) => {
  it('a sleeping dispatcher is woken by a newly written due alarm without waiting for its poll', async () => {
    const receiver = new RecordingReceiver();
    // A fallback poll of an hour: only the notification can wake it in time.
    const dispatcher = makeDispatcher(t.db, receiver, { pollIntervalMs: HOUR });
    await dispatcher.start();
    try {
      const service = makeService(t.db);
      const { alarm } = await service.create(OWNER, { at: new Date(Date.now() - 1_000).toISOString() }, api);
      await until(() => receiver.fires.length === 1, 'the notified dispatcher to fire');
      expect(receiver.fires[0]!.alarm.id).toBe(alarm.id);
    } finally {
      await dispatcher.stop();
    }
  });

  it('a starting dispatcher claims what is due while its LISTEN connection is still being made, and listens once it is', async () => {
    // The LISTEN connection is held until the test lets it through: the due alarm fires first
    // (start() used to wait for that connection before the first claim). An alarm written while
    // the connection was being made, after that claim, fires as soon as it listens.
    const listenHeld = gate();
    let listenAsked = false;
    const db = new Proxy(t.db, {
      get(target, property, receiver) {
        if (property === 'listen') {
          return async (channel: string, onNotify: (payload: string) => void) => {
            listenAsked = true;
            await listenHeld.promise;
            return target.listen(channel, onNotify);
          };
        }
        return Reflect.get(target, property, receiver);
      },
    });
    const service = makeService(t.db);
    const { alarm: due } = await service.create(
      OWNER,
      { at: new Date(Date.now() - 1_000).toISOString() },
      api,
    );
    const receiver = new RecordingReceiver();
    // A fallback poll of an hour: nothing but the first claim and the notification can fire these.
    const dispatcher = makeDispatcher(db, receiver, { pollIntervalMs: HOUR });
    const starting = dispatcher.start();
    try {
      await until(() => receiver.fires.length === 1, 'the due alarm to fire before the dispatcher listens');
      expect(listenAsked).toBe(true);
      expect(receiver.fires[0]!.alarm.id).toBe(due.id);
      const { alarm: between } = await service.create(
        OWNER,
        { at: new Date(Date.now() - 1_000).toISOString() },
        api,
      );
      listenHeld.open();
      await starting;
      await until(() => receiver.fires.length === 2, 'the alarm written meanwhile to fire once it listens');
      expect(receiver.fires[1]!.alarm.id).toBe(between.id);
      // And a notification wakes it from then on.
      const { alarm: after } = await service.create(
        OWNER,
        { at: new Date(Date.now() - 1_000).toISOString() },
        api,
      );
      await until(() => receiver.fires.length === 3, 'the notified dispatcher to fire');
      expect(receiver.fires[2]!.alarm.id).toBe(after.id);
    } finally {
      listenHeld.open();
      await starting.catch(() => undefined);
      await dispatcher.stop();
    }
  });

  it('a dispatcher whose LISTEN cannot be set up fails to start and claims no more', async () => {
    // The LISTEN is refused only once the loop, started meanwhile, has looked and gone to sleep.
    const refuse = gate();
    const db = new Proxy(t.db, {
      get(target, property, receiver) {
        if (property === 'listen') {
          return async () => {
            await refuse.promise;
            throw new Error('listen refused');
          };
        }
        return Reflect.get(target, property, receiver);
      },
    });
    const receiver = new RecordingReceiver();
    const clock = new TestClock();
    const dispatcher = makeDispatcher(db, receiver, { clock, pollIntervalMs: HOUR });
    const starting = dispatcher.start();
    await until(() => clock.sleeping === 1, 'the loop to look and sleep while LISTEN is being set up');
    refuse.open();
    await expect(starting).rejects.toThrow('listen refused');
    // That loop has ended: nothing sleeps until its next look, and a one-off pass still works.
    expect(clock.sleeping).toBe(0);
    await makeService(t.db).create(OWNER, { at: new Date(Date.now() - 1_000).toISOString() }, api);
    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.fires).toHaveLength(1);
    await dispatcher.stop();
  });

  it('a notification that lands while the dispatcher is looking still wakes its next sleep', async () => {
    // The next-due probe is held until the test lets it answer; meanwhile a due alarm is written
    // and its notification arrives. The probe then answers "nothing due" (it ran before the
    // write), and the dispatcher must not sleep out its hour-long poll on that stale answer.
    const probeHeld = gate();
    let probing = false;
    let notified = false;
    const db = new Proxy(t.db, {
      get(target, property, receiver) {
        if (property === 'query') {
          return async (statement: { name: string }, values?: unknown[]) => {
            const rows = await target.query(statement as never, values);
            if (statement.name === 'alarms_next_due' && !notified) {
              probing = true;
              await probeHeld.promise;
            }
            return rows;
          };
        }
        if (property === 'listen') {
          return (channel: string, onNotify: (payload: string) => void) =>
            target.listen(channel, (payload) => {
              notified = true;
              onNotify(payload);
            });
        }
        return Reflect.get(target, property, receiver);
      },
    });
    const receiver = new RecordingReceiver();
    const dispatcher = makeDispatcher(db, receiver, { pollIntervalMs: HOUR });
    await dispatcher.start();
    try {
      await until(() => probing, 'the dispatcher to probe for the next due alarm');
      await makeService(t.db).create(OWNER, { at: new Date(Date.now() - 1_000).toISOString() }, api);
      await until(() => notified, 'the notification to arrive');
      probeHeld.open();
      await until(() => receiver.fires.length === 1, 'the alarm to fire');
    } finally {
      probeHeld.open();
      await dispatcher.stop();
    }
  });

  it('stop() lets deliveries under way finish within the grace period', async () => {
    const { alarm } = await makeService(t.db).create(OWNER, { inSeconds: 1 }, api);
    await backdate(t.db, alarm.id, 2_000);
    const held = gate<Delivery>();
    const receiver = new RecordingReceiver();
    receiver.behave = () => held.promise;
    const dispatcher = makeDispatcher(t.db, receiver, { pollIntervalMs: HOUR });
    await dispatcher.start();
    await until(() => receiver.fires.length === 1, 'the delivery to start');
    const stopping = dispatcher.stop(HOUR);
    held.open({ ok: true });
    await stopping;
    expect((await alarmRow(t.db, alarm.id)).status).toBe('fired');
  });

  it('stop() gives back the leases of deliveries that outlive the grace period', async () => {
    const { alarm } = await makeService(t.db).create(OWNER, { inSeconds: 1 }, api);
    await backdate(t.db, alarm.id, 2_000);
    const clock = new TestClock();
    const receiver = new RecordingReceiver();
    let aborted = false;
    receiver.behave = (_fire, signal) =>
      new Promise<Delivery>((resolve) =>
        signal.addEventListener('abort', () => {
          aborted = true;
          resolve({ ok: false, retryable: true, error: 'aborted' });
        }),
      );
    const dispatcher = makeDispatcher(t.db, receiver, { pollIntervalMs: HOUR, clock });
    await dispatcher.start();
    await until(() => receiver.fires.length === 1, 'the delivery to start');
    const stopping = dispatcher.stop(5_000);
    await until(() => clock.sleeping > 0, 'stop() to wait out its grace period');
    clock.advance(5_000);
    await stopping;
    expect(aborted).toBe(true);
    const row = await alarmRow(t.db, alarm.id);
    // Released, not failed: due again at once for any worker, with no failure counted.
    expect(row).toMatchObject({ status: 'active', claimed_at: null, failure_count: 0 });
    const other = new RecordingReceiver();
    expect(await makeDispatcher(t.db, other).runOnce()).toBe(1);
    expect(other.fires[0]!.wakeId).toBe(receiver.fires[0]!.wakeId);
  });

  it('a cron alarm that requires an ack coalesces fires into its unacknowledged wake', async () => {
    const service = makeService(t.db);
    const { alarm } = await service.create(OWNER, { cron: '* * * * *', requireAck: true }, api);
    const receiver = new RecordingReceiver();
    const dispatcher = makeDispatcher(t.db, receiver);
    await backdate(t.db, alarm.id, 61_000);
    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.fires).toHaveLength(1);

    // It fires again while the first wake waits for its ack: counted, not delivered.
    await backdate(t.db, alarm.id, 61_000);
    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.fires).toHaveLength(1);
    const [wake] = await wakesOf(t.db, alarm.id);
    expect(wake).toMatchObject({ status: 'delivered', fire_count: 2 });
    const row = await alarmRow(t.db, alarm.id);
    expect(row.status).toBe('active');
    expect((row.next_fire_at as Date).getTime()).toBeGreaterThan(Date.now());
    expect(row.last_fired_at).not.toBeNull();

    // Once that wake was escalated, the next fire opens and delivers a fresh wake.
    await t.db.query(
      sql('test_escalate', 'UPDATE chronos.wakes SET escalated_at = now() WHERE alarm_id = $1'),
      [alarm.id],
    );
    await backdate(t.db, alarm.id, 61_000);
    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.fires).toHaveLength(2);
    expect(receiver.fires[1]!.wakeId).not.toBe(receiver.fires[0]!.wakeId);
    expect(await wakesOf(t.db, alarm.id)).toHaveLength(2);
  });

  it('records a whole batch of outcomes in one statement', async () => {
    const service = makeService(t.db);
    for (let i = 0; i < 6; i++) {
      const { alarm } = await service.create(OWNER, { inSeconds: 1 }, api);
      await backdate(t.db, alarm.id, 2_000);
    }
    const { db, statements } = countingDb(t.db);
    const receiver = new RecordingReceiver();
    receiver.behave = (fire) =>
      fire.alarm.id < '8' ? { ok: true } : { ok: false, retryable: true, error: 'try again' };
    expect(await makeDispatcher(db, receiver).runOnce()).toBe(6);
    expect(statements).toEqual(['alarms_claim_due', 'alarms_record_outcomes']);
  });

  it('records every error text of a batch verbatim, whatever it holds (its array literal is built by the store)', async () => {
    const errors = [
      'say "hi"',
      'back\\slash',
      '{a,b}',
      'NULL',
      ' padded ',
      'two\nlines',
      'ünï 🕰',
      '\\"{,}"\\',
    ];
    const service = makeService(t.db);
    const ids: string[] = [];
    for (let i = 0; i < errors.length; i++) {
      const { alarm } = await service.create(OWNER, { inSeconds: 1 }, api);
      await backdate(t.db, alarm.id, 2_000);
      ids.push(alarm.id);
    }
    const receiver = new RecordingReceiver();
    receiver.behave = (fire) => ({ ok: false, retryable: true, error: errors[ids.indexOf(fire.alarm.id)]! });
    expect(await makeDispatcher(t.db, receiver).runOnce()).toBe(errors.length);
    for (const [i, id] of ids.entries()) {
      expect(await alarmRow(t.db, id)).toMatchObject({ failure_count: 1, last_error: errors[i] });
      expect(await wakesOf(t.db, id)).toMatchObject([{ last_error: errors[i] }]);
    }
  });

  postgresOnly(
    kind,
    'it kills server connections',
    'carries on after its connections are killed, LISTEN included',
    async () => {
      const receiver = new RecordingReceiver();
      const dispatcher = makeDispatcher(t.db, receiver, { pollIntervalMs: HOUR });
      await dispatcher.start();
      try {
        const admin = t.openPool(1);
        const killed = await admin.query<{ n: number }>(
          sql(
            'test_kill',
            `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND pid <> pg_backend_pid()`,
          ),
        );
        expect(killed[0]!.n).toBeGreaterThan(0);
        const { alarm } = await makeService(admin).create(
          OWNER,
          { at: new Date(Date.now() - 1_000).toISOString() },
          api,
        );
        // Woken either by the notification on the new LISTEN connection, or by the re-poll made
        // when it reconnected; the hour-long fallback poll never comes into it.
        await until(() => receiver.fires.length === 1, 'the alarm to fire after the reconnect', 2_000_000);
        expect(receiver.fires[0]!.alarm.id).toBe(alarm.id);
      } finally {
        await dispatcher.stop();
      }
    },
  );
});
