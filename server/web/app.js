// app.js - autopart's dashboard: the list of searches (filters, free text,
// sort, keyset pages) and a search's page (live cost curves, schedule,
// shardings by layer, collectives, cost breakdowns, blocked propagation,
// the explanation).  Reads /api/ only; every string from the store goes
// into the page as text (textContent), never as markup.
'use strict';

const SVGNS = 'http://www.w3.org/2000/svg';
const TOKEN_KEY = 'autopart-token';
let timer = null;          // the current view's refresh
let viewSeq = 0;           // bumped on every navigation: late answers of an old view are dropped

// ------------------------------------------------------------ helpers

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat(Infinity)) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}

// Times and sizes as the CLI writes them (costmodel/evaluate.c's
// seconds_text, common/ap.c's ap_format_bytes), so that a figure on the page
// and one in a terminal or an issue read alike: three decimals in s, ms or
// us; whole bytes, else two decimals in KiB .. EiB.
function fmtTime(s) {
  if (!s) return '—';
  if (s < 1e-3) return (s * 1e6).toFixed(3) + ' us';
  if (s < 1) return (s * 1e3).toFixed(3) + ' ms';
  return s.toFixed(3) + ' s';
}
function fmtBytes(b) {
  if (!b) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(2) : String(Math.round(b))) + ' ' + u[i];
}
// How much of a capacity the peak takes: a percentage up to 1000%, past it
// a factor ("45,879× the limit"): a schedule far over a small limit would
// otherwise read as "4587901.6% used", which no one reads at a glance.
function fmtShare(peak, cap, what) {
  if (!peak || !cap) return '?% used';
  const r = peak / cap;
  if (r < 10) return (100 * r).toFixed(1) + '% used';
  return (r < 100 ? r.toFixed(1) : Math.round(r).toLocaleString('en-US')) + '× ' + what;
}
function fmtDur(s) {
  if (!s) return '—';
  if (s < 60) return s.toFixed(1) + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' m ' + Math.round(s % 60) + ' s';
  return (s / 3600).toFixed(1) + ' h';
}
function fmtWhen(ms) {
  if (!ms) return '—';
  const d = new Date(ms);
  const p = n => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
function badge(status) { return el('span', { class: 'badge ' + status }, status); }

// ------------------------------------------------------------ the API

function token() { return sessionStorage.getItem(TOKEN_KEY); }

// The page may be opened as /?token=T once: the token is kept for the
// session and taken out of the address bar (and out of the history).
(function takeToken() {
  const u = new URL(location.href);
  const t = u.searchParams.get('token');
  if (t) {
    sessionStorage.setItem(TOKEN_KEY, t);
    u.searchParams.delete('token');
    history.replaceState(null, '', u.pathname + u.search + u.hash);
  }
})();

async function api(path, asText) {
  for (let tries = 0; tries < 3; tries++) {
    const headers = {};
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    const r = await fetch(path, { headers, cache: 'no-store' });
    if (r.status === 401 && tries < 2) {
      // Requests sent together all come back 401: the first one asks, the
      // others find the token it got and go again without asking.
      if (token() && token() !== t) continue;
      const t2 = prompt('This autopartd wants a token (its --token-file):');
      if (!t2) throw new Error('a token is needed');
      sessionStorage.setItem(TOKEN_KEY, t2.trim());
      continue;
    }
    if (!r.ok) {
      let msg = r.status + ' ' + r.statusText;
      try { msg = (await r.json()).error || msg; } catch (e) { /* not JSON */ }
      throw new Error(msg);
    }
    return asText ? r.blob() : r.json();
  }
  throw new Error('not authorized');
}

async function download(path, name) {
  const blob = await api(path, true);
  const a = el('a', { href: URL.createObjectURL(blob), download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

async function showStats() {
  try {
    const s = await api('/api/stats');
    const b = s.by_status;
    document.getElementById('stats').textContent =
      `${s.stored} stored · ${b.running} running · ${b.queued} queued · ${b.done} done · ${b.failed} failed · ` +
      `${s.cache_hits} cache hits · ${s.version}`;
  } catch (e) { document.getElementById('stats').textContent = ''; }
}

// ------------------------------------------------------------ the list

const listState = { filters: {}, cursors: [''], page: 0 };

function listQuery() {
  const q = new URLSearchParams();
  const f = listState.filters;
  for (const [k, v] of Object.entries(f)) {
    if (!v) continue;
    if (k === 'q' && v.length < 3) continue;       // the text index wants 3 characters or more
    if (k === 'order' && !f.sort) continue;        // newest first has one direction
    q.set(k, v);
  }
  q.set('limit', '50');
  const after = listState.cursors[listState.page];
  if (after) q.set('after', after);
  return q.toString();
}

function filterBar(onChange) {
  const f = listState.filters;
  const input = (name, placeholder, type) => {
    const i = el('input', { type: type || 'text', name, placeholder, value: f[name] || '' });
    let t = null;
    i.addEventListener('input', () => { clearTimeout(t); t = setTimeout(() => { f[name] = i.value.trim(); onChange(); }, 250); });
    return i;
  };
  const select = (name, options) => {
    const s = el('select', { name }, options.map(([v, label]) => el('option', { value: v, selected: (f[name] || '') === v }, label)));
    s.addEventListener('change', () => { f[name] = s.value; onChange(); });
    return s;
  };
  return el('div', { class: 'filters' },
    input('q', 'text in model, client, mesh… (3+ chars)', 'search'),
    select('status', [['', 'any status'], ['running', 'running'], ['queued', 'queued'], ['done', 'done'], ['failed', 'failed'], ['cancelled', 'cancelled']]),
    select('kind', [['', 'searches and applies'], ['search', 'searches'], ['apply', 'applies']]),
    input('client', 'client label'),
    input('module', 'module hash prefix'),
    select('sort', [['', 'newest first'], ['runtime', 'by step time'], ['memory', 'by memory'], ['episodes', 'by episodes'], ['duration', 'by duration']]),
    select('order', [['', 'descending'], ['asc', 'ascending']]));
}

function listRow(r) {
  const tr = el('tr', { 'data-id': r.id, 'data-status': r.status },
    el('td', {}, fmtWhen(r.created_ms)),
    el('td', {}, r.client_label || el('span', { class: 'muted' }, '—')),
    // the file's name, its path in the tooltip: a long path would widen the
    // list past the window
    el('td', { class: 'model', title: r.module_name }, (r.module_name || '(unnamed)').replace(/^.*\//, ''), ' ',
      el('span', { class: 'hash', title: r.module_hash }, r.module_hash.slice(0, 10))),
    el('td', {}, r.mesh),
    el('td', {}, r.device),
    el('td', {}, badge(r.status), r.kind === 'apply' ? el('span', { class: 'muted' }, ' apply') : null),
    el('td', { class: 'num' }, fmtTime(r.best_runtime_s)),
    el('td', { class: 'num' }, fmtBytes(r.best_peak_memory_bytes)),
    el('td', { class: 'num' }, r.episodes || '—'),
    el('td', { class: 'num' }, fmtDur(r.duration_s)),
    el('td', { class: 'num' }, r.cache_hits));
  if (r.error) tr.title = r.error;
  return tr;
}

function viewList() {
  const seq = viewSeq;
  const main = document.getElementById('main');
  const body = el('tbody', { id: 'rows' });
  const msg = el('p', { class: 'muted', id: 'list-msg' });
  const prev = el('button', { id: 'prev' }, '← newer');
  const next = el('button', { id: 'next' }, 'older →');
  const where = el('span', { class: 'muted' });
  // Refreshes overlap (a filter changed while the last one is on its way,
  // the 2 s timer): an answer older than the one shown is dropped, so the
  // list never goes back to a query the filters have left.
  let asked = 0, shown = 0;
  const refresh = async () => {
    const mine = ++asked;
    try {
      const page = await api('/api/searches?' + listQuery());
      if (seq !== viewSeq || mine < shown) return;
      shown = mine;
      body.replaceChildren(...page.searches.map(listRow));
      listState.cursors[listState.page + 1] = page.next;
      msg.textContent = page.searches.length ? '' : 'No searches match.';
      msg.className = 'muted';
      prev.disabled = listState.page === 0;
      next.disabled = !page.next;
      where.textContent = `page ${listState.page + 1}`;
    } catch (e) {
      if (seq !== viewSeq || mine < shown) return;
      msg.textContent = 'Cannot list: ' + e.message;
      msg.className = 'error';
    }
  };
  // A row opens its search on a press and a release on that search's row,
  // not on 'click': the list is rebuilt every 2 s, and a row replaced
  // between the press and the release gets no click (the browser drops it).
  let pressed = null;
  const rowId = e => e.target.closest && e.target.closest('tr[data-id]')?.dataset.id;
  body.addEventListener('pointerdown', e => { pressed = e.button === 0 ? rowId(e) : null; });
  body.addEventListener('pointerup', e => {
    const id = rowId(e);
    if (e.button === 0 && id && id === pressed) location.hash = '#/search/' + id;
    pressed = null;
  });
  const restart = () => { listState.cursors = ['']; listState.page = 0; refresh(); };
  prev.addEventListener('click', () => { if (listState.page > 0) { listState.page--; refresh(); } });
  next.addEventListener('click', () => { if (listState.cursors[listState.page + 1]) { listState.page++; refresh(); } });
  const head = ['Created', 'Client', 'Model', 'Mesh', 'Device', 'Status', 'Best step time', 'Memory', 'Episodes', 'Duration', 'Cache hits'];
  main.replaceChildren(
    filterBar(restart),
    el('table', { id: 'list' }, el('thead', {}, el('tr', {}, head.map((h, i) => el('th', { class: i >= 6 ? 'num' : '' }, h)))), body),
    msg,
    el('div', { class: 'pager' }, prev, next, where));
  refresh();
  showStats();
  // The first page follows what runs; deeper pages stay put while read.
  timer = setInterval(() => { if (listState.page === 0) refresh(); showStats(); }, 2000);
}

// ------------------------------------------------------------ plots

// A step plot of points [{x, y}] (the best so far only changes at a
// point), in an SVG of w x h; data-points says how many it drew.
function stepPlot(id, pts, xLabel, fmtX, fmtY) {
  const w = 520, h = 240, l = 70, r = 16, t = 12, b = 38;
  const root = svg('svg', { id, viewBox: `0 0 ${w} ${h}`, width: '100%', 'data-points': pts.length, role: 'img' });
  if (!pts.length) {
    root.append(svg('text', { x: w / 2, y: h / 2, 'text-anchor': 'middle' }, 'no progress recorded yet'));
    return root;
  }
  let x0 = Math.min(...pts.map(p => p.x)), x1 = Math.max(...pts.map(p => p.x));
  let y0 = Math.min(...pts.map(p => p.y)), y1 = Math.max(...pts.map(p => p.y));
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 *= 0.95; y1 = y1 * 1.05 || 1; }
  const pad = (y1 - y0) * 0.08;
  y0 -= pad; y1 += pad;
  const X = x => l + (x - x0) / (x1 - x0) * (w - l - r);
  const Y = y => t + (1 - (y - y0) / (y1 - y0)) * (h - t - b);
  for (let i = 0; i <= 4; i++) {
    const yv = y0 + (y1 - y0) * i / 4, xv = x0 + (x1 - x0) * i / 4;
    root.append(svg('line', { class: 'gridline', x1: l, x2: w - r, y1: Y(yv), y2: Y(yv) }),
      svg('text', { x: l - 6, y: Y(yv) + 4, 'text-anchor': 'end' }, fmtY(yv)),
      svg('text', { x: X(xv), y: h - b + 16, 'text-anchor': 'middle' }, fmtX(xv)));
  }
  root.append(svg('line', { class: 'axis', x1: l, x2: l, y1: t, y2: h - b }),
    svg('line', { class: 'axis', x1: l, x2: w - r, y1: h - b, y2: h - b }),
    svg('text', { x: (l + w - r) / 2, y: h - 4, 'text-anchor': 'middle' }, xLabel));
  let d = `M${X(pts[0].x)},${Y(pts[0].y)}`;
  for (let i = 1; i < pts.length; i++) d += ` H${X(pts[i].x)} V${Y(pts[i].y)}`;
  root.append(svg('path', { class: 'curve', d }));
  for (const p of pts) root.append(svg('circle', { class: 'dot', cx: X(p.x), cy: Y(p.y), r: 2.5 },
    svg('title', {}, `${fmtX(p.x)}: ${fmtY(p.y)}`)));
  return root;
}

// Horizontal bars [{label, value, color?}] with the value written beside.
function barChart(id, bars, fmt) {
  const w = 520, row = 24, l = 130, h = bars.length * row + 8;
  const max = Math.max(...bars.map(b => b.value), 1e-30);
  const root = svg('svg', { id, class: 'bars', viewBox: `0 0 ${w} ${h}`, width: '100%', role: 'img' });
  bars.forEach((b, i) => {
    const y = 4 + i * row, bw = b.value / max * (w - l - 110);
    root.append(svg('text', { x: l - 8, y: y + 15, 'text-anchor': 'end' }, b.label),
      svg('rect', { x: l, y: y + 3, width: Math.max(bw, b.value ? 1 : 0), height: row - 8, fill: b.color || '#2b6cd4', rx: 2 }),
      svg('text', { x: l + bw + 6, y: y + 15 }, fmt(b.value)));
  });
  return root;
}

// ------------------------------------------------------------ shardings

const PALETTE = ['#d9dde6', '#4c8bf5', '#f59f4c', '#49b37a', '#b469d6', '#e05a5a', '#3fb8c4', '#c9b531', '#8a6d55', '#6d7fcc'];

// The layer a parameter belongs to: block_3, layers_12, layer.3, h.5, ...
// Its column is the name with the layer number made `*`.
function splitLayer(name) {
  const m = /(blocks?|layers?|h|encoder|decoder)([_.\[\]'"]*)(\d+)/i.exec(name);
  if (!m) return { layer: null, column: name };
  return { layer: Number(m[3]), column: name.slice(0, m.index) + m[1] + m[2] + '*' + name.slice(m.index + m[0].length) };
}

// How a value is split, as a short label: "0:model" (dim 0 over model),
// "rep" (replicated), dims joined with spaces.
function splitLabel(s) {
  const parts = [];
  (s.dims || []).forEach((axes, d) => { if (axes.length) parts.push(`${d}:${axes.join('+')}`); });
  return parts.length ? parts.join(' ') : 'replicated';
}

function shardingGrid(shardings) {
  const args = shardings.filter(s => s.kind === 'argument');
  const colours = new Map([['replicated', PALETTE[0]]]);
  const colour = lab => { if (!colours.has(lab)) colours.set(lab, PALETTE[1 + (colours.size - 1) % (PALETTE.length - 1)]); return colours.get(lab); };
  const layers = new Map(), columns = [], seenCol = new Set(), others = [];
  for (const s of args) {
    const { layer, column } = splitLayer(s.name);
    if (layer === null) { others.push(s); continue; }
    if (!seenCol.has(column)) { seenCol.add(column); columns.push(column); }
    if (!layers.has(layer)) layers.set(layer, new Map());
    layers.get(layer).set(column, s);
  }
  const cell = s => {
    const lab = splitLabel(s);
    const td = el('td', { title: `${s.name}\n${s.type}\n${s.spec}`, 'data-split': lab }, lab === 'replicated' ? '·' : lab);
    td.style.background = colour(lab);
    if (lab !== 'replicated') td.style.color = '#fff';
    return td;
  };
  const out = [];
  if (layers.size) {
    const sorted = [...layers.keys()].sort((a, b) => a - b);
    out.push(el('div', { class: 'scroll' }, el('table', { class: 'shard-grid', id: 'shard-grid' },
      el('thead', {}, el('tr', {}, el('th', {}, 'layer'), columns.map(c => el('th', { title: c }, shortColumn(c))))),
      el('tbody', {}, sorted.map(L => el('tr', {}, el('th', {}, String(L)),
        columns.map(c => layers.get(L).has(c) ? cell(layers.get(L).get(c)) : el('td', {}, '')))))))); 
  }
  if (others.length) {
    out.push(el('h3', { class: 'muted' }, 'Not in a layer'),
      el('table', { class: 'shard-grid' }, el('tbody', {}, others.map(s => el('tr', {}, el('th', {}, s.name), cell(s), el('td', { class: 'hash' }, s.type))))));
  }
  const legend = el('div', { class: 'legend' }, [...colours].map(([lab, c]) => {
    const sw = el('span', { class: 'sw' });
    sw.style.background = c;
    return el('span', {}, sw, lab);
  }));
  return el('div', {}, legend, out, el('p', { class: 'muted' }, 'Cells: dim:axes each argument is split along (· replicated); hover for the spec.'));
}

function shortColumn(c) {
  // params['block_*']['attn']['w_qkv'] -> attn.w_qkv ; keeps the optimizer prefix
  const pre = /^(opt_state\.\w+|params|[\w.]+?)(?=\[)/.exec(c);
  const keys = [...c.matchAll(/\['([^']*)'\]/g)].map(m => m[1]).filter(k => !k.includes('*'));
  const head = pre && pre[1] !== 'params' ? pre[1].replace('opt_state.', '') + ' ' : '';
  return keys.length ? head + keys.join('.') : c;
}

// ------------------------------------------------------------ a search

function kv(pairs) {
  return el('dl', { class: 'kv' }, pairs.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
}

// The best step time over time and over episodes: the store's progress
// points (a checkpoint every 2 s), plus the start (the state after the
// manual tactics) and the final answer once the search is done.
function curves(hist, row, result) {
  const t0 = row.started_ms || (hist.length ? hist[0][0] : 0);
  const byTime = hist.map(p => ({ x: (p[0] - t0) / 1000, y: p[2] })).filter(p => p.y > 0);
  const byEp = hist.map(p => ({ x: p[1], y: p[2] })).filter(p => p.y > 0);
  const st = result && result.search;
  if (st && st.start_runtime_s > 0) {
    byTime.unshift({ x: 0, y: st.start_runtime_s });
    byEp.unshift({ x: 0, y: st.start_runtime_s });
  }
  if (result && row.status === 'done' && row.best_runtime_s > 0) {
    byTime.push({ x: (row.finished_ms - t0) / 1000, y: row.best_runtime_s });
    byEp.push({ x: row.episodes, y: row.best_runtime_s });
    // the best was found at an episode (and time) between two points of the
    // history: a point there, so that the curve drops where the explanation
    // says "found at episode N"
    const sr = result.search_result || {};
    if (st && st.best_episode >= 0) byEp.push({ x: st.best_episode, y: row.best_runtime_s });
    if (sr.best_wall_s > 0 && row.started_ms) byTime.push({ x: sr.best_wall_s, y: row.best_runtime_s });
    byEp.sort((a, b) => a.x - b.x || b.y - a.y);
    byTime.sort((a, b) => a.x - b.x || b.y - a.y);
  }
  return el('div', { class: 'grid2', id: 'curves' },
    el('div', { class: 'card' }, el('h2', {}, 'Best step time over time'), stepPlot('plot-time', byTime, 'seconds since start', x => x.toFixed(1) + 's', fmtTime)),
    el('div', { class: 'card' }, el('h2', {}, 'Best step time over episodes'), stepPlot('plot-episodes', byEp, 'episodes', x => String(Math.round(x)), fmtTime)));
}

function summaryCard(row) {
  return el('div', { class: 'card', id: 'summary' },
    el('h2', {}, `${row.kind === 'apply' ? 'Apply' : 'Search'} #${row.id} `, badge(row.status)),
    kv([['model', `${row.module_name} (${row.module_hash.slice(0, 16)}…)`], ['client', row.client_label || '—'],
      ['mesh', row.mesh], ['axes searched', row.axes.join(', ') || '—'], ['device', row.device],
      ['created', fmtWhen(row.created_ms)], ['duration', fmtDur(row.duration_s)], ['episodes', String(row.episodes)],
      ['best step time', fmtTime(row.best_runtime_s)], ['best peak memory', fmtBytes(row.best_peak_memory_bytes)],
      ['cache hits', String(row.cache_hits)], ['attempts', String(row.attempts)]].concat(row.error ? [['error', row.error]] : [])));
}

function scheduleCard(id, sched, result) {
  const buttons = el('div', { class: 'pager' },
    el('button', { id: 'dl-schedule', disabled: !sched, onclick: () => download(`/api/searches/${id}/schedule`, `search-${id}-schedule.txt`).catch(e => alert(e.message)) }, 'Download schedule'),
    el('button', { id: 'dl-module', disabled: !result, onclick: () => download(`/api/searches/${id}/module`, `search-${id}-module.mlir`).catch(e => alert(e.message)) },
      'Download partitioned module' + (result ? ` (${fmtBytes(result.module_bytes)})` : '')));
  return el('div', { class: 'card' }, el('h2', {}, result ? 'Winning schedule' : 'Best schedule so far'),
    el('pre', { id: 'schedule' }, sched || '(none yet)'), buttons);
}

function collectivesCard(res) {
  const cost = res.report && res.report.cost;
  const secs = k => (cost && cost.collectives && cost.collectives[k] && cost.collectives[k].seconds) || 0;
  const rows = res.collectives.map(c => el('tr', {}, el('td', {}, c.kind), el('td', { class: 'num' }, c.count),
    el('td', { class: 'num' }, fmtBytes(c.bytes)), el('td', { class: 'num' }, fmtTime(secs(c.kind)))));
  return el('div', { class: 'card' }, el('h2', {}, 'Collectives'),
    el('table', { id: 'collectives' }, el('thead', {}, el('tr', {}, el('th', {}, 'kind'), el('th', { class: 'num' }, 'count'),
      el('th', { class: 'num' }, 'bytes per device'), el('th', { class: 'num' }, 'time'))), el('tbody', {}, rows)),
    barChart('coll-bytes', res.collectives.map(c => ({ label: c.kind, value: c.bytes, color: '#f59f4c' })), fmtBytes));
}

// Which framework's memory a report or an explanation counts (the cost
// report's "framework": cost_framework_name), in the CLI report's words;
// '' for an answer stored before it was said.
function frameworkText(f) {
  return f === 'xla' ? "XLA buffer assignment (fused, as XLA's compiler allocates)"
    : f === 'pytorch_eager' ? "PyTorch eager (every op's output a tensor, in the order written)" : '';
}

// What a result's fit is held to, as the CLI's cost report says it: the
// device's HBM, else the search's memory limit named as such with the HBM
// beside it, or no limit (null).  An answer stored before the limit was
// carried was held to the HBM.
const heldTo = c => c.memory_limit_bytes === undefined ? c.hbm_bytes : c.memory_limit_bytes;

function fitText(c) {
  const limit = heldTo(c);
  if (limit === null) return 'no memory limit';
  if (limit === c.hbm_bytes) return c.fits ? 'fits in memory' : 'does NOT fit in memory';
  return `${c.fits ? 'fits' : 'does NOT fit'} the ${fmtBytes(limit)} memory limit`;
}

function memoryLimitText(c, peak) {
  const limit = heldTo(c), hbm = c.hbm_bytes;
  if (limit === null) return `no memory limit; ${fmtBytes(hbm)} on the device (${fmtShare(peak, hbm, 'the HBM')})`;
  if (limit === hbm) return `of ${fmtBytes(hbm)} on the device (${fmtShare(peak, hbm, 'the HBM')})`;
  return `of the ${fmtBytes(limit)} memory limit (${fmtShare(peak, limit, 'the limit')}); ${fmtBytes(hbm)} on the device`;
}

function breakdownCard(res) {
  const c = res.cost || {};
  const rc = (res.report && res.report.cost) || {};
  // Communication split into what runs under independent compute and what
  // the step waits for (the cost report's overlap of the two streams).
  const comm = rc.comm_exposed_s !== undefined
    ? [{ label: 'communication hidden under compute', value: rc.comm_hidden_s || 0, color: '#f5c99a' },
      { label: 'communication exposed', value: rc.comm_exposed_s || 0, color: '#f59f4c' }]
    : [{ label: 'communication', value: c.comm_s || 0, color: '#f59f4c' }];
  const time = [{ label: 'compute', value: c.compute_s || 0, color: '#4c8bf5' }, ...comm,
    { label: 'step (total)', value: c.runtime_s || 0, color: '#1d2330' }];
  const args = rc.argument_bytes || 0, peak = c.peak_memory_bytes || 0;
  // What is live at the peak, by category (the cost report's memory), else
  // arguments against the rest.
  const m = rc.memory;
  const colors = { parameters: '#49b37a', optimizer_state: '#2f8f5b', batch: '#9ad0b0', outputs: '#6b7a99', gradients: '#e0b040',
    saved_activations: '#b469d6', temporaries: '#d68fe6', collective_buffers: '#f59f4c' };
  const mem = m && m.kinds
    ? Object.entries(m.kinds).filter(([, v]) => v > 0).map(([k, v]) => ({ label: k.replace(/_/g, ' '), value: v, color: colors[k] || '#888' }))
    : [{ label: 'arguments', value: args, color: '#49b37a' }, { label: 'temporaries', value: Math.max(peak - args, 0), color: '#b469d6' }];
  mem.push({ label: 'peak', value: peak, color: '#1d2330' });
  const where = w => w ? `${w.op}${w.line ? ` at ${w.line}:${w.col}` : ''}${w.name ? ` "${w.name}"` : ''}` : '';
  const fw = m && frameworkText(m.framework);
  const order = !m || m.order === 'program' ? 'in the order written'
    : m.order === 'placed'
      ? `in the order written with the collectives where XLA places them (${fmtBytes(m.program_order_peak_bytes)} as written)`
      : `in the order of XLA's ${m.order === 'dfs' ? 'DFS' : 'list'} scheduler (${fmtBytes(m.program_order_peak_bytes)} in the order written)`;
  return el('div', { class: 'grid2' },
    el('div', { class: 'card' }, el('h2', {}, 'Step time per device'), barChart('time-breakdown', time, fmtTime),
      el('p', { class: 'muted', id: 'time-fit' }, `start (before the search): ${fmtTime(res.search ? res.search.start_runtime_s : 0)}; ${fitText(c)}`)),
    el('div', { class: 'card', id: 'memory' }, el('h2', {}, 'Memory per device at the peak'), barChart('memory-breakdown', mem, fmtBytes),
      el('p', { class: 'muted', id: 'memory-limit' }, memoryLimitText(c, peak)),
      fw ? el('p', { class: 'muted', id: 'memory-framework' }, `counted as ${fw}`) : '',
      m && m.at ? el('p', { class: 'muted', id: 'memory-at' }, `at ${where(m.at)}${m.inside ? `, inside it ${where(m.inside)}` : ''}, ${order}`) : '',
      m && m.largest && m.largest.length ? el('details', {}, el('summary', {}, 'largest buffers live there'),
        el('table', { id: 'memory-largest' }, el('tbody', {}, m.largest.map(v => el('tr', {}, el('td', { class: 'num' }, fmtBytes(v.bytes)),
          el('td', {}, v.kind), el('td', { class: 'wrap' }, where(v))))))) : ''));
}

function blockedCard(report) {
  const conf = (report && report.conflicts) || [];
  // Counted by kind and axis first (a big model has hundreds), then each.
  const counts = new Map();
  for (const b of conf) { const k = `${b.kind} (along ${b.axis})`; counts.set(k, (counts.get(k) || 0) + 1); }
  const shown = conf.slice(0, 500);
  return el('div', { class: 'card' }, el('h2', {}, `What blocked propagation (${conf.length})`),
    conf.length ? [
      el('table', { id: 'blocked-summary' }, el('tbody', {}, [...counts].sort((a, b) => b[1] - a[1]).map(([k, n]) =>
        el('tr', {}, el('td', {}, k), el('td', { class: 'num' }, n))))),
      el('details', {}, el('summary', {}, conf.length > shown.length ? `each of the first ${shown.length}` : 'each of them'),
        el('div', { class: 'scroll tall' }, el('table', { id: 'blocked' }, el('thead', {}, el('tr', {}, ['kind', 'axis', 'op', 'where', 'why'].map(h => el('th', {}, h)))),
          el('tbody', {}, shown.map(b => el('tr', {}, el('td', {}, b.kind), el('td', {}, b.axis), el('td', {}, b.op),
            el('td', {}, b.line ? `${b.line}:${b.column}` : ''), el('td', { class: 'wrap' }, b.why)))))))]
      : el('p', { class: 'muted' }, 'Nothing: propagation went everywhere it was asked to.'));
}

function delta(d) {
  if (!d) return '';
  const v = d.runtime_s || 0;
  return el('span', { class: v < 0 ? 'delta-neg' : v > 0 ? 'delta-pos' : '' }, (v > 0 ? '+' : '') + fmtTime(Math.abs(v)).replace(/^/, v < 0 ? '−' : ''));
}

function explanationCard(res) {
  const ex = res.explanation;
  if (!ex || !ex.decisions) return el('div', { class: 'card' }, el('h2', {}, 'Why this answer'), el('pre', {}, res.explanation_text || '(no explanation: an Apply)'));
  return el('div', { class: 'card', id: 'explanation' }, el('h2', {}, 'Why this answer: each decision'),
    el('p', { class: 'muted', id: 'explanation-start' }, `start: ${fmtTime(ex.start && ex.start.runtime_s)}, ${fmtBytes(ex.start && ex.start.peak_memory_bytes)}`
      + (ex.memory && frameworkText(ex.memory.framework) ? `; memory counted as ${frameworkText(ex.memory.framework)}` : '')),
    ex.decisions.map(d => el('details', {},
      el('summary', {}, `${d.depth}. ${d.action} — `, delta(d.delta), ` step time, ${fmtBytes(Math.abs((d.delta && d.delta.peak_memory_bytes) || 0))} ${((d.delta && d.delta.peak_memory_bytes) || 0) <= 0 ? 'less' : 'more'} memory`,
        el('span', { class: 'muted' }, ` (found at episode ${d.found_at_episode}, ${d.alternatives_tried} alternatives tried)`)),
      el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, 'alternative'), el('th', { class: 'num' }, 'Δ step time'), el('th', { class: 'num' }, 'Δ memory'))),
        el('tbody', {}, (d.alternatives || []).map(a => el('tr', {}, el('td', {}, a.action), el('td', { class: 'num' }, delta(a.delta)),
          el('td', { class: 'num' }, fmtBytes(Math.abs((a.delta && a.delta.peak_memory_bytes) || 0))))))))));
}

function viewSearch(id) {
  const seq = viewSeq;
  const main = document.getElementById('main');
  main.replaceChildren(el('p', { class: 'muted' }, 'Loading search ' + id + '…'));
  const render = (d) => {
    const parts = [el('p', {}, el('a', { href: '#/' }, '← all searches')), summaryCard(d.search), curves(d.history, d.search, d.result),
      scheduleCard(id, d.best_schedule, d.result)];
    if (d.result) {
      parts.push(el('div', { class: 'card' }, el('h2', {}, 'Shardings of the arguments, by layer'), shardingGrid(d.result.shardings)),
        breakdownCard(d.result), collectivesCard(d.result), blockedCard(d.result.report), explanationCard(d.result));
    }
    main.replaceChildren(...parts);
  };
  // While it is queued or running: the live feed (the row, its history and
  // best schedule so far) every second; once it has ended: everything, once.
  const poll = async () => {
    try {
      showStats();
      let d = await api(`/api/searches/${id}/progress`);
      if (seq !== viewSeq) return;
      if (!['queued', 'running'].includes(d.search.status)) {
        clearInterval(timer);
        d = await api(`/api/searches/${id}`);
        if (seq !== viewSeq) return;
      }
      render(d);
    } catch (e) {
      if (seq !== viewSeq) return;
      clearInterval(timer);
      main.replaceChildren(el('p', {}, el('a', { href: '#/' }, '← all searches')), el('p', { class: 'error', id: 'search-error' }, e.message));
    }
  };
  poll();
  timer = setInterval(poll, 1000);
}

// ------------------------------------------------------------ routing

function route() {
  viewSeq++;
  clearInterval(timer);
  timer = null;
  const m = /^#\/search\/(\d+)$/.exec(location.hash);
  if (m) viewSearch(m[1]); else viewList();
}

window.addEventListener('hashchange', route);
route();
