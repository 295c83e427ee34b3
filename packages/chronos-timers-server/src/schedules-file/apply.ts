/**
 * The schedules file as a door: its text read with the wire's form, reconciled by the core, and
 * the outcome told in the file's own names (`alarms.3.cron`, `wake_message`). Shared by the
 * watcher (`CHRONOS_SCHEDULES_FILE`) and `chronos schedules apply|export`, locally or through a
 * running server's control socket (the report crosses it as JSON).
 */
import type { EntryAction, SchedulesFileService } from 'chronos-timers/internal';
import { renameFieldErrors, invalidFields, type FieldError } from 'chronos-timers/internal';
import type { AlarmStatus } from 'chronos-timers/internal';
import {
  FILE_NAMES,
  filePath,
  readSchedulesFile,
  writeSchedulesFile,
  type FileField,
} from 'chronos-timers/internal';

/** One entry's outcome, as the CLI prints it and the log says it. */
export interface FileResult {
  index: number;
  owner_did: string;
  key: string;
  action: EntryAction;
  alarm_id: string | null;
  status: AlarmStatus | null;
  /** For `updated` and `left_alone`: the fields the edit changed, as the file names them. */
  fields: string[];
}

export interface FileReport {
  /** True when the file was valid and (unless a dry run) its changes committed. */
  applied: boolean;
  dry_run: boolean;
  results: FileResult[];
  /** Every refusal (`alarms.3.cron: expected …, got …`); nothing was written when there is one. */
  errors: FieldError[];
  /** Heads-ups owed to agents by this apply. */
  heads_ups: number;
}

/** Reads `text` as a schedules file and reconciles the alarms with it (`dryRun`: commits nothing). */
export async function applySchedulesFile(
  service: SchedulesFileService,
  text: string,
  options: { dryRun?: boolean } = {},
): Promise<FileReport> {
  const dryRun = options.dryRun ?? false;
  const read = readSchedulesFile(text);
  const refused = (errors: FieldError[]): FileReport => ({
    applied: false,
    dry_run: dryRun,
    results: [],
    errors,
    heads_ups: 0,
  });
  if (read.errors.length > 0 && read.entries.length === 0) return refused(read.errors);
  // With refusals already, the entries that were read are only tried (rolled back), so that every
  // refusal of the file is said at once: a bad cron beside a bad owner.
  const report = await service.reconcile(read.entries, { dryRun: dryRun || read.errors.length > 0 });
  if (read.errors.length > 0 || report.errors.length > 0) {
    return refused(byEntry([...read.errors, ...fileErrors(report.errors)]));
  }
  return {
    applied: report.applied,
    dry_run: dryRun,
    results: report.results.map((r) => ({
      index: r.index,
      owner_did: r.ownerDid,
      key: r.key,
      action: r.action,
      alarm_id: r.alarmId,
      status: r.status,
      fields: r.fields.map((f) => (Object.hasOwn(FILE_NAMES, f) ? FILE_NAMES[f as FileField] : f)),
    })),
    errors: fileErrors(report.errors),
    heads_ups: report.headsUps,
  };
}

/** What an export gives: the file, the alarms left out (no key), the library timers left out by queue. */
export interface SchedulesExport {
  file: string;
  skipped: { id: string; owner_did: string }[];
  /** Live alarms of queues other than the router's (a library's timers), counted by queue. */
  library: { queue: string; count: number }[];
}

/** The file's form of the live alarms of one owner or of every owner, and the alarms left out. */
export async function exportSchedulesFile(
  service: SchedulesFileService,
  ownerDid?: string,
): Promise<SchedulesExport> {
  const [live, library] = await Promise.all([service.live(ownerDid), service.liveElsewhere(ownerDid)]);
  const { text, skipped } = writeSchedulesFile(live);
  return { file: text, skipped: skipped.map((a) => ({ id: a.id, owner_did: a.ownerDid })), library };
}

/** One line for an entry's outcome: `alarms.3 (owner …, key "standup"): updated alarm … (cron)`. */
export function describeResult(result: FileResult): string {
  const entry = `alarms.${result.index} (owner ${result.owner_did}, key ${JSON.stringify(result.key)})`;
  const fields = result.fields.join(', ');
  switch (result.action) {
    case 'created':
      return `${entry}: created alarm ${result.alarm_id}`;
    case 'updated':
      return `${entry}: updated alarm ${result.alarm_id} (${fields})`;
    case 'unchanged':
      return `${entry}: unchanged`;
    case 'left_alone':
      return (
        `${entry}: left alone: alarm ${result.alarm_id} is ${result.status}, so the edit (${fields}) is not applied; ` +
        'give the entry a new key to schedule it again'
      );
  }
}

/** A summary: `2 created, 1 updated, 5 unchanged, 0 left alone`. */
export function summarise(results: readonly FileResult[]): string {
  const count = (action: EntryAction) => results.filter((r) => r.action === action).length;
  return `${count('created')} created, ${count('updated')} updated, ${count('unchanged')} unchanged, ${count('left_alone')} left alone`;
}

/** Refusals in file order: by entry index, each entry's as found. */
function byEntry(errors: FieldError[]): FieldError[] {
  const index = (e: FieldError) => Number(/^alarms\.(\d+)/.exec(e.path)?.[1] ?? -1);
  return errors
    .map((e, i) => ({ e, i }))
    .sort((a, b) => index(a.e) - index(b.e) || a.i - b.i)
    .map(({ e }) => e);
}

/** The core's refusals (`3.cron`) in the file's names (`alarms.3.cron`). */
function fileErrors(errors: FieldError[]): FieldError[] {
  if (errors.length === 0) return [];
  const renamed = renameFieldErrors(invalidFields(errors), (path) => {
    const [index, ...rest] = path.split('.');
    return filePath(Number(index), rest.join('.'));
  });
  return (renamed as { errors: FieldError[] }).errors;
}
