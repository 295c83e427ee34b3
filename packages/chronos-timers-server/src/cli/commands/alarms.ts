/**
 * `chronos alarms list [--owner <did>]` and `chronos alarms get|pause|resume|cancel|fire|retry
 * <id> --owner <did>`: an operator's view of the alarms (every owner's, as the dashboard shows
 * them, or one owner's) and the controls of contract §5, on PostgreSQL (DATABASE_URL), on the
 * embedded store, or through the server that holds it. `--json` prints the HTTP API's JSON as it
 * is (payloads digit for digit); otherwise a table.
 */
import { loadConfig } from 'chronos-timers/internal';
import { withStore } from '../../control/store-access.js';
import type { AlarmAction } from '../../control/store-ops.js';
import { readArgs } from '../args.js';
import {
  EXIT_OK,
  type CliIo,
  type Command,
  runSubcommand,
  type Subcommand,
  printListPage,
  requireOwner,
} from '../io.js';

const USAGE = `usage: chronos alarms list [--owner <did>] [--status <status>] [--limit <n>] [--cursor <c>] [--json]
       chronos alarms get <alarm id> --owner <did> [--json]
       chronos alarms pause <alarm id> --owner <did>
       chronos alarms resume <alarm id> --owner <did>
       chronos alarms cancel <alarm id> --owner <did>
       chronos alarms fire <alarm id> --owner <did>
       chronos alarms retry <alarm id> --owner <did>`;

const HELP = `An operator's view of the alarms (an owner is its DID, as its API keys name it).
  list     newest first, every owner's with an OWNER column (as the dashboard shows them), or only
           --owner's; --status active|paused|fired|cancelled|failed|expired; --limit 1-200
           (default 50); --cursor <next_cursor> for the next page
  get      one alarm
  pause    stop it firing until resumed (a paused alarm is never claimed)
  resume   fire again: a cron or rrule alarm at its next occurrence after now, no catching up
  cancel   stop it for good
  fire     one extra delivery now (trigger "manual") of an active or paused alarm; a cron or
           rrule alarm's schedule is not moved
  retry    a failed alarm active again, its failures forgotten, due now
Works with DATABASE_URL, on the embedded store, and while a server runs on it.`;

interface AlarmJson {
  id: string;
  label: string;
  kind: string;
  cron_expr?: string;
  rrule?: string;
  timezone: string;
  status: string;
  next_fire_at?: string;
  last_fired_at?: string;
  failure_count: number;
  last_error?: string;
}

/** A recurring alarm's rule as stored, read in its timezone; a one-shot's instant is NEXT FIRE. */
function schedule(a: AlarmJson): string {
  const rule = a.kind === 'cron' ? a.cron_expr : a.kind === 'rrule' ? a.rrule : undefined;
  return rule === undefined ? '-' : `${rule} (${a.timezone})`;
}

function ownerOf(values: Record<string, string | boolean | undefined>): string {
  return requireOwner(values, 'alarms these are');
}

async function list(args: string[], io: CliIo): Promise<number> {
  const { values } = readArgs(args, {
    owner: { type: 'string', value: 'did' },
    status: { type: 'string' },
    limit: { type: 'string', value: 'n' },
    cursor: { type: 'string' },
    json: { type: 'boolean' },
  });
  // Without --owner: every owner's, the operator's view.
  const owner = values.owner === undefined ? undefined : ownerOf(values);
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
  const page = JSON.parse(text) as {
    alarms: AlarmJson[];
    next_cursor: string | null;
    owners?: Record<string, string>;
  };
  return printListPage(
    io,
    { items: page.alarms, nextCursor: page.next_cursor, owners: page.owners },
    {
      empty: 'No alarms.',
      header: ['ID', 'STATUS', 'KIND', 'SCHEDULE', 'NEXT FIRE', 'LAST FIRED', 'FAILURES', 'LABEL'],
      row: (a) => [
        a.id,
        a.status,
        a.kind,
        schedule(a),
        a.next_fire_at ?? '-',
        a.last_fired_at ?? '-',
        String(a.failure_count),
        a.label || '-',
      ],
      command: 'chronos alarms list',
      flags: { owner, status: values.status, limit: values.limit },
    },
  );
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

const SUBCOMMANDS: Record<string, Subcommand> = {
  list,
  get,
  pause: act('pause', 'paused'),
  resume: act('resume', 'resumed'),
  cancel: act('cancel', 'cancelled'),
  fire: act('fire', 'fired now'),
  retry: act('retry', 'retried'),
};

export const alarmsCommand: Command = {
  name: 'alarms',
  summary: "list every owner's alarms or one's; show, pause, resume, cancel, fire now, retry one",
  usage: USAGE,
  help: HELP,
  run: (args, io) => runSubcommand(SUBCOMMANDS, args, io),
};
