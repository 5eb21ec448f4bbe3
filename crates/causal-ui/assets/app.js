// Sightline's page: one ES module per view, chosen by the path (deep links: every view has a
// URL). No bundler; the server embeds these files in the binary.
import {mount, el} from './util.js';

window.__sightline = {view: null, renderMs: null};

async function route() {
  const path = location.pathname;
  const params = new URLSearchParams(location.search);
  try {
    const m = path.match(/^\/trace\/([^/]+)$/);
    if (m) {
      const task = decodeURIComponent(m[1]);
      if (params.get('view') === 'dag') (await import('./dag.js')).render(task, params);
      else (await import('./trace.js')).render(task, params);
    } else if (path === '/compare') {
      (await import('./compare.js')).render(params);
    } else {
      (await import('./search.js')).render(params);
    }
  } catch (e) {
    mount(el('p', {class: 'error'}, String(e.message || e)));
    document.body.dataset.ready = 'error';
  }
}

route();
