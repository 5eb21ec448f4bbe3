// Compare two tasks: their summaries side by side, time on the critical path per agent, and
// the structure diff by operation (an agent's span name or label: added, missing or changed in
// count or time, with its time in A and B and the difference), from /api/ui/compare.
import {el, api, fmtDur, mount} from './util.js';

export async function render(params) {
  window.__sightline.view = 'compare';
  const a = params.get('a') || '', b = params.get('b') || '';
  const form = el('form', {class: 'search', id: 'compare-form', method: 'get', action: '/compare'},
    el('label', {}, 'Task A ', el('input', {name: 'a', id: 'f-a', class: 'task-id', value: a, size: 40})),
    el('label', {}, 'Task B ', el('input', {name: 'b', id: 'f-b', class: 'task-id', value: b, size: 40})),
    el('button', {type: 'submit'}, 'Compare'));
  if (!a || !b) { mount(el('h2', {}, 'Compare two tasks'), form); document.body.dataset.ready = 'compare'; return; }
  const C = (await api(`/api/ui/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`)).comparison;
  const link = (t) => el('a', {href: `/trace/${encodeURIComponent(t)}`}, t);
  // B − A; a duration is coloured (red: B took longer, green: B was faster), a count is not.
  const diff = (p, fmt = fmtDur) => {
    const d = p[1] - p[0], tint = fmt === fmtDur ? (d > 0 ? ' slower' : d < 0 ? ' faster' : '') : '';
    return el('td', {class: `num${tint}`}, `${d > 0 ? '+' : ''}${fmt(d)}`);
  };
  // A summary row: A, B and, for a number `key` of each side, B − A (as a count or a duration).
  const row = (name, f, key, fmt = String) => el('tr', {}, el('th', {}, name), el('td', {}, f(C.a)), el('td', {}, f(C.b)),
    key ? diff([C.a[key], C.b[key]], fmt) : el('td', {}));
  const summary = el('table', {class: 'cmp', id: 'cmp-summary'},
    el('tr', {}, el('th', {}), el('th', {}, 'A'), el('th', {}, 'B'), el('th', {}, 'B − A')),
    row('task', (s) => link(s.task)),
    row('events', (s) => s.events, 'events'), row('edges', (s) => s.edges, 'edges'),
    row('joins', (s) => s.joins, 'joins'),
    row('duration', (s) => fmtDur(s.duration_ns), 'duration_ns', fmtDur),
    row('critical path', (s) => `${s.critical_path_events} events, ${fmtDur(s.critical_path_ns)}`, 'critical_path_ns', fmtDur));
  const num = (v) => el('td', {class: 'num'}, v);
  const maxNs = Math.max(1, ...C.agents.flatMap((g) => g.critical_path_ns));
  const bar = (ns, cls) => el('span', {class: `bar ${cls}`}, el('span', {style: `width:${(100 * ns / maxNs).toFixed(2)}%`}));
  const agents = el('table', {class: 'cmp', id: 'cmp-agents'},
    el('tr', {}, el('th', {}, 'agent'), el('th', {}, 'events A'), el('th', {}, 'events B'),
      el('th', {}, 'critical path A'), el('th', {}, 'critical path B'), el('th', {}, 'B − A')),
    C.agents.map((g) => el('tr', {},
      el('td', {}, g.agent), num(g.events[0]), num(g.events[1]),
      el('td', {}, bar(g.critical_path_ns[0], 'a'), ' ', fmtDur(g.critical_path_ns[0])),
      el('td', {}, bar(g.critical_path_ns[1], 'b'), ' ', fmtDur(g.critical_path_ns[1])),
      diff(g.critical_path_ns))));
  const words = {added: 'added in B', missing: 'missing in B', changed: 'changed', same: 'same'};
  const differ = C.operations.filter((o) => o.change !== 'same').length;
  const shown = C.operations.slice(0, 500);
  const ops = el('table', {class: 'cmp', id: 'cmp-ops'},
    el('tr', {}, el('th', {}, ''), el('th', {}, 'agent'), el('th', {}, 'operation'),
      el('th', {}, 'count A'), el('th', {}, 'count B'), el('th', {}, 'time A'), el('th', {}, 'time B'),
      el('th', {}, 'B − A'), el('th', {}, 'critical path A'), el('th', {}, 'critical path B')),
    shown.map((o) => el('tr', {class: o.change},
      el('td', {class: 'change'}, words[o.change] || o.change), el('td', {}, o.agent), el('td', {}, o.operation),
      num(o.count[0]), num(o.count[1]), num(fmtDur(o.time_ns[0])), num(fmtDur(o.time_ns[1])), diff(o.time_ns),
      num(fmtDur(o.critical_path_ns[0])), num(fmtDur(o.critical_path_ns[1])))));
  mount(el('h2', {}, 'Compare two tasks'), form, summary,
    el('h3', {class: 'cmp'}, 'Time on the critical path per agent'), agents,
    el('h3', {class: 'cmp', id: 'cmp-ops-head'}, `Operations: ${differ} of ${C.operations.length} differ`),
    el('p', {class: 'muted note'}, 'An operation is an agent\'s span name or event label. Time: a span\'s duration, ' +
      'or for an event the time since its latest parent; summed over its occurrences.' +
      (shown.length < C.operations.length ? ` First ${shown.length} shown.` : '')),
    ops);
  document.body.dataset.ready = 'compare';
}
