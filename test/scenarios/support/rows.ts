/**
 * The scenarios' own statements: bulk set-up of waiting alarms (as a busy service would hold
 * them) and read-only checks of what the processes left in the tables.
 */
import { randomUUID } from 'node:crypto';
import { sql, type Db } from '../../../packages/chronos-timers/src/store/driver/db.js';
import { ATTEMPTS_OF_WAKE } from '../../../packages/chronos-timers/src/store/wakes.js';

/** `count` owners `did:matrix:<uuid>:<name>-<i>`. */
export function owners(count: number, name = 'scenario'): string[] {
  return Array.from({ length: count }, (_, i) => `did:matrix:${randomUUID()}:${name}-${i}`);
}

// $1 alarms, the first due $2 ms from now() and the rest spread evenly over $3 ms; owners taken
// round-robin from $4; labels $5 || i; max_failures $6; require_ack $7.
const load = sql(
  'scenario_load_alarms',
  `INSERT INTO chronos.alarms (owner_did, user_id, label, kind, fire_at, next_fire_at, scheduled_for, max_failures,
     require_ack, payload, source, queue)
   SELECT o.did, split_part(o.did, ':', 3), $5::text || i, 'once', d.t, d.t, d.t, $6::int, $7::boolean,
     jsonb_build_object('n', i, 'big', 12345678901234567890), 'api', 'router'
   FROM generate_series(0, $1::int - 1) AS i,
     LATERAL (SELECT now() + ($2::float8 + CASE WHEN $1::int > 1 THEN i * $3::float8 / ($1::int - 1) ELSE 0 END)
       * interval '1 millisecond') AS d(t),
     LATERAL (SELECT ($4::text[])[1 + i % array_length($4::text[], 1)]) AS o(did)
   RETURNING id::text AS id, extract(epoch FROM scheduled_for)::float8 * 1000 AS due_ms`,
);

export interface LoadOptions {
  count: number;
  /** When the first is due, from the database's now(). */
  firstDueInMs: number;
  /** The rest are spread evenly over this (0: all due at once). */
  spreadMs?: number;
  owners: string[];
  label?: string;
  maxFailures?: number;
  requireAck?: boolean;
}

/** Inserts waiting one-shot alarms; returns alarm id → due instant (ms, database clock). */
export async function loadAlarms(db: Db, options: LoadOptions): Promise<Map<string, number>> {
  const due = new Map<string, number>();
  const chunk = 5_000;
  for (let done = 0; done < options.count; done += chunk) {
    const n = Math.min(chunk, options.count - done);
    const spreadMs = options.spreadMs ?? 0;
    // Each chunk takes its slice of the spread, so the whole load is one even spread.
    const first = options.firstDueInMs + (options.count > 1 ? (done * spreadMs) / (options.count - 1) : 0);
    const slice = options.count > 1 ? ((n - 1) * spreadMs) / (options.count - 1) : 0;
    const rows = await db.query<{ id: string; due_ms: number }>(load, [
      n,
      first,
      slice,
      options.owners,
      `${options.label ?? 'scenario'}-${done}-`,
      options.maxFailures ?? 5,
      options.requireAck ?? false,
    ]);
    for (const row of rows) due.set(row.id, row.due_ms);
  }
  return due;
}

const states = sql(
  'scenario_alarm_states',
  `SELECT id::text AS id, status, last_error, failure_count FROM chronos.alarms WHERE id = ANY($1::uuid[])`,
);

export interface AlarmState {
  status: string;
  lastError: string;
  failureCount: number;
}

export async function alarmStates(db: Db, ids: string[]): Promise<Map<string, AlarmState>> {
  const rows = await db.query<{ id: string; status: string; last_error: string; failure_count: number }>(
    states,
    [ids],
  );
  return new Map(
    rows.map((r) => [r.id, { status: r.status, lastError: r.last_error, failureCount: r.failure_count }]),
  );
}

const early = sql(
  'scenario_wakes_fired_early',
  `SELECT count(*)::int AS n FROM chronos.wakes WHERE fired_at < scheduled_for`,
);

/** Wakes opened before their due instant, by the database clock (I2, I5): must be 0. */
export async function wakesFiredEarly(db: Db): Promise<number> {
  const [row] = await db.query<{ n: number }>(early);
  return row!.n;
}

const byStatus = sql(
  'scenario_alarms_by_status',
  `SELECT status, count(*)::int AS n FROM chronos.alarms GROUP BY status ORDER BY status`,
);

export async function alarmsByStatus(db: Db): Promise<Record<string, number>> {
  const rows = await db.query<{ status: string; n: number }>(byStatus);
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

const reclaimed = sql(
  'scenario_wakes_reclaimed',
  `SELECT w.id::text AS wake_id, w.alarm_id::text AS alarm_id, w.attempts
   FROM chronos.wakes w WHERE w.attempts > 1`,
);

/** Wakes claimed more than once (a retry, or a lease that lapsed and was taken again). */
export async function wakesClaimedAgain(db: Db): Promise<Map<string, number>> {
  const rows = await db.query<{ wake_id: string; attempts: number }>(reclaimed);
  return new Map(rows.map((r) => [r.wake_id, r.attempts]));
}

const attempts = sql(
  'scenario_wake_attempts',
  `SELECT w.alarm_id::text AS alarm_id, a.wake_id::text AS wake_id, a.attempt, a.outcome, a.duration_ms,
     a.error, extract(epoch FROM a.started_at)::float8 * 1000 AS started_ms
   FROM chronos.wakes w CROSS JOIN LATERAL ${ATTEMPTS_OF_WAKE} a ORDER BY a.started_at`,
);

export interface AttemptRow {
  alarm_id: string;
  wake_id: string;
  attempt: number;
  outcome: string;
  duration_ms: number;
  error: string;
  started_ms: number;
}

export async function wakeAttempts(db: Db): Promise<AttemptRow[]> {
  return db.query<AttemptRow>(attempts);
}

const dbNow = sql('scenario_db_now', `SELECT extract(epoch FROM clock_timestamp())::float8 * 1000 AS ms`);

/** The database's clock, ms. */
export async function databaseNowMs(db: Db): Promise<number> {
  const [row] = await db.query<{ ms: number }>(dbNow);
  return row!.ms;
}
