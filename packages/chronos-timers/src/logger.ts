/**
 * Structured JSON logs (pino). Keys and tokens are never logged: the redact paths below remove
 * them from anything that carries request headers.
 */
import { pino, type Logger } from 'pino';
import { prettyStream } from './log-pretty.js';

export type { Logger };

/** `json` (one object a line, for services) or `pretty` (for a person at a terminal). */
export type LogFormat = 'json' | 'pretty';

export function createLogger(
  level: string = process.env.LOG_LEVEL ?? 'info',
  format: LogFormat = 'json',
  out: NodeJS.WritableStream = process.stdout,
): Logger {
  const options = {
    level,
    base: { service: 'chronos' },
    redact: {
      paths: [
        'req.headers.authorization',
        'headers.authorization',
        'authorization',
        'apiKey',
        'key',
        'token',
      ],
      censor: '[redacted]',
    },
  };
  if (format === 'pretty') return pino(options, prettyStream(out));
  return out === process.stdout ? pino(options) : pino(options, out);
}

export const silentLogger: Logger = pino({ level: 'silent' });
