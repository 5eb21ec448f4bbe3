//! A recording drawn as a causal task (`sightline show --recording DIR`, issue #13).
//!
//! Each recorded thread is a lane; its system calls (trapped and buffered), signals, forced sync
//! points, switches and exit are events in program order; the rendezvous points of the recording
//! (the partial order of each shared kernel object: pipe and socket hand-offs, waits for a child,
//! `docs/recording-format.md`, *Rendezvous points*), the fork of each process and each switch of
//! the right to run are edges between lanes. The result is a [`TaskGraph`], so the text, DOT and
//! JSON views and the critical path of `sightline show` apply unchanged.
//!
//! A recording holds no clock: an event's time is its position, 1 µs each, in a topological order
//! of the graph that keeps the recorded stream's order wherever the edges allow (a reader's exit
//! can be recorded before the exit of the write that fed it). Durations and the critical path are thus counted in events. An event's id is its
//! record's number in `sightline replay --dump` (`N.K` for the K-th further call of a batch of
//! buffered calls). RDTSC, CPUID and syscall-buffer patch records are left out: they are neither
//! interactions nor waits.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use causal_analysis::{Event, Parent, TaskGraph};
use replay::format::{Event as RecEvent, Recording};

/// Nanoseconds per shown event on the graph's time axis.
const NS_PER_RECORD: i64 = 1_000;

/// One event of the graph under construction and what its edges need.
struct Node {
    event: Event,
    /// Recorded tid of its thread.
    tid: i32,
    /// A read-family call that returned data / a write-family call that wrote some.
    read: bool,
    write: bool,
}

/// Builds the task graph of `rec`, named `name` (shown as the task id).
pub fn recording_graph(rec: &Recording, name: &str) -> TaskGraph {
    let groups = replay::format::thread_groups(&rec.records);
    let mut tgid_of: HashMap<i32, i32> = HashMap::new();
    for (&leader, tids) in &groups {
        for &t in tids {
            tgid_of.insert(t, leader);
        }
    }
    let mut nodes: Vec<Node> = Vec::new();
    // Last event of each thread (program order), and the switch that hands the right to it.
    let mut last_of: HashMap<i32, usize> = HashMap::new();
    let mut handed: HashMap<i32, usize> = HashMap::new();
    // Forked child pid -> the fork event, until the child's first event.
    let mut forked: HashMap<i32, usize> = HashMap::new();
    // First event of each thread that had no fork event before it: the child ran first and its
    // first call completed before the parent's `clone` did (the recorder writes a call at its
    // exit), so the fork edge is added when the `clone` comes.
    let mut orphan_first: HashMap<i32, usize> = HashMap::new();
    // Rendezvous object -> (seq, node) of its interactions.
    let mut objects: HashMap<u64, Vec<(u64, usize)>> = HashMap::new();

    for (ordinal, r) in rec.records.iter().enumerate() {
        let (read, write) = match &r.event {
            RecEvent::Syscall(s) if s.result > 0 => (
                matches!(
                    s.nr,
                    libc::SYS_read
                        | libc::SYS_readv
                        | libc::SYS_pread64
                        | libc::SYS_preadv
                        | libc::SYS_recvfrom
                        | libc::SYS_recvmsg
                ),
                replay::syscalls::is_write(s.nr),
            ),
            _ => (false, false),
        };
        let calls: Vec<(String, Vec<&replay::format::Rendezvous>)> = match &r.event {
            RecEvent::Rdtsc { .. } | RecEvent::Cpuid { .. } | RecEvent::SyscallbufPatch { .. } => {
                continue;
            }
            RecEvent::Buffered(b) => b
                .iter()
                .map(|c| {
                    let s = replay::format::SyscallEvent {
                        nr: c.nr,
                        args: c.args,
                        result: c.result,
                        writes: Vec::new(),
                        rendezvous: Vec::new(),
                        output: 0,
                        data_hash: 0,
                        extra: Vec::new(),
                        path: Vec::new(),
                    };
                    (
                        format!("{} (buffered)", replay::describe(&RecEvent::Syscall(s))),
                        Vec::new(),
                    )
                })
                .collect(),
            RecEvent::Syscall(s) => {
                vec![(replay::describe(&r.event), s.rendezvous.iter().collect())]
            }
            RecEvent::Exit { rendezvous, .. } => {
                vec![(replay::describe(&r.event), rendezvous.iter().collect())]
            }
            other => vec![(replay::describe(other), Vec::new())],
        };
        let tid = r.pid;
        let tgid = tgid_of.get(&tid).copied().unwrap_or(tid);
        for (k, (label, rdv)) in calls.into_iter().enumerate() {
            let id = if k == 0 {
                format!("{ordinal}")
            } else {
                format!("{ordinal}.{k}")
            };
            let mut parents = Vec::new();
            if let Some(&prev) = last_of.get(&tid) {
                parents.push(Parent::causal(nodes[prev].event.id.clone()));
            } else if let Some(from) = forked.remove(&tid) {
                parents.push(Parent::causal(nodes[from].event.id.clone()));
            } else {
                orphan_first.insert(tid, nodes.len());
            }
            if let Some(from) = handed.remove(&tid) {
                parents.push(Parent::causal(nodes[from].event.id.clone()));
            }
            let mut fields = vec![("record".to_string(), ordinal.to_string())];
            for x in &rdv {
                fields.push(("rendezvous".into(), format!("{:#x}:{}", x.obj, x.seq)));
            }
            let n = nodes.len();
            for x in &rdv {
                objects.entry(x.obj).or_default().push((x.seq, n));
            }
            nodes.push(Node {
                event: Event {
                    task: name.to_string(),
                    id,
                    agent: Some(format!("process {tgid}")),
                    process: Some(tgid.to_string()),
                    pid: u32::try_from(tgid).ok(),
                    tid: u64::try_from(tid).ok(),
                    labels: vec![label],
                    fields,
                    parents,
                    ..Event::default()
                },
                tid,
                read: read && k == 0,
                write: write && k == 0,
            });
            last_of.insert(tid, n);
        }
        match &r.event {
            RecEvent::Syscall(s)
                if s.result > 0
                    && matches!(
                        s.nr,
                        libc::SYS_clone | libc::SYS_clone3 | libc::SYS_fork | libc::SYS_vfork
                    ) =>
            {
                if let Some(&n) = last_of.get(&tid) {
                    let child = s.result as i32;
                    match orphan_first.remove(&child) {
                        Some(first) => {
                            let id = nodes[n].event.id.clone();
                            nodes[first].event.parents.push(Parent::causal(id));
                        }
                        None => {
                            forked.insert(child, n);
                        }
                    }
                }
            }
            RecEvent::Switch { to, .. } => {
                if let Some(&n) = last_of.get(&tid) {
                    handed.insert(*to, n);
                }
            }
            _ => {}
        }
    }
    // Each object's interactions in their recorded order (the order the recorder handled their
    // exits): an edge from one to the next when they are in different threads (within a thread
    // program order already orders them). A read directly followed by another thread's write
    // is drawn write -> read: the reader was blocked until that write's bytes came, and its exit
    // was handled first.
    let mut extra: Vec<(usize, usize)> = Vec::new();
    for seqs in objects.values_mut() {
        seqs.sort_unstable();
        for w in seqs.windows(2) {
            let ((_, a), (_, b)) = (w[0], w[1]);
            if nodes[a].tid != nodes[b].tid {
                if nodes[a].read && nodes[b].write {
                    extra.push((b, a));
                } else {
                    extra.push((a, b));
                }
            }
        }
    }
    for (a, b) in extra {
        let id = nodes[a].event.id.clone();
        if !nodes[b].event.parents.iter().any(|p| p.id == id) {
            nodes[b].event.parents.push(Parent::causal(id));
        }
    }
    // The time axis: a topological order of the edges, as close to the stream order as they
    // allow (a reader's exit may be recorded before the writer's that fed it).
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.event.id.as_str(), i))
        .collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut waiting: Vec<usize> = vec![0; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for p in &n.event.parents {
            if let Some(&j) = index.get(p.id.as_str()) {
                children[j].push(i);
                waiting[i] += 1;
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..nodes.len())
        .filter(|&i| waiting[i] == 0)
        .map(Reverse)
        .collect();
    let mut order: Vec<usize> = Vec::with_capacity(nodes.len());
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &c in &children[i] {
            waiting[c] -= 1;
            if waiting[c] == 0 {
                ready.push(Reverse(c));
            }
        }
    }
    // A cycle (not causal: a recorder bug) leaves nodes out: they follow in stream order, and
    // the graph reports the cycle.
    let placed: std::collections::HashSet<usize> = order.iter().copied().collect();
    order.extend((0..nodes.len()).filter(|i| !placed.contains(i)));
    for (t, &i) in order.iter().enumerate() {
        nodes[i].event.timestamp_ns = Some(t as i64 * NS_PER_RECORD);
    }
    TaskGraph::build(name.to_string(), nodes.into_iter().map(|n| n.event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use replay::format::{Meta, Record, SyscallEvent};

    fn call(pid: i32, nr: i64, result: i64) -> Record {
        Record {
            pid,
            event: RecEvent::Syscall(SyscallEvent {
                nr,
                args: [0; 6],
                result,
                writes: Vec::new(),
                rendezvous: Vec::new(),
                output: 0,
                data_hash: 0,
                extra: Vec::new(),
                path: Vec::new(),
            }),
        }
    }

    fn recording(records: Vec<Record>) -> Recording {
        Recording {
            dir: std::path::PathBuf::from("/nonexistent"),
            meta: Meta::for_test(100),
            records,
            truncated: false,
            file_bytes: 0,
            raw_bytes: 0,
            chunks: 0,
        }
    }

    /// The fork edge of each child, whether the child's first call was recorded after the
    /// parent's `clone` (#1 -> #2) or before it (the child ran first: its `getpid` is record 3,
    /// the `clone` that made it record 4). Seen as a missing fork edge of `sh` in a pipeline.
    #[test]
    fn a_child_recorded_before_its_parents_clone_still_has_its_fork_edge() {
        let rec = recording(vec![
            call(100, libc::SYS_getpid, 100),
            call(100, libc::SYS_clone, 101),
            call(101, libc::SYS_getpid, 101),
            call(102, libc::SYS_getpid, 102),
            call(100, libc::SYS_clone, 102),
        ]);
        let g = recording_graph(&rec, "t");
        let parents = |id: &str| -> Vec<String> {
            let i = g.index_of(id).unwrap();
            g.parents_of(i)
                .iter()
                .map(|&p| g.events[p].id.clone())
                .collect()
        };
        assert_eq!(parents("2"), ["1"]);
        assert_eq!(parents("3"), ["4"]);
        // The child's first event comes after the clone on the time axis.
        let t = |id: &str| g.events[g.index_of(id).unwrap()].timestamp_ns.unwrap();
        assert!(t("4") < t("3"), "{} {}", t("4"), t("3"));
    }
}
