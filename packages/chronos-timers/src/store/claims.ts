/**
 * The dispatch path: claim due alarms, record what their delivery did, release what was not
 * delivered. Every statement here handles a whole batch.
 *
 * A claim is a lease, not a lock held open: the row is marked (`claimed_at`, a `lease_token`
 * fresh for each claim, shared by the rows it takes) and the transaction ends at once. Another
 * worker may take the row only after the lease lapses; an outcome is recorded only under the
 * token it was claimed with (fencing), so a worker whose lease lapsed cannot write over a newer
 * claim. (A library worker may instead hold its rows in a transaction: `claimHeld` below.)
 *
 * Rows are found by where they lie (`ctid`) wherever a statement knows it: a claim updates the rows
 * its subquery locked, and a library worker's outcome goes first to where its claim left the row.
 * A lookup by id in the primary key costs time on every row: without it a library worker's claim
 * and its outcome take less of PostgreSQL's CPU (bench/README.md, "Drain"; the figure in
 * "Figures from the store's comments").
 */
import { randomUUID } from 'node:crypto';
import { alarmColumns, toAlarm, type AlarmRow } from './alarms.js';
import { arrayLiteral, sql, textElement, type Executor } from './driver/db.js';
import { RawJson } from '../json.js';
import { DEFAULT_MAX_FAILURES, type Alarm, type AlarmStatus, type ClaimedAlarm } from '../types.js';
import { capLastError } from './last-error.js';

const ALARM_COLUMNS = alarmColumns('c');

/**
 * One statement claims up to $1 due alarms in due order and opens (or reopens) each one's wake.
 *
 * - Only alarms of queue $3 (contract §4a), on `alarms_claim_idx`, which leads with the queue:
 *   active ones, and paused ones with a manual fire ("fire now") — a paused alarm's schedule is
 *   never claimed.
 * - Due means `next_fire_at <= now()` by the database clock (I5), and unclaimed or with a lease
 *   older than $2 ms. `FOR UPDATE SKIP LOCKED` lets any number of workers claim at once without
 *   taking the same row twice.
 * - `ctid = ANY(ARRAY(...))` keeps the index scan on `alarms_claim_idx` even under a generic
 *   prepared plan (an `IN (subquery)` form can turn into a scan of the whole table), and updates
 *   the rows the subquery locked where it found them, without looking each one up again by id.
 *   The locks keep them there: nothing else can update them before this statement does. (A row
 *   updated by another transaction after this statement's snapshot was taken is locked in its
 *   newest version, which the outer scan cannot see: it is left out of this claim, still due.)
 * - The wake row is written here, before anything is sent. A retry or a reclaim after a lapsed
 *   lease reuses the alarm's `wake_id`, so the webhook id is stable across attempts.
 * - A cron alarm that requires an ack and still has a delivered, unacknowledged and unescalated
 *   wake is not delivered again on its schedule (a manual fire always is): the fire is counted on that wake (`coalesced_into`). Only such an
 *   alarm, at a new occurrence (its wake row not yet written), reads `wakes` for this, in nested
 *   CASEs evaluated row by row: as a join, the check could become a scan of every wake under a
 *   generic plan made while the table was small, kept until an ANALYZE.
 */
/**
 * The claim's UPDATE; `wakeId` is the id a new occurrence's wake is given, `leaseToken` the token
 * its rows are leased under (one for the whole claim).
 */
const claimUpdate = (
  wakeId: string,
  extra = '',
  leaseToken = '(SELECT gen_random_uuid())',
  ownerFilter = '',
) => `UPDATE chronos.alarms a
     SET claimed_at = now(), lease_token = ${leaseToken}, wake_id = coalesce(a.wake_id, ${wakeId}),
       fire_attempts = CASE WHEN a.wake_id IS NULL THEN 1 ELSE a.fire_attempts + 1 END
     WHERE a.ctid = ANY(ARRAY(
       SELECT ctid FROM chronos.alarms
       WHERE (status = 'active' OR trigger = 'manual') AND queue = $3 AND next_fire_at <= now()
         AND (claimed_at IS NULL OR claimed_at <= now() - $2::int * interval '1 millisecond')${ownerFilter}
       ORDER BY next_fire_at
       LIMIT $1
       FOR UPDATE SKIP LOCKED))${extra}`;

// The router's claim passes over the owners named in $4 (those at their share of the dispatcher's
// delivery slots, issue 45): a filter on the rows the index scan walks, not another statement;
// `{}` (the usual case) passes over nobody.
const CLAIM = claimUpdate(
  'gen_random_uuid()',
  '',
  undefined,
  `
         AND owner_did <> ALL($4::text[])`,
);

const claim = sql(
  'alarms_claim_due',
  `WITH claimed AS (
     ${CLAIM}
     RETURNING a.*
   ), fresh AS (
     SELECT c.id,
       CASE WHEN c.kind <> 'once' AND c.require_ack AND c.trigger = 'schedule' THEN
         CASE WHEN NOT EXISTS (SELECT 1 FROM chronos.wakes w WHERE w.id = c.wake_id) THEN
           (SELECT w.id FROM chronos.wakes w
            WHERE w.alarm_id = c.id AND w.status = 'delivered' AND w.escalated_at IS NULL
            ORDER BY w.fired_at DESC LIMIT 1)
         END
       END AS open_wake
     FROM claimed c
   ), coalesced AS (
     UPDATE chronos.wakes w SET fire_count = w.fire_count + 1, updated_at = now()
     FROM fresh f WHERE w.id = f.open_wake
       -- Evaluated once, before the join: a batch with nothing to coalesce never reads wakes.
       AND EXISTS (SELECT 1 FROM fresh g WHERE g.open_wake IS NOT NULL)
     RETURNING f.id AS alarm_id, w.id::text AS wake_id, w.fire_count
   ), opened AS (
     INSERT INTO chronos.wakes AS w (id, alarm_id, owner_did, user_id, conversation_id, scheduled_for, fired_at,
       attempts, require_ack, trigger)
     SELECT c.wake_id, c.id, c.owner_did, c.user_id, c.conversation_id, c.scheduled_for, now(), 1, c.require_ack,
       c.trigger
     FROM claimed c
     WHERE NOT EXISTS (SELECT 1 FROM fresh f WHERE f.id = c.id AND f.open_wake IS NOT NULL)
     ON CONFLICT (id) DO UPDATE SET attempts = w.attempts + 1, updated_at = now()
     RETURNING w.alarm_id, w.id::text AS wake_id, w.attempts, w.fire_count
   )
   SELECT ${ALARM_COLUMNS}, c.lease_token::text AS lease_token,
     coalesce(o.wake_id, k.wake_id) AS wake_id, coalesce(o.attempts, 0) AS attempts,
     coalesce(o.fire_count, k.fire_count) AS fire_count, k.wake_id IS NOT NULL AS coalesced,
     now() AS db_now
   FROM claimed c
   LEFT JOIN opened o ON o.alarm_id = c.id
   LEFT JOIN coalesced k ON k.alarm_id = c.id
   ORDER BY c.next_fire_at`,
);

// Exact: date_part's float8 seconds rounded to whole microseconds (float8 holds them exactly),
// then truncated to milliseconds; about a microsecond less a column than extract's numeric.
const ms = (column: string) => `floor(round(date_part('epoch', ${column}) * 1000000) / 1000)`;
const STABLE_WAKE_ID = `md5(uuid_send(a.id) || timestamptz_send(a.scheduled_for) || timestamptz_send(a.updated_at))::uuid`;

/** The values most alarms hold, which a claim without history answers as NULL (see `CLAIMED`). */
const USUAL = {
  timezone: 'UTC',
  status: 'active',
  maxFailures: DEFAULT_MAX_FAILURES,
  trigger: 'schedule',
} as const;

/**
 * What a claim without history reads of each alarm (`ClaimedAlarm`), with where it lies and the
 * database's clock. A column that holds what most alarms hold (an empty text, `USUAL`, a first
 * occurrence's time, no failures) comes back NULL, which the worker reads for nothing: each value
 * it reads is a string cut from the buffer and parsed, and these were a good part of a claim's
 * reading (bench/README.md, "Drain"; the figure in "Figures from the store's comments").
 */
const CLAIMED = `a.id::text AS id, nullif(a.idempotency_key, '') AS idempotency_key, a.payload::text AS payload, a.kind,
     nullif(a.cron_expr, '') AS cron_expr, nullif(a.timezone, '${USUAL.timezone}') AS timezone,
     ${ms('a.next_fire_at')} AS next_fire_ms, nullif(${ms('a.scheduled_for')}, ${ms('a.next_fire_at')}) AS scheduled_ms,
     nullif(a.status, '${USUAL.status}') AS status, nullif(a.failure_count, 0) AS failure_count,
     nullif(a.max_failures, ${USUAL.maxFailures}) AS max_failures, nullif(a.last_error, '') AS last_error,
     nullif(a.trigger, '${USUAL.trigger}') AS trigger, ${ms('a.held_occurrence')} AS held_ms,
     nullif(a.traceparent, '') AS traceparent, a.ctid::text AS row_ref, ${ms('now()')} AS db_now_ms,
     CASE WHEN a.kind = 'rrule' OR a.starts_at IS NOT NULL OR a.ends_at IS NOT NULL OR a.jitter_seconds > 0
            OR a.expires_after_seconds > 0
          THEN json_build_array(a.rrule, ${ms('a.rrule_start')}, ${ms('a.starts_at')}, ${ms('a.ends_at')},
            a.jitter_seconds, a.expires_after_seconds)::text END AS extra`;

/**
 * The same claim with no wake history (a library worker's, `history: false`): the fire is kept on
 * the alarm's row alone. `wake_id` still names the occurrence in hand (stable across its
 * attempts: the handler's deduplication id) and `fire_attempts` counts its claims, so the worker
 * is told the same as with history; nothing else is written. No coalescing: that is the wake
 * tracking's (§7), for `chronos serve`'s queue.
 *
 * It returns only what a library worker reads (`ClaimedAlarm`), times as milliseconds since the
 * epoch (truncated, as the timestamp parser truncates), and in no particular order: the batch's
 * deliveries start together. Per claimed alarm that is less of PostgreSQL's CPU and of the
 * worker's parsing than the whole row in due order (bench/README.md, "Drain"; the figures in
 * "Figures from the store's comments"). The
 * lease token ($4) is drawn by the worker, which knows it without reading it back from every row.
 *
 * Its commit does not wait for the disk (`synchronous_commit` off for this transaction alone):
 * most of a claim's time was that flush. A claim is only a lease, so what a crash of PostgreSQL
 * can lose is the lease, within a fraction of a second of the claim — unless an outcome recorded
 * since flushed it along (the log is written in order) — and a lost lease only lets the timer be
 * claimed and fired again: at least once, as always (I3). For the handler to recognise that fire,
 * a new occurrence's wake id is not drawn at random but worked out from the alarm, its occurrence
 * and its last change, which a lost claim leaves as they were and every new occurrence changes:
 * the fire after a lost claim carries the same `wakeId` as the one before it.
 */
const claimUntracked = sql(
  'alarms_claim_due_untracked',
  `WITH no_flush AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true) AS setting)
   ${claimUpdate(STABLE_WAKE_ID, '\n       AND EXISTS (SELECT 1 FROM no_flush)', '$4::uuid')}
   RETURNING ${CLAIMED}, a.wake_id::text AS wake_id, a.fire_attempts AS attempts`,
);

/**
 * The claim of a worker that holds its rows in an open transaction instead of leasing them
 * (`claim: 'transaction'`, a library worker without history on PostgreSQL): the due rows are
 * locked (`FOR UPDATE SKIP LOCKED`), not written, and the caller's transaction stays open while
 * their handlers run; the outcomes are recorded in it, and the commit releases the locks. A worker
 * that dies rolls back: its rows were never changed and are due again at once. Nothing is written
 * per fire but the outcome: less of PostgreSQL's CPU a fire than a leased claim
 * (docs/comparison.md, "The run of 2026-12-03 06:46"; bench/README.md, "Figures from the
 * store's comments").
 *
 * Lease workers of the same queue skip these locked rows, and these skip rows under a live lease
 * (`claimed_at`), taking those whose lease lapsed. The wake id and attempt are worked out as the
 * lease claim writes them: the stored ones when an occurrence is being retried, else the stable id.
 */
const claimHeld = sql(
  'alarms_claim_due_held',
  `SELECT ${CLAIMED}, coalesce(a.wake_id, ${STABLE_WAKE_ID})::text AS wake_id,
     CASE WHEN a.wake_id IS NULL THEN 1 ELSE a.fire_attempts + 1 END AS attempts
   FROM chronos.alarms a
   WHERE (a.status = 'active' OR a.trigger = 'manual') AND a.queue = $3 AND a.next_fire_at <= now()
     AND (a.claimed_at IS NULL OR a.claimed_at <= now() - $2::int * interval '1 millisecond')
   ORDER BY a.next_fire_at
   LIMIT $1
   FOR UPDATE SKIP LOCKED`,
);

interface UntrackedClaimRow {
  id: string;
  idempotency_key: string | null;
  payload: string;
  kind: Alarm['kind'];
  cron_expr: string | null;
  timezone: string | null;
  next_fire_ms: number;
  scheduled_ms: number | null;
  status: AlarmStatus | null;
  failure_count: number | null;
  max_failures: number | null;
  last_error: string | null;
  trigger: Alarm['trigger'] | null;
  held_ms: number | null;
  traceparent: string | null;
  row_ref: string;
  wake_id: string;
  attempts: number;
  db_now_ms: number;
  /** The §3a columns as one JSON array, or null when the alarm has none (see `CLAIMED`). */
  extra: string | null;
}

/** The §3a fields of a claimed alarm, from `CLAIMED`'s `extra`. */
function extraFields(
  text: string,
): Pick<
  ClaimedAlarm,
  'rrule' | 'rruleStart' | 'startsAt' | 'endsAt' | 'jitterSeconds' | 'expiresAfterSeconds'
> {
  const [rrule, start, startsAt, endsAt, jitter, expires] = JSON.parse(text) as [
    string,
    number | null,
    number | null,
    number | null,
    number,
    number,
  ];
  const at = (ms: number | null) => (ms === null ? null : new Date(ms));
  return {
    rrule,
    rruleStart: at(start),
    startsAt: at(startsAt),
    endsAt: at(endsAt),
    jitterSeconds: jitter,
    expiresAfterSeconds: expires,
  };
}

/** A claim without history, from its row (see `CLAIMED`) and the token its claim leased it under. */
function untrackedClaim(row: UntrackedClaimRow, leaseToken: string): Claim<ClaimedAlarm> {
  return {
    alarm: {
      id: row.id,
      kind: row.kind,
      cronExpr: row.cron_expr ?? '',
      timezone: row.timezone ?? USUAL.timezone,
      nextFireAt: new Date(row.next_fire_ms),
      scheduledFor: new Date(row.scheduled_ms ?? row.next_fire_ms),
      payload: new RawJson(row.payload),
      status: row.status ?? USUAL.status,
      idempotencyKey: row.idempotency_key ?? '',
      maxFailures: row.max_failures ?? USUAL.maxFailures,
      failureCount: row.failure_count ?? 0,
      lastError: row.last_error ?? '',
      trigger: row.trigger ?? USUAL.trigger,
      heldOccurrence: row.held_ms === null ? null : new Date(row.held_ms),
      traceparent: row.traceparent ?? '',
      ...(row.extra !== null && extraFields(row.extra)),
    },
    row: row.row_ref,
    leaseToken,
    wakeId: row.wake_id,
    attempt: row.attempts,
    fireCount: 1,
    coalesced: false,
    dbNow: new Date(row.db_now_ms),
  };
}

/** `A`: the whole alarm (a claim with history), or what a claim without history reads. */
export interface Claim<A extends ClaimedAlarm = Alarm> {
  alarm: A;
  /**
   * Where a claim without history left the alarm's row (its `ctid`): its outcome is written there
   * first. Empty with history, whose outcomes are written by id.
   */
  row: string;
  leaseToken: string;
  wakeId: string;
  /** Delivery attempts of this wake, this one included (0 when coalesced). */
  attempt: number;
  fireCount: number;
  /** Counted on an earlier unacknowledged wake instead of being delivered. */
  coalesced: boolean;
  /** The database's `now()` at the claim. */
  dbNow: Date;
}

interface ClaimRow extends AlarmRow {
  lease_token: string;
  wake_id: string;
  attempts: number;
  fire_count: number;
  coalesced: boolean;
  db_now: Date;
}

/**
 * Claims up to `limit` due alarms of `queue`; with `history` (the default) each one's wake row is
 * opened and the whole alarm read, without it only its own row is written (see above).
 */
export async function alarmsClaimDue(
  ex: Executor,
  queue: string,
  limit: number,
  leaseMs: number,
  history?: true,
  passOver?: readonly string[],
): Promise<Claim[]>;
export async function alarmsClaimDue(
  ex: Executor,
  queue: string,
  limit: number,
  leaseMs: number,
  history: boolean,
  passOver?: readonly string[],
): Promise<Claim<ClaimedAlarm>[]>;
export async function alarmsClaimDue(
  ex: Executor,
  queue: string,
  limit: number,
  leaseMs: number,
  history = true,
  passOver: readonly string[] = [],
): Promise<Claim<ClaimedAlarm>[]> {
  const values = [limit, Math.round(leaseMs), queue];
  if (!history) {
    // float8 is a number from pg and from PGlite alike.
    const leaseToken = randomUUID();
    const rows = await ex.query<UntrackedClaimRow>(claimUntracked, [...values, leaseToken]);
    return rows.map((row) => untrackedClaim(row, leaseToken));
  }
  const rows = await ex.query<ClaimRow>(claim, [...values, arrayLiteral(passOver, textElement)]);
  return rows.map((row) => ({
    alarm: toAlarm(row),
    row: '',
    leaseToken: row.lease_token,
    wakeId: row.wake_id,
    attempt: row.attempts,
    fireCount: row.fire_count,
    coalesced: row.coalesced,
    dbNow: row.db_now,
  }));
}

/**
 * Locks up to `limit` due alarms of `queue` in the transaction `tx` (see `claimHeld`): the rows are
 * the caller's until that transaction ends, and their outcomes go through `alarmsRecordOutcomes`
 * with `held` in the same transaction. A claim's `leaseToken` is empty: there is no lease.
 */
export async function alarmsClaimHeld(
  tx: Executor,
  queue: string,
  limit: number,
  leaseMs: number,
): Promise<Claim<ClaimedAlarm>[]> {
  const rows = await tx.query<UntrackedClaimRow>(claimHeld, [limit, Math.round(leaseMs), queue]);
  return rows.map((row) => untrackedClaim(row, ''));
}

/** What became of one claimed delivery, with the alarm's new state computed by the dispatcher. */
export interface Outcome {
  alarmId: string;
  /** Where its claim left the alarm's row (`Claim.row`). */
  row: string;
  leaseToken: string;
  wakeId: string;
  attempt: number;
  /** delivered: sent and accepted; retry: failed, to be tried again; failed: gave up on this occurrence. */
  result: 'delivered' | 'retry' | 'failed' | 'coalesced' | 'expired';
  /** The alarm's status afterwards. */
  status: AlarmStatus;
  /** The alarm's next due time afterwards (retry time, next occurrence, or unchanged). */
  nextFireAt: Date;
  /** The occurrence in hand afterwards (unchanged for a retry). */
  scheduledFor: Date;
  failureCount: number;
  lastError: string;
  /** Set when this outcome fired the alarm (delivered or coalesced). */
  lastFiredAt: Date | null;
  startedAt: Date;
  finishedAt: Date;
  latenessMs: number;
  statusCode: number | null;
}

/**
 * Records a batch of outcomes in one statement.
 *
 * Without history the statements come in two forms: at the row (`atRow`), which finds each alarm
 * where its claim left it (its `ctid`, among the batch's, with the same id), and by id. Outcomes go
 * first to their rows; one whose row has moved since (another writer updated the alarm, keeping
 * its lease) is then looked up by id, in a second statement. So is one fenced out, for nothing: it
 * is rare, and the lookup finds the same.
 *
 * Times travel as milliseconds since the epoch (int8): cheaper to write and to read than
 * timestamp text, on both sides.
 *
 * The alarm is updated only under the lease token it was claimed with; the ids of the alarms
 * updated are returned, the rest were fenced out (cancelled, rescheduled or reclaimed meanwhile).
 * The wake records a delivery even when fenced — it happened — but gives up on its occurrence
 * only when the alarm update went through. Every attempt is added to the wake's history: a first
 * attempt delivered on the wake's own row, any other as a row of `wake_attempts`.
 */
// What a recording answers, from the ids of the alarms it wrote (`written`): NULL when it wrote
// the alarm of every outcome (its ids, $1, all distinct then: the same alarm twice in one batch,
// under two leases, is written once at most), else those ids, comma-separated ('' for none). One
// row, and in the usual case nothing in it to read: a row per alarm was a visible share of a
// library worker's CPU a fire (bench/README.md, "Drain"; the figure in "Figures from the store's
// comments").
const WRITTEN_FROM = (written: string) =>
  `SELECT CASE WHEN count(*) = cardinality($1::uuid[]) THEN NULL
     ELSE coalesce(string_agg(id::text, ','), '') END AS written
   FROM ${written}`;

// What an outcome does to its alarm (from the rows `o`): under the lease token it was claimed
// with, or (`held`) by id alone, the row locked by the recording's own transaction since its claim,
// which wrote nothing: a retry then keeps the occurrence's wake id and attempts from the outcome.
const recordOnAlarm = (held: boolean, rows: number | null) => `UPDATE chronos.alarms a SET
       -- Only a one-shot's last outcome changes its status: a cron alarm, or one waiting to retry,
       -- stays as it is now (active, or paused meanwhile).
       -- A recurring alarm's status changes only when it has no occurrence left (fired).
       status = CASE WHEN o.result = 'retry' THEN a.status
                     WHEN a.kind <> 'once' AND o.status <> 'fired' THEN a.status ELSE o.status END,
       next_fire_at = o.next_fire_at, scheduled_for = o.scheduled_for,
       failure_count = o.failure_count, last_error = o.last_error,
       last_fired_at = coalesce(o.last_fired_at, a.last_fired_at),
       claimed_at = NULL, lease_token = NULL,
       wake_id = CASE WHEN o.result = 'retry' THEN ${held ? 'o.wake_id' : 'a.wake_id'} END,${
         held
           ? "\n       fire_attempts = CASE WHEN o.result = 'retry' THEN o.attempt ELSE a.fire_attempts END,"
           : ''
       }
       trigger = CASE WHEN o.result = 'retry' THEN a.trigger ELSE 'schedule' END,
       held_occurrence = CASE WHEN o.result = 'retry' THEN a.held_occurrence END,
       updated_at = now()
     FROM o WHERE ${whereRow(rows)}${held ? '' : ' AND a.lease_token = o.lease_token'}`;

/**
 * An outcome's alarm: among the rows at the places in parameter `rows` (its last, a `tid[]`) and
 * with its id, or (null) by its id alone. The places are scanned as a set and joined to the
 * outcomes by hash: a place per outcome, joined row by row, cost more than the index it spares.
 */
const whereRow = (rows: number | null) =>
  rows === null ? 'a.id = o.alarm_id' : `a.ctid = ANY($${rows}::tid[]) AND a.id = o.alarm_id`;

// A first attempt delivered, on a wake that holds none yet: kept on the wake (migration 0017). A
// second recording of it (a worker fenced out after delivering) changes nothing, as the attempt
// row's primary key did.
const FIRST_DELIVERED = `o.result = 'delivered' AND o.attempt = 1`;
const FIRST = `${FIRST_DELIVERED} AND w.first_attempt_started_at IS NULL`;
const DURATION_MS = 'greatest(0, round(extract(epoch FROM (o.finished_at - o.started_at)) * 1000))::int';

const record = sql(
  'alarms_record_outcomes',
  `WITH o AS (
     SELECT u.alarm_id, u.lease_token, u.wake_id, u.attempt, u.result, u.status,
       timestamptz 'epoch' + u.next_fire_ms * interval '1 millisecond' AS next_fire_at,
       timestamptz 'epoch' + u.scheduled_ms * interval '1 millisecond' AS scheduled_for,
       u.failure_count, u.last_error,
       timestamptz 'epoch' + u.last_fired_ms * interval '1 millisecond' AS last_fired_at,
       timestamptz 'epoch' + u.started_ms * interval '1 millisecond' AS started_at,
       timestamptz 'epoch' + u.finished_ms * interval '1 millisecond' AS finished_at,
       u.lateness_ms, u.status_code
     FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::int[], $5::text[], $6::text[],
       $7::int8[], $8::int8[], $9::int[], $10::text[], $11::int8[], $12::int8[], $13::int8[], $14::int[], $15::int[])
     AS u(alarm_id, lease_token, wake_id, attempt, result, status, next_fire_ms, scheduled_ms, failure_count,
          last_error, last_fired_ms, started_ms, finished_ms, lateness_ms, status_code)
   ), updated AS (
     ${recordOnAlarm(false, null)}
     RETURNING a.id
   ), woken AS (
     UPDATE chronos.wakes w SET
       status = CASE
         WHEN o.result = 'delivered' AND w.status = 'pending' THEN 'delivered'
         WHEN o.result = 'failed' AND w.status = 'pending' AND o.alarm_id IN (SELECT id FROM updated) THEN 'failed'
         WHEN o.result = 'expired' AND w.status = 'pending' AND o.alarm_id IN (SELECT id FROM updated) THEN 'expired'
         ELSE w.status END,
       delivered_at = CASE WHEN o.result = 'delivered' THEN coalesce(w.delivered_at, o.finished_at) ELSE w.delivered_at END,
       lateness_ms = CASE WHEN o.result = 'delivered' THEN coalesce(w.lateness_ms, o.lateness_ms) ELSE w.lateness_ms END,
       last_error = CASE WHEN o.result IN ('retry', 'failed') THEN o.last_error ELSE w.last_error END,
       -- A first attempt delivered is kept on the wake, not as a row of its own (migration 0017).
       first_attempt_started_at = CASE WHEN ${FIRST} THEN o.started_at ELSE w.first_attempt_started_at END,
       first_attempt_ms = CASE WHEN ${FIRST} THEN ${DURATION_MS} ELSE w.first_attempt_ms END,
       first_attempt_status = CASE WHEN ${FIRST} THEN o.status_code ELSE w.first_attempt_status END,
       updated_at = now()
     FROM o WHERE w.id = o.wake_id AND o.result <> 'coalesced'
     RETURNING w.id
   ), history AS (
     INSERT INTO chronos.wake_attempts (wake_id, attempt, started_at, duration_ms, outcome, status_code, error)
     SELECT o.wake_id, o.attempt, o.started_at, ${DURATION_MS},
       o.result, o.status_code, CASE WHEN o.result = 'delivered' THEN '' ELSE o.last_error END
     FROM o WHERE o.result NOT IN ('coalesced', 'expired') AND NOT (${FIRST_DELIVERED})
       AND o.wake_id IN (SELECT id FROM woken)
     ON CONFLICT DO NOTHING
   )
   ${WRITTEN_FROM('updated')}`,
);

/**
 * The same with no wake history: the alarm's row alone (a claim made with `history: false`). Its
 * second array is the lease tokens, or (`held`) the wake ids, with the attempts as an eleventh; at
 * the row, the places come last.
 */
const untrackedRecord = (name: string, held: boolean, atRow: boolean) =>
  sql(
    `${name}${atRow ? '_at_row' : ''}`,
    `WITH o AS (
     SELECT u.alarm_id, u.${held ? 'wake_id' : 'lease_token'}, u.result, u.status,
       timestamptz 'epoch' + u.next_fire_ms * interval '1 millisecond' AS next_fire_at,
       timestamptz 'epoch' + u.scheduled_ms * interval '1 millisecond' AS scheduled_for,
       u.failure_count, u.last_error,
       timestamptz 'epoch' + u.last_fired_ms * interval '1 millisecond' AS last_fired_at${held ? ', u.attempt' : ''}
     FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int8[], $6::int8[], $7::int[], $8::text[],
       $9::int8[]${held ? ', $10::int[]' : ''})
     AS u(alarm_id, ${held ? 'wake_id' : 'lease_token'}, result, status, next_fire_ms, scheduled_ms, failure_count,
          last_error, last_fired_ms${held ? ', attempt' : ''})
   ), written AS (
     ${recordOnAlarm(held, atRow ? (held ? 11 : 10) : null)}
     RETURNING a.id
   )
   ${WRITTEN_FROM('written')}`,
  );

/**
 * A one-shot alarm's delivered outcome, when finished alarms are kept for no time at all
 * (`deleteFired`, a library worker without history): the alarm is deleted, under its lease token
 * (by id alone when its row is held by the recording's transaction). A delete writes no index
 * entry, where marking the row `fired` writes four (bench/README.md, "Drain"; the figure in
 * "Figures from the store's comments"): a large share of the PostgreSQL CPU of an outcome.
 */
const deleteFiredOf = (held: boolean, atRow: boolean) =>
  sql(
    `alarms_delete_fired${held ? '_held' : ''}${atRow ? '_at_row' : ''}`,
    held
      ? `WITH written AS (
     DELETE FROM chronos.alarms a USING unnest($1::uuid[]) AS o(alarm_id)
     WHERE ${whereRow(atRow ? 2 : null)}
     RETURNING a.id
   )
   ${WRITTEN_FROM('written')}`
      : `WITH written AS (
     DELETE FROM chronos.alarms a USING unnest($1::uuid[], $2::uuid[]) AS o(alarm_id, lease_token)
     WHERE ${whereRow(atRow ? 3 : null)} AND a.lease_token = o.lease_token
     RETURNING a.id
   )
   ${WRITTEN_FROM('written')}`,
  );

/** The statements of a recording, at the row or by id. */
const RECORDING = [false, true].map((atRow) => ({
  untracked: untrackedRecord('alarms_record_outcomes_untracked', false, atRow),
  held: untrackedRecord('alarms_record_outcomes_held', true, atRow),
  deleteFired: deleteFiredOf(false, atRow),
  deleteFiredHeld: deleteFiredOf(true, atRow),
}));

/** How outcomes are recorded: as the claim was made, and what becomes of a fired one-shot. */
export interface RecordMode {
  /** The claim opened wake rows (the default): their outcomes go there too. */
  history: boolean;
  /** Without history only: a one-shot alarm delivered is deleted rather than kept `fired`. */
  deleteFired: boolean;
  /**
   * Without history only: the rows were claimed by `alarmsClaimHeld` and are locked by the
   * transaction `ex` is, so they are written by id, with no lease to match.
   */
  held?: boolean;
}

const WITH_HISTORY: RecordMode = { history: true, deleteFired: false };

/** Records outcomes; returns the ids of the alarms updated (the rest were fenced out). */
export async function alarmsRecordOutcomes(
  ex: Executor,
  outcomes: readonly Outcome[],
  mode: RecordMode = WITH_HISTORY,
): Promise<Set<string>> {
  // With history, by id: there the alarm's row is a small part of the recording, and its plan
  // joined to the places was no cheaper (bench/README.md, "Drain").
  if (mode.history) return recordOutcomes(ex, outcomes, mode, false);
  const updated = await recordOutcomes(ex, outcomes, mode, true);
  // Those whose rows moved since their claims, by id (see above).
  const moved = updated.size === outcomes.length ? [] : outcomes.filter((o) => !updated.has(o.alarmId));
  if (moved.length > 0) for (const id of await recordOutcomes(ex, moved, mode, false)) updated.add(id);
  return updated;
}

async function recordOutcomes(
  ex: Executor,
  outcomes: readonly Outcome[],
  mode: RecordMode,
  atRow: boolean,
): Promise<Set<string>> {
  if (outcomes.length === 0) return new Set();
  const statements = RECORDING[atRow ? 1 : 0]!;
  // A row's place quoted: `(page,item)` holds a comma. One never claimed is nowhere: (0,0).
  const rows = (list: readonly Outcome[]) => (atRow ? [arrayLiteral(list.map(rowOf), textElement)] : []);
  if (!mode.history && mode.deleteFired) {
    const fired = outcomes.filter((o) => o.result === 'delivered' && o.status === 'fired');
    if (fired.length > 0) {
      const rest = outcomes.filter((o) => !(o.result === 'delivered' && o.status === 'fired'));
      const bare = (f: (o: Outcome) => string) => arrayLiteral(fired.map(f), String);
      const held = mode.held ?? false;
      const [gone, updated] = await Promise.all([
        held
          ? ex.query<Written>(statements.deleteFiredHeld, [bare((o) => o.alarmId), ...rows(fired)])
          : ex.query<Written>(statements.deleteFired, [
              bare((o) => o.alarmId),
              bare((o) => o.leaseToken),
              ...rows(fired),
            ]),
        recordOutcomes(ex, rest, { history: false, deleteFired: false, held }, atRow),
      ]);
      for (const id of writtenIds(fired, gone)) updated.add(id);
      return updated;
    }
  }
  // Array literals of our own (db.ts), not the driver's; ids and numbers bare, text quoted.
  const text = (f: (o: Outcome) => string) => arrayLiteral(outcomes.map(f), textElement);
  const bare = (f: (o: Outcome) => string | number | null) => arrayLiteral(outcomes.map(f), String);
  const alarmIds = bare((o) => o.alarmId);
  const leaseTokens = bare((o) => o.leaseToken);
  const results = text((o) => o.result);
  const statuses = text((o) => o.status);
  const nextFires = bare((o) => o.nextFireAt.getTime());
  const scheduled = bare((o) => o.scheduledFor.getTime());
  const failures = bare((o) => o.failureCount);
  const errors = text((o) => capLastError(o.lastError));
  const lastFired = bare((o) => o.lastFiredAt?.getTime() ?? null);
  // The untracked statement's parameters, in its order; the one with history adds the wake's.
  const onAlarm = [
    alarmIds,
    leaseTokens,
    results,
    statuses,
    nextFires,
    scheduled,
    failures,
    errors,
    lastFired,
  ];
  const result = mode.history
    ? await ex.query<Written>(record, [
        alarmIds,
        leaseTokens,
        bare((o) => o.wakeId),
        bare((o) => o.attempt),
        ...onAlarm.slice(2),
        bare((o) => o.startedAt.getTime()),
        bare((o) => o.finishedAt.getTime()),
        bare((o) => Math.max(0, Math.round(o.latenessMs))),
        bare((o) => o.statusCode),
      ])
    : mode.held
      ? await ex.query<Written>(statements.held, [
          alarmIds,
          bare((o) => o.wakeId),
          ...onAlarm.slice(2),
          bare((o) => o.attempt),
          ...rows(outcomes),
        ])
      : await ex.query<Written>(statements.untracked, [...onAlarm, ...rows(outcomes)]);
  return new Set(writtenIds(outcomes, result));
}

const rowOf = (o: Outcome): string => o.row || '(0,0)';

/** A recording's answer (see WRITTEN_FROM). */
type Written = { written: string | null };

/** The ids of the alarms a recording of `outcomes` wrote, from its answer. */
function writtenIds(outcomes: readonly Outcome[], [answer]: Written[]): string[] {
  const written = answer!.written;
  if (written === null) return outcomes.map((o) => o.alarmId);
  return written === '' ? [] : written.split(',');
}

// Gives leases back (shutdown): the rows are due again at once for any worker.
const release = sql(
  'alarms_release',
  `UPDATE chronos.alarms a SET claimed_at = NULL, lease_token = NULL, updated_at = now()
   FROM unnest($1::uuid[], $2::uuid[]) AS o(id, lease_token)
   WHERE a.id = o.id AND a.lease_token = o.lease_token`,
);

export async function alarmsRelease(
  ex: Executor,
  leases: readonly { alarmId: string; leaseToken: string }[],
): Promise<void> {
  if (leases.length === 0) return;
  await ex.query(release, [leases.map((l) => l.alarmId), leases.map((l) => l.leaseToken)]);
}

// Gives back claims that were not sent (an owner past its share of the delivery slots): the
// lease, and the attempt the claim counted on the alarm and its wake, so the next claim of the
// row counts it as the attempt it is.
const releaseUnsent = sql(
  'alarms_release_unsent',
  `WITH released AS (
     UPDATE chronos.alarms a SET claimed_at = NULL, lease_token = NULL,
       fire_attempts = greatest(a.fire_attempts - 1, 0)
     FROM unnest($1::uuid[], $2::uuid[]) AS o(id, lease_token)
     WHERE a.id = o.id AND a.lease_token = o.lease_token
     RETURNING a.wake_id
   )
   UPDATE chronos.wakes w SET attempts = greatest(w.attempts - 1, 0)
   FROM released r WHERE w.id = r.wake_id`,
);

/** Releases claims never sent, as if they had not been claimed (see releaseUnsent). */
export async function alarmsReleaseUnsent(
  ex: Executor,
  leases: readonly { alarmId: string; leaseToken: string }[],
): Promise<void> {
  if (leases.length === 0) return;
  await ex.query(releaseUnsent, [leases.map((l) => l.alarmId), leases.map((l) => l.leaseToken)]);
}

// Whether an owner not in $3 has an alarm due on the queue that no lease holds: the dispatcher
// asks before it holds an owner to its share of the delivery slots (the share yields to nobody
// else's work otherwise).
const othersDue = sql(
  'alarms_others_due',
  `SELECT EXISTS (
     SELECT 1 FROM chronos.alarms
     WHERE (status = 'active' OR trigger = 'manual') AND queue = $1 AND next_fire_at <= now()
       AND (claimed_at IS NULL OR claimed_at <= now() - $2::int * interval '1 millisecond')
       AND owner_did <> ALL($3::text[])
   ) AS waiting`,
);

export async function alarmsOthersDue(
  ex: Executor,
  queue: string,
  leaseMs: number,
  owners: readonly string[],
): Promise<boolean> {
  const [row] = await ex.query<{ waiting: boolean }>(othersDue, [
    queue,
    Math.round(leaseMs),
    arrayLiteral(owners, textElement),
  ]);
  return row?.waiting === true;
}

// Milliseconds from the database's now() to the earliest unclaimed active alarm (index-only
// walk of alarms_claim_idx), or null when nothing waits. Lapsed leases are found by the poll.
const nextDue = sql(
  'alarms_next_due',
  `SELECT greatest(0, extract(epoch FROM (next_fire_at - now())) * 1000)::float8 AS ms
   FROM chronos.alarms WHERE (status = 'active' OR trigger = 'manual') AND queue = $1 AND claimed_at IS NULL
   ORDER BY next_fire_at LIMIT 1`,
);

export async function alarmsNextDueMs(ex: Executor, queue: string): Promise<number | null> {
  const [row] = await ex.query<{ ms: number }>(nextDue, [queue]);
  return row ? row.ms : null;
}
