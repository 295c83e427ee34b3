/**
 * The schedules file on a test database: a SchedulesFileService over the real store, files in a
 * real temporary directory written the ways people and editors write them, the heads-up outbox
 * read back, and a logger whose lines the test can read.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, open, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { SchedulesFileService } from '../../packages/chronos-timers/src/core/schedules-file-service.js';
import type { Quotas } from '../../packages/chronos-timers/src/core/alarm-service.js';
import {
  applySchedulesFile,
  type FileReport,
} from '../../packages/chronos-timers-server/src/schedules-file/apply.js';
import { DbClock } from '../../packages/chronos-timers/src/store/driver/db-clock.js';
import { sql, type Db, type Executor } from '../../packages/chronos-timers/src/store/driver/db.js';
import { scheduleChangedBody } from '../../packages/chronos-timers/src/wire/schedules-file.js';
import { TMP_DIR } from '../support/env.js';
import { makeService, OTHER, OWNER } from '../support/harness.js';

export { OTHER, OWNER };

export function fileService(
  db: Db,
  options: { quotas?: Partial<Quotas>; onHeadsUps?: () => void } = {},
): SchedulesFileService {
  return new SchedulesFileService({
    db,
    alarms: makeService(db, { quotas: options.quotas }),
    dbClock: new DbClock(db),
    minCronIntervalMs: options.quotas?.minCronIntervalMs ?? 0,
    headsUpBody: scheduleChangedBody,
    onHeadsUps: options.onHeadsUps,
  });
}

/** Applies `file` (an object, or text as written) with a service over `db`. */
export function apply(db: Db, file: unknown, options: { dryRun?: boolean } = {}): Promise<FileReport> {
  const text = typeof file === 'string' ? file : JSON.stringify(file, null, 2);
  return applySchedulesFile(fileService(db), text, options);
}

/** A schedules file of these entries (each gets OWNER unless it names its own). */
export function file(...entries: Record<string, unknown>[]): { alarms: Record<string, unknown>[] } {
  return { alarms: entries.map((e) => ({ owner: OWNER.did, ...e })) };
}

/** An instant `days` from now, as a file would give it. */
export function inDays(days: number): string {
  return new Date(Date.now() + days * 86_400_000).toISOString();
}

// ---- Files as editors write them --------------------------------------------------------------

export async function tempDir(): Promise<{ dir: string; path: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(TMP_DIR, 'schedules-'));
  return { dir, path: join(dir, 'schedules.json'), remove: () => rm(dir, { recursive: true, force: true }) };
}

export const text = (content: unknown): string =>
  typeof content === 'string' ? content : `${JSON.stringify(content, null, 2)}\n`;

/** An editor's save: the new content written to a temporary file, renamed over the old one. */
export async function editorSave(path: string, content: unknown): Promise<void> {
  const temp = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(temp, text(content));
  await rename(temp, path);
}

/** A write in place: the same file truncated and written. */
export async function writeInPlace(path: string, content: unknown): Promise<void> {
  await writeFile(path, text(content));
}

/**
 * A write that arrives in two parts, the file half written in between: returns the rest to
 * write (call it to finish).
 */
export async function writeHalf(path: string, content: unknown): Promise<() => Promise<void>> {
  const all = text(content);
  const cut = Math.floor(all.length / 2);
  const handle = await open(path, 'w');
  await handle.write(all.slice(0, cut));
  await handle.sync();
  return async () => {
    await handle.write(all.slice(cut));
    await handle.close();
  };
}

// ---- The store ----------------------------------------------------------------------------------

const changesStmt = sql(
  'test_schedule_changes',
  `SELECT message_id, alarm_id::text AS alarm_id, owner_did, change, body, attempts, last_error,
     sent_at, failed_at, lease_until
   FROM chronos.schedule_changes ORDER BY created_at, message_id`,
);

export interface ChangeRow {
  message_id: string;
  alarm_id: string;
  owner_did: string;
  change: 'created' | 'updated';
  body: string;
  attempts: number;
  last_error: string;
  sent_at: Date | null;
  failed_at: Date | null;
  lease_until: Date | null;
}

/** Every heads-up owed or sent, oldest first. */
export function headsUps(db: Executor): Promise<ChangeRow[]> {
  return db.query<ChangeRow>(changesStmt);
}

const lapseStmt = sql(
  'test_schedule_changes_lapse',
  `UPDATE chronos.schedule_changes SET lease_until = now() - interval '1 millisecond' WHERE lease_until IS NOT NULL`,
);

/** Ends every heads-up's lease or retry wait now, as if its time had passed. */
export async function lapseHeadsUps(db: Executor): Promise<void> {
  await db.query(lapseStmt);
}

const sourceStmt = sql(
  'test_alarm_source',
  `SELECT source, queue, file_changes FROM chronos.alarms WHERE id = $1`,
);

export async function sourceOf(
  db: Executor,
  id: string,
): Promise<{ source: string; queue: string; file_changes: number }> {
  const [row] = await db.query<{ source: string; queue: string; file_changes: number }>(sourceStmt, [id]);
  if (!row) throw new Error(`no alarm ${id}`);
  return row;
}

const countStmt = sql('test_alarm_count', `SELECT count(*)::int AS n FROM chronos.alarms`);

export async function alarmCount(db: Executor): Promise<number> {
  const [row] = await db.query<{ n: number }>(countStmt);
  return row!.n;
}

const pruneStmt = sql('test_prune_alarm', `DELETE FROM chronos.alarms WHERE id = $1`);

/** Deletes an alarm as retention does once it is finished. */
export async function pruneAlarm(db: Executor, id: string): Promise<void> {
  await db.query(pruneStmt, [id]);
}

const finishStmt = sql(
  'test_finish_alarm',
  `UPDATE chronos.alarms SET status = $2, claimed_at = NULL WHERE id = $1`,
);

/** Sets an alarm's status as a fire or a failure would leave it. */
export async function finish(db: Executor, id: string, status: 'fired' | 'failed'): Promise<void> {
  await db.query(finishStmt, [id, status]);
}

// ---- Logs ---------------------------------------------------------------------------------------

/** A logger whose lines (parsed) the test reads. */
export function recordingLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, lines };
}
