//! Reconstruction of one task's event graph from its events, with structural checks.
//!
//! X-Trace rebuilds a task offline from the reports the collector stored: every report names its
//! event (OpId) and its parents (`Edge`), so the graph is the union of those edges (Fonseca et al.,
//! NSDI 2007, §3.2). Real traces are imperfect: reports get lost (an edge names an event nobody
//! reported), clocks of different hosts disagree, a bug can even make a cycle. [`TaskGraph::build`]
//! never fails on such input: it records a [`Problem`] and keeps everything else.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::model::{EdgeKind, Event};

/// One edge of the graph as reported: from `from` (an event id, possibly unknown) to the event at
/// index `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Edge {
    /// Parent event id as reported.
    pub from: String,
    /// Child event id.
    pub to: String,
    /// Index of the parent in [`TaskGraph::events`], or `None` when no event has that id.
    #[serde(skip)]
    pub from_index: Option<usize>,
    /// Index of the child in [`TaskGraph::events`].
    #[serde(skip)]
    pub to_index: usize,
    /// Edge kind.
    pub kind: EdgeKind,
}

/// A structural problem found while rebuilding a task. The rest of the graph is still shown.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum Problem {
    /// Reports that carried an event id already seen, summarised for the whole task: identical
    /// copies (an exporter's retry, a file imported twice) are counted once and dropped;
    /// different versions of one id (a conflict) are listed, and the first version is the one
    /// the graph uses.
    DuplicateEvents {
        /// Reports identical to the kept one (dropped, counted here only).
        identical: usize,
        /// Ids with two or more different versions, sorted.
        conflicting: Vec<String>,
    },
    /// An edge names a parent that no report of this task describes (a lost report, or a parent in
    /// another task).
    UnknownParent {
        /// The child event.
        event: String,
        /// The parent id that is not in the task.
        parent: String,
    },
    /// The task has more than one root (event without a known parent).
    SeveralRoots {
        /// Root event ids, earliest first.
        roots: Vec<String>,
    },
    /// The task has no root at all (every event has a known parent: there is a cycle).
    NoRoot,
    /// Events on a cycle of edges (impossible for real causality; found by a topological sort).
    Cycle {
        /// The events that the topological sort could not order.
        events: Vec<String>,
    },
    /// Edges between two hosts where the child's timestamp is before its parent's: the clocks of
    /// the two hosts disagree by at least `max_skew_ns`.
    ClockSkew {
        /// Host of the parent events.
        from_host: String,
        /// Host of the child events.
        to_host: String,
        /// How many edges between the two hosts go backwards in time.
        edges: usize,
        /// The largest backwards step, ns (a lower bound of the skew).
        max_skew_ns: i64,
    },
    /// Edges within one host where the child's timestamp is before its parent's (a clock step, or
    /// a report with a wrong timestamp).
    BackwardsInTime {
        /// The host.
        host: String,
        /// How many edges.
        edges: usize,
        /// The largest backwards step, ns.
        max_ns: i64,
    },
    /// Events without a timestamp; they are ordered after their parents but have no time.
    MissingTimestamp {
        /// How many events.
        events: usize,
    },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::DuplicateEvents {
                identical,
                conflicting,
            } => {
                if *identical > 0 {
                    write!(f, "{identical} identical duplicate reports ignored")?;
                    if !conflicting.is_empty() {
                        write!(f, "; ")?;
                    }
                }
                if !conflicting.is_empty() {
                    write!(
                        f,
                        "{} events reported in different versions (the first is used): {}",
                        conflicting.len(),
                        abbreviate(conflicting, 8)
                    )?;
                }
                Ok(())
            }
            Problem::UnknownParent { event, parent } => {
                write!(f, "event {event} has an edge from unknown event {parent}")
            }
            Problem::SeveralRoots { roots } => {
                write!(
                    f,
                    "{} roots (events without a known parent): {}",
                    roots.len(),
                    abbreviate(roots, 8)
                )
            }
            Problem::NoRoot => write!(f, "no root: every event has a parent"),
            Problem::Cycle { events } => {
                write!(
                    f,
                    "cycle among {} events: {}",
                    events.len(),
                    abbreviate(events, 8)
                )
            }
            Problem::ClockSkew {
                from_host,
                to_host,
                edges,
                max_skew_ns,
            } => write!(
                f,
                "clock skew: {edges} edges from {from_host} to {to_host} go back in time, by up to {}",
                fmt_duration(*max_skew_ns)
            ),
            Problem::BackwardsInTime {
                host,
                edges,
                max_ns,
            } => write!(
                f,
                "{edges} edges on {host} go back in time, by up to {}",
                fmt_duration(*max_ns)
            ),
            Problem::MissingTimestamp { events } => write!(f, "{events} events have no timestamp"),
        }
    }
}

fn abbreviate(ids: &[String], n: usize) -> String {
    let mut s = ids.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if ids.len() > n {
        s.push_str(&format!(", … ({} more)", ids.len() - n));
    }
    s
}

/// Whether `a` and `b` are the same report: equal in everything but the inferred
/// [`EdgeKind::Nested`] edges (which `infer_span_nesting` adds to the first copy only).
fn same_report(a: &Event, b: &Event) -> bool {
    let reported = |e: &Event| {
        e.parents
            .iter()
            .filter(|p| p.kind != EdgeKind::Nested)
            .cloned()
            .collect::<Vec<_>>()
    };
    a.task == b.task
        && a.id == b.id
        && a.agent == b.agent
        && a.host == b.host
        && a.process == b.process
        && a.pid == b.pid
        && a.tid == b.tid
        && a.thread_name == b.thread_name
        && a.timestamp_ns == b.timestamp_ns
        && a.hrt_ns == b.hrt_ns
        && a.labels == b.labels
        && a.fields == b.fields
        && reported(a) == reported(b)
}

/// Formats ns as a human duration (`1.234s`, `12.5ms`, `830µs`, `12ns`).
pub fn fmt_duration(ns: i64) -> String {
    let a = ns.unsigned_abs();
    let sign = if ns < 0 { "-" } else { "" };
    if a >= 1_000_000_000 {
        format!("{sign}{:.3}s", a as f64 / 1e9)
    } else if a >= 1_000_000 {
        format!("{sign}{:.3}ms", a as f64 / 1e6)
    } else if a >= 1_000 {
        format!("{sign}{:.1}µs", a as f64 / 1e3)
    } else {
        format!("{sign}{a}ns")
    }
}

/// One task rebuilt as a graph.
///
/// `events` holds each distinct event once (the first report of a duplicated id), in the order
/// given; `edges` holds every reported edge, including those from unknown parents. Adjacency uses
/// indexes into `events`.
#[derive(Debug, Clone)]
pub struct TaskGraph {
    /// The task id.
    pub task: String,
    /// The events, one per distinct id.
    pub events: Vec<Event>,
    /// Every edge as reported (one per parent entry of every kept event).
    pub edges: Vec<Edge>,
    /// Structural problems found.
    pub problems: Vec<Problem>,
    index: HashMap<String, usize>,
    /// Known parents of each event (indexes), without duplicates.
    parents: Vec<Vec<usize>>,
    /// Children of each event (indexes), without duplicates.
    children: Vec<Vec<usize>>,
    /// Topological rank of each event (`usize::MAX` for events on or after a cycle).
    rank: Vec<usize>,
    /// Position of each event in the events sorted by id: the tie-break that does not depend on
    /// the order in which reports arrived.
    id_rank: Vec<usize>,
    /// Events in topological order (ties broken by timestamp, then input order).
    topo: Vec<usize>,
}

impl TaskGraph {
    /// Rebuilds task `task` from its events (any order; the order of duplicates decides which one is
    /// kept). Never fails: structural problems are listed in [`TaskGraph::problems`].
    pub fn build(task: impl Into<String>, events: impl IntoIterator<Item = Event>) -> TaskGraph {
        let task = task.into();
        let mut kept: Vec<Event> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut identical = 0usize;
        let mut conflicting: Vec<String> = Vec::new();
        for ev in events {
            if let Some(&k) = index.get(&ev.id) {
                if same_report(&kept[k], &ev) {
                    identical += 1;
                } else {
                    conflicting.push(ev.id);
                }
                continue;
            }
            index.insert(ev.id.clone(), kept.len());
            kept.push(ev);
        }
        let n = kept.len();
        let mut problems = Vec::new();
        conflicting.sort();
        conflicting.dedup();
        if identical > 0 || !conflicting.is_empty() {
            problems.push(Problem::DuplicateEvents {
                identical,
                conflicting,
            });
        }

        let mut edges = Vec::new();
        let mut parents = vec![Vec::new(); n];
        let mut children = vec![Vec::new(); n];
        // `added[p] == c` when p is already a parent of c: O(1) per edge, so a span with 100,000
        // nested children does not cost 100,000² comparisons.
        let mut added = vec![usize::MAX; n];
        for (ci, ev) in kept.iter().enumerate() {
            for p in &ev.parents {
                let from_index = index.get(&p.id).copied();
                match from_index {
                    Some(pi) => {
                        if added[pi] != ci {
                            added[pi] = ci;
                            parents[ci].push(pi);
                            children[pi].push(ci);
                        }
                    }
                    None => problems.push(Problem::UnknownParent {
                        event: ev.id.clone(),
                        parent: p.id.clone(),
                    }),
                }
                edges.push(Edge {
                    from: p.id.clone(),
                    to: ev.id.clone(),
                    from_index,
                    to_index: ci,
                    kind: p.kind,
                });
            }
        }

        let mut by_id: Vec<usize> = (0..n).collect();
        by_id.sort_by(|&a, &b| kept[a].id.cmp(&kept[b].id));
        let mut id_rank = vec![0; n];
        for (r, &i) in by_id.iter().enumerate() {
            id_rank[i] = r;
        }
        let mut g = TaskGraph {
            task,
            events: kept,
            edges,
            problems,
            index,
            parents,
            children,
            rank: vec![usize::MAX; n],
            id_rank,
            topo: Vec::with_capacity(n),
        };
        g.sort_children();
        g.toposort();
        g.check_roots();
        g.check_clocks();
        g
    }

    /// The order key of event `i`: (timestamp, id). Missing timestamps sort last. The id, not the
    /// arrival order, breaks ties, so every view and the critical path are the same whatever
    /// order the reports came in.
    pub fn order_key(&self, i: usize) -> (i64, usize) {
        (
            self.events[i].timestamp_ns.unwrap_or(i64::MAX),
            self.id_rank[i],
        )
    }

    /// Children sorted by (timestamp, id) so that every view is deterministic.
    fn sort_children(&mut self) {
        let (events, id_rank) = (&self.events, &self.id_rank);
        for c in &mut self.children {
            c.sort_by_key(|&i| (events[i].timestamp_ns.unwrap_or(i64::MAX), id_rank[i]));
        }
    }

    /// Kahn's algorithm with a heap keyed by (timestamp, id): a topological order that follows
    /// time where time agrees with causality and does not depend on arrival order. Events left
    /// over are on (or after) a cycle.
    fn toposort(&mut self) {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let n = self.events.len();
        let mut indeg: Vec<usize> = self.parents.iter().map(Vec::len).collect();
        let (events, id_rank) = (&self.events, &self.id_rank);
        let key = |i: usize| ((events[i].timestamp_ns.unwrap_or(i64::MAX), id_rank[i]), i);
        let mut heap: BinaryHeap<Reverse<((i64, usize), usize)>> = (0..n)
            .filter(|&i| indeg[i] == 0)
            .map(|i| Reverse(key(i)))
            .collect();
        let mut topo = Vec::with_capacity(n);
        while let Some(Reverse((_, i))) = heap.pop() {
            self.rank[i] = topo.len();
            topo.push(i);
            for &c in &self.children[i] {
                indeg[c] -= 1;
                if indeg[c] == 0 {
                    heap.push(Reverse(key(c)));
                }
            }
        }
        if topo.len() < n {
            let mut left: Vec<usize> = (0..n).filter(|&i| self.rank[i] == usize::MAX).collect();
            // Kahn leaves the cycles and everything downstream of them. Peel, in reverse, the
            // left-over events with no child among the left-overs: what remains lies on a cycle
            // (or between two cycles). Linear in the size of the graph.
            let in_left: Vec<bool> = (0..n).map(|i| self.rank[i] == usize::MAX).collect();
            let mut outdeg: Vec<usize> = (0..n)
                .map(|i| {
                    if in_left[i] {
                        self.children[i].iter().filter(|&&c| in_left[c]).count()
                    } else {
                        0
                    }
                })
                .collect();
            let mut peeled = vec![false; n];
            let mut queue: Vec<usize> = left.iter().copied().filter(|&i| outdeg[i] == 0).collect();
            while let Some(i) = queue.pop() {
                peeled[i] = true;
                for &p in &self.parents[i] {
                    if in_left[p] && !peeled[p] {
                        outdeg[p] -= 1;
                        if outdeg[p] == 0 {
                            queue.push(p);
                        }
                    }
                }
            }
            let on_cycle: Vec<String> = left
                .iter()
                .filter(|&&i| !peeled[i])
                .map(|&i| self.events[i].id.clone())
                .collect();
            self.problems.push(Problem::Cycle { events: on_cycle });
            left.sort_by_key(|&i| key(i));
            for i in left {
                self.rank[i] = topo.len();
                topo.push(i);
            }
        }
        self.topo = topo;
    }

    fn check_roots(&mut self) {
        let roots = self.roots();
        if roots.len() > 1 {
            let roots = roots.iter().map(|&i| self.events[i].id.clone()).collect();
            self.problems.push(Problem::SeveralRoots { roots });
        } else if roots.is_empty() && !self.events.is_empty() {
            self.problems.push(Problem::NoRoot);
        }
        let missing = self
            .events
            .iter()
            .filter(|e| e.timestamp_ns.is_none())
            .count();
        if missing > 0 {
            self.problems
                .push(Problem::MissingTimestamp { events: missing });
        }
    }

    fn check_clocks(&mut self) {
        let mut skew: BTreeMap<(String, String), (usize, i64)> = BTreeMap::new();
        let mut backwards: BTreeMap<String, (usize, i64)> = BTreeMap::new();
        for (ci, ps) in self.parents.iter().enumerate() {
            let c = &self.events[ci];
            for &pi in ps {
                let p = &self.events[pi];
                let (Some(pt), Some(ct)) = (p.timestamp_ns, c.timestamp_ns) else {
                    continue;
                };
                if ct >= pt {
                    continue;
                }
                let back = pt.saturating_sub(ct);
                let ph = p.host.clone().unwrap_or_else(|| "?".into());
                let ch = c.host.clone().unwrap_or_else(|| "?".into());
                let slot = if ph == ch {
                    backwards.entry(ph).or_insert((0, 0))
                } else {
                    skew.entry((ph, ch)).or_insert((0, 0))
                };
                slot.0 += 1;
                slot.1 = slot.1.max(back);
            }
        }
        for ((from_host, to_host), (edges, max_skew_ns)) in skew {
            self.problems.push(Problem::ClockSkew {
                from_host,
                to_host,
                edges,
                max_skew_ns,
            });
        }
        for (host, (edges, max_ns)) in backwards {
            self.problems.push(Problem::BackwardsInTime {
                host,
                edges,
                max_ns,
            });
        }
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True when the task has no events.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Index of the event with id `id`.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// Known parents of event `i` (indexes; edges from unknown ids are not included).
    pub fn parents_of(&self, i: usize) -> &[usize] {
        &self.parents[i]
    }

    /// Children of event `i` (indexes), earliest first.
    pub fn children_of(&self, i: usize) -> &[usize] {
        &self.children[i]
    }

    /// Roots: events without a known parent, earliest first (ties by id).
    pub fn roots(&self) -> Vec<usize> {
        let mut r: Vec<usize> = (0..self.events.len())
            .filter(|&i| self.parents[i].is_empty())
            .collect();
        r.sort_by_key(|&i| self.order_key(i));
        r
    }

    /// Joins: events with two or more known parents.
    pub fn joins(&self) -> Vec<usize> {
        (0..self.events.len())
            .filter(|&i| self.parents[i].len() >= 2)
            .collect()
    }

    /// Events in topological order (parents before children; ties by timestamp). Events on a cycle
    /// come last, by timestamp.
    pub fn topological_order(&self) -> &[usize] {
        &self.topo
    }

    /// Topological rank of event `i` (its position in [`TaskGraph::topological_order`]).
    pub fn rank(&self, i: usize) -> usize {
        self.rank[i]
    }

    /// Earliest and latest timestamps (ns) of the task, if any event has one.
    pub fn time_span(&self) -> Option<(i64, i64)> {
        let ts = self.events.iter().filter_map(|e| e.timestamp_ns);
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for t in ts {
            lo = lo.min(t);
            hi = hi.max(t);
        }
        (lo <= hi).then_some((lo, hi))
    }

    /// Distinct hosts, sorted.
    pub fn hosts(&self) -> Vec<String> {
        let mut h: Vec<String> = self.events.iter().filter_map(|e| e.host.clone()).collect();
        h.sort();
        h.dedup();
        h
    }

    /// The parent of `child` that finished last, among `candidates` (a subset of its parents):
    /// the latest timestamp; on a tie the latest HRT when both are in the same process; then the
    /// later topological rank (a parent that is a descendant of another finished no earlier).
    pub(crate) fn latest_of(&self, candidates: impl IntoIterator<Item = usize>) -> Option<usize> {
        candidates.into_iter().max_by(|&a, &b| {
            let (ea, eb) = (&self.events[a], &self.events[b]);
            let ta = ea.timestamp_ns.unwrap_or(i64::MIN);
            let tb = eb.timestamp_ns.unwrap_or(i64::MIN);
            ta.cmp(&tb)
                .then_with(|| {
                    if ea.process.is_some() && ea.process == eb.process && ea.host == eb.host {
                        ea.hrt_ns.cmp(&eb.hrt_ns)
                    } else {
                        std::cmp::Ordering::Equal
                    }
                })
                .then_with(|| self.rank[a].cmp(&self.rank[b]))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Parent;

    pub(crate) fn ev(id: &str, ts: i64, host: &str, parents: &[&str]) -> Event {
        Event {
            task: "T".into(),
            id: id.into(),
            host: Some(host.into()),
            timestamp_ns: Some(ts),
            parents: parents.iter().map(|p| Parent::causal(*p)).collect(),
            ..Event::default()
        }
    }

    #[test]
    fn fan_out_fan_in_is_rebuilt_with_one_join() {
        let g = TaskGraph::build(
            "T",
            vec![
                ev("A", 0, "h", &[]),
                ev("B", 10, "h", &["A"]),
                ev("C", 20, "h", &["A"]),
                ev("D", 30, "h", &["B", "C"]),
            ],
        );
        assert_eq!(g.len(), 4);
        assert_eq!(g.edges.len(), 4);
        assert!(g.problems.is_empty(), "{:?}", g.problems);
        assert_eq!(g.joins(), vec![3]);
        assert_eq!(g.roots(), vec![0]);
        assert_eq!(g.topological_order(), &[0, 1, 2, 3]);
    }

    #[test]
    fn problems_are_reported_and_the_rest_kept() {
        let g = TaskGraph::build(
            "T",
            vec![
                ev("A", 100, "h1", &[]),
                ev("B", 50, "h2", &["A"]),       // h2's clock is behind
                ev("C", 60, "h2", &["B", "ZZ"]), // ZZ is unknown
                ev("X", 1, "h1", &["Y"]),
                ev("Y", 2, "h1", &["X"]), // cycle X <-> Y
                ev("Z", 3, "h1", &["Y"]), // downstream of the cycle, not on it
                ev("C", 61, "h2", &[]),   // a conflicting duplicate
                ev("R2", 5, "h1", &[]),   // an identical duplicate
                ev("R2", 5, "h1", &[]),   // second root
            ],
        );
        assert_eq!(g.len(), 7);
        assert_eq!(g.edges.len(), 6);
        let p = &g.problems;
        assert!(
            p.contains(&Problem::DuplicateEvents {
                identical: 1,
                conflicting: vec!["C".into()]
            }),
            "{p:?}"
        );
        assert!(
            p.contains(&Problem::UnknownParent {
                event: "C".into(),
                parent: "ZZ".into()
            }),
            "{p:?}"
        );
        assert!(
            p.contains(&Problem::Cycle {
                events: vec!["X".into(), "Y".into()]
            }),
            "{p:?}"
        );
        assert!(
            p.contains(&Problem::SeveralRoots {
                roots: vec!["R2".into(), "A".into()]
            }),
            "{p:?}"
        );
        assert!(
            p.contains(&Problem::ClockSkew {
                from_host: "h1".into(),
                to_host: "h2".into(),
                edges: 1,
                max_skew_ns: 50
            }),
            "{p:?}"
        );
        // Every event still has a rank.
        assert_eq!(g.topological_order().len(), 7);
    }
}
