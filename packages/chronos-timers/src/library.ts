/**
 * The TypeScript library (contract §9): timers written in the caller's own transaction, over
 * the same service as `chronos serve`.
 *
 * `schedule(tx, spec)` and `scheduleMany(tx, specs)` insert on `tx` (a large batch as a few
 * statements, all or nothing), so the timers commit with the caller's state change or not at all
 * (I6). `work(handler)` runs a
 * dispatcher of one queue (§4a) that calls `handler` for each due timer, at least once;
 * deduplicate on `fire.wakeId` (or on `key` for one-shot timers). A refused spec throws a
 * `ChronosError` whose `errors[].path` names the field as the caller wrote it (`inSeconds`,
 * `specs.3.at`), unknown keys included.
 */
import type pg from 'pg';
import { z } from 'zod';
import type { Clock } from './clock.js';
import { databaseUrlError, DEFAULT_DATA_DIR, DEFAULT_SCHEMA, loadConfig } from './config.js';
import { QUEUE_NAME, SCHEDULE_FIELDS, SPEC_RULES, type SpecField } from './core/alarm-spec.js';
import type { BatchItem } from './core/alarm-service.js';
import { LIBRARY_OWNER, OWNER_EXPECTED, parseOwner, type Owner } from './core/owner.js';
import { isStorable } from './core/text.js';
import { ChronosError, invalidFields, invalidInput, renameFieldErrors, type FieldError } from './errors.js';
import { CLAIM_MODES, type ClaimMode, type DispatcherDelivery } from './dispatch/dispatcher.js';
import { silentLogger, type Logger } from './logger.js';
import { HandlerReceiver, type TimerFire, type TimerHandler } from './receivers/handler.js';
import { LogReceiver } from './receivers/log.js';
import { ChronosCore, type Transaction } from './core-service.js';
import type { PGliteLike } from './store/driver/db.js';
import { DEFAULT_QUEUE, ROUTER_QUEUE, type Alarm } from './types.js';
import { formErrors, type Form } from './wire/fields.js';
import { SPEC_ALIASES, toSpec } from './wire/alarm-input.js';

export interface ChronosOptions {
  /** A PostgreSQL connection string. */
  databaseUrl?: string;
  /** Or a node-postgres pool of your own (Chronos does not end it). */
  pool?: pg.Pool;
  /** Or a directory for the embedded store (PGlite), locked for this process. */
  dataDir?: string;
  /** Or a PGlite instance of your own (Chronos does not close it). */
  pglite?: PGliteLike;
  /** The PostgreSQL schema of Chronos's tables (default `chronos`). */
  schema?: string;
  clock?: Clock;
  logger?: Logger;
  /** The fallback poll of `work()`, and the horizon within which new timers wake it at once. */
  pollIntervalMs?: number;
  /**
   * `transaction` when `databaseUrl` (or `pool`) goes through PgBouncer in transaction mode:
   * statements are sent unnamed, and LISTEN only through `listenUrl` (else `work()` polls every
   * `pollIntervalMs`). Default `none`.
   */
  pooler?: 'none' | 'transaction';
  /** A URL that reaches PostgreSQL directly, for LISTEN, when `databaseUrl` goes through a pooler. */
  listenUrl?: string;
  /**
   * How long a finished timer (fired, cancelled, failed) is kept, with its fires, before a
   * `work()` of its queue deletes it — freeing its key (default 30 days; 0: at the next pass).
   */
  finishedTimerRetentionMs?: number;
  /** How long the record of one fire is kept, for a timer still running (default 7 days). */
  fireRetentionMs?: number;
}

export interface TimerSpec {
  /** Your own id for the timer, unique per owner: scheduling the same key again is a no-op. */
  key: string;
  at?: Date | string;
  inSeconds?: number;
  cron?: string;
  /** An RFC 5545 recurrence rule, e.g. `FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=9;BYMINUTE=0;BYSECOND=0`. */
  rrule?: string;
  timezone?: string;
  /** For cron and rrule: no occurrence before it (an rrule counts from it). */
  startsAt?: Date | string;
  /** For cron and rrule: no occurrence after it; the timer is then fired (done). */
  endsAt?: Date | string;
  /** For cron and rrule: each occurrence due up to this many seconds late (1–3600), never early. */
  jitterSeconds?: number;
  /** An occurrence not delivered this many seconds after it was due is given up (1–31,536,000). */
  expiresAfterSeconds?: number;
  payload?: Record<string, unknown>;
  /** Default `did:matrix:00000000-0000-0000-0000-000000000000:lib`. */
  owner?: string;
  /** Who delivers it (default `default`): a `work()` of this queue; `router` for `chronos serve`. */
  queue?: string;
  label?: string;
  maxFailures?: number;
  /** For a wake the service delivers (`queue: 'router'`): the agent's message and conversation. */
  wakeMessage?: string;
  conversationId?: string;
  /** Only for `queue: 'router'` (default false). */
  requireAck?: boolean;
}

export type RescheduleSpec = Omit<TimerSpec, 'key' | 'queue'>;

/**
 * A timer as `schedule()`, `scheduleMany()`, `get()`, `cancel()` and `reschedule()` give it back
 * (contract §9): its row, `payload` the plain object that was given (`t.payload.orderId`), and
 * `payloadText` the payload's JSON text as stored, verbatim, for numbers past double precision.
 * `P` is what you say the payload is (`schedule<{ orderId: string }>(…)`); it is not checked.
 */
export interface Timer<P = Record<string, unknown>> extends Omit<Alarm, 'payload'> {
  /** The payload parsed (numbers beyond double precision lose digits here: use `payloadText`). */
  payload: P;
  /** The payload as stored (PostgreSQL's JSONB text, every digit kept). */
  payloadText: string;
}

/** What a `work()` handler receives (the former `TimerFire`). */
export type Fire<P = Record<string, unknown>> = Omit<TimerFire, 'payload'> & { payload: P };
/** A `work()` handler: a throw or a rejection is a failed delivery, retried with backoff. */
export type FireHandler<P = Record<string, unknown>> = (fire: Fire<P>) => unknown;

export interface WorkOptions {
  /** The queue whose timers this worker runs (default `default`). */
  queue?: string;
  concurrency?: number;
  batchSize?: number;
  leaseMs?: number;
  retryBaseMs?: number;
  retryMaxMs?: number;
  /**
   * Keep a wake row and an attempt row for every fire, as `chronos serve` does. Default false (true
   * for the queue `router`): a fire is kept on its timer's row alone — `status`, `last_fired_at`,
   * `failure_count`, `last_error` — which is what makes the drain fast. Turn it on to see this queue's fires in
   * the dashboard's lateness chart and in `GET /v1/alarms/{id}/wakes`.
   */
  history?: boolean;
  /**
   * How a worker holds the timers it claimed while their handlers run. `lease` (the default): it
   * marks them claimed for `leaseMs` and lets go of the database; outcomes are written as
   * handlers finish. `transaction` (PostgreSQL, without history): it locks a batch in a
   * transaction that stays open while the batch's handlers run, writes their outcomes in it and
   * commits — less of PostgreSQL's CPU a fire, for quick handlers (bench/README.md, "Drain"). A
   * handler must then not change its own timer through another connection (it would wait on the lock until the
   * delivery times out), and each batch holds a pooled connection while it runs. On the embedded
   * store, whose one connection a batch would hold, the worker leases.
   */
  claim?: ClaimMode;
}

export interface Worker {
  /** Stops claiming; finishes what it holds within `graceMs` and releases the rest. */
  stop(graceMs?: number): Promise<void>;
  /** One claim-deliver-record pass (for tests). */
  runOnce(): Promise<number>;
}

export interface Chronos {
  migrate(): Promise<string[]>;
  schedule<P = Record<string, unknown>>(tx: unknown, spec: TimerSpec): Promise<Timer<P>>;
  /** Many timers in one statement on `tx`, in order, all or nothing. */
  scheduleMany<P = Record<string, unknown>>(tx: unknown, specs: readonly TimerSpec[]): Promise<Timer<P>[]>;
  cancel<P = Record<string, unknown>>(tx: unknown, key: string, owner?: string): Promise<Timer<P>>;
  reschedule<P = Record<string, unknown>>(tx: unknown, key: string, spec: RescheduleSpec): Promise<Timer<P>>;
  /** The timer with this key, or null. */
  get<P = Record<string, unknown>>(key: string, owner?: string): Promise<Timer<P> | null>;
  work<P = Record<string, unknown>>(handler: FireHandler<P>, options?: WorkOptions): Worker;
  close(): Promise<void>;
  /** The embedded store, for your own transactions on it (when Chronos opened one). */
  readonly pglite: PGliteLike | null;
}

type LibraryField = SpecField | 'owner';

const KEY_MAX = 200;
const KEY_EXPECTED = `a non-empty string of at most ${KEY_MAX} characters naming the timer, e.g. "invoice:42:expire"`;

/** The library's names: the core's, but `key` for the idempotency key, and an `owner`. */
export const timerForm: Form<LibraryField> = {
  names: {
    idempotencyKey: 'key',
    at: 'at',
    inSeconds: 'inSeconds',
    cron: 'cron',
    rrule: 'rrule',
    timezone: 'timezone',
    startsAt: 'startsAt',
    endsAt: 'endsAt',
    jitterSeconds: 'jitterSeconds',
    expiresAfterSeconds: 'expiresAfterSeconds',
    payload: 'payload',
    owner: 'owner',
    queue: 'queue',
    label: 'label',
    maxFailures: 'maxFailures',
    wakeMessage: 'wakeMessage',
    conversationId: 'conversationId',
    requireAck: 'requireAck',
  },
  rules: {
    ...SPEC_RULES,
    // Every timer has a key: checked by a plain predicate first, by the schema only when it says
    // no (zod's checks weighed on a cold batch's CPU; bench/README.md, "Bulk scheduling").
    idempotencyKey: {
      schema: z.string().min(1).max(KEY_MAX).refine(isStorable, { message: 'storable' }),
      accepts: (v) => typeof v === 'string' && v.length >= 1 && v.length <= KEY_MAX && isStorable(v),
      expected: KEY_EXPECTED,
    },
    queue: { schema: z.string().regex(QUEUE_NAME), expected: SPEC_RULES.queue.expected },
    // A Date is taken as it is (an invalid one is refused here, as a bad string is later).
    // `at` and `payload` are checked by a plain predicate: no schema is published for the
    // library's form, and zod's union and record allocated half of what reading a timer did.
    at: {
      schema: z.custom<string | Date>(isAt),
      accepts: isAt,
      expected: SPEC_RULES.at.expected.replace('like', 'or a Date, like'),
    },
    startsAt: {
      schema: z.custom<string | Date>(isAt),
      accepts: isAt,
      expected: SPEC_RULES.startsAt.expected.replace('like', 'or a Date, like'),
    },
    endsAt: {
      schema: z.custom<string | Date>(isAt),
      accepts: isAt,
      expected: SPEC_RULES.endsAt.expected.replace('like', 'or a Date, like'),
    },
    // Any plain object (JSON.stringify writes it): a class instance, a Map or an array is refused.
    payload: {
      schema: z.custom<Record<string, unknown>>(isPlainObject),
      accepts: isPlainObject,
      expected: SPEC_RULES.payload.expected,
    },
    owner: { schema: z.string(), expected: OWNER_EXPECTED },
  },
  aliases: { ...SPEC_ALIASES, idempotencykey: 'idempotencyKey', name: 'idempotencyKey' },
};

function isAt(value: unknown): boolean {
  return typeof value === 'string' || (value instanceof Date && !Number.isNaN(value.getTime()));
}

function isPlainObject(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

const { idempotencyKey: _key, queue: _queue, ...changeNames } = timerForm.names;
const changeForm: Form<Exclude<LibraryField, 'idempotencyKey' | 'queue'>> = {
  names: changeNames,
  rules: timerForm.rules,
  aliases: SPEC_ALIASES,
};

/** `pooler` and `listenUrl`, checked as `loadConfig` checks their variables. */
function connectionOptions(options: ChronosOptions): {
  dbPooler: 'none' | 'transaction';
  listenUrl?: string;
} {
  const errors: FieldError[] = [];
  for (const name of ['databaseUrl', 'listenUrl'] as const) {
    const value = options[name];
    if (value === undefined) continue;
    const error =
      typeof value === 'string'
        ? databaseUrlError(value, name)
        : invalidInput(name, 'a postgres:// URL', value).errors[0]!;
    if (error) errors.push(error);
  }
  const pooler = options.pooler ?? 'none';
  if (pooler !== 'none' && pooler !== 'transaction') {
    errors.push(invalidInput('pooler', '"none" or "transaction"', pooler).errors[0]!);
  }
  for (const name of ['pooler', 'listenUrl'] as const) {
    if (options[name] !== undefined && options.databaseUrl === undefined && options.pool === undefined) {
      errors.push({ path: name, message: `${name}: expected only with databaseUrl or pool, got neither` });
    }
  }
  if (errors.length > 0) throw invalidFields(errors);
  return { dbPooler: pooler, listenUrl: options.listenUrl };
}

/** A retention option: a whole number of milliseconds, 0 or more, or absent. */
function retentionOption(
  options: ChronosOptions,
  name: 'finishedTimerRetentionMs' | 'fireRetentionMs',
): number | undefined {
  const value = options[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw invalidInput(name, 'a whole number of milliseconds, 0 or more', value);
  }
  return value;
}

/** A core path in the library's names, under `prefix` (`specs.3`). */
const libraryPath = (prefix: string) => (path: string) => {
  const [head, ...rest] = path.split('.');
  const index = head !== undefined && /^\d+$/.test(head) ? head : undefined;
  const field = index === undefined ? head : rest.shift();
  const named =
    field !== undefined && Object.hasOwn(timerForm.names, field)
      ? timerForm.names[field as LibraryField]
      : field;
  return [prefix, index, named, ...rest].filter((s) => s !== undefined && s !== '').join('.');
};

export async function createChronos(options: ChronosOptions): Promise<Chronos> {
  const stores = ['databaseUrl', 'pool', 'dataDir', 'pglite'].filter(
    (k) => options[k as keyof ChronosOptions] !== undefined,
  );
  if (stores.length !== 1) {
    throw invalidInput(
      'options',
      'exactly one of databaseUrl, pool, dataDir or pglite',
      stores.length === 0 ? undefined : `${stores.join(' and ')}`,
    );
  }
  const connection = connectionOptions(options);
  const pollIntervalMs = options.pollIntervalMs ?? 1_000;
  const defaults = loadConfig({});
  const config = {
    ...defaults,
    ...connection,
    alarmRetentionMs: retentionOption(options, 'finishedTimerRetentionMs') ?? defaults.alarmRetentionMs,
    retentionMs: retentionOption(options, 'fireRetentionMs') ?? defaults.retentionMs,
    databaseUrl: options.databaseUrl,
    dataDir: options.dataDir ?? DEFAULT_DATA_DIR,
    schema: options.schema ?? DEFAULT_SCHEMA,
    // An application's own timers: no per-owner quotas, any cron down to a second.
    maxActiveAlarms: 0,
    createRatePerMinute: 0,
    minCronIntervalMs: 1_000,
    pollIntervalMs,
  };
  const service = await ChronosCore.openCore(config, {
    pool: options.pool,
    pglite: options.pglite,
    clock: options.clock,
    logger: options.logger ?? silentLogger,
    // The library's own workers name their receivers; the router's is `chronos serve`'s.
    receiver: new LogReceiver(silentLogger),
    migrate: false,
  });
  const workers = new Set<Worker>();
  const on = (tx: unknown): Transaction | undefined =>
    tx === null || tx === undefined ? undefined : service.transaction(tx);

  const write = async <T>(prefix: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      throw renameFieldErrors(error, libraryPath(prefix));
    }
  };

  return {
    get pglite() {
      return service.pglite;
    },
    migrate: () => service.migrate(),

    async schedule<P>(tx: unknown, spec: TimerSpec) {
      const item = readTimer(spec, '');
      return write('', async () =>
        toTimer<P>(
          (await service.alarms.create(item.owner, item.spec, { source: 'library', tx: on(tx) })).alarm,
        ),
      );
    },

    async scheduleMany<P>(tx: unknown, specs: readonly TimerSpec[]) {
      if (!Array.isArray(specs)) throw invalidInput('specs', 'an array of timer specs', specs);
      // Each spec is read as its part of the batch is written (see AlarmService.createMany).
      const items = { length: specs.length, read: (i: number) => readTimer(specs[i], String(i)) };
      return write('specs', async () =>
        (await service.alarms.createMany(items, { source: 'library', tx: on(tx) })).map((c) =>
          toTimer<P>(c.alarm),
        ),
      );
    },

    cancel: async <P>(tx: unknown, key: string, owner?: string) =>
      toTimer<P>(
        await write('', () => service.alarms.cancel(ownerOf(owner, 'owner'), { key: keyOf(key) }, on(tx))),
      ),

    async reschedule<P>(tx: unknown, key: string, spec: RescheduleSpec) {
      const { values, errors } = formErrors(spec, changeForm, {
        noun: 'spec',
        oneOf: { fields: SCHEDULE_FIELDS, exactly: false },
      });
      if (errors.length > 0) throw invalidFields(errors);
      const { owner, ...fields } = values;
      const target = ownerOf(owner, 'owner');
      return toTimer<P>(
        await write('', () =>
          service.alarms.update(target, { key: keyOf(key) }, toSpec(fields), {
            source: 'library',
            tx: on(tx),
          }),
        ),
      );
    },

    async get<P>(key: string, owner?: string) {
      const alarm = await service.alarms.getByKey(ownerOf(owner, 'owner'), keyOf(key));
      return alarm === null ? null : toTimer<P>(alarm);
    },

    work<P>(handler: FireHandler<P>, work: WorkOptions = {}) {
      const queue = work.queue ?? DEFAULT_QUEUE;
      if (typeof queue !== 'string' || !QUEUE_NAME.test(queue)) {
        throw invalidInput('queue', SPEC_RULES.queue.expected, queue);
      }
      const receiver = new HandlerReceiver(handler as TimerHandler);
      // The queue `router` is `chronos serve`'s, whose wake tracking reads the history.
      const history = work.history ?? queue === ROUTER_QUEUE;
      // Finished timers kept for no time: a fired one-shot is deleted as its fire is recorded.
      const deleteFired = config.alarmRetentionMs === 0;
      const claim = work.claim ?? 'lease';
      if (!CLAIM_MODES.includes(claim)) throw invalidInput('claim', '"lease" or "transaction"', claim);
      if (claim === 'transaction' && history) {
        throw invalidInput('claim', '"lease" when history is kept (a held claim writes no history)', claim);
      }
      const delivery: DispatcherDelivery = history ? { receiver } : { receiver, history, deleteFired, claim };
      const dispatcher = service.worker(queue, delivery, {
        leaseMs: work.leaseMs ?? config.leaseMs,
        batchSize: work.batchSize,
        concurrency: work.concurrency,
        retry: { baseMs: work.retryBaseMs ?? 1_000, maxMs: work.retryMaxMs ?? 3_600_000 },
      });
      // Nothing else deletes this queue's finished timers when no `chronos serve` shares the database.
      const pruner = service.pruner([queue]);
      // The pruner's first pass after the dispatcher's first claim has gone out: what is due
      // first (bench/README.md, "Drain").
      const started = dispatcher.start().then(() => pruner.start());
      const worker: Worker = {
        async stop(graceMs) {
          await started;
          await Promise.all([dispatcher.stop(graceMs), pruner.stop()]);
          workers.delete(worker);
        },
        runOnce: () => dispatcher.runOnce(),
      };
      workers.add(worker);
      return worker;
    },

    async close() {
      await Promise.all([...workers].map((w) => w.stop()));
      await service.close();
    },
  };
}

/** The row as the library shows it: the payload a plain object, its stored text beside it. */
function toTimer<P>(alarm: Alarm): Timer<P> {
  const { payload, ...rest } = alarm;
  return { ...rest, payload: payload.parse() as P, payloadText: payload.text };
}

const REQUIRED: readonly LibraryField[] = ['idempotencyKey'];
const ONE_SCHEDULE = { fields: SCHEDULE_FIELDS, exactly: true };

/**
 * Reads one spec in the library's names; throws one `invalid_input` with its every refusal, its
 * paths under `path` (`3.inSeconds` for the fourth of a batch).
 */
function readTimer(input: unknown, path: string): BatchItem {
  const read = formErrors(input, timerForm, { path, noun: 'spec', required: REQUIRED, oneOf: ONE_SCHEDULE });
  const errors = read.errors;
  // The values become the spec as they are (toSpec takes them over); `owner` rides along unread.
  const fields = read.values;
  const owner = fields.owner;
  let parsed: Owner = APPLICATION;
  if (owner !== undefined && owner !== null) {
    try {
      parsed = parseOwner(owner, path ? `${path}.owner` : 'owner');
    } catch (error) {
      errors.push(...(error as ChronosError).errors);
    }
  }
  if (errors.length > 0) throw invalidFields(errors);
  return { owner: parsed, spec: toSpec(fields) };
}

// Read once: most timers are the application's own.
const APPLICATION = parseOwner(LIBRARY_OWNER);

function ownerOf(owner: unknown, path: string): Owner {
  return owner === undefined || owner === null ? APPLICATION : parseOwner(owner, path);
}

function keyOf(key: unknown): string {
  if (typeof key !== 'string' || key === '') throw invalidInput('key', KEY_EXPECTED, key);
  return key;
}
