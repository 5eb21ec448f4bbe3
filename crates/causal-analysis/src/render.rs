//! Views of a task: indented text that shows forks and joins, Graphviz DOT, and JSON.
//!
//! The text view ([`text_view`]) opens with the task's counts, its problems and any notes (the
//! clock-skew corrections), then the critical path when asked for (each step with two labelled
//! time columns: offset from the task's start, and the step's duration), then the graph:
//!
//! - a task made only of spans prints each span once, as a tree: offset from the task's start,
//!   duration, `service: name (kind, status)`, location and span id, with its span events and
//!   links under it;
//! - any other task prints a spanning tree of its events in which every event hangs under the
//!   parent that finished last, so a chain of events stays at one indentation, a fork indents its
//!   branches, and every other parent of a join prints a `joins` line pointing at it. Nothing is
//!   hidden: every event is printed once and every edge is either the tree edge or a `joins` line
//!   (edges from unknown events are listed as problems).

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::critical::CriticalPath;
use crate::graph::{TaskGraph, fmt_duration};
use crate::model::{EdgeKind, Event};

/// A one-line description of an event: its agent and label, or, for reports without them (HDFS
/// instrumentation points report `Operation` and `Source` instead), the first such field.
pub fn describe(e: &Event) -> String {
    let what = e
        .label()
        .map(str::to_string)
        .or_else(|| e.field("Operation").map(|o| format!("Operation={o}")))
        .or_else(|| e.field("Source").map(|s| format!("Source={s}")))
        .or_else(|| e.fields.first().map(|(k, v)| format!("{k}={v}")))
        .unwrap_or_default();
    match &e.agent {
        Some(a) => format!("{a}: {what}"),
        None => what,
    }
}

fn location(e: &Event) -> String {
    let mut s = String::new();
    if let Some(h) = &e.host {
        s.push_str(h);
    }
    if let Some(p) = &e.process {
        if !s.is_empty() {
            s.push(' ');
        }
        // `8201@manny` on host manny: the host part repeats; keep the pid.
        match (&e.host, p.split_once('@')) {
            (Some(h), Some((pid, ph))) if ph == h => s.push_str(pid),
            _ => s.push_str(p),
        }
    }
    if let Some(t) = e.tid {
        let _ = write!(s, " t{t}");
    }
    s
}

/// `[loc]  ` or nothing when the event says nothing about where it ran.
fn bracket(loc: &str) -> String {
    if loc.is_empty() {
        String::new()
    } else {
        format!("[{loc}]  ")
    }
}

fn offset(e: &Event, t0: Option<i64>) -> String {
    match (e.timestamp_ns, t0) {
        (Some(t), Some(t0)) => format!("+{}", fmt_duration(t.saturating_sub(t0))),
        _ => "+?".to_string(),
    }
}

/// Deepest indentation the text view draws, levels (two spaces each). Deeper branches print at
/// this level after a `[depth N]` marker, so a task with thousands of nested forks costs output
/// linear in its events instead of quadratic.
pub const MAX_INDENT: usize = 32;

fn indent(depth: usize) -> String {
    if depth <= MAX_INDENT {
        "  ".repeat(depth)
    } else {
        format!("{}[depth {depth}] ", "  ".repeat(MAX_INDENT))
    }
}

/// What [`text_view`] prints.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextOptions<'a> {
    /// The critical path: printed before the graph, and its events marked `*` in it.
    pub critical_path: Option<&'a CriticalPath>,
    /// Print the header and the critical path only, not the graph.
    pub critical_path_only: bool,
    /// Lines printed under the header (the clock-skew adjustments of `show`).
    pub notes: &'a [String],
    /// Print each span's attributes (the other fields of its start and end events) under it.
    pub verbose: bool,
}

/// The indented text view of `g` with the critical path `cp` (if any) before the graph.
pub fn text(g: &TaskGraph, cp: Option<&CriticalPath>) -> String {
    text_view(
        g,
        &TextOptions {
            critical_path: cp,
            ..TextOptions::default()
        },
    )
}

/// The text view: a header line (counts, duration), the problems found, `opts.notes`, the critical
/// path, then the graph. A task made only of spans prints each span once, as a tree (offset from
/// the task's start, duration, kind, status); any other task prints its events as a spanning tree
/// that shows forks and joins (see the module docs).
pub fn text_view(g: &TaskGraph, opts: &TextOptions<'_>) -> String {
    let mut out = String::new();
    let n = g.len();
    let span = g
        .time_span()
        .map(|(a, b)| fmt_duration(b.saturating_sub(a)))
        .unwrap_or_else(|| "?".into());
    let _ = writeln!(
        out,
        "task {}: {} events, {} edges, {} joins, {} roots, {} hosts, duration {}",
        g.task,
        n,
        g.edges.len(),
        g.joins().len(),
        g.roots().len(),
        g.hosts().len(),
        span
    );
    for p in &g.problems {
        let _ = writeln!(out, "problem: {p}");
    }
    for l in opts.notes {
        let _ = writeln!(out, "{l}");
    }
    if let Some(cp) = opts.critical_path {
        out.push_str(&critical_path_text(g, cp));
    }
    if opts.critical_path_only {
        return out;
    }
    if opts.critical_path.is_some() {
        out.push('\n');
    }
    let on_path = opts
        .critical_path
        .map(|c| c.mask(n))
        .unwrap_or_else(|| vec![false; n]);
    match SpanIndex::of_span_task(g) {
        Some(spans) => span_tree_text(g, &spans, &on_path, opts.verbose, &mut out),
        None => event_tree_text(g, &on_path, &mut out),
    }
    out
}

/// The spans of a task whose every event belongs to one (`S:start`, `S:end`, `S:eventN`).
struct SpanIndex {
    /// (start event, end event) per span.
    spans: Vec<(usize, usize)>,
    /// Child spans of each span, by start time then id.
    children: Vec<Vec<usize>>,
    /// Span events of each span, in time order.
    events: Vec<Vec<usize>>,
    /// Spans without a parent span in the task, by start time then id.
    roots: Vec<usize>,
}

impl SpanIndex {
    fn of_span_task(g: &TaskGraph) -> Option<SpanIndex> {
        use std::collections::HashMap;
        if g.is_empty() {
            return None;
        }
        let mut by_id: HashMap<&str, usize> = HashMap::new();
        let mut spans = Vec::new();
        for (i, e) in g.events.iter().enumerate() {
            if let Some(sid) = e.id.strip_suffix(":start") {
                let end = g.index_of(&format!("{sid}:end"))?;
                by_id.insert(sid, spans.len());
                spans.push((i, end));
            }
        }
        let mut events = vec![Vec::new(); spans.len()];
        for (i, e) in g.events.iter().enumerate() {
            let (sid, what) = e.id.rsplit_once(':')?;
            let s = *by_id.get(sid)?;
            if what.starts_with("event") {
                events[s].push(i);
            } else if what != "start" && what != "end" {
                return None;
            }
        }
        let mut children = vec![Vec::new(); spans.len()];
        let mut roots = Vec::new();
        for (s, &(start, _)) in spans.iter().enumerate() {
            let parent = g.events[start]
                .parents
                .iter()
                .filter(|p| p.kind == EdgeKind::Causal)
                .find_map(|p| p.id.strip_suffix(":start").and_then(|ps| by_id.get(ps)))
                .copied()
                .filter(|&p| p != s);
            match parent {
                Some(p) => children[p].push(s),
                None => roots.push(s),
            }
        }
        let key = |s: &usize| g.order_key(spans[*s].0);
        roots.sort_by_key(key);
        for c in &mut children {
            c.sort_by_key(key);
        }
        for e in &mut events {
            e.sort_by_key(|&i| g.order_key(i));
        }
        Some(SpanIndex {
            spans,
            children,
            events,
            roots,
        })
    }
}

/// `name (kind, status)` of a span from its start and end events (`docs/otlp-mapping.md`).
fn span_title(start: &Event, end: &Event) -> String {
    let name = start
        .field("span.name")
        .map(str::to_string)
        .or_else(|| {
            start
                .label()
                .map(|l| l.strip_suffix(" start").unwrap_or(l).to_string())
        })
        .unwrap_or_default();
    let mut extra: Vec<String> = Vec::new();
    if let Some(k) = start.field("span.kind") {
        extra.push(k.to_string());
    }
    match (end.field("status.code"), end.field("status.message")) {
        (Some(c), Some(m)) => extra.push(format!("{c}: {m}")),
        (Some(c), None) => extra.push(c.to_string()),
        (None, Some(m)) => extra.push(format!("status: {m}")),
        (None, None) => {}
    }
    let who = start
        .agent
        .as_deref()
        .map(|a| format!("{a}: "))
        .unwrap_or_default();
    if extra.is_empty() {
        format!("{who}{name}")
    } else {
        format!("{who}{name} ({})", extra.join(", "))
    }
}

/// Fields shown in a span's own line, not repeated among its attributes.
const SPAN_LINE_FIELDS: [&str; 4] = ["span.name", "span.kind", "status.code", "status.message"];

fn span_tree_text(
    g: &TaskGraph,
    ix: &SpanIndex,
    on_path: &[bool],
    verbose: bool,
    out: &mut String,
) {
    let t0 = g.time_span().map(|(a, _)| a);
    let _ = writeln!(
        out,
        "spans ({}): +offset from the task's start, then duration; * on the critical path",
        ix.spans.len()
    );
    let mut printed = vec![false; ix.spans.len()];
    // Roots first; spans on a cycle of parents are reached from no root and start afterwards.
    let starts: Vec<usize> = ix.roots.iter().copied().chain(0..ix.spans.len()).collect();
    for s in starts {
        let mut stack = vec![(s, 0usize)];
        while let Some((s, depth)) = stack.pop() {
            if std::mem::replace(&mut printed[s], true) {
                continue;
            }
            let (si, ei) = ix.spans[s];
            let (start, end) = (&g.events[si], &g.events[ei]);
            let pad = indent(depth);
            let mark = if on_path[si] || on_path[ei] {
                "* "
            } else {
                "  "
            };
            let dur = match (start.timestamp_ns, end.timestamp_ns) {
                (Some(a), Some(b)) => fmt_duration(b.saturating_sub(a)),
                _ => "?".into(),
            };
            let sid = start.id.strip_suffix(":start").unwrap_or(&start.id);
            let _ = writeln!(
                out,
                "{mark}{pad}{} {dur}  {}  {}{sid}",
                offset(start, t0),
                span_title(start, end),
                bracket(&location(start)),
            );
            if verbose {
                for (k, v) in start.fields.iter().chain(&end.fields) {
                    if !SPAN_LINE_FIELDS.contains(&k.as_str()) {
                        let _ = writeln!(out, "  {pad}  {k} = {v}");
                    }
                }
            }
            for p in start.parents.iter().filter(|p| p.kind == EdgeKind::Link) {
                let from = p.id.strip_suffix(":end").unwrap_or(&p.id);
                match g.index_of(&p.id).and_then(|i| g.events[i].label()) {
                    Some(l) => {
                        let name = l.strip_suffix(" end").unwrap_or(l);
                        let _ = writeln!(out, "  {pad}  link from {name} ({from})");
                    }
                    None => {
                        let _ = writeln!(out, "  {pad}  link from {from}");
                    }
                }
            }
            for &e in &ix.events[s] {
                let ev = &g.events[e];
                let _ = writeln!(
                    out,
                    "  {pad}  {} event {}",
                    offset(ev, t0),
                    ev.label().unwrap_or("")
                );
            }
            for &c in ix.children[s].iter().rev() {
                stack.push((c, depth + 1));
            }
        }
    }
}

fn event_tree_text(g: &TaskGraph, on_path: &[bool], out: &mut String) {
    let n = g.len();
    let t0 = g.time_span().map(|(a, _)| a);
    let _ = writeln!(
        out,
        "events: +offset from the task's start; * on the critical path"
    );
    // Home parent: the known parent that finished last.
    let home: Vec<Option<usize>> = (0..n)
        .map(|i| g.latest_of(g.parents_of(i).iter().copied()))
        .collect();
    let mut printed = vec![false; n];
    let mut starts = g.roots();
    // Events on cycles are unreachable from the roots; they are started afterwards.
    starts.extend(g.topological_order().iter().copied());
    for s in starts {
        if printed[s] {
            continue;
        }
        let mut stack = vec![(s, 0usize)];
        while let Some((i, depth)) = stack.pop() {
            if std::mem::replace(&mut printed[i], true) {
                continue;
            }
            let e = &g.events[i];
            let pad = indent(depth);
            let mark = if on_path[i] { "* " } else { "  " };
            let ps = g.parents_of(i);
            if ps.len() >= 2 {
                let others: Vec<&str> = ps
                    .iter()
                    .filter(|&&p| Some(p) != home[i])
                    .map(|&p| g.events[p].id.as_str())
                    .collect();
                let _ = writeln!(
                    out,
                    "{mark}{pad}join of {} parents (also after {})",
                    ps.len(),
                    others.join(", ")
                );
            }
            let _ = writeln!(
                out,
                "{mark}{pad}{} {}  {}{}",
                offset(e, t0),
                describe(e),
                bracket(&location(e)),
                e.id
            );
            for &c in g.children_of(i) {
                if home[c] != Some(i) {
                    let _ = writeln!(
                        out,
                        "  {pad}-> joins {} ({})",
                        g.events[c].id,
                        describe(&g.events[c])
                    );
                }
            }
            let kids: Vec<usize> = g
                .children_of(i)
                .iter()
                .copied()
                .filter(|&c| home[c] == Some(i) && !printed[c])
                .collect();
            match kids.len() {
                0 => {}
                1 => stack.push((kids[0], depth)),
                k => {
                    let _ = writeln!(out, "  {pad}fork into {k} branches");
                    for &c in kids.iter().rev() {
                        stack.push((c, depth + 1));
                    }
                }
            }
        }
    }
}

/// The critical path as text: a heading with its length and rules, each step with two labelled
/// time columns (offset from the task's start, the step's duration), then the time per agent,
/// host and process.
pub fn critical_path_text(g: &TaskGraph, cp: &CriticalPath) -> String {
    let mut out = String::new();
    let mixed = cp.rules.len() > 1;
    let rules: Vec<&str> = cp.rules.iter().map(|r| r.as_str()).collect();
    let _ = writeln!(
        out,
        "\ncritical path: {} events, {}{}; rule: {}{}; columns: offset from the task's start, step duration",
        cp.steps.len(),
        fmt_duration(cp.total_ns),
        if cp.reached_root {
            ""
        } else {
            " (stopped at a cycle before reaching a root)"
        },
        rules.join(" and "),
        if mixed {
            " (marked per step: span, hb)"
        } else {
            ""
        }
    );
    for note in &cp.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    for s in &cp.steps {
        let e = &g.events[s.index];
        let rule = match (mixed, s.rule) {
            (false, _) => "",
            (true, crate::critical::Rule::SpanTree) => "span ",
            (true, crate::critical::Rule::HappenedBefore) => "hb   ",
        };
        let _ = writeln!(
            out,
            "  {:>12} {:>11}  {rule}{}{}{}  {}{}",
            format!("+{}", fmt_duration(s.offset_ns)),
            fmt_duration(s.delta_ns),
            if s.join { "(join) " } else { "" },
            describe(e),
            if s.clipped { " (clipped)" } else { "" },
            bracket(&location(e)),
            e.id
        );
    }
    for (what, shares) in [
        ("agent", &cp.by_agent),
        ("host", &cp.by_host),
        ("process", &cp.by_process),
    ] {
        let _ = writeln!(out, "time by {what}:");
        for s in shares {
            let pct = if cp.total_ns > 0 {
                100.0 * s.ns as f64 / cp.total_ns as f64
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "  {:>12} {:>5.1}%  {:>4} steps  {}",
                fmt_duration(s.ns),
                pct,
                s.steps,
                s.name
            );
        }
    }
    let _ = writeln!(
        out,
        "time between processes: {}",
        fmt_duration(cp.cross_process_ns)
    );
    out
}

fn dot_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if c.is_control() => {}
            c => o.push(c),
        }
    }
    o
}

/// The task as a Graphviz DOT digraph (`dot -Tsvg`). Joins are drawn as double octagons, link edges
/// dashed, nested-span edges dotted, unknown parents as dashed grey ellipses, and the critical path (when given) in red.
pub fn dot(g: &TaskGraph, cp: Option<&CriticalPath>) -> String {
    let n = g.len();
    let on_path = cp.map(|c| c.mask(n)).unwrap_or_else(|| vec![false; n]);
    let t0 = g.time_span().map(|(a, _)| a);
    let mut out = String::new();
    let _ = writeln!(out, "digraph \"{}\" {{", dot_escape(&g.task));
    let _ = writeln!(out, "  rankdir=TB;\n  node [shape=box, fontsize=10];");
    for (i, e) in g.events.iter().enumerate() {
        let shape = if g.parents_of(i).len() >= 2 {
            ", shape=doubleoctagon"
        } else {
            ""
        };
        let color = if on_path[i] {
            ", color=red, penwidth=2"
        } else {
            ""
        };
        let loc = location(e);
        let label = if loc.is_empty() {
            format!("{}\n{}", describe(e), offset(e, t0))
        } else {
            format!("{}\n{loc}\n{}", describe(e), offset(e, t0))
        };
        let _ = writeln!(
            out,
            "  \"{}\" [label=\"{}\"{shape}{color}];",
            dot_escape(&e.id),
            dot_escape(&label)
        );
    }
    let mut unknown: Vec<&str> = g
        .edges
        .iter()
        .filter(|e| e.from_index.is_none())
        .map(|e| e.from.as_str())
        .collect();
    unknown.sort();
    unknown.dedup();
    for u in unknown {
        let _ = writeln!(
            out,
            "  \"{}\" [label=\"unknown\\n{}\", shape=ellipse, style=dashed, color=grey];",
            dot_escape(u),
            dot_escape(u)
        );
    }
    // An edge is on the path when both ends are consecutive path steps.
    let mut path_edges = std::collections::HashSet::new();
    if let Some(cp) = cp {
        for w in cp.steps.windows(2) {
            path_edges.insert((w[0].index, w[1].index));
        }
    }
    for e in &g.edges {
        let mut attrs = Vec::new();
        match e.kind {
            EdgeKind::Causal => {}
            EdgeKind::Link => attrs.push("style=dashed".to_string()),
            EdgeKind::Nested => attrs.push("style=dotted".to_string()),
        }
        if e.from_index
            .is_some_and(|f| path_edges.contains(&(f, e.to_index)))
        {
            attrs.push("color=red, penwidth=2".to_string());
        }
        let attrs = if attrs.is_empty() {
            String::new()
        } else {
            format!(" [{}]", attrs.join(", "))
        };
        let _ = writeln!(
            out,
            "  \"{}\" -> \"{}\"{attrs};",
            dot_escape(&e.from),
            dot_escape(&e.to)
        );
    }
    out.push_str("}\n");
    out
}

/// The task as JSON: `{"task", "events": [Event…], "edges": [{"from","to","kind"}…],
/// "problems": [{"problem": name, …}…], "critical_path": {…} | null}`. Events carry every field of
/// [`Event`] (`fields` as `[key, value]` pairs); see `docs/collector-store.md`.
pub fn json(g: &TaskGraph, cp: Option<&CriticalPath>) -> Value {
    json!({
        "task": g.task,
        "events": g.events,
        "edges": g.edges,
        "problems": g.problems,
        "critical_path": cp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Parent;

    fn ev(id: &str, ts: i64, parents: &[&str]) -> Event {
        Event {
            task: "T".into(),
            id: id.into(),
            agent: Some("ag".into()),
            labels: vec![format!("label {id}")],
            host: Some("h".into()),
            timestamp_ns: Some(ts * 1_000_000),
            parents: parents.iter().map(|p| Parent::causal(*p)).collect(),
            ..Event::default()
        }
    }

    fn diamond() -> TaskGraph {
        TaskGraph::build(
            "T",
            vec![
                ev("A", 0, &[]),
                ev("B", 1, &["A"]),
                ev("C", 3, &["A"]),
                ev("D", 4, &["B", "C"]),
                ev("E", 5, &["D"]),
            ],
        )
    }

    #[test]
    fn text_view_shows_fork_and_join() {
        let g = diamond();
        let cp = CriticalPath::compute(&g).unwrap();
        let t = text(&g, Some(&cp));
        let want = "\
task T: 5 events, 5 edges, 1 joins, 1 roots, 1 hosts, duration 5.000ms

critical path: 4 events, 5.000ms; rule: happened-before; columns: offset from the task's start, step duration
          +0ns         0ns  ag: label A  [h]  A
      +3.000ms     3.000ms  ag: label C  [h]  C
      +4.000ms     1.000ms  (join) ag: label D  [h]  D
      +5.000ms     1.000ms  ag: label E  [h]  E
";
        assert!(t.starts_with(want), "{t}");
        let graph = "
events: +offset from the task's start; * on the critical path
* +0ns ag: label A  [h]  A
  fork into 2 branches
    +1.000ms ag: label B  [h]  B
    -> joins D (ag: label D)
*   +3.000ms ag: label C  [h]  C
*   join of 2 parents (also after B)
*   +4.000ms ag: label D  [h]  D
*   +5.000ms ag: label E  [h]  E
";
        assert!(t.ends_with(graph), "{t}");
        let only = text_view(
            &g,
            &TextOptions {
                critical_path: Some(&cp),
                critical_path_only: true,
                notes: &["skew adjusted: host b +1.0 ms".to_string()],
                verbose: false,
            },
        );
        assert!(
            only.starts_with("task T: 5 events, 5 edges, 1 joins, 1 roots, 1 hosts, duration 5.000ms\nskew adjusted: host b +1.0 ms\n\ncritical path: 4 events"),
            "{only}"
        );
        assert!(!only.contains("events: +offset"), "{only}");
    }

    #[test]
    fn a_span_task_prints_each_span_once_with_duration_kind_and_status() {
        let ms = 1_000_000;
        let sp = |id: &str,
                  parent: Option<&str>,
                  t0: i64,
                  t1: i64,
                  kind: &str,
                  status: &[(&str, &str)]| {
            let mut start = Event {
                task: "T".into(),
                id: format!("{id}:start"),
                agent: Some("svc".into()),
                timestamp_ns: Some(t0 * ms),
                labels: vec![format!("{id}-op start")],
                fields: vec![
                    ("span.name".into(), format!("{id}-op")),
                    ("span.kind".into(), kind.into()),
                ],
                ..Event::default()
            };
            if let Some(p) = parent {
                start.parents.push(Parent::causal(format!("{p}:start")));
            }
            let end = Event {
                task: "T".into(),
                id: format!("{id}:end"),
                agent: Some("svc".into()),
                timestamp_ns: Some(t1 * ms),
                labels: vec![format!("{id}-op end")],
                fields: status
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                parents: vec![Parent::causal(format!("{id}:start"))],
                ..Event::default()
            };
            vec![start, end]
        };
        let mut evs = sp("R", None, 0, 100, "server", &[]);
        evs.extend(sp(
            "A",
            Some("R"),
            10,
            40,
            "client",
            &[("status.code", "error"), ("status.message", "timeout")],
        ));
        evs.extend(sp(
            "B",
            Some("R"),
            50,
            90,
            "internal",
            &[("status.code", "ok")],
        ));
        crate::infer_span_nesting(&mut evs);
        let g = TaskGraph::build("T", evs);
        let cp = CriticalPath::compute(&g).unwrap();
        let t = text(&g, Some(&cp));
        let want = "
spans (3): +offset from the task's start, then duration; * on the critical path
* +0ns 100.000ms  svc: R-op (server)  R
*   +10.000ms 30.000ms  svc: A-op (client, error: timeout)  A
*   +50.000ms 40.000ms  svc: B-op (internal, ok)  B
";
        assert!(t.ends_with(want), "{t}");
        assert!(
            t.contains("critical path: 6 events, 100.000ms; rule: span tree;"),
            "{t}"
        );
        let mut g = g;
        let a = g.index_of("A:start").unwrap();
        g.events[a]
            .fields
            .push(("http.method".into(), "GET".into()));
        let v = text_view(
            &g,
            &TextOptions {
                verbose: true,
                ..TextOptions::default()
            },
        );
        assert!(
            v.contains(
                "svc: A-op (client, error: timeout)  A\n      http.method = GET\n    +50.000ms"
            ),
            "{v}"
        );
    }

    /// Regression: a "comb" (each event forks into a leaf and the next event) indented every
    /// fork one level deeper, so 8000 events printed ~64 MB of spaces (quadratic output).
    #[test]
    fn deep_forks_keep_the_text_view_linear() {
        let n = 8000;
        let mut evs = vec![ev("S0", 0, &[])];
        for i in 1..n / 2 {
            evs.push(ev(
                &format!("S{i}"),
                2 * i as i64,
                &[&format!("S{}", i - 1)],
            ));
            evs.push(ev(
                &format!("L{i}"),
                2 * i as i64 - 1,
                &[&format!("S{}", i - 1)],
            ));
        }
        let g = TaskGraph::build("T", evs);
        let t = text(&g, None);
        assert_eq!(t.matches("fork into 2 branches").count(), n / 2 - 1);
        assert!(
            t.len() < 2_000_000,
            "{} bytes of text for {n} events",
            t.len()
        );
        assert!(
            t.contains(&format!("{}[depth 40] ", "  ".repeat(MAX_INDENT))),
            "deep branches are marked"
        );
        // Every event is still printed once.
        assert_eq!(
            t.lines()
                .filter(|l| l.trim_end().ends_with("S3999") || l.trim_end().ends_with("L3999"))
                .count(),
            2
        );
    }

    #[test]
    fn dot_marks_joins_and_the_path() {
        let g = diamond();
        let cp = CriticalPath::compute(&g).unwrap();
        let d = dot(&g, Some(&cp));
        assert!(d.contains("\"D\" [label=\"ag: label D\\nh\\n+4.000ms\", shape=doubleoctagon, color=red, penwidth=2];"), "{d}");
        assert!(d.contains("\"C\" -> \"D\" [color=red, penwidth=2];"), "{d}");
        assert!(d.contains("\"B\" -> \"D\";"), "{d}");
        assert_eq!(d.matches(" -> ").count(), 5);
    }

    #[test]
    fn json_has_events_edges_and_path() {
        let g = diamond();
        let cp = CriticalPath::compute(&g).unwrap();
        let v = json(&g, Some(&cp));
        assert_eq!(v["events"].as_array().unwrap().len(), 5);
        assert_eq!(v["edges"].as_array().unwrap().len(), 5);
        assert_eq!(
            v["edges"][2],
            json!({"from": "B", "to": "D", "kind": "causal"})
        );
        assert_eq!(v["critical_path"]["steps"].as_array().unwrap().len(), 4);
    }
}
