// The task view: a canvas timeline with swimlanes host → process → thread, spans as bars and
// point events as marks, edges, the critical path highlighted, a minimap, zoom and pan (mouse
// and keyboard), find, collapse/expand of hosts and processes, and a detail pane. The data is
// the columnar payload of /api/ui/task/{task} (docs/ui-api.md); nothing here makes one DOM node
// per event, so 100,000 events draw in one pass over typed arrays.
import {el, api, fmtDur, fmtTime, mount, setQuery, fitCanvas, colour, detailPane} from './util.js';

const GUTTER = 240, RIGHT = 40, AXIS = 22, ROW = 14, HEAD_HOST = 20, HEAD_PROC = 17, PAD = 6;
const CRIT = '#e0115f';

export async function render(task, params) {
  window.__sightline.view = 'trace';
  const skew = params.get('skew') === '0' ? '?skew=0' : '';
  const P = await api(`/api/ui/task/${encodeURIComponent(task)}${skew}`);
  const S = P.strings, I = P.items, N = I.id.length;
  const start = Float64Array.from(I.start), end = Float64Array.from(I.end);
  const lane = Int32Array.from(I.lane), row = Int32Array.from(I.row);
  const span = Uint8Array.from(I.span), err = Uint8Array.from(I.error);
  const parent = Int32Array.from(I.parent);
  // Descendants in the collapse tree (a parent always has a smaller index).
  const desc = new Int32Array(N);
  for (let k = N - 1; k >= 0; k--) if (parent[k] >= 0) desc[parent[k]] += 1 + desc[k];
  const folded = new Set();
  const hidden = new Uint8Array(N);
  const refold = () => {
    for (let k = 0; k < N; k++) hidden[k] = parent[k] >= 0 && (hidden[parent[k]] || folded.has(parent[k])) ? 1 : 0;
  };
  const critical = P.critical_path ? P.critical_path.items : [];
  const isCrit = new Uint8Array(N);
  for (const k of critical) isCrit[k] = 1;
  const nLanes = P.lanes.host.length;
  const byLane = Array.from({length: nLanes}, () => []);
  for (let k = 0; k < N; k++) byLane[lane[k]].push(k);
  // Items grouped by agent: one fillStyle per group when drawing.
  const byAgent = new Map();
  for (let k = 0; k < N; k++) {
    const a = I.agent[k];
    if (!byAgent.has(a)) byAgent.set(a, []);
    byAgent.get(a).push(k);
  }
  const agentColour = new Map([...byAgent.keys()].map((a) => [a, colour(S[a])]));
  const total = Math.max(1, P.duration_ns);

  // The page.
  const canvas = el('canvas', {class: 'timeline', id: 'timeline', tabindex: 0});
  const mini = el('canvas', {class: 'minimap', id: 'minimap'});
  const find = el('input', {id: 'find', placeholder: 'find (/)', size: 24});
  const findStatus = el('span', {class: 'muted', id: 'find-status'});
  const edgesBox = el('input', {type: 'checkbox', id: 'show-edges', checked: N <= 5000});
  const side = el('aside', {class: 'side', id: 'side'});
  const detail = el('div', {id: 'detail'}, el('p', {class: 'muted'}, 'Click a span or event for its attributes.'));
  const skewHosts = (P.skew_adjustment.hosts || []);
  const info = el('div', {class: 'info'},
    el('h4', {}, 'Clock skew'),
    el('p', {id: 'skew'}, skewHosts.length
      ? skewHosts.map((h) => `${h.host}: ${h.offset_ns >= 0 ? '+' : ''}${fmtDur(h.offset_ns)} against ${h.against} (${h.evidence} edges)`).join('; ')
      : (skew ? 'not adjusted (as reported)' : 'no correction needed')),
    el('a', {href: skew ? location.pathname : `${location.pathname}?skew=0`}, skew ? 'adjust clock skew' : 'show as reported'),
    P.problems.length ? el('h4', {}, 'Problems') : null,
    P.problems.map((p) => el('p', {class: 'problem'}, p)));
  const cpList = el('ol', {class: 'cp', id: 'cp-list'});
  const costBox = el('div', {class: 'info', id: 'cost'});
  side.append(detail, el('h4', {}, `Critical path: ${critical.length} steps, ${P.critical_path ? fmtDur(P.critical_path.total_ns) : '-'}`), cpList, costBox, info);
  // Where the task's time and energy went (`sightline account` reports; docs/ui-api.md "Cost").
  api(`/api/ui/task/${encodeURIComponent(task)}/cost${skew}`).then((C) => costTable(costBox, C))
    .catch((e) => costBox.append(el('p', {class: 'problem'}, `cost: ${e.message}`)));
  mount(
    el('div', {class: 'trace-head'},
      el('h2', {}, P.title || '(untitled)'),
      el('p', {class: 'muted'}, `task ${P.task} · ${P.events} events · ${N} spans and events · ${nLanes} lanes · ${P.joins} joins · ${fmtDur(P.duration_ns)} · ${fmtTime(P.t0_ns)} UTC`)),
    el('div', {class: 'toolbar'},
      find, findStatus,
      el('label', {}, edgesBox, ' all edges'),
      el('button', {id: 'collapse-all'}, 'Collapse all'),
      el('button', {id: 'expand-all'}, 'Expand all'),
      el('button', {id: 'reset-zoom'}, 'Reset zoom (0)'),
      el('a', {href: `/trace/${encodeURIComponent(P.task)}?view=dag`, id: 'dag-link'}, 'DAG view'),
      el('a', {href: `/compare?a=${encodeURIComponent(P.task)}`}, 'Compare…'),
      el('span', {class: 'muted', title: 'wheel: zoom · shift+wheel: scroll · drag: pan · w/s: zoom · a/d ←/→: pan · ↑/↓: scroll · 0: whole task · /: find · c or double-click: collapse the selection'}, 'keys: w s a d ↑ ↓ 0 / c')),
    mini,
    el('div', {class: 'trace-body'}, canvas, side));

  // View state.
  let v0 = 0, v1 = total, scrollY = 0, selected = -1, matches = [], matchAt = -1;
  const z = (params.get('zoom') || '').split('-').map(Number);
  if (z.length === 2 && z[1] > z[0]) [v0, v1] = z;
  const collapsed = new Set();
  let laneY = new Float64Array(nLanes), laneOn = new Uint8Array(nLanes), heads = [], contentH = 0;

  function layout() {
    heads = [];
    let y = 0, host = null, proc = null;
    for (let l = 0; l < nLanes; l++) {
      const h = S[P.lanes.host[l]], p = S[P.lanes.process[l]];
      const hk = `h:${h}`, pk = `p:${h}\u0000${p}`;
      if (h !== host) { heads.push({key: hk, label: h, y, h: HEAD_HOST, depth: 0}); y += HEAD_HOST; host = h; proc = null; }
      laneOn[l] = 0;
      if (collapsed.has(hk)) continue;
      if (p !== proc) { heads.push({key: pk, label: p, y, h: HEAD_PROC, depth: 1}); y += HEAD_PROC; proc = p; }
      if (collapsed.has(pk)) continue;
      laneOn[l] = 1;
      laneY[l] = y;
      y += P.lanes.rows[l] * ROW + PAD;
    }
    contentH = y;
  }
  layout();

  let W = 0, H = 0;
  const xOf = (t) => GUTTER + (t - v0) / (v1 - v0) * (W - GUTTER - RIGHT);
  const tOf = (x) => v0 + (x - GUTTER) / (W - GUTTER - RIGHT) * (v1 - v0);
  const yOf = (k) => AXIS + laneY[lane[k]] - scrollY + 3 + row[k] * ROW;

  function draw() {
    const t = performance.now();
    const f = fitCanvas(canvas);
    const ctx = f.ctx;
    W = f.w; H = f.h;
    ctx.clearRect(0, 0, W, H);
    ctx.font = '11px sans-serif';
    // Lane backgrounds and labels.
    ctx.save();
    ctx.beginPath(); ctx.rect(0, AXIS, W, H - AXIS); ctx.clip();
    for (let l = 0; l < nLanes; l++) {
      if (!laneOn[l]) continue;
      const y = AXIS + laneY[l] - scrollY, h = P.lanes.rows[l] * ROW + PAD;
      if (y > H || y + h < AXIS) continue;
      ctx.fillStyle = l % 2 ? '#f6f7f9' : '#fff';
      ctx.fillRect(0, y, W, h);
      ctx.fillStyle = '#333';
      ctx.fillText(clip(ctx, S[P.lanes.thread[l]], GUTTER - 40), 36, y + 12);
    }
    for (const hd of heads) {
      const y = AXIS + hd.y - scrollY;
      if (y > H || y + hd.h < AXIS) continue;
      ctx.fillStyle = hd.depth ? '#e4e8ee' : '#cfd6e0';
      ctx.fillRect(0, y, W, hd.h - 1);
      ctx.fillStyle = '#111';
      ctx.font = hd.depth ? '11px sans-serif' : 'bold 12px sans-serif';
      ctx.fillText(`${collapsed.has(hd.key) ? '▸' : '▾'} ${clip(ctx, hd.label, GUTTER + 300)}`, 4 + hd.depth * 14, y + hd.h - 5);
      ctx.font = '11px sans-serif';
    }
    // Items, one fillStyle per agent.
    ctx.beginPath(); ctx.rect(GUTTER, AXIS, W - GUTTER, H - AXIS); ctx.clip();
    let drawn = 0;
    const labels = [];
    // Overlapping or touching bars of one colour in one row are filled as one rectangle (the
    // same pixels): zoomed out, thousands of items share a few pixels, and one fill each made
    // a pan or zoom stutter (docs/ui-api.md, "Big traces"). Per shape (0: span bar, 1: point
    // mark), row y → [x0, x1] of the run not yet filled.
    const SHAPE = [[0, ROW - 3], [1, ROW - 5]]; // [dy, height]
    const runs = [new Map(), new Map()];
    const flush = (m, y, r) => ctx.fillRect(r[0], y + SHAPE[m][0], r[1] - r[0], SHAPE[m][1]);
    const fill = (m, x0, x1, y) => {
      const r = runs[m].get(y);
      if (r && x0 <= r[1] + 0.5 && x1 >= r[0] - 0.5) {
        if (x0 < r[0]) r[0] = x0;
        if (x1 > r[1]) r[1] = x1;
        return;
      }
      if (r) flush(m, y, r);
      runs[m].set(y, [x0, x1]);
    };
    for (const [a, ks] of byAgent) {
      ctx.fillStyle = agentColour.get(a);
      for (const k of ks) {
        if (!laneOn[lane[k]] || hidden[k]) continue;
        const y = yOf(k);
        if (y > H || y + ROW < AXIS) continue;
        const x0 = xOf(start[k]), x1 = xOf(end[k]);
        if (x1 < GUTTER - 3 || x0 > W + 3) continue;
        drawn++;
        if (span[k]) {
          const w = Math.max(1, x1 - x0);
          fill(0, x0, x0 + w, y);
          if (w > 50) labels.push(k);
        } else {
          fill(1, x0 - 1.5, x0 + 1.5, y);
        }
      }
      for (let m = 0; m < 2; m++) {
        for (const [y, r] of runs[m]) flush(m, y, r);
        runs[m].clear();
      }
    }
    ctx.fillStyle = '#111';
    for (const k of folded) {
      if (hidden[k] || !laneOn[lane[k]]) continue;
      ctx.fillText(`▸ +${desc[k]}`, xOf(span[k] ? end[k] : start[k]) + 4, yOf(k) + ROW - 5);
    }
    for (const k of labels.slice(0, 2000)) {
      const x0 = Math.max(GUTTER, xOf(start[k])), x1 = xOf(end[k]);
      ctx.fillText(clip(ctx, S[I.label[k]], x1 - x0 - 4), x0 + 2, yOf(k) + ROW - 6);
    }
    // Edges: all on demand, and always those of the selected item.
    const edge = (a, b) => {
      if (!laneOn[lane[a]] || !laneOn[lane[b]] || hidden[a] || hidden[b]) return;
      ctx.moveTo(xOf(span[a] ? end[a] : start[a]), yOf(a) + 5);
      ctx.lineTo(xOf(start[b]), yOf(b) + 5);
    };
    const E = P.edges;
    if (edgesBox.checked) {
      ctx.strokeStyle = 'rgba(60,60,60,0.35)'; ctx.lineWidth = 1; ctx.beginPath();
      for (let e = 0; e < E.from.length; e++) edge(E.from[e], E.to[e]);
      ctx.stroke();
    }
    if (selected >= 0) {
      ctx.strokeStyle = '#1f5fbf'; ctx.lineWidth = 1.5; ctx.beginPath();
      for (let e = 0; e < E.from.length; e++) if (E.from[e] === selected || E.to[e] === selected) edge(E.from[e], E.to[e]);
      ctx.stroke();
    }
    // The critical path: its items outlined and joined in path order.
    let critDrawn = 0;
    ctx.strokeStyle = CRIT; ctx.lineWidth = 2;
    ctx.beginPath();
    for (let i = 1; i < critical.length; i++) edge(critical[i - 1], critical[i]);
    ctx.stroke();
    for (const k of critical) {
      if (!laneOn[lane[k]] || hidden[k]) continue;
      const y = yOf(k), x0 = xOf(start[k]), x1 = xOf(end[k]);
      if (y > H || y + ROW < AXIS || x1 < GUTTER - 3 || x0 > W + 3) continue;
      ctx.strokeRect(x0 - 2, y - 1, Math.max(4, x1 - x0 + 4), ROW - 1);
      critDrawn++;
    }
    ctx.lineWidth = 1;
    for (let k = 0; k < N; k++) {
      if (!err[k] || !laneOn[lane[k]]) continue;
      ctx.strokeStyle = '#c00';
      ctx.strokeRect(xOf(start[k]) - 1, yOf(k), Math.max(2, xOf(end[k]) - xOf(start[k]) + 2), ROW - 3);
    }
    ctx.strokeStyle = '#e8b400'; ctx.lineWidth = 2;
    for (const k of matches.slice(0, 5000)) {
      if (!laneOn[lane[k]]) continue;
      ctx.strokeRect(xOf(start[k]) - 3, yOf(k) - 2, Math.max(6, xOf(end[k]) - xOf(start[k]) + 6), ROW + 1);
    }
    if (selected >= 0 && laneOn[lane[selected]]) {
      ctx.strokeStyle = '#000'; ctx.lineWidth = 2;
      ctx.strokeRect(xOf(start[selected]) - 3, yOf(selected) - 2, Math.max(6, xOf(end[selected]) - xOf(start[selected]) + 6), ROW + 1);
    }
    ctx.restore();
    axis(ctx);
    drawMini();
    const ms = performance.now() - t;
    canvas.dataset.renderMs = ms.toFixed(2);
    canvas.dataset.rendered = drawn;
    canvas.dataset.items = N;
    canvas.dataset.critical = critical.map((k) => I.id[k]).join(',');
    canvas.dataset.criticalDrawn = critDrawn;
    canvas.dataset.selected = selected >= 0 ? I.id[selected] : '';
    Object.assign(window.__sightline, {renderMs: ms, rendered: drawn, items: N, criticalDrawn: critDrawn});
    // The last 1,000 draw times, ms (the browser test's pan/zoom figures).
    const draws = window.__sightline.draws || (window.__sightline.draws = []);
    draws.push(ms);
    if (draws.length > 1000) draws.shift();
  }

  function axis(ctx) {
    ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, W, AXIS);
    ctx.strokeStyle = '#bbb'; ctx.beginPath(); ctx.moveTo(0, AXIS - 0.5); ctx.lineTo(W, AXIS - 0.5); ctx.stroke();
    const span = v1 - v0, target = span / 8;
    const step = Math.pow(10, Math.floor(Math.log10(Math.max(1, target))));
    const nice = [1, 2, 5, 10].map((m) => m * step).find((s) => s >= target) || step * 10;
    ctx.fillStyle = '#333';
    ctx.font = '11px sans-serif';
    for (let t = Math.ceil(v0 / nice) * nice; t <= v1; t += nice) {
      const x = xOf(t);
      ctx.fillRect(x, AXIS - 6, 1, 6);
      ctx.fillText(`+${fmtDur(Math.round(t))}`, x + 2, 13);
    }
    ctx.fillText(`${fmtDur(Math.round(v1 - v0))} shown`, 4, 13);
  }

  // Minimap: event density over the whole task, and the window shown.
  const bins = new Float64Array(400);
  for (let k = 0; k < N; k++) bins[Math.min(399, Math.floor(start[k] / total * 400))]++;
  const binMax = Math.max(1, ...bins);
  function drawMini() {
    const {ctx, w, h} = fitCanvas(mini);
    ctx.clearRect(0, 0, w, h);
    ctx.fillStyle = '#8aa4c8';
    const bw = (w - GUTTER) / 400;
    for (let b = 0; b < 400; b++) {
      const bh = (h - 4) * Math.sqrt(bins[b] / binMax);
      ctx.fillRect(GUTTER + b * bw, h - bh, Math.max(1, bw - 0.5), bh);
    }
    ctx.strokeStyle = '#1f5fbf'; ctx.lineWidth = 2;
    const x0 = GUTTER + v0 / total * (w - GUTTER), x1 = GUTTER + v1 / total * (w - GUTTER);
    ctx.strokeRect(x0, 1, Math.max(2, x1 - x0), h - 2);
    ctx.fillStyle = '#333'; ctx.font = '11px sans-serif';
    ctx.fillText('minimap (click to move)', 4, h - 6);
  }
  mini.addEventListener('click', (ev) => {
    const r = mini.getBoundingClientRect();
    const t = (ev.clientX - r.left - GUTTER) / (r.width - GUTTER) * total, half = (v1 - v0) / 2;
    setView(t - half, t + half);
  });

  let pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw(); });
  }
  let linkTimer = 0;
  function setView(a, b) {
    const w = Math.max(10, Math.min(total * 1.5, b - a));
    a = Math.max(-total * 0.25, Math.min(a, total * 1.25 - w));
    v0 = a; v1 = a + w;
    clearTimeout(linkTimer);
    linkTimer = setTimeout(() => setQuery({zoom: (v0 === 0 && v1 === total) ? null : `${Math.round(v0)}-${Math.round(v1)}`}), 200);
    redraw();
  }
  const scrollBy = (dy) => {
    scrollY = Math.max(0, Math.min(Math.max(0, contentH - (H - AXIS) + 20), scrollY + dy));
    redraw();
  };
  const zoomAt = (x, f) => { const t = tOf(x); setView(t - (t - v0) * f, t + (v1 - t) * f); };

  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    if (ev.shiftKey) scrollBy(ev.deltaY || ev.deltaX);
    else zoomAt(Math.max(GUTTER, ev.offsetX), Math.exp(ev.deltaY * 0.002));
  }, {passive: false});
  let drag = null;
  canvas.addEventListener('mousedown', (ev) => { drag = {x: ev.clientX, y: ev.clientY, v0, v1, s: scrollY, moved: false}; });
  window.addEventListener('mousemove', (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    if (!drag.moved) return;
    const dt = dx / (W - GUTTER - RIGHT) * (drag.v1 - drag.v0);
    setView(drag.v0 - dt, drag.v1 - dt);
    scrollY = drag.s; scrollBy(-dy);
  });
  window.addEventListener('mouseup', (ev) => {
    if (drag && !drag.moved) click(ev.offsetX, ev.offsetY, ev.target === canvas);
    drag = null;
  });
  canvas.addEventListener('keydown', (ev) => {
    const k = ev.key, pan = (v1 - v0) * 0.15;
    if (k === 'w' || k === '+' || k === '=') zoomAt((W + GUTTER) / 2, 0.8);
    else if (k === 's' || k === '-') zoomAt((W + GUTTER) / 2, 1.25);
    else if (k === 'a' || k === 'ArrowLeft') setView(v0 - pan, v1 - pan);
    else if (k === 'd' || k === 'ArrowRight') setView(v0 + pan, v1 + pan);
    else if (k === 'ArrowUp') scrollBy(-60);
    else if (k === 'ArrowDown') scrollBy(60);
    else if (k === '0') setView(0, total);
    else if (k === '/') find.focus();
    else if (k === 'Escape') select(-1);
    else if (k === 'c') toggle(selected);
    else return;
    ev.preventDefault();
  });
  document.addEventListener('keydown', (ev) => {
    if (ev.key === '/' && document.activeElement !== find) { ev.preventDefault(); find.focus(); }
  });

  function click(mx, my, onCanvas) {
    if (!onCanvas) return;
    canvas.focus();
    if (mx < GUTTER) {
      const hd = heads.find((h) => my >= AXIS + h.y - scrollY && my < AXIS + h.y - scrollY + h.h);
      if (hd) {
        if (collapsed.has(hd.key)) collapsed.delete(hd.key); else collapsed.add(hd.key);
        layout(); redraw();
      }
      return;
    }
    let best = -1, bestD = 6;
    for (let l = 0; l < nLanes; l++) {
      if (!laneOn[l]) continue;
      const y = AXIS + laneY[l] - scrollY;
      if (my < y || my > y + P.lanes.rows[l] * ROW + PAD) continue;
      for (const k of byLane[l]) {
        if (hidden[k]) continue;
        const yk = yOf(k);
        if (my < yk - 2 || my > yk + ROW) continue;
        const x0 = xOf(start[k]), x1 = xOf(end[k]);
        const d = mx < x0 ? x0 - mx : mx > x1 ? mx - x1 : 0;
        if (d < bestD) { bestD = d; best = k; }
      }
    }
    select(best);
  }

  async function select(k, center = false) {
    if (k >= 0 && hidden[k]) {
      for (let p = parent[k]; p >= 0; p = parent[p]) folded.delete(p);
      refold();
    }
    selected = k;
    setQuery({span: k >= 0 ? I.id[k] : null});
    if (center && k >= 0) {
      const w = v1 - v0, mid = (start[k] + end[k]) / 2;
      if (end[k] - start[k] > w) setView(start[k] - w * 0.05, end[k] + w * 0.05);
      else setView(mid - w / 2, mid + w / 2);
      if (laneOn[lane[k]]) scrollY = Math.max(0, laneY[lane[k]] - 60);
    }
    redraw();
    if (k < 0) { detail.replaceChildren(el('p', {class: 'muted'}, 'Nothing selected.')); return; }
    const d = await api(`/api/ui/task/${encodeURIComponent(P.task)}/item/${k}${skew}`);
    if (selected !== k) return;
    const fold = desc[k] > 0 ? el('button', {id: 'fold', onclick: () => toggle(k)},
      folded.has(k) ? `Expand subtree (${desc[k]})` : `Collapse subtree (${desc[k]})`) : null;
    detail.replaceChildren(fold || '', detailPane(d, (x) => select(x, true)));
  }

  // Collapse or expand the subtree under item k (also: key c on the selection, double-click).
  function toggle(k) {
    if (k < 0 || desc[k] === 0) return;
    if (folded.has(k)) folded.delete(k); else folded.add(k);
    refold();
    const b = document.getElementById('fold');
    if (b && selected === k) b.textContent = folded.has(k) ? `Expand subtree (${desc[k]})` : `Collapse subtree (${desc[k]})`;
    redraw();
  }
  canvas.addEventListener('dblclick', () => toggle(selected));

  cpList.append(...critical.slice(0, 500).map((k, i) => el('li', {},
    el('a', {href: '#', onclick: (ev) => { ev.preventDefault(); select(k, true); }}, `${S[I.agent[k]]}: ${S[I.label[k]]}`),
    el('span', {class: 'muted'}, ` +${fmtDur(start[k])}`))));
  if (critical.length > 500) cpList.append(el('li', {class: 'muted'}, `… ${critical.length - 500} more`));

  find.addEventListener('input', () => {
    const q = find.value.trim().toLowerCase();
    matches = [];
    matchAt = -1;
    if (q) {
      for (let k = 0; k < N; k++) {
        if (S[I.label[k]].toLowerCase().includes(q) || I.id[k].toLowerCase().includes(q) || S[I.agent[k]].toLowerCase().includes(q)) matches.push(k);
      }
    }
    findStatus.textContent = q ? `${matches.length} found (Enter: next)` : '';
    redraw();
  });
  find.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Enter' || !matches.length) return;
    matchAt = (matchAt + 1) % matches.length;
    select(matches[matchAt], true);
  });
  edgesBox.addEventListener('change', redraw);
  document.getElementById('collapse-all').addEventListener('click', () => {
    for (const h of heads) if (h.depth === 0) collapsed.add(h.key);
    layout(); redraw();
  });
  document.getElementById('expand-all').addEventListener('click', () => { collapsed.clear(); layout(); redraw(); });
  document.getElementById('reset-zoom').addEventListener('click', () => setView(0, total));
  window.addEventListener('resize', redraw);
  window.__sightline.select = (id) => select(I.id.indexOf(id), true);

  draw();
  const want = params.get('span');
  if (want && I.id.indexOf(want) >= 0) await select(I.id.indexOf(want), !params.get('zoom'));
  document.body.dataset.ready = 'trace';
}

/** `s` shortened with … to fit `w` px. */
/** The cost panel: one row per reporting thread and activity, each resource's share of the task. */
function costTable(box, C) {
  box.dataset.rows = C.rows.length;
  if (!C.rows.length) {
    box.append(el('h4', {}, 'Cost'), el('p', {class: 'muted'}, 'No accounting reports (run `sightline account` while the task runs).'));
    return;
  }
  const t = C.total;
  const pct = (v, of) => (of > 0 ? `${Math.round((100 * v) / of)}%` : '-');
  const net = (r) => r.net_tx_bytes + r.net_rx_bytes;
  const energy = (uj) => (uj >= 1e6 ? `${(uj / 1e6).toFixed(3)} J` : `${(uj / 1e3).toFixed(3)} mJ`);
  box.append(
    el('h4', {}, `Cost: CPU ${fmtDur(t.cpu_ns)} · read ${t.read_bytes} B · net ${net(t)} B · energy ${energy(t.energy_uj)}`),
    el('table', {class: 'cost', id: 'cost-table'},
      el('thead', {}, el('tr', {}, ['activity', 'host pid/tid', 'CPU', '%', 'read B', 'net B', 'energy'].map((h) => el('th', {}, h)))),
      el('tbody', {}, C.rows.map((r) => el('tr', {},
        el('td', {}, r.activity || '-'), el('td', {}, `${r.host || '-'} ${r.pid}/${r.tid}`),
        el('td', {}, fmtDur(r.cpu_ns)), el('td', {}, pct(r.cpu_ns, t.cpu_ns)),
        el('td', {}, r.read_bytes), el('td', {}, net(r)), el('td', {}, energy(r.energy_uj)))))));
}

function clip(ctx, s, w) {
  if (w <= 8) return '';
  if (ctx.measureText(s).width <= w) return s;
  let lo = 0, hi = s.length;
  while (lo < hi) {
    const m = (lo + hi + 1) >> 1;
    if (ctx.measureText(s.slice(0, m) + '…').width <= w) lo = m; else hi = m - 1;
  }
  return s.slice(0, lo) + '…';
}
