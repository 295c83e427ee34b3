/**
 * `chronos wakes list [--owner <did>] [--status <s>]`, `chronos wakes get <id> --owner <did>` and
 * `chronos wakes attempts <id> --owner <did>`: the wake history and each wake's delivery attempts
 * (contract §5, GET /v1/wakes…), on PostgreSQL (DATABASE_URL), on the embedded store, or through
 * the server that holds it. `--json` prints the HTTP API's JSON as it is; otherwise a table (the
 * full record for `get`).
 */
import { loadConfig } from 'chronos-timers/internal';
import { withStore } from '../../control/store-access.js';
import { readArgs } from '../args.js';
import {
  EXIT_OK,
  type CliIo,
  type Command,
  runSubcommand,
  type Subcommand,
  table,
  printListPage,
  requireOwner,
} from '../io.js';

const USAGE = `usage: chronos wakes list [--owner <did>] [--status <status>] [--alarm <alarm id>] [--limit <n>] [--cursor <c>] [--json]
       chronos wakes get <wake id> --owner <did> [--json]
       chronos wakes attempts <wake id> --owner <did> [--json]`;

const HELP = `The wakes (one per fire of an alarm) and their delivery attempts, an operator's view.
  list      newest first, every owner's with an OWNER column, or only --owner's;
            --status pending|delivered|acknowledged|failed; --alarm <alarm id>: that alarm's;
            --limit 1-200 (default 50); --cursor <next_cursor> for the next page
  get       one wake, the full record
  attempts  every delivery attempt of one wake, oldest first: outcome, HTTP status, error
Works with DATABASE_URL, on the embedded store, and while a server runs on it.`;

interface WakeJson {
  id: string;
  alarm_id: string;
  status: string;
  label: string;
  scheduled_for: string;
  fired_at: string;
  delivered_at: string | null;
  lateness_ms: number;
  attempts: number;
}

interface AttemptJson {
  attempt: number;
  started_at: string;
  finished_at: string;
  outcome: string;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
}

function ownerOf(values: Record<string, string | boolean | undefined>): string {
  return requireOwner(values, 'wake this is', ' (`chronos wakes list` shows each wake’s OWNER)');
}

async function list(args: string[], io: CliIo): Promise<number> {
  const { values } = readArgs(args, {
    owner: { type: 'string', value: 'did' },
    status: { type: 'string' },
    alarm: { type: 'string', value: 'alarm id' },
    limit: { type: 'string', value: 'n' },
    cursor: { type: 'string' },
    json: { type: 'boolean' },
  });
  const owner = values.owner === undefined ? undefined : ownerOf(values);
  const text = await withStore(loadConfig(io.env), ({ store }) =>
    store.wakes.list(owner, {
      status: values.status as string | undefined,
      alarm_id: values.alarm as string | undefined,
      limit: values.limit as string | undefined,
      cursor: values.cursor as string | undefined,
    }),
  );
  if (values.json) {
    io.out(text);
    return EXIT_OK;
  }
  const page = JSON.parse(text) as {
    wakes: WakeJson[];
    next_cursor: string | null;
    owners?: Record<string, string>;
  };
  return printListPage(
    io,
    { items: page.wakes, nextCursor: page.next_cursor, owners: page.owners },
    {
      empty: 'No wakes.',
      header: [
        'ID',
        'ALARM',
        'STATUS',
        'SCHEDULED FOR',
        'FIRED AT',
        'DELIVERED AT',
        'LATENESS',
        'ATTEMPTS',
        'LABEL',
      ],
      row: (w) => [
        w.id,
        w.alarm_id,
        w.status,
        w.scheduled_for,
        w.fired_at,
        w.delivered_at ?? '-',
        `${w.lateness_ms} ms`,
        String(w.attempts),
        w.label || '-',
      ],
      command: 'chronos wakes list',
      flags: { owner, status: values.status, alarm: values.alarm, limit: values.limit },
    },
  );
}

async function get(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = readArgs(
    args,
    { owner: { type: 'string', value: 'did' }, json: { type: 'boolean' } },
    ['wake id'],
  );
  const owner = ownerOf(values);
  const text = await withStore(loadConfig(io.env), ({ store }) => store.wakes.get(owner, positionals[0]!));
  io.out(values.json ? text : JSON.stringify(JSON.parse(text), null, 2));
  return EXIT_OK;
}

async function attempts(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = readArgs(
    args,
    { owner: { type: 'string', value: 'did' }, json: { type: 'boolean' } },
    ['wake id'],
  );
  const owner = ownerOf(values);
  const text = await withStore(loadConfig(io.env), ({ store }) =>
    store.wakes.attempts(owner, positionals[0]!),
  );
  if (values.json) {
    io.out(text);
    return EXIT_OK;
  }
  const { attempts: rows } = JSON.parse(text) as { attempts: AttemptJson[] };
  if (rows.length === 0) {
    io.out('No delivery attempts yet.');
    return EXIT_OK;
  }
  table(io, [
    ['ATTEMPT', 'STARTED AT', 'FINISHED AT', 'OUTCOME', 'HTTP', 'DURATION', 'ERROR'],
    ...rows.map((a) => [
      String(a.attempt),
      a.started_at,
      a.finished_at,
      a.outcome,
      a.status_code === null ? '-' : String(a.status_code),
      `${a.duration_ms} ms`,
      a.error ?? '-',
    ]),
  ]);
  return EXIT_OK;
}

const SUBCOMMANDS: Record<string, Subcommand> = { list, get, attempts };

export const wakesCommand: Command = {
  name: 'wakes',
  summary: 'list the wakes (every owner’s or one’s), show one, and its delivery attempts',
  usage: USAGE,
  help: HELP,
  run: (args, io) => runSubcommand(SUBCOMMANDS, args, io),
};
