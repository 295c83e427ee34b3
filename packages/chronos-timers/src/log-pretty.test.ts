import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';
import { prettyLine } from './log-pretty.js';
import { createLogger } from './logger.js';

describe('pretty logs (CHRONOS_LOG_FORMAT=pretty)', () => {
  it('writes a pino line as time, level, message and the rest as key=value', () => {
    const line = JSON.stringify({
      level: 40,
      time: Date.UTC(2026, 11, 7, 9, 5, 3, 42),
      pid: 1,
      hostname: 'h',
      service: 'chronos',
      msg: 'delivery failed',
      alarmId: 'a-1',
      status: 500,
      error: 'router said no',
    });
    expect(prettyLine(line)).toBe(
      '09:05:03.042 WARN  delivery failed alarmId=a-1 status=500 error="router said no"',
    );
  });

  it('passes a line that is not JSON through unchanged', () => {
    expect(prettyLine('plain words')).toBe('plain words');
  });

  it('createLogger in the pretty format writes readable lines, secrets still redacted', async () => {
    const out = new PassThrough();
    const chunks: string[] = [];
    out.on('data', (chunk: Buffer) => chunks.push(chunk.toString()));
    const logger = createLogger('info', 'pretty', out);
    logger.info({ alarm: 'x', token: 'secret-value' }, 'serving');
    await new Promise((resolve) => setImmediate(resolve));
    const text = chunks.join('');
    expect(text).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}serving alarm=x token=\[redacted\]\n$/);
    expect(text).not.toContain('secret-value');
  });

  it('CHRONOS_LOG_FORMAT is json or pretty; anything else is refused by name', () => {
    expect(loadConfig({ CHRONOS_LOG_FORMAT: 'pretty' }).logFormat).toBe('pretty');
    expect(loadConfig({ CHRONOS_LOG_FORMAT: 'json' }).logFormat).toBe('json');
    expect(() => loadConfig({ CHRONOS_LOG_FORMAT: 'fancy' })).toThrow(
      'CHRONOS_LOG_FORMAT: expected "json" or "pretty", got "fancy"',
    );
  });
});
