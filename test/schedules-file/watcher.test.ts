/**
 * The watcher of CHRONOS_SCHEDULES_FILE on real files in a temporary directory, written the ways
 * editors and people write them, with real file-system events (fs.watch). Time is a TestClock:
 * a test waits until the watcher is waiting out its debounce, then moves the clock past it.
 */
import { once } from 'node:events';
import { unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { TestClock } from '../../packages/chronos-timers/src/clock.js';
import {
  SchedulesFileWatcher,
  type WatchOutcome,
} from '../../packages/chronos-timers-server/src/schedules-file/watcher.js';
import type { Db } from '../../packages/chronos-timers/src/store/driver/db.js';
import { describeEachBackend, postgresOnly } from '../support/backends.js';
import { makeService, until } from '../support/harness.js';
import {
  alarmCount,
  editorSave,
  file,
  fileService,
  headsUps,
  inDays,
  OWNER,
  recordingLogger,
  tempDir,
  writeHalf,
  writeInPlace,
} from './support.js';

const DEBOUNCE_MS = 300;

interface Watched {
  watcher: SchedulesFileWatcher;
  clock: TestClock;
  lines: Record<string, unknown>[];
  outcomes: WatchOutcome[];
}

const standup = { key: 'standup', label: 'standup', cron: '0 9 * * 1-5', timezone: 'Europe/Paris' };

describeEachBackend('the schedules file: watching it', ({ t, kind }) => {
  let files: Awaited<ReturnType<typeof tempDir>>;
  const running: SchedulesFileWatcher[] = [];

  beforeEach(async () => {
    files = await tempDir();
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((w) => w.stop()));
    await files.remove();
  });

  /** A watcher of the test's file over `db` (not started). */
  function watch(db: Db = t.db, path = files.path): Watched {
    const clock = new TestClock();
    const { logger, lines } = recordingLogger();
    const watcher = new SchedulesFileWatcher({ path, service: fileService(db), clock, logger });
    const outcomes: WatchOutcome[] = [];
    watcher.on('outcome', (outcome: WatchOutcome) => outcomes.push(outcome));
    running.push(watcher);
    return { watcher, clock, lines, outcomes };
  }

  /** Waits until the watcher is waiting out its debounce, lets the time pass, and returns what it did. */
  async function settle({ watcher, clock }: Watched): Promise<WatchOutcome> {
    await until(() => clock.sleeping > 0, 'the watcher to wait out its debounce');
    const outcome = once(watcher, 'outcome');
    clock.advance(DEBOUNCE_MS);
    return ((await outcome) as [WatchOutcome])[0];
  }

  /** What the watcher's first reconcile did to the first entry. */
  const firstAction = ({ outcomes: [first] }: Watched) =>
    first?.kind === 'applied' ? first.report.results[0]?.action : first?.kind;
  const alarm = (key = 'standup') => makeService(t.db).getByKey(OWNER, key);
  const messages = (lines: Record<string, unknown>[]) => lines.map((l) => String(l.msg));

  it('reconciles at start; a file that does not exist yet changes nothing until it appears', async () => {
    const w = watch();
    await w.watcher.start();
    expect(w.outcomes.map((o) => o.kind)).toEqual(['missing']);
    expect(messages(w.lines)).toContainEqual(expect.stringMatching(/does not exist: nothing to apply/));

    await editorSave(files.path, file(standup));
    const outcome = await settle(w);
    expect(outcome.kind).toBe('applied');
    expect((await alarm())!.cronExpr).toBe('0 9 * * 1-5');
  });

  it('an editor’s save (a new file renamed over the old) is seen at every save, not only the first', async () => {
    await editorSave(files.path, file(standup));
    const w = watch();
    await w.watcher.start();
    const { id } = (await alarm())!;

    for (const cron of ['0 10 * * 1-5', '0 11 * * 1-5', '0 12 * * 1-5']) {
      await editorSave(files.path, file({ ...standup, cron }));
      const outcome = await settle(w);
      expect(outcome.kind).toBe('applied');
      expect((await alarm())!).toMatchObject({ id, cronExpr: cron });
    }
    expect((await headsUps(t.db)).map((h) => h.message_id)).toEqual(
      [1, 2, 3, 4].map((n) => `${id}:file:${n}`),
    );
    // One line per created or updated entry.
    const lines = messages(w.lines).filter((m) => /^schedules file: alarms\.0 /.test(m));
    expect(lines).toEqual([
      expect.stringMatching(
        new RegExp(`alarms\\.0 \\(owner ${OWNER.did}, key "standup"\\): created alarm ${id}$`),
      ),
      ...[1, 2, 3].map(() => expect.stringMatching(/: updated alarm \S+ \(cron\)$/)),
    ]);
  });

  it('a write in place is applied', async () => {
    await writeInPlace(files.path, file(standup));
    const w = watch();
    await w.watcher.start();
    await writeInPlace(files.path, file({ ...standup, label: 'daily standup' }));
    expect((await settle(w)).kind).toBe('applied');
    expect((await alarm())!.label).toBe('daily standup');
  });

  it('a file caught half written applies nothing and keeps the last good state; the rest of the write applies it', async () => {
    await editorSave(files.path, file(standup));
    const w = watch();
    await w.watcher.start();

    const finish = await writeHalf(
      files.path,
      file({ ...standup, label: 'after' }, { key: 'new', at: inDays(1) }),
    );
    const half = await settle(w);
    expect(half.kind).toBe('refused');
    expect(half.kind === 'refused' && half.report.errors[0]!.message).toMatch(
      /got invalid JSON at line \d+, column \d+/,
    );
    expect((await alarm())!.label).toBe('standup');
    expect(await alarmCount(t.db)).toBe(1);

    await finish();
    let outcome = await settle(w);
    // A late event of the first half may bring one more read of the half file first.
    while (outcome.kind === 'refused') outcome = await settle(w);
    expect(outcome.kind).toBe('applied');
    expect((await alarm())!.label).toBe('after');
    expect(await alarmCount(t.db)).toBe(2);
  });

  it('a write that finishes within the debounce is read once, whole: the debounce waits for the last event', async () => {
    await editorSave(files.path, file(standup));
    const w = watch();
    await w.watcher.start();
    const before = w.outcomes.length;

    const changed = once(w.watcher, 'change');
    const finish = await writeHalf(files.path, file({ ...standup, label: 'whole' }));
    await changed;
    await until(() => w.clock.sleeping > 0, 'the debounce');
    w.clock.advance(DEBOUNCE_MS - 1);
    const changedAgain = once(w.watcher, 'change');
    await finish();
    await changedAgain;
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(w.outcomes.length).toBe(before); // not read yet: the last event restarted the wait

    const outcome = await settle(w);
    expect(outcome.kind).toBe('applied');
    expect(w.outcomes.slice(before).map((o) => o.kind)).toEqual(['applied']);
    expect((await alarm())!.label).toBe('whole');
  });

  it('a deleted entry leaves its alarm running; a deleted file changes nothing; recreated, it is read again', async () => {
    await editorSave(files.path, file(standup, { key: 'launch', at: inDays(30) }));
    const w = watch();
    await w.watcher.start();

    await editorSave(files.path, file({ key: 'launch', at: inDays(30) }));
    expect((await settle(w)).kind).toBe('applied');
    expect((await alarm())!.status).toBe('active');

    await unlink(files.path);
    expect((await settle(w)).kind).toBe('missing');
    expect((await alarm())!.status).toBe('active');
    expect((await alarm('launch'))!.status).toBe('active');
    expect(messages(w.lines)).toContainEqual(
      expect.stringMatching(/does not exist: .*the alarms it made keep running/),
    );

    await writeInPlace(files.path, file({ ...standup, label: 'back' }));
    expect((await settle(w)).kind).toBe('applied');
    expect((await alarm())!.label).toBe('back');
  });

  it('bad JSON is refused with one log line saying where; the last good state stays', async () => {
    await editorSave(files.path, file(standup));
    const w = watch();
    await w.watcher.start();
    await editorSave(files.path, '{"alarms": [{"owner": "x", "key": "standup",}]}');
    const outcome = await settle(w);
    expect(outcome.kind).toBe('refused');
    const refused = w.lines.filter((l) => /refused/.test(String(l.msg)));
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ level: 50, file: files.path });
    expect(String(refused[0]!.msg)).toMatch(
      /refused, nothing applied \(the last good state stays\): schedules file: expected a JSON object .* at line 1, column 45: expected a property name, got "}" \(JSON allows no trailing comma\)$/,
    );
    expect((await alarm())!.label).toBe('standup');
  });

  it('one bad entry among good ones applies nothing; the log line names its index and field', async () => {
    await editorSave(files.path, file(standup));
    const w = watch();
    await w.watcher.start();
    await editorSave(
      files.path,
      file(
        { ...standup, label: 'changed' },
        { key: 'good', cron: '@daily' },
        { key: 'bad', cron: '@every 0s' },
      ),
    );
    expect((await settle(w)).kind).toBe('refused');
    const refused = w.lines.filter((l) => /refused/.test(String(l.msg)));
    expect(refused).toHaveLength(1);
    expect(refused[0]!.errors).toEqual([expect.stringMatching(/^alarms\.2\.cron: expected /)]);
    expect((await alarm())!.label).toBe('standup');
    expect(await alarm('good')).toBeNull();
  });

  it('a restart with the file unchanged changes nothing and sends no heads-up; an edit made while down is applied at start', async () => {
    await editorSave(files.path, file(standup));
    const first = watch();
    await first.watcher.start();
    await first.watcher.stop();
    expect(await headsUps(t.db)).toHaveLength(1);

    await t.restart();
    const again = watch();
    await again.watcher.start();
    expect(firstAction(again)).toBe('unchanged');
    expect(await headsUps(t.db)).toHaveLength(1);
    await again.watcher.stop();

    // Edited while nothing watched it.
    await editorSave(files.path, file({ ...standup, cron: '0 8 * * 1-5' }));
    await t.restart();
    const later = watch();
    await later.watcher.start();
    expect(firstAction(later)).toBe('updated');
    expect((await alarm())!.cronExpr).toBe('0 8 * * 1-5');
    expect(await headsUps(t.db)).toHaveLength(2);
  });

  it('refuses to start on a file whose directory does not exist', async () => {
    const w = watch(t.db, join(files.dir, 'nowhere', 'schedules.json'));
    await expect(w.watcher.start()).rejects.toThrow(
      /^CHRONOS_SCHEDULES_FILE: expected a file in an existing directory, got ".*nowhere\/schedules\.json": the directory .* does not exist$/,
    );
  });

  postgresOnly(
    kind,
    'two instances are two connection pools on one database',
    'two instances watching one file converge on one alarm and one heads-up per change',
    async () => {
      await editorSave(files.path, file(standup));
      const a = watch(t.openPool());
      const b = watch(t.openPool());
      await Promise.all([a.watcher.start(), b.watcher.start()]);
      const actions = (w: Watched) =>
        w.outcomes.flatMap((o) => (o.kind === 'applied' ? o.report.results.map((r) => r.action) : [o.kind]));
      expect([...actions(a), ...actions(b)].sort()).toEqual(['created', 'unchanged']);

      await editorSave(files.path, file({ ...standup, cron: '0 7 * * 1-5' }));
      await Promise.all([settle(a), settle(b)]);
      expect([...actions(a), ...actions(b)].filter((x) => x === 'updated')).toHaveLength(1);

      // Two edits in quick succession, each instance reading at its own moment: one result.
      await editorSave(files.path, file({ ...standup, cron: '0 6 * * 1-5' }));
      const settledA = settle(a);
      await editorSave(files.path, file({ ...standup, cron: '0 5 * * 1-5' }));
      await settledA;
      // b reads after the last write, whatever a read first.
      await settle(b);
      expect(await alarmCount(t.db)).toBe(1);
      const { id, cronExpr } = (await alarm())!;
      expect(cronExpr).toBe('0 5 * * 1-5');
      const ids = (await headsUps(t.db)).map((h) => h.message_id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids[0]).toBe(`${id}:file:1`);
      expect(ids.at(-1)).toBe(`${id}:file:${ids.length}`);
    },
  );
});
