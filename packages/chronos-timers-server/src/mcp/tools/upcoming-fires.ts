/**
 * `next_fires`: the next due instants of an active alarm (up to three; one for a one-shot), in
 * UTC and in the alarm's zone, so that a model sees a time-zone mistake in the answer itself.
 */
import { alarmNextFires } from 'chronos-timers/internal';
import type { Alarm } from 'chronos-timers/internal';

export function upcomingFires(alarm: Alarm): { utc: string; local: string }[] {
  return alarmNextFires(alarm, 3);
}
