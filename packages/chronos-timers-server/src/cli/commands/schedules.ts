/**
 * `chronos schedules apply <file> [--dry-run]` and `chronos schedules export [--owner <did>]`: the
 * schedules file (contract §13) for CI and for people, on PostgreSQL (DATABASE_URL), on the
 * embedded store, or through the server that holds it.
 *
 * `apply` reconciles once, exactly as a running server does on an edit, and prints one line per
 * entry; an invalid file prints every refusal (one line each) and exits 1 with nothing written.
 * `export` prints the live alarms in the file's form: applying it changes nothing.
 */
import { readFile } from 'node:fs/promises';
import { loadConfig } from 'chronos-timers/internal';
import { parseOwner } from 'chronos-timers/internal';
import { withStore } from '../../control/store-access.js';
import { describeResult, summarise } from '../../schedules-file/apply.js';
import { MAX_SCHEDULES_FILE_BYTES, ROUTER_QUEUE } from 'chronos-timers/internal';
import { readArgs } from '../args.js';
import { EXIT_FAILURE, EXIT_OK, type CliIo, type Command, runSubcommand, type Subcommand } from '../io.js';

const USAGE = `usage: chronos schedules apply <file> [--dry-run]
       chronos schedules export [--owner <did>]`;

const HELP = `The schedules file: {"alarms": [entry, …]}, each entry a create body (label, at or cron,
timezone, conversation_id, wake_message, payload, max_failures, require_ack) plus "owner" (a DID)
and "key" (the alarm's idempotency key). README.md, "Schedules in a file", has an example.
  apply    reconcile the alarms with <file> once, as a server watching CHRONOS_SCHEDULES_FILE does
           on every edit: a new entry creates its alarm, a changed entry changes its alarm, an
           unchanged one does nothing, a removed one is ignored. Prints what it did per entry.
           An invalid file prints every error (alarms.3.cron: expected …) and exits 1, nothing
           written. --dry-run: says what it would do, writes nothing.
  export   print the active and paused alarms as a schedules file (every owner's, or --owner's);
           alarms without an idempotency key, and a library's timers (queues other than the
           service's), are left out (said on stderr). Applying it changes nothing.
Works with DATABASE_URL, on the embedded store, and while a server runs on it.`;

async function apply(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = readArgs(args, { 'dry-run': { type: 'boolean' } }, ['file']);
  const path = positionals[0]!;
  const dryRun = values['dry-run'] === true;
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    io.err(
      `chronos schedules: ${path}: ${code === 'ENOENT' ? 'no such file' : `cannot be read (${code ?? (error as Error).message})`}`,
    );
    return EXIT_FAILURE;
  }
  if (Buffer.byteLength(text) > MAX_SCHEDULES_FILE_BYTES) {
    io.err(`chronos schedules: ${path}: expected at most 8 MiB, got ${Buffer.byteLength(text)} bytes`);
    return EXIT_FAILURE;
  }
  const report = await withStore(loadConfig(io.env), ({ store }) => store.schedules.apply(text, { dryRun }));
  if (report.errors.length > 0) {
    for (const error of report.errors) io.err(`chronos schedules: ${error.message}`);
    io.err(`chronos schedules: ${path} refused: nothing applied`);
    return EXIT_FAILURE;
  }
  for (const result of report.results) io.out(describeResult(result));
  io.out(
    dryRun
      ? `Dry run of ${path}: ${summarise(report.results)}; nothing was written.`
      : `Applied ${path}: ${summarise(report.results)}.`,
  );
  return EXIT_OK;
}

async function exportFile(args: string[], io: CliIo): Promise<number> {
  const { values } = readArgs(args, { owner: { type: 'string', value: 'did' } });
  const owner = typeof values.owner === 'string' ? parseOwner(values.owner, 'owner').did : undefined;
  const exported = await withStore(loadConfig(io.env), ({ store }) => store.schedules.export(owner));
  io.out(exported.file);
  for (const alarm of exported.skipped) {
    io.err(
      `chronos schedules: left out alarm ${alarm.id} of ${alarm.owner_did}: it has no idempotency key, ` +
        'and a schedules file names each alarm by its key',
    );
  }
  const library = exported.library.reduce((sum, q) => sum + q.count, 0);
  if (library > 0) {
    const queues = exported.library.map((q) => `${q.count} in queue "${q.queue}"`).join(', ');
    io.err(
      `chronos schedules: left out ${library} library timer${library === 1 ? '' : 's'} (${queues}): ` +
        `a schedules file holds the service's alarms (queue "${ROUTER_QUEUE}") only; ` +
        "a library's timers are its application's to schedule",
    );
  }
  return EXIT_OK;
}

const SUBCOMMANDS: Record<string, Subcommand> = {
  apply,
  export: exportFile,
};

export const schedulesCommand: Command = {
  name: 'schedules',
  summary: 'apply a schedules file once (for CI), or export the live alarms as one',
  usage: USAGE,
  help: HELP,
  run: (args, io) => runSubcommand(SUBCOMMANDS, args, io),
};
