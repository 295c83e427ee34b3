/**
 * Figures for the dashboard's lateness chart (contract §15): how late recent scheduled fires
 * were, per minute, and which active alarms fall due soon. Read-only; nothing here takes a lock.
 *
 * Lateness here is a wake's `fired_at` minus its `scheduled_for` (when the dispatcher took the
 * occurrence, against when it was due), measured by the database's clock; manual fires ("fire
 * now") are left out, as they had no due instant to be late for. Every statement exists twice:
 * for one owner ($1) and for every owner (the operator token with no `X-Chronos-Owner`).
 */
import { sql, type Executor } from './driver/db.js';
import type { AlarmKind } from '../types.js';

// A wake's created_at is its fired_at (both now() of the insert that opens it), so the window on
// created_at lets one owner's figures range-scan wakes_owner_idx (owner_did, created_at DESC)
// instead of reading every wake the owner has. Every owner's read the wakes retention keeps.
const lateness = (name: string, owner: string) =>
  sql(
    name,
    `SELECT (extract(epoch FROM date_trunc('minute', fired_at)) * 1000)::int8::text AS minute_ms,
       count(*)::int AS fires,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM fired_at - scheduled_for) * 1000)
         AS p50_ms,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM fired_at - scheduled_for) * 1000)
         AS p99_ms
     FROM chronos.wakes
     WHERE ${owner} AND trigger = 'schedule' AND created_at >= $2::timestamptz AND fired_at >= $2::timestamptz
     GROUP BY 1 ORDER BY 1`,
  );
const latenessOfOwner = lateness('fire_stats_lateness', 'owner_did = $1');
const latenessOfAll = lateness('fire_stats_lateness_every_owner', '$1::text IS NULL');

export interface LatenessMinute {
  /** The minute's start. */
  minute: Date;
  fires: number;
  p50Ms: number;
  p99Ms: number;
}

/** Scheduled fires since `since` (the start of a minute), grouped by the minute they fired in. */
export async function wakesLatenessByMinute(
  ex: Executor,
  ownerDid: string | null,
  since: Date,
): Promise<LatenessMinute[]> {
  const rows = await ex.query<{
    minute_ms: string;
    fires: number;
    p50_ms: number | string;
    p99_ms: number | string;
  }>(ownerDid === null ? latenessOfAll : latenessOfOwner, [ownerDid, since]);
  return rows.map((r) => ({
    minute: new Date(Number(r.minute_ms)),
    fires: r.fires,
    p50Ms: Math.round(Number(r.p50_ms)),
    p99Ms: Math.round(Number(r.p99_ms)),
  }));
}

// Active alarms due before $2: the schedule columns only, read by the claim index's own predicate.
const dueBefore = (name: string, owner: string) =>
  sql(
    name,
    `SELECT kind, cron_expr, timezone, next_fire_at FROM chronos.alarms
     WHERE ${owner} AND status = 'active' AND next_fire_at < $2::timestamptz
     ORDER BY next_fire_at LIMIT $3`,
  );
// One owner's alarms on the two indexes that hold them (as alarms.ts's bulk cancel, 0016).
export const dueOfOwner = dueBefore(
  'fire_stats_due_before',
  "owner_did = $1 AND (source <> 'library' OR idempotency_key <> '')",
);
const dueOfAll = dueBefore('fire_stats_due_before_every_owner', '$1::text IS NULL');

export interface DueSchedule {
  kind: AlarmKind;
  cronExpr: string;
  timezone: string;
  nextFireAt: Date;
}

/** Up to `limit` active alarms next due before `until`, soonest first. */
export async function alarmsDueBefore(
  ex: Executor,
  ownerDid: string | null,
  until: Date,
  limit: number,
): Promise<DueSchedule[]> {
  const rows = await ex.query<{ kind: AlarmKind; cron_expr: string; timezone: string; next_fire_at: Date }>(
    ownerDid === null ? dueOfAll : dueOfOwner,
    [ownerDid, until, limit],
  );
  return rows.map((r) => ({
    kind: r.kind,
    cronExpr: r.cron_expr,
    timezone: r.timezone,
    nextFireAt: r.next_fire_at,
  }));
}
