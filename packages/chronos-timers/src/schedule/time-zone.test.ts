import { describe, expect, it } from 'vitest';
import { ChronosError } from '../errors.js';
import { assertTimeZone, formatLocal, isTimeZone, zoneOffsetMs } from './time-zone.js';

function errorOf(fn: () => unknown): ChronosError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ChronosError);
    return error as ChronosError;
  }
  throw new Error('expected a ChronosError, but nothing was thrown');
}

describe('isTimeZone', () => {
  it.each([
    'UTC',
    'Europe/Paris',
    'America/New_York',
    'Australia/Sydney',
    'America/Argentina/Buenos_Aires',
    'America/Port-au-Prince',
    'Etc/UTC',
    'Etc/GMT-5',
    'US/Eastern',
    'Asia/Kolkata',
    'Asia/Calcutta',
  ])('accepts %s', (tz) => {
    expect(isTimeZone(tz)).toBe(true);
  });

  it('accepts every zone the runtime lists, spelt as listed', () => {
    for (const tz of Intl.supportedValuesOf('timeZone')) expect(isTimeZone(tz), tz).toBe(true);
  });

  it('refuses abbreviations and names without a slash even where Intl accepts them', () => {
    for (const tz of ['EST', 'PST', 'CET', 'GMT', 'Japan', 'EST5EDT']) {
      expect(() => new Intl.DateTimeFormat('en-US', { timeZone: tz })).not.toThrow();
      expect(isTimeZone(tz)).toBe(false);
    }
    expect(isTimeZone('CEST')).toBe(false);
  });

  it('refuses names in the wrong case', () => {
    for (const tz of [
      'utc',
      'europe/paris',
      'Europe/PARIS',
      'us/eastern',
      'etc/utc',
      'Asia/KOLKATA',
      'US/EASTERN',
      'Etc/Utc',
    ]) {
      expect(isTimeZone(tz)).toBe(false);
    }
  });

  it('refuses unknown names, offsets and empty text', () => {
    for (const tz of ['Mars/Olympus_Mons', 'Europe/', '/', '', ' Europe/Paris', '+01:00', 'UTC+1']) {
      expect(isTimeZone(tz)).toBe(false);
    }
  });
});

describe('assertTimeZone', () => {
  it('returns a valid zone unchanged', () => {
    expect(assertTimeZone('Europe/Paris')).toBe('Europe/Paris');
    expect(assertTimeZone('UTC')).toBe('UTC');
  });

  it('refuses with the path, what was expected and what came', () => {
    const error = errorOf(() => assertTimeZone('Mars/Olympus_Mons'));
    expect(error.code).toBe('invalid_input');
    expect(error.message).toBe(
      'timezone: expected an IANA time zone like "Europe/Paris" or "UTC", got "Mars/Olympus_Mons"',
    );
    expect(error.errors[0]?.path).toBe('timezone');
  });

  it('uses the path it is given', () => {
    const error = errorOf(() => assertTimeZone('CEST', 'schedule.timezone'));
    expect(error.message).toMatch(/^schedule\.timezone: expected /);
    expect(error.errors[0]?.path).toBe('schedule.timezone');
  });

  it.each([
    ['CEST', '"Europe/Paris" or "Europe/Berlin"'],
    ['CET', '"Europe/Paris" or "Europe/Berlin"'],
    ['EST', '"America/New_York"'],
    ['EDT', '"America/New_York"'],
    ['PST', '"America/Los_Angeles"'],
    ['PDT', '"America/Los_Angeles"'],
    ['BST', '"Europe/London"'],
    ['IST', '"Asia/Kolkata" or "Europe/Dublin"'],
    ['JST', '"Asia/Tokyo"'],
    ['AEST', '"Australia/Sydney" or "Australia/Brisbane"'],
    ['cest', '"Europe/Paris" or "Europe/Berlin"'],
    ['GMT', '"UTC" or "Europe/London"'],
    ['utc', '"UTC"'],
    ['Z', '"UTC"'],
  ])('suggests a zone for the abbreviation %s', (tz, suggestion) => {
    const message = errorOf(() => assertTimeZone(tz)).message;
    expect(message).toContain(`got ${JSON.stringify(tz)}`);
    expect(message).toContain(`did you mean ${suggestion}?`);
  });

  it.each([
    ['europe/paris', 'Europe/Paris'],
    ['EUROPE/PARIS', 'Europe/Paris'],
    ['america/new_york', 'America/New_York'],
    ['asia/kolkata', 'Asia/Kolkata'],
    ['Europe/KYIV', 'Europe/Kyiv'],
    ['etc/utc', 'Etc/UTC'],
    ['us/eastern', 'US/Eastern'],
    ['asia/ho_chi_minh', 'Asia/Ho_Chi_Minh'],
  ])('suggests the right case for %s', (tz, fixed) => {
    expect(errorOf(() => assertTimeZone(tz)).message).toContain(`did you mean "${fixed}"?`);
  });

  it.each([
    ['Paris', '"Europe/Paris"'],
    ['New York', '"America/New_York"'],
    ['new_york', '"America/New_York"'],
    ['sao paulo', '"America/Sao_Paulo"'],
    ['Tokyo', '"Asia/Tokyo"'],
  ])('suggests the zone of the city %s', (tz, suggestion) => {
    expect(errorOf(() => assertTimeZone(tz)).message).toContain(`did you mean ${suggestion}`);
  });

  it('suggests the zone Intl maps an old name without a slash to', () => {
    expect(errorOf(() => assertTimeZone('Japan')).message).toContain('did you mean "Asia/Tokyo"?');
  });

  it('explains that a fixed offset is not a time zone', () => {
    expect(errorOf(() => assertTimeZone('+01:00')).message).toContain('a fixed offset is not a time zone');
    expect(errorOf(() => assertTimeZone('UTC+2')).message).toContain('a fixed offset is not a time zone');
  });

  it('refuses values that are not strings, naming what came', () => {
    expect(errorOf(() => assertTimeZone(42)).message).toContain('got 42');
    expect(errorOf(() => assertTimeZone(null)).message).toContain('got null');
    expect(errorOf(() => assertTimeZone(undefined)).message).toContain('got nothing');
  });
});

describe('formatLocal', () => {
  it.each([
    ['2027-03-14T07:00:00.000Z', 'Europe/Paris', '2027-03-14T08:00:00.000+01:00'],
    ['2027-07-14T07:00:00.000Z', 'Europe/Paris', '2027-07-14T09:00:00.000+02:00'],
    ['2027-03-14T07:00:00.123Z', 'UTC', '2027-03-14T07:00:00.123+00:00'],
    ['2027-01-15T12:00:00.000Z', 'America/New_York', '2027-01-15T07:00:00.000-05:00'],
    ['2027-07-15T12:00:00.000Z', 'America/New_York', '2027-07-15T08:00:00.000-04:00'],
    ['2027-01-15T12:00:00.000Z', 'Asia/Kolkata', '2027-01-15T17:30:00.000+05:30'],
    ['2027-01-15T12:00:00.000Z', 'Asia/Kathmandu', '2027-01-15T17:45:00.000+05:45'],
    ['2027-01-15T12:00:00.000Z', 'America/St_Johns', '2027-01-15T08:30:00.000-03:30'],
    ['2027-12-31T23:30:00.000Z', 'Asia/Tokyo', '2028-01-01T08:30:00.000+09:00'],
    ['2027-01-15T00:00:00.000Z', 'Australia/Sydney', '2027-01-15T11:00:00.000+11:00'],
  ])('shows %s in %s as %s', (utc, tz, local) => {
    expect(formatLocal(new Date(utc), tz)).toBe(local);
  });

  it('tells the two passes of a repeated hour apart by their offsets', () => {
    expect(formatLocal(new Date('2027-10-31T00:30:00Z'), 'Europe/Paris')).toBe(
      '2027-10-31T02:30:00.000+02:00',
    );
    expect(formatLocal(new Date('2027-10-31T01:30:00Z'), 'Europe/Paris')).toBe(
      '2027-10-31T02:30:00.000+01:00',
    );
  });

  it('always names the same instant it was given', () => {
    for (const tz of ['Europe/Paris', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kathmandu', 'UTC']) {
      for (let ms = Date.UTC(2027, 0, 1); ms < Date.UTC(2028, 0, 1); ms += 7 * 3_600_000 + 1_234) {
        expect(new Date(formatLocal(new Date(ms), tz)).getTime()).toBe(ms);
      }
    }
  });
});

describe('zoneOffsetMs', () => {
  it('gives the offset east of Greenwich in force at an instant', () => {
    expect(zoneOffsetMs(Date.UTC(2027, 0, 1), 'Europe/Paris')).toBe(3_600_000);
    expect(zoneOffsetMs(Date.UTC(2027, 6, 1), 'Europe/Paris')).toBe(7_200_000);
    expect(zoneOffsetMs(Date.UTC(2027, 0, 1), 'America/New_York')).toBe(-5 * 3_600_000);
    expect(zoneOffsetMs(Date.UTC(2027, 0, 1), 'UTC')).toBe(0);
  });

  it('changes at the transition instant itself', () => {
    const springForward = Date.UTC(2027, 2, 28, 1);
    expect(zoneOffsetMs(springForward - 1, 'Europe/Paris')).toBe(3_600_000);
    expect(zoneOffsetMs(springForward, 'Europe/Paris')).toBe(7_200_000);
  });
});
