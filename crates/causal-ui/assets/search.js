// The search page: a form (service, operation, attributes, duration range, errors, time range,
// limit), a scatter plot of duration over time, and the results with duration bars. The query
// string holds the form (a search is a URL).
import {el, api, fmtDur, fmtTime, parseDur, mount, fitCanvas, colour} from './util.js';

function toLocal(ns) {
  return ns ? new Date(ns / 1e6).toISOString().slice(0, 16) : '';
}

export async function render(params) {
  window.__sightline.view = 'search';
  const services = (await api('/api/ui/services')).services;
  const f = (name, attrs = {}) => el('input', {name, id: `f-${name}`, value: params.get(name) || '', ...attrs});
  const svc = el('select', {name: 'service', id: 'f-service'}, el('option', {value: ''}, '(any service)'),
    services.map((s) => el('option', {value: s, selected: params.get('service') === s}, s)));
  const ops = el('datalist', {id: 'ops'});
  const loadOps = async () => {
    ops.replaceChildren();
    if (!svc.value) return;
    const o = await api(`/api/ui/operations?service=${encodeURIComponent(svc.value)}`);
    ops.append(...o.operations.slice(0, 500).map((x) => el('option', {value: x})));
  };
  svc.addEventListener('change', loadOps);
  loadOps();
  const errors = el('input', {type: 'checkbox', name: 'errors', id: 'f-errors', checked: params.get('errors') === '1'});
  const form = el('form', {class: 'search', id: 'search-form'},
    el('label', {}, 'Service ', svc),
    el('label', {}, 'Operation ', f('operation', {list: 'ops', placeholder: 'any'}), ops),
    el('label', {}, 'Attributes ', f('attrs', {placeholder: 'key=value; key=value'})),
    el('label', {}, 'Duration ', f('min', {placeholder: 'min, e.g. 10ms', size: 9}), '–', f('max', {placeholder: 'max', size: 9})),
    el('label', {}, errors, ' errors only'),
    el('label', {}, 'From ', f('since', {type: 'datetime-local'})),
    el('label', {}, 'to ', f('until', {type: 'datetime-local'})),
    el('label', {}, 'Limit ', f('limit', {type: 'number', min: 1, size: 5, placeholder: '20'})),
    el('button', {type: 'submit', id: 'f-submit'}, 'Find tasks'));
  const status = el('p', {class: 'muted', id: 'search-status'});
  const plot = el('canvas', {class: 'scatter', id: 'scatter'});
  const list = el('div', {class: 'results', id: 'results'});
  const cmp = el('button', {id: 'compare-selected', disabled: true}, 'Compare selected (2)');
  mount(el('h2', {}, 'Search tasks'), form, status, plot, cmp, list);

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const u = new URL(location.href);
    u.search = '';
    for (const [k, v] of new FormData(form)) if (v) u.searchParams.set(k, v === 'on' ? '1' : v);
    history.pushState(null, '', u);
    run(new URLSearchParams(u.search));
  });
  window.addEventListener('popstate', () => location.reload(), {once: true});
  const selected = new Set();
  cmp.addEventListener('click', () => {
    const [a, b] = [...selected];
    location.href = `/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`;
  });

  async function run(p) {
    const q = new URLSearchParams();
    for (const k of ['service', 'operation', 'limit']) if (p.get(k)) q.set(k, p.get(k));
    for (const a of (p.get('attrs') || '').split(';')) if (a.trim()) q.append('attr', a.trim());
    for (const [k, key] of [['min', 'min_duration_ns'], ['max', 'max_duration_ns']]) {
      if (!p.get(k)) continue;
      const ns = parseDur(p.get(k));
      if (Number.isNaN(ns)) { status.textContent = `bad duration ${p.get(k)}`; return; }
      q.set(key, ns);
    }
    for (const [k, key] of [['since', 'since_ns'], ['until', 'until_ns']]) {
      if (p.get(k)) q.set(key, Date.parse(p.get(k) + 'Z') * 1e6);
    }
    if (p.get('errors') === '1') q.set('errors', '1');
    status.textContent = 'Searching…';
    let hits;
    try {
      hits = (await api(`/api/ui/search?${q}`)).tasks;
    } catch (e) {
      status.textContent = e.message;
      return;
    }
    status.textContent = `${hits.length} tasks${p.toString() ? '' : ' (most recent)'}`;
    drawList(hits);
    drawScatter(hits);
    document.body.dataset.ready = 'search';
  }

  function drawList(hits) {
    const max = Math.max(1, ...hits.map((h) => dur(h)));
    list.replaceChildren(...hits.map((h) => {
      const d = dur(h);
      const box = el('input', {type: 'checkbox', title: 'select for comparison'});
      box.addEventListener('change', () => {
        if (box.checked) selected.add(h.task_id); else selected.delete(h.task_id);
        cmp.disabled = selected.size !== 2;
      });
      return el('div', {class: 'hit', dataset: {task: h.task_id}},
        box,
        el('a', {class: 'task', href: `/trace/${encodeURIComponent(h.task_id)}`}, h.task_id),
        el('span', {class: 'title'}, h.title || '(untitled)'),
        el('span', {class: 'bar'}, el('span', {style: `width:${(100 * d / max).toFixed(2)}%`})),
        el('span', {class: 'dur'}, fmtDur(d)),
        el('span', {class: 'muted'}, `${h.events} events · ${h.services.join(', ') || '?'} · ${fmtTime(first(h))}`),
        h.errors ? el('span', {class: 'err'}, `${h.errors} errors`) : null);
    }));
  }

  const first = (h) => h.first_ts_ns ?? h.received_ns;
  const dur = (h) => (h.last_ts_ns ?? 0) - (h.first_ts_ns ?? 0);

  function drawScatter(hits) {
    const {ctx, w, h} = fitCanvas(plot);
    ctx.clearRect(0, 0, w, h);
    if (!hits.length) return;
    const xs = hits.map(first), ys = hits.map(dur);
    const x0 = Math.min(...xs), x1 = Math.max(...xs) || x0 + 1, y1 = Math.max(1, ...ys);
    const px = (x) => 50 + (w - 70) * (x1 === x0 ? 0.5 : (x - x0) / (x1 - x0));
    const py = (y) => h - 20 - (h - 35) * (y / y1);
    ctx.strokeStyle = '#999';
    ctx.beginPath(); ctx.moveTo(50, 10); ctx.lineTo(50, h - 20); ctx.lineTo(w - 10, h - 20); ctx.stroke();
    ctx.fillStyle = '#444';
    ctx.font = '11px sans-serif';
    ctx.fillText(fmtDur(y1), 2, 16);
    ctx.fillText(fmtTime(x0), 50, h - 5);
    const dots = hits.map((t, i) => ({t, x: px(xs[i]), y: py(ys[i])}));
    for (const d of dots) {
      ctx.fillStyle = d.t.errors ? '#d33' : colour(d.t.services[0] || '?');
      ctx.beginPath(); ctx.arc(d.x, d.y, 5, 0, 2 * Math.PI); ctx.fill();
      ctx.strokeStyle = '#333'; ctx.stroke();
    }
    plot.onclick = (ev) => {
      const r = plot.getBoundingClientRect();
      const mx = ev.clientX - r.left, my = ev.clientY - r.top;
      const hit = dots.find((d) => Math.hypot(d.x - mx, d.y - my) <= 7);
      if (hit) location.href = `/trace/${encodeURIComponent(hit.t.task_id)}`;
    };
    plot.dataset.dots = dots.length;
  }

  run(params);
}
