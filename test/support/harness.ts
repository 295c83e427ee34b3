/**
 * Building blocks for tests: owners, a service and dispatcher over a test database, a receiver
 * that records and can be told to fail or hang, and set-ups that move rows in time (crashes and
 * waits are data: a lapsed lease is a `claimed_at` an hour ago).
 */
import { expect } from 'vitest';
import { AlarmService, type Quotas } from '../../packages/chronos-timers/src/core/alarm-service.js';
import { systemClock, type Clock } from '../../packages/chronos-timers/src/clock.js';
import {
  Dispatcher,
  type ClaimMode,
  type DispatcherDelivery,
  type DispatcherSettings,
} from '../../packages/chronos-timers/src/dispatch/dispatcher.js';
import type { Alarm, ClaimedAlarm } from '../../packages/chronos-timers/src/types.js';
import { parseOwner } from '../../packages/chronos-timers/src/core/owner.js';
import type { Delivery, Fire, Receiver } from '../../packages/chronos-timers/src/receivers/receiver.js';
import { DbClock } from '../../packages/chronos-timers/src/store/driver/db-clock.js';
import {
  sql,
  type Db,
  type Executor,
  type Row,
  type Statement,
} from '../../packages/chronos-timers/src/store/driver/db.js';

export const OWNER = parseOwner('did:matrix:11111111-1111-4111-8111-111111111111:test');
export const OTHER = parseOwner('did:matrix:22222222-2222-4222-8222-222222222222:other');

export const NO_QUOTAS: Quotas = { maxActiveAlarms: 0, createRatePerMinute: 0, minCronIntervalMs: 0 };

export function makeService(
  db: Db,
  options: { quotas?: Partial<Quotas>; clock?: Clock; dbClock?: { now(via?: Executor): Promise<Date> } } = {},
): AlarmService {
  return new AlarmService({
    db,
    dbClock: (options.dbClock as DbClock) ?? new DbClock(db, options.clock ?? systemClock),
    quotas: { ...NO_QUOTAS, ...options.quotas },
    notifyHorizonMs: 1_000,
  });
}

type Behaviour<A extends ClaimedAlarm> = (fire: Fire<A>, signal: AbortSignal) => Delivery | Promise<Delivery>;

/**
 * Records every fire; answers `behave(fire)`, by default success. `A`: what a fire holds of its
 * alarm (`ClaimedAlarm` for a dispatcher without history).
 */
export class RecordingReceiver<A extends ClaimedAlarm = Alarm> implements Receiver<A> {
  readonly name = 'recording';
  readonly fires: Fire<A>[] = [];
  behave: Behaviour<A> = () => ({ ok: true });

  deliver = async (fire: Fire<A>, signal: AbortSignal): Promise<Delivery> => {
    this.fires.push(fire);
    return this.behave(fire, signal);
  };

  firesOf(alarmId: string): Fire<A>[] {
    return this.fires.filter((f) => f.alarm.id === alarmId);
  }
}

type TestDispatcherOptions = Partial<Omit<DispatcherSettings, 'db'>>;

/** A dispatcher of the queue `router` with history (the service's), or without (a library worker's). */
export function makeDispatcher(
  db: Db,
  receiver: Receiver,
  options?: TestDispatcherOptions & { history?: true },
): Dispatcher;
export function makeDispatcher(
  db: Db,
  receiver: Receiver<ClaimedAlarm>,
  options: TestDispatcherOptions & { history: false; deleteFired?: boolean; claim?: ClaimMode },
): Dispatcher;
export function makeDispatcher(
  db: Db,
  receiver: Receiver | Receiver<ClaimedAlarm>,
  options: TestDispatcherOptions & { history?: boolean; deleteFired?: boolean; claim?: ClaimMode } = {},
): Dispatcher {
  const { history, deleteFired, claim, ...settings } = options;
  // The overloads pair the receiver with the history setting.
  const delivery: DispatcherDelivery =
    history === false
      ? { receiver: receiver as Receiver<ClaimedAlarm>, history: false, deleteFired, claim }
      : { receiver: receiver as Receiver };
  return new Dispatcher({
    db,
    queue: 'router',
    leaseMs: 30_000,
    retry: { baseMs: 1_000, maxMs: 60_000 },
    random: () => 0.5,
    ...settings,
    ...delivery,
  });
}

/** A promise opened from outside: for a delivery that hangs until the test lets it go. */
export function gate<T = void>(): { promise: Promise<T>; open(value: T): void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}

/** Resolves once `predicate()` holds, checking on every macrotask turn (no timers to wait on). */
export async function until(predicate: () => boolean, what = 'condition', maxTurns = 100_000): Promise<void> {
  for (let i = 0; i < maxTurns; i++) {
    if (predicate()) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const backdateStmt = sql(
  'test_backdate',
  `UPDATE chronos.alarms SET next_fire_at = next_fire_at - $2::int * interval '1 millisecond',
     scheduled_for = scheduled_for - $2::int * interval '1 millisecond',
     fire_at = fire_at - $2::int * interval '1 millisecond'
   WHERE id = $1`,
);

/** Moves an alarm's due time `ms` into the past, as if that much time had gone by. */
export async function backdate(db: Executor, id: string, ms: number): Promise<void> {
  await db.query(backdateStmt, [id, ms]);
}

const dueNowStmt = sql(
  'test_due_now',
  `UPDATE chronos.alarms SET next_fire_at = now() - interval '1 millisecond' WHERE id = $1`,
);

/** Makes a waiting retry due now, as if its backoff had passed. */
export async function dueNow(db: Executor, id: string): Promise<void> {
  await db.query(dueNowStmt, [id]);
}

const lapseStmt = sql(
  'test_lapse_lease',
  `UPDATE chronos.alarms SET claimed_at = now() - interval '1 hour' WHERE id = $1`,
);

/** Ages an alarm's lease past any lease time, as if its worker had died. */
export async function lapseLease(db: Executor, id: string): Promise<void> {
  await db.query(lapseStmt, [id]);
}

const rowStmt = sql(
  'test_alarm_row',
  `SELECT id::text, status, next_fire_at, scheduled_for, failure_count, last_error, claimed_at,
     lease_token::text, wake_id::text, last_fired_at, payload::text AS payload, trigger, held_occurrence
   FROM chronos.alarms WHERE id = $1`,
);

export async function alarmRow(db: Executor, id: string): Promise<Row> {
  const [row] = await db.query(rowStmt, [id]);
  if (!row) throw new Error(`no alarm ${id}`);
  return row;
}

const wakesStmt = sql(
  'test_wakes_of',
  `SELECT id::text, status, attempts, fire_count, lateness_ms, delivered_at, last_error
   FROM chronos.wakes WHERE alarm_id = $1 ORDER BY fired_at`,
);

export async function wakesOf(db: Executor, id: string): Promise<Row[]> {
  return db.query(wakesStmt, [id]);
}

/** Wraps an executor to count the statements run through it. */
export function counting(ex: Executor): Executor & { statements: string[] } {
  const statements: string[] = [];
  return {
    statements,
    schema: ex.schema,
    query: <T = Row>(statement: Statement, values?: readonly unknown[]) => {
      statements.push(statement.name);
      return ex.query<T>(statement, values);
    },
    exec: (script: string) => {
      statements.push('exec');
      return ex.exec(script);
    },
  };
}

/**
 * `db` as a dispatcher takes it, with the name of every statement sent through its `query` kept in
 * `statements` (`counting` for a whole store).
 */
export function countingDb(db: Db): { db: Db; statements: string[] } {
  const statements: string[] = [];
  const wrapped = new Proxy(db, {
    get(target, property, receiver) {
      if (property === 'query') {
        return (statement: Statement, values?: readonly unknown[]) => {
          statements.push(statement.name);
          return target.query(statement, values);
        };
      }
      return Reflect.get(target, property, receiver);
    },
  });
  return { db: wrapped, statements };
}

const maxFailures3 = sql('test_max_failures_3', 'UPDATE chronos.alarms SET max_failures = 3 WHERE id = $1');

/**
 * A library timer whose handler always fails, retried to a ceiling of 3 by a worker `workerFor`
 * makes: each failure keeps it active and counted (its backoff skipped here), the third fails it;
 * the handler saw attempts 1, 2, 3 under one wake id. Returns the fires.
 */
export async function expectRetriesToTheCeiling(
  db: Db,
  workerFor: (receiver: RecordingReceiver<ClaimedAlarm>) => Dispatcher,
  timerId: string,
): Promise<Fire<ClaimedAlarm>[]> {
  await db.query(maxFailures3, [timerId]);
  const receiver = new RecordingReceiver<ClaimedAlarm>();
  receiver.behave = (fire) => ({
    ok: false,
    retryable: true,
    error: `handler threw (attempt ${fire.attempt})`,
  });
  const worker = workerFor(receiver);
  for (let failures = 1; failures <= 2; failures++) {
    expect(await worker.runOnce()).toBe(1);
    expect(await alarmRow(db, timerId)).toMatchObject({
      status: 'active',
      failure_count: failures,
      last_error: `handler threw (attempt ${failures})`,
    });
    expect(await worker.runOnce()).toBe(0);
    await dueNow(db, timerId);
  }
  expect(await worker.runOnce()).toBe(1);
  expect(await alarmRow(db, timerId)).toMatchObject({ status: 'failed', failure_count: 3, wake_id: null });
  expect(receiver.fires.map((f) => f.attempt)).toEqual([1, 2, 3]);
  expect(new Set(receiver.fires.map((f) => f.wakeId)).size).toBe(1);
  return receiver.fires;
}
