/** What an alarm tool's `id` must be, for refusals. */
export const ALARM_ID_EXPECTED =
  'the id of one of your alarms (a UUID from schedule_alarm or list_alarms), like "2f1e8c7a-5b3d-4e8f-9a1b-6c2d3e4f5a6b"';
