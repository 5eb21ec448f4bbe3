//! Scribe-style record and replay of unmodified Linux programs, without hardware performance counters.
//!
//! Scribe (Laadan, Viennot, Nieh; SIGMETRICS 2010) showed that recording a program's nondeterministic
//! interactions with the kernel (system call results, signals, the order of interactions between
//! processes) suffices to replay it deterministically. This crate is the policy on top of
//! `replay-ptrace`'s mechanism:
//!
//! - [`format`](mod@format): the recording (a directory with `meta.json` and a chunked zstd event stream;
//!   [`format::Writer`], [`format::Recording`], [`format::Record`]), documented in
//!   `docs/recording-format.md`.
//! - [`syscalls`]: the shared system-call policy (what is trapped, what each call writes, how it is
//!   replayed: [`syscalls::Mode`]).
//! - [`machine`]: vDSO, AT_RANDOM, CPUID and RDTSC, prepared identically on both sides.
//! - [`rendezvous`]: the partial order of interactions through shared objects.
//! - [`recorder`] and [`replayer`], which mirror each other file for file (`syscall.rs`,
//!   `signal.rs`, `process.rs`), as hermit's recorder and replayer do: [`recorder::record`] and
//!   [`replayer::replay`].
//! - [`debugger`] and [`gdb`]: a debugger's hook in the replayer ("stop here / resume") and the
//!   GDB remote protocol server on it (`sightline replay --gdbserver`, docs/replay-gdb.md).
//! - [`Divergence`]: what a replay reports when the program does something other than what was
//!   recorded.
//!
//! - [`sched`]: threads, one at a time per process, with the schedule recorded, and forced sync
//!   points (a thread computing a whole time slice is interrupted and the point replayed with a
//!   hardware breakpoint), so spinning threads and signals to computing programs work.
//!
//! Scope: programs made of processes with any number of threads (`execve` from any of them
//! included). A recording that stopped early ([`recorder::RecordOutcome::incomplete`] says why;
//! the program keeps running, served in pass-through) fails to replay with
//! [`Error::Unsupported`].
//!
//! Going live ([`replayer::go_live`], `docs/replay-go-live.md`): replay to a point without a
//! seccomp filter, rebuild the kernel state there (fds, pipes, listening sockets, the recorded
//! pids in a pid namespace), restore the syscall buffer's patched sites, and detach.
#![deny(missing_docs)]

pub mod debugger;
pub mod files;
pub mod format;
pub mod gdb;
pub mod machine;
pub mod recorder;
pub mod rendezvous;
pub mod replayer;
pub mod sched;
pub mod syscallbuf;
pub mod syscalls;
pub mod trampoline;

use std::fmt;

/// Errors of recording and replaying.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ptrace boundary failed (the error names the system call and thread).
    #[error(transparent)]
    Ptrace(#[from] replay_ptrace::Error),
    /// A file of the recording could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The recording is malformed or of another version.
    #[error("bad recording: {0}")]
    Format(String),
    /// The recording stopped early (it cannot be written, an internal error), so it cannot be
    /// replayed.
    #[error("not yet supported: {0}")]
    Unsupported(String),
    /// The command could not be started.
    #[error("cannot run {command:?}: {reason}")]
    Command {
        /// The command.
        command: String,
        /// Why.
        reason: String,
    },
    /// The command to record names no file we can execute (execvp's `PATH` rules).
    #[error("finding the command to record")]
    Lookup(#[from] replay_ptrace::exec::LookupError),
    /// The debugger of a replay ended it (gdb's `kill`) or its connection failed.
    #[error("debugger: {0}")]
    Debugger(String),
    /// A debugger asked for the replay to start again from the beginning (reverse execution);
    /// handled inside [`replayer::replay_debugged`], never returned by it.
    #[error("the debugger restarts the replay")]
    Restart,
    /// A debugger asked for the program to go live where it is stopped (`monitor go-live`):
    /// thread `rec_tid` (recorded tid) had replayed `thread_events` events of its own. The
    /// debugged replay ends (its processes killed) and the caller goes live before that thread's
    /// next event ([`replayer::go_live_point`], docs/replay-gdb.md).
    #[error("the debugger asks to go live (thread {rec_tid}, after {thread_events} of its events)")]
    GoLive {
        /// Recorded tid of the thread the debugger stopped at.
        rec_tid: i32,
        /// Its events replayed so far.
        thread_events: usize,
    },
    /// The replay diverged from the recording.
    #[error("{0}")]
    Divergence(Box<Divergence>),
}

/// A replay that departed from its recording: which process, which event, what was expected and
/// what happened instead, and the last events that did match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Recorded pid of the process.
    pub pid: i32,
    /// Index of the event in that process's recorded sequence (from 0).
    pub index: usize,
    /// The recorded event (rendered).
    pub expected: String,
    /// What the replayed process did (rendered).
    pub found: String,
    /// The last matching events of that process, oldest first (rendered).
    pub last_matching: Vec<String>,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "replay diverged in process {} at event #{}",
            self.pid, self.index
        )?;
        writeln!(f, "  expected: {}", self.expected)?;
        writeln!(f, "  found:    {}", self.found)?;
        if self.last_matching.is_empty() {
            write!(f, "  (no earlier event of this process matched)")
        } else {
            write!(f, "  last matching events:")?;
            for e in &self.last_matching {
                write!(f, "\n    {e}")?;
            }
            Ok(())
        }
    }
}

/// Renders a recorded event for reports (`read(3, 0x7ffd…, 4096) = 120`).
pub fn describe(ev: &format::Event) -> String {
    use format::Event;
    match ev {
        Event::Syscall(s) => {
            let path = (!s.path.is_empty()).then_some(s.path.as_slice());
            let call = syscalls::format_call(s.nr, &s.args, path);
            match syscalls::errno_name(s.result) {
                Some(e) => format!("{call} = {} {e}", s.result),
                None => format!("{call} = {}", s.result),
            }
        }
        Event::Signal { signo, sync, .. } => {
            format!(
                "signal {} ({})",
                signo,
                if *sync { "synchronous" } else { "asynchronous" }
            )
        }
        Event::Rdtsc { aux, .. } => {
            if aux.is_some() {
                "rdtscp".into()
            } else {
                "rdtsc".into()
            }
        }
        Event::Cpuid { leaf, subleaf, .. } => format!("cpuid(leaf {leaf:#x}, subleaf {subleaf})"),
        Event::Exit { status, .. } => format!("exit (wait status {status:#x})"),
        Event::SyscallbufPatch { site, .. } => {
            format!("syscall-buffer patch of the site at {site:#x}")
        }
        Event::Switch { to, why } => {
            let at = match why {
                format::SwitchPoint::BlockingCall => "at a blocking call",
                format::SwitchPoint::AfterSyscall => "after a system call",
                format::SwitchPoint::SyncPoint => "at the sync point",
                format::SwitchPoint::Exit => "at its exit",
            };
            format!("switch to thread {to} ({at})")
        }
        Event::SyncPoint { sig, cpu_ns } => format!(
            "forced sync point at rip {:#x} (rsp {:#x}, stack hash {:#x}, {} µs of CPU)",
            sig.rip(),
            sig.regs[17],
            sig.stack_hash,
            cpu_ns / 1000
        ),
        Event::Buffered(recs) => {
            let names: Vec<String> = recs.iter().take(3).map(|r| syscalls::name(r.nr)).collect();
            let more = if recs.len() > 3 { ", ..." } else { "" };
            format!(
                "{} buffered system call(s): {}{more}",
                recs.len(),
                names.join(", ")
            )
        }
    }
}
