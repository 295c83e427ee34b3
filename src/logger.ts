/**
 * Structured JSON logs (pino). Keys and tokens are never logged: the redact paths below remove
 * them from anything that carries request headers.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
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
  });
}

export const silentLogger: Logger = pino({ level: 'silent' });
