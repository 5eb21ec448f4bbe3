//! Resource accounting of a task: where its events, its threads' time and its reported resources
//! went, per process and per agent.
//!
//! Quanto (Fonseca et al., "Quanto: Tracking Energy in Networked Embedded Systems", OSDI 2008)
//! charges resource use to the activity that caused it by following the causal context; X-Trace's
//! resource-tracing agents (the Hadoop traces in `shared/data/xtrace`) report resource counters
//! with events (`Cycles`, `Bytes`, `Duration`, `GcDuration`, …). This module does the accounting
//! that such reports allow without energy meters:
//! - **thread time**: on each thread (host, process, thread id), the time between two consecutive
//!   events of the task is charged to the later event's agent and process (the thread was working
//!   on this task in between, as far as the reports say);
//! - **resource counters**: numeric values of the keys in [`RESOURCE_KEYS`] are summed.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::graph::TaskGraph;

/// Keys whose numeric values are summed as resources (as reported by X-Trace's resource-tracing
/// agents: CPU cycles, bytes moved, durations in ms, packet and data lengths).
pub const RESOURCE_KEYS: &[&str] = &[
    "Cycles",
    "Bytes",
    "Duration",
    "GcDuration",
    "dataLen",
    "packetLen",
    "NumBytes",
];

/// Usage charged to one process or agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Usage {
    /// Process (`host/pid` or the reported process id) or agent name (`?` when unknown).
    pub name: String,
    /// Events reported.
    pub events: usize,
    /// Thread time charged, ns (see the module docs).
    pub thread_ns: i64,
    /// Sums of the numeric [`RESOURCE_KEYS`] values, by key.
    pub resources: BTreeMap<String, f64>,
}

/// A task's resource accounting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Accounting {
    /// Per process, most thread time first.
    pub by_process: Vec<Usage>,
    /// Per agent, most thread time first.
    pub by_agent: Vec<Usage>,
}

fn slot<'a>(m: &'a mut HashMap<String, Usage>, name: &str) -> &'a mut Usage {
    m.entry(name.to_string()).or_insert_with(|| Usage {
        name: name.to_string(),
        events: 0,
        thread_ns: 0,
        resources: BTreeMap::new(),
    })
}

impl Accounting {
    /// Accounts for every event of `g`. Events without a thread id are counted but charge no
    /// thread time; values of resource keys that are not numbers are ignored.
    pub fn compute(g: &TaskGraph) -> Accounting {
        let mut procs: HashMap<String, Usage> = HashMap::new();
        let mut agents: HashMap<String, Usage> = HashMap::new();
        let mut threads: HashMap<(String, u64), Vec<usize>> = HashMap::new();
        for (i, e) in g.events.iter().enumerate() {
            let pk = e.process_key();
            let ak = e.agent.clone().unwrap_or_else(|| "?".into());
            for u in [slot(&mut procs, &pk), slot(&mut agents, &ak)] {
                u.events += 1;
                for (k, v) in &e.fields {
                    if RESOURCE_KEYS.contains(&k.as_str())
                        && let Ok(x) = v.trim().parse::<f64>()
                    {
                        *u.resources.entry(k.clone()).or_insert(0.0) += x;
                    }
                }
            }
            if let (Some(tid), Some(_)) = (e.tid, e.timestamp_ns) {
                threads.entry((pk, tid)).or_default().push(i);
            }
        }
        for evs in threads.values_mut() {
            evs.sort_by_key(|&i| (g.events[i].timestamp_ns, g.events[i].hrt_ns, g.rank(i)));
            for w in evs.windows(2) {
                let (a, b) = (&g.events[w[0]], &g.events[w[1]]);
                let d = b
                    .timestamp_ns
                    .unwrap_or(0)
                    .saturating_sub(a.timestamp_ns.unwrap_or(0))
                    .max(0);
                let u = slot(&mut procs, &b.process_key());
                u.thread_ns = u.thread_ns.saturating_add(d);
                let u = slot(&mut agents, b.agent.as_deref().unwrap_or("?"));
                u.thread_ns = u.thread_ns.saturating_add(d);
            }
        }
        let sorted = |m: HashMap<String, Usage>| {
            let mut v: Vec<Usage> = m.into_values().collect();
            v.sort_by(|a, b| {
                b.thread_ns
                    .cmp(&a.thread_ns)
                    .then(b.events.cmp(&a.events))
                    .then(a.name.cmp(&b.name))
            });
            v
        };
        Accounting {
            by_process: sorted(procs),
            by_agent: sorted(agents),
        }
    }
}

impl Accounting {
    /// The accounting as text: per process, then per agent, with events, thread time and the
    /// resource sums.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        for (what, rows) in [("process", &self.by_process), ("agent", &self.by_agent)] {
            let _ = writeln!(
                o,
                "resources by {what} (events, thread time, reported counters):"
            );
            for u in rows {
                let res: Vec<String> = u
                    .resources
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let _ = writeln!(
                    o,
                    "  {:>6} {:>11}  {:<32} {}",
                    u.events,
                    crate::graph::fmt_duration(u.thread_ns),
                    u.name,
                    res.join(" ")
                );
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, Parent};

    #[test]
    fn thread_time_and_counters_are_charged_to_the_later_event() {
        let ev = |id: &str, ts: i64, agent: &str, tid: u64, bytes: &str, parents: &[&str]| Event {
            task: "T".into(),
            id: id.into(),
            agent: Some(agent.into()),
            process: Some("1@h".into()),
            host: Some("h".into()),
            tid: Some(tid),
            timestamp_ns: Some(ts),
            fields: vec![
                ("Bytes".into(), bytes.into()),
                ("Partition".into(), "7".into()),
            ],
            parents: parents.iter().map(|p| Parent::causal(*p)).collect(),
            ..Event::default()
        };
        let g = TaskGraph::build(
            "T",
            vec![
                ev("A", 0, "rpc", 1, "10", &[]),
                ev("B", 100, "disk", 1, "5", &["A"]),
                ev("C", 130, "rpc", 2, "x", &["A"]), // another thread: no time charged
                ev("D", 400, "rpc", 1, "1", &["B", "C"]),
            ],
        );
        let a = Accounting::compute(&g);
        assert_eq!(a.by_process.len(), 1);
        let p = &a.by_process[0];
        assert_eq!((p.name.as_str(), p.events, p.thread_ns), ("1@h", 4, 400));
        assert_eq!(p.resources.get("Bytes"), Some(&16.0));
        assert!(!p.resources.contains_key("Partition"));
        let rpc = a.by_agent.iter().find(|u| u.name == "rpc").unwrap();
        let disk = a.by_agent.iter().find(|u| u.name == "disk").unwrap();
        assert_eq!((rpc.thread_ns, disk.thread_ns), (300, 100));
        assert_eq!(rpc.resources.get("Bytes"), Some(&11.0));
    }
}
