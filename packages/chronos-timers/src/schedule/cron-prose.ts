/**
 * A schedule written in English where a cron expression was expected ("every monday 9am",
 * "weekdays at 17:30", "every 5 minutes"): the expression it most likely means, for a refusal's
 * hint. Pure and small on purpose: it recognises a few common shapes, and anything it is not sure
 * of gets `undefined` (the caller then says how cron is written). It never makes a schedule: the
 * caller still refuses the input, so a wrong guess costs a reading, not a wrong alarm.
 */

const WEEKDAYS: Record<string, number> = {
  sunday: 0,
  sun: 0,
  monday: 1,
  mon: 1,
  tuesday: 2,
  tue: 2,
  tues: 2,
  wednesday: 3,
  wed: 3,
  thursday: 4,
  thu: 4,
  thur: 4,
  thurs: 4,
  friday: 5,
  fri: 5,
  saturday: 6,
  sat: 6,
};

/** Words cron itself uses (names of days and months, croner's L and W): not prose. */
const CRON_WORDS = new Set([
  ...['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'],
  ...['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'],
  ...['l', 'w', 'lw'],
]);

/** True when `text` has a word cron does not use (`every`, `monday`, `9am`), so it reads as prose. */
export function looksLikeProse(text: string): boolean {
  const words = text.toLowerCase().match(/[a-z]+/g) ?? [];
  return words.some((word) => !CRON_WORDS.has(word));
}

/** The cron expression `text` most likely means, or `undefined` when unsure. */
export function suggestCron(text: string): string | undefined {
  let rest = ` ${text.toLowerCase().replace(/[,.]/g, ' ').replace(/\s+/g, ' ').trim()} `;

  // "every 5 minutes", "every minute", "every 2 hours", "every hour", "hourly": nothing else may follow.
  const interval = /^ (?:every|each) (?:(\d{1,2}) )?(minutes?|mins?|hours?|hrs?) $/.exec(rest);
  if (interval !== null) {
    const n = interval[1] === undefined ? 1 : Number(interval[1]);
    const minutes = interval[2]!.startsWith('m');
    if (n < 1 || n > (minutes ? 59 : 23)) return undefined;
    if (minutes) return n === 1 ? '* * * * *' : `*/${n} * * * *`;
    return n === 1 ? '0 * * * *' : `0 */${n} * * *`;
  }
  if (rest === ' hourly ') return '0 * * * *';

  // The time of day: "9am", "9 am", "9:30", "at 9", "17:30", "noon", "midnight".
  let hour: number | undefined;
  let minute = 0;
  const time = / (?:at )?(\d{1,2})(?::(\d{2}))? ?(am|pm|a\.m|p\.m)? /.exec(rest);
  if (time !== null) {
    const [whole, h, m, meridiem] = time;
    const explicit = m !== undefined || meridiem !== undefined || whole.includes(' at ');
    if (!explicit) return undefined;
    hour = Number(h);
    minute = m === undefined ? 0 : Number(m);
    if (minute > 59) return undefined;
    if (meridiem !== undefined) {
      if (hour < 1 || hour > 12) return undefined;
      hour = (hour % 12) + (meridiem.startsWith('p') ? 12 : 0);
    } else if (hour > 23) return undefined;
    rest = rest.replace(whole, ' ');
  } else if (/ (?:at )?noon /.test(rest)) {
    hour = 12;
    rest = rest.replace(/ (?:at )?noon /, ' ');
  } else if (/ (?:at )?midnight /.test(rest)) {
    hour = 0;
    rest = rest.replace(/ (?:at )?midnight /, ' ');
  }

  // What is left names the days: "every monday and friday", "weekdays", "daily", "every day".
  const words = rest
    .trim()
    .split(' ')
    .filter((word) => word !== '' && !['every', 'each', 'on', 'and', 'at', '&'].includes(word));
  let days: string;
  if (words.length === 0) {
    if (hour === undefined) return undefined;
    days = '*';
  } else if (words.length === 1 && ['daily', 'day', 'days', 'everyday'].includes(words[0]!)) {
    days = '*';
  } else if (words.length === 1 && ['weekday', 'weekdays'].includes(words[0]!)) {
    days = '1-5';
  } else if (words.length === 1 && ['weekend', 'weekends'].includes(words[0]!)) {
    days = '0,6';
  } else if (words.length === 1 && ['weekly', 'week'].includes(words[0]!) && hour === undefined) {
    return '0 0 * * 0';
  } else if (words.length === 1 && ['monthly', 'month'].includes(words[0]!) && hour === undefined) {
    return '0 0 1 * *';
  } else {
    const numbers = words.map((word) => WEEKDAYS[word.replace(/s$/, '')] ?? WEEKDAYS[word]);
    if (numbers.some((n) => n === undefined)) return undefined;
    days = [...new Set(numbers as number[])].sort((a, b) => a - b).join(',');
  }
  return `${minute} ${hour ?? 0} * * ${days}`;
}
