/**
 * `chronos keys create --owner <did> [--label <text>]` — prints the new key as the last line of
 * standard output (it is shown once; only its hash is stored);
 * `chronos keys list [--owner <did>] [--json]`; `chronos keys revoke <key id>`.
 *
 * They work on PostgreSQL (DATABASE_URL), on the embedded store, and on the embedded store
 * while a server runs on it (through its control socket).
 */
import { loadConfig, parseOwner } from 'chronos-timers/internal';
import type { KeyView } from '../../control/store-ops.js';
import { withStore } from '../../control/store-access.js';
import { readArgs } from '../args.js';
import {
  EXIT_OK,
  UsageError,
  type CliIo,
  type Command,
  runSubcommand,
  type Subcommand,
  table,
} from '../io.js';

const USAGE = `usage: chronos keys create --owner <did> [--label <text>]
       chronos keys list [--owner <did>] [--json]
       chronos keys revoke <key id>`;

async function create(args: string[], io: CliIo): Promise<number> {
  const { values } = readArgs(args, {
    owner: { type: 'string', value: 'did' },
    label: { type: 'string', value: 'text' },
  });
  if (typeof values.owner !== 'string') {
    throw new UsageError('--owner <did> is required, e.g. --owner did:matrix:<user uuid>:<name>');
  }
  parseOwner(values.owner, 'owner'); // refused before the store is opened
  const config = loadConfig(io.env);
  const { key, record, where } = await withStore(config, async ({ store, where }) => ({
    ...(await store.keys.create(values.owner as string, (values.label as string | undefined) ?? '')),
    where,
  }));
  io.out(`Created key ${record.id} for ${record.owner_did} in ${where}.`);
  io.out('It is shown only this once (only its hash is stored). Send it as: Authorization: Bearer <key>');
  io.out(key);
  return EXIT_OK;
}

async function list(args: string[], io: CliIo): Promise<number> {
  const { values } = readArgs(args, { owner: { type: 'string', value: 'did' }, json: { type: 'boolean' } });
  if (values.owner !== undefined) parseOwner(values.owner, 'owner');
  const config = loadConfig(io.env);
  const keys = await withStore(config, ({ store }) => store.keys.list(values.owner as string | undefined));
  if (values.json) {
    io.out(JSON.stringify(keys, null, 2));
    return EXIT_OK;
  }
  if (keys.length === 0) {
    io.out('No keys. Create one with: chronos keys create --owner <did>');
    return EXIT_OK;
  }
  printTable(io, keys);
  return EXIT_OK;
}

function printTable(io: CliIo, keys: KeyView[]): void {
  const rows = [
    ['ID', 'OWNER', 'LABEL', 'CREATED', 'LAST USED', 'STATUS'],
    ...keys.map((k) => [
      k.id,
      k.owner_did,
      k.label || '-',
      k.created_at,
      k.last_used_at ?? 'never',
      k.revoked_at ? `revoked ${k.revoked_at}` : 'active',
    ]),
  ];
  table(io, rows);
}

async function revoke(args: string[], io: CliIo): Promise<number> {
  const { positionals } = readArgs(args, {}, ['key id']);
  const config = loadConfig(io.env);
  const { key, changed } = await withStore(config, ({ store }) => store.keys.revoke(positionals[0]!));
  io.out(
    changed
      ? `Revoked key ${key.id} of ${key.owner_did}; requests with it are refused from now on.`
      : `Key ${key.id} of ${key.owner_did} was already revoked (at ${key.revoked_at}).`,
  );
  return EXIT_OK;
}

const SUBCOMMANDS: Record<string, Subcommand> = { create, list, revoke };

export const keysCommand: Command = {
  name: 'keys',
  summary: 'create, list and revoke API keys (also while a server runs on the embedded store)',
  usage: USAGE,
  help: `  create   a key for an owner; the key is printed once, as the last line (only its hash is stored)
  list     every key, or one owner's; revoked ones say when
  revoke   refuse a key from now on, on every instance
Works with DATABASE_URL, on the embedded store, and while a server runs on it.`,
  run: (args, io) => runSubcommand(SUBCOMMANDS, args, io),
};
