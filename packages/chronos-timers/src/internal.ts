/**
 * The one internal entry of the library, for chronos-timers-server only: the core services,
 * the store and the loops the server composes. Not a public API: it may change in any release.
 */
export { systemClock, type Clock } from './clock.js';
export { embeddedAheadDir, loadConfig, processEnv, type Config } from './config.js';
export {
  ChronosCore,
  LOOP_CONNECTIONS,
  reportStoredRepairs,
  type CoreOptions,
  type CoreParts,
  type DatabaseStatus,
  type Transaction,
} from './core-service.js';
export { NEXT_FIRES_COUNT, alarmNextFires, type AlarmService } from './core/alarm-service.js';
export { Authenticator, OWNER_HEADER, type Caller, type EveryOwnerCaller } from './core/authenticator.js';
export { type FireStatsService } from './core/fire-stats-service.js';
export { KEY_PATTERN, KEY_PREFIX, type ApiKey, type KeyService } from './core/key-service.js';
export { parseOwner, type Owner } from './core/owner.js';
export { PAGE_LIMIT } from './core/page.js';
export { type EntryAction, type SchedulesFileService } from './core/schedules-file-service.js';
export { keyStoreHint } from './core/store-name.js';
export { type WakeService } from './core/wake-service.js';
export { Loop } from './dispatch/loop.js';
export { retryDelayMs, type RetryPolicy } from './dispatch/retry-policy.js';
export {
  ChronosError,
  invalidFields,
  invalidInput,
  isChronosError,
  renameFieldErrors,
  type ErrorCode,
  type FieldError,
} from './errors.js';
export { RawJson, rawMember, stringifyJson } from './json.js';
export { createLogger, silentLogger, type Logger } from './logger.js';
export { LogReceiver } from './receivers/log.js';
export { type Delivery, type Fire, type Receiver } from './receivers/receiver.js';
export { alarmsCountByStatus } from './store/alarms.js';
export { type Db } from './store/driver/db.js';
export { deliveryRetryQueueDepth } from './store/delivery-stats.js';
export { startEmbeddedAhead } from './store/driver/embedded-ahead.js';
export { isHeldByOther, readLock, type LockInfo } from './store/driver/embedded.js';
export {
  scheduleChangesClaim,
  scheduleChangesOwed,
  scheduleChangesPrune,
  scheduleChangesRecord,
  type ScheduleChangeOutcome,
} from './store/schedule-changes.js';
export {
  wakesClaimEscalations,
  wakesClaimNudges,
  wakesClaimReceipts,
  wakesCountByStage,
  wakesNextStageDueMs,
  wakesRecordStage,
  wakesStageBacklog,
  type EscalationClaim,
  type NudgeClaim,
  type ReceiptClaim,
  type Stage,
  type StageClaim,
  type StageOutcome,
} from './store/wake-stages.js';
export {
  SpanKind,
  SpanStatusCode,
  contextOf,
  startSpan,
  traceExportWanted,
  traceparentOf,
  type Span,
} from './tracing.js';
export { PruneStage } from './tracker/prune.js';
export {
  ALARM_STATUSES,
  ROUTER_QUEUE,
  WAKE_STATUSES,
  type Alarm,
  type AlarmStatus,
  type Wake,
} from './types.js';
export { PACKAGE_NAME, VERSION } from './version.js';
export {
  LIMITS,
  alarmFields,
  batchAlarmSchema,
  clearableShape,
  bulkCancelSchema,
  createAlarmSchema,
  inWireNames,
  patchAlarmSchema,
  readAlarmBody,
  readBatchBody,
  readBulkCancelBody,
  PREVIEW_COUNT,
  previewScheduleSchema,
  readPreviewBody,
} from './wire/alarm-input.js';
export { readForm, readNoFields } from './wire/fields.js';
export { isoOrNull, isoTime } from './wire/iso-time.js';
export {
  FILTER_TEXT_CHARS,
  readAlarmListQuery,
  readNextFiresQuery,
  readWakeListQuery,
} from './wire/list-query.js';
export {
  FILE_NAMES,
  MAX_SCHEDULES_FILE_BYTES,
  filePath,
  readSchedulesFile,
  writeSchedulesFile,
  type FileField,
} from './wire/schedules-file.js';
export {
  alarmView,
  alarmViewSchema,
  attemptView,
  attemptViewSchema,
  latenessView,
  latenessViewSchema,
  nextFiresSchema,
  ownersView,
  ownersViewSchema,
  upcomingView,
  upcomingViewSchema,
  wakeView,
  wakeViewSchema,
} from './wire/views.js';
export { ackWakeSchema, readAckBody, readReplyBody, replySchema } from './wire/wake-input.js';
export {
  escalationBodySchema,
  receiptBodySchema,
  scheduleChangedBodySchema,
  wakeBodySchema,
} from './wire/webhooks.js';
