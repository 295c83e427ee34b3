/**
 * Watches `CHRONOS_SCHEDULES_FILE` and reconciles the alarms with it (contract §13): once at
 * start, then after every edit, once the edits have settled.
 *
 * - It watches the file's directory, not the file: an editor's save writes a new file and
 *   renames it over the old one, and a watch on the old inode would see nothing after the first
 *   save. Node's `fs.watch` (inotify on Linux) sees that rename, an in-place write, a delete and
 *   a re-creation by name in the directory (measured; docs/schedules-file.md), so no watcher
 *   library is needed. Events for the file's own name count, and those for names starting with
 *   `..` (a Kubernetes ConfigMap swaps a `..data` link).
 * - It waits until no event has come for `debounceMs` (300 ms), then reads the file whole. A file
 *   read half written is not valid JSON (or not a valid file): nothing is applied, the last good
 *   state stays, and the write's next event brings another read.
 * - A missing file changes nothing: the alarms it made keep running.
 * - A reconcile that fails for another reason (the database away) is tried again with backoff.
 *
 * Every reconcile takes the store's lock (src/store/schedule-file-entries.ts), so several
 * instances watching one file apply each edit once, and an edit made while an instance was down
 * is picked up by its reconcile at start (or by whichever instance ran meanwhile).
 *
 * Events, for tests (which never sleep for the debounce: they pass a TestClock and advance it):
 * `change` (a relevant file-system event), `settling` (the debounce's wait begins), `outcome`
 * (a WatchOutcome, after each reconcile).
 */
import { EventEmitter } from 'node:events';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { systemClock, type Clock } from 'chronos-timers/internal';
import type { SchedulesFileService } from 'chronos-timers/internal';
import { retryDelayMs, type RetryPolicy } from 'chronos-timers/internal';
import { ChronosError } from 'chronos-timers/internal';
import { silentLogger, type Logger } from 'chronos-timers/internal';
import { applySchedulesFile, describeResult, summarise, type FileReport } from './apply.js';

export interface SchedulesFileWatcherOptions {
  /** The schedules file (`CHRONOS_SCHEDULES_FILE`). */
  path: string;
  service: SchedulesFileService;
  /** How long no event must come before the file is read (default 300 ms). */
  debounceMs?: number;
  /** Backoff between reconciles that failed (the database away). */
  retry?: RetryPolicy;
  clock?: Clock;
  logger?: Logger;
}

export type WatchOutcome =
  | { kind: 'applied'; report: FileReport }
  /** Not valid JSON, or an invalid entry: nothing applied. */
  | { kind: 'refused'; report: FileReport }
  | { kind: 'missing' }
  /** Not reconciled: the file could not be read, or the database failed. Tried again. */
  | { kind: 'failed'; error: unknown };

export class SchedulesFileWatcher extends EventEmitter {
  readonly path: string;
  readonly #dir: string;
  readonly #name: string;
  readonly #service: SchedulesFileService;
  readonly #debounceMs: number;
  readonly #retry: RetryPolicy;
  readonly #clock: Clock;
  readonly #logger: Logger;

  #fsWatcher: FSWatcher | null = null;
  #loop: Promise<void> | null = null;
  #stopping = false;
  #stop = new AbortController();
  /** An event came that no reconcile has read yet. */
  #pending = false;
  /** Resolves the loop's wait for an event. */
  #kick: (() => void) | null = null;
  /** The debounce's current wait; an event aborts it, and the wait starts again. */
  #settle: AbortController | null = null;
  #failures = 0;
  #last: WatchOutcome['kind'] | null = null;

  constructor(options: SchedulesFileWatcherOptions) {
    super();
    this.path = resolve(options.path);
    this.#dir = dirname(this.path);
    this.#name = basename(this.path);
    this.#service = options.service;
    this.#debounceMs = options.debounceMs ?? 300;
    this.#retry = options.retry ?? { baseMs: 1_000, maxMs: 30_000 };
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger;
  }

  /**
   * Starts watching, reconciles once (awaited: the file's alarms exist when this resolves, unless
   * the file was refused), then reconciles after every edit until stop(). Refuses a file whose
   * directory does not exist.
   */
  async start(): Promise<void> {
    if (this.#fsWatcher) return;
    this.#stopping = false;
    this.#stop = new AbortController();
    try {
      // Watching before the first read: an edit made during it is not missed.
      this.#fsWatcher = watch(this.#dir, { persistent: false }, (_event, name) => this.#onEvent(name));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      const why =
        code === 'ENOENT'
          ? `the directory ${this.#dir} does not exist`
          : `${this.#dir} cannot be watched (${code})`;
      throw new ChronosError(
        'invalid_input',
        `CHRONOS_SCHEDULES_FILE: expected a file in an existing directory, got ${JSON.stringify(this.path)}: ${why}`,
      );
    }
    this.#fsWatcher.on('error', (error) => {
      this.#logger.error(
        { err: error, dir: this.#dir },
        `schedules file: watching ${this.#dir} failed; edits are not picked up until chronos restarts`,
      );
    });
    await this.runOnce();
    this.#loop = this.#run();
  }

  /** Stops watching; a reconcile under way finishes first. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#fsWatcher?.close();
    this.#fsWatcher = null;
    this.#stop.abort();
    this.#settle?.abort();
    this.#kick?.();
    await this.#loop;
    this.#loop = null;
  }

  /** Reads the file and reconciles the alarms with it, once, now; logs and reports what it did. */
  async runOnce(): Promise<WatchOutcome> {
    const outcome = await this.#reconcile();
    this.#failures = outcome.kind === 'failed' ? this.#failures + 1 : 0;
    this.#log(outcome);
    this.#last = outcome.kind;
    this.emit('outcome', outcome);
    return outcome;
  }

  async #reconcile(): Promise<WatchOutcome> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
      return { kind: 'failed', error };
    }
    try {
      const report = await applySchedulesFile(this.#service, text);
      return report.applied ? { kind: 'applied', report } : { kind: 'refused', report };
    } catch (error) {
      return { kind: 'failed', error };
    }
  }

  #onEvent(name: string | Buffer | null): void {
    const file = name === null ? null : String(name);
    if (file !== null && file !== this.#name && !file.startsWith('..')) return;
    this.emit('change', file);
    this.#pending = true;
    this.#settle?.abort();
    this.#kick?.();
  }

  async #run(): Promise<void> {
    while (!this.#stopping) {
      if (this.#failures > 0) {
        await this.#clock.sleep(retryDelayMs(this.#failures, this.#retry), this.#stop.signal);
      } else {
        if (!this.#pending) await new Promise<void>((wake) => (this.#kick = wake));
        this.#kick = null;
        if (this.#stopping) break;
        await this.#settled();
      }
      if (this.#stopping) break;
      this.#pending = false;
      await this.runOnce();
    }
  }

  /** Resolves once `debounceMs` pass with no event (or on stop). */
  async #settled(): Promise<void> {
    for (;;) {
      const settle = new AbortController();
      this.#settle = settle;
      this.emit('settling');
      // One signal per wait (stop() aborts it too): AbortSignal.any would tie each to #stop's.
      await this.#clock.sleep(this.#debounceMs, settle.signal);
      this.#settle = null;
      if (this.#stopping || !settle.signal.aborted) return;
    }
  }

  #log(outcome: WatchOutcome): void {
    const file = this.path;
    switch (outcome.kind) {
      case 'applied': {
        const { results } = outcome.report;
        for (const result of results) {
          if (result.action === 'unchanged') continue;
          const fields = {
            file,
            index: result.index,
            ownerDid: result.owner_did,
            key: result.key,
            alarmId: result.alarm_id,
            action: result.action,
          };
          const line = `schedules file: ${describeResult(result)}`;
          if (result.action === 'left_alone') this.#logger.warn(fields, line);
          else this.#logger.info(fields, line);
        }
        const changed = results.some((r) => r.action !== 'unchanged');
        // A reconcile that changed nothing is said at start and after a refusal, not at every save.
        const level = changed || this.#last !== 'applied' ? 'info' : 'debug';
        this.#logger[level](
          { file, entries: results.length, headsUps: outcome.report.heads_ups },
          `schedules file ${file} reconciled: ${summarise(results)}`,
        );
        return;
      }
      case 'refused': {
        const { errors } = outcome.report;
        this.#logger.error(
          { file, errors: errors.map((e) => e.message) },
          `schedules file ${file} refused, nothing applied (the last good state stays): ${errors.map((e) => e.message).join('; ')}`,
        );
        return;
      }
      case 'missing':
        if (this.#last === 'missing') return;
        this.#logger.warn(
          { file },
          `schedules file ${file} does not exist: nothing to apply; the alarms it made keep running; watching for it`,
        );
        return;
      case 'failed': {
        const error = outcome.error;
        this.#logger.error(
          { file, err: error },
          `schedules file ${file} not reconciled: ${(error as Error).message ?? String(error)}; trying again`,
        );
        return;
      }
    }
  }
}
