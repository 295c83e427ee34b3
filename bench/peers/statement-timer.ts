/**
 * Times, at the driver, every statement whose text matches a pattern: the claim-depth workload
 * uses it to time each system's own claim statement as its worker sends it, round trip included,
 * without reaching into the system. All three systems use this project's `pg` (one copy,
 * `npm ls pg`), so wrapping `pg.Client.prototype.query` sees them all; only the process that
 * calls `timeStatements` is affected.
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';

export interface TimedStatement {
  startedAt: number;
  ms: number;
  rows: number;
}

type Callback = (error: Error | null, result?: unknown) => void;

function rowsOf(result: unknown): number {
  const r = (Array.isArray(result) ? result.at(-1) : result) as { rowCount?: number | null } | undefined;
  return r?.rowCount ?? 0;
}

/** Records statements matching `pattern` into `sink` until the returned function is called. */
export function timeStatements(pattern: RegExp, sink: TimedStatement[]): () => void {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const config = args[0] as { text?: unknown; submit?: unknown } | string | undefined;
    const text = typeof config === 'string' ? config : config?.text;
    const submittable = typeof config === 'object' && config !== null && typeof config.submit === 'function';
    if (typeof text !== 'string' || submittable || !pattern.test(text)) return original.apply(this, args);
    const startedAt = performance.now();
    const record = (result: unknown) =>
      sink.push({ startedAt, ms: performance.now() - startedAt, rows: rowsOf(result) });
    const last = args.length - 1;
    if (typeof args[last] === 'function') {
      const callback = args[last] as Callback;
      args[last] = (error: Error | null, result?: unknown) => {
        if (!error) record(result);
        callback(error, result);
      };
      return original.apply(this, args);
    }
    const promise = original.apply(this, args) as Promise<unknown>;
    return promise.then((result) => {
      record(result);
      return result;
    });
  };
  return () => {
    proto.query = original;
  };
}
