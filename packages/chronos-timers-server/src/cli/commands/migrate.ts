/**
 * `chronos migrate`: applies pending migrations and says which (serve also does this on start).
 */
import { loadConfig } from 'chronos-timers/internal';
import { withStore } from '../../control/store-access.js';
import { readArgs } from '../args.js';
import { EXIT_OK, type Command } from '../io.js';

export const migrateCommand: Command = {
  name: 'migrate',
  summary: 'apply pending database migrations (serve applies them on start too)',
  usage: 'usage: chronos migrate',
  help: `Applies the pending migrations to the store (DATABASE_URL, or the embedded store in CHRONOS_DATA_DIR,
also while a server runs on it), in the schema CHRONOS_SCHEMA (default chronos). A deployment made
before the schema existed is moved into it. Running it again changes nothing.`,
  async run(args, io) {
    readArgs(args, {});
    const config = loadConfig(io.env);
    const { applied, where } = await withStore(
      config,
      async ({ store, where }) => ({ applied: await store.migrate(), where }),
      { migrate: false },
    );
    io.out(
      applied.length === 0
        ? `Schema of ${where} is up to date.`
        : `Applied ${applied.length} migration(s) to ${where}: ${applied.join(', ')}.`,
    );
    return EXIT_OK;
  },
};
