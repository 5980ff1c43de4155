// af ui: the page's whole behaviour. Every piece of record content goes into the page as text
// (textContent, text nodes); no data is ever parsed as HTML here. A message's HTML is shown
// only inside an iframe with `sandbox=""` (no scripts, an opaque origin) and its own CSP.
'use strict';

// The rows the page keeps: the oldest are dropped past this, so a long session stays small.
const MAX_RECORDS = 2000;
const MAX_MESSAGES = 1000;
// Added to a message's HTML: nothing may load, inline styles may apply.
const FRAME_CSP =
  '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; img-src data:">';

const state = {
  records: [], // decisions, newest first
  messages: [], // captured messages, newest first
  since: 0, // the journal position the live stream resumes after
  selected: null, // the decision shown in detail
  message: null, // the message shown
  events: null,
};

// --- small helpers ------------------------------------------------------------------------

/** A new element: `props` are attributes (`text` sets its text, `on*` add listeners); every
 *  child that is not a node is added as text. */
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') node.textContent = String(value);
    else if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (id) => document.getElementById(id);

async function getJson(path) {
  const resp = await fetch(path, { credentials: 'same-origin', cache: 'no-store' });
  const body = await resp.json().catch(() => null);
  if (!resp.ok) {
    const why = body && body.statement ? `${body.code} ${body.statement} Next: ${body.next}` : resp.statusText;
    throw new Error(why);
  }
  return body;
}

function showProblem(err) {
  const p = $('problem');
  if (!err) { p.hidden = true; return; }
  p.textContent = String(err.message || err);
  p.hidden = false;
}

function copyButton(label, text) {
  const button = el('button', { type: 'button', text: label });
  button.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(text());
      button.textContent = 'Copied';
    } catch (_) {
      button.textContent = 'Select and copy';
    }
    setTimeout(() => { button.textContent = label; }, 1500);
  });
  return button;
}

function time(at) { return (at || '').slice(11, 19); }

function fields(pairs) {
  const dl = el('dl', { class: 'fields' });
  for (const [name, value] of pairs) {
    if (value === undefined || value === null || value === '') continue;
    dl.append(el('dt', { text: name }), el('dd', {}, value));
  }
  return dl;
}

/** A link for an http(s) URL; anything else (javascript:, data:) stays text. */
function safeLink(url) {
  try {
    const parsed = new URL(url);
    if (parsed.protocol === 'http:' || parsed.protocol === 'https:') {
      return el('a', { href: parsed.href, target: '_blank', rel: 'noopener noreferrer', text: url });
    }
  } catch (_) { /* not a URL */ }
  return el('span', { text: url });
}

// --- requests -----------------------------------------------------------------------------

/**
 * How a decision ended, in the filter's three groups, from the journal's `outcome`: left the
 * environment (forwarded, tunnel), refused (refused, failed, handshake_failed) or answered in
 * the sidecar (answered, opened, closed). A record from before `outcome` is read by `allowed`.
 */
function outcome(d) {
  switch (d.outcome) {
    case 'forwarded': case 'tunnel': return 'left';
    case 'refused': case 'failed': case 'handshake_failed': return 'refused';
    case undefined: case null: return d.allowed ? 'left' : d.code ? 'refused' : 'local';
    default: return 'local';
  }
}
const MARKS = { left: '✓', refused: '✗', local: '○' };

function modeOf(d) { return d.mode || (d.allowed ? 'allow' : 'block'); }

function hostPort(d) {
  const host = d.host.includes(':') ? `[${d.host}]` : d.host;
  return `${host}:${d.port}`;
}

/** Who sent it: the service whose address the client is (the runtime's status), else the
 * client's address. */
function sender(d) { return d.service || String(d.client).replace(/:\d+$/, ''); }

function filters() {
  const form = $('filters');
  return {
    host: form.host.value.trim().toLowerCase(),
    mode: form.mode.value,
    outcome: form.outcome.value,
    service: form.service.value.trim(),
    via: form.via.value,
  };
}

function matches(d, f) {
  return (!f.host || d.host.includes(f.host))
    && (!f.mode || modeOf(d) === f.mode)
    && (!f.outcome || outcome(d) === f.outcome)
    && (!f.service || d.service === f.service || String(d.client).includes(f.service))
    && (!f.via || d.via === f.via);
}

function requestRow(record) {
  const o = outcome(record);
  const row = el('tr', { 'data-seq': record.seq, 'data-outcome': o, onclick: () => selectRecord(record.seq) },
    el('td', { class: 'num', text: record.seq }),
    el('td', { class: 'mono', text: time(record.at) }),
    el('td', { class: `mark-${o}`, title: o, text: MARKS[o] }),
    el('td', { text: modeOf(record) }),
    el('td', { class: 'request mono' }, `${record.method || '(tls)'} ${hostPort(record)}${record.path || ''}`),
    el('td', { class: 'num', text: record.status ?? '' }),
    el('td', { class: 'from', title: String(record.client), text: sender(record) }),
    el('td', { text: record.via }));
  if (state.selected === record.seq) row.setAttribute('aria-selected', 'true');
  return row;
}

function renderRequests() {
  const f = filters();
  const body = $('requests').tBodies[0];
  body.replaceChildren(...state.records.filter((r) => matches(r, f)).map(requestRow));
  $('requests-empty').hidden = body.rows.length > 0;
  $('count-requests').textContent = state.records.length ? `(${state.records.length})` : '';
}

function addRecord(record) {
  state.records.unshift(record);
  if (state.records.length > MAX_RECORDS) state.records.length = MAX_RECORDS;
  const body = $('requests').tBodies[0];
  if (matches(record, filters())) {
    const row = requestRow(record);
    row.classList.add('fresh');
    body.prepend(row);
    while (body.rows.length > MAX_RECORDS) body.lastElementChild.remove();
  }
  $('requests-empty').hidden = body.rows.length > 0;
  $('count-requests').textContent = `(${state.records.length})`;
}

async function selectRecord(seq, mode) {
  state.selected = seq;
  for (const row of $('requests').tBodies[0].rows) {
    row.toggleAttribute('aria-selected', Number(row.dataset.seq) === seq);
  }
  const panel = $('request-detail');
  try {
    const query = mode ? `?mode=${encodeURIComponent(mode)}` : '';
    const detail = await getJson(`api/records/${seq}${query}`);
    if (state.selected !== seq) return;
    panel.replaceChildren(...requestDetail(detail));
    panel.hidden = false;
    showProblem(null);
  } catch (err) { showProblem(err); }
}

function requestDetail(detail) {
  const r = detail.record;
  const o = outcome(r);
  const parts = [
    el('div', { class: 'row' },
      el('h2', { id: 'detail-title' }, `${r.method || '(tls)'} ${detail.url}`),
      el('button', { type: 'button', text: 'Close', onclick: () => { $('request-detail').hidden = true; state.selected = null; renderRequests(); } })),
    fields([
      ['outcome', el('span', { class: `mark-${o}` }, `${MARKS[o]} ${o === 'left' ? 'left the environment' : o === 'refused' ? 'refused' : 'answered in the sidecar'}${r.outcome ? ` (${r.outcome.replace('_', ' ')})` : ''}`)],
      ['mode', modeOf(r)],
      ['rule', el('code', { id: 'detail-rule', text: r.rule || 'default' })],
      ['reason', r.reason],
      ['status', r.status],
      ['bytes', `${r.bytes_up} up · ${r.bytes_down} down`],
      ['time', `${r.duration_ms} ms`],
      ['via', r.via],
      ['service', el('span', { id: 'detail-service', text: r.service || '(no service of this environment)' })],
      ['client', r.client],
      ['tls', r.tls ? 'yes' : 'no'],
      ['at', r.at],
      ['seq', r.seq],
    ]),
  ];
  if (detail.refusal) {
    const f = detail.refusal;
    parts.push(el('h3', { text: 'Refusal' }), el('div', { class: 'refusal', id: 'detail-refusal' },
      el('div', { class: 'code', id: 'detail-code', text: f.code }),
      r.error ? el('p', { text: r.error }) : null,
      f.meaning && f.meaning !== r.error ? el('p', { text: f.meaning }) : null,
      f.next ? el('p', { class: 'next' }, `Next: ${f.next}`) : null));
  } else if (r.error) {
    parts.push(el('h3', { text: 'Error' }), el('p', { text: r.error }));
  }
  parts.push(el('h3', { text: 'Why this rule (af net explain)' }));
  const e = detail.explanation;
  if (e) {
    parts.push(el('p', { class: 'mono', id: 'detail-explain' }, `${e.method} ${e.host}:${e.port}${e.path}  →  ${e.mode}  (${e.rule})`));
    if (!e.matched.length) parts.push(el('p', { text: 'no rule matches' }));
    parts.push(el('ul', { class: 'matched' }, e.matched.map((m) => el('li', { class: m.winner ? 'winner mono' : 'mono' },
      `${m.winner ? '✓' : '  '} rules[${m.index}] ${m.host}  ${m.mode}  ${m.specificity}`))));
    parts.push(el('p', { text: e.why }));
    if (e.open_tls) parts.push(el('p', { text: 'The sidecar opens TLS to this host to decide or answer its requests.' }));
  } else {
    parts.push(el('p', { class: 'empty', text: 'No af.yaml was read: run af ui in the repository to see how its catalogue decides this request.' }));
  }
  const s = detail.snippet;
  const select = el('select', { 'aria-label': 'mode of the rule', onchange: (ev) => selectRecord(r.seq, ev.target.value) },
    ['allow', 'mock', 'capture', 'sandbox', 'synth', 'block'].map((m) => el('option', { value: m, selected: m === s.mode, text: m })));
  parts.push(el('h3', { text: 'A rule for exactly this request' }));
  if (s.yaml) {
    const pre = el('pre', { id: 'detail-snippet', text: s.yaml });
    parts.push(el('div', { class: 'row' }, select, copyButton('Copy for af.yaml', () => s.yaml)), pre);
  } else {
    parts.push(el('div', { class: 'row' }, select), el('p', { class: 'empty' }, `No rule: ${s.problem}`));
  }
  return parts;
}

// --- inbox --------------------------------------------------------------------------------

function messageItem(record) {
  const m = record.message;
  const item = el('li', { 'data-seq': record.seq, tabindex: 0, onclick: () => selectMessage(record.seq) },
    el('span', { class: 'subject', text: m.subject || '(no subject)' }),
    el('span', { class: 'when mono', text: time(record.at) }),
    el('span', { class: 'who' }, `${m.provider} → ${(m.to || []).join(', ')}`),
    m.code ? el('span', { class: 'badge', text: m.code }) : el('span'));
  if (state.message === record.seq) item.setAttribute('aria-selected', 'true');
  return item;
}

function renderMessages() {
  $('messages').replaceChildren(...state.messages.map(messageItem));
  $('messages-empty').hidden = state.messages.length > 0;
  $('count-inbox').textContent = state.messages.length ? `(${state.messages.length})` : '';
}

function addMessage(record) {
  // The inbox was read apart from the stream's starting point: a message may be in both.
  if (state.messages.some((m) => m.seq === record.seq)) return;
  state.messages.unshift(record);
  if (state.messages.length > MAX_MESSAGES) state.messages.length = MAX_MESSAGES;
  renderMessages();
}

async function selectMessage(seq) {
  state.message = seq;
  for (const item of $('messages').children) {
    item.toggleAttribute('aria-selected', Number(item.dataset.seq) === seq);
  }
  try {
    const record = await getJson(`api/messages/${seq}`);
    if (state.message !== seq) return;
    const panel = $('message');
    panel.replaceChildren(...messageView(record));
    panel.hidden = false;
    showProblem(null);
  } catch (err) { showProblem(err); }
}

function messageView(record) {
  const m = record.message;
  const parts = [
    el('h2', { id: 'message-subject', text: m.subject || '(no subject)' }),
    fields([
      ['from', m.from],
      ['to', (m.to || []).join(', ')],
      ['kind', `${m.provider} ${m.kind}`],
      ['via', `${record.via} ${record.host}`],
      ['rule', record.rule],
      ['at', record.at],
    ]),
  ];
  if (m.code) {
    parts.push(el('div', { class: 'otp' },
      el('span', { class: 'value', id: 'message-code', text: m.code }),
      copyButton('Copy code', () => m.code)));
  }
  if (m.links && m.links.length) {
    parts.push(el('h3', { text: 'Links, best first' }), el('ol', { class: 'links', id: 'message-links' },
      m.links.map((link, i) => el('li', {}, safeLink(link), i === 0 ? el('span', { class: 'tag', text: 'most likely the verification link' }) : null))));
  }
  if (m.html) {
    parts.push(el('h3', { text: 'HTML (scripts off)' }), el('iframe', {
      class: 'html', id: 'message-html', title: 'the message as HTML', sandbox: '', referrerpolicy: 'no-referrer',
      srcdoc: FRAME_CSP + m.html,
    }));
  }
  if (m.text) parts.push(el('h3', { text: 'Text' }), el('pre', { id: 'message-text', text: m.text }));
  return parts;
}

// --- overview -----------------------------------------------------------------------------

async function loadOverview() {
  const root = $('overview');
  try {
    const o = await getJson('api/overview');
    root.replaceChildren(el('div', { class: 'cards' }, environmentCard(o), countersCard(o), catalogueCard(o)));
    showProblem(null);
  } catch (err) { showProblem(err); }
}

function environmentCard(o) {
  const card = el('section', { class: 'card', id: 'overview-environment' }, el('h2', { text: 'Environment' }),
    fields([['env', o.env], ['runtime', o.runtime], ['where', o.location]]));
  if (o.status_error) card.append(el('p', { class: 'problem' }, `${o.status_error.code} ${o.status_error.statement}`));
  const s = o.status;
  if (s) {
    const rows = [s.sidecar && { ...s.sidecar, name: `${s.sidecar.name} (sidecar)` }, ...s.services].filter(Boolean);
    card.append(el('table', {}, el('thead', {}, el('tr', {}, el('th', { text: 'service' }), el('th', { text: 'state' }), el('th', { text: 'url' }))),
      el('tbody', {}, rows.map((svc) => el('tr', {},
        el('td', { text: svc.name }),
        el('td', { class: svc.running ? 'state-running' : 'state-other', text: svc.state }),
        el('td', {}, svc.url ? safeLink(svc.url) : ''))))));
    if (o.containment) card.append(el('p', { class: o.containment.held ? 'state-running' : 'problem', id: 'overview-containment', text: o.containment.line }));
    if (s.journal) card.append(el('p', { class: 'empty' }, `journal: ${s.journal.storage} ${s.journal.name}`));
  } else if (!o.env) {
    card.append(el('p', { class: 'empty', text: 'Served for a sidecar alone, without a runtime.' }));
  }
  return card;
}

function countersCard(o) {
  // Prometheus text, one sample a line: the value is the last field.
  const rows = o.counters.map((line) => {
    const cut = line.lastIndexOf(' ');
    return el('tr', {}, el('td', { class: 'mono', text: line.slice(0, cut) }), el('td', { class: 'num', text: line.slice(cut + 1) }));
  });
  return el('section', { class: 'card', id: 'overview-counters' }, el('h2', { text: 'Sidecar counters (/metrics)' }),
    el('table', {}, el('tbody', {}, rows)));
}

function catalogueCard(o) {
  const card = el('section', { class: 'card', id: 'overview-catalogue' }, el('h2', { text: 'Egress catalogue, in deciding order' }));
  const c = o.catalogue;
  if (!c) {
    card.append(el('p', { class: 'empty', text: 'No af.yaml was read.' }));
    return card;
  }
  const limits = (r) => [r.paths && `paths ${r.paths.join(',')}`, r.methods && `methods ${r.methods.join(',')}`, r.note && `# ${r.note}`].filter(Boolean).join('  ');
  card.append(el('table', {},
    el('thead', {}, el('tr', {}, ['#', 'rule', 'host', 'mode', 'limits', 'specificity'].map((h) => el('th', { text: h })))),
    el('tbody', {}, c.rules.map((r) => el('tr', {},
      el('td', { class: 'num', text: r.order }), el('td', { class: 'mono', text: r.rule }), el('td', { class: 'mono', text: r.host }),
      el('td', { text: r.mode }), el('td', { class: 'mono', text: limits(r) }), el('td', { text: r.specificity }))),
    el('tr', {}, el('td', {}), el('td', { text: 'default' }), el('td', { text: '(no rule matches)' }), el('td', { text: c.default }), el('td', {}), el('td', {})))));
  if (c.allow_ipv6) card.append(el('p', { text: 'IPv6 destinations are allowed.' }));
  return card;
}

// --- live stream and views ----------------------------------------------------------------

function follow() {
  const live = $('live');
  const events = new EventSource(`api/events?since=${state.since}`);
  state.events = events;
  events.onopen = () => { live.dataset.state = 'live'; live.textContent = 'live'; };
  events.onerror = () => { live.dataset.state = 'down'; live.textContent = 'reconnecting…'; };
  events.onmessage = (ev) => {
    const record = JSON.parse(ev.data);
    state.since = Math.max(state.since, record.seq);
    if (record.kind === 'decision') addRecord(record);
    else if (record.kind === 'message') addMessage(record);
  };
}

const VIEWS = ['requests', 'inbox', 'overview'];

function show() {
  const name = VIEWS.includes(location.hash.slice(1)) ? location.hash.slice(1) : 'requests';
  for (const view of VIEWS) {
    $(`view-${view}`).hidden = view !== name;
    if (view === name) $(`tab-${view}`).setAttribute('aria-current', 'page');
    else $(`tab-${view}`).removeAttribute('aria-current');
  }
  document.title = `af ui · ${name}`;
  if (name === 'overview') loadOverview();
}

async function start() {
  window.addEventListener('hashchange', show);
  $('filters').addEventListener('input', renderRequests);
  $('filters').addEventListener('submit', (ev) => ev.preventDefault());
  show();
  try {
    const [records, messages] = await Promise.all([getJson('api/records'), getJson('api/messages')]);
    state.records = records.records.reverse();
    state.messages = messages.records.reverse();
    state.since = records.since;
    renderRequests();
    renderMessages();
    showProblem(null);
  } catch (err) { showProblem(err); }
  follow();
}

start();
