/** Every Chronos MCP tool, in the order `tools/list` shows them. */
import type { ChronosTool } from '../tool.js';
import { ackWake } from './ack-wake.js';
import { cancelAlarm } from './cancel-alarm.js';
import { getAlarm } from './get-alarm.js';
import { listAlarms } from './list-alarms.js';
import { listWakes } from './list-wakes.js';
import { pauseAlarm } from './pause-alarm.js';
import { previewSchedule } from './preview-schedule.js';
import { rescheduleAlarm } from './reschedule-alarm.js';
import { resumeAlarm } from './resume-alarm.js';
import { scheduleAlarm } from './schedule-alarm.js';

export const TOOLS: readonly ChronosTool[] = [
  scheduleAlarm,
  listAlarms,
  getAlarm,
  rescheduleAlarm,
  cancelAlarm,
  pauseAlarm,
  resumeAlarm,
  listWakes,
  ackWake,
  previewSchedule,
];
