//! The accounting program (D, compiled by Sightline's own probe compiler) and the parser of its
//! output.
//!
//! Per thread the program keeps the task and activity last published by `causal:context`
//! (`tk[tid]`, `ak[tid]`, `known[tid]`) and the start of its current on-CPU interval (`on[tid]`).
//! `sched:::sched_switch` charges the interval that ends to the previous thread's pair; a
//! `causal:context` firing charges the interval so far to the old pair and starts a new one, so a
//! thread that changes task without leaving the CPU is split exactly. I/O, network and page-fault
//! probes charge to the pair current at that moment. A thread whose pair was published before
//! the program started has `known[tid] == 0`: its rows carry the flag and are charged from the
//! slot snapshot read once the probes are attached ([`crate::snapshot`]).
//!
//! Output (one record a line): `I` at the end of each interval (every tick and at exit), then
//! `TAG PID TID TASK ACTIVITY_KEY KNOWN VALUE` per aggregation row, the running total since the
//! start (aggregations are never truncated: a `trunc()` after `printa()` would lose what the
//! probes add between the two), and `A ACTIVITY_KEY LABEL` the first time an activity label is
//! seen. A row's value in one interval is its total less its total at the previous marker.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// One resource the program measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// On-CPU time in ns (`sched:::sched_switch` intervals, split at `causal:context`).
    Cpu,
    /// Bytes returned by `read`, `pread64`, `readv`, `preadv` (files, pipes; sockets read with
    /// `read` too).
    ReadBytes,
    /// Bytes written by `write`, `pwrite64`, `writev`, `pwritev`.
    WriteBytes,
    /// Bytes sent by `sendto` and `sendmsg` (Rust's and most runtimes' socket writes).
    NetTxBytes,
    /// Bytes received by `recvfrom` and `recvmsg`.
    NetRxBytes,
    /// Bytes of block requests issued by the thread (`block:::block_rq_issue`).
    BlockBytes,
    /// User page faults (`exceptions:::page_fault_user`).
    PageFaults,
}

impl Resource {
    /// Every resource, in output order.
    pub const ALL: [Resource; 7] = [
        Resource::Cpu,
        Resource::ReadBytes,
        Resource::WriteBytes,
        Resource::NetTxBytes,
        Resource::NetRxBytes,
        Resource::BlockBytes,
        Resource::PageFaults,
    ];

    /// The one-letter tag of the program's output.
    pub fn tag(self) -> char {
        match self {
            Resource::Cpu => 'C',
            Resource::ReadBytes => 'R',
            Resource::WriteBytes => 'W',
            Resource::NetTxBytes => 'T',
            Resource::NetRxBytes => 'X',
            Resource::BlockBytes => 'B',
            Resource::PageFaults => 'P',
        }
    }

    /// The field name in reports (`cpu_ns`, `read_bytes`, ...; docs/causal-accounting.md).
    pub fn field(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu_ns",
            Resource::ReadBytes => "read_bytes",
            Resource::WriteBytes => "write_bytes",
            Resource::NetTxBytes => "net_tx_bytes",
            Resource::NetRxBytes => "net_rx_bytes",
            Resource::BlockBytes => "block_bytes",
            Resource::PageFaults => "page_faults",
        }
    }

    fn from_tag(c: char) -> Option<Resource> {
        Resource::ALL.into_iter().find(|r| r.tag() == c)
    }

    fn agg(self) -> &'static str {
        match self {
            Resource::Cpu => "@cpu",
            Resource::ReadBytes => "@rd",
            Resource::WriteBytes => "@wr",
            Resource::NetTxBytes => "@tx",
            Resource::NetRxBytes => "@rx",
            Resource::BlockBytes => "@blk",
            Resource::PageFaults => "@pf",
        }
    }
}

/// Most thread ids named in the program (the threads of the processes already running); threads
/// beyond are watched from their first switch out.
pub const MAX_START_TIDS: usize = 512;

/// The D text of the accounting program for the executables `exes` (their `causal:context`
/// probes), the processes `pids` already running and their threads `tids` (watched from their
/// first switch in; other threads of `pids` from their first switch out; later processes of
/// `exes` from their first `causal:context`), printing every `interval_ms`. At most
/// [`MAX_START_TIDS`] of `tids` are used.
pub fn source(exes: &[PathBuf], pids: &[u32], tids: &[u32], interval_ms: u64) -> String {
    let key = "[pid, tid, tk[tid], ak[tid], known[tid]]";
    let mut d = String::from(
        "#pragma D option quiet\n\
         uint64_t on[int];\nuint64_t vtout[int];\nuint64_t cs[int];\nuint64_t tk[int];\n\
         uint64_t ak[int];\nint known[int];\nint w[int];\nint seen[uint64_t];\n",
    );
    for exe in exes {
        let p = format!("causal:{}::context", exe.display());
        d.push_str(&format!(
            "{p} /on[tid]/ {{ @cpu{key} = sum(timestamp - on[tid]); cs[tid] += timestamp - on[tid]; }}\n\
             {p} {{ on[tid] = timestamp; tk[tid] = arg0; ak[tid] = arg1; known[tid] = 1; w[tid] = 1; }}\n\
             {p} /arg1 && !seen[arg1]/ {{ seen[arg1] = 1; printf(\"A %u %s\\n\", arg1, copyinstr(arg2)); }}\n"
        ));
    }
    // At a switch out the thread's run time since its previous switch out is exact
    // (`vtimestamp`, the scheduler's sum_exec_runtime, updated before the tracepoint); what
    // `causal:context` firings already charged of it (`cs`) is taken off. Before the first
    // switch out, the interval since the switch in (or the last firing) is used.
    if !pids.is_empty() {
        let watch: Vec<String> = pids.iter().map(|p| format!("pid == {p}")).collect();
        d.push_str(&format!(
            "sched:::sched_switch /{}/ {{ w[tid] = 1; }}\n",
            watch.join(" || ")
        ));
    }
    d.push_str(&format!(
        "sched:::sched_switch /vtout[tid] && vtimestamp - vtout[tid] > cs[tid]/ {{ @cpu{key} = sum(vtimestamp - vtout[tid] - cs[tid]); }}\n\
         sched:::sched_switch /!vtout[tid] && on[tid]/ {{ @cpu{key} = sum(timestamp - on[tid]); }}\n\
         sched:::sched_switch /w[tid]/ {{ vtout[tid] = vtimestamp; cs[tid] = 0; on[tid] = 0; }}\n"
    ));
    let mut next = String::from("w[args->next_pid]");
    for t in tids.iter().take(MAX_START_TIDS) {
        next.push_str(&format!(" || args->next_pid == {t}"));
    }
    d.push_str(&format!(
        "sched:::sched_switch /{next}/ {{ on[args->next_pid] = timestamp; }}\n"
    ));
    let sys = |names: &[&str]| {
        names
            .iter()
            .map(|n| format!("syscall::{n}:return"))
            .collect::<Vec<_>>()
            .join(",")
    };
    for (probes, agg) in [
        (sys(&["read", "pread64", "readv", "preadv"]), "@rd"),
        (sys(&["write", "pwrite64", "writev", "pwritev"]), "@wr"),
        (sys(&["sendto", "sendmsg"]), "@tx"),
        (sys(&["recvfrom", "recvmsg"]), "@rx"),
    ] {
        d.push_str(&format!(
            "{probes} /w[tid] && (int64_t)arg0 > 0/ {{ {agg}{key} = sum(arg0); }}\n"
        ));
    }
    d.push_str(&format!(
        "block:::block_rq_issue /w[tid]/ {{ @blk{key} = sum(args->bytes); }}\n\
         exceptions:::page_fault_user /w[tid]/ {{ @pf{key} = count(); }}\n"
    ));
    let mut dump = String::from("printf(\"I\\n\");");
    for r in Resource::ALL {
        dump.push_str(&format!(
            " printa(\"{} %u %u %u %u %u %@u\\n\", {});",
            r.tag(),
            r.agg()
        ));
    }
    d.push_str(&format!(
        "profile:::tick-{interval_ms}ms {{{dump} }}\nEND {{{dump} }}\n"
    ));
    d
}

/// One aggregation row of the program's output (a running total).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// Interval index (0-based: rows printed after the first `I`).
    pub interval: usize,
    /// Which resource.
    pub resource: Resource,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Task key (`causal:context`'s arg0; 0: none or not known).
    pub task: u64,
    /// Activity key (0: none).
    pub activity_key: u64,
    /// Whether the thread's pair came from `causal:context` (false: from the snapshot).
    pub known: bool,
    /// ns for CPU, bytes or a count, since the program started.
    pub value: u64,
}

impl Row {
    /// The row's key without the interval.
    pub fn key(&self) -> (Resource, u32, u32, u64, u64, bool) {
        (
            self.resource,
            self.pid,
            self.tid,
            self.task,
            self.activity_key,
            self.known,
        )
    }
}

/// The parsed output: rows, activity labels and the number of intervals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// Aggregation rows (running totals) in output order.
    pub rows: Vec<Row>,
    /// Activity labels by key, as first seen.
    pub labels: BTreeMap<u64, String>,
    /// Interval markers seen.
    pub intervals: usize,
}

/// D prints `%u` of a 64-bit value as unsigned; accept a signed form too.
fn num(s: &str) -> Option<u64> {
    s.parse::<u64>()
        .ok()
        .or_else(|| s.parse::<i64>().ok().map(|v| v as u64))
}

impl Output {
    /// Per interval, what each row key added in it (its total less its total at the previous
    /// marker); the sum over intervals is the last total.
    pub fn deltas(&self) -> Vec<Vec<Row>> {
        let mut last: BTreeMap<(Resource, u32, u32, u64, u64, bool), u64> = BTreeMap::new();
        let mut out: Vec<Vec<Row>> = vec![Vec::new(); self.intervals];
        for r in &self.rows {
            let prev = last.insert(r.key(), r.value).unwrap_or(0);
            if let Some(v) = out.get_mut(r.interval) {
                v.push(Row {
                    value: r.value.saturating_sub(prev),
                    ..*r
                });
            }
        }
        out
    }

    /// Adds one output line; returns true for an interval marker (`I`). Other lines (notices)
    /// are ignored.
    pub fn line(&mut self, line: &str) -> bool {
        let line = line.trim_end();
        if line == "I" {
            self.intervals += 1;
            return true;
        }
        if let Some(rest) = line.strip_prefix("A ") {
            if let Some((k, label)) = rest.split_once(' ')
                && let Some(k) = num(k)
            {
                self.labels.entry(k).or_insert_with(|| label.to_string());
            }
            return false;
        }
        let mut it = line.split_ascii_whitespace();
        let Some(resource) = it
            .next()
            .filter(|t| t.len() == 1)
            .and_then(|t| Resource::from_tag(t.chars().next()?))
        else {
            return false;
        };
        let f: Vec<u64> = it.filter_map(num).collect();
        if let [pid, tid, task, ak, known, value] = f[..] {
            self.rows.push(Row {
                interval: self.intervals.saturating_sub(1),
                resource,
                pid: pid as u32,
                tid: tid as u32,
                task,
                activity_key: ak,
                known: known != 0,
                value,
            });
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_names_every_exe_pid_and_resource() {
        let d = source(
            &[PathBuf::from("/bin/a"), PathBuf::from("/bin/b")],
            &[7, 9],
            &[7, 8, 9],
            500,
        );
        assert!(d.contains(
            "/w[args->next_pid] || args->next_pid == 7 || args->next_pid == 8 || args->next_pid == 9/"
        ));
        assert!(d.contains("causal:/bin/a::context /on[tid]/"));
        assert!(d.contains("causal:/bin/b::context {"));
        assert!(d.contains("/pid == 7 || pid == 9/"));
        assert!(d.contains("profile:::tick-500ms"));
        for r in Resource::ALL {
            assert!(d.contains(&format!("printa(\"{} %u", r.tag())), "{r:?}");
            assert!(!d.contains("trunc("), "running totals, never truncated");
        }
        // No pids: no watch clause (an empty predicate would be a syntax error).
        assert!(!source(&[PathBuf::from("/x")], &[], &[], 1000).contains("/ {  w[tid]"));
    }

    #[test]
    fn output_lines() {
        let mut o = Output::default();
        assert!(!o.line("A 12 backend a"));
        assert!(o.line("I"));
        o.line("C 10 11 18446744073709551615 12 1 2500");
        o.line("R 10 11 -1 12 0 77");
        o.line("garbage line");
        assert!(o.line("I"));
        o.line("P 10 12 5 0 1 3");
        assert_eq!(o.intervals, 2);
        assert_eq!(o.labels[&12], "backend a");
        assert_eq!(o.rows.len(), 3);
        assert_eq!(o.rows[0].task, u64::MAX);
        assert_eq!(o.rows[0].resource, Resource::Cpu);
        assert_eq!((o.rows[1].task, o.rows[1].known), (u64::MAX, false));
        assert_eq!((o.rows[2].interval, o.rows[2].value), (1, 3));
        o.line("C 10 11 18446744073709551615 12 1 2600");
        let d = o.deltas();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].len(), 2);
        let cpu: Vec<u64> = d[1].iter().map(|r| r.value).collect();
        assert_eq!(
            cpu,
            [3, 100],
            "interval 1: the new row's total, the old row's increase"
        );
    }
}
