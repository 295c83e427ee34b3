/**
 * The longest error text kept on a row (`last_error` of alarms and wakes, a wake attempt's
 * `error`, `tracker_error`, a schedule change's `last_error`), in characters. Whatever a router,
 * handler or network answers, no more than this is stored or shown.
 */
export const LAST_ERROR_MAX_CHARS = 1_000;

/**
 * `text` as stored: at most LAST_ERROR_MAX_CHARS characters, a longer one cut to leave room for
 * a closing "…" (never between the two halves of a surrogate pair).
 */
export function capLastError(text: string): string {
  if (text.length <= LAST_ERROR_MAX_CHARS) return text;
  let end = LAST_ERROR_MAX_CHARS - 1;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}…`;
}
