// The idem dashboard: a page per hash route (#/, #/consumer/NAME, #/streams/NAME, #/effects) that
// reads the server's JSON API. The token lives in sessionStorage for this browser tab's session and
// goes in the Authorization header, never in a URL. Nothing is loaded from anywhere but this server.

const TOKEN_KEY = 'idem.token';
const REFRESH_MS = 5000;
const PAGE = 20;
const COLORS = ['#1f6feb', '#d1242f', '#1a7f37', '#9a6700', '#8250df', '#bf3989', '#0a7ea4', '#57606a'];
const SVG = 'http://www.w3.org/2000/svg';

/** What the token may do, from /v1/session. */
let session = { name: null, scopes: [], tokens: false };
let refreshTimer = null;

// ---- DOM helpers: every value goes in as text, never as markup ----

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs ?? {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function table(headers, rows, empty) {
  if (rows.length === 0) return h('p', { class: 'muted' }, empty);
  return h(
    'table',
    {},
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        headers.map((t) => h('th', {}, t)),
      ),
    ),
    h('tbody', {}, rows),
  );
}

function num(v) {
  return h('td', { class: 'num' }, v === null || v === undefined ? '–' : String(v));
}

function statusCell(status) {
  return h('td', {}, h('span', { class: `status status-${status}` }, status));
}

function json(value) {
  return h('pre', {}, JSON.stringify(value, null, 2));
}

function flash(text, isError = false) {
  const el = document.getElementById('flash');
  el.textContent = text;
  el.className = isError ? 'error' : '';
  el.hidden = false;
}

function seconds(s) {
  if (s === null || s === undefined) return '–';
  return s < 1 ? `${(s * 1000).toFixed(1)} ms` : `${s.toFixed(2)} s`;
}

// ---- the API ----

class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code ?? 'http_error';
  }
}

async function api(method, path, body) {
  const headers = { accept: 'application/json' };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!r.ok) throw new ApiError(r.status, parsed);
  return parsed;
}

const enc = encodeURIComponent;
const isAdmin = () => session.scopes.includes('admin');

/** A button for an admin action: disabled without the admin scope; reports the outcome. */
function adminButton(label, action, attrs = {}) {
  return h(
    'button',
    {
      ...attrs,
      disabled: !isAdmin(),
      title: isAdmin() ? undefined : 'needs a token with the admin scope',
      onclick: async (ev) => {
        ev.preventDefault();
        try {
          const message = await action();
          flash(message);
        } catch (err) {
          flash(`${label}: ${err.message}`, true);
        }
        await renderSoon();
      },
    },
    label,
  );
}

// ---- session ----

async function loadSession() {
  const who = document.getElementById('who');
  try {
    session = await api('GET', '/v1/session');
    who.textContent = session.tokens
      ? `${session.name} (${session.scopes.join(', ')})`
      : 'no tokens configured (loopback only)';
  } catch (err) {
    session = { name: null, scopes: [], tokens: true };
    who.textContent = err.status === 401 ? 'a token is needed' : `session: ${err.message}`;
  }
}

function setupTokenForm() {
  document.getElementById('token-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const input = document.getElementById('token');
    if (input.value.trim()) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    input.value = '';
    await loadSession();
    await renderSoon();
  });
  document.getElementById('token-forget').addEventListener('click', async () => {
    sessionStorage.removeItem(TOKEN_KEY);
    await loadSession();
    await renderSoon();
  });
}

// ---- the lag chart ----

function lagChart(series, width = 720, height = 200) {
  const now = Date.now();
  const from = now - 3600_000;
  const pad = { left: 48, right: 10, top: 10, bottom: 22 };
  let max = 1;
  for (const s of series) for (const [, lag] of s.samples) if (lag > max) max = lag;
  const x = (t) => pad.left + ((t - from) / (now - from)) * (width - pad.left - pad.right);
  const y = (v) => height - pad.bottom - (v / max) * (height - pad.top - pad.bottom);
  const chart = svg('svg', {
    class: 'chart',
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    role: 'img',
    'aria-label': 'lag over the last hour',
  });
  chart.append(
    svg('line', { x1: pad.left, y1: y(0), x2: width - pad.right, y2: y(0), stroke: '#dde2e6' }),
    svg('line', { x1: pad.left, y1: y(max), x2: width - pad.right, y2: y(max), stroke: '#eef1f3' }),
    svg(
      'text',
      { x: pad.left - 6, y: y(max) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#66707a' },
      max,
    ),
    svg('text', { x: pad.left - 6, y: y(0) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#66707a' }, 0),
    svg('text', { x: pad.left, y: height - 6, 'font-size': 11, fill: '#66707a' }, '−60 min'),
    svg(
      'text',
      { x: width - pad.right, y: height - 6, 'text-anchor': 'end', 'font-size': 11, fill: '#66707a' },
      'now',
    ),
  );
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const pts = s.samples.filter(([t]) => t >= from);
    if (pts.length === 1) {
      chart.append(svg('circle', { cx: x(pts[0][0]), cy: y(pts[0][1]), r: 3, fill: color }));
    } else if (pts.length > 1) {
      const points = pts.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
      chart.append(svg('polyline', { points, fill: 'none', stroke: color, 'stroke-width': 2 }));
    }
  });
  const legend = h(
    'p',
    { class: 'legend' },
    series.map((s, i) => {
      const swatch = h('span', { class: 'swatch' });
      swatch.style.background = COLORS[i % COLORS.length];
      return h('span', {}, swatch, s.name);
    }),
  );
  return h('div', {}, chart, legend);
}

// ---- pages ----

async function consumersPage() {
  const [{ consumers }, history] = await Promise.all([
    api('GET', '/v1/consumers'),
    api('GET', '/v1/lag-history'),
  ]);
  const rows = consumers.map((c) =>
    h(
      'tr',
      { 'data-consumer': c.name },
      h('td', {}, h('a', { href: `#/consumer/${enc(c.name)}` }, c.name)),
      statusCell(c.status),
      num(c.position),
      num(c.lag),
      h('td', { class: 'num' }, seconds(c.lagSeconds)),
      num(c.parked),
      h('td', {}, c.owner ?? ''),
    ),
  );
  return [
    h('h2', {}, 'Consumers'),
    table(['name', 'status', 'position', 'lag', 'lag age', 'parked', 'owner'], rows, 'no consumers yet'),
    h('h2', {}, 'Lag, last hour'),
    history.consumers.length ? lagChart(history.consumers) : h('p', { class: 'muted' }, 'no samples yet'),
    h('p', { class: 'muted' }, `sampled every ${history.intervalMs / 1000} s by the server, kept in memory`),
  ];
}

function monitorsView(m) {
  if (!m.monitors)
    return h(
      'p',
      { class: 'muted' },
      'no monitors reported (the consumer reports them when it runs over this server)',
    );
  const x = m.monitors;
  const mean = (l) => (l.count ? l.sum / l.count : null);
  const items = [
    ['repeat rate', `${(m.repeatRate * 100).toFixed(2)} % (${x.duplicates} of ${x.delivered})`],
    ['version gaps', `${x.gaps} (${x.recovered} recovered)`],
    ['handler latency', `mean ${seconds(mean(x.handlerSeconds))}, max ${seconds(x.handlerSeconds.max)}`],
    ['end-to-end latency', `mean ${seconds(mean(x.endToEndSeconds))}, max ${seconds(x.endToEndSeconds.max)}`],
    ['reconnects', x.reconnects],
    ['checkpoint lag', `${x.checkpointLag.events} events, ${seconds(x.checkpointLag.seconds)}`],
    ['processed', `${x.processed} in ${x.batches} transactions`],
    ['dead letters', `${x.deadLetters} (${x.parkedEntities} entities parked)`],
    ['reported', m.reportedAt],
  ];
  return h(
    'dl',
    { class: 'grid' },
    items.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))]),
  );
}

function deadLetterView(name, d) {
  const e = d.event;
  const retry = adminButton(
    'Retry',
    async () => {
      const r = await api('POST', `/v1/consumers/${enc(name)}/dead-letters/retry`, { stream: e.stream });
      return `retried ${r.count} event(s) of ${e.stream}`;
    },
    { 'data-action': 'retry' },
  );
  const skip = adminButton(
    'Skip',
    async () => {
      const r = await api('POST', `/v1/consumers/${enc(name)}/dead-letters/skip`, { stream: e.stream });
      return `skipped ${r.count} event(s) of ${e.stream}`;
    },
    { 'data-action': 'skip' },
  );
  return h(
    'div',
    { class: 'dead-letter', 'data-stream': e.stream },
    h(
      'div',
      { class: 'toolbar' },
      h('strong', {}, `${e.stream} v${e.version}`),
      h(
        'span',
        { class: 'muted' },
        `#${e.position} ${e.type} · ${d.status} · ${d.reason} · attempts ${d.attempts}`,
      ),
      d.behind ? h('span', { class: 'muted' }, `behind ${d.behind}`) : null,
      d.redriveAt
        ? h(
            'span',
            { class: 'muted', 'data-redrive': d.redriveAt },
            `redrive ${(d.redrives ?? 0) + 1} at ${d.redriveAt}`,
          )
        : d.redrives
          ? h('span', { class: 'muted' }, `redriven ${d.redrives}×`)
          : null,
      retry,
      skip,
    ),
    d.error ? h('p', { class: 'error-text' }, `${d.error.name ?? 'Error'}: ${d.error.message}`) : null,
    d.error?.stack ? h('details', {}, h('summary', {}, 'stack'), h('pre', {}, d.error.stack)) : null,
    h('details', {}, h('summary', {}, 'data'), json(e.data)),
    h('details', {}, h('summary', {}, 'metadata'), json(e.metadata)),
  );
}

async function consumerPage(name) {
  const [c, monitors, { deadLetters }, history] = await Promise.all([
    api('GET', `/v1/consumers/${enc(name)}`),
    api('GET', `/v1/consumers/${enc(name)}/monitors`),
    api('GET', `/v1/consumers/${enc(name)}/dead-letters`),
    api('GET', `/v1/lag-history?consumer=${enc(name)}`),
  ]);
  const paused = c.status === 'paused';
  const toggle = adminButton(
    paused ? 'Resume' : 'Pause',
    async () => {
      const r = await api('POST', `/v1/consumers/${enc(name)}/${paused ? 'resume' : 'pause'}`);
      return `${name}: ${r?.status ?? (paused ? 'resumed' : 'paused')}`;
    },
    { id: 'pause-toggle', class: 'primary' },
  );
  /** A bulk retry or skip, request after request (the server acts on at most 5000 entities each). */
  const bulkAct = async (action, selector) => {
    let events = 0;
    let entities = 0;
    let after;
    for (;;) {
      const r = await api('POST', `/v1/consumers/${enc(name)}/dead-letters/${action}`, {
        ...selector,
        ...(after === undefined ? {} : { after }),
      });
      events += r.events ?? r.count;
      entities += r.entities ?? 0;
      if (r.done !== false || r.last === null) break;
      after = r.last;
    }
    return `${action === 'retry' ? 'retried' : 'skipped'} ${events} event(s) of ${entities} entities`;
  };
  const label = (action) => (action === 'retry' ? 'Retry' : 'Skip');
  const bulk = (action) =>
    adminButton(`${label(action)} all`, () => bulkAct(action, { all: true }), {
      'data-action': `${action}-all`,
    });
  const byError = h('input', {
    id: 'error-match',
    placeholder: 'error code, name or text',
    'aria-label': 'dead letters whose error matches',
  });
  const matching = (action) =>
    adminButton(
      `${label(action)} matching`,
      async () => {
        const error = byError.value.trim();
        if (!error) throw new Error('type an error code, name or part of a message first');
        return bulkAct(action, { error });
      },
      { 'data-action': `${action}-matching` },
    );
  const info = [
    ['status', h('span', { class: `status status-${c.status}`, id: 'consumer-status' }, c.status)],
    ['position', `${c.position} of ${c.head} (lag ${c.lag}, ${seconds(c.lagSeconds)})`],
    ['filter', JSON.stringify(c.filter)],
    ['owner', c.owner ? `${c.owner}, lease until ${c.leaseExpiresAt}` : 'none'],
    ['epoch', c.epoch],
    ['parked', c.parked],
    ['last error', c.lastError ? `${c.lastError.name ?? 'Error'}: ${c.lastError.message}` : 'none'],
  ];
  const partitions = Array.isArray(c.partitions)
    ? [
        h('h2', {}, 'Partitions'),
        table(
          ['index', 'position', 'lag', 'owner', 'epoch'],
          c.partitions.map((p) =>
            h('tr', {}, num(p.index), num(p.position), num(p.lag), h('td', {}, p.owner ?? ''), num(p.epoch)),
          ),
          'no partitions',
        ),
      ]
    : [];
  return [
    h('h2', {}, `Consumer ${name}`, ' ', toggle),
    h(
      'dl',
      { class: 'grid' },
      info.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]),
    ),
    ...partitions,
    h('h2', {}, 'Monitors'),
    monitorsView(monitors),
    h('h2', {}, 'Lag, last hour'),
    history.consumers.length ? lagChart(history.consumers) : h('p', { class: 'muted' }, 'no samples yet'),
    h('h2', {}, `Dead letters (${deadLetters.length})`),
    deadLetters.length
      ? h(
          'div',
          { class: 'toolbar' },
          bulk('retry'),
          bulk('skip'),
          byError,
          matching('retry'),
          matching('skip'),
        )
      : null,
    deadLetters.length
      ? h(
          'div',
          { id: 'dead-letters' },
          deadLetters.map((d) => deadLetterView(name, d)),
        )
      : h('p', { class: 'muted', id: 'dead-letters' }, 'none'),
  ];
}

function eventRows(events) {
  return events.map((e) =>
    h(
      'tr',
      { 'data-event': e.id },
      num(e.version),
      num(e.position),
      h('td', {}, e.type),
      h('td', {}, h('a', { href: `#/streams/${enc(e.stream)}` }, e.stream)),
      h('td', {}, e.recordedAt),
      h(
        'td',
        {},
        h(
          'details',
          {},
          h('summary', {}, e.id),
          h('p', {}, 'data'),
          json(e.data),
          h('p', {}, 'metadata'),
          json(e.metadata),
        ),
      ),
    ),
  );
}

async function streamsPage(stream, params) {
  const form = h(
    'form',
    {
      class: 'toolbar',
      onsubmit: (ev) => {
        ev.preventDefault();
        const v = ev.target.elements.stream.value.trim();
        location.hash = v ? `#/streams/${enc(v)}` : '#/streams';
      },
    },
    h('input', {
      name: 'stream',
      placeholder: 'stream name',
      value: stream ?? '',
      'aria-label': 'stream name',
    }),
    h('button', { type: 'submit' }, 'Open'),
  );
  const headers = ['version', 'position', 'type', 'stream', 'recorded', 'event'];
  if (!stream) {
    const { head } = await api('GET', '/v1/events?after=9007199254740991&limit=1');
    const after = Math.max(0, Number(params.get('after') ?? head - PAGE));
    const page = await api('GET', `/v1/events?after=${after}&limit=${PAGE}`);
    const nav = h(
      'div',
      { class: 'toolbar' },
      h('a', { href: `#/streams?after=${Math.max(0, after - PAGE)}` }, '← older'),
      page.next !== null ? h('a', { href: `#/streams?after=${page.next}` }, 'newer →') : null,
      h('span', { class: 'muted' }, `positions ${after + 1}… of ${head}`),
    );
    return [form, h('h2', {}, 'All streams'), nav, table(headers, eventRows(page.events), 'no events')];
  }
  const from = Math.max(1, Number(params.get('from') ?? 1));
  const page = await api('GET', `/v1/streams/${enc(stream)}/events?fromVersion=${from}&limit=${PAGE}`);
  const nav = h(
    'div',
    { class: 'toolbar' },
    from > 1
      ? h('a', { href: `#/streams/${enc(stream)}?from=${Math.max(1, from - PAGE)}` }, '← previous')
      : null,
    page.next !== null ? h('a', { href: `#/streams/${enc(stream)}?from=${page.next}` }, 'next →') : null,
    h('span', { class: 'muted' }, `version ${page.version}`),
  );
  return [
    form,
    h('h2', {}, `Stream ${stream}`),
    nav,
    table(headers, eventRows(page.events), 'no events in this stream'),
  ];
}

async function effectsPage(params) {
  const status = params.get('status') ?? '';
  let data;
  try {
    data = await api('GET', `/v1/effects?limit=100${status ? `&status=${enc(status)}` : ''}`);
  } catch (err) {
    if (err.code === 'not_found') return [h('h2', {}, 'Effects'), h('p', { class: 'muted' }, err.message)];
    throw err;
  }
  const c = data.counts;
  const filters = ['', 'pending', 'failed', 'done', 'suppressed'].map((s) =>
    h(
      'a',
      { href: s ? `#/effects?status=${s}` : '#/effects', class: s === status ? 'current' : '' },
      s || 'all',
    ),
  );
  const rows = data.effects.map((e) =>
    h(
      'tr',
      { 'data-effect': e.idempotencyKey },
      h('td', {}, e.idempotencyKey),
      h('td', {}, e.kind),
      statusCell(e.status),
      num(e.attempts),
      num(e.position),
      h('td', {}, e.lastError ?? ''),
      h('td', {}, e.nextAttemptAt ?? ''),
      h(
        'td',
        {},
        e.status === 'failed' || e.status === 'suppressed'
          ? adminButton('Retry', async () => {
              const r = await api('POST', '/v1/effects/retry', { id: e.idempotencyKey });
              return `${r.retried} effect pending again`;
            })
          : null,
      ),
    ),
  );
  return [
    h('h2', {}, 'Effects'),
    h(
      'p',
      {},
      `pending ${c.pending} · failed ${c.failed} · done ${c.done} · suppressed ${c.suppressed} `,
      adminButton('Retry all failed', async () => {
        const r = await api('POST', '/v1/effects/retry', { allFailed: true });
        return `${r.retried} effect(s) pending again`;
      }),
    ),
    h('nav', { class: 'toolbar' }, filters),
    table(
      ['id', 'kind', 'status', 'attempts', 'position', 'last error', 'next attempt', ''],
      rows,
      'no effects',
    ),
  ];
}

// ---- routing ----

function route() {
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, query = ''] = hash.split('?');
  const params = new URLSearchParams(query);
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'consumer' && parts[1]) return { nav: 'consumers', load: () => consumerPage(parts[1]) };
  if (parts[0] === 'streams') return { nav: 'streams', load: () => streamsPage(parts[1], params) };
  if (parts[0] === 'effects') return { nav: 'effects', load: () => effectsPage(params) };
  return { nav: 'consumers', load: () => consumersPage() };
}

let rendering = null;

async function render() {
  // A details element the operator opened stays open across refreshes of the same page.
  const view = document.getElementById('view');
  const { nav, load } = route();
  for (const a of document.querySelectorAll('nav a[data-nav]'))
    a.classList.toggle('current', a.dataset.nav === nav);
  const open = new Set([...view.querySelectorAll('details[open] > summary')].map((s) => s.textContent));
  try {
    const content = await load();
    view.replaceChildren(...content.flat().filter(Boolean));
    for (const s of view.querySelectorAll('details > summary'))
      if (open.has(s.textContent)) s.parentElement.open = true;
  } catch (err) {
    const hint = err.status === 401 ? ' — enter a token above' : '';
    view.replaceChildren(h('p', { class: 'error-text', id: 'view-error' }, `${err.message}${hint}`));
  }
  try {
    const health = await fetch('/health').then((r) => r.json());
    document.getElementById('head').textContent =
      `Head position: ${health.store?.head ?? '?'} · store ${health.status}`;
  } catch {
    document.getElementById('head').textContent = 'Head position: unknown (server unreachable)';
  }
  document.body.dataset.rendered = String(Date.now());
}

function renderSoon() {
  rendering = (rendering ?? Promise.resolve()).then(render, render);
  return rendering;
}

function schedule() {
  clearInterval(refreshTimer);
  // The stream browser stays put while it is read; the other pages follow the server.
  refreshTimer = setInterval(() => {
    if (route().nav !== 'streams' && !document.hidden) void renderSoon();
  }, REFRESH_MS);
}

setupTokenForm();
window.addEventListener('hashchange', () => {
  document.getElementById('flash').hidden = true;
  void renderSoon();
});
await loadSession();
await renderSoon();
schedule();
