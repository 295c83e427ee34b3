/**
 * Reconciles the alarms with a schedules file (contract §13), entry by entry, as one
 * all-or-nothing transaction. The file's text is read by its door (wire/schedules-file.ts); this
 * takes the typed entries.
 *
 * For each entry, against what the file last said about its (owner, key) — kept normalised in
 * `schedule_file_entries` — and the alarm with that owner and key:
 * - said the same last time: nothing (a restart, a second instance, an unrelated edit);
 * - no alarm: one is created (source `file`, queue `router`, no per-owner quotas: the file is
 *   the operator's);
 * - an alarm, active or paused: the fields the edit changed — and only those, so a field the
 *   agent changed over the API since is kept unless the file's entry for it changed too — are
 *   applied as a PATCH would apply them; a field the alarm already has is not "changed";
 * - an alarm that is cancelled, fired or failed: left alone (reported), the entry recorded.
 * An entry that names an existing alarm for the first time (no record yet) is compared with the
 * alarm itself, so `chronos schedules export` followed by `apply` changes nothing.
 * Every alarm created or changed gets one heads-up, written in the same transaction (an outbox
 * row that the tracker sends): only the instance whose change committed owes one.
 *
 * Guarantees: reconciles of one schema run one at a time (an advisory lock), each seeing what
 * the last committed; one refused entry — its schedule, zone, `at` in the past, payload — and
 * nothing is written (every refusal is reported, by entry index). Entries removed from the file
 * are not looked at: their alarms keep running.
 */
import { ChronosError, renameFieldErrors, type FieldError } from '../errors.js';
import { canonicalJson, RawJson } from '../json.js';
import { resolveSchedule } from '../schedule/resolve.js';
import {
  alarmsCountFileChange,
  alarmsCountLiveElsewhere,
  alarmsGetByKeys,
  alarmsListLive,
} from '../store/alarms.js';
import type { DbClock } from '../store/driver/db-clock.js';
import { sqlState, type Db, type Executor } from '../store/driver/db.js';
import { scheduleChangesInsert } from '../store/schedule-changes.js';
import {
  scheduleFileEntriesGet,
  scheduleFileEntriesPut,
  scheduleFileLock,
  type FileEntryRecord,
} from '../store/schedule-file-entries.js';
import { DEFAULT_MAX_FAILURES, pairKey, ROUTER_QUEUE, type Alarm, type AlarmStatus } from '../types.js';
import type { AlarmService } from './alarm-service.js';
import type { AlarmSpec } from './alarm-spec.js';
import type { Owner } from './owner.js';

/** One entry of a schedules file, as its door read it. */
export interface FileEntry {
  /** Its place in the file's `alarms` array (refusals and results name it). */
  index: number;
  owner: Owner;
  key: string;
  /** The entry as a create would take it; its payload as its own text. */
  spec: AlarmSpec;
}

export type EntryAction = 'created' | 'updated' | 'unchanged' | 'left_alone';

export interface EntryResult {
  index: number;
  ownerDid: string;
  key: string;
  action: EntryAction;
  /** The alarm made, changed, matched or left alone; null for an unchanged entry whose alarm is gone. */
  alarmId: string | null;
  status: AlarmStatus | null;
  /** For `updated` and `left_alone`: the fields the edit changed (core names: `cron`, `wakeMessage`). */
  fields: string[];
}

export interface ReconcileReport {
  /** True when the file was valid and (unless a dry run) its changes committed. */
  applied: boolean;
  dryRun: boolean;
  /** One per entry, in file order (empty when refused). */
  results: EntryResult[];
  /** Every refusal, paths `<index>.<core field>` (`3.cron`); empty when applied. */
  errors: FieldError[];
  /** Heads-ups written (0 in a dry run). */
  headsUps: number;
}

export interface SchedulesFileServiceOptions {
  db: Db;
  alarms: AlarmService;
  dbClock: DbClock;
  /** The shortest interval between a cron alarm's fires (as for every create). */
  minCronIntervalMs: number;
  /** The heads-up's JSON body for an alarm the file created or changed (the wire's form). */
  headsUpBody(change: 'created' | 'updated', alarm: Alarm): string;
  /** Called after a reconcile that wrote heads-ups committed (to send them now). */
  onHeadsUps?: () => void;
}

/** What an entry says, normalised: every field (defaults filled in), comparable as text. */
interface Normal {
  label: string;
  /** A one-shot's instant, UTC with milliseconds; null for a cron alarm. */
  at: string | null;
  /** A cron alarm's expression as parsed; null for a one-shot. */
  cron: string | null;
  /** An rrule alarm's rule as stored; null (or absent, in a record older than rrule) otherwise. */
  rrule?: string | null;
  /** The window and jitter of a cron or rrule alarm (contract §3a): part of its schedule. */
  startsAt?: string | null;
  endsAt?: string | null;
  jitterSeconds?: number;
  expiresAfterSeconds?: number;
  timezone: string;
  conversationId: string;
  wakeMessage: string;
  /** Canonical JSON text (compact, keys sorted, numbers as written). */
  payload: string;
  maxFailures: number;
  requireAck: boolean;
}

/** The fields compared one by one (the schedule, `at`/`cron`, is compared as one). */
const PLAIN_FIELDS = [
  'timezone',
  'label',
  'conversationId',
  'wakeMessage',
  'payload',
  'maxFailures',
  'requireAck',
  'expiresAfterSeconds',
] as const;

const LIVE: readonly AlarmStatus[] = ['active', 'paused'];

/** Ends the transaction without committing: a refused file, or a dry run. */
class Rollback extends Error {
  constructor(readonly report: ReconcileReport) {
    super('rolled back');
  }
}

export class SchedulesFileService {
  constructor(private readonly options: SchedulesFileServiceOptions) {}

  /** Reconciles the alarms with these entries (see the module comment); `dryRun` commits nothing. */
  async reconcile(
    entries: readonly FileEntry[],
    options: { dryRun?: boolean } = {},
  ): Promise<ReconcileReport> {
    const dryRun = options.dryRun ?? false;
    const refused = (errors: FieldError[]): ReconcileReport => ({
      applied: false,
      dryRun,
      results: [],
      errors,
      headsUps: 0,
    });
    const now = await this.options.dbClock.now();
    const errors: FieldError[] = [];
    const normals = entries.map((entry) => {
      try {
        return this.#normalise(entry.spec, now);
      } catch (error) {
        errors.push(...fieldErrors(error, entry.index));
        return null;
      }
    });
    // With refusals already, the other entries are still tried (and rolled back), so that every
    // refusal is said at once: a cron that cannot be read beside an `at` in the past.
    try {
      const report = await this.options.db.transaction(async (tx) => {
        await scheduleFileLock(tx);
        const pairs = entries.map((e) => ({ ownerDid: e.owner.did, key: e.key }));
        const records = await scheduleFileEntriesGet(tx, pairs);
        const alarms = await alarmsGetByKeys(tx, pairs);
        const results: EntryResult[] = [];
        const puts: FileEntryRecord[] = [];
        let headsUps = 0;
        for (const [i, entry] of entries.entries()) {
          const normal = normals[i];
          if (!normal) continue;
          const pair = pairKey(entry.owner.did, entry.key);
          try {
            const result = await this.#reconcileOne(tx, entry, normal, records.get(pair), alarms.get(pair));
            results.push(result.result);
            if (result.record) puts.push(result.record);
            if (result.headsUp) headsUps++;
          } catch (error) {
            errors.push(...fieldErrors(error, entry.index));
            // A value the database refused ends the transaction: nothing more can run on it.
            if (sqlState(error) !== undefined) break;
          }
        }
        if (errors.length > 0) throw new Rollback(refused(byEntry(errors)));
        await scheduleFileEntriesPut(tx, puts);
        const done: ReconcileReport = { applied: true, dryRun, results, errors: [], headsUps };
        if (dryRun) throw new Rollback({ ...done, headsUps: 0 });
        return done;
      });
      if (report.headsUps > 0) this.options.onHeadsUps?.();
      return report;
    } catch (error) {
      if (error instanceof Rollback) return error.report;
      throw error;
    }
  }

  /** The live (active and paused) alarms of the router's queue, of one owner or of all: an export's content. */
  live(ownerDid?: string): Promise<Alarm[]> {
    return alarmsListLive(this.options.db, ownerDid ?? null, ROUTER_QUEUE);
  }

  /**
   * The live library timers (alarms of a queue other than the router's) an export leaves out, of
   * one owner or of all, counted by queue: a schedules file holds only the service's alarms.
   */
  liveElsewhere(ownerDid?: string): Promise<{ queue: string; count: number }[]> {
    return alarmsCountLiveElsewhere(this.options.db, ownerDid ?? null, ROUTER_QUEUE);
  }

  async #reconcileOne(
    tx: Executor,
    entry: FileEntry,
    normal: Normal,
    record: FileEntryRecord | undefined,
    existing: Alarm | undefined,
  ): Promise<{ result: EntryResult; record?: FileEntryRecord; headsUp?: boolean }> {
    const { owner, key } = entry;
    const text = JSON.stringify(normal);
    const result = (action: EntryAction, alarm: Alarm | undefined, fields: string[] = []): EntryResult => ({
      index: entry.index,
      ownerDid: owner.did,
      key,
      action,
      alarmId: alarm?.id ?? null,
      status: alarm?.status ?? null,
      fields,
    });
    const recorded = (alarm: Alarm): FileEntryRecord => ({
      ownerDid: owner.did,
      key,
      entry: text,
      alarmId: alarm.id,
    });

    if (record?.entry === text) return { result: result('unchanged', existing) };

    let alarm = existing;
    if (!alarm) {
      const created = await this.options.alarms.create(
        owner,
        { ...entry.spec, idempotencyKey: key },
        { source: 'file', tx, quotas: false },
      );
      alarm = created.alarm;
      if (!created.deduped) {
        await this.#headsUp(tx, 'created', alarm);
        return { result: result('created', alarm), record: recorded(alarm), headsUp: true };
      }
      // Made with this key meanwhile, through another door: changed below like any other.
    }

    const current = normalOf(alarm);
    const base = record ? (JSON.parse(record.entry) as Normal) : current;
    const fields = changedFields(normal, base, current);
    if (fields.length === 0) return { result: result('unchanged', alarm), record: recorded(alarm) };
    if (!LIVE.includes(alarm.status)) {
      return { result: result('left_alone', alarm, fields), record: recorded(alarm) };
    }
    let updated: Alarm;
    try {
      updated = await this.options.alarms.update(
        owner,
        { id: alarm.id },
        patchOf(entry.spec, normal, fields),
        {
          source: 'file',
          tx,
        },
      );
    } catch (error) {
      // Finished meanwhile (a last fire, a cancel): as if it had been already.
      if (error instanceof ChronosError && error.code === 'conflict') {
        return { result: result('left_alone', alarm, fields), record: recorded(alarm) };
      }
      throw error;
    }
    await this.#headsUp(tx, 'updated', updated);
    return { result: result('updated', updated, fields), record: recorded(updated), headsUp: true };
  }

  async #headsUp(tx: Executor, change: 'created' | 'updated', alarm: Alarm): Promise<void> {
    const n = await alarmsCountFileChange(tx, alarm.id);
    await scheduleChangesInsert(tx, {
      messageId: `${alarm.id}:file:${n}`,
      alarmId: alarm.id,
      ownerDid: alarm.ownerDid,
      change,
      body: this.options.headsUpBody(change, alarm),
    });
  }

  /** An entry's spec as every field it implies; throws `invalid_input` on a bad schedule or zone. */
  #normalise(spec: AlarmSpec, now: Date): Normal {
    // An `at` in the past is judged only when it is applied: an unchanged one-shot that already
    // fired is not an error.
    const schedule = resolveSchedule(
      {
        at: spec.at,
        cron: spec.cron,
        rrule: spec.rrule,
        startsAt: spec.startsAt,
        endsAt: spec.endsAt,
        jitterSeconds: spec.jitterSeconds,
        timezone: spec.timezone,
      },
      now,
      { pastToleranceMs: Number.POSITIVE_INFINITY, minCronIntervalMs: this.options.minCronIntervalMs },
    );
    return {
      label: spec.label ?? '',
      at: schedule.kind === 'once' ? schedule.fireAt!.toISOString() : null,
      cron: schedule.kind === 'cron' ? schedule.cronExpr : null,
      rrule: schedule.rrule ?? null,
      startsAt: schedule.startsAt?.toISOString() ?? null,
      endsAt: schedule.endsAt?.toISOString() ?? null,
      jitterSeconds: schedule.jitterSeconds ?? 0,
      expiresAfterSeconds: spec.expiresAfterSeconds ?? 0,
      timezone: schedule.timezone,
      conversationId: spec.conversationId ?? '',
      wakeMessage: spec.wakeMessage ?? '',
      payload: spec.payload === undefined ? '{}' : canonicalJson(spec.payload.text),
      maxFailures: spec.maxFailures ?? DEFAULT_MAX_FAILURES,
      requireAck: spec.requireAck ?? true,
    };
  }
}

/** An alarm as an entry that describes it exactly would be normalised. */
function normalOf(alarm: Alarm): Normal {
  return {
    label: alarm.label,
    at: alarm.kind === 'once' ? (alarm.fireAt ?? alarm.scheduledFor).toISOString() : null,
    cron: alarm.kind === 'cron' ? alarm.cronExpr : null,
    rrule: alarm.kind === 'rrule' ? (alarm.rrule ?? '') : null,
    startsAt: alarm.startsAt?.toISOString() ?? null,
    endsAt: alarm.endsAt?.toISOString() ?? null,
    jitterSeconds: alarm.jitterSeconds ?? 0,
    expiresAfterSeconds: alarm.expiresAfterSeconds ?? 0,
    timezone: alarm.timezone,
    conversationId: alarm.conversationId,
    wakeMessage: alarm.wakeMessage,
    payload: canonicalJson(alarm.payload.text),
    maxFailures: alarm.maxFailures,
    requireAck: alarm.requireAck,
  };
}

/**
 * The fields the file changed since `base` (what it said last) that the alarm (`current`) does
 * not already have: `at` or `cron` for the schedule, then the others by core name.
 */
function changedFields(next: Normal, base: Normal, current: Normal): string[] {
  const fields: string[] = [];
  // A record written before rrule and windows existed says nothing of them: read as unset.
  const sameSchedule = (a: Normal, b: Normal) =>
    a.at === b.at &&
    a.cron === b.cron &&
    (a.rrule ?? null) === (b.rrule ?? null) &&
    (a.startsAt ?? null) === (b.startsAt ?? null) &&
    (a.endsAt ?? null) === (b.endsAt ?? null) &&
    (a.jitterSeconds ?? 0) === (b.jitterSeconds ?? 0);
  if (!sameSchedule(next, base) && !sameSchedule(next, current))
    fields.push(next.rrule ? 'rrule' : next.cron === null ? 'at' : 'cron');
  const plain = (n: Normal, field: (typeof PLAIN_FIELDS)[number]) =>
    field === 'expiresAfterSeconds' ? (n.expiresAfterSeconds ?? 0) : n[field];
  for (const field of PLAIN_FIELDS) {
    if (plain(next, field) !== plain(base, field) && plain(next, field) !== plain(current, field))
      fields.push(field);
  }
  return fields;
}

/** The PATCH that applies `fields` of the entry: values as written in the file (a removed field: its default). */
function patchOf(spec: AlarmSpec, normal: Normal, fields: readonly string[]): AlarmSpec {
  const patch: AlarmSpec = {};
  for (const field of fields) {
    if (field === 'at') patch.at = spec.at;
    else if (field === 'cron') patch.cron = spec.cron;
    else if (field === 'rrule') patch.rrule = spec.rrule;
    else if (field === 'expiresAfterSeconds') patch.expiresAfterSeconds = normal.expiresAfterSeconds ?? 0;
    else if (field === 'payload') patch.payload = spec.payload ?? new RawJson('{}');
    else if (field === 'timezone') patch.timezone = normal.timezone;
    else if (field === 'label') patch.label = normal.label;
    else if (field === 'conversationId') patch.conversationId = normal.conversationId;
    else if (field === 'wakeMessage') patch.wakeMessage = normal.wakeMessage;
    else if (field === 'maxFailures') patch.maxFailures = normal.maxFailures;
    else if (field === 'requireAck') patch.requireAck = normal.requireAck;
  }
  if (patch.cron !== undefined || patch.rrule !== undefined) {
    patch.startsAt = spec.startsAt;
    patch.endsAt = spec.endsAt;
    patch.jitterSeconds = spec.jitterSeconds;
  }
  return patch;
}

/** Refusals by entry index (`3.cron`), each entry's in the order found. */
function byEntry(errors: FieldError[]): FieldError[] {
  const index = (e: FieldError) => Number(e.path.split('.')[0]);
  return errors
    .map((e, i) => ({ e, i }))
    .sort((a, b) => index(a.e) - index(b.e) || a.i - b.i)
    .map(({ e }) => e);
}

/** The field errors of an `invalid_input` error under the entry's index (`3.cron`); anything else is rethrown. */
function fieldErrors(error: unknown, index: number): FieldError[] {
  if (!(error instanceof ChronosError) || error.code !== 'invalid_input') throw error;
  return (
    renameFieldErrors(error, (path) => (path === '' ? String(index) : `${index}.${path}`)) as ChronosError
  ).errors;
}
