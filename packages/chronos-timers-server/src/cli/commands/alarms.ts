/**
 * `chronos alarms list|get|pause|resume|cancel --owner <did>`: an operator's view of one owner's
 * alarms, on PostgreSQL (DATABASE_URL), on the embedded store, or through the server that holds
 * it. `--json` prints the HTTP API's JSON as it is (payloads digit for digit); otherwise a table.
 */
import { loadConfig } from 'chronos-timers/internal';
import { parseOwner } from 'chronos-timers/internal';
import { withStore } from '../../control/store-access.js';
import type { AlarmAction } from '../../control/store-ops.js';
import { readArgs } from '../args.js';
import { EXIT_OK, UsageError, type CliIo, type Command, runSubcommand, type Subcommand } from '../io.js';

const USAGE = `usage: chronos alarms list --owner <did> [--status <status>] [--limit <n>] [--cursor <c>] [--json]
       chronos alarms get <alarm id> --owner <did> [--json]
       chronos alarms pause <alarm id> --owner <did>
       chronos alarms resume <alarm id> --owner <did>
       chronos alarms cancel <alarm id> --owner <did>`;

const HELP = `An operator's view of one owner's alarms (the owner's DID, as its API keys name it).
  list     newest first; --status active|paused|fired|cancelled|failed; --limit 1-200 (default 50);
           --cursor <next_cursor> for the next page
  get      one alarm
  pause    stop it firing until resumed (a paused alarm is never claimed)
  resume   fire again: a cron alarm at its next occurrence after now, no catching up
  cancel   stop it for good
Works with DATABASE_URL, on the embedded store, and while a server runs on it.`;

interface AlarmJson {
  id: string;
  label: string;
  kind: string;
  cron_expr?: string;
  timezone: string;
  status: string;
  next_fire_at?: string;
  last_fired_at?: string;
  failure_count: number;
  last_error?: string;
}

function ownerOf(values: Record<string, string | boolean | undefined>): string {
  if (typeof values.owner !== 'string') {
    throw new UsageError(
      '--owner <did> is required: the owner whose alarms these are, e.g. --owner did:matrix:<user uuid>:<name>',
    );
  }
  return parseOwner(values.owner, 'owner').did;
}

async function list(args: string[], io: CliIo): Promise<number> {
  const { values } = readArgs(args, {
    owner: { type: 'string', value: 'did' },
    status: { type: 'string' },
    limit: { type: 'string', value: 'n' },
    cursor: { type: 'string' },
    json: { type: 'boolean' },
  });
  const owner = ownerOf(values);
  const text = await withStore(loadConfig(io.env), ({ store }) =>
    store.alarms.list(owner, {
      status: values.status as string | undefined,
      limit: values.limit as string | undefined,
      cursor: values.cursor as string | undefined,
    }),
  );
  if (values.json) {
    io.out(text);
    return EXIT_OK;
  }
  const page = JSON.parse(text) as { alarms: AlarmJson[]; next_cursor: string | null };
  if (page.alarms.length === 0) {
    io.out('No alarms.');
    return EXIT_OK;
  }
  table(io, [
    ['ID', 'STATUS', 'KIND', 'SCHEDULE', 'NEXT FIRE', 'LAST FIRED', 'FAILURES', 'LABEL'],
    ...page.alarms.map((a) => [
      a.id,
      a.status,
      a.kind,
      a.kind === 'cron' ? `${a.cron_expr} (${a.timezone})` : '-',
      a.next_fire_at ?? '-',
      a.last_fired_at ?? '-',
      String(a.failure_count),
      a.label || '-',
    ]),
  ]);
  if (page.next_cursor) io.out(`More: chronos alarms list --owner ${owner} --cursor ${page.next_cursor}`);
  return EXIT_OK;
}

async function get(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = readArgs(
    args,
    { owner: { type: 'string', value: 'did' }, json: { type: 'boolean' } },
    ['alarm id'],
  );
  const owner = ownerOf(values);
  const text = await withStore(loadConfig(io.env), ({ store }) => store.alarms.get(owner, positionals[0]!));
  io.out(values.json ? text : JSON.stringify(JSON.parse(text), null, 2));
  return EXIT_OK;
}

function act(action: AlarmAction, done: string) {
  return async (args: string[], io: CliIo): Promise<number> => {
    const { values, positionals } = readArgs(args, { owner: { type: 'string', value: 'did' } }, ['alarm id']);
    const owner = ownerOf(values);
    const text = await withStore(loadConfig(io.env), ({ store }) =>
      store.alarms.act(owner, positionals[0]!, action),
    );
    const { alarm } = JSON.parse(text) as { alarm: AlarmJson };
    io.out(
      `Alarm ${alarm.id} ${done}: ${alarm.status}` +
        (alarm.next_fire_at ? `, next fire ${alarm.next_fire_at}` : '') +
        (alarm.label ? ` (${alarm.label})` : '') +
        '.',
    );
    return EXIT_OK;
  };
}

function table(io: CliIo, rows: string[][]): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const row of rows)
    io.out(
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    );
}

const SUBCOMMANDS: Record<string, Subcommand> = {
  list,
  get,
  pause: act('pause', 'paused'),
  resume: act('resume', 'resumed'),
  cancel: act('cancel', 'cancelled'),
};

export const alarmsCommand: Command = {
  name: 'alarms',
  summary: "list, show, pause, resume and cancel one owner's alarms (an operator's view)",
  usage: USAGE,
  help: HELP,
  run: (args, io) => runSubcommand(SUBCOMMANDS, args, io),
};
