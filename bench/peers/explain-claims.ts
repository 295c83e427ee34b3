/**
 * The plans behind the claim-depth figures of `bench/compare.ts`: for each system and settings,
 * N timers waiting (default 100,000) and one due, the claim statement exactly as that system's
 * worker sent it (captured at the driver, with its parameters), run under
 * `EXPLAIN (ANALYZE, BUFFERS)` in a transaction that is rolled back.
 *
 *   npx tsx bench/peers/explain-claims.ts [--waiting=100000]   → bench/results/compare-claim-plans.txt
 */
import pg from 'pg';
import { createEmptyPostgres, log, numberArg, writeText } from '../support.js';
import { inTransaction, openPeer, SETTINGS, SYSTEMS } from './peer.js';

interface Captured {
  text: string;
  values: unknown[];
}

const waiting = numberArg('waiting', 100_000);
const sections: string[] = [
  `Claim plans at ${waiting.toLocaleString('en')} waiting + 1 due (${new Date().toISOString()}),`,
  'each statement as the worker sent it, under EXPLAIN (ANALYZE, BUFFERS), rolled back.',
  'Command: npx tsx bench/peers/explain-claims.ts ' + process.argv.slice(2).join(' '),
  '',
];

const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
const original = proto.query;

for (const system of SYSTEMS) {
  for (const settings of SETTINGS) {
    const bench = await createEmptyPostgres(`explain_${system.replace(/[^a-z]/g, '')}`);
    const peer = await openPeer(system, { url: bench.url!, settings });
    const captured: Captured[] = [];
    try {
      await peer.setup();
      await peer.loadWaiting(waiting, 'wait-');
      await bench.db.exec('ANALYZE');
      proto.query = function (this: unknown, ...args: unknown[]) {
        const config = args[0] as { text?: string; values?: unknown[] } | string;
        const text = typeof config === 'string' ? config : config?.text;
        if (typeof text === 'string' && peer.claimStatement.test(text)) {
          const values = typeof config === 'string' ? args[1] : (config.values ?? args[1]);
          captured.push({ text, values: Array.isArray(values) ? values : [] });
        }
        return original.apply(this, args);
      };
      let fired: () => void = () => {};
      const done = new Promise<void>((resolve) => (fired = resolve));
      const worker = await peer.startWorker((key) => key === 'due-0' && fired());
      const app = new pg.Pool({ connectionString: bench.url!, max: 1 });
      await inTransaction(app, (tx) => peer.scheduleOne(tx, { key: 'due-0', dueAtMs: Date.now() - 1 }));
      peer.wake();
      await done;
      await worker.stop();
      proto.query = original;
      // Another due timer for the EXPLAIN to find, the worker stopped.
      await inTransaction(app, (tx) => peer.scheduleOne(tx, { key: 'due-1', dueAtMs: Date.now() - 1 }));
      const claim = captured.at(-1);
      if (!claim) throw new Error(`${system} ${settings}: no claim statement seen`);
      const client = await app.connect();
      try {
        await client.query('BEGIN');
        await client.query(`PREPARE bench_claim AS ${claim.text}`);
        const args = claim.values.map((v) =>
          client.escapeLiteral(Array.isArray(v) ? `{${v.join(',')}}` : String(v)),
        );
        const plan = await client.query<{ 'QUERY PLAN': string }>(
          `EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_claim${args.length ? `(${args.join(', ')})` : ''}`,
        );
        await client.query('ROLLBACK');
        sections.push(
          `=== ${system}, ${settings} (${peer.description.version}): worker ${peer.description.calls.worker}`,
          `--- statement (parameters ${JSON.stringify(claim.values)}):`,
          claim.text.replace(/\n\s*\n/g, '\n').trim(),
          '--- plan:',
          plan.rows.map((r) => r['QUERY PLAN']).join('\n'),
          '',
        );
        log(`${system} ${settings}: ${plan.rows.at(-1)?.['QUERY PLAN']}`);
      } finally {
        client.release();
        await app.end();
      }
    } finally {
      proto.query = original;
      await peer.close();
      await bench.drop();
    }
  }
}
log(`wrote ${await writeText('compare-claim-plans.txt', sections.join('\n'))}`);
