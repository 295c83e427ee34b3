/**
 * IANA time zones: validation with "did you mean", UTC offsets, and local RFC 3339 rendering.
 *
 * What counts as a time zone: `"UTC"`, or a name with a `/` that the runtime's Intl data knows,
 * spelt with its exact case (`"Europe/Paris"`, `"America/Argentina/Buenos_Aires"`, `"Etc/UTC"`,
 * `"Etc/GMT-5"`, and links such as `"US/Eastern"`). Names without a `/` are refused even where
 * Intl takes them: abbreviations are ambiguous (`"CST"` is Chicago, Shanghai or Havana, `"IST"`
 * is Kolkata, Dublin or Jerusalem) and Intl maps some to surprising places (`"EST"` is Panama,
 * without DST). Case mistakes are refused too, with the right spelling as a hint, so that the
 * stored name is the one every later reader (Intl, PostgreSQL, people) spells the same way.
 *
 * Links (`"US/Eastern"`, `"Etc/UTC"`) are not in `Intl.supportedValuesOf('timeZone')`, and Intl
 * reports them by their target, so their case is checked by a rule every IANA name follows: each
 * `/`-separated part begins with a capital letter.
 *
 * Offsets come from the runtime's time zone data; nothing here reads the clock.
 */
import { invalidInput } from '../errors.js';

const EXPECTED = 'an IANA time zone like "Europe/Paris" or "UTC"';

/** Common abbreviations and the zones people usually mean by them. */
const ABBREVIATIONS: Record<string, readonly string[]> = {
  UTC: ['UTC'],
  UT: ['UTC'],
  UCT: ['UTC'],
  Z: ['UTC'],
  ZULU: ['UTC'],
  UNIVERSAL: ['UTC'],
  GMT: ['UTC', 'Europe/London'],
  GREENWICH: ['UTC'],
  BST: ['Europe/London'],
  IST: ['Asia/Kolkata', 'Europe/Dublin'],
  WET: ['Europe/Lisbon'],
  WEST: ['Europe/Lisbon'],
  CET: ['Europe/Paris', 'Europe/Berlin'],
  CEST: ['Europe/Paris', 'Europe/Berlin'],
  MET: ['Europe/Paris', 'Europe/Berlin'],
  MEST: ['Europe/Paris', 'Europe/Berlin'],
  EET: ['Europe/Athens', 'Europe/Helsinki'],
  EEST: ['Europe/Athens', 'Europe/Helsinki'],
  MSK: ['Europe/Moscow'],
  EST: ['America/New_York'],
  EDT: ['America/New_York'],
  CST: ['America/Chicago', 'Asia/Shanghai'],
  CDT: ['America/Chicago'],
  MST: ['America/Denver', 'America/Phoenix'],
  MDT: ['America/Denver'],
  PST: ['America/Los_Angeles'],
  PDT: ['America/Los_Angeles'],
  AKST: ['America/Anchorage'],
  AKDT: ['America/Anchorage'],
  HST: ['Pacific/Honolulu'],
  AST: ['America/Halifax'],
  ADT: ['America/Halifax'],
  NST: ['America/St_Johns'],
  NDT: ['America/St_Johns'],
  BRT: ['America/Sao_Paulo'],
  ART: ['America/Argentina/Buenos_Aires'],
  JST: ['Asia/Tokyo'],
  KST: ['Asia/Seoul'],
  HKT: ['Asia/Hong_Kong'],
  SGT: ['Asia/Singapore'],
  PHT: ['Asia/Manila'],
  WIB: ['Asia/Jakarta'],
  PKT: ['Asia/Karachi'],
  GST: ['Asia/Dubai'],
  SAST: ['Africa/Johannesburg'],
  CAT: ['Africa/Maputo'],
  EAT: ['Africa/Nairobi'],
  WAT: ['Africa/Lagos'],
  AEST: ['Australia/Sydney', 'Australia/Brisbane'],
  AEDT: ['Australia/Sydney'],
  ACST: ['Australia/Adelaide', 'Australia/Darwin'],
  ACDT: ['Australia/Adelaide'],
  AWST: ['Australia/Perth'],
  NZST: ['Pacific/Auckland'],
  NZDT: ['Pacific/Auckland'],
};

/** True for `"UTC"` and correctly spelt IANA names with a `/` (see the module comment). */
export function isTimeZone(tz: string): boolean {
  if (typeof tz !== 'string') return false;
  if (tz === 'UTC') return true;
  if (!tz.includes('/') || !/^[A-Za-z0-9_+\-/]+$/.test(tz)) return false;
  const resolved = intlName(tz);
  if (resolved === undefined) return false;
  const lower = tz.toLowerCase();
  if (resolved.toLowerCase() === lower) return resolved === tz;
  const listed = namesByLowerCase().get(lower);
  if (listed !== undefined) return listed === tz;
  return tz.split('/').every(looksLikeIanaPart);
}

/** `tz` if it is a time zone (see `isTimeZone`), else an `invalid_input` error with a suggestion. */
export function assertTimeZone(tz: unknown, path = 'timezone'): string {
  if (typeof tz === 'string' && isTimeZone(tz)) return tz;
  throw invalidInput(path, EXPECTED, tz, typeof tz === 'string' ? suggestTimeZone(tz) : undefined);
}

/**
 * The offset of `timeZone` from UTC at `instantMs`, in milliseconds (positive east of Greenwich).
 * `timeZone` must be valid for Intl; a RangeError otherwise.
 */
export function zoneOffsetMs(instantMs: number, timeZone: string): number {
  if (timeZone === 'UTC') return 0;
  const wholeSecond = instantMs - mod(instantMs, 1000);
  const f = fields(wholeSecond, timeZone);
  return utcMs(f.year, f.month, f.day, f.hour, f.minute, f.second, 0) - wholeSecond;
}

/**
 * `instant` as RFC 3339 in `timeZone`, with milliseconds and the offset in force at that instant:
 * `2027-03-14T08:00:00.000+01:00`. The offset is rounded to whole minutes (RFC 3339 has no
 * seconds in offsets), and the local time is derived from it, so the text always names `instant`.
 */
export function formatLocal(instant: Date, timeZone: string): string {
  const ms = instant.getTime();
  if (Number.isNaN(ms)) throw new RangeError('formatLocal: invalid Date');
  const offsetMinutes = Math.round(zoneOffsetMs(ms, timeZone) / 60_000);
  const local = new Date(ms + offsetMinutes * 60_000);
  const year = local.getUTCFullYear();
  const yearText =
    year >= 0 && year <= 9999 ? pad(year, 4) : `${year < 0 ? '-' : '+'}${pad(Math.abs(year), 6)}`;
  const sign = offsetMinutes < 0 ? '-' : '+';
  const offset = Math.abs(offsetMinutes);
  return (
    `${yearText}-${pad(local.getUTCMonth() + 1, 2)}-${pad(local.getUTCDate(), 2)}` +
    `T${pad(local.getUTCHours(), 2)}:${pad(local.getUTCMinutes(), 2)}:${pad(local.getUTCSeconds(), 2)}` +
    `.${pad(local.getUTCMilliseconds(), 3)}${sign}${pad(Math.floor(offset / 60), 2)}:${pad(offset % 60, 2)}`
  );
}

function suggestTimeZone(tz: string): string | undefined {
  const trimmed = tz.trim();
  const known = ABBREVIATIONS[trimmed.toUpperCase()];
  if (known !== undefined) return didYouMean(known);
  if (/^(?:UTC|GMT|Z)?\s*[+-]\d{1,2}(?::?\d{2})?$/i.test(trimmed)) {
    return 'a fixed offset is not a time zone; use a region like "Europe/Paris", or "UTC"';
  }
  const lower = trimmed.toLowerCase();
  const listed = namesByLowerCase().get(lower);
  if (listed !== undefined) return didYouMean([listed]);
  // A city alone, as people say it: "Paris", "New York", "sao paulo".
  const cities = zonesByCity().get(cityKey(trimmed));
  if (cities !== undefined) return didYouMean(cities.slice(0, 3));
  const resolved = intlName(trimmed);
  if (resolved === undefined) return undefined;
  // Intl reports a link by its target ("Asia/Kolkata" as "Asia/Calcutta" on some ICU versions),
  // so for a case mistake in a link, offer the name as typed in IANA's usual case if that is valid.
  const recased = recase(trimmed);
  if (recased !== trimmed && isTimeZone(recased) && intlName(recased) === resolved)
    return didYouMean([recased]);
  if (resolved === 'UTC' || resolved.includes('/')) return didYouMean([resolved]);
  return undefined;
}

/**
 * The shape of one part of an IANA name: a capital first, and no run of three capitals except in
 * the few upper-case parts IANA has ("UTC", "GMT+5", "US"). It refuses "KOLKATA" and "kolkata".
 */
function looksLikeIanaPart(part: string): boolean {
  if (UPPER_CASE_PART.test(part)) return part === part.toUpperCase();
  return /^[A-Z]/.test(part) && !/[A-Z]{3}/.test(part);
}

const UPPER_CASE_PART = /^(?:UTC|UCT|UT|GMT|GMT0|GMT[+-]\d{1,2}|US)$/i;

/** `tz` in IANA's usual case: "asia/ho_chi_minh" → "Asia/Ho_Chi_Minh", "etc/utc" → "Etc/UTC". */
function recase(tz: string): string {
  return tz
    .split('/')
    .map((part) =>
      UPPER_CASE_PART.test(part)
        ? part.toUpperCase()
        : part
            .toLowerCase()
            .replace(/(^|[_-])([a-z])/g, (_m: string, before: string, c: string) => before + c.toUpperCase()),
    )
    .join('/');
}

function didYouMean(zones: readonly string[]): string {
  return `did you mean ${zones.map((z) => JSON.stringify(z)).join(' or ')}?`;
}

/** The name Intl resolves `tz` to, or undefined when Intl does not know it. */
function intlName(tz: string): string | undefined {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: tz }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}

/** "New York", "new-york", "New_York" → "new_york": how a zone's last part is looked up. */
function cityKey(text: string): string {
  return text
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .trim()
    .toLowerCase()
    .replace(/[\s-]+/g, '_');
}

let byCity: Map<string, string[]> | undefined;

/** The zones by the city of their last part ("Europe/Paris" under "paris"). */
function zonesByCity(): Map<string, string[]> {
  if (byCity) return byCity;
  byCity = new Map();
  for (const zone of Intl.supportedValuesOf('timeZone')) {
    const parts = zone.split('/');
    if (parts.length < 2) continue;
    const key = cityKey(parts.at(-1)!);
    byCity.set(key, [...(byCity.get(key) ?? []), zone]);
  }
  return byCity;
}

let byLowerCase: Map<string, string> | undefined;

function namesByLowerCase(): Map<string, string> {
  byLowerCase ??= new Map(Intl.supportedValuesOf('timeZone').map((name) => [name.toLowerCase(), name]));
  return byLowerCase;
}

interface WallFields {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function fields(instantMs: number, timeZone: string): WallFields {
  let formatter = formatters.get(timeZone);
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      era: 'short',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, formatter);
  }
  const out: WallFields = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  let beforeCommonEra = false;
  for (const part of formatter.formatToParts(instantMs)) {
    if (part.type === 'era') beforeCommonEra = part.value.startsWith('B');
    else if (part.type in out) out[part.type as keyof WallFields] = Number(part.value);
  }
  if (beforeCommonEra) out.year = 1 - out.year;
  // Some ICU versions write midnight as 24 even with h23.
  if (out.hour === 24) out.hour = 0;
  return out;
}

/** Date.UTC without its mapping of years 0–99 to 1900–1999. */
function utcMs(
  year: number,
  month: number,
  day: number,
  hour: number,
  minute: number,
  second: number,
  ms: number,
) {
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, ms);
  return date.getTime();
}

function mod(a: number, b: number): number {
  return ((a % b) + b) % b;
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

const DAY_MS = 86_400_000;

/**
 * The instant at which local wall-clock time `wallMs` (as if UTC) fires in `timeZone`: the only
 * instant that reads so; the first of two in a fall back; the end of the gap in a spring forward.
 * Never decreasing in `wallMs`, which `next` relies on.
 */
export function wallClockToInstant(wallMs: number, timeZone: string): number {
  if (timeZone === 'UTC') return wallMs;
  // One transition at most within a day either side, which holds for every zone in use.
  const offsets = new Set([
    zoneOffsetMs(wallMs - DAY_MS, timeZone),
    zoneOffsetMs(wallMs, timeZone),
    zoneOffsetMs(wallMs + DAY_MS, timeZone),
  ]);
  const readsAsWall = [...offsets]
    .map((offset) => wallMs - offset)
    .filter((instant) => instant + zoneOffsetMs(instant, timeZone) === wallMs);
  if (readsAsWall.length > 0) return Math.min(...readsAsWall);

  // A gap: find the transition, the first instant whose wall clock reads later than `wallMs`.
  let low = wallMs - Math.max(...offsets);
  let high = wallMs - Math.min(...offsets);
  const readsLater = (instant: number) => instant + zoneOffsetMs(instant, timeZone) > wallMs;
  if (readsLater(low) || !readsLater(high)) return high;
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (readsLater(middle)) high = middle;
    else low = middle;
  }
  return high;
}
