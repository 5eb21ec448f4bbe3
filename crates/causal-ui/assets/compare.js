// Compare two tasks: their summaries side by side, time on the critical path per agent, and
// the structure diff (event kinds added, missing or changed in count), from /api/ui/compare.
import {el, api, fmtDur, mount} from './util.js';

export async function render(params) {
  window.__sightline.view = 'compare';
  const a = params.get('a') || '', b = params.get('b') || '';
  const form = el('form', {class: 'search', id: 'compare-form', method: 'get', action: '/compare'},
    el('label', {}, 'Task A ', el('input', {name: 'a', id: 'f-a', value: a, size: 34})),
    el('label', {}, 'Task B ', el('input', {name: 'b', id: 'f-b', value: b, size: 34})),
    el('button', {type: 'submit'}, 'Compare'));
  if (!a || !b) { mount(el('h2', {}, 'Compare two tasks'), form); document.body.dataset.ready = 'compare'; return; }
  const C = (await api(`/api/ui/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`)).comparison;
  const link = (t) => el('a', {href: `/trace/${encodeURIComponent(t)}`}, t);
  const row = (name, f) => el('tr', {}, el('th', {}, name), el('td', {}, f(C.a)), el('td', {}, f(C.b)));
  const summary = el('table', {class: 'cmp', id: 'cmp-summary'},
    el('tr', {}, el('th', {}), el('th', {}, 'A'), el('th', {}, 'B')),
    row('task', (s) => link(s.task)),
    row('events', (s) => s.events), row('edges', (s) => s.edges), row('joins', (s) => s.joins),
    row('duration', (s) => fmtDur(s.duration_ns)),
    row('critical path', (s) => `${s.critical_path_events} events, ${fmtDur(s.critical_path_ns)}`));
  const maxNs = Math.max(1, ...C.agents.flatMap((g) => g.critical_path_ns));
  const bar = (ns, cls) => el('span', {class: `bar ${cls}`}, el('span', {style: `width:${(100 * ns / maxNs).toFixed(2)}%`}));
  const agents = el('table', {class: 'cmp', id: 'cmp-agents'},
    el('tr', {}, el('th', {}, 'agent'), el('th', {}, 'events A'), el('th', {}, 'events B'), el('th', {}, 'critical path A'), el('th', {}, 'critical path B')),
    C.agents.map((g) => el('tr', {},
      el('td', {}, g.agent), el('td', {}, g.events[0]), el('td', {}, g.events[1]),
      el('td', {}, bar(g.critical_path_ns[0], 'a'), ' ', fmtDur(g.critical_path_ns[0])),
      el('td', {}, bar(g.critical_path_ns[1], 'b'), ' ', fmtDur(g.critical_path_ns[1])))));
  const change = (k) => k.count[0] === 0 ? 'added in B' : k.count[1] === 0 ? 'missing in B' : 'changed';
  const kinds = el('table', {class: 'cmp', id: 'cmp-kinds'},
    el('tr', {}, el('th', {}, 'event kind'), el('th', {}, 'A'), el('th', {}, 'B'), el('th', {}, '')),
    C.kinds.slice(0, 300).map((k) => el('tr', {class: change(k).split(' ')[0]},
      el('td', {}, k.kind), el('td', {}, k.count[0]), el('td', {}, k.count[1]), el('td', {}, change(k)))));
  mount(el('h2', {}, 'Compare two tasks'), form, summary,
    el('h3', {}, 'Time on the critical path per agent'), agents,
    el('h3', {}, `Structure: ${C.kinds.length} event kinds differ`), kinds);
  document.body.dataset.ready = 'compare';
}
