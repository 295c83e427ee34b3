/**
 * EXPERIMENT, not part of Chronos: `chronos serve` with `AlarmService.create` replaced by one
 * statement that checks both quotas and inserts, to measure what that design would give
 * (`npm run bench:http -- --serve-with=bench/http-experiment-server.ts`). It skips what the real
 * create does besides (idempotent dedupe, which quota was hit, NOTIFY): numbers only.
 */
import { createAlarmSchema, parseBody } from '../src/wire/alarm-input.js';
import { startServer } from '../src/cli/commands/serve.js';
import { loadConfig } from '../src/config.js';
import { ChronosError } from '../src/errors.js';
import { resolveSchedule } from '../src/schedule/resolve.js';
import { toAlarm, type AlarmRow } from '../src/store/alarms.js';
import { sql } from '../src/store/db.js';

const COLUMNS = `id::text AS id, owner_did, user_id, label, kind, fire_at, cron_expr, timezone, next_fire_at,
  scheduled_for, conversation_id, wake_message, payload::text AS payload, status, idempotency_key,
  max_failures, failure_count, last_error, claimed_at, require_ack, source, created_at, updated_at, last_fired_at`;

// Both quotas and the insert in one round trip; the counts stop at the limit.
const createOne = sql(
  'experiment_create_one',
  `WITH q AS (
     SELECT (SELECT count(*) FROM (SELECT 1 FROM alarms WHERE owner_did = $1 AND status = 'active' LIMIT $16) a) AS active,
            (SELECT count(*) FROM (SELECT 1 FROM alarms WHERE owner_did = $1
                                   AND created_at > now() - interval '1 minute' LIMIT $17) r) AS recent)
   INSERT INTO alarms (owner_did, user_id, label, kind, fire_at, cron_expr, timezone, next_fire_at,
     scheduled_for, conversation_id, wake_message, payload, idempotency_key, max_failures, require_ack, source)
   SELECT $1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11::jsonb, $12, $13, $14, $15 FROM q
   WHERE ($16 = 0 OR q.active < $16) AND ($17 = 0 OR q.recent < $17)
   ON CONFLICT (owner_did, idempotency_key) WHERE idempotency_key <> '' DO NOTHING
   RETURNING ${COLUMNS}`,
);

const config = loadConfig(process.env);
const server = await startServer(config);
const { service } = server;
service.alarms.create = async (owner, body, write) => {
  const input = parseBody(createAlarmSchema, body);
  const now = await service.dbClock.now();
  const s = resolveSchedule(input, now, {
    pastToleranceMs: 60_000,
    minCronIntervalMs: config.minCronIntervalMs,
  });
  const [row] = await service.db.query<AlarmRow>(createOne, [
    owner.did,
    owner.userId,
    input.label ?? '',
    s.kind,
    s.fireAt,
    s.cronExpr,
    s.timezone,
    s.nextFireAt,
    input.conversation_id ?? '',
    input.wake_message ?? '',
    write.rawPayload ?? JSON.stringify(input.payload ?? {}),
    input.idempotency_key ?? '',
    input.max_failures ?? 5,
    input.require_ack ?? true,
    write.source,
    config.maxActiveAlarms,
    config.createRatePerMinute,
  ]);
  if (!row)
    throw new ChronosError('quota', 'a quota was hit', { limit: 'create_rate', retryAfterSeconds: 60 });
  return { alarm: toAlarm(row), deduped: false };
};
process.once('SIGTERM', () => void server.shutdown().then(() => process.exit(0)));
