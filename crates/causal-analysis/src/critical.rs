//! Critical path of a task, and where its time went.
//!
//! X-Trace's swimlane view found the critical path by walking back from the last event of the task
//! and, at every join, following the parent that finished last: that parent is the one the join
//! waited for, so shortening any other branch would not have made the task finish earlier. The
//! same rule gives the right answer only because an event can have several parents; in a span tree
//! the join is invisible. [`CriticalPath::compute`] implements that walk.
//!
//! Time along the path is charged step by step: the time from a parent to the next event on the
//! path is charged to that next event's agent, host and process (the work that ended with the
//! event being reported). A step whose parent and child are in different processes is also
//! counted as a hop (network, queue, or IPC time lies in it).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::graph::TaskGraph;

/// One step of the critical path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// Index of the event in [`TaskGraph::events`].
    #[serde(skip)]
    pub index: usize,
    /// The event id.
    pub id: String,
    /// Time from the previous step's event to this one, ns (0 for the first step; negative values,
    /// possible under clock skew, are kept as reported and not charged).
    pub delta_ns: i64,
    /// True when this event is a join (two or more known parents).
    pub join: bool,
}

/// Time charged to one agent, host or process along the critical path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Share {
    /// Agent, host or process name (`?` when the events did not say).
    pub name: String,
    /// Time charged, ns.
    pub ns: i64,
    /// Steps charged.
    pub steps: usize,
}

/// The critical path of a task with its time per agent, host and process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriticalPath {
    /// Steps from the first (a root, unless a cycle stopped the walk) to the last event.
    pub steps: Vec<Step>,
    /// Time from the first to the last step, ns (0 when events lack timestamps).
    pub total_ns: i64,
    /// True when the walk ended at a root (an event with no known parent); false when it stopped
    /// because every parent had been visited already (a cycle).
    pub reached_root: bool,
    /// Time per agent, largest first.
    pub by_agent: Vec<Share>,
    /// Time per host, largest first.
    pub by_host: Vec<Share>,
    /// Time per process (`host/pid` or the reported process id), largest first.
    pub by_process: Vec<Share>,
    /// Time in steps whose two events are in different processes, ns.
    pub cross_process_ns: i64,
}

impl CriticalPath {
    /// Computes the critical path of `g`: from the event with the latest timestamp (ties: the
    /// later in topological order; a task without timestamps ends at its last event in
    /// topological order), walking back through the parent that finished last (see
    /// [`TaskGraph`]'s tie rules). Returns `None` for an empty task.
    pub fn compute(g: &TaskGraph) -> Option<CriticalPath> {
        let last = last_event(g)?;
        let mut visited = vec![false; g.len()];
        let mut rev = vec![last];
        visited[last] = true;
        let mut cur = last;
        let mut reached_root = true;
        loop {
            let ps = g.parents_of(cur);
            if ps.is_empty() {
                break;
            }
            match g.latest_of(ps.iter().copied().filter(|&p| !visited[p])) {
                Some(p) => {
                    visited[p] = true;
                    rev.push(p);
                    cur = p;
                }
                None => {
                    reached_root = false;
                    break;
                }
            }
        }
        rev.reverse();
        let ev = |i: usize| &g.events[i];
        let mut steps = Vec::with_capacity(rev.len());
        let mut agent: BTreeMap<String, (i64, usize)> = BTreeMap::new();
        let mut host: BTreeMap<String, (i64, usize)> = BTreeMap::new();
        let mut process: BTreeMap<String, (i64, usize)> = BTreeMap::new();
        let mut cross = 0i64;
        for (k, &i) in rev.iter().enumerate() {
            let e = ev(i);
            let delta = match k {
                0 => 0,
                _ => match (ev(rev[k - 1]).timestamp_ns, e.timestamp_ns) {
                    (Some(a), Some(b)) => b.saturating_sub(a),
                    _ => 0,
                },
            };
            if k > 0 {
                let charged = delta.max(0);
                let add = |m: &mut BTreeMap<String, (i64, usize)>, name: String| {
                    let s = m.entry(name).or_insert((0, 0));
                    s.0 = s.0.saturating_add(charged);
                    s.1 += 1;
                };
                add(&mut agent, e.agent.clone().unwrap_or_else(|| "?".into()));
                add(&mut host, e.host.clone().unwrap_or_else(|| "?".into()));
                add(&mut process, e.process_key());
                if ev(rev[k - 1]).process_key() != e.process_key() {
                    cross = cross.saturating_add(charged);
                }
            }
            steps.push(Step {
                index: i,
                id: e.id.clone(),
                delta_ns: delta,
                join: g.parents_of(i).len() >= 2,
            });
        }
        let total_ns = match (ev(rev[0]).timestamp_ns, ev(last).timestamp_ns) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        Some(CriticalPath {
            steps,
            total_ns,
            reached_root,
            by_agent: shares(agent),
            by_host: shares(host),
            by_process: shares(process),
            cross_process_ns: cross,
        })
    }

    /// True when event `i` is on the path.
    pub fn contains(&self, i: usize) -> bool {
        self.steps.iter().any(|s| s.index == i)
    }

    /// A membership mask over the task's events (faster than [`CriticalPath::contains`] in loops).
    pub fn mask(&self, events: usize) -> Vec<bool> {
        let mut m = vec![false; events];
        for s in &self.steps {
            m[s.index] = true;
        }
        m
    }
}

fn shares(m: BTreeMap<String, (i64, usize)>) -> Vec<Share> {
    let mut v: Vec<Share> = m
        .into_iter()
        .map(|(name, (ns, steps))| Share { name, ns, steps })
        .collect();
    v.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
    v
}

/// The event that finished last: latest timestamp, ties by topological rank.
fn last_event(g: &TaskGraph) -> Option<usize> {
    if g.is_empty() {
        return None;
    }
    let with_ts = (0..g.len()).filter(|&i| g.events[i].timestamp_ns.is_some());
    g.latest_of(with_ts)
        .or_else(|| g.topological_order().last().copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, Parent};

    fn ev(id: &str, ts: i64, agent: &str, proc_: &str, parents: &[&str]) -> Event {
        Event {
            task: "T".into(),
            id: id.into(),
            agent: Some(agent.into()),
            host: Some("h".into()),
            process: Some(proc_.into()),
            timestamp_ns: Some(ts),
            parents: parents.iter().map(|p| Parent::causal(*p)).collect(),
            ..Event::default()
        }
    }

    #[test]
    fn follows_the_parent_that_finished_last_at_a_join() {
        // A forks to B (fast) and C (slow); D joins them; E follows D.
        let g = TaskGraph::build(
            "T",
            vec![
                ev("A", 0, "front", "1", &[]),
                ev("B", 10, "back1", "2", &["A"]),
                ev("C", 40, "back2", "3", &["A"]),
                ev("D", 45, "front", "1", &["B", "C"]),
                ev("E", 50, "front", "1", &["D"]),
            ],
        );
        let cp = CriticalPath::compute(&g).unwrap();
        let ids: Vec<&str> = cp.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["A", "C", "D", "E"]);
        assert!(cp.reached_root);
        assert_eq!(cp.total_ns, 50);
        assert!(cp.steps[2].join);
        assert_eq!(
            cp.by_agent[0],
            Share {
                name: "back2".into(),
                ns: 40,
                steps: 1
            }
        );
        assert_eq!(
            cp.by_agent[1],
            Share {
                name: "front".into(),
                ns: 10,
                steps: 2
            }
        );
        // A(1)->C(3) and C(3)->D(1) cross processes: 40 + 5.
        assert_eq!(cp.cross_process_ns, 45);
    }

    /// Regression: a chain whose timestamps jump between 1e14 ns and i64::MAX (hostile or
    /// broken reports) made `sightline show --critical-path` panic with "attempt to add with
    /// overflow" while charging time; sums now saturate.
    #[test]
    fn extreme_timestamps_saturate_instead_of_overflowing() {
        let (lo, hi) = (100_000_000_000_000i64, i64::MAX);
        let mut evs = vec![ev("E0", lo, "a", "1", &[])];
        for i in 1..6 {
            evs.push(ev(
                &format!("E{i}"),
                if i % 2 == 1 { hi } else { lo },
                "a",
                if i % 2 == 1 { "2" } else { "1" },
                &[&format!("E{}", i - 1)],
            ));
        }
        evs.push(ev("N", i64::MIN, "b", "3", &["E0"]));
        let g = TaskGraph::build("T", evs);
        let cp = CriticalPath::compute(&g).unwrap();
        assert_eq!(cp.steps.len(), 6);
        assert_eq!(
            cp.by_agent[0],
            Share {
                name: "a".into(),
                ns: i64::MAX,
                steps: 5
            }
        );
        assert_eq!(cp.cross_process_ns, i64::MAX);
        assert!(
            g.problems.iter().any(|p| matches!(
                p,
                crate::Problem::BackwardsInTime {
                    max_ns: i64::MAX,
                    ..
                }
            )),
            "{:?}",
            g.problems
        );
        let text = crate::render::text(&g, Some(&cp));
        assert!(text.contains("critical path: 6 events"), "{text}");
        let acc = crate::Accounting::compute(&g);
        assert!(acc.text().contains('a'));
        let cmp = crate::Comparison::compute(&g, &g);
        assert!(cmp.text(5).contains("a"));
    }

    #[test]
    fn a_cycle_stops_the_walk_without_looping() {
        let g = TaskGraph::build(
            "T",
            vec![ev("X", 1, "a", "1", &["Y"]), ev("Y", 2, "a", "1", &["X"])],
        );
        let cp = CriticalPath::compute(&g).unwrap();
        assert_eq!(cp.steps.len(), 2);
        assert!(!cp.reached_root);
    }
}
