// The DAG view: the task's events in the layered layout computed (once, and cached) by the
// server (causal_analysis::layout), drawn on a canvas: layers top to bottom, edges as lines,
// joins as diamonds, the critical path highlighted. Zoom and pan with mouse and keyboard.
import {el, api, fmtDur, mount, fitCanvas, colour, detailPane, setQuery} from './util.js';

const DX = 150, DY = 46, NW = 130, NH = 22, CRIT = '#e0115f';

export async function render(task, params) {
  window.__sightline.view = 'dag';
  const skew = params.get('skew') === '0' ? '&skew=0' : '';
  const D = await api(`/api/ui/task/${encodeURIComponent(task)}/dag?${skew.slice(1)}`);
  const n = D.events, S = D.strings;
  const crit = new Uint8Array(n), critOrder = D.critical_path || [];
  for (const i of critOrder) crit[i] = 1;
  const join = new Uint8Array(n);
  for (const i of D.joins) join[i] = 1;
  const canvas = el('canvas', {class: 'dag', id: 'dag', tabindex: 0});
  const detail = el('div', {id: 'detail'}, el('p', {class: 'muted'}, 'Click an event for its attributes.'));
  mount(
    el('div', {class: 'trace-head'},
      el('h2', {}, `DAG of task ${D.task}`),
      el('p', {class: 'muted'}, `${n} events · ${D.edges.from.length} edges · ${D.joins.length} joins · ${D.layers} layers, widest ${D.width} · critical path ${critOrder.length} events (red)`)),
    el('div', {class: 'toolbar'},
      el('a', {href: `/trace/${encodeURIComponent(D.task)}`}, 'Timeline view'),
      el('span', {class: 'muted'}, 'wheel: scroll · ctrl+wheel, w/s: zoom · drag: pan · a/d ↑/↓ PgUp/PgDn · 0: overview · 1: readable')),
    el('div', {class: 'trace-body'}, canvas, el('aside', {class: 'side'}, detail)));

  // World coordinates: node i at (position*DX, layer*DY); view = scale and offset.
  const wx = (i) => D.position[i] * DX, wy = (i) => D.layer[i] * DY;
  let scale = 1, ox = 20, oy = 20, selected = -1;
  // Overview (key 0): the whole DAG on screen. Readable (the default, key 1): labels legible,
  // the widest layer fitted to the width if it can be, starting at the roots; scroll down.
  const fit = () => {
    const r = canvas.getBoundingClientRect();
    const ww = Math.max(1, D.width * DX), wh = Math.max(1, D.layers * DY);
    scale = Math.max(0.002, Math.min(2, (r.width - 40) / ww, (r.height - 40) / wh));
    ox = 20; oy = 20;
  };
  const readable = () => {
    const r = canvas.getBoundingClientRect();
    scale = Math.max(0.5, Math.min(1, (r.width - 40) / Math.max(1, D.width * DX)));
    ox = Math.max(20, (r.width - D.width * DX * scale) / 2); oy = 20;
  };
  const z = (params.get('zoom') || '').split(',').map(Number);
  if (z.length === 3 && z.every(Number.isFinite)) [scale, ox, oy] = z; else readable();
  const sx = (x) => ox + x * scale, sy = (y) => oy + y * scale;

  function draw() {
    const t = performance.now();
    const {ctx, w, h} = fitCanvas(canvas);
    ctx.clearRect(0, 0, w, h);
    const vis = (i) => { const x = sx(wx(i)), y = sy(wy(i)); return x > -NW * scale - 5 && x < w + 5 && y > -NH * scale - 5 && y < h + 5; };
    const cx = (i) => sx(wx(i) + NW / 2), cyTop = (i) => sy(wy(i)), cyBot = (i) => sy(wy(i) + NH);
    ctx.lineWidth = 1;
    ctx.strokeStyle = 'rgba(80,80,80,0.45)';
    ctx.beginPath();
    const E = D.edges;
    const critEdge = [];
    for (let e = 0; e < E.from.length; e++) {
      const a = E.from[e], b = E.to[e];
      if (!vis(a) && !vis(b)) continue;
      if (crit[a] && crit[b]) { critEdge.push(e); continue; }
      ctx.moveTo(cx(a), cyBot(a)); ctx.lineTo(cx(b), cyTop(b));
    }
    ctx.stroke();
    ctx.strokeStyle = CRIT; ctx.lineWidth = 2.5;
    ctx.beginPath();
    for (const e of critEdge) { const a = E.from[e], b = E.to[e]; ctx.moveTo(cx(a), cyBot(a)); ctx.lineTo(cx(b), cyTop(b)); }
    ctx.stroke();
    let drawn = 0, critDrawn = 0;
    const text = NW * scale > 45;
    ctx.font = `${Math.min(12, Math.max(8, 11 * scale))}px sans-serif`;
    for (let i = 0; i < n; i++) {
      if (!vis(i)) continue;
      drawn++;
      const x = sx(wx(i)), y = sy(wy(i)), ww = NW * scale, hh = Math.max(2, NH * scale);
      ctx.fillStyle = colour(S[D.host[i]]);
      if (join[i]) {
        ctx.beginPath();
        ctx.moveTo(x + ww / 2, y - hh * 0.25); ctx.lineTo(x + ww + 4, y + hh / 2);
        ctx.lineTo(x + ww / 2, y + hh * 1.25); ctx.lineTo(x - 4, y + hh / 2); ctx.closePath();
        ctx.fill();
      } else ctx.fillRect(x, y, ww, hh);
      if (crit[i]) { ctx.strokeStyle = CRIT; ctx.lineWidth = 2.5; ctx.strokeRect(x - 1, y - 1, ww + 2, hh + 2); critDrawn++; }
      if (i === selected) { ctx.strokeStyle = '#000'; ctx.lineWidth = 2; ctx.strokeRect(x - 3, y - 3, ww + 6, hh + 6); }
      if (text) {
        ctx.fillStyle = '#111';
        ctx.save(); ctx.beginPath(); ctx.rect(x, y, ww, hh); ctx.clip();
        ctx.fillText(S[D.label[i]], x + 3, y + hh * 0.7);
        ctx.restore();
      }
    }
    const ms = performance.now() - t;
    Object.assign(canvas.dataset, {renderMs: ms.toFixed(2), rendered: drawn, events: n, criticalDrawn: critDrawn,
      critical: critOrder.map((i) => D.id[i]).join(','), joins: D.joins.length});
    Object.assign(window.__sightline, {renderMs: ms, rendered: drawn, items: n, criticalDrawn: critDrawn});
  }

  let pending = false, linkTimer = 0;
  const redraw = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw(); });
    clearTimeout(linkTimer);
    linkTimer = setTimeout(() => setQuery({zoom: `${scale.toPrecision(4)},${ox.toFixed(0)},${oy.toFixed(0)}`}), 200);
  };
  const zoomAt = (x, y, f) => { ox = x - (x - ox) * f; oy = y - (y - oy) * f; scale *= f; redraw(); };
  // Wheel scrolls (a DAG is tall); ctrl+wheel (a pinch) zooms.
  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    if (ev.ctrlKey) zoomAt(ev.offsetX, ev.offsetY, Math.exp(-ev.deltaY * 0.004));
    else { ox -= ev.deltaX; oy -= ev.deltaY; redraw(); }
  }, {passive: false});
  let drag = null;
  canvas.addEventListener('mousedown', (ev) => { drag = {x: ev.clientX, y: ev.clientY, ox, oy, moved: false}; });
  window.addEventListener('mousemove', (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    if (drag.moved) { ox = drag.ox + dx; oy = drag.oy + dy; redraw(); }
  });
  window.addEventListener('mouseup', (ev) => {
    if (drag && !drag.moved && ev.target === canvas) pick(ev.offsetX, ev.offsetY);
    drag = null;
  });
  canvas.addEventListener('keydown', (ev) => {
    const r = canvas.getBoundingClientRect(), k = ev.key;
    if (k === 'w' || k === '+') zoomAt(r.width / 2, r.height / 2, 1.25);
    else if (k === 's' || k === '-') zoomAt(r.width / 2, r.height / 2, 0.8);
    else if (k === 'a' || k === 'ArrowLeft') { ox += 80; redraw(); }
    else if (k === 'd' || k === 'ArrowRight') { ox -= 80; redraw(); }
    else if (k === 'ArrowUp') { oy += 80; redraw(); }
    else if (k === 'ArrowDown') { oy -= 80; redraw(); }
    else if (k === '0') { fit(); redraw(); }
    else if (k === '1') { readable(); redraw(); }
    else if (k === 'PageDown' || k === ' ') { oy -= r.height * 0.9; redraw(); }
    else if (k === 'PageUp') { oy += r.height * 0.9; redraw(); }
    else return;
    ev.preventDefault();
  });
  async function pick(mx, my) {
    canvas.focus();
    let best = -1;
    for (let i = 0; i < n; i++) {
      const x = sx(wx(i)), y = sy(wy(i));
      if (mx >= x - 3 && mx <= x + NW * scale + 3 && my >= y - 3 && my <= y + Math.max(2, NH * scale) + 3) { best = i; break; }
    }
    selected = best;
    redraw();
    if (best < 0) return;
    const d = await api(`/api/ui/task/${encodeURIComponent(D.task)}/item/${D.item[best]}${skew ? '?skew=0' : ''}`);
    detail.replaceChildren(el('p', {class: 'muted'}, `event ${D.id[best]} at +${fmtDur(D.time[best])}`), detailPane(d, () => {}));
  }
  window.addEventListener('resize', redraw);
  draw();
  document.body.dataset.ready = 'dag';
}
