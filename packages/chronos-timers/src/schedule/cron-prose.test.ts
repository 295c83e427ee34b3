import { describe, expect, it } from 'vitest';
import { ChronosError } from '../errors.js';
import { parseCron } from './cron.js';
import { looksLikeProse, suggestCron } from './cron-prose.js';

describe('suggestCron: a schedule written in English', () => {
  it.each([
    ['every monday 9am', '0 9 * * 1'],
    ['every Monday at 9am', '0 9 * * 1'],
    ['mondays at 9:30', '30 9 * * 1'],
    ['every monday and friday at 5pm', '0 17 * * 1,5'],
    ['every tue, thu at 12am', '0 0 * * 2,4'],
    ['daily at 9', '0 9 * * *'],
    ['every day at 17:45', '45 17 * * *'],
    ['at 9', '0 9 * * *'],
    ['9am', '0 9 * * *'],
    ['weekdays at 8:15 am', '15 8 * * 1-5'],
    ['every weekday 6pm', '0 18 * * 1-5'],
    ['weekends at noon', '0 12 * * 0,6'],
    ['daily at midnight', '0 0 * * *'],
    ['daily', '0 0 * * *'],
    ['weekly', '0 0 * * 0'],
    ['monthly', '0 0 1 * *'],
    ['hourly', '0 * * * *'],
    ['every hour', '0 * * * *'],
    ['every 2 hours', '0 */2 * * *'],
    ['every minute', '* * * * *'],
    ['every 5 minutes', '*/5 * * * *'],
    ['every 15 mins', '*/15 * * * *'],
  ])('reads %j as %j', (text, expected) => {
    expect(suggestCron(text)).toBe(expected);
  });

  it.each([
    'every blue moon',
    'every 90 minutes',
    'every monday 13pm',
    'every monday 9:75',
    'sometime next week',
    'every 30 hours',
    'monday 9',
  ])('is unsure of %j', (text) => {
    expect(suggestCron(text)).toBeUndefined();
  });

  it('tells prose from cron words', () => {
    expect(looksLikeProse('every monday 9am')).toBe(true);
    expect(looksLikeProse('0 9 * * MON-FRI')).toBe(false);
    expect(looksLikeProse('0 9 L JAN,DEC *')).toBe(false);
  });
});

describe('parseCron: refusing prose', () => {
  function message(expr: string): string {
    try {
      parseCron(expr, 'UTC');
    } catch (error) {
      expect(error).toBeInstanceOf(ChronosError);
      expect((error as ChronosError).errors[0]?.path).toBe('cron');
      return (error as ChronosError).message;
    }
    throw new Error(`${expr} was accepted`);
  }

  it('suggests the expression it recognises, instead of counting fields', () => {
    const text = message('every monday 9am');
    expect(text).toContain(
      'got "every monday 9am"; it reads as English; as cron that is probably "0 9 * * 1"',
    );
    expect(text).not.toContain('fields: minute hour');
    expect(message('every day at 9 am')).toContain('probably "0 9 * * *"');
  });

  it('says how cron is written, with two examples, when unsure', () => {
    expect(message('every blue moon')).toContain(
      'it reads as English; cron is five fields, minute hour day-of-month month day-of-week: ' +
        '"0 9 * * 1" is 09:00 every Monday, "*/5 * * * *" every five minutes',
    );
  });

  it('leaves expressions with cron names alone', () => {
    expect(parseCron('0 9 * * MON-FRI', 'UTC').expr).toBe('0 9 * * MON-FRI');
    expect(message('0 9 * *')).toContain('it has 4 fields');
  });
});
