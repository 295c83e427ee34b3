/**
 * Hostile input: an agent caught in a self-scheduling loop, creating alarms as fast as it can,
 * against a real `chronos serve` with the default quotas (120 creates a minute, 1,000 active
 * alarms per owner), while other owners go about their business.
 *
 * Proves the loop is stopped by the quota — 429 with `Retry-After` and `limit: create_rate`,
 * nothing written beyond the quota — and that the other owners are never refused. Their
 * latency is measured without the loop, with one looping agent (one request at a time, as an
 * agent runs), and with eight looping at once; the figures go to the report and to
 * docs/reliability.md. Speed is not asserted.
 */
import { beforeAll, expect, it } from 'vitest';
import { KeyService } from '../../packages/chronos-timers/src/core/key-service.js';
import { sql } from '../../packages/chronos-timers/src/store/driver/db.js';
import { serveEnv, useScenario } from './support/fleet.js';
import { Instance } from './support/instance.js';
import { owners } from './support/rows.js';
import { sized, sleep, spread, startReport } from './support/scenario.js';
import { describePostgresOnly } from '../support/backends.js';

const SIZE = sized({ phaseMs: 3_000, others: 4 }, { phaseMs: 30_000, others: 8 });

const countOf = sql('loop_alarms_of', `SELECT count(*)::int AS n FROM chronos.alarms WHERE owner_did = $1`);

describePostgresOnly(
  'a chronos serve process with clients of its own on a shared database',
  'hostile input: a self-scheduling loop',
  () => {
    const scenario = useScenario();
    let server: Instance;
    beforeAll(async () => {
      server = await Instance.create(
        'chronos-quota',
        serveEnv(scenario.t.url!, scenario.router, {
          CHRONOS_CREATE_RATE: '120',
          CHRONOS_MAX_ACTIVE_ALARMS: '1000',
        }),
      );
      await server.start();
    }, 60_000);

    async function post(key: string, body: unknown) {
      const started = performance.now();
      const response = await fetch(`${server.url}/v1/alarms`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const json = (await response.json()) as { alarm?: { id: string }; limit?: string };
      return {
        status: response.status,
        json,
        ms: performance.now() - started,
        retryAfter: response.headers.get('retry-after'),
      };
    }

    async function get(key: string, path: string) {
      const started = performance.now();
      const response = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
      await response.arrayBuffer();
      return { status: response.status, ms: performance.now() - started };
    }

    /** Other owners at work for `ms`: every 200 ms a read, every second a create. */
    async function othersAtWork(keys: string[], ms: number) {
      const latencies: number[] = [];
      const statuses: Record<number, number> = {};
      const until = Date.now() + ms;
      await Promise.all(
        keys.map(async (key, i) => {
          let mine = '';
          for (let tick = i; Date.now() < until; tick++) {
            let r: { status: number; ms: number };
            if (tick % 5 === 0 || !mine) {
              const made = await post(key, { in_seconds: 3_600, label: `work-${tick}`, require_ack: false });
              mine = made.json.alarm?.id ?? mine;
              r = made;
            } else {
              r = await get(key, tick % 2 ? `/v1/alarms/${mine}` : '/v1/alarms?limit=20');
            }
            latencies.push(r.ms);
            statuses[r.status] = (statuses[r.status] ?? 0) + 1;
            await sleep(200);
          }
        }),
      );
      return {
        requests: latencies.length,
        statuses,
        latencyMs: spread(latencies),
      };
    }

    /** `streams` loops creating alarms for `key` one after another, as fast as answers come back. */
    async function loop(key: string, streams: number, ms: number) {
      const statuses: Record<number, number> = {};
      const limits = new Set<string>();
      const retryAfters = new Set<string>();
      const until = Date.now() + ms;
      await Promise.all(
        Array.from({ length: streams }, async (_, s) => {
          for (let i = 0; Date.now() < until; i++) {
            const r = await post(key, {
              in_seconds: 60 + i,
              label: `loop-${s}-${i}`,
              wake_message: 'schedule another',
            });
            statuses[r.status] = (statuses[r.status] ?? 0) + 1;
            if (r.json.limit) limits.add(r.json.limit);
            if (r.retryAfter) retryAfters.add(r.retryAfter);
          }
        }),
      );
      return {
        statuses,
        limits: [...limits],
        retryAfterSeconds: [...retryAfters].map(Number).sort((a, b) => a - b),
      };
    }

    it('is stopped by the create quota with 429s, and never gets another owner refused', async () => {
      const report = startReport('self-scheduling-loop', 'test/scenarios/self-scheduling.test.ts');
      const service = new KeyService(scenario.t.db);
      const make = async (did: string) => (await service.create(did, 'loop')).key;
      const [loopOwner, fleetOwner, ...otherOwners] = owners(2 + SIZE.others, 'agent');
      const loopKey = await make(loopOwner!);
      const fleetKey = await make(fleetOwner!);
      const otherKeys = await Promise.all(otherOwners.map(make));

      const baseline = await othersAtWork(otherKeys, SIZE.phaseMs);
      const [oneLoop, withOne] = await Promise.all([
        loop(loopKey, 1, SIZE.phaseMs),
        othersAtWork(otherKeys, SIZE.phaseMs),
      ]);
      const [eightLoops, withEight] = await Promise.all([
        loop(fleetKey, 8, SIZE.phaseMs),
        othersAtWork(otherKeys, SIZE.phaseMs),
      ]);
      const rowsOf = async (did: string) => (await scenario.t.db.query<{ n: number }>(countOf, [did]))[0]!.n;
      const loopRows = await rowsOf(loopOwner!);
      const fleetRows = await rowsOf(fleetOwner!);

      Object.assign(report, {
        quotas: { createRatePerMinute: 120, maxActiveAlarms: 1_000 },
        phaseMs: SIZE.phaseMs,
        otherOwners: SIZE.others,
        othersWithoutLoop: baseline,
        oneLoopingAgent: { ...oneLoop, alarmsWritten: loopRows },
        othersWithOneLoop: withOne,
        eightLoopingStreams: { ...eightLoops, alarmsWritten: fleetRows },
        othersWithEightLoops: withEight,
      });
      await report.finish();

      for (const looping of [oneLoop, eightLoops]) {
        expect(looping.statuses[429]).toBeGreaterThan(0);
        expect(looping.limits).toEqual(['create_rate']);
        expect(looping.retryAfterSeconds[0]).toBeGreaterThanOrEqual(1);
        expect(Object.keys(looping.statuses).sort()).toEqual(['201', '429']);
      }
      // Nothing written beyond the quota (one agent: exactly; eight racing: the documented slack).
      expect(loopRows).toBe(oneLoop.statuses[201]);
      expect(loopRows).toBeLessThanOrEqual(120);
      expect(fleetRows).toBe(eightLoops.statuses[201]);
      expect(fleetRows).toBeLessThanOrEqual(120 + 8);
      // The others were never refused.
      for (const phase of [baseline, withOne, withEight]) {
        expect(
          Object.keys(phase.statuses).every((s) => s === '200' || s === '201'),
          JSON.stringify(phase.statuses),
        ).toBe(true);
      }
    }, 240_000);
  },
);
