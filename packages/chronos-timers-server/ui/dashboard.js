// @ts-check
/**
 * The Chronos dashboard (contract §15): one ES module, no framework, no build step. Everything it
 * shows and does goes through the `/v1` API with the key the viewer signed in with; the key is
 * kept in sessionStorage only (this tab, until it closes or the viewer signs out).
 *
 * Text from the API is only ever set as textContent, never parsed as HTML.
 */

const STORE = 'chronos.dashboard.key';
const VIEWER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone;

/** @type {{ key: string, operator: boolean } | null} */
let session = null;
/** @type {Record<string, string>} alarm or wake id → owner DID (operator view) */
const ownersById = {};

const $ = (/** @type {string} */ selector) => /** @type {HTMLElement} */ (document.querySelector(selector));

// ---- The API ---------------------------------------------------------------------------------

class ApiError extends Error {
  /** @param {number} status @param {string} message */
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/**
 * One call to the API; the answer's JSON, or an ApiError with the problem's own words.
 * @param {string} method @param {string} path
 * @param {{ body?: unknown, owner?: string, key?: string }} [options]
 */
async function api(method, path, options = {}) {
  const key = options.key ?? session?.key;
  /** @type {Record<string, string>} */
  const headers = { authorization: `Bearer ${key}` };
  if (options.owner && (options.key ? false : session?.operator)) headers['x-chronos-owner'] = options.owner;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
  } catch {
    throw new ApiError(0, 'The server could not be reached; is `chronos serve` running?');
  }
  const text = await response.text();
  let value;
  try {
    value = text ? JSON.parse(text) : null;
  } catch {
    value = null;
  }
  if (!response.ok) {
    const detail = value?.errors?.length
      ? value.errors.map((/** @type {{message: string}} */ e) => e.message).join('; ')
      : (value?.detail ?? `HTTP ${response.status}`);
    throw new ApiError(response.status, detail);
  }
  return value;
}

// ---- Formatting ------------------------------------------------------------------------------

/** @type {Map<string, Intl.DateTimeFormat>} */
const formats = new Map();
/** An instant in a zone (the viewer's by default), with the zone's short name. @param {string | undefined | null} iso @param {string} [zone] */
function when(iso, zone = VIEWER_ZONE) {
  if (!iso) return '—';
  let format = formats.get(zone);
  if (!format) {
    try {
      format = new Intl.DateTimeFormat(undefined, {
        timeZone: zone,
        year: 'numeric',
        month: 'short',
        day: 'numeric',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
        timeZoneName: 'short',
      });
    } catch {
      format = /** @type {Intl.DateTimeFormat} */ (formats.get(VIEWER_ZONE) ?? new Intl.DateTimeFormat());
    }
    formats.set(zone, format);
  }
  return format.format(new Date(iso));
}

/** @param {number} ms */
function duration(ms) {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

/**
 * An element with text and attributes.
 * @param {string} tag @param {Record<string, string> | null} [attrs] @param {(Node | string)[]} children
 */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

/** An alarm's schedule as the list and the detail show it: its kind, with its cron expression or rule. @param {any} alarm */
const scheduleText = (alarm) =>
  alarm.kind === 'cron'
    ? `cron ${alarm.cron_expr}`
    : alarm.kind === 'rrule'
      ? `rrule ${alarm.rrule}`
      : 'once';

/** @param {string} status */
const statusCell = (status) => el('td', { class: `s-${status}` }, status);

// ---- Messages --------------------------------------------------------------------------------

/** @param {string} text */
function say(text) {
  $('#status').textContent = text;
}

/** @param {unknown} error */
function fail(error) {
  if (error instanceof ApiError && error.status === 401) {
    signOut('Your key was refused: ' + error.message);
    return;
  }
  const box = $('#error');
  box.textContent = error instanceof Error ? error.message : String(error);
  box.hidden = false;
  say('');
}

function clearMessages() {
  $('#error').hidden = true;
  say('');
}

// ---- Sign in ---------------------------------------------------------------------------------

/** @param {string} key */
async function signIn(key) {
  const started = performance.now();
  try {
    await probe(key);
  } finally {
    performance.measure('chronos:sign-in', { start: started });
  }
}

/** @param {string} key */
async function probe(key) {
  // One small read tells a good key from a bad one, and the operator (whose list has `owners`).
  const probe = await api('GET', '/v1/alarms?limit=1', { key });
  session = { key, operator: Object.prototype.hasOwnProperty.call(probe, 'owners') };
  sessionStorage.setItem(STORE, key);
}

/** @param {string} [why] */
function signOut(why) {
  session = null;
  sessionStorage.removeItem(STORE);
  const error = $('#signin-error');
  error.textContent = why ?? '';
  error.hidden = !why;
  if (location.hash !== '#signin') location.hash = '#signin';
  else void route();
}

function showSession() {
  const signedIn = session !== null;
  $('#nav').hidden = !signedIn;
  $('#who').hidden = !signedIn;
  $('#who-text').textContent = session?.operator ? 'Operator: every owner' : 'Signed in with an API key';
  for (const node of document.querySelectorAll('.operator-only')) {
    /** @type {HTMLElement} */ (node).hidden = !session?.operator;
  }
}

// ---- Alarms ----------------------------------------------------------------------------------

/** @type {{ cursor: string | null, shown: number, asked: number }} */
const alarmList = { cursor: null, shown: 0, asked: 0 };

function alarmFilters() {
  const form = /** @type {HTMLFormElement} */ ($('#alarm-filters'));
  const data = new FormData(form);
  return {
    status: String(data.get('status') ?? ''),
    q: String(data.get('q') ?? '').trim(),
    owner: String(data.get('owner') ?? '').trim(),
    limit: String(data.get('limit') ?? '200'),
  };
}

/** @param {boolean} more */
async function loadAlarms(more) {
  const started = performance.now();
  const filters = alarmFilters();
  const params = new URLSearchParams({ limit: filters.limit });
  if (filters.status) params.set('status', filters.status);
  if (filters.q) params.set('q', filters.q);
  if (more && alarmList.cursor) params.set('cursor', alarmList.cursor);
  const owner = session?.operator && filters.owner ? filters.owner : undefined;
  const asked = ++alarmList.asked;
  const page = await api('GET', `/v1/alarms?${params}`, { owner });
  // A later request (new filters) was made meanwhile: its answer is the one to show.
  if (asked !== alarmList.asked) return;
  const body = /** @type {HTMLTableSectionElement} */ ($('#alarms-table tbody'));
  if (!more) {
    body.replaceChildren();
    alarmList.shown = 0;
  }
  const owners = page.owners ?? {};
  if (owner) for (const alarm of page.alarms) owners[alarm.id] = owner;
  Object.assign(ownersById, owners);
  const rows = document.createDocumentFragment();
  for (const alarm of page.alarms) rows.append(alarmRow(alarm, owners[alarm.id]));
  body.append(rows);
  alarmList.shown += page.alarms.length;
  alarmList.cursor = page.next_cursor;
  $('#alarms-more').hidden = page.next_cursor === null;
  $('#alarms-caption').textContent =
    `Alarms, newest first: ${alarmList.shown} shown` + (page.next_cursor ? ', more to show' : '');
  if (session?.operator) listOwners(Object.values(owners));
  say(`${alarmList.shown} alarms shown.`);
  // Request and rendering of this page, for bench/dashboard.ts (User Timing; costs nothing else).
  performance.measure('chronos:alarms-page', { start: started });
}

/** @param {any} alarm @param {string | undefined} owner */
function alarmRow(alarm, owner) {
  const link = el('a', { href: alarmHref(alarm.id, owner) }, alarm.label || '(no label)');
  const row = el(
    'tr',
    { 'data-id': alarm.id },
    statusCell(alarm.status),
    el('td', null, link),
    el('td', null, scheduleText(alarm)),
    el('td', null, alarm.next_fire_at ? when(alarm.next_fire_at, alarm.timezone) : '—'),
    el('td', null, when(alarm.next_fire_at)),
    el('td', null, when(alarm.last_fired_at)),
    el('td', { class: 'num' }, `${alarm.failure_count} / ${alarm.max_failures}`),
  );
  if (session?.operator) row.append(el('td', { class: 'owner' }, owner ?? ''));
  return row;
}

/** @param {string} id @param {string | undefined} owner */
function alarmHref(id, owner) {
  return `#alarm/${encodeURIComponent(id)}` + (owner ? `?owner=${encodeURIComponent(owner)}` : '');
}

const seenOwners = new Set();
/** @param {string[]} owners */
function listOwners(owners) {
  const list = $('#owners-seen');
  for (const owner of owners) {
    if (seenOwners.has(owner)) continue;
    seenOwners.add(owner);
    list.append(el('option', { value: owner }));
  }
}

// ---- One alarm -------------------------------------------------------------------------------

/** @type {{ id: string, owner: string | undefined, alarm: any } | null} */
let current = null;

/** @param {string} id @param {string | undefined} owner */
async function loadAlarm(id, owner) {
  // Until this alarm is read, no action may go to the one shown before (or to none).
  current = null;
  for (const button of document.querySelectorAll('#view-alarm [data-action], #edit-form button')) {
    /** @type {HTMLButtonElement} */ (button).disabled = true;
  }
  const base = `/v1/alarms/${encodeURIComponent(id)}`;
  const [one, fires, wakes] = await Promise.all([
    api('GET', base, { owner }),
    api('GET', `${base}/next-fires?count=5`, { owner }),
    api('GET', `${base}/wakes?limit=50`, { owner }),
  ]);
  current = { id, owner, alarm: one.alarm };
  showAlarm(one.alarm, owner);
  showNextFires(fires.next_fires, one.alarm.timezone);
  showAlarmWakes(wakes.wakes, owner);
}

/** @param {any} alarm @param {string | undefined} owner */
function showAlarm(alarm, owner) {
  $('#alarm-title').textContent = alarm.label || '(no label)';
  /** @type {[string, string | Node][]} */
  const fields = [
    ['Status', alarm.status],
    ['Kind', scheduleText(alarm)],
    ['Time zone', alarm.timezone],
    ...windowFields(alarm),
    [
      'Next fire',
      alarm.next_fire_at ? `${when(alarm.next_fire_at, alarm.timezone)} (${when(alarm.next_fire_at)})` : '—',
    ],
    ['Last fired', when(alarm.last_fired_at)],
    ['Failures', `${alarm.failure_count} of ${alarm.max_failures} allowed`],
    ['Last error', alarm.last_error ?? '—'],
    ['Conversation', alarm.conversation_id ?? '—'],
    ['Wake message', alarm.wake_message || '—'],
    ['Payload', el('pre', null, JSON.stringify(alarm.payload, null, 2))],
    ['Needs an ack', alarm.require_ack ? 'yes' : 'no'],
    ['Idempotency key', alarm.idempotency_key ?? '—'],
    ['Created', when(alarm.created_at)],
    ['Id', alarm.id],
  ];
  if (owner) fields.push(['Owner', owner]);
  const list = $('#alarm-fields');
  list.replaceChildren(...fields.flatMap(([name, value]) => [el('dt', null, name), el('dd', null, value)]));
  const allowed = {
    pause: alarm.status === 'active',
    resume: alarm.status === 'paused',
    fire: alarm.status === 'active' || alarm.status === 'paused',
    retry: alarm.status === 'failed',
    cancel: alarm.status === 'active' || alarm.status === 'paused',
  };
  for (const button of document.querySelectorAll('#view-alarm [data-action]')) {
    const b = /** @type {HTMLButtonElement} */ (button);
    b.disabled = !allowed[/** @type {keyof typeof allowed} */ (b.dataset.action)];
    if (b.dataset.action === 'cancel') {
      b.textContent = 'Cancel alarm';
      delete b.dataset.armed;
    }
  }
  const form = /** @type {HTMLFormElement} */ ($('#edit-form'));
  /** @type {HTMLSelectElement} */ (form.elements.namedItem('kind')).value =
    alarm.kind === 'once' ? 'at' : alarm.kind;
  /** @type {HTMLInputElement} */ (form.elements.namedItem('value')).value =
    alarm.kind === 'cron'
      ? alarm.cron_expr
      : alarm.kind === 'rrule'
        ? alarm.rrule
        : (alarm.next_fire_at ?? '');
  for (const name of WINDOW) {
    /** @type {HTMLInputElement} */ (form.elements.namedItem(name)).value = String(alarm[name] ?? '');
  }
  /** @type {HTMLInputElement} */ (form.elements.namedItem('timezone')).value = alarm.timezone;
  /** @type {HTMLFieldSetElement} */ (form.querySelector('fieldset')).disabled = !allowed.cancel;
  /** @type {HTMLButtonElement} */ (form.querySelector('button')).disabled = false;
}

/** The window, jitter and expiry of an alarm, each only when set. @param {any} alarm @returns {[string, string][]} */
function windowFields(alarm) {
  /** @type {[string, string][]} */
  const fields = [];
  const both = (/** @type {string} */ iso) => `${when(iso, alarm.timezone)} (${when(iso)})`;
  if (alarm.starts_at) fields.push(['Starts', both(alarm.starts_at)]);
  if (alarm.ends_at) fields.push(['Ends', both(alarm.ends_at)]);
  if (alarm.jitter_seconds) fields.push(['Jitter', `up to ${alarm.jitter_seconds} s late`]);
  if (alarm.expires_after_seconds) {
    fields.push(['Expires', `${alarm.expires_after_seconds} s after it is due, if not delivered`]);
  }
  return fields;
}

/** The edit form's fields for the window, jitter and expiry, by their wire names. */
const WINDOW = ['starts_at', 'ends_at', 'jitter_seconds', 'expires_after_seconds'];

/** @param {{utc: string, local: string}[]} fires @param {string} zone */
function showNextFires(fires, zone) {
  const body = $('#next-fires tbody');
  body.replaceChildren(
    ...(fires.length === 0
      ? [el('tr', null, el('td', { colspan: '3' }, 'None: it fires only while active.'))]
      : fires.map((f) =>
          el(
            'tr',
            null,
            el('td', null, `${f.local} (${zone})`),
            el('td', null, when(f.utc)),
            el('td', null, f.utc),
          ),
        )),
  );
}

/** @param {any[]} wakes @param {string | undefined} owner */
function showAlarmWakes(wakes, owner) {
  const body = $('#alarm-wakes tbody');
  body.replaceChildren();
  if (wakes.length === 0) body.append(el('tr', null, el('td', { colspan: '6' }, 'No wakes yet.')));
  for (const wake of wakes) {
    const button = el('button', { type: 'button', 'aria-expanded': 'false' }, `${wake.attempts} — show`);
    const row = el(
      'tr',
      { 'data-wake': wake.id },
      el('td', null, when(wake.fired_at)),
      statusCell(wake.status),
      el('td', { class: 'num' }, wake.lateness_ms === null ? '—' : `${wake.lateness_ms} ms`),
      el('td', { class: 'num' }, String(wake.fire_count)),
      el('td', null, wake.acknowledged_at ? `${when(wake.acknowledged_at)}: ${wake.ack_note ?? ''}` : '—'),
      el('td', null, button),
    );
    button.addEventListener('click', () => void toggleAttempts(row, wake, owner, button));
    body.append(row);
  }
}

/** @param {HTMLElement} row @param {any} wake @param {string | undefined} owner @param {HTMLElement} button */
async function toggleAttempts(row, wake, owner, button) {
  const next = row.nextElementSibling;
  if (next?.classList.contains('attempts')) {
    next.remove();
    button.setAttribute('aria-expanded', 'false');
    return;
  }
  try {
    const { attempts } = await api('GET', `/v1/wakes/${wake.id}/attempts`, { owner });
    const table = el(
      'table',
      null,
      el('caption', null, `Delivery attempts of the wake fired ${when(wake.fired_at)}`),
      el(
        'thead',
        null,
        el(
          'tr',
          null,
          ...['#', 'Started', 'Outcome', 'Status code', 'Error', 'Duration'].map((h) =>
            el('th', { scope: 'col' }, h),
          ),
        ),
      ),
      el(
        'tbody',
        null,
        ...attempts.map((/** @type {any} */ a) =>
          el(
            'tr',
            null,
            el('td', null, String(a.attempt)),
            el('td', null, when(a.started_at)),
            el('td', null, a.outcome),
            el('td', null, a.status_code === null ? '—' : String(a.status_code)),
            el('td', null, a.error ?? '—'),
            el('td', { class: 'num' }, `${a.duration_ms} ms`),
          ),
        ),
      ),
    );
    row.after(el('tr', { class: 'attempts' }, el('td', { colspan: '6' }, table)));
    button.setAttribute('aria-expanded', 'true');
  } catch (error) {
    fail(error);
  }
}

const DONE = {
  pause: 'Paused.',
  resume: 'Resumed.',
  fire: 'Fired now: it is delivered promptly.',
  retry: 'Retrying.',
  cancel: 'Cancelled.',
};

/** @param {HTMLButtonElement} button */
async function act(button) {
  if (!current) return;
  const action = /** @type {keyof typeof DONE} */ (button.dataset.action);
  if (action === 'cancel' && !button.dataset.armed) {
    button.dataset.armed = 'yes';
    button.textContent = 'Really cancel? Click again';
    return;
  }
  clearMessages();
  const base = `/v1/alarms/${encodeURIComponent(current.id)}`;
  if (action === 'cancel') await api('DELETE', base, { owner: current.owner });
  else await api('POST', `${base}/${action}`, { owner: current.owner, body: {} });
  await loadAlarm(current.id, current.owner);
  say(DONE[action]);
}

/** @param {HTMLFormElement} form */
async function editSchedule(form) {
  if (!current) return;
  const data = new FormData(form);
  const kind = String(data.get('kind'));
  const value = String(data.get('value') ?? '').trim();
  const timezone = String(data.get('timezone') ?? '').trim();
  /** @type {Record<string, unknown>} */
  const body = kind === 'in_seconds' ? { in_seconds: Number(value) } : { [kind]: value };
  if (timezone) body.timezone = timezone;
  // Only what the operator changed is sent; a field emptied that had a value is cleared (null).
  // A number field holding something else goes as typed, for the API to say what is wrong with it.
  for (const name of WINDOW) {
    const typed = String(data.get(name) ?? '').trim();
    const had = current.alarm[name];
    if (typed === String(had ?? '')) continue;
    if (typed === '') body[name] = null;
    else if (name.endsWith('_seconds') && /^\d+$/.test(typed)) body[name] = Number(typed);
    else body[name] = typed;
  }
  clearMessages();
  await api('PATCH', `/v1/alarms/${encodeURIComponent(current.id)}`, { owner: current.owner, body });
  await loadAlarm(current.id, current.owner);
  say('Schedule saved; check the next fires.');
}

// ---- Waiting wakes ---------------------------------------------------------------------------

/** @type {string | null} */
let wakesCursor = null;

/** @param {boolean} more */
async function loadWakes(more) {
  const params = new URLSearchParams({ status: 'delivered', require_ack: 'true', limit: '100' });
  if (more && wakesCursor) params.set('cursor', wakesCursor);
  const page = await api('GET', `/v1/wakes?${params}`);
  const owners = page.owners ?? {};
  Object.assign(ownersById, owners);
  const body = $('#wakes-table tbody');
  if (!more) body.replaceChildren();
  const now = Date.now();
  for (const wake of page.wakes) body.append(waitingRow(wake, owners[wake.id], now));
  if (!more && page.wakes.length === 0) {
    body.append(el('tr', null, el('td', { colspan: '7' }, 'Nothing is waiting for an acknowledgement.')));
  }
  wakesCursor = page.next_cursor;
  $('#wakes-more').hidden = page.next_cursor === null;
  say(`${body.querySelectorAll('tr[data-wake]').length} wakes waiting.`);
}

/** @param {any} wake @param {string | undefined} owner @param {number} now */
function waitingRow(wake, owner, now) {
  const note = el('input', {
    type: 'text',
    name: 'note',
    required: '',
    maxlength: '2000',
    'aria-label': `Note for ${wake.label || 'this wake'}`,
  });
  const form = el('form', { class: 'ack' }, note, el('button', { type: 'submit' }, 'Acknowledge'));
  const row = el(
    'tr',
    { 'data-wake': wake.id },
    el('td', null, el('a', { href: alarmHref(wake.alarm_id, owner) }, wake.label || '(no label)')),
    el('td', null, when(wake.fired_at)),
    el('td', null, duration(now - Date.parse(wake.fired_at))),
    el('td', null, wake.nudged_at ? when(wake.nudged_at) : 'no'),
    el(
      'td',
      { class: wake.escalated_at ? 's-failed' : '' },
      wake.escalated_at ? when(wake.escalated_at) : 'no',
    ),
  );
  if (session?.operator) row.append(el('td', { class: 'owner' }, owner ?? ''));
  row.append(el('td', null, form));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    guarded(async () => {
      clearMessages();
      const text = /** @type {HTMLInputElement} */ (note).value;
      await api('POST', `/v1/wakes/${wake.id}/ack`, { owner, body: { note: text } });
      row.remove();
      say(`Acknowledged “${wake.label || wake.id}”.`);
    });
  });
  return row;
}

// ---- Lateness --------------------------------------------------------------------------------

const SVG = 'http://www.w3.org/2000/svg';
/** @param {string} tag @param {Record<string, string | number>} attrs */
function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

/**
 * A chart of per-minute values: lines (lateness) or bars (upcoming), with a max label and times.
 * @param {HTMLElement} box @param {string[]} minutes
 * @param {{ name: string, values: (number | null)[], bars?: boolean }[]} series @param {string} label
 */
function chart(box, minutes, series, label) {
  const W = 900;
  const H = 220;
  const L = 50;
  const B = 24;
  const max = Math.max(1, ...series.flatMap((s) => s.values.map((v) => v ?? 0)));
  const x = (/** @type {number} */ i) => L + (i * (W - L - 10)) / Math.max(1, minutes.length - 1);
  const y = (/** @type {number} */ v) => H - B - (v / max) * (H - B - 14);
  const root = svg('svg', {
    viewBox: `0 0 ${W} ${H}`,
    role: 'img',
    'aria-label': label,
    preserveAspectRatio: 'none',
  });
  root.append(svg('line', { class: 'axis', x1: L, y1: H - B, x2: W - 10, y2: H - B }));
  root.append(svg('line', { class: 'axis', x1: L, y1: 10, x2: L, y2: H - B }));
  const top = svg('text', { x: 4, y: 18 });
  top.textContent = String(Math.round(max));
  const zero = svg('text', { x: 4, y: H - B });
  zero.textContent = '0';
  root.append(top, zero);
  for (const i of [0, Math.floor(minutes.length / 2), minutes.length - 1]) {
    if (!minutes[i]) continue;
    const t = svg('text', { x: Math.min(x(i), W - 60), y: H - 6 });
    t.textContent = new Date(minutes[i]).toLocaleTimeString(undefined, {
      hour: '2-digit',
      minute: '2-digit',
    });
    root.append(t);
  }
  for (const s of series) {
    if (s.bars) {
      const w = Math.max(1, (W - L - 10) / minutes.length - 1);
      s.values.forEach((v, i) => {
        if (v)
          root.append(
            svg('rect', { class: 'bar', x: x(i) - w / 2, y: y(v), width: w, height: H - B - y(v) }),
          );
      });
      continue;
    }
    let d = '';
    s.values.forEach((v, i) => {
      if (v === null) return;
      d += `${d ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
    });
    if (d) root.append(svg('path', { class: s.name, d }));
    s.values.forEach((v, i) => {
      if (v !== null) root.append(svg('circle', { class: s.name, cx: x(i), cy: y(v), r: 2 }));
    });
  }
  box.replaceChildren(root);
}

async function loadLateness() {
  const hours = /** @type {HTMLSelectElement} */ ($('#upcoming-hours')).value;
  const [late, upcoming] = await Promise.all([
    api('GET', '/v1/stats/lateness?minutes=60'),
    api('GET', `/v1/stats/upcoming?hours=${encodeURIComponent(hours)}`),
  ]);
  const lateMinutes = late.minutes.map((/** @type {any} */ m) => m.minute);
  chart(
    $('#lateness-chart'),
    lateMinutes,
    [
      { name: 'p50', values: late.minutes.map((/** @type {any} */ m) => m.p50_ms) },
      { name: 'p99', values: late.minutes.map((/** @type {any} */ m) => m.p99_ms) },
    ],
    'Lateness per minute, last hour',
  );
  const fires = late.minutes.reduce((/** @type {number} */ n, /** @type {any} */ m) => n + m.fires, 0);
  const worst = Math.max(0, ...late.minutes.map((/** @type {any} */ m) => m.p99_ms ?? 0));
  $('#lateness-summary').textContent = `${fires} scheduled fires in the last hour; worst p99 ${worst} ms.`;
  chart(
    $('#upcoming-chart'),
    upcoming.minutes.map((/** @type {any} */ m) => m.minute),
    [{ name: 'fires', values: upcoming.minutes.map((/** @type {any} */ m) => m.fires), bars: true }],
    `Fires due per minute, next ${hours} hours`,
  );
  const due = upcoming.minutes.reduce((/** @type {number} */ n, /** @type {any} */ m) => n + m.fires, 0);
  $('#upcoming-summary').textContent =
    `${due} fires due in the next ${hours} hours` +
    (upcoming.truncated ? ' (at least: too many to count all).' : '.');
  say('');
}

// ---- Routing ---------------------------------------------------------------------------------

const VIEWS = ['signin', 'alarms', 'alarm', 'wakes', 'lateness'];

/** @param {string} name */
function show(name) {
  for (const view of VIEWS) $(`#view-${view}`).hidden = view !== name;
  for (const link of document.querySelectorAll('#nav a')) {
    const a = /** @type {HTMLAnchorElement} */ (link);
    if (a.hash === `#${name}` || (name === 'alarm' && a.hash === '#alarms'))
      a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

/** @param {boolean} [moved] the viewer went to another view: their focus follows it */
async function route(moved = false) {
  clearMessages();
  showSession();
  const hash = location.hash.slice(1);
  if (!session) {
    show('signin');
    document.body.dataset.ready = 'yes';
    /** @type {HTMLInputElement} */ ($('#signin-key')).focus();
    return;
  }
  const [path, query = ''] = hash.split('?');
  const [view, id] = (path ?? '').split('/');
  const done = document.body.dataset;
  done.ready = 'no';
  const shown = view === 'alarm' && id ? 'alarm' : view === 'wakes' || view === 'lateness' ? view : 'alarms';
  if (moved) {
    const heading = $(`#view-${shown} h2`);
    heading.tabIndex = -1;
    show(shown);
    heading.focus();
  }
  try {
    if (view === 'alarm' && id) {
      show('alarm');
      say('Loading…');
      await loadAlarm(decodeURIComponent(id), new URLSearchParams(query).get('owner') ?? undefined);
      say('');
    } else if (view === 'wakes') {
      show('wakes');
      await loadWakes(false);
    } else if (view === 'lateness') {
      show('lateness');
      await loadLateness();
    } else {
      show('alarms');
      await loadAlarms(false);
    }
  } catch (error) {
    fail(error);
  } finally {
    done.ready = 'yes';
  }
}

/** Runs an action, showing its failure. @param {() => Promise<void>} fn */
function guarded(fn) {
  document.body.dataset.ready = 'no';
  fn()
    .catch(fail)
    .finally(() => (document.body.dataset.ready = 'yes'));
}

function start() {
  $('#signin-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const input = /** @type {HTMLInputElement} */ ($('#signin-key'));
    const error = $('#signin-error');
    error.hidden = true;
    const key = input.value.trim();
    signIn(key)
      .then(() => {
        input.value = '';
        if (location.hash === '#alarms') void route();
        else location.hash = '#alarms';
      })
      .catch((/** @type {unknown} */ e) => {
        error.textContent =
          e instanceof ApiError && e.status === 401
            ? `That key was refused: ${e.message}`
            : e instanceof ApiError && e.status === 400
              ? `That is the operator token only if the server has one set; it was refused: ${e.message}`
              : String(e instanceof Error ? e.message : e);
        error.hidden = false;
        input.focus();
      });
  });
  $('#sign-out').addEventListener('click', () => signOut());
  $('#alarm-filters').addEventListener('submit', (event) => {
    event.preventDefault();
    guarded(() => loadAlarms(false));
  });
  $('#alarms-more').addEventListener('click', () => guarded(() => loadAlarms(true)));
  $('#wakes-more').addEventListener('click', () => guarded(() => loadWakes(true)));
  $('#upcoming-hours').addEventListener('change', () => guarded(loadLateness));
  for (const button of document.querySelectorAll('#view-alarm [data-action]')) {
    button.addEventListener('click', () => guarded(() => act(/** @type {HTMLButtonElement} */ (button))));
  }
  $('#edit-form').addEventListener('submit', (event) => {
    event.preventDefault();
    guarded(() => editSchedule(/** @type {HTMLFormElement} */ (event.target)));
  });
  window.addEventListener('hashchange', () => void route(true));

  const kept = sessionStorage.getItem(STORE);
  if (kept) {
    signIn(kept)
      .catch(() => sessionStorage.removeItem(STORE))
      .finally(() => void route());
  } else {
    void route();
  }
}

start();
