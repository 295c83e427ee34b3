/**
 * The tracker's statements on `wakes` (contract §7): claim and record the nudge, escalation and
 * receipt stages, prune finished wakes, and count wakes for the metrics.
 *
 * Every claim is one statement per batch: it picks due wakes `FOR UPDATE SKIP LOCKED` and marks
 * each with a lease (`<stage>_lease_until`, a fresh `<stage>_lease_token`) before anything is
 * sent, so any number of trackers may run at once and each stage is sent by one of them. A
 * tracker that dies after claiming leaves a lease that lapses: the stage is sent again later,
 * never lost (at least once). Outcomes are recorded only under the token they were claimed
 * with. Time is the database's `now()`; nothing here reads a local clock.
 *
 * Withdrawn wakes are never nudged or escalated: the owner cancelled the alarm, or — for a wake
 * still pending — rescheduled or cancelled it so that the dispatcher no longer holds that wake
 * (`alarms.wake_id` moved on: the occurrence will never be delivered).
 */
import { alarmColumns, toAlarm, type AlarmRow } from './alarms.js';
import { pruneBatch, sql, type Executor, type PruneBatch } from './driver/db.js';
import type { Alarm, Trigger } from '../types.js';
import { capLastError } from './last-error.js';

const MS = `interval '1 millisecond'`;

/** The alarm's columns under alias `a`, named as AlarmRow expects. */
const ALARM_COLUMNS = alarmColumns('a');

/** True when the owner withdrew wake `w` (see the module comment). */
const withdrawn = (w: string) => `EXISTS (SELECT 1 FROM chronos.alarms x WHERE x.id = ${w}.alarm_id
  AND (x.status = 'cancelled' OR (${w}.status = 'pending' AND x.wake_id IS DISTINCT FROM ${w}.id)))`;

// The predicates below repeat the partial indexes' own (migrations 0005, 0009) so the planner
// uses them. A nudge counts from delivery: a wake the router never received is never nudged.
const NUDGE_OPEN = (w: string) => `${w}.require_ack AND ${w}.status = 'delivered'
  AND (${w}.nudged_at IS NULL OR ${w}.nudge_lease_token IS NOT NULL)`;
const ESCALATION_OPEN = (w: string) => `${w}.require_ack AND ${w}.escalated_at IS NULL
  AND ${w}.status IN ('pending', 'delivered', 'failed')`;
const RECEIPT_OPEN = (w: string) => `${w}.status = 'acknowledged' AND ${w}.receipt_sent_at IS NULL`;
const RETENTION_FROM = `CASE WHEN status = 'acknowledged' THEN acknowledged_at
         WHEN status = 'failed' THEN fired_at
         WHEN NOT require_ack THEN delivered_at
         ELSE escalated_at END`;

/** One claimed stage send: which wake, under which lease token, and the how-many-th attempt. */
export interface StageClaim {
  wakeId: string;
  token: string;
  /** 1 for the first send of this stage. */
  attempt: number;
}

/** How one stage send ended, to be recorded. */
export interface StageOutcome {
  wakeId: string;
  token: string;
  ok: boolean;
  /** On failure: what happened, in one line (kept in `tracker_error`). */
  error: string;
  /** On failure: when to try again, from now. */
  retryMs: number;
}

export interface NudgeClaim extends StageClaim {
  /** The alarm as it is now (label, message and payload of the nudge). */
  alarm: Alarm;
  /** The wake's own conversation: the one the fire went to. */
  conversationId: string;
  fireCount: number;
  firedAt: Date;
  /** What brought the wake being nudged. */
  trigger: Trigger;
  scheduledFor: Date;
  latenessMs: number | null;
}

/** A stage claim that names its alarm and owner (the messages to the fallback URL do). */
export interface OwnedStageClaim extends StageClaim {
  alarmId: string;
  userId: string;
  ownerDid: string;
  label: string;
}

export interface EscalationClaim extends OwnedStageClaim {
  conversationId: string;
  wakeMessage: string;
  firedAt: Date;
  /** Whole seconds from the fire to the claim, by the database clock. */
  ageSeconds: number;
}

export interface ReceiptClaim extends OwnedStageClaim {
  note: string | null;
  inferred: boolean;
  acknowledgedAt: Date;
}

/**
 * Claims up to $2 wakes whose nudge is due: delivered and still unacknowledged $1 ms after the
 * delivery, not nudged yet (or nudged by a claim whose lease lapsed), not waiting out a
 * retry, not withdrawn. `nudged_at` is set at the claim, as `fired_at` is for the fire, so a
 * reply reported while the nudge is on its way falls inside the reply window.
 */
const claimNudges = sql(
  'wakes_claim_nudges',
  `UPDATE chronos.wakes w SET nudged_at = now(), nudge_lease_until = now() + $3::float8 * ${MS},
     nudge_lease_token = gen_random_uuid(), nudge_attempts = w.nudge_attempts + 1, updated_at = now()
   FROM chronos.alarms a
   WHERE w.id = ANY(ARRAY(
       SELECT c.id FROM chronos.wakes c
       WHERE ${NUDGE_OPEN('c')}
         AND c.delivered_at <= now() - $1::float8 * ${MS}
         AND (c.nudge_lease_until IS NULL OR c.nudge_lease_until <= now())
         AND NOT ${withdrawn('c')}
       ORDER BY c.delivered_at
       LIMIT $2
       FOR UPDATE OF c SKIP LOCKED))
     AND a.id = w.alarm_id
   RETURNING w.id::text AS wake_id, w.nudge_lease_token::text AS token, w.nudge_attempts AS attempt,
     w.conversation_id AS wake_conversation_id, w.fire_count, w.fired_at AS wake_fired_at, w.trigger AS wake_trigger,
     w.scheduled_for AS wake_scheduled_for, w.lateness_ms, ${ALARM_COLUMNS}`,
);

interface NudgeRow extends AlarmRow {
  wake_id: string;
  token: string;
  attempt: number;
  wake_conversation_id: string;
  fire_count: number;
  wake_fired_at: Date;
  wake_trigger: Trigger;
  wake_scheduled_for: Date;
  lateness_ms: number | null;
}

export async function wakesClaimNudges(
  ex: Executor,
  options: { nudgeAfterMs: number; limit: number; leaseMs: number },
): Promise<NudgeClaim[]> {
  const rows = await ex.query<NudgeRow>(claimNudges, [options.nudgeAfterMs, options.limit, options.leaseMs]);
  return rows
    .map((row) => ({
      wakeId: row.wake_id,
      token: row.token,
      attempt: row.attempt,
      alarm: toAlarm(row),
      conversationId: row.wake_conversation_id,
      fireCount: row.fire_count,
      firedAt: row.wake_fired_at,
      trigger: row.wake_trigger,
      scheduledFor: row.wake_scheduled_for,
      latenessMs: row.lateness_ms,
    }))
    .sort((x, y) => x.firedAt.getTime() - y.firedAt.getTime());
}

/**
 * Records a batch of one stage's sends under that stage's own lease token: `done` says what the
 * stage's timestamp becomes for a 2xx (and otherwise), a failure sets when to try again and the
 * error. Recorded even when the wake was acknowledged meanwhile: it was sent.
 */
const recordStage = (name: string, prefix: 'nudge' | 'escalation' | 'receipt', done: string) =>
  sql(
    name,
    `UPDATE chronos.wakes w SET
     ${done},
     ${prefix}_lease_until = CASE WHEN o.ok THEN NULL ELSE now() + o.retry_ms * ${MS} END,
     ${prefix}_lease_token = NULL,
     tracker_error = CASE WHEN o.ok THEN w.tracker_error ELSE o.error END,
     updated_at = now()
   FROM unnest($1::uuid[], $2::uuid[], $3::bool[], $4::text[], $5::float8[]) AS o(id, token, ok, error, retry_ms)
   WHERE w.id = o.id AND w.${prefix}_lease_token = o.token
   RETURNING w.id::text AS id`,
  );

// Records nudge sends under their own lease token: a success keeps nudged_at (the stage is done),
// a failure clears it and sets when to try again.
const recordNudges = recordStage(
  'wakes_record_nudges',
  'nudge',
  'nudged_at = CASE WHEN o.ok THEN w.nudged_at END',
);

/**
 * Claims up to $2 wakes whose escalation is due: requiring an ack, not acknowledged (pending,
 * delivered, or failed: a router that refused the wake must not hide it from a human), $1 ms
 * after the fire, not escalated yet, not under a live lease or waiting out a retry, not
 * withdrawn. `escalated_at` is written only by a 2xx outcome.
 */
const claimEscalations = sql(
  'wakes_claim_escalations',
  `UPDATE chronos.wakes w SET escalation_lease_until = now() + $3::float8 * ${MS},
     escalation_lease_token = gen_random_uuid(), escalation_attempts = w.escalation_attempts + 1,
     updated_at = now()
   FROM chronos.alarms a
   WHERE w.id = ANY(ARRAY(
       SELECT c.id FROM chronos.wakes c
       WHERE ${ESCALATION_OPEN('c')}
         AND c.fired_at <= now() - $1::float8 * ${MS}
         AND (c.escalation_lease_until IS NULL OR c.escalation_lease_until <= now())
         AND NOT ${withdrawn('c')}
       ORDER BY c.fired_at
       LIMIT $2
       FOR UPDATE OF c SKIP LOCKED))
     AND a.id = w.alarm_id
   RETURNING w.id::text AS wake_id, w.escalation_lease_token::text AS token, w.escalation_attempts AS attempt,
     w.alarm_id::text AS alarm_id, w.user_id, w.owner_did, a.label, w.conversation_id, a.wake_message,
     w.fired_at, floor(extract(epoch FROM (now() - w.fired_at)))::int AS age_seconds`,
);

interface OwnedStageRow {
  wake_id: string;
  token: string;
  attempt: number;
  alarm_id: string;
  user_id: string;
  owner_did: string;
  label: string;
}

function toOwnedStageClaim(row: OwnedStageRow): OwnedStageClaim {
  return {
    wakeId: row.wake_id,
    token: row.token,
    attempt: row.attempt,
    alarmId: row.alarm_id,
    userId: row.user_id,
    ownerDid: row.owner_did,
    label: row.label,
  };
}

interface EscalationRow extends OwnedStageRow {
  conversation_id: string;
  wake_message: string;
  fired_at: Date;
  age_seconds: number;
}

export async function wakesClaimEscalations(
  ex: Executor,
  options: { escalateAfterMs: number; limit: number; leaseMs: number },
): Promise<EscalationClaim[]> {
  const rows = await ex.query<EscalationRow>(claimEscalations, [
    options.escalateAfterMs,
    options.limit,
    options.leaseMs,
  ]);
  return rows
    .map((row) => ({
      ...toOwnedStageClaim(row),
      conversationId: row.conversation_id,
      wakeMessage: row.wake_message,
      firedAt: row.fired_at,
      ageSeconds: row.age_seconds,
    }))
    .sort((x, y) => x.firedAt.getTime() - y.firedAt.getTime());
}

// Records escalation sends under their own lease token: escalated_at only for a 2xx, otherwise
// when to try again. Recorded even when the wake was acknowledged meanwhile: it was sent.
const recordEscalations = recordStage(
  'wakes_record_escalations',
  'escalation',
  'escalated_at = CASE WHEN o.ok THEN now() ELSE w.escalated_at END',
);

/**
 * Claims up to $1 acknowledged wakes whose receipt has not been accepted yet, oldest ack first,
 * not under a live lease or waiting out a retry. Every ack, explicit or inferred, gets one.
 */
const claimReceipts = sql(
  'wakes_claim_receipts',
  `UPDATE chronos.wakes w SET receipt_lease_until = now() + $2::float8 * ${MS},
     receipt_lease_token = gen_random_uuid(), receipt_attempts = w.receipt_attempts + 1, updated_at = now()
   FROM chronos.alarms a
   WHERE w.id = ANY(ARRAY(
       SELECT c.id FROM chronos.wakes c
       WHERE ${RECEIPT_OPEN('c')}
         AND (c.receipt_lease_until IS NULL OR c.receipt_lease_until <= now())
       ORDER BY c.acknowledged_at
       LIMIT $1
       FOR UPDATE OF c SKIP LOCKED))
     AND a.id = w.alarm_id
   RETURNING w.id::text AS wake_id, w.receipt_lease_token::text AS token, w.receipt_attempts AS attempt,
     w.alarm_id::text AS alarm_id, w.user_id, w.owner_did, a.label, w.ack_note, w.ack_inferred,
     w.acknowledged_at`,
);

interface ReceiptRow extends OwnedStageRow {
  ack_note: string | null;
  ack_inferred: boolean;
  acknowledged_at: Date;
}

export async function wakesClaimReceipts(
  ex: Executor,
  options: { limit: number; leaseMs: number },
): Promise<ReceiptClaim[]> {
  const rows = await ex.query<ReceiptRow>(claimReceipts, [options.limit, options.leaseMs]);
  return rows
    .map((row) => ({
      ...toOwnedStageClaim(row),
      note: row.ack_note,
      inferred: row.ack_inferred,
      acknowledgedAt: row.acknowledged_at,
    }))
    .sort((x, y) => x.acknowledgedAt.getTime() - y.acknowledgedAt.getTime());
}

// Records receipt sends under their own lease token: receipt_sent_at only for a 2xx.
const recordReceipts = recordStage(
  'wakes_record_receipts',
  'receipt',
  'receipt_sent_at = CASE WHEN o.ok THEN now() ELSE w.receipt_sent_at END',
);

export type Stage = 'nudge' | 'escalation' | 'receipt';

const RECORDERS = { nudge: recordNudges, escalation: recordEscalations, receipt: recordReceipts };

/**
 * Records a batch of one stage's outcomes in one statement. Returns the wakes recorded; the rest
 * were fenced out (their lease lapsed and another claim took the stage) or pruned meanwhile.
 */
export async function wakesRecordStage(
  ex: Executor,
  stage: Stage,
  outcomes: readonly StageOutcome[],
): Promise<Set<string>> {
  if (outcomes.length === 0) return new Set();
  const rows = await ex.query<{ id: string }>(RECORDERS[stage], [
    outcomes.map((o) => o.wakeId),
    outcomes.map((o) => o.token),
    outcomes.map((o) => o.ok),
    outcomes.map((o) => (o.ok ? '' : capLastError(o.error))),
    outcomes.map((o) => (o.ok ? 0 : Math.max(0, Math.round(o.retryMs)))),
  ]);
  return new Set(rows.map((r) => r.id));
}

/**
 * Deletes up to $2 finished wakes whose retention period ($1 ms) is over, oldest first, with
 * their attempts (in the same statement: no foreign key cascades since migration 0013):
 * acknowledged ones (from the ack), failed ones (from the fire), delivered ones that need no ack
 * (from the delivery) or that were escalated (from the escalation) — of every queue's alarms, or
 * only of those in $3. A pending wake, and a delivered one still waiting for its ack and not
 * escalated, is never deleted.
 */
const pruneStatement = (name: string, scope: string) =>
  sql(
    name,
    `WITH gone AS (
       DELETE FROM chronos.wakes WHERE id = ANY(ARRAY(
         SELECT id FROM chronos.wakes w
         WHERE status <> 'pending' AND (${RETENTION_FROM}) < now() - $1::float8 * ${MS}
           ${scope}
         ORDER BY (${RETENTION_FROM})
         LIMIT $2
         FOR UPDATE SKIP LOCKED))
       RETURNING id
     ), attempts AS (
       DELETE FROM chronos.wake_attempts t USING gone WHERE t.wake_id = gone.id
     )
     SELECT id::text AS id FROM gone`,
  );
const prune = pruneStatement('wakes_prune', '');
const pruneQueues = pruneStatement(
  'wakes_prune_of_queues',
  'AND EXISTS (SELECT 1 FROM chronos.alarms a WHERE a.id = w.alarm_id AND a.queue = ANY($3::text[]))',
);

/** Prunes one batch (with `queues`, only their alarms' wakes); returns how many wakes it deleted. */
export function wakesPrune(ex: Executor, options: PruneBatch): Promise<number> {
  return pruneBatch(ex, { every: prune, ofQueues: pruneQueues }, options);
}

/**
 * Milliseconds from the database's now() until the next nudge or escalation falls due, among
 * wakes not under a lease or waiting out a retry (those are found by the poll); 0 when one is
 * due already, null when nothing waits. A null delay leaves that stage out.
 */
const nextDue = sql(
  'wakes_next_stage_due',
  `SELECT (extract(epoch FROM (least(
       (SELECT c.delivered_at FROM chronos.wakes c
        WHERE ${NUDGE_OPEN('c')} AND c.nudge_lease_until IS NULL AND NOT ${withdrawn('c')}
        ORDER BY c.delivered_at LIMIT 1) + $1::float8 * ${MS},
       (SELECT c.fired_at FROM chronos.wakes c
        WHERE ${ESCALATION_OPEN('c')} AND c.escalation_lease_until IS NULL AND NOT ${withdrawn('c')}
        ORDER BY c.fired_at LIMIT 1) + $2::float8 * ${MS}
     ) - now())) * 1000)::float8 AS ms`,
);

export async function wakesNextStageDueMs(
  ex: Executor,
  options: { nudgeAfterMs: number | null; escalateAfterMs: number | null },
): Promise<number | null> {
  const [row] = await ex.query<{ ms: number | null }>(nextDue, [
    options.nudgeAfterMs,
    options.escalateAfterMs,
  ]);
  const ms = row?.ms ?? null;
  return ms === null ? null : Math.max(0, ms);
}

/**
 * Where each wake stands, one stage per wake: `pending` (not delivered yet), `delivered` (needs
 * no ack), `awaiting_ack`, `nudged`, `escalated`, `acknowledged`, `failed`.
 */
const countByStage = sql(
  'wakes_count_by_stage',
  `SELECT CASE
       WHEN status = 'acknowledged' THEN 'acknowledged'
       WHEN status = 'failed' THEN 'failed'
       WHEN require_ack AND escalated_at IS NOT NULL THEN 'escalated'
       WHEN require_ack AND nudged_at IS NOT NULL THEN 'nudged'
       WHEN status = 'pending' THEN 'pending'
       WHEN NOT require_ack THEN 'delivered'
       ELSE 'awaiting_ack' END AS stage,
     count(*)::int AS n
   FROM chronos.wakes GROUP BY 1`,
);

export const WAKE_STAGES = [
  'pending',
  'delivered',
  'awaiting_ack',
  'nudged',
  'escalated',
  'acknowledged',
  'failed',
] as const;
export type WakeStage = (typeof WAKE_STAGES)[number];

export async function wakesCountByStage(ex: Executor): Promise<Record<WakeStage, number>> {
  const counts = Object.fromEntries(WAKE_STAGES.map((s) => [s, 0])) as Record<WakeStage, number>;
  for (const row of await ex.query<{ stage: WakeStage; n: number }>(countByStage)) counts[row.stage] = row.n;
  return counts;
}

/**
 * Stage sends that are due and not done — under way, waiting out a retry, or not sent because
 * their target is not configured: the tracker's backlog.
 */
const backlog = sql(
  'wakes_stage_backlog',
  `SELECT
     (SELECT count(*)::int FROM chronos.wakes c
      WHERE ${NUDGE_OPEN('c')} AND c.delivered_at <= now() - $1::float8 * ${MS} AND NOT ${withdrawn('c')}) AS nudge,
     (SELECT count(*)::int FROM chronos.wakes c
      WHERE ${ESCALATION_OPEN('c')} AND c.fired_at <= now() - $2::float8 * ${MS} AND NOT ${withdrawn('c')})
       AS escalation,
     (SELECT count(*)::int FROM chronos.wakes c WHERE ${RECEIPT_OPEN('c')}) AS receipt`,
);

export async function wakesStageBacklog(
  ex: Executor,
  options: { nudgeAfterMs: number; escalateAfterMs: number },
): Promise<Record<Stage, number>> {
  const [row] = await ex.query<Record<Stage, number>>(backlog, [
    options.nudgeAfterMs,
    options.escalateAfterMs,
  ]);
  return row ?? { nudge: 0, escalation: 0, receipt: 0 };
}
