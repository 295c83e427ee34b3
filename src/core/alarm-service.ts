/**
 * Alarms as every surface sees them: create, get, list, reschedule, cancel — for one owner.
 *
 * HTTP, MCP and the library are thin adapters over this. It validates (shape, then meaning),
 * enforces the owner's quotas, and writes with one statement per change; a refused request
 * writes nothing.
 */
import { ChronosError, invalidInput, notFound } from '../errors.js';
import {
  createAlarmSchema,
  LIMITS,
  parseBody,
  patchAlarmSchema,
  type CreateAlarmBody,
} from '../wire/alarm-input.js';
import { isUuid, type Owner } from './owner.js';
import { resolveSchedule, type ScheduleInput } from '../schedule/resolve.js';
import {
  alarmsCancel,
  alarmsGet,
  alarmsGetByKey,
  alarmsInsert,
  alarmsList,
  alarmsReschedule,
  type AlarmChanges,
  type AlarmRef,
  type ScheduleColumns,
} from '../store/alarms.js';
import type { DbClock } from '../store/db-clock.js';
import type { Executor } from '../store/db.js';
import type { Alarm, AlarmSource, AlarmStatus, Page } from '../types.js';

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
}

export interface WriteOptions {
  source: AlarmSource;
  /**
   * The payload's own JSON text when the caller has it (HTTP reads it from the raw body), so
   * numbers pass through digit for digit. Otherwise the parsed payload is serialised.
   */
  rawPayload?: string;
  /** Run on the caller's transaction instead of the service's connection. */
  tx?: Executor;
}

export const STATUSES: readonly AlarmStatus[] = ['active', 'fired', 'cancelled', 'failed'];

export class AlarmService {
  constructor(private readonly options: AlarmServiceOptions) {}

  /** Creates an alarm, or returns the owner's existing one for a repeated idempotency key. */
  async create(
    owner: Owner,
    body: unknown,
    write: WriteOptions,
  ): Promise<{ alarm: Alarm; deduped: boolean }> {
    const input = parseBody(createAlarmSchema, body);
    const ex = write.tx ?? this.options.db;
    const now = await this.options.dbClock.now(ex);
    const schedule = this.#resolve(input, now, true)!;
    const payload = payloadText(input.payload, write.rawPayload);

    const key = input.idempotency_key ?? '';
    if (key !== '') {
      const existing = await alarmsGetByKey(ex, owner.did, key);
      if (existing) return { alarm: existing, deduped: true };
    }
    const result = await alarmsInsert(
      ex,
      {
        ...schedule,
        ownerDid: owner.did,
        userId: owner.userId,
        label: input.label ?? '',
        conversationId: input.conversation_id ?? '',
        wakeMessage: input.wake_message ?? '',
        payload,
        idempotencyKey: key,
        maxFailures: input.max_failures ?? 5,
        requireAck: input.require_ack ?? write.source !== 'library',
        source: write.source,
      },
      this.options.notifyHorizonMs,
      this.options.quotas,
    );
    if ('alarm' in result) return result;
    const { maxActiveAlarms, createRatePerMinute } = this.options.quotas;
    if (result.quota === 'create_rate') {
      throw new ChronosError(
        'quota',
        `create_rate: at most ${createRatePerMinute} alarms a minute per owner; try again in ${result.retryAfterSeconds} s`,
        { limit: 'create_rate', retryAfterSeconds: result.retryAfterSeconds },
      );
    }
    throw new ChronosError(
      'quota',
      `max_active_alarms: at most ${maxActiveAlarms} active alarms per owner; cancel some first`,
      { limit: 'max_active_alarms', retryAfterSeconds: 60 },
    );
  }

  async get(owner: Owner, id: string): Promise<Alarm> {
    const alarm = isUuid(id) ? await alarmsGet(this.options.db, owner.did, id) : null;
    if (!alarm) throw notFound(`alarm ${JSON.stringify(id)}`);
    return alarm;
  }

  async list(
    owner: Owner,
    query: { status?: unknown; limit?: unknown; cursor?: unknown },
  ): Promise<Page<Alarm>> {
    const status = parseStatus(query.status);
    const limit = parseLimit(query.limit);
    const afterId = parseCursor(query.cursor);
    const rows = await alarmsList(this.options.db, owner.did, { status, limit: limit + 1, afterId });
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return { items, nextCursor: rows.length > limit && last ? encodeCursor(last.id) : null };
  }

  /** Reschedules and/or edits an active alarm in one UPDATE; `conflict` when it is not active. */
  async update(owner: Owner, ref: AlarmRef, body: unknown, write: WriteOptions): Promise<Alarm> {
    const input = parseBody(patchAlarmSchema, body);
    const ex = write.tx ?? this.options.db;
    let schedule: ScheduleColumns | undefined;
    const touchesSchedule = ['at', 'in_seconds', 'cron', 'timezone'].some((f) => f in input);
    if (touchesSchedule) {
      const current = await this.#find(ex, owner, ref);
      const merged: ScheduleInput = { timezone: input.timezone ?? current.timezone };
      if (input.at !== undefined || input.in_seconds !== undefined || input.cron !== undefined) {
        Object.assign(merged, { at: input.at, in_seconds: input.in_seconds, cron: input.cron });
      } else if (current.kind === 'cron') {
        merged.cron = current.cronExpr; // a new zone alone re-reads the same cron in it
      } else {
        merged.at = current.fireAt ?? current.nextFireAt;
      }
      schedule = this.#resolve(merged, await this.options.dbClock.now(ex), input.at !== undefined);
    }
    const changes: AlarmChanges = {
      schedule,
      label: input.label,
      conversationId: input.conversation_id,
      wakeMessage: input.wake_message,
      payload: input.payload === undefined ? undefined : payloadText(input.payload, write.rawPayload),
      idempotencyKey: input.idempotency_key,
      maxFailures: input.max_failures,
      requireAck: input.require_ack,
    };
    let updated: Alarm | null;
    try {
      updated = await alarmsReschedule(ex, owner.did, refFor(ref), changes, this.options.notifyHorizonMs);
    } catch (error) {
      if ((error as { code?: string }).code === '23505') {
        throw new ChronosError('conflict', 'idempotency_key: another of your alarms already uses this key');
      }
      throw error;
    }
    if (updated) return updated;
    const current = await this.#find(ex, owner, ref);
    throw new ChronosError(
      'conflict',
      `alarm ${current.id} is ${current.status}; only an active alarm can be changed`,
    );
  }

  /** Cancels an alarm; cancelling a cancelled one answers it again; `conflict` when fired or failed. */
  async cancel(owner: Owner, ref: AlarmRef, tx?: Executor): Promise<Alarm> {
    const ex = tx ?? this.options.db;
    const cancelled = await alarmsCancel(ex, owner.did, refFor(ref));
    if (cancelled) return cancelled;
    const current = await this.#find(ex, owner, ref);
    if (current.status === 'cancelled') return current;
    throw new ChronosError(
      'conflict',
      `alarm ${current.id} has already ${current.status === 'fired' ? 'fired' : 'failed'}; it cannot be cancelled`,
    );
  }

  async #find(ex: Executor, owner: Owner, ref: AlarmRef): Promise<Alarm> {
    if ('key' in ref) {
      const alarm = await alarmsGetByKey(ex, owner.did, ref.key);
      if (!alarm) throw notFound(`timer with key ${JSON.stringify(ref.key)}`);
      return alarm;
    }
    const alarm = isUuid(ref.id) ? await alarmsGet(ex, owner.did, ref.id) : null;
    if (!alarm) throw notFound(`alarm ${JSON.stringify(ref.id)}`);
    return alarm;
  }

  #resolve(input: ScheduleInput, now: Date, checkPast: boolean): ScheduleColumns {
    return resolveSchedule(input, now, {
      pastToleranceMs: checkPast ? (this.options.pastToleranceMs ?? 60_000) : Number.POSITIVE_INFINITY,
      minCronIntervalMs: this.options.quotas.minCronIntervalMs,
    });
  }
}

function refFor(ref: AlarmRef): AlarmRef {
  if ('id' in ref && !isUuid(ref.id)) throw notFound(`alarm ${JSON.stringify(ref.id)}`);
  return ref;
}

function payloadText(parsed: CreateAlarmBody['payload'], raw: string | undefined): string {
  const text = raw ?? JSON.stringify(parsed ?? {});
  if (Buffer.byteLength(text) > LIMITS.payloadBytes) {
    throw invalidInput(
      'payload',
      'a JSON object of at most 65536 bytes (64 KiB)',
      `${Buffer.byteLength(text)} bytes`,
    );
  }
  if (/(^|[^\\])(\\\\)*\\u0000/.test(text)) {
    throw invalidInput(
      'payload',
      'JSON without \\u0000 in its strings (PostgreSQL cannot store it)',
      'a \\u0000',
    );
  }
  if (hasUnpairedSurrogateEscape(text)) {
    throw invalidInput(
      'payload',
      'JSON whose strings are well-formed Unicode (PostgreSQL refuses an unpaired surrogate escape such as \\ud800)',
      'an unpaired surrogate escape',
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

function parseStatus(value: unknown): AlarmStatus | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value === 'string' && (STATUSES as readonly string[]).includes(value))
    return value as AlarmStatus;
  throw invalidInput('status', `one of ${STATUSES.join(', ')}`, value);
}

export function parseLimit(value: unknown, fallback = 50): number {
  if (value === undefined || value === '') return fallback;
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'string' && /^\d+$/.test(value)
        ? Number(value)
        : NaN;
  if (!Number.isInteger(n) || n < 1 || n > 200)
    throw invalidInput('limit', 'a whole number from 1 to 200', value);
  return n;
}

export function encodeCursor(id: string): string {
  return Buffer.from(id).toString('base64url');
}

export function parseCursor(value: unknown): string | undefined {
  if (value === undefined || value === '' || value === null) return undefined;
  const id = typeof value === 'string' ? Buffer.from(value, 'base64url').toString() : '';
  if (!isUuid(id)) throw invalidInput('cursor', 'the next_cursor of a previous page', value);
  return id;
}
