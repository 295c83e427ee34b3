/**
 * Scenario: the embedded store (PGlite) killed during writes. `chronos serve` runs on a data
 * directory with no DATABASE_URL while clients create and cancel alarms through its API; it is
 * killed with SIGKILL in the middle of that, and started again on the same directory, several
 * times over.
 *
 * Proves that a committed alarm survives a crash of the process: every create answered 201 is
 * there after the restart (and fires, when due), every cancel answered 200 stays cancelled; the
 * lock left by the killed process is taken over; and a second server started on the directory
 * while one runs is refused at once, naming the lock and the process holding it.
 *
 * Not proved, because it is not promised: survival of a power loss (PGlite does not fsync).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, runChronos, tempDataDir } from '../cli/support.js';
import { Instance } from './support/instance.js';
import { Router } from './support/router.js';
import { sized, sleep, spread, startReport, waitUntil } from './support/scenario.js';

const SIZE = sized({ kills: 1, writeMs: 1_500, writers: 4 }, { kills: 6, writeMs: 3_000, writers: 8 });
const DID = 'did:matrix:6f1c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10:embedded';

interface Committed {
  id: string;
  dueAt: number;
  /** Its cancel was answered 200: committed. */
  cancelled: boolean;
  /** Its cancel was sent but the server died before answering: committed or not, either is right. */
  cancelInDoubt: boolean;
}

describe('scenario: embedded store', () => {
  let data: Awaited<ReturnType<typeof tempDataDir>>;
  let router: Router;
  let server: Instance;
  beforeAll(async () => {
    data = await tempDataDir();
    router = await Router.start();
  });
  afterAll(async () => {
    await server?.stop();
    await router?.close();
    await data?.remove();
  });

  it('SIGKILL during writes and a restart on the same directory: no committed alarm lost; a second process refused', async () => {
    const report = startReport('embedded-store', 'test/scenarios/embedded-store.test.ts');
    server = await Instance.create('chronos-embedded', {
      CHRONOS_DATA_DIR: data.dir,
      CHRONOS_ROUTER_URL: router.url(),
      CHRONOS_MAX_ACTIVE_ALARMS: '0',
      CHRONOS_CREATE_RATE: '0',
      // A claim the killed process held waits out its lease: keep it short.
      CHRONOS_LEASE: '2s',
      CHRONOS_DELIVERY_TIMEOUT: '1500ms',
    });
    await server.start();
    const made = await runChronos(['keys', 'create', '--owner', DID], { CHRONOS_DATA_DIR: data.dir });
    expect(made.code, made.stderr).toBe(0);
    const auth = { authorization: `Bearer ${made.stdout.trimEnd().split('\n').at(-1)!}` };

    const committed = new Map<string, Committed>();
    const cycles: { written: number; cancelled: number; refusedOrCut: number; restartMs: number }[] = [];
    let n = 0;
    for (let cycle = 0; cycle < SIZE.kills; cycle++) {
      let writing = true;
      let written = 0;
      let cancelled = 0;
      let refusedOrCut = 0;
      const writer = async () => {
        while (writing) {
          const i = n++;
          try {
            // Most are due within seconds (they must fire after the restarts); a fifth wait an
            // hour and are cancelled again at once (a committed cancel must stay).
            const later = i % 5 === 0;
            const response = await fetch(`${server.url}/v1/alarms`, {
              method: 'POST',
              headers: { ...auth, 'content-type': 'application/json' },
              body: JSON.stringify({
                in_seconds: later ? 3_600 : 1 + (i % 4),
                label: `w-${i}`,
                require_ack: false,
              }),
            });
            if (response.status !== 201) {
              refusedOrCut++;
              continue;
            }
            const { alarm } = (await response.json()) as { alarm: { id: string; next_fire_at: string } };
            const entry = {
              id: alarm.id,
              dueAt: Date.parse(alarm.next_fire_at),
              cancelled: false,
              cancelInDoubt: false,
            };
            committed.set(alarm.id, entry);
            written++;
            if (later) {
              entry.cancelInDoubt = true;
              const cancel = await fetch(`${server.url}/v1/alarms/${alarm.id}`, {
                method: 'DELETE',
                headers: auth,
              });
              entry.cancelInDoubt = false;
              if (cancel.status === 200) {
                entry.cancelled = true;
                cancelled++;
              }
            }
          } catch {
            refusedOrCut++; // the server died under this request: not committed as far as we know
            await sleep(20);
          }
        }
      };
      const writers = Array.from({ length: SIZE.writers }, writer);
      await sleep(SIZE.writeMs);
      await server.kill();
      writing = false;
      await Promise.all(writers);
      const restarting = Date.now();
      await server.start();
      cycles.push({ written, cancelled, refusedOrCut, restartMs: Date.now() - restarting });

      // Everything committed so far is there, as it was left.
      const missing: string[] = [];
      for (const entry of committed.values()) {
        const response = await fetch(`${server.url}/v1/alarms/${entry.id}`, { headers: auth });
        if (response.status !== 200) {
          missing.push(entry.id);
          continue;
        }
        const { alarm } = (await response.json()) as { alarm: { status: string } };
        if (entry.cancelled) expect(alarm.status, entry.id).toBe('cancelled');
        else if (entry.cancelInDoubt) entry.cancelled = alarm.status === 'cancelled';
        else expect(alarm.status, entry.id).not.toBe('cancelled');
        entry.cancelInDoubt = false;
      }
      expect(missing, `committed alarms missing after kill ${cycle + 1}`).toEqual([]);
    }

    // A second server on the same directory is refused at once, naming the lock and the holder.
    const refusing = Date.now();
    const second = await runChronos(['serve'], {
      CHRONOS_DATA_DIR: data.dir,
      PORT: String(await freePort()),
    });
    const refusedInMs = Date.now() - refusing;

    // Every committed alarm that was due fires (the last restart's dispatcher picks them up).
    const dueSoon = new Map(
      [...committed.values()]
        .filter((e) => !e.cancelled && e.dueAt < Date.now() + 600_000)
        .map((e) => [e.id, e.dueAt]),
    );
    await waitUntil(() => router.deliveredCount(dueSoon.keys()) === dueSoon.size, {
      timeoutMs: 60_000,
      what: 'every committed alarm that fell due to be delivered',
      describe: () => ({ delivered: router.deliveredCount(dueSoon.keys()), of: dueSoon.size }),
    });
    const delivered = router.deliveredByAlarm();
    const early = router.receipts().filter((r) => r.receivedAt < r.scheduledFor).length;
    const duplicated = [...delivered.values()].filter((list) => list.length > 1).length;
    const lateness = [...dueSoon].map(
      ([id, at]) => Math.min(...delivered.get(id)!.map((r) => r.receivedAt)) - at,
    );

    Object.assign(report, {
      store: 'embedded (PGlite)',
      kills: SIZE.kills,
      writers: SIZE.writers,
      writeMsBeforeEachKill: SIZE.writeMs,
      cycles,
      committedCreates: committed.size,
      committedCancels: [...committed.values()].filter((e) => e.cancelled).length,
      lostAfterRestarts: 0,
      dueAndDelivered: {
        due: dueSoon.size,
        delivered: router.deliveredCount(dueSoon.keys()),
        early,
        duplicated,
      },
      latenessMs: spread(lateness),
      secondProcess: { exitCode: second.code, refusedInMs, stderr: second.stderr.trim() },
    });
    await report.finish();

    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(new RegExp(`in use by process ${server.pid} .*chronos\\.lock`));
    expect(early).toBe(0);
    expect(cycles.every((c) => c.written > 0)).toBe(true);
  }, 240_000);
});
