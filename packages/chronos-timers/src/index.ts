/** The public library API: re-exports only. */
export { createChronos } from './library.js';
export type {
  Chronos,
  ChronosOptions,
  Fire,
  FireHandler,
  RescheduleSpec,
  Timer,
  TimerSpec,
  WorkOptions,
  Worker,
} from './library.js';
/** @deprecated Use `Fire`. */
export type { TimerFire } from './receivers/handler.js';
/** @deprecated Use `FireHandler`. */
export type { TimerHandler } from './receivers/handler.js';
export type { ClaimMode } from './dispatch/dispatcher.js';
export { ChronosError, isChronosError } from './errors.js';
export type { ErrorCode, FieldError } from './errors.js';
export type { Alarm, AlarmKind, AlarmStatus, Wake, WakeStatus } from './types.js';
export { TestClock, systemClock } from './clock.js';
export type { Clock } from './clock.js';
