// The jobrunner dashboard: a small single-page app over the JSON API of
// `jobrunner web` (docs/web-api.md). Every text that comes from Redis is put
// into the page with textContent (through el() below), never as markup.
'use strict';

const S = { csrf: null, readOnly: true, timer: null, seq: 0 };

// el('td', {class: 'num'}, 'text', child, ...): a DOM element. Strings become
// text nodes; attributes are set with setAttribute (hrefs are built here,
// never taken whole from data).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined || k === false) continue;
    e.appendChild(typeof k === 'object' ? k : document.createTextNode(String(k)));
  }
  return e;
}

function show(...nodes) {
  const m = document.getElementById('main');
  m.replaceChildren(...nodes.flat().filter(Boolean));
  if (S.pending) { // the message of an action, kept across the redraw that follows it
    m.insertBefore(el('div', { class: S.pending.bad ? 'msg bad' : 'msg', role: 'status' }, S.pending.text), m.firstChild);
    S.pending = null;
  }
}

function status(text, bad) {
  const s = document.getElementById('status');
  s.textContent = text;
  s.className = bad ? 'bad' : '';
}

async function api(path) {
  const r = await fetch(path, { credentials: 'same-origin' });
  let body = null;
  try { body = await r.json(); } catch (e) { body = { error: 'not JSON (HTTP ' + r.status + ')' }; }
  if (!r.ok && r.status !== 404) throw new Error(body && body.error ? body.error : 'HTTP ' + r.status);
  return body;
}

async function post(path, body) {
  const r = await fetch(path, {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': S.csrf },
    body: JSON.stringify(body),
  });
  let out = null;
  try { out = await r.json(); } catch (e) { out = { error: 'HTTP ' + r.status }; }
  if (!r.ok) throw new Error(out.error || 'HTTP ' + r.status);
  return out;
}

// Text of a JSON value that may be {"base64": ...} (bytes that are not UTF-8).
function txt(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'object' && v.base64 !== undefined) return 'base64:' + v.base64;
  return String(v);
}
// A payload or error view: {"text": ...} or {"hex": ...}.
function view(v) {
  if (!v) return '';
  return v.text !== undefined ? v.text : 'hex: ' + v.hex;
}
function utc(ms) { return ms === null || ms === undefined ? '' : new Date(Number(ms)).toISOString(); }
function age(ms) {
  if (ms === null || ms === undefined) return '-';
  const s = Math.round(ms / 1000);
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
  if (s < 86400) return Math.floor(s / 3600) + 'h' + String(Math.floor(s / 60) % 60).padStart(2, '0') + 'm';
  return Math.floor(s / 86400) + 'd' + String(Math.floor(s / 3600) % 24).padStart(2, '0') + 'h';
}
function num(v) { return v === null || v === undefined ? '?' : String(v); }
const enc = encodeURIComponent;
function qlink(q, state, label) { return el('a', { href: '#/queue/' + enc(q) + '/' + state }, label); }
function joblink(q, id, entry) {
  return el('a', { href: '#/job/' + enc(q) + '/' + enc(id) + (entry ? '?entry=' + enc(entry) : ''), class: 'mono' }, txt(id));
}

function flash(text, bad) {
  S.pending = { text, bad };
  const m = document.getElementById('main');
  m.insertBefore(el('div', { class: bad ? 'msg bad' : 'msg', role: 'status' }, text), m.firstChild);
}

// An action button: hidden on a read-only dashboard; asks first when `ask`.
function action(label, ask, fn, cls) {
  if (S.readOnly) return null;
  return el('button', {
    class: cls || null, 'data-action': label,
    onclick: async (ev) => {
      if (ask && !window.confirm(ask)) return;
      ev.target.disabled = true;
      try { await fn(); } catch (e) { flash(label + ' failed: ' + e.message, true); ev.target.disabled = false; }
    },
  }, label);
}

// ---- Overview -------------------------------------------------------------

async function overview(seq) {
  const [o, h] = await Promise.all([api('/api/overview'), history().catch(() => null)]);
  if (seq !== S.seq) return;
  const rows = o.queues.map((q) => el('tr', { 'data-queue': txt(q.queue) },
    el('td', {}, qlink(txt(q.queue), 'ready', txt(q.queue))),
    el('td', { class: 'num', 'data-col': 'ready' }, qlink(txt(q.queue), 'ready', num(q.ready))),
    el('td', { class: 'num', 'data-col': 'running' }, qlink(txt(q.queue), 'running', num(q.running))),
    el('td', { class: 'num', 'data-col': 'delayed' }, qlink(txt(q.queue), 'delayed', num(q.delayed))),
    el('td', { class: 'num', 'data-col': 'dead' }, qlink(txt(q.queue), 'dead', num(q.dead))),
    el('td', { class: 'num' }, num(q.processed)),
    el('td', { class: 'num' }, num(q.failed)),
    el('td', { class: 'num' }, q.jobs_per_second === null ? '?' : q.jobs_per_second.toFixed(1)),
    el('td', { class: 'num', 'data-col': 'oldest' }, age(q.oldest_ready_ms)),
    el('td', { 'data-col': 'paused' }, q.paused ? el('span', { class: 'pill paused' }, 'paused since ' + utc(q.paused_since)) : q.paused === null ? '?' : 'no')));
  const r = o.redis || {};
  show(
    el('h1', {}, 'Overview'),
    el('div', { class: 'cards' },
      card('Redis', r.error ? 'error: ' + txt(r.error) : txt(r.version) + ' (' + txt(r.role) + ')'),
      card('Redis memory', r.error ? '?' : txt(r.used_memory_human) + (r.maxmemory ? ' of ' + Math.round(r.maxmemory / 1048576) + ' MiB' : '')),
      card('Live workers', o.workers.live + ' (' + o.workers.busy + ' of ' + o.workers.capacity + ' busy)'),
      card('Schedulers', String(o.workers.schedulers))),
    el('table', { id: 'queues' },
      el('thead', {}, el('tr', {}, ['Queue', 'Ready', 'Running', 'Delayed (+ retrying)', 'Dead', 'Processed', 'Failed attempts', 'Jobs/s (1 min)', 'Oldest ready', 'Paused']
        .map((h, i) => el('th', { class: i > 0 && i < 9 ? 'num' : null }, h)))),
      el('tbody', {}, rows.length ? rows : el('tr', {}, el('td', { colspan: 10 }, 'No queue has been used yet.')))),
    el('h2', {}, 'Processed and failed'),
    h ? chart(h) : el('p', { class: 'note' }, 'The per-minute history could not be read.'),
    el('p', { class: 'note' }, 'Counts are read from Redis (XLEN, XPENDING, ZCARD, the time wheel), no scan; updated every 2 s, the chart every minute.'));
  status('updated ' + new Date().toISOString().slice(11, 19) + ' UTC');
}
// The per-minute chart of /api/history (processed and failed, 24 h), as
// SVG built node by node. Read again once a minute, not at every poll.
const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const k of kids) e.appendChild(typeof k === 'object' ? k : document.createTextNode(String(k)));
  return e;
}
async function history() {
  if (!S.history || Date.now() - S.historyAt > 60000) {
    S.history = await api('/api/history');
    S.historyAt = Date.now();
  }
  return S.history;
}
function chart(h) {
  const W = 1200, H = 160, n = h.processed.length;
  const max = Math.max(1, ...h.processed, ...h.failed);
  const x = (i) => (i * (W - 60)) / Math.max(1, n - 1) + 50;
  const y = (v) => H - 20 - (v * (H - 40)) / max;
  const line = (vals) => vals.map((v, i) => x(i).toFixed(1) + ',' + y(v).toFixed(1)).join(' ');
  const g = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, width: '100%', role: 'img', id: 'history-chart' },
    svg('title', {}, 'Jobs processed and failed attempts per minute over the last 24 h'),
    svg('line', { x1: 50, y1: H - 20, x2: W - 10, y2: H - 20, stroke: '#b9c1cf' }),
    svg('text', { x: 4, y: 24, 'font-size': 11, fill: '#6b7385' }, String(max) + '/min'),
    svg('text', { x: 4, y: H - 22, 'font-size': 11, fill: '#6b7385' }, '0'),
    svg('text', { x: 50, y: H - 4, 'font-size': 11, fill: '#6b7385' }, utc(h.start_minute * 60000).slice(0, 16) + 'Z'),
    svg('text', { x: W - 10, y: H - 4, 'font-size': 11, fill: '#6b7385', 'text-anchor': 'end' }, 'now'),
    svg('polyline', { points: line(h.processed), fill: 'none', stroke: '#2457c5', 'stroke-width': 1.5 }),
    svg('polyline', { points: line(h.failed), fill: 'none', stroke: '#b3261e', 'stroke-width': 1.5 }));
  const total = (a) => a.reduce((s, v) => s + v, 0);
  return el('div', { class: 'card chart' },
    el('div', { class: 'k' }, 'Per minute over 24 h, every queue: processed (blue) ' + total(h.processed) + ', failed attempts (red) ' + total(h.failed)),
    g);
}

function card(k, v) { return el('div', { class: 'card' }, el('div', { class: 'k' }, k), el('div', { class: 'v' }, v)); }

// ---- Queue ---------------------------------------------------------------

const STATES = ['ready', 'running', 'delayed', 'retrying', 'dead', 'finished'];
const BULK = ['delayed', 'retrying', 'dead']; // the states jr_bulk acts on

async function queuePage(seq, q, state, after, part) {
  const [page, ov] = await Promise.all([
    api('/api/jobs?queue=' + enc(q) + '&state=' + enc(state) + (after ? '&after=' + enc(after) : '') + (part ? '&part=' + enc(part) : '')),
    api('/api/overview')]);
  if (seq !== S.seq) return;
  const qs = ov.queues.find((x) => txt(x.queue) === q);
  const paused = qs && qs.paused;
  const fh = el('input', { id: 'f-handler', placeholder: 'handler is', size: 16 });
  const fp = el('input', { id: 'f-payload', placeholder: 'payload contains', size: 24 });
  const tbody = el('tbody');
  const dead = state === 'dead', fin = state === 'finished';
  const bulkable = BULK.includes(state) && !S.readOnly;
  const runLabel = dead ? 'Retry' : 'Run now';
  const selectAll = bulkable ? el('input', { type: 'checkbox', id: 'select-all', title: 'select the rows shown' }) : null;
  const rows = page.jobs.map((j) => {
    const box = bulkable ? el('input', { type: 'checkbox', class: 'sel', 'data-id': dead ? j.entry : txt(j.job) }) : null;
    const tr = el('tr', { 'data-job': txt(j.job) },
      bulkable ? el('td', {}, box) : null,
      el('td', {}, joblink(q, j.job, dead ? j.entry : null)),
      el('td', {}, state === 'delayed' || state === 'retrying' ? utc(j.due_ms) : utc(j.at_ms)),
      el('td', {}, txt(j.handler)),
      el('td', { class: 'num' }, txt(j.attempt) || '1'),
      fin ? el('td', {}, txt(j.outcome) + (j.duration_ms ? ' in ' + txt(j.duration_ms) + ' ms' : '') + (j.worker ? ' by ' + txt(j.worker) : ''))
          : el('td', { class: 'mono' }, view(j.payload).slice(0, 200)),
      el('td', {}, state === 'running' ? txt(j.consumer) + ' (idle ' + age(j.idle_ms) + ')' : dead ? txt(j.why) + ' ' + txt(j.error)
        : fin ? (j.result ? 'result: ' + view(j.result).slice(0, 200) : '') + (j.error ? ' error: ' + view(j.error) : '') : txt(j.error)));
    tr._job = j;
    return tr;
  });
  const shownNote = el('span', { class: 'note', id: 'filter-note' });
  function filter() {
    const h = fh.value.trim(), p = fp.value;
    let n = 0;
    for (const tr of rows) {
      const j = tr._job;
      const ok = (!h || txt(j.handler) === h) && (!p || view(j.payload).includes(p));
      tr.hidden = !ok;
      if (!ok) { const b = tr.querySelector('input.sel'); if (b) b.checked = false; }
      n += ok;
    }
    shownNote.textContent = 'The filters search the ' + rows.length + ' jobs of this page (handler: its exact name; ' +
      'payload: a substring of the stored payload): ' + n + ' shown.' +
      (bulkable ? ' "… all matching" acts on every ' + state + ' job of the queue that the filters match, not only this page.' : '');
  }
  fh.addEventListener('input', filter);
  fp.addEventListener('input', filter);
  if (selectAll) selectAll.addEventListener('change', () => {
    for (const tr of rows) { const b = tr.querySelector('input.sel'); if (b && !tr.hidden) b.checked = selectAll.checked; }
  });
  tbody.replaceChildren(...rows);
  filter();
  const selected = () => rows.filter((tr) => !tr.hidden && tr.querySelector('input.sel:checked')).map((tr) => tr.querySelector('input.sel').dataset.id);
  const described = () => (fh.value.trim() ? ' of handler ' + fh.value.trim() : '') + (fp.value ? ' whose payload contains "' + fp.value + '"' : '');
  const bulkCall = async (action, all) => {
    const body = { queue: q, state, action };
    if (all) { body.all = true; if (fh.value.trim()) body.handler = fh.value.trim(); if (fp.value) body.match = fp.value; }
    else { body.ids = selected(); if (!body.ids.length) throw new Error('select some rows first'); }
    const what = all ? 'every ' + state + ' job of ' + q + described() + ' (the whole queue, not only this page)' : body.ids.length + ' selected ' + state + ' job(s) of ' + q;
    if (!window.confirm((action === 'delete' ? 'Delete ' : runLabel + ': ') + what + '?')) return;
    const r = await post('/api/bulk', body);
    flash((action === 'delete' ? 'deleted ' : (dead ? 'retried ' : 'made ready ')) + r.acted + ' of ' + r.matched + ' matching (' + r.seen + ' looked at)');
    route();
  };
  const bulk = bulkable ? el('div', { class: 'toolbar', id: 'bulk' },
    action(runLabel + ' selected', null, () => bulkCall(dead ? 'retry' : 'run-now', false)),
    action('Delete selected', null, () => bulkCall('delete', false), 'danger'),
    action(runLabel + ' all matching', null, () => bulkCall(dead ? 'retry' : 'run-now', true)),
    action('Delete all matching', null, () => bulkCall('delete', true), 'danger')) : null;
  const heads = [selectAll, 'Job', state === 'delayed' || state === 'retrying' ? 'Due (UTC)' : dead ? 'Dead at (UTC)' : fin ? 'Finished (UTC)' : 'Enqueued (UTC)',
    'Handler', 'Attempt', fin ? 'Outcome' : 'Payload', state === 'running' ? 'Worker' : dead ? 'Why, error' : fin ? 'Result, error' : 'Last error'];
  show(
    el('h1', {}, 'Queue ', el('span', { class: 'mono', id: 'queue-name' }, q), ' ',
      paused ? el('span', { class: 'pill paused', id: 'paused' }, 'paused') : null),
    el('div', { class: 'toolbar' },
      paused ? action('Resume', null, async () => { await post('/api/resume', { queue: q }); route(); })
             : action('Pause', 'Pause queue ' + q + '? Workers start none of its jobs until it is resumed.', async () => { await post('/api/pause', { queue: q }); route(); }),
      qs ? el('span', { class: 'note' }, 'ready ' + num(qs.ready) + ' · running ' + num(qs.running) + ' · delayed ' + num(qs.delayed) + ' · dead ' + num(qs.dead)) : null),
    el('div', { class: 'tabs' }, STATES.map((s) => el('a', { href: '#/queue/' + enc(q) + '/' + s, class: s === state ? 'active' : null }, s))),
    page.partitions > 1 ? el('div', { class: 'tabs', id: 'partitions' }, 'partition: ',
      Array.from({ length: page.partitions }, (_, i) => el('a', { href: '#/queue/' + enc(q) + '/' + state + '?part=' + i, class: i === page.part ? 'active' : null }, String(i)))) : null,
    el('div', { class: 'toolbar' }, fh, fp, shownNote),
    bulk,
    el('table', { id: 'jobs' }, el('thead', {}, el('tr', {}, heads.filter((h) => h !== null).map((h) => el('th', {}, h)))), tbody),
    rows.length ? null : el('p', {}, 'No ' + state + ' jobs' + (after ? ' after this cursor.' : '.')),
    el('div', { class: 'toolbar' },
      after ? el('a', { href: '#/queue/' + enc(q) + '/' + state }, '« first page') : null,
      page.next ? el('a', { id: 'next', href: '#/queue/' + enc(q) + '/' + state + '?after=' + enc(page.next) + (page.part ? '&part=' + page.part : '') }, 'next page »') : el('span', { class: 'note' }, '(end)')),
    state === 'retrying' ? el('p', { class: 'note' }, 'Retrying: the jobs of the delayed page past their first attempt (a page may show fewer).') : null,
    fin ? el('p', { class: 'note' }, 'Finished jobs are kept only for queues and handlers with keep_finished, newest first.') : null);
  status('page of ' + page.jobs.length);
}

// ---- Job -----------------------------------------------------------------

async function jobPage(seq, q, id, entry) {
  const j = await api('/api/job?queue=' + enc(q) + '&id=' + enc(id) + (entry ? '&entry=' + enc(entry) : ''));
  if (seq !== S.seq) return;
  if (!j.found) {
    show(el('h1', {}, 'Job ', el('span', { class: 'mono' }, id)), el('p', { id: 'job-state' }, 'not found in queue ' + q + ': not waiting, running, dead, nor kept as finished (keep_finished)'));
    return;
  }
  const kv = (k, v) => [el('dt', {}, k), el('dd', { 'data-k': k }, v)];
  if (j.state === 'finished') {
    const f = j.finished || {};
    show(el('h1', {}, 'Job ', el('span', { class: 'mono', id: 'job-id' }, txt(j.job)), ' ', el('span', { class: 'pill', id: 'job-state' }, 'finished')),
      el('dl', { class: 'kv' }, kv('queue', qlink(q, 'finished', q)), kv('outcome', txt(f.outcome)), kv('handler', txt(f.handler)),
        kv('attempt', txt(f.attempt)), kv('duration', txt(f.duration_ms) + ' ms'), kv('worker', txt(f.worker)),
        kv('finished at', utc(f.at_ms)), f.error ? kv('error', view(f.error)) : null),
      el('h2', {}, 'Result'), el('pre', { class: 'payload', id: 'result' }, f.result ? view(f.result) : '(none set)'));
    status('job finished');
    return;
  }
  const acts = {
    'run-now': () => action('Run now', null, async () => { await post('/api/job/run-now', { queue: q, id }); route(); flash('made ready now'); }),
    cancel: () => action('Cancel', 'Cancel job ' + id + '?', async () => { const r = await post('/api/job/cancel', { queue: q, id }); route(); flash('cancel: ' + txt(r.result)); }, 'danger'),
    delete: () => action('Delete', 'Delete job ' + id + ' for good?', async () => {
      if (j.state === 'dead') await post('/api/dead/delete', { queue: q, entries: [j.entry] });
      else await post('/api/job/delete', { queue: q, id });
      location.hash = '#/queue/' + enc(q) + '/' + (j.state === 'retrying' ? 'delayed' : j.state);
    }, 'danger'),
    retry: () => action('Retry', null, async () => { const r = await post('/api/dead/retry', { queue: q, entries: [j.entry] }); flash('retried ' + r.retried); route(); }),
  };
  show(
    el('h1', {}, 'Job ', el('span', { class: 'mono', id: 'job-id' }, txt(j.job)), ' ', el('span', { class: 'pill ' + j.state, id: 'job-state' }, j.state)),
    el('div', { class: 'toolbar', id: 'actions' }, (j.actions || []).map((a) => acts[a] && acts[a]())),
    el('dl', { class: 'kv' },
      kv('queue', qlink(q, j.state === 'retrying' ? 'delayed' : j.state, q)),
      kv('handler', txt(j.handler)),
      kv('attempt', String(j.attempt) + (j.max_attempts ? ' of ' + j.max_attempts : '')),
      j.entry ? kv('entry', el('span', { class: 'mono' }, j.entry)) : null,
      j.enqueued_ms ? kv('enqueued', utc(j.enqueued_ms)) : null,
      j.due_ms !== null ? kv('due', utc(j.due_ms)) : null,
      j.dead_at_ms ? kv('dead at', utc(j.dead_at_ms)) : null,
      j.consumer ? kv('worker', txt(j.consumer) + ', idle ' + age(j.idle_ms) + ', delivered ' + j.deliveries + '×') : null,
      j.timeout_ms ? kv('timeout', age(j.timeout_ms)) : null,
      j.why !== null ? kv('why', txt(j.why)) : null,
      j.error ? kv('last error', view(j.error)) : null,
      kv('result', 'when it finishes (kept with keep_finished)')),
    el('h2', {}, 'Payload', j.payload && j.payload.hex !== undefined ? ' (not UTF-8: hex)' : ''),
    el('pre', { class: 'payload', id: 'payload' }, view(j.payload)),
    el('h2', {}, 'Stored fields'),
    el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, 'Field'), el('th', {}, 'Value'))),
      el('tbody', {}, j.fields.map(([k, v]) => el('tr', {}, el('td', { class: 'mono' }, txt(k)), el('td', { class: 'mono' }, view(v)))))));
  status('job ' + j.state);
}

// ---- Workers, Schedules -------------------------------------------------------

async function workersPage(seq) {
  const w = await api('/api/workers');
  if (seq !== S.seq) return;
  show(el('h1', {}, 'Workers and schedulers'),
    el('table', { id: 'workers' },
      el('thead', {}, el('tr', {}, ['Name', 'Role', 'Host', 'PID', 'Queues', 'Busy', 'Uptime', 'Version', 'Last seen'].map((h) => el('th', {}, h)))),
      el('tbody', {}, w.workers.map((p) => el('tr', {},
        el('td', { class: 'mono' }, txt(p.name)), el('td', {}, txt(p.role)), el('td', {}, txt(p.host)), el('td', { class: 'num' }, String(p.pid)),
        el('td', {}, p.queues.length ? p.queues.map(txt).join(', ') : '* (every queue)'),
        el('td', { 'data-col': 'busy' }, p.role === 'worker' ? (p.capacity ? p.running + ' of ' + p.capacity + ' busy' : p.running + ' running') : '-'),
        el('td', {}, age(p.uptime_ms)), el('td', {}, txt(p.version)), el('td', {}, age(p.last_seen_ms) + ' ago'))))),
    w.workers.length ? null : el('p', {}, 'No live worker or scheduler.'));
  status(w.workers.length + ' live');
}

async function schedulesPage(seq) {
  const s = await api('/api/schedules');
  if (seq !== S.seq) return;
  show(el('h1', {}, 'Schedules'),
    el('table', { id: 'schedules' },
      el('thead', {}, el('tr', {}, ['Name', 'Schedule', 'Zone', 'Queue', 'Handler', 'Next (UTC)', 'Next (local)', 'Last fired (UTC)', 'Last job', 'Enabled', ''].map((h) => el('th', {}, h)))),
      el('tbody', {}, s.schedules.map((c) => c.error ? el('tr', {}, el('td', {}, txt(c.name)), el('td', { colspan: 10 }, 'unreadable: ' + txt(c.error))) : el('tr', {},
        el('td', {}, txt(c.name)), el('td', { class: 'mono' }, txt(c.schedule)), el('td', {}, txt(c.timezone)), el('td', {}, qlink(txt(c.queue), 'ready', txt(c.queue))),
        el('td', {}, txt(c.handler)), el('td', {}, txt(c.next_utc) || '-'), el('td', {}, txt(c.next_local) || '-'),
        el('td', {}, txt(c.last_fired_utc) || '-'), el('td', {}, c.last_job_id ? joblink(txt(c.queue), txt(c.last_job_id)) : '-'),
        el('td', {}, c.enabled ? 'yes' : 'no'),
        el('td', {}, s.actions ? [
          c.enabled ? action('Disable', 'Disable schedule ' + txt(c.name) + '?', async () => { await post('/api/cron/disable', { name: txt(c.name) }); route(); })
                    : action('Enable', null, async () => { await post('/api/cron/enable', { name: txt(c.name) }); route(); }),
          ' ',
          action('Fire now', 'Enqueue one job of ' + txt(c.name) + ' now?', async () => { const r = await post('/api/cron/fire', { name: txt(c.name) }); flash('fired: job ' + txt(r.job)); route(); })] : null))))),
    s.schedules.length ? null : el('p', {}, 'No schedule.'));
  status(s.schedules.length + ' schedules');
}

// ---- routing ------------------------------------------------------------------

function route() {
  clearInterval(S.timer);
  S.timer = null;
  const seq = ++S.seq;
  const h = location.hash.replace(/^#/, '') || '/';
  const [path, query] = h.split('?');
  const parts = path.split('/').slice(1).map(decodeURIComponent);
  const params = new URLSearchParams(query || '');
  let nav = 'overview', run;
  if (parts[0] === 'queue' && parts[1]) nav = '', run = () => queuePage(seq, parts[1], STATES.includes(parts[2]) ? parts[2] : 'ready', params.get('after'), params.get('part'));
  else if (parts[0] === 'job' && parts[1] && parts.length >= 3) nav = '', run = () => jobPage(seq, parts[1], parts.slice(2).join('/'), params.get('entry'));
  else if (parts[0] === 'workers') nav = 'workers', run = () => workersPage(seq);
  else if (parts[0] === 'schedules') nav = 'schedules', run = () => schedulesPage(seq);
  else run = () => overview(seq);
  for (const a of document.querySelectorAll('header nav a')) a.classList.toggle('active', a.dataset.nav === nav);
  const go = () => run().catch((e) => { if (seq === S.seq) { status('error: ' + e.message, true); } });
  go();
  if (nav === 'overview' && !parts[0]) S.timer = setInterval(go, 2000);
}

async function start() {
  try {
    const s = await api('/api/session');
    S.csrf = s.csrf;
    S.readOnly = s.read_only;
    document.getElementById('footer').textContent = 'jobrunner ' + s.version + (s.read_only ? ' · read-only' : '');
  } catch (e) {
    status('error: ' + e.message, true);
    return;
  }
  window.addEventListener('hashchange', route);
  route();
}
start();
