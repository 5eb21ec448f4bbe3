//! Views of a task: indented text that shows forks and joins, Graphviz DOT, and JSON.
//!
//! The text view prints a spanning tree of the graph in which every event hangs under the parent
//! that finished last (the same choice the critical path makes), so a chain of events stays at one
//! indentation, a fork indents its branches, and every other parent of a join prints a `joins`
//! line pointing at it. Nothing is hidden: every event is printed once and every edge is either the
//! tree edge or a `joins` line (edges from unknown events are listed as problems).

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

/// The indented text view of `g`, marking the events of `cp` with `*` and appending its summary.
pub fn text(g: &TaskGraph, cp: Option<&CriticalPath>) -> String {
    let mut out = String::new();
    let n = g.len();
    let t0 = g.time_span().map(|(a, _)| a);
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
    let on_path = cp.map(|c| c.mask(n)).unwrap_or_else(|| vec![false; n]);

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
    if let Some(cp) = cp {
        out.push_str(&critical_path_text(g, cp));
    }
    out
}

/// The critical path as text: each step with its time, then the time per agent, host and process.
pub fn critical_path_text(g: &TaskGraph, cp: &CriticalPath) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\ncritical path: {} events, {}{}",
        cp.steps.len(),
        fmt_duration(cp.total_ns),
        if cp.reached_root {
            ""
        } else {
            " (stopped at a cycle before reaching a root)"
        }
    );
    for s in &cp.steps {
        let e = &g.events[s.index];
        let _ = writeln!(
            out,
            "  {:>12}  {}{}  {}{}",
            format!("+{}", fmt_duration(s.delta_ns)),
            if s.join { "(join) " } else { "" },
            describe(e),
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
* +0ns ag: label A  [h]  A
  fork into 2 branches
    +1.000ms ag: label B  [h]  B
    -> joins D (ag: label D)
*   +3.000ms ag: label C  [h]  C
*   join of 2 parents (also after B)
*   +4.000ms ag: label D  [h]  D
*   +5.000ms ag: label E  [h]  E
";
        assert!(t.starts_with(want), "{t}");
        assert!(t.contains("critical path: 4 events, 5.000ms"), "{t}");
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
