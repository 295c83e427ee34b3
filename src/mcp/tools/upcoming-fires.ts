/**
 * `next_fires`: the next due instants of an active alarm (up to three; one for a one-shot), in
 * UTC and in the alarm's zone, so that a model sees a time-zone mistake in the answer itself.
 */
import { nextFires } from '../../schedule/resolve.js';
import type { Alarm } from '../../types.js';

export function upcomingFires(alarm: Alarm): { utc: string; local: string }[] {
  return alarm.status === 'active' ? nextFires(alarm, 3) : [];
}
