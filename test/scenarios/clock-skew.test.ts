/**
 * Scenario: a host whose clock is far ahead. One instance runs with its wall clock an hour fast
 * (`CHRONOS_TEST_CLOCK_OFFSET=+1h`, a test-only hook that shifts the process's `Date`), and
 * does all the work: bulk-loaded alarms, alarms created through its own API with `in_seconds`
 * and with `at`, an `@every 2s` cron alarm, and an alarm whose wake it must nudge.
 *
 * Proves I5: due-ness follows the database's `now()`, not the host's clock — nothing is fired
 * or nudged early, and nothing is an hour late either. The API computes relative times on the
 * database clock, so an `at` a few seconds ahead is accepted (by the host's clock it is an hour
 * in the past). What the host's clock still shows: `webhook-timestamp` is that host's time, so a
 * receiver checking it against its own clock (Standard Webhooks allows 5 minutes) refuses it —
 * reported, as docs/delivery.md says: keep clocks synchronised.
 */
import { expect, it } from 'vitest';
import { KeyService } from '../../packages/chronos-timers/src/core/key-service.js';
import { OWNER } from '../support/harness.js';
import { errorLines, serveEnv, startFleet, useScenario } from './support/fleet.js';
import { databaseNowMs, loadAlarms, owners } from './support/rows.js';
import { sized, spread, startReport, waitUntil } from './support/scenario.js';
import { describePostgresOnly } from '../support/backends.js';

const SIZE = sized(
  { alarms: 300, spreadMs: 4_000, cronFires: 3 },
  { alarms: 2_000, spreadMs: 20_000, cronFires: 8 },
);
const OFFSET = '+1h';
const OFFSET_MS = 3_600_000;
const NUDGE_AFTER_MS = 3_000;

describePostgresOnly(
  'a chronos serve process beside the test on one database',
  'scenario: clock skew',
  () => {
    const scenario = useScenario();

    it('an instance whose clock is an hour ahead never fires or nudges early, nor an hour late (I5)', async () => {
      const report = startReport('clock-skew', 'test/scenarios/clock-skew.test.ts');
      const fleet = await startFleet(
        1,
        serveEnv(scenario.t.url!, scenario.router, {
          CHRONOS_TEST_CLOCK_OFFSET: OFFSET,
          CHRONOS_MIN_CRON_INTERVAL: '1s',
          CHRONOS_NUDGE_AFTER: `${NUDGE_AFTER_MS}ms`,
          CHRONOS_ESCALATE_AFTER: '1h',
          CHRONOS_TRACKER_INTERVAL: '250ms',
        }),
      );
      const [skewed] = fleet;
      const started = skewed!.logs().find((l) => typeof l.offsetMs === 'number');
      expect(started?.offsetMs, 'the instance runs with its clock shifted').toBe(OFFSET_MS);
      // Its log lines carry its own (shifted) time: proof the hook moved the process's clock.
      const loggedAt = Number(skewed!.logs().at(-1)!.time);

      const key = (await new KeyService(scenario.t.db).create(OWNER.did, 'skew')).key;
      const post = async (body: Record<string, unknown>) => {
        const response = await fetch(`${skewed!.url}/v1/alarms`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        const json = (await response.json()) as { alarm: { id: string; next_fire_at: string } };
        expect(response.status, JSON.stringify(json)).toBe(201);
        return json.alarm;
      };

      const due = await loadAlarms(scenario.t.db, {
        count: SIZE.alarms,
        firstDueInMs: 2_000,
        spreadMs: SIZE.spreadMs,
        owners: owners(5),
      });
      const viaApi = new Map<string, number>();
      for (const seconds of [2, 3, 4]) {
        const alarm = await post({ in_seconds: seconds, label: `in-${seconds}s`, require_ack: false });
        viaApi.set(alarm.id, Date.parse(alarm.next_fire_at));
      }
      const at = new Date((await databaseNowMs(scenario.t.db)) + 3_000).toISOString().replace('Z', '+00:00');
      const atAlarm = await post({ at, label: 'at', require_ack: false });
      viaApi.set(atAlarm.id, Date.parse(atAlarm.next_fire_at));
      const acked = await post({ in_seconds: 2, label: 'needs-ack', require_ack: true });
      const cron = await post({ cron: '@every 2s', label: 'every-2s', require_ack: false });
      const createdAt = await databaseNowMs(scenario.t.db);

      const all = new Map([...due, ...viaApi, [acked.id, Date.parse(acked.next_fire_at)]]);
      await waitUntil(() => scenario.router.deliveredCount(all.keys()) === all.size, {
        timeoutMs: SIZE.spreadMs + 30_000,
        what: 'every alarm delivered',
      });
      const nudge = await waitUntil(
        () => scenario.router.receipts().find((r) => r.type === 'alarm.nudge' && r.alarmId === acked.id),
        { timeoutMs: 30_000, what: 'the nudge' },
      );
      await waitUntil(
        () =>
          scenario.router.receipts().filter((r) => r.alarmId === cron.id && r.ok).length >= SIZE.cronFires,
        { timeoutMs: 2_000 * SIZE.cronFires + 30_000, what: 'the cron alarm to fire repeatedly' },
      );

      const tally = await scenario.router.tally(all, scenario.t.db);
      const cronFires = scenario.router.receipts().filter((r) => r.alarmId === cron.id && r.ok);
      const cronEarly = cronFires.filter((r) => r.receivedAt < r.scheduledFor).length;
      const cronSteps = cronFires.slice(1).map((r, i) => r.scheduledFor - cronFires[i]!.scheduledFor);
      const apiLateness = [...viaApi].map(
        ([id, dueAt]) =>
          Math.min(
            ...scenario.router
              .deliveredByAlarm()
              .get(id)!
              .map((r) => r.receivedAt),
          ) - dueAt,
      );
      const timestampSkew = scenario.router.receipts().map((r) => r.timestampMs - r.receivedAt);

      Object.assign(report, {
        clockOffset: OFFSET,
        alarmsLoaded: SIZE.alarms,
        instanceLogTimeAheadOfHostMs: Math.round(loggedAt - Date.now()),
        apiAlarms: { inSeconds: 3, at: 1, latenessMs: spread(apiLateness) },
        apiAlarmsDueInMsFromCreation: [...viaApi.values()].map((d) => Math.round(d - createdAt)),
        nudge: {
          afterFireMs: Math.round(nudge.receivedAt - nudge.firedAt),
          configuredMs: NUDGE_AFTER_MS,
        },
        cron: { fires: cronFires.length, early: cronEarly, stepsMs: cronSteps },
        webhookTimestampAheadOfReceiptS: spread(timestampSkew.map((ms) => ms / 1000)),
        tally,
        errorLogLines: errorLines(fleet).length,
      });
      await report.finish();

      expect(tally.lost).toBe(0);
      expect(tally.early).toBe(0);
      expect(tally.earlyByDatabase).toBe(0);
      expect(cronEarly).toBe(0);
      // Nor late by the skew: an hour-fast clock deciding due-ness would show here as an hour.
      expect(tally.latenessMs.max).toBeLessThan(OFFSET_MS / 2);
      expect(nudge.receivedAt).toBeGreaterThanOrEqual(nudge.firedAt + NUDGE_AFTER_MS);
      // Relative times were taken on the database clock: due within seconds, not an hour out.
      for (const dueAt of viaApi.values()) expect(Math.abs(dueAt - createdAt)).toBeLessThan(60_000);
      for (const step of cronSteps) expect(step % 2_000).toBe(0);
      // The skew is real: the instance signs with its own (an hour fast) clock.
      for (const skew of timestampSkew) expect(skew).toBeGreaterThan(OFFSET_MS - 60_000);
    }, 180_000);
  },
);
