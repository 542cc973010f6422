/**
 * ctxflow session inspector: plain DOM, no framework, no build step.
 *
 * Safety contract: every text that comes from the API (ticket summaries, row
 * content, tool names, ids) reaches the page through `textContent`,
 * `setAttribute` or `document.createTextNode`, never through `innerHTML`:
 * ticket text is untrusted. The page's own markup is static (index.html).
 *
 * Data: `GET /sessions`, `GET /sessions/:id/inspect`, `GET /sessions/:id/subscriptions`
 * on the same origin, with `Authorization: Bearer <key>` when a key was pasted
 * (kept in sessionStorage, so it leaves with the tab).
 */

const KEY_STORAGE = 'ctxflow.inspector.apiKey';
const SVG_NS = 'http://www.w3.org/2000/svg';

// ------------------------------------------------------------ prompt-prefix reuse
//
// The runner reports, per step, how many leading bytes of the model request
// (`JSON.stringify(request.messages)`, UTF-8) equal the previous request's
// (the previous request's text without its closing `]`). The functions below
// rebuild both texts from `GET /sessions/:id/inspect` (each step's `system`
// and `[0, logEnd)` of the log) with the runner's one rendering of a row, so
// the page shows the same numbers the `ctxflow.prompt.prefix_reused_bytes`
// metric recorded.

/** Rows of source tool and late-answer are presented as a user turn, the rest in system form (R6). */
const USER_FORM = new Set(['tool', 'late-answer']);

/** The runner's rendering of one context row for the model (model-request.ts `renderRow`). */
export function renderRow(row) {
  const head = `<context kind="${row.kind}" source="${row.source}">`;
  let body;
  if (row.kind === 'tools') {
    const lines = [];
    if (row.disable?.length) lines.push(`disabled: ${row.disable.join(', ')}`);
    if (row.enable?.length) lines.push(`enabled: ${row.enable.join(', ')}`);
    body = lines.join('\n');
  } else {
    body = (row.content ?? '').replaceAll('</context', '<\\/context');
  }
  return `${head}\n${body}\n</context>`;
}

/** The request's messages for a system prefix and log entries, as the runner renders them. */
export function requestMessages(system, entries) {
  const messages = [];
  if (system.length > 0) messages.push({ role: 'system', content: system });
  for (const entry of entries) {
    if (entry.type === 'row') {
      messages.push({ role: USER_FORM.has(entry.row.source) ? 'user' : 'system', content: renderRow(entry.row) });
    } else {
      messages.push({ role: entry.role, content: entry.content });
    }
  }
  return messages;
}

function sharedPrefixLength(a, b) {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * Per step, in step order: `{ stepId, ordinal, mode, rebuilt, reason, requestBytes, prefixReusedBytes }`.
 * `requestBytes` is the UTF-8 size of the request's messages as JSON; the first
 * step (no previous request) reuses 0 bytes.
 */
export function prefixReuse(steps, log) {
  const encoder = new TextEncoder();
  const ordered = [...steps].sort((a, b) => a.ordinal - b.ordinal);
  const result = [];
  let previous;
  for (const step of ordered) {
    const text = JSON.stringify(requestMessages(step.system, log.slice(0, step.logEnd)));
    const bytes = encoder.encode(text);
    const reused = previous === undefined ? 0 : sharedPrefixLength(previous, bytes);
    result.push({
      stepId: step.stepId,
      ordinal: step.ordinal,
      mode: step.mode,
      rebuilt: step.cache?.rebuilt === true,
      reason: step.cache?.reason ?? null,
      requestBytes: bytes.length,
      prefixReusedBytes: reused,
    });
    previous = encoder.encode(text.slice(0, -1));
  }
  return result;
}

// ------------------------------------------------------------ DOM helpers

/** An element with attributes and children; strings become text nodes (never parsed as markup). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(
      typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child,
    );
  }
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  for (const child of children) {
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

function setAttrs(node, attrs) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    node.setAttribute(name, value === true ? '' : String(value));
  }
}

/** A class-name-safe token for a known value (kind, source, status); anything else becomes `other`. */
function token(value) {
  return typeof value === 'string' && /^[a-z_-]{1,32}$/.test(value) ? value : 'other';
}

function badge(group, value) {
  return el('span', { class: `badge ${group}-${token(value)}`, 'data-testid': group }, String(value ?? '-'));
}

function cursorText(cursor) {
  return cursor === null || cursor === undefined ? 'none' : JSON.stringify(cursor);
}

function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(2)} MiB`;
}

function percent(part, whole) {
  return whole > 0 ? `${Math.round((part / whole) * 100)}%` : '-';
}

function section(id, title, ...children) {
  return el('section', { id }, el('h2', {}, title), ...children);
}

function table(head, rows, attrs = {}) {
  return el(
    'table',
    attrs,
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, ...rows),
  );
}

function empty(text) {
  return el('p', { class: 'empty' }, text);
}

// ------------------------------------------------------------ API

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) ?? '';
}

async function api(path) {
  const headers = { accept: 'application/json' };
  const key = apiKey();
  if (key) headers.authorization = `Bearer ${key}`;
  const response = await fetch(path, { headers, cache: 'no-store' });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = body?.error;
    throw new ApiError(
      response.status,
      typeof error?.code === 'string' ? error.code : `http_${response.status}`,
      typeof error?.message === 'string' ? error.message : response.statusText,
    );
  }
  return body;
}

function describeError(err) {
  if (err instanceof ApiError) {
    if (err.status === 401) return `unauthorized: paste a valid API key above (${err.message})`;
    return `${err.code} (HTTP ${err.status}): ${err.message}`;
  }
  return err instanceof Error ? err.message : String(err);
}

// ------------------------------------------------------------ views

function selectedSessionId() {
  const match = /^#\/sessions\/(.+)$/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : undefined;
}

async function loadSessions() {
  const status = document.getElementById('sessions-status');
  const list = document.getElementById('session-list');
  status.textContent = 'Loading...';
  try {
    const { sessions } = await api('/sessions');
    const current = selectedSessionId();
    list.replaceChildren(
      ...sessions.map((s) =>
        el(
          'li',
          {},
          el(
            'a',
            {
              href: `#/sessions/${encodeURIComponent(s.sessionId)}`,
              'data-session-id': s.sessionId,
              'aria-current': s.sessionId === current ? 'true' : undefined,
            },
            el('span', { class: 'session-id' }, s.sessionId),
            el(
              'span',
              { class: 'session-meta' },
              `${s.steps} step${s.steps === 1 ? '' : 's'}`,
              s.agentId ? ` - ${s.agentId}` : '',
              s.branchOf ? ` - branch of ${s.branchOf.sessionId}` : '',
            ),
          ),
        ),
      ),
    );
    status.textContent = sessions.length === 0 ? 'No sessions yet.' : `${sessions.length} session(s)`;
  } catch (err) {
    list.replaceChildren();
    status.textContent = describeError(err);
  }
}

function summaryView(data) {
  const meta = data.meta;
  const tools = data.activeTools.length
    ? el('ul', { id: 'active-tools', class: 'chips' }, ...data.activeTools.map((t) => el('li', {}, t)))
    : el('span', { id: 'active-tools' }, 'none');
  const rows = [
    ['Session', el('code', { id: 'summary-session' }, meta.sessionId)],
    ['Agent', meta.agentId ?? 'none'],
    ['Created', meta.createdAt],
    ['Steps', String(meta.steps)],
    ['Branch of', meta.branchOf ? meta.branchOf.sessionId : 'none'],
    ['Cursor', el('code', { id: 'cursor', 'data-testid': 'cursor' }, cursorText(data.cursor))],
    ['Active tools', tools],
  ];
  return section('summary', 'Session', el('dl', {}, ...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])));
}

function rowBody(row) {
  if (row.kind === 'tools') {
    const parts = [];
    if (row.disable?.length) parts.push(`disable: ${row.disable.join(', ')}`);
    if (row.enable?.length) parts.push(`enable: ${row.enable.join(', ')}`);
    return parts.join('\n');
  }
  return row.content ?? '';
}

function logView(log) {
  const rows = log.map((entry) => {
    if (entry.type === 'row') {
      const row = entry.row;
      return el(
        'tr',
        { class: 'log-row context', 'data-kind': row.kind, 'data-source': row.source, 'data-row-id': row.id },
        el('td', {}, String(entry.seq)),
        el('td', {}, el('code', {}, entry.stepId)),
        el('td', {}, 'context'),
        el('td', {}, badge('kind', row.kind)),
        el('td', {}, badge('source', row.source)),
        el('td', {}, row.cursor === undefined ? '' : el('code', {}, cursorText(row.cursor))),
        el('td', {}, el('pre', {}, rowBody(row))),
      );
    }
    return el(
      'tr',
      { class: 'log-row message', 'data-role': entry.role },
      el('td', {}, String(entry.seq)),
      el('td', {}, ''),
      el('td', {}, badge('role', entry.role)),
      el('td', {}, ''),
      el('td', {}, ''),
      el('td', {}, ''),
      el('td', {}, el('pre', {}, entry.content ?? '')),
    );
  });
  return section(
    'log',
    `Log (${log.length})`,
    log.length
      ? table(['Seq', 'Step', 'Entry', 'Kind', 'Source', 'Cursor', 'Content'], rows, { id: 'log-table' })
      : empty('The log is empty.'),
  );
}

function queueView(queue) {
  const rows = queue.map((q) =>
    el(
      'tr',
      { 'data-kind': q.item.kind, 'data-source': q.item.source },
      el('td', {}, el('code', {}, q.itemId)),
      el('td', {}, badge('kind', q.item.kind)),
      el('td', {}, badge('source', q.item.source)),
      el('td', {}, q.callId ? el('code', {}, q.callId) : ''),
      el('td', {}, q.at),
      el('td', {}, el('pre', {}, rowBody(q.item))),
    ),
  );
  return section(
    'queue',
    `Queue (${queue.length})`,
    queue.length
      ? table(['Item', 'Kind', 'Source', 'Call', 'Queued at', 'Content'], rows, { id: 'queue-table' })
      : empty('Nothing queued: the next model call delivers no queued item.'),
  );
}

function callsView(calls) {
  const rows = calls.map((c) =>
    el(
      'tr',
      { 'data-status': c.status },
      el('td', {}, el('code', {}, c.callId)),
      el('td', {}, c.name),
      el('td', {}, String(c.stepIndex)),
      el('td', {}, badge('status', c.status)),
      el('td', {}, c.reason ?? ''),
    ),
  );
  return section(
    'calls',
    `Tool calls (${calls.length})`,
    calls.length ? table(['Call', 'Tool', 'Model call', 'Status', 'Reason'], rows) : empty('No tool calls.'),
  );
}

function subscriptionsView(result) {
  if (result.error)
    return section('subscriptions', 'Subscriptions', empty(`Unavailable: ${describeError(result.error)}`));
  const subs = result.subscriptions;
  return section(
    'subscriptions',
    `Subscriptions (${subs.length})`,
    subs.length
      ? el(
          'ul',
          { class: 'chips', id: 'subscription-list' },
          ...subs.map((s) =>
            el('li', { 'data-source': s.source }, `${s.source}: ${s.ticket}`, s.scope ? ` (scope ${s.scope})` : ''),
          ),
        )
      : empty('Not subscribed to any ticket.'),
  );
}

function skipsView(recent) {
  const skips = recent.filter((c) => c.type === 'context_skipped');
  const rows = skips.map((s) =>
    el(
      'tr',
      { 'data-reason': s.reason },
      el('td', {}, s.at),
      el('td', {}, el('code', {}, s.stepId)),
      el('td', {}, badge('reason', s.reason)),
      el('td', {}, s.message),
    ),
  );
  return section(
    'skips',
    `Recent skips (${skips.length})`,
    skips.length ? table(['At', 'Step', 'Reason', 'Message'], rows, { id: 'skips-table' }) : empty('No recent skips.'),
  );
}

/** An inline SVG bar chart: per step, the request's bytes, the reused part filled. */
function reuseChart(points) {
  const barWidth = 28;
  const gap = 12;
  const top = 38; // room for the legend and the tallest bar's label
  const plot = 160;
  const left = 64;
  const width = Math.max(360, left + points.length * (barWidth + gap) + gap);
  const height = top + plot + 34;
  const max = Math.max(1, ...points.map((p) => p.requestBytes));
  const y = (bytes) => top + plot - (bytes / max) * plot;
  const chart = svg('svg', {
    id: 'reuse-chart',
    'data-testid': 'reuse-chart',
    role: 'img',
    'aria-label': 'Prompt-prefix reuse per step',
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
  });
  chart.append(
    svg('line', { x1: left - 4, x2: width - 4, y1: top + plot, y2: top + plot, class: 'axis' }),
    svg('text', { x: left - 8, y: top + 4, class: 'axis-label', 'text-anchor': 'end' }, formatBytes(max)),
    svg('text', { x: left - 8, y: top + plot, class: 'axis-label', 'text-anchor': 'end' }, '0'),
  );
  points.forEach((p, i) => {
    const x = left + gap + i * (barWidth + gap);
    const group = svg('g', {
      class: `reuse-step${p.rebuilt ? ' rebuilt' : ''}`,
      'data-ordinal': p.ordinal,
      'data-request-bytes': p.requestBytes,
      'data-reused-bytes': p.prefixReusedBytes,
    });
    const title = `step ${p.ordinal} (${p.mode}): ${p.prefixReusedBytes} of ${p.requestBytes} bytes reused (${percent(p.prefixReusedBytes, p.requestBytes)})${p.rebuilt ? `, prefix rebuilt: ${p.reason ?? 'unknown'}` : ''}`;
    group.append(
      svg('title', {}, title),
      svg('rect', {
        class: 'bar-new',
        x,
        y: y(p.requestBytes),
        width: barWidth,
        height: top + plot - y(p.requestBytes),
      }),
      svg('rect', {
        class: 'bar-reused',
        x,
        y: y(p.prefixReusedBytes),
        width: barWidth,
        height: top + plot - y(p.prefixReusedBytes),
      }),
      svg(
        'text',
        { x: x + barWidth / 2, y: y(p.requestBytes) - 4, class: 'bar-label', 'text-anchor': 'middle' },
        percent(p.prefixReusedBytes, p.requestBytes),
      ),
      svg(
        'text',
        { x: x + barWidth / 2, y: top + plot + 16, class: 'axis-label', 'text-anchor': 'middle' },
        String(p.ordinal),
      ),
    );
    chart.append(group);
  });
  chart.append(
    svg('text', { x: left, y: height - 4, class: 'axis-label' }, 'step'),
    svg('rect', { x: left, y: 4, width: 10, height: 10, class: 'bar-reused' }),
    svg('text', { x: left + 14, y: 13, class: 'axis-label' }, 'reused bytes'),
    svg('rect', { x: left + 96, y: 4, width: 10, height: 10, class: 'bar-new' }),
    svg('text', { x: left + 110, y: 13, class: 'axis-label' }, 'new bytes'),
  );
  return chart;
}

function reuseView(steps, log) {
  const points = prefixReuse(steps, log);
  if (points.length === 0) return section('reuse', 'Prompt-prefix reuse per step', empty('No steps yet.'));
  const rows = points.map((p) =>
    el(
      'tr',
      { 'data-ordinal': p.ordinal },
      el('td', {}, String(p.ordinal)),
      el('td', {}, el('code', {}, p.stepId)),
      el('td', {}, p.mode),
      el('td', {}, p.rebuilt ? `rebuilt (${p.reason ?? 'unknown'})` : 'warm'),
      el('td', { class: 'num' }, String(p.requestBytes)),
      el('td', { class: 'num' }, String(p.prefixReusedBytes)),
      el('td', { class: 'num' }, percent(p.prefixReusedBytes, p.requestBytes)),
    ),
  );
  return section(
    'reuse',
    'Prompt-prefix reuse per step',
    el(
      'p',
      { class: 'hint' },
      'Bytes of each model request equal to the previous request (the prompt cache can reuse them).',
    ),
    el('div', { class: 'chart' }, reuseChart(points)),
    table(['Step', 'Id', 'Mode', 'Prefix', 'Request bytes', 'Reused bytes', 'Reused'], rows, { id: 'reuse-table' }),
  );
}

// ------------------------------------------------------------ the provider's prompt cache

/**
 * Per reported step, in step order, what the provider said of its cache (the inspection's
 * `usage`): `{ stepId, ordinal, format, inputTokens, cachedTokens, predictedTokens, hit, shortfall }`,
 * `hit` the cached share of the input as a percentage text.
 */
export function providerCacheRows(usage) {
  return [...usage]
    .sort((a, b) => a.ordinal - b.ordinal)
    .map((u) => ({
      stepId: u.stepId,
      ordinal: u.ordinal,
      format: u.format,
      inputTokens: u.inputTokens,
      cachedTokens: u.cachedTokens,
      predictedTokens: u.predictedTokens,
      hit: percent(u.cachedTokens, u.inputTokens),
      shortfall: u.shortfall === true,
    }));
}

function providerCacheView(usage, summary) {
  const rows = providerCacheRows(usage ?? []);
  const title = "Provider's prompt cache per step";
  if (rows.length === 0) {
    return section('provider-cache', title, empty('No usage reported yet (POST /sessions/:id/steps/:stepId/usage).'));
  }
  const ratio = summary && summary.hitRatio !== null ? `${Math.round(summary.hitRatio * 100)}%` : '-';
  const line = el(
    'p',
    { id: 'provider-cache-summary' },
    `Hit ratio ${ratio}: ${summary.cachedTokens} of ${summary.inputTokens} input tokens read from the cache; `,
    `${summary.shortfalls} step(s) cached less than the unchanged prefix predicted.`,
  );
  const body = rows.map((r) =>
    el(
      'tr',
      { 'data-ordinal': r.ordinal, class: r.shortfall ? 'shortfall' : undefined },
      el('td', {}, String(r.ordinal)),
      el('td', {}, el('code', {}, r.stepId)),
      el('td', {}, r.format),
      el('td', { class: 'num' }, String(r.inputTokens)),
      el('td', { class: 'num' }, String(r.cachedTokens)),
      el('td', { class: 'num' }, r.predictedTokens === null ? '-' : String(r.predictedTokens)),
      el('td', { class: 'num' }, r.hit),
      el('td', {}, r.shortfall ? badge('cache', 'shortfall') : 'ok'),
    ),
  );
  return section(
    'provider-cache',
    title,
    el(
      'p',
      { class: 'hint' },
      "Tokens each provider read from its cache, against what the step's unchanged prefix predicted: a shortfall is a prefix broken between ctxflow and the provider.",
    ),
    line,
    table(['Step', 'Id', 'Format', 'Input', 'Cached', 'Predicted', 'Hit', 'Cache'], body, {
      id: 'provider-cache-table',
    }),
  );
}

let loadToken = 0;

async function loadSession(sessionId) {
  const status = document.getElementById('detail-status');
  const body = document.getElementById('detail-body');
  const mine = ++loadToken;
  status.textContent = 'Loading...';
  const path = `/sessions/${encodeURIComponent(sessionId)}`;
  try {
    const [data, subscriptions] = await Promise.all([
      api(`${path}/inspect`),
      api(`${path}/subscriptions`).catch((error) => ({ error })),
    ]);
    if (mine !== loadToken) return;
    body.replaceChildren(
      el(
        'div',
        { class: 'bar' },
        el('h2', {}, 'Session ', el('code', {}, sessionId)),
        el('button', { type: 'button', id: 'reload-session' }, 'Reload'),
      ),
      summaryView(data),
      reuseView(data.steps, data.log),
      providerCacheView(data.usage, data.providerCache),
      logView(data.log),
      queueView(data.queue),
      subscriptionsView(subscriptions),
      skipsView(data.recent ?? []),
      callsView(data.calls),
    );
    document.getElementById('reload-session').addEventListener('click', () => loadSession(sessionId));
    body.hidden = false;
    status.textContent = `Loaded at ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    if (mine !== loadToken) return;
    body.hidden = true;
    body.replaceChildren();
    status.textContent = describeError(err);
  }
}

/**
 * The selected session followed live: its stream (`GET /sessions/:id/stream`, SSE) read with fetch
 * (the API key goes in a header, which EventSource cannot send); every event reloads the view, a
 * dropped connection reconnects with `Last-Event-ID` so the server replays only what came after.
 * `document.body.dataset.live` says whether the stream is open.
 */
let follower;

function follow(sessionId) {
  if (follower?.sessionId === sessionId) return;
  follower?.controller.abort();
  follower = undefined;
  if (sessionId === undefined) return;
  const controller = new AbortController();
  follower = { sessionId, controller };
  readStream(sessionId, controller.signal);
}

let refreshTimer;

function refreshSoon(sessionId) {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => {
    if (selectedSessionId() === sessionId) loadSession(sessionId);
  }, 50);
}

async function readStream(sessionId, signal) {
  let lastEventId;
  let delay = 200;
  while (!signal.aborted) {
    try {
      const headers = { accept: 'text/event-stream' };
      const key = apiKey();
      if (key) headers.authorization = `Bearer ${key}`;
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      const response = await fetch(`/sessions/${encodeURIComponent(sessionId)}/stream`, {
        headers,
        signal,
        cache: 'no-store',
      });
      if (!response.ok || response.body === null) throw new Error(`stream answered ${response.status}`);
      document.body.dataset.live = 'live';
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, '\n');
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          for (const line of block.split('\n')) if (line.startsWith('id:')) lastEventId = line.slice(3).trim();
          if (block.split('\n').some((line) => line.startsWith('data:'))) refreshSoon(sessionId);
        }
      }
      delay = 200;
    } catch {
      if (signal.aborted) return;
    }
    document.body.dataset.live = 'reconnecting';
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(5000, delay * 2);
  }
}

function route() {
  const sessionId = selectedSessionId();
  for (const link of document.querySelectorAll('#session-list a')) {
    if (link.dataset.sessionId === sessionId) link.setAttribute('aria-current', 'true');
    else link.removeAttribute('aria-current');
  }
  follow(sessionId);
  if (sessionId === undefined) {
    document.getElementById('detail-body').hidden = true;
    document.getElementById('detail-status').textContent = 'Select a session.';
    return;
  }
  loadSession(sessionId);
}

function showKeyState() {
  document.getElementById('key-state').textContent = apiKey() ? 'key set for this tab' : 'no key';
}

function start() {
  const form = document.getElementById('key-form');
  const input = document.getElementById('api-key');
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (key) sessionStorage.setItem(KEY_STORAGE, key);
    else sessionStorage.removeItem(KEY_STORAGE);
    input.value = '';
    follow(undefined);
    showKeyState();
    loadSessions();
    route();
  });
  document.getElementById('forget-key').addEventListener('click', () => {
    sessionStorage.removeItem(KEY_STORAGE);
    follow(undefined);
    showKeyState();
    loadSessions();
    route();
  });
  document.getElementById('refresh-sessions').addEventListener('click', loadSessions);
  window.addEventListener('hashchange', route);
  showKeyState();
  loadSessions();
  route();
}

// Imported without a DOM (the prefix-reuse tests), only the functions above are used.
if (typeof document !== 'undefined') start();
