//! Comparison of two tasks: where a slow request spent the time a fast one did not.
//!
//! Two executions of the same operation are compared by agent (the layer or component): events
//! each reported, and time on each one's critical path; and by event kind (`agent: label`), which
//! shows work that happened in only one of them. This is the comparison that X-Trace's authors
//! used to explain slow HDFS and MapReduce runs, and that Spectroscope (Sambasivan et al.,
//! "Diagnosing performance changes by comparing request flows", NSDI 2011) automates.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::critical::CriticalPath;
use crate::graph::{TaskGraph, fmt_duration};
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

/// An event kind (`agent: label`) whose count differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KindDiff {
    /// The kind, as [`describe`] prints it.
    pub kind: String,
    /// Count in A and in B.
    pub count: (usize, usize),
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
    /// Event kinds whose counts differ, largest difference first.
    pub kinds: Vec<KindDiff>,
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
        let mut kinds: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for e in &a.events {
            kinds.entry(describe(e)).or_default().0 += 1;
        }
        for e in &b.events {
            kinds.entry(describe(e)).or_default().1 += 1;
        }
        let mut kinds: Vec<KindDiff> = kinds
            .into_iter()
            .filter(|(_, c)| c.0 != c.1)
            .map(|(kind, count)| KindDiff { kind, count })
            .collect();
        kinds.sort_by_key(|k| {
            (
                std::cmp::Reverse(k.count.0.abs_diff(k.count.1)),
                k.kind.clone(),
            )
        });
        Comparison {
            a: side(a, ca.as_ref()),
            b: side(b, cb.as_ref()),
            agents,
            kinds,
        }
    }

    /// The comparison as text: both sides, agents, then up to `max_kinds` differing event kinds.
    pub fn text(&self, max_kinds: usize) -> String {
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
        if !self.kinds.is_empty() {
            let _ = writeln!(o, "\nevent kinds whose counts differ (A/B):");
            for k in self.kinds.iter().take(max_kinds) {
                let _ = writeln!(o, "  {:>5}/{:<5} {}", k.count.0, k.count.1, k.kind);
            }
            if self.kinds.len() > max_kinds {
                let _ = writeln!(o, "  … {} more", self.kinds.len() - max_kinds);
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
        assert_eq!(
            c.kinds,
            vec![KindDiff {
                kind: "server: retry".into(),
                count: (0, 1)
            }]
        );
        let t = c.text(10);
        assert!(t.contains("server: retry"), "{t}");
        assert!(t.contains("45.000ms"), "{t}");
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
}
