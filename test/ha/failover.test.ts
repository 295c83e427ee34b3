/**
 * A real failover under a running pool: pg_auto_failover's monitor, a primary and a synchronous
 * standby (test/scenarios/support/pg-cluster.ts); a `pg.Pool` built on `MultiHost` writes rows
 * without pause; the primary's whole node is killed with kill -9; the monitor promotes the
 * standby; the same pool — never restarted — writes again on the new primary, and a LISTEN
 * connection made through `MultiHost.connect()` is re-made there.
 *
 * Proves: no row whose INSERT was answered before the kill is missing on the new primary
 * (synchronous replication: a commit is acknowledged once the standby has it), and the pool
 * finds the new primary by itself. Measures (printed): cluster creation, the time from the kill
 * to the promotion and to the pool's first write on the new primary, the writes that failed
 * meanwhile (in doubt: they may or may not have committed).
 *
 * About 35 s in all here (cluster 6 s, failover 13 s, stop 10 s); it runs in `npm test`.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeHost } from '../../packages/chronos-timers/src/store/driver/connection-string.js';
import { MultiHost, type MultiHostEvent } from '../../packages/chronos-timers/src/store/driver/multi-host.js';
import { FailoverCluster } from '../scenarios/support/pg-cluster.js';
import { sleep, waitUntil } from '../scenarios/support/scenario.js';
import { describePostgresOnly } from '../support/backends.js';

// In CI a machine without pg_auto_failover is a failure (.ci/run installs it), not a skip.
const missing = FailoverCluster.missing();
const skip = missing !== null && !process.env.CI;
if (skip)
  console.warn(
    `\n!!! pg_auto_failover cannot run here (missing ${missing}): the failover test is SKIPPED.\n`,
  );

/**
 * A LISTEN connection that re-connects through `MultiHost.connect()` when it is lost, as
 * the store's PgListener does, reduced to what the test needs.
 */
class Listener {
  readonly heard: string[] = [];
  readonly connectedAt: number[] = [];
  #client: pg.Client | null = null;
  #stopped = false;

  constructor(
    private readonly hosts: MultiHost,
    private readonly channel: string,
  ) {}

  get host(): string | null {
    return this.#client ? describeHost({ host: this.#client.host, port: this.#client.port }) : null;
  }

  async start(): Promise<void> {
    while (!this.#stopped) {
      try {
        const client = await this.hosts.connect();
        client.on('notification', (m) => this.heard.push(m.payload ?? ''));
        client.on('error', () => this.#lost(client));
        await client.query(`LISTEN ${this.channel}`);
        this.#client = client;
        this.connectedAt.push(Date.now());
        return;
      } catch {
        await sleep(100);
      }
    }
  }

  #lost(client: pg.Client): void {
    if (this.#client !== client) return;
    this.#client = null;
    void this.start();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#client?.end().catch(() => {});
  }
}

/** The pool's events relative to the kill, with runs of "none" folded into one line. */
function summarise(events: (MultiHostEvent & { at: number })[], killedAt: number): string[] {
  const lines: string[] = [];
  let nones: number[] = [];
  const flush = () => {
    if (nones.length > 0) lines.push(`none ×${nones.length} from ${nones[0]} to ${nones.at(-1)} ms`);
    nones = [];
  };
  for (const event of events) {
    const at = event.at - killedAt;
    if (event.type === 'none') {
      nones.push(at);
      continue;
    }
    flush();
    lines.push(
      event.type === 'chosen'
        ? `chosen ${describeHost(event.host)} at ${at} ms (probe ${event.probeMs} ms)`
        : `lost ${describeHost(event.host)} at ${at} ms (${event.reason})`,
    );
  }
  flush();
  return lines;
}

describePostgresOnly('a real primary/standby pair under pg_auto_failover', 'failover', () => {
  describe.skipIf(skip)('a pool on a multi-host URL, the primary killed with kill -9', () => {
    let cluster: FailoverCluster;
    let pool: pg.Pool | null = null;
    let listener: Listener | null = null;

    beforeAll(async () => {
      cluster = await FailoverCluster.create();
      console.log('[failover] cluster created (ms):', cluster.timings);
    }, 180_000);

    afterAll(async () => {
      await listener?.stop();
      await pool?.end().catch(() => {});
      const started = Date.now();
      await cluster?.destroy();
      console.log(`[failover] cluster stopped and removed in ${Date.now() - started} ms`);
    }, 60_000);

    it('serves again from the promoted standby without a restart, and every acknowledged row is there', async () => {
      const events: (MultiHostEvent & { at: number })[] = [];
      const hosts = MultiHost.fromUrl(cluster.url(), {
        connectTimeoutMs: 2_000,
        onEvent: (event) => events.push({ ...event, at: Date.now() }),
      });
      pool = new pg.Pool({ ...hosts.poolConfig(), max: 4, connectionTimeoutMillis: 3_000 });
      pool.on('error', () => {});
      hosts.watch(pool);
      const first = await cluster.primary();
      await pool.query(
        'CREATE TABLE ha_rows (id int PRIMARY KEY, written_at timestamptz NOT NULL DEFAULT clock_timestamp())',
      );
      expect(hosts.status().host).toBe(`127.0.0.1:${first.port}`);
      const sync = await pool.query<{ names: string }>(
        "SELECT current_setting('synchronous_standby_names') AS names",
      );
      expect(sync.rows[0]!.names).toMatch(/^ANY 1 \(/);

      listener = new Listener(hosts, 'ha_failover');
      await listener.start();

      // Writers: each INSERT is one transaction; an answered one is a committed row. A write
      // refused before it reached a server (no host qualified, connection refused) cannot have
      // committed; one cut while it ran is in doubt.
      const acknowledged = new Map<number, { startedAt: number; at: number }>();
      const refused = new Set<number>();
      const inDoubt = new Set<number>();
      const errors: Record<string, number> = {};
      let next = 0;
      let writing = true;
      const writer = async () => {
        while (writing) {
          const id = next++;
          const startedAt = Date.now();
          try {
            await pool!.query('INSERT INTO ha_rows (id) VALUES ($1)', [id]);
            acknowledged.set(id, { startedAt, at: Date.now() });
          } catch (error) {
            const code = (error as { code?: string }).code;
            const key = code ?? (error as Error).message.slice(0, 60);
            errors[key] = (errors[key] ?? 0) + 1;
            (code === 'CHRONOS_NO_HOST' || code === 'ECONNREFUSED' ? refused : inDoubt).add(id);
            await sleep(50);
          }
        }
      };
      const writers = [writer(), writer()];

      await waitUntil(() => acknowledged.size >= 300, { timeoutMs: 30_000, what: '300 rows written' });
      const { node: killed, killedAt } = await cluster.killPrimary();
      const acknowledgedBeforeKill = acknowledged.size;
      const promoted = await cluster.waitForPromotion(killed, 120_000);
      // A write started after the kill can only have been answered by the new primary.
      const afterKill = () => [...acknowledged.values()].filter((w) => w.startedAt > killedAt);
      const servedAgain = await waitUntil(() => afterKill().sort((a, b) => a.at - b.at)[0]?.at, {
        timeoutMs: 60_000,
        what: 'a write on the new primary',
        describe: () => errors,
      });
      await waitUntil(() => afterKill().length >= 100, {
        timeoutMs: 30_000,
        what: '100 writes on the new primary',
      });
      writing = false;
      await Promise.all(writers);

      // The listener followed too: a NOTIFY on the new primary reaches it.
      await waitUntil(() => listener!.host === `127.0.0.1:${promoted.node.port}`, {
        timeoutMs: 30_000,
        what: 'the LISTEN connection on the new primary',
      });
      await pool.query("SELECT pg_notify('ha_failover', 'after')");
      await waitUntil(() => listener!.heard.includes('after'), {
        timeoutMs: 10_000,
        what: 'the notification',
      });

      const { rows } = await pool.query<{ id: number }>('SELECT id FROM ha_rows');
      const present = new Set(rows.map((r) => r.id));
      const lost = [...acknowledged.keys()].filter((id) => !present.has(id));
      const figures = {
        rowsAcknowledged: acknowledged.size,
        rowsAcknowledgedBeforeKill: acknowledgedBeforeKill,
        lost: lost.length,
        refusedUnsent: refused.size,
        refusedButPresent: [...refused].filter((id) => present.has(id)).length,
        inDoubt: inDoubt.size,
        inDoubtCommitted: [...inDoubt].filter((id) => present.has(id)).length,
        errors,
        killToPromotionMs: promoted.at - killedAt,
        killToPoolServingMs: servedAgain - killedAt,
        promotionToPoolServingMs: servedAgain - promoted.at,
        killToListenerBackMs: listener.connectedAt.at(-1)! - killedAt,
        // After the kill: the host lost, each probe that found none (every 200 ms while asked), the new choice.
        events: summarise(events, killedAt),
      };
      console.log('[failover] figures:', JSON.stringify(figures, null, 1));

      expect(lost).toEqual([]);
      expect(figures.refusedButPresent).toBe(0);
      expect(promoted.node.name).not.toBe(killed.name);
      expect(hosts.status()).toMatchObject({ host: `127.0.0.1:${promoted.node.port}`, changes: 1 });
    }, 240_000);
  });
});
