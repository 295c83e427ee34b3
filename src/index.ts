/** The public library API: re-exports only. */
export { createChronos } from './library.js';
export type { Chronos, ChronosOptions, TimerSpec, RescheduleSpec, WorkOptions, Worker } from './library.js';
export type { TimerFire, TimerHandler } from './receivers/handler.js';
export type { ClaimMode } from './dispatch/dispatcher.js';
export { ChronosError, isChronosError } from './errors.js';
export type { ErrorCode, FieldError } from './errors.js';
export type { Alarm, AlarmKind, AlarmStatus, Wake, WakeStatus } from './types.js';
export { TestClock, systemClock } from './clock.js';
export type { Clock } from './clock.js';
