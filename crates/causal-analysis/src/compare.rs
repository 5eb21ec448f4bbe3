//! Comparison of two tasks: where a slow request spent the time a fast one did not.
//!
//! Two executions of the same request are compared by agent (the layer or component): events
//! each reported, and time on each one's critical path; and by *operation* ([`OperationDiff`]):
//! an agent's OTLP span name or X-Trace label, with how often it occurred, the time it took and
//! its time on the critical path in each task, so work that happened in only one of them
//! (added, missing) or more often or for longer (changed) stands out. This is the comparison
//! that X-Trace's authors used to explain slow HDFS and MapReduce runs, and that Spectroscope
//! (Sambasivan et al., "Diagnosing performance changes by comparing request flows", NSDI 2011)
//! automates.
//!
//! An operation's *time* in one task ([`OperationDiff::time_ns`]) is the sum over its
//! occurrences of: for a span, its duration (end − start); for a point event (an X-Trace report),
//! the time since its latest causal parent, the work that ended with it being reported (the
//! share the happened-before critical path charges to it, `docs/critical-path.md`); 0 for a root
//! or without timestamps. Span events (`S:eventN`) belong to their span and are no operation of
//! their own.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::critical::CriticalPath;
use crate::graph::{TaskGraph, fmt_duration};
use crate::model::{EdgeKind, Event};
use crate::render::describe;

/// One side's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    /// Task id.
    pub task: String,
    /// Events.
    pub events: usize,
    /// Edges.
    pub edges: usize,
    /// Joins.
    pub joins: usize,
    /// First to last timestamp, ns.
    pub duration_ns: i64,
    /// Critical path length (events) and time (ns).
    pub critical_path_events: usize,
    /// Critical path time, ns.
    pub critical_path_ns: i64,
}

/// One agent in both tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentDiff {
    /// Agent (`?` when events had none).
    pub agent: String,
    /// Events in A and in B.
    pub events: (usize, usize),
    /// Critical-path time in A and in B, ns.
    pub critical_path_ns: (i64, i64),
}

/// How an operation differs between task A and task B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Only in B.
    Added,
    /// Only in A.
    Missing,
    /// In both, with a different count or time.
    Changed,
    /// In both, with the same count and time.
    Same,
}

impl Change {
    /// The word the text view and the page print: `added`, `missing`, `changed`, `same`.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Missing => "missing",
            Change::Changed => "changed",
            Change::Same => "same",
        }
    }
}

/// One operation (an agent's span name or event label) in both tasks (module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OperationDiff {
    /// Agent (`?` when events had none).
    pub agent: String,
    /// Span name, or event label (else the identifying field, as [`describe`] names it).
    pub operation: String,
    /// Occurrences in A and in B.
    pub count: (usize, usize),
    /// Time in A and in B, ns (module docs).
    pub time_ns: (i64, i64),
    /// Critical-path time charged to it in A and in B, ns.
    pub critical_path_ns: (i64, i64),
    /// Added, missing, changed or the same.
    pub change: Change,
}

/// The comparison of task A with task B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Task A.
    pub a: Side,
    /// Task B.
    pub b: Side,
    /// Per agent, largest critical-path difference first.
    pub agents: Vec<AgentDiff>,
    /// Every operation of either task: added, missing and changed ones first, each group by
    /// largest time difference, then agent and name.
    pub operations: Vec<OperationDiff>,
}

/// One operation's totals in one task.
#[derive(Debug, Default, Clone, Copy)]
struct OpTotals {
    count: usize,
    time_ns: i64,
    critical_path_ns: i64,
}

/// An event's name as an operation (module docs): the span name for a span's events, else its
/// label, else its identifying field.
fn operation_name(e: &Event) -> String {
    if let Some(n) = e.field("span.name") {
        return n.to_string();
    }
    let spanlike = e.id.ends_with(":start") || e.id.ends_with(":end");
    match e.label() {
        Some(l) if spanlike => l
            .strip_suffix(" start")
            .or_else(|| l.strip_suffix(" end"))
            .unwrap_or(l)
            .to_string(),
        Some(l) => l.to_string(),
        None => {
            let d = describe(e);
            match &e.agent {
                Some(a) => d
                    .strip_prefix(a.as_str())
                    .and_then(|r| r.strip_prefix(": "))
                    .map(str::to_string)
                    .unwrap_or(d),
                None => d,
            }
        }
    }
}

/// The operations of `g` with their totals, keyed by (agent, name).
fn operations(g: &TaskGraph, cp: Option<&CriticalPath>) -> BTreeMap<(String, String), OpTotals> {
    // The span id of a span's events (`S:start`, `S:end`, `S:eventN`).
    let span_of = |e: &Event| -> Option<String> {
        let (s, rest) = e.id.rsplit_once(':')?;
        (rest == "start" || rest == "end" || rest.starts_with("event")).then(|| s.to_string())
    };
    // Each span's (start, end) events; a span's name and agent come from its start event.
    let mut spans: BTreeMap<String, (Option<usize>, Option<usize>)> = BTreeMap::new();
    for (i, e) in g.events.iter().enumerate() {
        if let Some(s) = span_of(e) {
            let slot = spans.entry(s).or_default();
            if e.id.ends_with(":start") {
                slot.0 = Some(i);
            } else if e.id.ends_with(":end") {
                slot.1 = Some(i);
            }
        }
    }
    let key = |e: &Event| {
        (
            e.agent.clone().unwrap_or_else(|| "?".into()),
            operation_name(e),
        )
    };
    // The operation each event belongs to (a span event: its span's, when the span has a start
    // or an end).
    let key_of = |i: usize| {
        let e = &g.events[i];
        match span_of(e).and_then(|s| spans.get(&s)) {
            Some(&(Some(s), _)) => key(&g.events[s]),
            Some(&(None, Some(end))) => key(&g.events[end]),
            _ => key(e),
        }
    };
    // Latest causal parent's timestamp of each event.
    let mut latest_parent: Vec<Option<i64>> = vec![None; g.len()];
    for ed in &g.edges {
        let Some(from) = ed.from_index else { continue };
        if ed.kind != EdgeKind::Causal {
            continue;
        }
        if let Some(t) = g.events[from].timestamp_ns {
            let slot = &mut latest_parent[ed.to_index];
            *slot = Some(slot.map_or(t, |s| s.max(t)));
        }
    }
    let mut ops: BTreeMap<(String, String), OpTotals> = BTreeMap::new();
    for (i, e) in g.events.iter().enumerate() {
        let time = match span_of(e).and_then(|s| spans.get(&s)) {
            // A span is counted once, at its start (or its end when the start is missing).
            Some(&(start, end)) => {
                let lead = start.or(end);
                if lead != Some(i) {
                    continue;
                }
                let ts = |k: Option<usize>| k.and_then(|k| g.events[k].timestamp_ns);
                ts(start)
                    .zip(ts(end))
                    .map_or(0, |(s, e)| e.saturating_sub(s).max(0))
            }
            None => e
                .timestamp_ns
                .zip(latest_parent[i])
                .map_or(0, |(t, p)| t.saturating_sub(p).max(0)),
        };
        let o = ops.entry(key_of(i)).or_default();
        o.count += 1;
        o.time_ns = o.time_ns.saturating_add(time);
    }
    if let Some(cp) = cp {
        for s in &cp.steps {
            let o = ops.entry(key_of(s.owner)).or_default();
            o.critical_path_ns = o.critical_path_ns.saturating_add(s.delta_ns);
        }
    }
    ops
}

fn side(g: &TaskGraph, cp: Option<&CriticalPath>) -> Side {
    Side {
        task: g.task.clone(),
        events: g.len(),
        edges: g.edges.len(),
        joins: g.joins().len(),
        duration_ns: g.time_span().map(|(a, b)| b.saturating_sub(a)).unwrap_or(0),
        critical_path_events: cp.map_or(0, |c| c.steps.len()),
        critical_path_ns: cp.map_or(0, |c| c.total_ns),
    }
}

impl Comparison {
    /// Compares `a` with `b`.
    pub fn compute(a: &TaskGraph, b: &TaskGraph) -> Comparison {
        let (ca, cb) = (CriticalPath::compute(a), CriticalPath::compute(b));
        let mut agents: BTreeMap<String, AgentDiff> = BTreeMap::new();
        fn entry<'m>(m: &'m mut BTreeMap<String, AgentDiff>, name: &str) -> &'m mut AgentDiff {
            m.entry(name.to_string()).or_insert_with(|| AgentDiff {
                agent: name.to_string(),
                events: (0, 0),
                critical_path_ns: (0, 0),
            })
        }
        for (g, cp, first) in [(a, &ca, true), (b, &cb, false)] {
            for e in &g.events {
                let d = entry(&mut agents, e.agent.as_deref().unwrap_or("?"));
                if first {
                    d.events.0 += 1
                } else {
                    d.events.1 += 1
                }
            }
            if let Some(cp) = cp {
                for s in &cp.by_agent {
                    let d = entry(&mut agents, &s.name);
                    let slot = if first {
                        &mut d.critical_path_ns.0
                    } else {
                        &mut d.critical_path_ns.1
                    };
                    *slot = slot.saturating_add(s.ns);
                }
            }
        }
        let mut agents: Vec<AgentDiff> = agents.into_values().collect();
        agents.sort_by_key(|d| {
            (
                std::cmp::Reverse(
                    d.critical_path_ns
                        .1
                        .saturating_sub(d.critical_path_ns.0)
                        .saturating_abs(),
                ),
                d.agent.clone(),
            )
        });
        let (oa, ob) = (operations(a, ca.as_ref()), operations(b, cb.as_ref()));
        let mut keys: Vec<&(String, String)> = oa.keys().chain(ob.keys()).collect();
        keys.sort();
        keys.dedup();
        let mut operations: Vec<OperationDiff> = keys
            .into_iter()
            .map(|k| {
                let (x, y) = (oa.get(k), ob.get(k));
                let (tx, ty) = (
                    x.copied().unwrap_or_default(),
                    y.copied().unwrap_or_default(),
                );
                let change = match (x, y) {
                    (None, _) => Change::Added,
                    (_, None) => Change::Missing,
                    _ if (tx.count, tx.time_ns) != (ty.count, ty.time_ns) => Change::Changed,
                    _ => Change::Same,
                };
                OperationDiff {
                    agent: k.0.clone(),
                    operation: k.1.clone(),
                    count: (tx.count, ty.count),
                    time_ns: (tx.time_ns, ty.time_ns),
                    critical_path_ns: (tx.critical_path_ns, ty.critical_path_ns),
                    change,
                }
            })
            .collect();
        // Stable: ties keep the (agent, name) order of the keys.
        operations.sort_by_key(|o| {
            (
                o.change == Change::Same,
                std::cmp::Reverse(o.time_ns.1.saturating_sub(o.time_ns.0).saturating_abs()),
            )
        });
        Comparison {
            a: side(a, ca.as_ref()),
            b: side(b, cb.as_ref()),
            agents,
            operations,
        }
    }

    /// The comparison as text: both sides, agents, then up to `max_operations` operations (those
    /// that differ first).
    pub fn text(&self, max_operations: usize) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        // Ids up to 22 digits (X-Trace's 16 and 20) head their columns; longer ones (a 32-digit
        // OTLP trace id, a 40-digit TaskId) are printed whole above the table instead.
        if self.a.task.len().max(self.b.task.len()) <= 22 {
            let _ = writeln!(
                o,
                "{:<28} {:>24} {:>24}",
                "",
                format!("A {}", self.a.task),
                format!("B {}", self.b.task)
            );
        } else {
            let _ = writeln!(o, "A = task {}\nB = task {}", self.a.task, self.b.task);
            let _ = writeln!(o, "{:<28} {:>24} {:>24}", "", "A", "B");
        }
        let row = |o: &mut String, what: &str, a: String, b: String| {
            let _ = writeln!(o, "{what:<28} {a:>24} {b:>24}");
        };
        row(
            &mut o,
            "events",
            self.a.events.to_string(),
            self.b.events.to_string(),
        );
        row(
            &mut o,
            "edges",
            self.a.edges.to_string(),
            self.b.edges.to_string(),
        );
        row(
            &mut o,
            "joins",
            self.a.joins.to_string(),
            self.b.joins.to_string(),
        );
        row(
            &mut o,
            "duration",
            fmt_duration(self.a.duration_ns),
            fmt_duration(self.b.duration_ns),
        );
        row(
            &mut o,
            "critical path events",
            self.a.critical_path_events.to_string(),
            self.b.critical_path_events.to_string(),
        );
        row(
            &mut o,
            "critical path time",
            fmt_duration(self.a.critical_path_ns),
            fmt_duration(self.b.critical_path_ns),
        );
        let _ = writeln!(
            o,
            "\nby agent (events A/B, critical-path time A/B, difference B-A):"
        );
        for d in &self.agents {
            let _ = writeln!(
                o,
                "  {:<36} {:>6}/{:<6} {:>11}/{:<11} {:>12}",
                d.agent,
                d.events.0,
                d.events.1,
                fmt_duration(d.critical_path_ns.0),
                fmt_duration(d.critical_path_ns.1),
                fmt_duration(d.critical_path_ns.1.saturating_sub(d.critical_path_ns.0))
            );
        }
        let differ = self
            .operations
            .iter()
            .filter(|d| d.change != Change::Same)
            .count();
        if !self.operations.is_empty() {
            let _ = writeln!(
                o,
                "\nby operation ({differ} of {} differ; count A/B, time A/B, difference B-A, \
                 critical-path time A/B):",
                self.operations.len()
            );
            // The name last: operation names are any length, the numbers stay in columns.
            for d in self.operations.iter().take(max_operations) {
                let line = format!(
                    "  {:<8} {:>5}/{:<5} {:>11}/{:<11} {:>12} {:>11}/{:<11} {}: {}",
                    d.change.as_str(),
                    d.count.0,
                    d.count.1,
                    fmt_duration(d.time_ns.0),
                    fmt_duration(d.time_ns.1),
                    fmt_duration(d.time_ns.1.saturating_sub(d.time_ns.0)),
                    fmt_duration(d.critical_path_ns.0),
                    fmt_duration(d.critical_path_ns.1),
                    d.agent,
                    d.operation,
                );
                let _ = writeln!(o, "{}", line.trim_end());
            }
            if self.operations.len() > max_operations {
                let _ = writeln!(o, "  … {} more", self.operations.len() - max_operations);
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, Parent};

    fn task(id: &str, slow_ms: i64, extra_retry: bool) -> TaskGraph {
        let ev = |eid: &str, ms: i64, agent: &str, label: &str, parents: &[&str]| Event {
            task: id.into(),
            id: eid.into(),
            agent: Some(agent.into()),
            labels: vec![label.into()],
            timestamp_ns: Some(ms * 1_000_000),
            parents: parents.iter().map(|p| Parent::causal(*p)).collect(),
            ..Event::default()
        };
        let mut v = vec![
            ev("1", 0, "client", "send", &[]),
            ev("2", 1, "server", "recv", &["1"]),
            ev("3", 1 + slow_ms, "disk", "read done", &["2"]),
            ev("4", 2 + slow_ms, "client", "done", &["3"]),
        ];
        if extra_retry {
            v.push(ev("5", 1, "server", "retry", &["2"]));
        }
        TaskGraph::build(id, v)
    }

    #[test]
    fn the_slow_agent_comes_first() {
        let c = Comparison::compute(&task("A", 5, false), &task("B", 50, true));
        assert_eq!((c.a.events, c.b.events), (4, 5));
        assert_eq!(
            (c.a.critical_path_ns, c.b.critical_path_ns),
            (7_000_000, 52_000_000)
        );
        assert_eq!(
            c.agents[0],
            AgentDiff {
                agent: "disk".into(),
                events: (1, 1),
                critical_path_ns: (5_000_000, 50_000_000)
            }
        );
        // Per operation (module docs): send is a root (0), recv 1 ms after send, read done 5 ms
        // (A) or 50 ms (B) after recv, done 1 ms after read done; B's retry at the time of its
        // parent recv (0). On the chain, each operation's critical-path time is its own time.
        let op = |agent: &str, name: &str, count, time_ns, cp_ns, change| OperationDiff {
            agent: agent.into(),
            operation: name.into(),
            count,
            time_ns,
            critical_path_ns: cp_ns,
            change,
        };
        assert_eq!(
            c.operations,
            vec![
                op(
                    "disk",
                    "read done",
                    (1, 1),
                    (5_000_000, 50_000_000),
                    (5_000_000, 50_000_000),
                    Change::Changed
                ),
                op("server", "retry", (0, 1), (0, 0), (0, 0), Change::Added),
                op(
                    "client",
                    "done",
                    (1, 1),
                    (1_000_000, 1_000_000),
                    (1_000_000, 1_000_000),
                    Change::Same
                ),
                op("client", "send", (1, 1), (0, 0), (0, 0), Change::Same),
                op(
                    "server",
                    "recv",
                    (1, 1),
                    (1_000_000, 1_000_000),
                    (1_000_000, 1_000_000),
                    Change::Same
                ),
            ]
        );
        // Swapped, the retry is missing in B and the difference changes sign.
        let r = Comparison::compute(&task("B", 50, true), &task("A", 5, false));
        assert_eq!(r.operations[1].change, Change::Missing);
        assert_eq!(r.operations[0].time_ns, (50_000_000, 5_000_000));
        let t = c.text(10);
        assert!(t.contains("server: retry"), "{t}");
        assert!(t.contains("45.000ms"), "{t}");
        let row = t.lines().find(|l| l.contains("disk: read done")).unwrap();
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            [
                "changed",
                "1/1",
                "5.000ms/50.000ms",
                "45.000ms",
                "5.000ms/50.000ms",
                "disk:",
                "read",
                "done"
            ],
            "{t}"
        );
        assert!(t.contains("by operation (2 of 5 differ;"), "{t}");
        assert!(
            t.lines()
                .next()
                .unwrap()
                .trim_end()
                .ends_with("A A                      B B"),
            "{t}"
        );
    }

    /// A 32-digit OTLP trace id is shown whole, not cut to 20 digits.
    #[test]
    fn long_task_ids_are_shown_whole() {
        let (a, b) = ("8591D7138ADDD9177ACBFCEBE886FE31", "438AE15464ED9BC3");
        let t = Comparison::compute(&task(a, 5, false), &task(b, 5, false)).text(10);
        let head: Vec<&str> = t.lines().take(3).collect();
        assert_eq!(head[0], format!("A = task {a}"), "{t}");
        assert_eq!(head[1], format!("B = task {b}"), "{t}");
        assert_eq!(
            head[2].split_whitespace().collect::<Vec<_>>(),
            ["A", "B"],
            "{t}"
        );
        assert_eq!(
            t.lines()
                .nth(3)
                .unwrap()
                .split_whitespace()
                .collect::<Vec<_>>(),
            ["events", "4", "4"]
        );
    }

    /// An OTLP-shaped span: `S:start` (with `span.name`, parent `P:start`) and `S:end`.
    fn span(
        task: &str,
        id: &str,
        agent: &str,
        name: &str,
        parent: Option<&str>,
        ms: (i64, i64),
    ) -> Vec<Event> {
        let base = Event {
            task: task.into(),
            agent: Some(agent.into()),
            ..Event::default()
        };
        let mut start = Event {
            id: format!("{id}:start"),
            labels: vec![format!("{name} start")],
            timestamp_ns: Some(ms.0 * 1_000_000),
            fields: vec![("span.name".into(), name.into())],
            ..base.clone()
        };
        if let Some(p) = parent {
            start.parents.push(Parent::causal(format!("{p}:start")));
        }
        let end = Event {
            id: format!("{id}:end"),
            labels: vec![format!("{name} end")],
            timestamp_ns: Some(ms.1 * 1_000_000),
            parents: vec![Parent::causal(format!("{id}:start"))],
            ..base
        };
        vec![start, end]
    }

    /// Spans: a span's time is its duration, a span event is no operation, and the span-tree
    /// critical path charges a parent's own time to it. A: checkout 0–100 ms calls query 10–40
    /// (with a span event at 20). B: checkout 0–150 calls query 10–40, then query 50–120.
    /// Critical path A: checkout 0–10 and 40–100 (70 ms), query 30 ms; B: checkout 0–10, 40–50
    /// and 120–150 (50 ms), query 30 + 70 = 100 ms.
    #[test]
    fn spans_are_compared_by_name_with_their_durations() {
        let mut a = span("A", "R", "api", "checkout", None, (0, 100));
        a.extend(span("A", "C", "db", "query", Some("R"), (10, 40)));
        a.push(Event {
            task: "A".into(),
            id: "C:event1".into(),
            agent: Some("db".into()),
            labels: vec!["cache.miss".into()],
            timestamp_ns: Some(20_000_000),
            parents: vec![Parent::causal("C:start")],
            ..Event::default()
        });
        let mut b = span("B", "R", "api", "checkout", None, (0, 150));
        b.extend(span("B", "C1", "db", "query", Some("R"), (10, 40)));
        b.extend(span("B", "C2", "db", "query", Some("R"), (50, 120)));
        let c = Comparison::compute(&TaskGraph::build("A", a), &TaskGraph::build("B", b));
        let ms = |x: i64, y: i64| (x * 1_000_000, y * 1_000_000);
        assert_eq!(
            c.operations,
            vec![
                OperationDiff {
                    agent: "db".into(),
                    operation: "query".into(),
                    count: (1, 2),
                    time_ns: ms(30, 100),
                    critical_path_ns: ms(30, 100),
                    change: Change::Changed,
                },
                OperationDiff {
                    agent: "api".into(),
                    operation: "checkout".into(),
                    count: (1, 1),
                    time_ns: ms(100, 150),
                    critical_path_ns: ms(70, 50),
                    change: Change::Changed,
                },
            ]
        );
        assert_eq!((c.a.critical_path_ns, c.b.critical_path_ns), ms(100, 150));
    }
}
