/**
 * `chronos migrate`: applies pending migrations and says which (serve also does this on start).
 */
import { loadConfig } from '../../config.js';
import { withStore } from '../../control/store-access.js';
import { EXIT_OK, UsageError, type Command } from '../io.js';

export const migrateCommand: Command = {
  name: 'migrate',
  summary: 'apply pending database migrations (serve applies them on start too)',
  usage: 'usage: chronos migrate',
  async run(args, io) {
    if (args.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(args[0])}`);
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
