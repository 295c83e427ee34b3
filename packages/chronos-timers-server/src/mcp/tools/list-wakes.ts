/** `list_wakes`: `GET /v1/wakes` — the caller's wakes, newest first, to find one to acknowledge. */
import { readWakeListQuery } from 'chronos-timers/internal';
import { wakeView } from 'chronos-timers/internal';
import { listWakesInput, listWakesOutput } from '../schemas.js';
import { onlyFields, type ChronosTool } from '../tool.js';

export const listWakes: ChronosTool = {
  name: 'list_wakes',
  title: 'List your wakes',
  description: `List the wakes you received (one per fire of an alarm), newest first: to find a wake you still have to acknowledge after a new session started, or to see when an alarm fired and how late. Read-only.

Each wake has its wake_id (the id to give ack_wake), the alarm's label and wake_message, when it fired and was delivered, lateness_ms, and whether it was nudged, escalated or acknowledged. Filter with status "delivered" to see what waits for your acknowledgement, and with alarm_id for one alarm's history. Pages hold up to limit wakes; when next_cursor is not null, call again with cursor set to it.

Example: {"status": "delivered"}`,
  input: listWakesInput,
  output: listWakesOutput,
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, { service, owner }) {
    onlyFields(args, ['status', 'alarm_id', 'limit', 'cursor']);
    const page = await service.wakes.list(owner, readWakeListQuery(args));
    return { wakes: page.items.map(wakeView), next_cursor: page.nextCursor };
  },
};
