/**
 * Alarms as every door sees them: create (one or a batch), get, list, change, cancel — for one
 * owner. It takes a typed `AlarmSpec`: each door reads its caller's own form into one first
 * (wire/ for HTTP, MCP and the schedules file; library.ts for the library).
 *
 * It checks meaning (the time is not in the past, the zone is real, the cron is not too
 * frequent, the payload is storable), enforces the owner's quotas, and writes with one statement
 * per change — a batch too, except a large one on a caller's PostgreSQL transaction, written in
 * parts while the next is checked. A refused call writes nothing. Refusals name core
 * fields (`inSeconds`, `3.cron` for the fourth of a batch); each door renames them for its caller.
 */
import { context } from '@opentelemetry/api';
import {
  ChronosError,
  Described,
  invalidInput,
  notFound,
  renameFieldErrors,
  invalidFields,
  type FieldError,
} from '../errors.js';
import { storedForm, type RawJson } from '../json.js';
import { dueAt, nextOccurrence } from '../schedule/next-occurrence.js';
import { newRowIds } from '../store/driver/row-id.js';
import { nextFires } from '../schedule/resolve.js';
import { resolveSchedule, type ResolveOptions } from '../schedule/resolve.js';
import { contextOf, inSpan, traceparentOf } from '../tracing.js';
import {
  alarmsBulkCancel,
  alarmsCancel,
  alarmsFire,
  alarmsPause,
  alarmsResume,
  alarmsFinish,
  alarmsRetry,
  alarmsGet,
  alarmsGetByKey,
  alarmsGetByKeys,
  alarmsList,
  alarmsReschedule,
  type AlarmChanges,
  type AlarmRef,
  type BulkFilter,
  type NewAlarm,
  type ScheduleColumns,
} from '../store/alarms.js';
import { alarmsInsert, alarmsInsertParts, type InsertQuotas } from '../store/alarm-inserts.js';
import type { DbClock } from '../store/driver/db-clock.js';
import type { Executor } from '../store/driver/db.js';
import {
  DEFAULT_MAX_FAILURES,
  DEFAULT_QUEUE,
  pairKey,
  ROUTER_QUEUE,
  type Alarm,
  type AlarmSource,
  type AlarmStatus,
} from '../types.js';
import { LIMITS, SCHEDULE_FIELDS, WINDOW_FIELDS, type AlarmChange, type AlarmSpec } from './alarm-spec.js';
import { idInMessage, isUuid, type Owner } from './owner.js';
import { timePage, type Page, type PageRequest } from './page.js';

export interface Quotas {
  /** Active alarms one owner may have; 0 = unlimited. */
  maxActiveAlarms: number;
  /** Creates per owner per minute; 0 = unlimited. */
  createRatePerMinute: number;
  /** The shortest interval between a cron alarm's fires. */
  minCronIntervalMs: number;
}

export interface AlarmServiceOptions {
  db: Executor;
  dbClock: DbClock;
  quotas: Quotas;
  /** Writes due sooner than this announce themselves to sleeping dispatchers. */
  notifyHorizonMs: number;
  /** How far in the past an `at` may be (clock drift), default 60 s. */
  pastToleranceMs?: number;
  /** The dispatchers' lease: a "fire now" waits for a delivery under a live one. */
  leaseMs?: number;
  /**
   * A batch written on a caller's transaction without quotas goes as statements of this many
   * alarms, overlapped with building the next (see `alarmsInsert`); PostgreSQL only (PGlite runs
   * in this thread: nothing to overlap). Default: one statement.
   */
  insertChunk?: number;
}

export interface WriteOptions {
  source: AlarmSource;
  /** Run on the caller's transaction instead of the service's connection. */
  tx?: Executor;
  /** The W3C traceparent of the request that asks (its server span); else the active context's. */
  trace?: string;
  /** False for an operator's own writes (the schedules file): the owner's quotas do not apply. */
  quotas?: boolean;
}

/** Which of the alarms a list reads (wire/list-query.ts reads a caller's query into one). */
export interface AlarmListFilter extends PageRequest {
  status?: AlarmStatus;
  /** Only the alarms whose label contains this text, ignoring case. */
  labelContains?: string;
}

export interface Created {
  alarm: Alarm;
  /** True when the owner already had an alarm with this idempotency key: that alarm. */
  deduped: boolean;
}

/** One alarm of a batch to create: whose, and what. */
export interface BatchItem {
  owner: Owner;
  spec: AlarmSpec;
}

/**
 * A batch whose items are read one at a time, as they are written: `read(i)` reads the caller's
 * i-th input into an item, or throws its `invalid_input` refusal (paths `<i>.<field>`, `<i>`).
 */
export interface BatchInput {
  readonly length: number;
  read(i: number): BatchItem;
}

export class AlarmService {
  // How a schedule is resolved, made once: a batch resolves one per timer.
  readonly #checkPast: ResolveOptions;
  readonly #anyTime: ResolveOptions;

  constructor(private readonly options: AlarmServiceOptions) {
    const { minCronIntervalMs } = options.quotas;
    this.#checkPast = { pastToleranceMs: options.pastToleranceMs ?? 60_000, minCronIntervalMs };
    this.#anyTime = { pastToleranceMs: Number.POSITIVE_INFINITY, minCronIntervalMs };
  }

  /** Creates an alarm, or returns the owner's existing one for a repeated idempotency key. */
  async create(owner: Owner, spec: AlarmSpec, write: WriteOptions): Promise<Created> {
    try {
      const [created] = await this.createMany([{ owner, spec }], write);
      return created!;
    } catch (error) {
      throw withoutIndex(error);
    }
  }

  /**
   * Creates alarms in order, all or nothing, in one statement: one refused spec (paths
   * `<index>.<field>`) or a full quota writes none of them. Quotas apply when the items share one
   * owner, as an API batch does, and count every alarm the batch would add. `items` may be a
   * `BatchInput`, read one at a time: a large batch on a caller's transaction is then checked part
   * by part while the parts before it are written.
   */
  async createMany(items: readonly BatchItem[] | BatchInput, write: WriteOptions): Promise<Created[]> {
    if (items.length === 0) return [];
    const attributes = { 'chronos.source': write.source, 'chronos.alarms': items.length };
    // Each alarm keeps the create span's traceparent (without a tracer provider, the caller's).
    return inSpan(
      'chronos.create',
      attributes,
      (span) => this.#createMany(items, write, traceparentOf(span) || write.trace || ''),
      contextOf(write.trace, context.active()),
    );
  }

  async #createMany(
    items: readonly BatchItem[] | BatchInput,
    write: WriteOptions,
    traceparent: string,
  ): Promise<Created[]> {
    const ex = write.tx ?? this.options.db;
    const now = await this.options.dbClock.now(ex);
    const read = 'read' in items ? items.read : (i: number) => items[i]!;
    const n = items.length;
    const errors: FieldError[] = [];
    // The rows of items [from, to), or null once any item so far was refused (its errors kept).
    const make = (from: number, to: number): NewAlarm[] | null => {
      const rows = new Array<NewAlarm>(to - from);
      for (let i = from; i < to; i++) {
        let item: BatchItem;
        try {
          item = read(i);
        } catch (error) {
          errors.push(...fieldErrorsOf(error, ''));
          continue;
        }
        try {
          rows[i - from] = this.#newAlarm(item.owner, item.spec, now, write.source, traceparent);
        } catch (error) {
          errors.push(...fieldErrorsOf(error, `${i}.`));
        }
      }
      return errors.length > 0 ? null : rows;
    };

    const limited = write.quotas !== false && this.#quotasApply();
    const chunk = write.tx && !limited ? (this.options.insertChunk ?? n) : n;
    if (n > chunk) {
      // The first part is a quarter of the others, so the database starts sooner.
      const starts = [0];
      for (let at = Math.ceil(chunk / 4); at < n; at += chunk) starts.push(at);
      starts.push(n);
      const parts = starts.length - 1;
      let made = 0;
      const part = (k: number) => {
        made = k + 1;
        return make(starts[k]!, starts[k + 1]!);
      };
      const results = await alarmsInsertParts(ex, part, parts, write.source, this.options.notifyHorizonMs);
      if (results) return results;
      // Stopped at a refused item: the rest is still checked, so the refusal names every field.
      for (let k = made; k < parts; k++) make(starts[k]!, starts[k + 1]!);
      throw invalidFields(errors);
    }
    const alarms = make(0, n);
    if (alarms === null) throw invalidFields(errors);
    if (!limited) return this.#insert(ex, alarms, write.source);
    const quotas = this.#quotasFor(alarms);
    // Alarms that already exist are answered without counting against the quotas.
    const results = new Array<Created>(alarms.length);
    const keyed = alarms.filter((a) => a.idempotencyKey !== '');
    const existing = await alarmsGetByKeys(
      ex,
      keyed.map((a) => ({ ownerDid: a.ownerDid, key: a.idempotencyKey })),
    );
    const fresh: number[] = [];
    alarms.forEach((a, i) => {
      const found = a.idempotencyKey === '' ? undefined : existing.get(pairKey(a.ownerDid, a.idempotencyKey));
      if (found) results[i] = { alarm: found, deduped: true };
      else fresh.push(i);
    });
    const inserted = await this.#insert(
      ex,
      fresh.map((i) => alarms[i]!),
      write.source,
      quotas,
    );
    fresh.forEach((i, j) => (results[i] = inserted[j]!));
    return results;
  }

  async get(owner: Owner, id: string): Promise<Alarm> {
    const alarm = isUuid(id) ? await alarmsGet(this.options.db, owner.did, id) : null;
    if (!alarm) throw notFound(`alarm ${idInMessage(id)}`);
    return alarm;
  }

  /** The owner's alarm with this idempotency key (a library timer's key), or null. */
  getByKey(owner: Owner, key: string, tx?: Executor): Promise<Alarm | null> {
    return alarmsGetByKey(tx ?? this.options.db, owner.did, key);
  }

  /**
   * One page of the owner's alarms, newest first — of every owner when `owner` is null (the
   * operator's view); the filters combine.
   */
  async list(owner: Owner | null, filter: AlarmListFilter): Promise<Page<Alarm>> {
    const { status, labelContains } = filter;
    return timePage(
      filter,
      (limit, after) =>
        alarmsList(this.options.db, owner?.did ?? null, { status, labelContains, limit, after }),
      (r) => r.alarm,
    );
  }

  /**
   * The next `count` due instants of one of the owner's alarms (default
   * `NEXT_FIRES_COUNT.default`), in UTC and in the alarm's zone, as MCP's `next_fires` shows
   * them; none unless it is active.
   */
  async nextFires(owner: Owner, id: string, count: number = NEXT_FIRES_COUNT.default): Promise<NextFire[]> {
    return alarmNextFires(await this.get(owner, id), count);
  }

  /**
   * Reschedules and/or edits an active or paused alarm in one UPDATE (a paused one stays paused);
   * `conflict` otherwise.
   */
  async update(owner: Owner, ref: AlarmRef, change: AlarmChange, write: WriteOptions): Promise<Alarm> {
    const ex = write.tx ?? this.options.db;
    const { clear = [], ...spec } = change;
    let schedule: ScheduleColumns | undefined;
    const newTime = SCHEDULE_FIELDS.some((f) => spec[f] !== undefined);
    const newWindow = WINDOW_FIELDS.some((f) => spec[f] !== undefined || clear.includes(f));
    // A field the change clears does not carry over; one it leaves out does.
    const kept = <F extends 'startsAt' | 'endsAt'>(f: F, current: Alarm) =>
      clear.includes(f) ? undefined : (spec[f] ?? current[f] ?? undefined);
    if (newTime || newWindow || spec.timezone !== undefined) {
      const current = await this.#find(ex, owner, ref);
      const timezone = spec.timezone ?? current.timezone;
      const now = await this.options.dbClock.now(ex);
      // The window and jitter carry over to a new recurring schedule unless the change gives its own.
      const window = {
        startsAt: kept('startsAt', current),
        endsAt: kept('endsAt', current),
        jitterSeconds: clear.includes('jitterSeconds')
          ? undefined
          : (spec.jitterSeconds ?? (current.jitterSeconds || undefined)),
      };
      const recurringSpec = spec.cron !== undefined || spec.rrule !== undefined;
      if (newTime) {
        schedule = this.#resolve(
          recurringSpec ? { ...spec, ...window } : spec,
          timezone,
          now,
          spec.at !== undefined,
        );
      } else if (current.kind === 'cron') {
        // A new zone alone re-reads the same cron in it.
        schedule = this.#resolve({ cron: current.cronExpr, ...window }, timezone, now, false);
      } else if (current.kind === 'rrule') {
        schedule = this.#resolve({ rrule: current.rrule, ...window }, timezone, now, false);
      } else if (newWindow) {
        schedule = this.#resolve(
          { at: (current.fireAt ?? current.nextFireAt).toISOString(), ...spec },
          timezone,
          now,
          false,
        );
      } else {
        const at = (current.fireAt ?? current.nextFireAt).toISOString();
        schedule = this.#resolve({ at }, timezone, now, false);
      }
      if (schedule.jitterSeconds) {
        schedule.nextFireAt = dueAt(
          { id: current.id, jitterSeconds: schedule.jitterSeconds },
          schedule.nextFireAt,
        );
      }
    }
    if (spec.queue !== undefined && spec.queue !== (await this.#find(ex, owner, ref)).queue) {
      throw invalidInput(
        'queue',
        'the queue the timer was created in (a timer cannot move to another queue)',
        spec.queue,
      );
    }
    const changes: AlarmChanges = {
      schedule,
      label: spec.label,
      conversationId: spec.conversationId,
      wakeMessage: spec.wakeMessage,
      payload: spec.payload === undefined ? undefined : payloadText(spec.payload),
      idempotencyKey: spec.idempotencyKey,
      maxFailures: spec.maxFailures,
      requireAck: spec.requireAck,
      expiresAfterSeconds: clear.includes('expiresAfterSeconds') ? 0 : spec.expiresAfterSeconds,
    };
    const updated = await alarmsReschedule(ex, owner.did, refFor(ref), changes, this.options.notifyHorizonMs);
    if (updated) return updated;
    throw notNow(await this.#find(ex, owner, ref), 'only an active or paused alarm can be changed');
  }

  /**
   * The next `count` due instants of a schedule, nothing written (`POST /v1/schedules/preview`),
   * refused exactly as a create would refuse it. Jitter and expiry are accepted and not applied:
   * the jitter depends on an alarm id this schedule does not have yet.
   */
  async preview(spec: AlarmSpec, count: number): Promise<{ fires: NextFire[]; serverTime: Date }> {
    const now = await this.options.dbClock.now();
    const schedule = this.#resolve(spec, spec.timezone, now, true);
    return { fires: nextFires({ ...schedule, jitterSeconds: undefined }, count), serverTime: now };
  }

  /** Stops an active alarm firing (contract §5); pausing a paused one answers it again. */
  async pause(owner: Owner, id: string): Promise<Alarm> {
    const paused = await alarmsPause(this.options.db, owner.did, uuidOf(id));
    if (paused) return paused;
    const current = await this.get(owner, id);
    if (current.status === 'paused') return current;
    throw notNow(current, 'only an active alarm can be paused');
  }

  /**
   * Lets a paused alarm fire again: a cron alarm at its next occurrence after now (no catching
   * up), a one-shot at its own instant, or promptly when that passed while it was paused.
   * Resuming an active one answers it again.
   */
  async resume(owner: Owner, id: string): Promise<Alarm> {
    const current = await this.get(owner, id);
    if (current.status === 'active') return current;
    if (current.status !== 'paused') throw notNow(current, 'only a paused alarm can be resumed');
    const now = await this.options.dbClock.now();
    const dueAt =
      current.kind !== 'once'
        ? nextOccurrence(current, now)
        : new Date(Math.max(current.scheduledFor.getTime(), now.getTime()));
    if (dueAt === null) {
      // Nothing left to fire (its rule ended, or its ends_at passed while paused): it is done.
      const finished = await alarmsFinish(this.options.db, owner.did, current.id);
      if (finished) return finished;
      throw notNow(
        current,
        'it has no occurrence left (its rule ended or its ends_at passed) and a fire now is still pending; cancel it instead',
      );
    }
    const resumed = await alarmsResume(
      this.options.db,
      owner.did,
      current.id,
      dueAt,
      this.options.notifyHorizonMs,
    );
    if (resumed) return resumed;
    return this.resume(owner, id); // changed meanwhile: answer for what it is now
  }

  /**
   * One extra delivery now (`trigger: "manual"`) of an active or paused alarm; a cron alarm's
   * schedule is not moved, a one-shot is then `fired` as usual. `conflict` while a delivery of it
   * is under way (it is being delivered now) and when it is neither active nor paused.
   */
  async fireNow(owner: Owner, id: string): Promise<Alarm> {
    const fired = await alarmsFire(this.options.db, owner.did, uuidOf(id), this.options.leaseMs ?? 30_000);
    if (fired) return fired;
    const current = await this.get(owner, id);
    if (current.status === 'active' || current.status === 'paused') {
      throw new ChronosError(
        'conflict',
        `alarm ${current.id} is being delivered right now; fire it again once this delivery is done`,
      );
    }
    throw notNow(current, 'only an active or paused alarm can be fired now');
  }

  /**
   * A failed alarm becomes active again, its failures forgotten, due now — within the owner's
   * `max_active_alarms`, as a create would be.
   */
  async retry(owner: Owner, id: string): Promise<Alarm> {
    const { maxActiveAlarms } = this.options.quotas;
    const retried = await alarmsRetry(this.options.db, owner.did, uuidOf(id), maxActiveAlarms);
    if (retried) return retried;
    const current = await this.get(owner, id);
    if (current.status === 'failed') throw maxActiveExceeded(maxActiveAlarms);
    throw notNow(current, 'only a failed alarm can be retried');
  }

  /** Cancels the owner's active and paused alarms matching every filter, in one statement. */
  bulkCancel(owner: Owner, filter: BulkFilter): Promise<number> {
    return alarmsBulkCancel(this.options.db, owner.did, filter);
  }

  /** Cancels an alarm; cancelling a cancelled one answers it again; `conflict` when fired or failed. */
  async cancel(owner: Owner, ref: AlarmRef, tx?: Executor): Promise<Alarm> {
    const ex = tx ?? this.options.db;
    const cancelled = await alarmsCancel(ex, owner.did, refFor(ref));
    if (cancelled) return cancelled;
    const current = await this.#find(ex, owner, ref);
    if (current.status === 'cancelled') return current;
    throw notNow(current, 'it cannot be cancelled: there is nothing left to stop');
  }

  /** The row a spec makes, checked for meaning; throws `invalid_input` on core field names. */
  #newAlarm(owner: Owner, spec: AlarmSpec, now: Date, source: AlarmSource, traceparent: string): NewAlarm {
    const queue = spec.queue ?? (source === 'library' ? DEFAULT_QUEUE : ROUTER_QUEUE);
    const requireAck = spec.requireAck ?? source !== 'library';
    if (requireAck && queue !== ROUTER_QUEUE) {
      throw invalidInput(
        'requireAck',
        `false for a timer of queue ${JSON.stringify(queue)} (acknowledgements are tracked for the router's wakes only)`,
        true,
      );
    }
    const schedule = this.#resolve(spec, spec.timezone, now, true);
    // A jittered occurrence is due at an offset drawn from the alarm's id: the id is made here.
    const id = schedule.jitterSeconds ? newRowIds(1).ids[0] : undefined;
    // One literal of fixed shape: a spread here cost microseconds per alarm of a large batch.
    return {
      id,
      kind: schedule.kind,
      fireAt: schedule.fireAt,
      cronExpr: schedule.cronExpr,
      timezone: schedule.timezone,
      nextFireAt:
        id === undefined
          ? schedule.nextFireAt
          : dueAt({ id, jitterSeconds: schedule.jitterSeconds }, schedule.nextFireAt),
      rrule: schedule.rrule,
      rruleStart: schedule.rruleStart,
      startsAt: schedule.startsAt,
      endsAt: schedule.endsAt,
      jitterSeconds: schedule.jitterSeconds,
      expiresAfterSeconds: spec.expiresAfterSeconds,
      ownerDid: owner.did,
      userId: owner.userId,
      label: spec.label ?? '',
      conversationId: spec.conversationId ?? '',
      wakeMessage: spec.wakeMessage ?? '',
      payload: spec.payload === undefined ? '{}' : payloadText(spec.payload),
      storedPayload: spec.payload === undefined ? '{}' : spec.payload.stored,
      idempotencyKey: spec.idempotencyKey ?? '',
      maxFailures: spec.maxFailures ?? DEFAULT_MAX_FAILURES,
      requireAck,
      queue,
      traceparent,
    };
  }

  async #insert(
    ex: Executor,
    alarms: readonly NewAlarm[],
    source: AlarmSource,
    quotas?: InsertQuotas,
  ): Promise<Created[]> {
    const result = await alarmsInsert(ex, alarms, source, this.options.notifyHorizonMs, quotas);
    if ('results' in result) return result.results;
    const { maxActiveAlarms, createRatePerMinute } = this.options.quotas;
    if (result.quota === 'create_rate') {
      throw new ChronosError(
        'quota',
        `create_rate: at most ${createRatePerMinute} alarms a minute per owner; try again in ${result.retryAfterSeconds} s`,
        { limit: 'create_rate', retryAfterSeconds: result.retryAfterSeconds },
      );
    }
    throw maxActiveExceeded(maxActiveAlarms);
  }

  /** True when the owners' quotas limit creates at all. */
  #quotasApply(): boolean {
    const { maxActiveAlarms, createRatePerMinute } = this.options.quotas;
    return maxActiveAlarms > 0 || createRatePerMinute > 0;
  }

  /** The quotas to check for a create of these alarms, all of one owner. */
  #quotasFor(alarms: readonly NewAlarm[]): InsertQuotas {
    const { maxActiveAlarms, createRatePerMinute } = this.options.quotas;
    const ownerDid = alarms[0]!.ownerDid;
    if (alarms.some((a) => a.ownerDid !== ownerDid)) throw new Error('a batch under quotas has one owner');
    return { ownerDid, maxActiveAlarms, createRatePerMinute };
  }

  async #find(ex: Executor, owner: Owner, ref: AlarmRef): Promise<Alarm> {
    if ('key' in ref) {
      const alarm = await alarmsGetByKey(ex, owner.did, ref.key);
      if (!alarm) throw notFound(`timer with key ${JSON.stringify(ref.key)}`);
      return alarm;
    }
    const alarm = isUuid(ref.id) ? await alarmsGet(ex, owner.did, ref.id) : null;
    if (!alarm) throw notFound(`alarm ${idInMessage(ref.id)}`);
    return alarm;
  }

  #resolve(
    spec: Pick<
      AlarmSpec,
      'at' | 'inSeconds' | 'cron' | 'rrule' | 'timezone' | 'startsAt' | 'endsAt' | 'jitterSeconds'
    >,
    timezone: string | undefined,
    now: Date,
    checkPast: boolean,
  ): ScheduleColumns {
    // A spec in its own zone is read as it is: this runs for every timer of a batch, and each
    // object made here was one more for the collector.
    const input =
      timezone === spec.timezone
        ? spec
        : {
            at: spec.at,
            inSeconds: spec.inSeconds,
            cron: spec.cron,
            rrule: spec.rrule,
            startsAt: spec.startsAt,
            endsAt: spec.endsAt,
            jitterSeconds: spec.jitterSeconds,
            timezone,
          };
    return resolveSchedule(input, now, checkPast ? this.#checkPast : this.#anyTime);
  }
}

/** A coming due instant: in UTC, and in the alarm's zone with that zone's offset. */
export interface NextFire {
  utc: string;
  local: string;
}

export const NEXT_FIRES_COUNT = { min: 1, max: 50, default: 5 } as const;

/**
 * The next `count` due instants of an alarm (one for a one-shot; none unless active): what MCP's
 * `next_fires` and `GET /v1/alarms/{id}/next-fires` show.
 */
export function alarmNextFires(alarm: Alarm, count: number): NextFire[] {
  return alarm.status === 'active' ? nextFires(alarm, count) : [];
}

const STANDING: Record<Alarm['status'], string> = {
  active: 'is active',
  paused: 'is paused',
  fired: 'has already fired',
  cancelled: 'is cancelled',
  failed: 'has failed',
  expired: 'has expired (its occurrence was not delivered in time)',
};

/** `conflict`: the alarm is not in a status the change applies to (`rule` says which is). */
function notNow(alarm: Alarm, rule: string): ChronosError {
  return new ChronosError('conflict', `alarm ${alarm.id} ${STANDING[alarm.status]}; ${rule}`);
}

/** An alarm id, or `not_found` (an id that is no UUID names no alarm). */
function uuidOf(id: string): string {
  if (!isUuid(id)) throw notFound(`alarm ${idInMessage(id)}`);
  return id;
}

function refFor(ref: AlarmRef): AlarmRef {
  if ('id' in ref && !isUuid(ref.id)) throw notFound(`alarm ${idInMessage(ref.id)}`);
  return ref;
}

/** The field errors of an `invalid_input` error, under `prefix`; anything else is rethrown. */
function fieldErrorsOf(error: unknown, prefix: string): FieldError[] {
  if (!(error instanceof ChronosError) || error.code !== 'invalid_input') throw error;
  return (renameFieldErrors(error, (path) => `${prefix}${path}`.replace(/\.$/, '')) as ChronosError).errors;
}

/** A one-item batch's refusal without its index (`0.cron` → `cron`). */
function withoutIndex(error: unknown): unknown {
  return renameFieldErrors(error, (path) => path.replace(/^0\.?/, ''));
}

/** The payload's text, checked: at most 64 KiB, and storable as JSONB exactly (I4). */
function payloadText(payload: RawJson): string {
  const text = payload.text;
  const bytes = Buffer.byteLength(text);
  if (bytes > LIMITS.payloadBytes) {
    throw invalidInput(
      'payload',
      'a JSON object of at most 65536 bytes (64 KiB)',
      new Described(`${bytes} bytes`),
    );
  }
  // The limits hold for what PostgreSQL stores and gives back (contract §5, third edition): a
  // number is written out digit by digit (1e99999 is 100,000 bytes), spaces are added. Measured
  // here in one pass without recursion, before anything recursive sees the payload.
  const stored = storedForm(text);
  if (stored.depth > LIMITS.payloadDepth) {
    throw invalidInput(
      'payload',
      `a JSON object nested at most ${LIMITS.payloadDepth} levels deep`,
      new Described(`${stored.depth} levels`),
    );
  }
  if (stored.badNumber !== undefined) {
    throw invalidInput(
      'payload',
      'numbers PostgreSQL can store (at most 16,383 digits after the point, once the exponent is applied)',
      new Described(stored.badNumber),
    );
  }
  if (stored.bytes > LIMITS.payloadBytes) {
    throw invalidInput(
      'payload',
      'a payload of at most 65536 bytes (64 KiB) as stored',
      new Described(
        `${stored.bytes} bytes as PostgreSQL would store and return it (a number such as 1e99999 is stored as its 100,000 digits)`,
      ),
    );
  }
  if (/(^|[^\\])(\\\\)*\\u0000/.test(text)) {
    throw invalidInput(
      'payload',
      'JSON without \\u0000 in its strings (PostgreSQL cannot store it)',
      new Described('a \\u0000'),
    );
  }
  if (hasUnpairedSurrogateEscape(text)) {
    throw invalidInput(
      'payload',
      'JSON whose strings are well-formed Unicode (PostgreSQL refuses an unpaired surrogate escape such as \\ud800)',
      new Described('an unpaired surrogate escape'),
    );
  }
  return text;
}

/** True when a JSON text escapes half a surrogate pair (such as a lone \\ud800), which JSONB refuses. */
function hasUnpairedSurrogateEscape(text: string): boolean {
  let pendingHigh = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 0x5c) {
      if (pendingHigh) return true;
      continue;
    }
    const next = text[i + 1];
    if (next !== 'u') {
      if (pendingHigh) return true;
      i++; // a two-character escape, such as an escaped quote or backslash
      continue;
    }
    const unit = parseInt(text.slice(i + 2, i + 6), 16);
    i += 5;
    const high = unit >= 0xd800 && unit <= 0xdbff;
    const low = unit >= 0xdc00 && unit <= 0xdfff;
    if (pendingHigh !== low) return true;
    pendingHigh = high;
  }
  return pendingHigh;
}

/** An owner at their `max_active_alarms` (active and paused alarms count). */
function maxActiveExceeded(maxActiveAlarms: number): ChronosError {
  return new ChronosError(
    'quota',
    `max_active_alarms: at most ${maxActiveAlarms} active or paused alarms per owner; cancel some first`,
    { limit: 'max_active_alarms', retryAfterSeconds: 60 },
  );
}
