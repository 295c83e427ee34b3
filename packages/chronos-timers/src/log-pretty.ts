/**
 * A readable log line for a terminal (`CHRONOS_LOG_FORMAT=pretty`, or unset on a TTY): pino's
 * JSON lines rewritten as `HH:MM:SS.mmm LEVEL message key=value …`. Services keep JSON, the
 * default; this is for a person watching `npm start`.
 */
import { Writable } from 'node:stream';

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO ',
  40: 'WARN ',
  50: 'ERROR',
  60: 'FATAL',
};
/** Keys every line carries that a person does not need to read each time. */
const QUIET = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service']);

/** One pino JSON line as a person reads it; a line that is not JSON is passed on as it is. */
export function prettyLine(line: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return line;
  const time = typeof entry.time === 'number' ? new Date(entry.time).toISOString().slice(11, 23) : '';
  const level = LEVELS[entry.level as number] ?? String(entry.level ?? '').toUpperCase();
  const parts = [time, level, typeof entry.msg === 'string' ? entry.msg : ''].filter((p) => p !== '');
  for (const [key, value] of Object.entries(entry)) {
    if (QUIET.has(key) || value === undefined) continue;
    parts.push(`${key}=${formatValue(value)}`);
  }
  return parts.join(' ');
}

function formatValue(value: unknown): string {
  if (typeof value === 'string') return /^[^\s="]+$/.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value) ?? String(value);
}

/** A writable stream for pino that writes each JSON line it is given as a pretty line to `out`. */
export function prettyStream(out: NodeJS.WritableStream = process.stdout): Writable {
  let pending = '';
  return new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      pending += chunk.toString();
      let newline = pending.indexOf('\n');
      while (newline !== -1) {
        const line = pending.slice(0, newline);
        pending = pending.slice(newline + 1);
        if (line !== '') out.write(`${prettyLine(line)}\n`);
        newline = pending.indexOf('\n');
      }
      done();
    },
    final(done) {
      if (pending !== '') out.write(`${prettyLine(pending)}\n`);
      pending = '';
      done();
    },
  });
}
