/**
 * What the one-shot commands (`chronos keys`, `migrate`, `alarms`, `wakes`, `schedules`) do to a store, whether this
 * process opened it (`localStoreOps`, over the service) or a running server holds it and they go
 * through its control socket (`remoteStoreOps` in control-socket.ts): one interface, so a
 * command never knows which.
 *
 * Alarms are handed over as the wire's JSON text (the HTTP API's answers), so a payload keeps
 * every digit on its way to the terminal (I4).
 */
import type { ApiKey } from 'chronos-timers/internal';
import { parseOwner } from 'chronos-timers/internal';
import { stringifyJson } from 'chronos-timers/internal';
import type { ChronosService } from '../service.js';
import { isoOrNull, isoTime } from 'chronos-timers/internal';
import { readAlarmListQuery } from 'chronos-timers/internal';
import { readWakeListQuery } from 'chronos-timers/internal';
import { alarmView, attemptView, ownersView, wakeView } from 'chronos-timers/internal';
import {
  applySchedulesFile,
  exportSchedulesFile,
  type FileReport,
  type SchedulesExport,
} from '../schedules-file/apply.js';

/** An API key as the CLI shows it (and as it crosses the socket). */
export interface KeyView {
  id: string;
  owner_did: string;
  label: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export function keyView(key: ApiKey): KeyView {
  return {
    id: key.id,
    owner_did: key.ownerDid,
    label: key.label,
    created_at: isoTime(key.createdAt),
    last_used_at: isoOrNull(key.lastUsedAt),
    revoked_at: isoOrNull(key.revokedAt),
  };
}

/** The operator's controls of one alarm (contract §5): pause, resume, cancel, fire now, retry. */
export const ALARM_ACTIONS = ['pause', 'resume', 'cancel', 'fire', 'retry'] as const;
export type AlarmAction = (typeof ALARM_ACTIONS)[number];

/** A wake list's filters as the CLI reads them (the HTTP API's query parameters). */
export interface WakeQuery {
  status?: string;
  alarm_id?: string;
  limit?: string;
  cursor?: string;
}

export interface StoreOps {
  keys: {
    create(owner: string, label: string): Promise<{ key: string; record: KeyView }>;
    list(owner?: string): Promise<KeyView[]>;
    revoke(id: string): Promise<{ key: KeyView; changed: boolean }>;
  };
  /** An owner's alarms (an operator's view), each answer the HTTP API's JSON text. */
  alarms: {
    /**
     * `{"alarms": [...], "next_cursor": ...}`; every owner's when `owner` is undefined, with
     * `"owners"` (alarm id → owner DID) as the HTTP API answers the operator.
     */
    list(
      owner: string | undefined,
      query: { status?: string; limit?: string; cursor?: string },
    ): Promise<string>;
    /** `{"alarm": {...}}` */
    get(owner: string, id: string): Promise<string>;
    /** `{"alarm": {...}}` after the action. */
    act(owner: string, id: string, action: AlarmAction): Promise<string>;
  };
  /** Wakes and their delivery attempts (contract §5, GET /v1/wakes…), as the HTTP API's JSON text. */
  wakes: {
    /** `{"wakes": [...], "next_cursor": ...}`; every owner's (with `"owners"`) when `owner` is undefined. */
    list(owner: string | undefined, query: WakeQuery): Promise<string>;
    /** `{"wake": {...}}` */
    get(owner: string, id: string): Promise<string>;
    /** `{"attempts": [...]}`, oldest first. */
    attempts(owner: string, id: string): Promise<string>;
  };
  /** The schedules file (contract §13), given as its text. */
  schedules: {
    /** Reconciles once; a refused file is a report with `errors` (nothing written), not a throw. */
    apply(text: string, options: { dryRun: boolean }): Promise<FileReport>;
    /** The live alarms of one owner (or all) in the file's form, and those left out (no key, or a library's). */
    export(owner?: string): Promise<SchedulesExport>;
  };
  migrate(): Promise<string[]>;
}

/** The StoreOps over a service this process opened. */
export function localStoreOps(
  service: Pick<ChronosService, 'keys' | 'alarms' | 'wakes' | 'schedulesFile' | 'migrate'>,
): StoreOps {
  const { keys, alarms, wakes, schedulesFile } = service;
  const scope = (owner: string | undefined) => (owner === undefined ? null : parseOwner(owner, 'owner'));
  return {
    keys: {
      async create(owner, label) {
        const { key, record } = await keys.create(owner, label);
        return { key, record: keyView(record) };
      },
      list: async (owner) => (await keys.list(owner)).map(keyView),
      async revoke(id) {
        const { key, changed } = await keys.revoke(id);
        return { key: keyView(key), changed };
      },
    },
    alarms: {
      async list(owner, query) {
        const page = await alarms.list(scope(owner), readAlarmListQuery(query));
        return stringifyJson({
          alarms: page.items.map(alarmView),
          next_cursor: page.nextCursor,
          ...(owner === undefined && { owners: ownersView(page.items) }),
        });
      },
      get: async (owner, id) =>
        stringifyJson({ alarm: alarmView(await alarms.get(parseOwner(owner, 'owner'), id)) }),
      async act(owner, id, action) {
        const who = parseOwner(owner, 'owner');
        const alarm =
          action === 'cancel'
            ? await alarms.cancel(who, { id })
            : action === 'fire'
              ? await alarms.fireNow(who, id)
              : await alarms[action](who, id);
        return stringifyJson({ alarm: alarmView(alarm) });
      },
    },
    wakes: {
      async list(owner, query) {
        const page = await wakes.list(scope(owner), readWakeListQuery(query));
        return stringifyJson({
          wakes: page.items.map(wakeView),
          next_cursor: page.nextCursor,
          ...(owner === undefined && { owners: ownersView(page.items) }),
        });
      },
      get: async (owner, id) =>
        stringifyJson({ wake: wakeView(await wakes.get(parseOwner(owner, 'owner'), id)) }),
      attempts: async (owner, id) =>
        stringifyJson({ attempts: (await wakes.attempts(parseOwner(owner, 'owner'), id)).map(attemptView) }),
    },
    schedules: {
      apply: (text, options) => applySchedulesFile(schedulesFile, text, options),
      export: (owner) =>
        exportSchedulesFile(schedulesFile, owner === undefined ? undefined : parseOwner(owner, 'owner').did),
    },
    migrate: () => service.migrate(),
  };
}
