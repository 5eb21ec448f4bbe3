// Small helpers shared by the views. Every string that came from the store (span names,
// attributes, ids) reaches the page only as text: el() sets textContent, canvas uses fillText.

/** Makes an element: el('a', {href: '/x', class: 'c'}, 'text', child, ...). Strings are text. */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** GET a JSON API path; throws Error(message of the API's {"error"}) on a non-2xx answer. */
export async function api(path) {
  const r = await fetch(path, {headers: {Accept: 'application/json'}});
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || `${r.status} ${r.statusText}`);
  return body;
}

/** ns → a short human duration (as causal_analysis::fmt_duration). */
export function fmtDur(ns) {
  const a = Math.abs(ns), s = ns < 0 ? '-' : '';
  if (a >= 1e9) return `${s}${(a / 1e9).toFixed(3)}s`;
  if (a >= 1e6) return `${s}${(a / 1e6).toFixed(3)}ms`;
  if (a >= 1e3) return `${s}${(a / 1e3).toFixed(1)}µs`;
  return `${s}${a}ns`;
}

/** ns since the epoch → `YYYY-MM-DD HH:MM:SS.mmm` UTC. */
export function fmtTime(ns) {
  const d = new Date(Math.floor(ns / 1e6));
  return d.toISOString().replace('T', ' ').replace('Z', '');
}

/** A duration typed by a user (`150ms`, `1.5s`, `2m`, `10us`, or bare ns) → ns, or null. */
export function parseDur(s) {
  s = s.trim();
  if (!s) return null;
  const m = s.match(/^([0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s|m|h)?$/);
  if (!m) return NaN;
  const mult = {ns: 1, us: 1e3, 'µs': 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9}[m[2] || 'ns'];
  return Math.round(parseFloat(m[1]) * mult);
}

/** A stable colour for a name (agent, host). */
export function colour(name) {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  return `hsl(${(h >>> 0) % 360}, 55%, 62%)`;
}

/** Replaces the main element's content. */
export function mount(...children) {
  const main = document.getElementById('main');
  main.replaceChildren(...children);
  return main;
}

/** Updates the query string without a reload (deep links). */
export function setQuery(params) {
  const u = new URL(location.href);
  for (const [k, v] of Object.entries(params)) {
    if (v === null || v === undefined || v === '') u.searchParams.delete(k);
    else u.searchParams.set(k, v);
  }
  history.replaceState(null, '', u);
}

/** Sizes a canvas to its CSS box at the device pixel ratio; returns its 2D context and size. */
export function fitCanvas(c) {
  const dpr = window.devicePixelRatio || 1;
  const w = c.clientWidth, h = c.clientHeight;
  if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
    c.width = Math.round(w * dpr);
    c.height = Math.round(h * dpr);
  }
  const ctx = c.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return {ctx, w, h};
}

/** The detail pane of one item (`/api/ui/task/{task}/item/{k}`), all as text. */
export function detailPane(d, onItem) {
  const rows = d.attributes.map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, v)));
  const link = (x) => el('span', {}, el('a', {href: '#', onclick: (ev) => { ev.preventDefault(); onItem(x.item); }},
    x.label ? `${x.label}` : `#${x.item}`), ` (${x.kind}) `);
  return el('div', {class: 'detail', dataset: {item: d.index, id: d.id}},
    el('h3', {}, d.label),
    el('p', {class: 'muted'}, `${d.agent} · ${d.host} · ${d.process} · thread ${d.thread}`),
    el('p', {}, d.span ? `span ${d.id}` : `event ${d.id}`,
      d.duration_ns !== null ? ` · ${fmtDur(d.duration_ns)}` : '',
      d.critical ? ' · on the critical path' : '', d.error ? ' · error' : ''),
    el('h4', {}, 'Attributes'),
    el('table', {class: 'attrs'}, rows.length ? rows : el('tr', {}, el('td', {}, '(none)'))),
    el('h4', {}, 'Parents'), el('p', {}, d.parents.length ? d.parents.map(link) : '(none)'),
    el('h4', {}, 'Children'), el('p', {}, d.children.length ? d.children.map(link) : '(none)'),
    el('h4', {}, 'Raw report'),
    el('pre', {class: 'raw'}, JSON.stringify(d.reports, null, 1)));
}
