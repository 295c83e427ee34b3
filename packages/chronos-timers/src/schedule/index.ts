/** Pure time maths: durations, time zones, cron schedules and the schedule columns of an alarm. */
export { formatDuration, MAX_IN_SECONDS, parseDuration } from './duration.js';
export { assertTimeZone, formatLocal, isTimeZone, zoneOffsetMs } from './time-zone.js';
export { minIntervalMs, parseCron, type CronSchedule } from './cron.js';
export {
  fireTimes,
  nextFires,
  resolveSchedule,
  type ResolveOptions,
  type ResolvedSchedule,
  type ScheduleInput,
} from './resolve.js';
