//! The recorder: runs a program under ptrace + seccomp and writes its nondeterministic inputs.
//!
//! Mirrors [`crate::replayer`] file for file: `syscall.rs` (trapped system calls at entry and exit),
//! `signal.rs` (signals and trapped instructions), `process.rs` (fork, exec, exit).
//!
//! The loop waits for any tracee's stop, hands it to the matching handler and resumes it. Every
//! tracee is resumed by the end of each handler; none is ever left stopped. If recording cannot go
//! on (an internal error), the recorder switches to *pass-through*: it keeps serving the
//! tracees (their trapped system calls run unchanged, trapped instructions are still emulated) until
//! they exit, so the program is never harmed, and the recording is marked incomplete.
//!
//! Threads are serialized (`crate::sched`): each process has a group whose holder alone runs
//! user code; a stop of another thread waits, unprocessed, in the group's queue until the holder
//! gives the right up, and a timer (`replay_ptrace::start_ticks`) lets the loop interrupt a holder
//! that computes a whole time slice while another thread waits or a signal is held for it.

mod files;
mod process;
mod signal;
mod syscall;

use std::collections::{HashMap, VecDeque};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use replay_ptrace::{Regs, Resume, Running, SpawnSpec, Stopped, WaitKind};

use crate::Error;
use crate::format::{Event, Meta, Record, Rendezvous, SwitchPoint, Writer, WriterStats};
use crate::rendezvous::Counters;

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The recording directory to create.
    pub dir: PathBuf,
    /// The command and its arguments (`argv[0]` is looked up in `PATH`).
    pub command: Vec<String>,
}

/// How a recording went.
#[derive(Debug, Clone)]
pub struct RecordOutcome {
    /// Where the recording is.
    pub dir: PathBuf,
    /// The first process's exit code (128 + signal number when killed by a signal).
    pub exit_code: i32,
    /// Events written.
    pub events: u64,
    /// Processes seen.
    pub processes: usize,
    /// Sizes written.
    pub stats: WriterStats,
    /// Set when recording stopped early (the recording is then a prefix); the program still ran to
    /// its end.
    pub incomplete: Option<String>,
    /// Threads started by the recorded processes (`clone` with `CLONE_THREAD`).
    pub threads: usize,
    /// Changes of the running thread recorded ([`Event::Switch`]).
    pub switches: u64,
    /// Forced sync points recorded ([`Event::SyncPoint`]).
    pub sync_points: u64,
}

/// Ticks a held asynchronous signal may wait before its thread is interrupted for a forced sync
/// point whatever CPU time it got. Off (`None`): with it (4 ticks), points came often right after
/// a buffered call, where rcx and r11 still hold what the syscall-buffer handler's record path
/// left (its replay path makes no `syscall`), so replay never matched the point
/// (`sigalrm_while_the_syscall_buffer_handler_is_mid_record` failed 5 runs in 10). Until the
/// handler leaves the same registers on both paths, a timer signal on a machine at load 15+ can
/// wait long for its point (NOTES.md, session 5).
const SIGNAL_WAIT_TICKS: Option<u32> = Some(4);

/// Per-process recorder state.
#[derive(Debug, Default)]
struct Proc {
    /// The tracee while it runs (`None` while a handler holds it stopped).
    thread: Option<Running>,
    /// The system call between its seccomp stop and its exit stop.
    pending: Option<syscall::Pending>,
    /// Registers at the last syscall-exit stop, cleared by any other stop: a signal-delivery-stop
    /// with exactly these registers happens before the program ran another instruction.
    last_exit_regs: Option<Regs>,
    /// Asynchronous signals held until the next system call (a sync point).
    held: VecDeque<(i32, Box<[u8; 128]>)>,
    /// A held signal re-raised at a sync point, awaiting its delivery stop.
    releasing: Option<(i32, Box<[u8; 128]>)>,
    /// The call that returned `-ERESTART_RESTARTBLOCK`, which a later `restart_syscall` continues.
    restart_of: Option<(i64, [u64; 6])>,
    /// Syscall buffering failed in this image (its region could not be mapped): patch nothing more
    /// until the next `execve`.
    sysbuf_off: bool,
    /// The thread group (process) this thread belongs to: its leader's tid.
    tgid: i32,
    /// The scheduling group ([`Group`]) it runs in, by key: its process's tgid, or, for a process
    /// forked while its parent shared writable memory (`crate::sched::shares_writable_memory`),
    /// the parent's group (0: not set, the same as `tgid`).
    group: i32,
    /// `PTRACE_INTERRUPT` was sent and its stop not yet seen.
    interrupting: bool,
    /// A seccomp stop arrived while interrupting: the call was rewound to run again after the
    /// interrupt stop, which is then no sync point.
    retry_entry: bool,
    /// Ticks seen while this thread ran without a stop (a forced sync point needs one full tick).
    ticks: u32,
    /// Its process's CPU time when this thread was last resumed (ns), for [`Event::SyncPoint`].
    cpu_at_resume: u64,
    /// Ticks a held signal has waited for this thread's next sync point (not reset by stops).
    signal_wait_ticks: u32,
    /// Interrupts in a row that found this thread where no patchable point could be reached
    /// ([`crate::sched::UNPATCHABLE_TRIES`]).
    unpatchable_tries: u32,
    /// It vanished while a stop of it was being processed (SIGKILL, often another thread's
    /// exit_group): nothing more of it is recorded.
    killed: bool,
    /// Its exit stop (`PTRACE_EVENT_EXIT`) was seen.
    exit_seen: bool,
    /// A thread group leader that started another thread (it stays set after they end).
    had_threads: bool,
}

/// The scheduler state of one process, or of processes that share writable memory
/// (`crate::sched`), keyed by the tgid of the first.
#[derive(Debug, Default)]
struct Group {
    /// The thread allowed to run user code (`None`: free, the next thread to stop takes it).
    holder: Option<i32>,
    /// The last holder: a [`Event::Switch`] is recorded in its stream.
    last: i32,
    /// Threads waiting for the right, in arrival order, with the stop not yet processed.
    waiting: VecDeque<(Stopped, WaitKind)>,
    /// A second thread was started, or a process joined: the schedule is recorded from then on.
    threaded: bool,
    /// A thread (not the leader) past its exit stop: nobody runs until its death is reaped, so its
    /// kernel-side exit work (`CLONE_CHILD_CLEARTID`, robust futexes) is done first.
    exiting: Option<i32>,
    /// Where the last holder gave the right up (recorded with the next switch).
    why: SwitchPoint,
    /// Ticks since the holder took the right: from one on, it yields at its next system call's
    /// exit when another thread waits.
    held_ticks: u32,
}

/// What an fd refers to, for rendezvous and output detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FdInfo {
    /// Rendezvous object, for pipes, sockets, FIFOs, character devices and our stdout/stderr.
    obj: Option<u64>,
    /// 1 or 2 when it is Sightline's stdout or stderr.
    out: u8,
}

struct Recorder {
    w: Writer,
    /// The process whose write to Sightline's stdout/stderr is running (between its seccomp stop and
    /// its exit stop), and the processes held at the seccomp stop of theirs until it is done.
    ///
    /// # Why?
    /// When two processes write to one terminal at the same time, both exit stops can be pending and
    /// `waitpid(-1)` reports them in child-list order, not in the order the kernel wrote the bytes:
    /// the recorded rendezvous order (and so the replayed interleaving) could differ from what the
    /// user saw. Running output writes one at a time makes the exit-stop order the real one.
    output_inflight: Option<i32>,
    /// Syscall buffering on (`SIGHTLINE_SYSCALLBUF` is not `0`), read once at the start.
    syscallbuf: bool,
    output_waiting: VecDeque<(Stopped, Resume, i32)>,
    procs: HashMap<i32, Proc>,
    counters: Counters,
    stdout_id: Option<(u64, u64)>,
    stderr_id: Option<(u64, u64)>,
    root: i32,
    root_exit: Option<i32>,
    passthrough: Option<String>,
    cpuid_faulting: bool,
    seen_processes: usize,
    debug: bool,
    interrupts: u32,
    groups: HashMap<i32, Group>,
    /// A handler asks for the holder to give up the right once its thread is resumed.
    release: bool,
    /// A handler asks for the holder to give up the right and wait, stopped, for its next turn
    /// (a forced sync point that switches threads).
    yield_now: bool,
    threads: usize,
    switches: u64,
    sync_points: u64,
    /// The time slice (`crate::sched::time_slice_ns`).
    slice_ns: u64,
    /// Mapped files kept in the recording (`files.rs`).
    files: files::MappedFiles,
    /// The system calls whose refusal ("io_uring disabled", `sendfile` into our own output) was
    /// said ([`Recorder::syscall_entry`]).
    refusals_said: std::collections::HashSet<i64>,
    /// Legacy ioctl requests whose outputs are not modelled, said once each.
    unmodelled_ioctls: std::collections::HashSet<u32>,
    /// System calls without a description, said once each ([`Recorder::unmodelled_call`]).
    unmodelled_calls: std::collections::HashSet<i64>,
    /// Processes (tgids) that started a thread: their syscall buffering is off from then on.
    threaded_procs: std::collections::HashSet<i32>,
    /// Parents (tids) whose pending fork made a child that joined their group: the fork's record
    /// says so ([`crate::sched::JOINED`]).
    joined_forks: std::collections::HashSet<i32>,
    /// First stops of new processes and threads whose parent's fork or clone event was not
    /// processed yet: held (a thread, or a process about to join the parent's group, must wait
    /// for its turn) until it is.
    newborn: HashMap<i32, (Stopped, WaitKind)>,
    /// Stops to process once the current one is done (newborns released by their fork event).
    deferred: Vec<(Stopped, WaitKind)>,
    /// Threads recorded under another tid than their own: a process whose thread (not its
    /// leader) ran `execve` goes on, under the leader's tid, in that thread's stream (live tid
    /// → recorded stream id; [`Recorder::exec_takes_over`]).
    renamed: HashMap<i32, i32>,
    /// Processes (tgids) whose holder is exiting with the whole process (`exit_group`, a fatal
    /// signal): the kernel kills their other threads, so none of them gets the right to run
    /// again (a thread whose blocking call completed would otherwise have that call recorded,
    /// then die before its user code saw it; [`Recorder::on_exit`]).
    dying: std::collections::HashSet<i32>,
}

/// `execvp`'s fallback for a file the kernel cannot execute (ENOEXEC: no `#!` line, not ELF): it runs
/// as a `/bin/sh` script (POSIX `exec`, "the shell shall be invoked as if … sh"; glibc's
/// `maybe_script_execute`). Returns the executable and argv to record.
pub fn script_fallback(path: &Path, argv: &[String]) -> (PathBuf, Vec<String>) {
    use std::io::Read;
    let mut head = [0u8; 4];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let runnable = (n >= 2 && head[..2] == *b"#!") || (n == 4 && head == *b"\x7fELF");
    if runnable || n == 0 && std::fs::metadata(path).is_err() {
        return (path.to_path_buf(), argv.to_vec());
    }
    let mut sh_argv = vec!["/bin/sh".to_string(), path.display().to_string()];
    sh_argv.extend(argv.iter().skip(1).cloned());
    (PathBuf::from("/bin/sh"), sh_argv)
}

fn identity(path: &str) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Records `opts.command` into `opts.dir`. The program's stdin, stdout and stderr are Sightline's.
/// Returns after every recorded process has exited.
///
/// Errors: an empty command ([`Error::Command`]), a command that names no executable file
/// ([`Error::Lookup`]: execvp's `PATH` rules, `replay_ptrace::exec`), the directory cannot be written
/// ([`Error::Io`]), the tracee cannot be started ([`Error::Ptrace`]). Problems after the start do not
/// stop the program: they end the recording early ([`RecordOutcome::incomplete`]).
pub fn record(opts: &RecordOptions) -> Result<RecordOutcome, Error> {
    let cmd = opts.command.first().ok_or_else(|| Error::Command {
        command: String::new(),
        reason: "empty command".into(),
    })?;
    let path = replay_ptrace::exec::find_executable(cmd)?;
    let (path, argv) = script_fallback(&path, &opts.command);
    let cwd = std::env::current_dir()
        .map_err(|source| Error::Io {
            path: ".".into(),
            source,
        })?
        .display()
        .to_string();
    let env: Vec<String> = std::env::vars_os()
        .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
        .collect();
    let meta = Meta {
        version: crate::format::FORMAT_VERSION,
        path: path.display().to_string(),
        argv,
        env,
        cwd,
        root_pid: 0,
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        cpuid_faulting: false,
        status: "recording".into(),
        exit_code: None,
        ignored_signals: replay_ptrace::ignored_signals(),
    };
    let spec = SpawnSpec {
        path: meta.path.clone(),
        argv: meta.argv.clone(),
        env: meta.env.clone(),
        cwd: meta.cwd.clone(),
        cpu: None,
        no_aslr: true,
        stdio_null: false,
        exit_kill: true,
        filter: Some(crate::syscalls::filter()),
        ignored_signals: meta.ignored_signals.clone(),
        overlays: Vec::new(),
        binds: Vec::new(),
        pid: None,
    };
    let mut w = Writer::create(&opts.dir, meta)?;
    replay_ptrace::forward_signal_handlers()?;
    let root = replay_ptrace::spawn(&spec)?;
    let root_pid = root.tid();
    w.meta_mut().root_pid = root_pid;
    if let Err(e) = w.save_meta() {
        // The program runs already: keep recording; only a crash would leave root_pid unset.
        eprintln!("sightline: {e}");
    }
    let mut r = Recorder {
        w,
        procs: HashMap::new(),
        counters: Counters::default(),
        stdout_id: identity("/proc/self/fd/1"),
        stderr_id: identity("/proc/self/fd/2"),
        root: root_pid,
        root_exit: None,
        passthrough: None,
        cpuid_faulting: false,
        seen_processes: 1,
        debug: std::env::var_os("SIGHTLINE_DEBUG").is_some(),
        interrupts: 0,
        output_inflight: None,
        syscallbuf: crate::syscallbuf::enabled(),
        output_waiting: VecDeque::new(),
        groups: HashMap::new(),
        release: false,
        yield_now: false,
        threads: 0,
        switches: 0,
        sync_points: 0,
        slice_ns: crate::sched::time_slice_ns(),
        files: files::MappedFiles::new(&opts.dir),
        refusals_said: std::collections::HashSet::new(),
        unmodelled_ioctls: std::collections::HashSet::new(),
        unmodelled_calls: std::collections::HashSet::new(),
        threaded_procs: std::collections::HashSet::new(),
        joined_forks: std::collections::HashSet::new(),
        newborn: HashMap::new(),
        deferred: Vec::new(),
        renamed: HashMap::new(),
        dying: std::collections::HashSet::new(),
    };
    r.procs.insert(
        root_pid,
        Proc {
            thread: Some(root),
            tgid: root_pid,
            group: root_pid,
            ..Proc::default()
        },
    );
    r.groups.insert(
        root_pid,
        Group {
            holder: Some(root_pid),
            last: root_pid,
            ..Group::default()
        },
    );
    // The timer behind forced sync points; without it recording still works, but a thread that
    // computes while another waits is not preempted.
    let ticker = match replay_ptrace::start_ticks(crate::sched::time_slice_ns()) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("sightline: no forced sync points: {e}");
            None
        }
    };
    // Same TSC mode as the tracees: no CR4 rewrite (a VM exit) on each switch to and from them.
    if let Err(e) = replay_ptrace::trap_own_rdtsc()
        && r.debug
    {
        eprintln!("sightline: tracer runs with its TSC enabled: {e}");
    }
    // Same CPUID faulting as the tracees: no MSR write (a VM exit, ~9 us here) on each switch
    // either (docs/replay-performance.md). `SIGHTLINE_TRACER_CPUID=0` turns it off. (It was
    // opt-in until the race in the schedule of processes joined by a shared file, which the
    // faster stops exposed, was fixed by rendezvous points on shared-mapped files.)
    if std::env::var_os("SIGHTLINE_TRACER_CPUID").is_none_or(|v| v != "0")
        && let Err(e) = replay_ptrace::trap_own_cpuid()
        && r.debug
    {
        eprintln!("sightline: tracer runs without CPUID faulting: {e}");
    }
    r.run();
    drop(ticker);
    replay_ptrace::untrap_own_rdtsc();
    replay_ptrace::untrap_own_cpuid();
    let exit_code = r.root_exit.unwrap_or(0);
    let events = r.w.events;
    let processes = r.counters_processes();
    let incomplete = r.passthrough.clone();
    {
        let m = r.w.meta_mut();
        m.exit_code = Some(exit_code);
        m.cpuid_faulting = r.cpuid_faulting;
        m.status = match &incomplete {
            None => "complete".into(),
            Some(why) => format!("unsupported: {why}"),
        };
    }
    let stats = r.w.finish()?;
    Ok(RecordOutcome {
        dir: opts.dir.clone(),
        exit_code,
        events,
        processes,
        stats,
        incomplete,
        threads: r.threads,
        switches: r.switches,
        sync_points: r.sync_points,
    })
}

impl Recorder {
    fn counters_processes(&self) -> usize {
        self.seen_processes
    }

    /// The event loop; returns when no tracee is left.
    fn run(&mut self) {
        loop {
            if let Some((sig, from_tty)) = replay_ptrace::take_pending_signal() {
                // A terminal's Ctrl-C reached the whole foreground group, tracees included; any other
                // sender only reached us, so pass it on to the first process.
                if !from_tty && self.root_exit.is_none() {
                    let _ = replay_ptrace::tgkill(self.root, self.root, sig);
                }
                // A second interrupt while a signal is still held means the program computes
                // without system calls and cannot reach a sync point: stop recording so the held
                // signals are delivered now, as they would be natively.
                self.interrupts += 1;
                if self.interrupts >= 2 && self.procs.values().any(|p| !p.held.is_empty()) {
                    self.stop_recording(
                        "interrupted while a signal waited for a sync point".into(),
                    );
                }
            }
            if replay_ptrace::take_tick() {
                self.on_tick();
                // Durable recordings: no record waits more than the chunk age for the file, even
                // while no event comes.
                if let Err(e) = self.w.flush_if_old() {
                    self.stop_recording(format!("cannot write the recording: {e}"));
                }
            }
            let ev = match replay_ptrace::wait_any() {
                Ok(Some(ev)) => ev,
                Ok(None) => continue,
                Err(_) => return, // ECHILD: every tracee is gone
            };
            let key = self.group_of(ev.tid);
            // A thread that waited for the right and reports again (the SIGKILL of a group exit
            // woke it): its old stop is gone.
            if let Some(g) = self.groups.get_mut(&key) {
                g.waiting.retain(|(t, _)| t.tid() != ev.tid);
            }
            match ev.kind {
                WaitKind::Exited(code) => {
                    self.newborn.remove(&ev.tid);
                    self.on_death(ev.tid, key);
                    if ev.tid == self.root {
                        self.root_exit = Some(code);
                    }
                    continue;
                }
                WaitKind::Signaled(sig) => {
                    self.newborn.remove(&ev.tid);
                    self.exit_without_stop(ev.tid, sig);
                    self.on_death(ev.tid, key);
                    if ev.tid == self.root {
                        self.root_exit = Some(128 + sig);
                    }
                    continue;
                }
                _ => {}
            }
            if self.debug {
                eprintln!("[record] tid {} {:?}", ev.tid, ev.kind);
            }
            if !self.procs.contains_key(&ev.tid) && self.passthrough.is_none() {
                // A forked child or a new thread before its parent's fork or clone event: it
                // waits for that event, which decides its group. (A new thread let through here
                // made a group of its own and ran at once, beside the holder: its first reads of
                // shared memory came before the holder's writes, which replay then reproduced
                // the other way round; `sh -c` of the futex hand-off bench diverged 1 in 3.)
                let stopped = Running::attached(ev.tid).into_stopped(&ev);
                self.newborn.insert(ev.tid, (stopped, ev.kind));
                continue;
            }
            let proc = self.procs.entry(ev.tid).or_insert_with(|| Proc {
                tgid: key,
                group: key,
                ..Proc::default()
            });
            proc.ticks = 0;
            let running = proc
                .thread
                .take()
                .unwrap_or_else(|| Running::attached(ev.tid));
            let stopped = running.into_stopped(&ev);
            if ev.kind == WaitKind::Event(replay_ptrace::PtraceEvent::Exec) {
                self.exec_takes_over(&stopped);
            }
            self.process_stop(stopped, ev.kind);
            while let Some((t, kind)) = self.deferred.pop() {
                self.process_stop(t, kind);
            }
        }
    }

    /// The recorded stream of live thread `tid`: its own tid, or the tid of the thread whose
    /// `execve` it continues ([`Recorder::renamed`]).
    fn stream_id(&self, tid: i32) -> i32 {
        self.renamed.get(&tid).copied().unwrap_or(tid)
    }

    /// At `PTRACE_EVENT_EXEC`: when a thread other than the leader ran the `execve`, the kernel
    /// has killed every other thread (the leader included, which reports no death) and the
    /// exec'ing thread now has the leader's tid (ptrace(2), "execve(2) under ptrace"; the former
    /// tid is the event message). Its state moves to the leader's tid, and its records go on in
    /// its own stream, so replay follows one thread through the call.
    fn exec_takes_over(&mut self, t: &Stopped) {
        let tid = t.tid();
        let Ok(former) = t.event_msg().map(|m| m as i32) else {
            return;
        };
        if former == tid || former <= 0 {
            return;
        }
        let key = self.group_of(former);
        let Some(mut p) = self.procs.remove(&former) else {
            return;
        };
        if self.debug {
            eprintln!("[record] thread {former} ran execve: it is now {tid}");
        }
        p.thread = None;
        self.procs.insert(tid, p);
        let stream = self.stream_id(former);
        self.renamed.remove(&former);
        self.renamed.insert(tid, stream);
        if let Some(g) = self.groups.get_mut(&key) {
            if g.holder == Some(former) {
                g.holder = Some(tid);
            }
            if g.last == former {
                g.last = tid;
            }
            if g.exiting == Some(former) {
                g.exiting = None;
            }
            g.waiting
                .retain(|(w, _)| w.tid() != former && w.tid() != tid);
        }
        if self.output_inflight == Some(former) {
            self.output_inflight = Some(tid);
        }
    }

    /// The scheduling group of thread `tid` (its key: see [`Proc::group`]).
    fn group_of(&self, tid: i32) -> i32 {
        self.procs
            .get(&tid)
            .map_or(tid, |p| match (p.group, p.tgid) {
                (0, 0) => tid,
                (0, t) => t,
                (g, _) => g,
            })
    }

    /// Processes a stop of a known thread now, or queues it until its thread has the right to run.
    fn process_stop(&mut self, mut stopped: Stopped, kind: WaitKind) {
        let tid = stopped.tid();
        if kind == WaitKind::Event(replay_ptrace::PtraceEvent::Seccomp)
            && self.passthrough.is_none()
        {
            self.join_by_file(&mut stopped);
        }
        let key = self.group_of(tid);
        if !self.may_run(key, tid, kind) {
            if self.debug {
                eprintln!("[record] tid {tid} waits for its turn");
            }
            let g = self.groups.entry(key).or_default();
            g.waiting.push_back((stopped, kind));
            return;
        }
        self.handle(stopped, kind);
        self.schedule(key);
    }

    /// Whether thread `tid` of process `tgid` may have its stop `kind` processed now: it holds the
    /// right to run, or takes it because it is free (recording the switch). Exit stops of threads
    /// killed by another thread's exit need no right.
    fn may_run(&mut self, tgid: i32, tid: i32, kind: WaitKind) -> bool {
        let passthrough = self.passthrough.is_some();
        // The exit of a process that joined another's group waits for its turn like any stop: it
        // is that process's own end, not a kill by another thread's exit_group.
        let member_exit = self
            .procs
            .get(&tid)
            .is_some_and(|p| p.tgid == tid && p.group != 0 && p.group != tid);
        let g = self.groups.entry(tgid).or_insert_with(|| Group {
            holder: Some(tid),
            last: tid,
            ..Group::default()
        });
        if g.holder == Some(tid) || passthrough {
            return true;
        }
        if !g.threaded {
            g.holder = Some(tid);
            g.last = tid;
            return true;
        }
        if kind == WaitKind::Event(replay_ptrace::PtraceEvent::Exit) && !member_exit {
            return true;
        }
        if g.holder.is_none() && g.exiting.is_none() && g.waiting.is_empty() && !self.is_dying(tid)
        {
            self.take_right(tgid, tid);
            return true;
        }
        false
    }

    /// True when thread `tid`'s process is ending as a whole ([`Recorder::dying`]).
    fn is_dying(&self, tid: i32) -> bool {
        !self.dying.is_empty()
            && self
                .procs
                .get(&tid)
                .is_some_and(|p| self.dying.contains(&p.tgid))
    }

    /// Gives the right to run in `tgid` to `tid`, recording the switch in the last holder's stream.
    fn take_right(&mut self, tgid: i32, tid: i32) {
        let Some(g) = self.groups.get_mut(&tgid) else {
            return;
        };
        g.holder = Some(tid);
        g.held_ticks = 0;
        let why = g.why;
        let last = std::mem::replace(&mut g.last, tid);
        if last != tid && g.threaded {
            self.switches += 1;
            if self.debug {
                eprintln!("[record] switch {last} -> {tid}");
            }
            let to = self.stream_id(tid);
            if let Err(e) = self.emit(last, Event::Switch { to, why }) {
                self.stop_recording(format!("internal error: {e}"));
            }
        }
    }

    /// While the right to run in `tgid` is free, hands it to the first waiting thread and processes
    /// that thread's stop.
    fn schedule(&mut self, tgid: i32) {
        loop {
            let Some(g) = self.groups.get_mut(&tgid) else {
                return;
            };
            if g.holder.is_some() || g.exiting.is_some() {
                return;
            }
            // Threads of a process that is ending as a whole wait until their kill reports them.
            let next = if self.dying.is_empty() {
                (!g.waiting.is_empty()).then_some(0)
            } else {
                g.waiting.iter().position(|(t, _)| {
                    self.procs
                        .get(&t.tid())
                        .is_none_or(|p| !self.dying.contains(&p.tgid))
                })
            };
            let Some((t, kind)) = next.and_then(|i| g.waiting.remove(i)) else {
                return;
            };
            self.take_right(tgid, t.tid());
            self.handle(t, kind);
        }
    }

    /// A thread is gone: its process's bookkeeping, and the right to run passes on.
    fn on_death(&mut self, tid: i32, tgid: i32) {
        if self.procs.remove(&tid).is_some_and(|p| p.tgid == tid) {
            self.dying.remove(&tid);
        }
        self.renamed.remove(&tid);
        self.output_done(tid);
        if let Some(g) = self.groups.get_mut(&tgid) {
            if g.holder == Some(tid) {
                g.holder = None;
                g.why = SwitchPoint::Exit;
            }
            if g.exiting == Some(tid) {
                g.exiting = None;
            }
        }
        self.schedule(tgid);
    }

    /// Processes one stop of a thread that may run, then resumes it (or holds it for output order),
    /// and gives the right up when the handler asked for it.
    fn handle(&mut self, stopped: Stopped, kind: WaitKind) {
        let tid = stopped.tid();
        self.release = false;
        self.yield_now = false;
        let events_before = self.w.events;
        let result = if self.passthrough.is_some() {
            self.passthrough_stop(kind, stopped)
        } else {
            self.on_stop(kind, stopped)
        };
        let (stopped, how, sig) = match result {
            Ok(x) => x,
            Err(boxed) => {
                let (stopped, err) = *boxed;
                if err.is_gone() {
                    // Killed under us (the SIGKILL of a group exit wakes a stopped thread): its
                    // exit stop, if one comes, is not its own, and the right passes on.
                    let tgid = self.group_of(tid);
                    if let Some(p) = self.procs.get_mut(&tid) {
                        p.killed = true;
                    }
                    if let Some(g) = self.groups.get_mut(&tgid)
                        && g.holder == Some(tid)
                    {
                        g.holder = None;
                        g.why = SwitchPoint::Exit;
                    }
                    return;
                }
                self.stop_recording(format!("internal error: {err}"));
                let Some(stopped) = stopped else { return };
                (stopped, Resume::Cont, 0)
            }
        };
        let tgid = self.group_of(tid);
        let threaded = self.groups.get(&tgid).is_some_and(|g| g.threaded);
        // A whole slice held with others waiting: yield right after this system call.
        let slice_over = threaded
            && kind == WaitKind::SyscallStop
            && how == Resume::Cont
            && self.w.events > events_before
            && self.passthrough.is_none()
            && self.groups.get(&tgid).is_some_and(|g| {
                g.holder == Some(tid) && g.held_ticks >= 1 && !g.waiting.is_empty()
            });
        if slice_over && let Some(g) = self.groups.get_mut(&tgid) {
            g.why = SwitchPoint::AfterSyscall;
            self.yield_now = true;
        }
        if std::mem::take(&mut self.yield_now)
            && let Some(g) = self.groups.get_mut(&tgid)
        {
            // Back of the queue, in user mode: resumed (plainly) when its turn comes again.
            g.holder = None;
            let again = WaitKind::Event(replay_ptrace::PtraceEvent::Stop(libc::SIGTRAP));
            g.waiting.push_back((stopped, again));
            return;
        }
        let blocking = threaded
            && how == Resume::Syscall
            && self
                .procs
                .get(&tid)
                .and_then(|p| p.pending.as_ref())
                .is_some_and(|p| p.may_block());
        let release = (std::mem::take(&mut self.release) || blocking) && threaded;
        // An output write's exit stop (or anything that ended it) lets the next one run.
        if self.output_inflight == Some(tid)
            && self.procs.get(&tid).is_none_or(|p| p.pending.is_none())
        {
            self.output_done(tid);
        }
        let is_output = how == Resume::Syscall
            && self.passthrough.is_none()
            && self
                .procs
                .get(&tid)
                .and_then(|p| p.pending.as_ref())
                .is_some_and(|p| p.is_output());
        let mut stopped = Some(stopped);
        if is_output {
            match self.output_inflight {
                Some(other) if other != tid => {
                    let t = stopped.take().expect("held once");
                    self.output_waiting.push_back((t, how, sig));
                }
                _ => self.output_inflight = Some(tid),
            }
        }
        if let Some(t) = stopped {
            self.resume(t, how, sig);
        }
        if release && let Some(g) = self.groups.get_mut(&tgid) {
            if g.holder == Some(tid) {
                g.holder = None;
                g.why = if blocking {
                    SwitchPoint::BlockingCall
                } else {
                    SwitchPoint::Exit
                };
            }
            if self.debug {
                eprintln!("[record] tid {tid} gives up the right to run");
            }
        }
    }

    /// A timer tick: interrupts each holder that ran a whole tick without a stop while another
    /// thread of its process waits or a signal is held for it (a forced sync point follows).
    fn on_tick(&mut self) {
        if self.passthrough.is_some() {
            return;
        }
        let mut stuck = Vec::new();
        let slice_ns = self.slice_ns;
        for (&key, g) in self.groups.iter_mut() {
            g.held_ticks = g.held_ticks.saturating_add(1);
            let Some(h) = g.holder else { continue };
            let Some(p) = self.procs.get_mut(&h) else {
                continue;
            };
            if p.pending.as_ref().is_some_and(|c| !c.is_exec())
                && g.threaded
                && !g.waiting.is_empty()
            {
                // Two ticks in a call not known to block, while another thread waits: it blocks
                // after all (an unlisted call, a FIFO open): give the right up as if it may.
                p.ticks += 1;
                if p.ticks >= 2 {
                    stuck.push(key);
                }
                continue;
            }
            let signal_waits = !p.held.is_empty() && p.releasing.is_none();
            p.signal_wait_ticks = if signal_waits {
                p.signal_wait_ticks.saturating_add(1)
            } else {
                0
            };
            let wanted = (g.threaded && !g.waiting.is_empty()) || signal_waits;
            if !wanted || p.interrupting || p.pending.is_some() || g.exiting.is_some() {
                continue;
            }
            let Some(r) = &p.thread else { continue };
            p.ticks += 1;
            // A slice is CPU time (a loaded machine does not preempt more), checked at ticks; after
            // 20 ticks of wall time the holder is interrupted anyway (it may get no CPU at all).
            let ran = replay_ptrace::process_cpu_ns(p.tgid)
                .unwrap_or(u64::MAX)
                .saturating_sub(p.cpu_at_resume);
            // A held signal that waited SIGNAL_WAIT_TICKS ticks interrupts at once: the stops of
            // a frequent timer signal (each held, each resetting `ticks` and the CPU count)
            // would otherwise keep a loaded machine's thread from ever reaching a slice.
            let overdue = SIGNAL_WAIT_TICKS.is_some_and(|n| p.signal_wait_ticks >= n);
            if !overdue && (p.ticks < 2 || (ran < slice_ns && p.ticks < 20)) {
                continue;
            }
            if r.interrupt().is_ok() {
                p.interrupting = true;
            }
        }
        for tgid in stuck {
            if let Some(g) = self.groups.get_mut(&tgid) {
                g.holder = None;
                g.why = SwitchPoint::BlockingCall;
            }
            self.schedule(tgid);
        }
    }

    fn resume(&mut self, stopped: Stopped, how: Resume, sig: i32) {
        let tid = stopped.tid();
        if how == Resume::Cont
            && let Some(p) = self.procs.get_mut(&tid)
        {
            p.cpu_at_resume = replay_ptrace::process_cpu_ns(p.tgid).unwrap_or(0);
        }
        match stopped.resume(how, sig) {
            Ok(r) => {
                if let Some(p) = self.procs.get_mut(&tid) {
                    p.thread = Some(r);
                }
            }
            Err(e) if e.is_tracee_gone() => {}
            Err(e) => {
                // Cannot happen for a live stopped tracee; keep serving the others.
                eprintln!("sightline: resuming tracee {tid}: {e}");
            }
        }
    }

    /// The output write of `tid` is over (or `tid` is gone): start the next held one, if any.
    fn output_done(&mut self, tid: i32) {
        if self.output_inflight != Some(tid) {
            return;
        }
        self.output_inflight = None;
        while let Some((t, how, sig)) = self.output_waiting.pop_front() {
            let next = t.tid();
            if !self.procs.contains_key(&next) {
                continue; // died while held
            }
            self.output_inflight = Some(next);
            self.resume(t, how, sig);
            break;
        }
    }

    /// Dispatches one stop while recording.
    fn on_stop(&mut self, kind: WaitKind, t: Stopped) -> StopResult {
        use replay_ptrace::PtraceEvent as E;
        match kind {
            WaitKind::Event(E::Seccomp) => self.syscall_entry(t),
            WaitKind::SyscallStop => self.syscall_exit(t),
            WaitKind::Event(E::Fork | E::Vfork | E::Clone) => self.on_new_child(t),
            WaitKind::Event(E::Exit) => match self.drain_sysbuf(&t) {
                Ok(()) => self.on_exit(t),
                Err(e) => Err(Box::new((Some(t), e))),
            },
            WaitKind::Signal(sig) => match self.drain_sysbuf(&t) {
                Ok(()) => self.on_signal(t, sig),
                Err(e) => Err(Box::new((Some(t), e))),
            },
            WaitKind::Event(E::Stop(libc::SIGTRAP))
                if self.procs.get(&t.tid()).is_some_and(|p| p.interrupting) =>
            {
                self.on_interrupt(t)
            }
            WaitKind::Event(E::Stop(sig)) if is_stop_signal(sig) => Ok((t, Resume::Listen, 0)),
            WaitKind::Event(E::Exec) => {
                if let Some(p) = self.procs.get_mut(&t.tid()) {
                    p.sysbuf_off = false;
                }
                let how = self.resume_how(t.tid());
                Ok((t, how, 0))
            }
            WaitKind::Event(E::VforkDone | E::Stop(_)) => {
                let how = self.resume_how(t.tid());
                Ok((t, how, 0))
            }
            WaitKind::Exited(_) | WaitKind::Signaled(_) => {
                unreachable!("deaths are handled by run")
            }
        }
    }

    /// Resumes with `PTRACE_SYSCALL` while a system call awaits its exit stop.
    fn resume_how(&self, tid: i32) -> Resume {
        match self.procs.get(&tid) {
            Some(p) if p.pending.is_some() => Resume::Syscall,
            _ => Resume::Cont,
        }
    }

    fn emit(&mut self, pid: i32, event: Event) -> Result<(), Error> {
        let pid = self.stream_id(pid);
        *self.files.emitted.entry(pid).or_default() += 1;
        // A process's start, new image and end reach the file at once.
        let milestone = match &event {
            Event::Exit { .. } => true,
            Event::Syscall(e) => {
                matches!(
                    e.nr,
                    libc::SYS_execve | libc::SYS_execveat | libc::SYS_fork | libc::SYS_vfork
                ) || (e.nr == libc::SYS_clone && e.args[0] & crate::sched::CLONE_THREAD == 0)
            }
            _ => false,
        };
        self.w.push(&Record { pid, event })?;
        if milestone {
            self.w.flush()?;
        }
        Ok(())
    }

    /// Records the calls the tracee's syscall-buffering handler made since its last stop (before
    /// any other event of this stop, so they keep their place).
    fn drain_sysbuf(&mut self, t: &Stopped) -> Result<(), Error> {
        let tgid = self.procs.get(&t.tid()).map_or(t.tid(), |p| p.tgid);
        if !self.sysbuf_live(tgid) {
            return Ok(());
        }
        let recs = crate::syscallbuf::drain(t)?;
        if !recs.is_empty() {
            self.emit(t.tid(), Event::Buffered(recs))?;
        }
        Ok(())
    }

    /// False once process `tgid` started a thread: its syscall buffer was drained and switched
    /// off at that `clone` and holds nothing more (the handler traps every call).
    fn sysbuf_live(&self, tgid: i32) -> bool {
        self.syscallbuf && !self.threaded_procs.contains(&tgid)
    }

    fn next_rdv(&mut self, obj: u64) -> Rendezvous {
        self.counters.next(obj)
    }

    /// Stops recording (the program goes on, served in pass-through). Held signals are released.
    fn stop_recording(&mut self, why: String) {
        if self.passthrough.is_none() {
            eprintln!("sightline: recording stopped: {why}; the program continues unrecorded");
            self.passthrough = Some(why);
            let _ = self.w.flush();
            self.output_inflight = None;
            while let Some((t, how, sig)) = self.output_waiting.pop_front() {
                self.resume(t, how, sig);
            }
            let newborn: Vec<(Stopped, WaitKind)> = self.newborn.drain().map(|(_, v)| v).collect();
            for (t, _) in newborn {
                self.resume(t, Resume::Cont, 0);
            }
            for (tid, p) in &mut self.procs {
                for (sig, _) in p.held.drain(..) {
                    let _ = replay_ptrace::tgkill(p.tgid, *tid, sig);
                }
            }
            // Threads waiting for their turn run freely now.
            let waiting: Vec<(Stopped, WaitKind)> = self
                .groups
                .values_mut()
                .flat_map(|g| g.waiting.drain(..))
                .collect();
            for (t, kind) in waiting {
                match self.passthrough_stop(kind, t) {
                    Ok((t, how, sig)) => self.resume(t, how, sig),
                    Err(boxed) => {
                        if let (Some(t), _) = *boxed {
                            self.resume(t, Resume::Cont, 0);
                        }
                    }
                }
            }
        }
    }

    /// Serves one stop without recording: system calls run, signals are delivered as they come,
    /// trapped instructions are still emulated (the traps stay armed in the image).
    fn passthrough_stop(&mut self, kind: WaitKind, mut t: Stopped) -> StopResult {
        if let WaitKind::Signal(sig) = kind {
            match signal::emulate_trap_if_any(&mut t) {
                Ok(Some(_)) => return Ok((t, Resume::Cont, 0)),
                Ok(None) => return Ok((t, Resume::Cont, sig)),
                Err(e) => return Err(Box::new((Some(t), e))),
            }
        }
        if let Some(p) = self.procs.get_mut(&t.tid()) {
            p.pending = None;
        }
        // Unrecorded from now on: the handler hands every call to us, and we let it run.
        crate::syscallbuf::switch_off(&t);
        if let WaitKind::Event(replay_ptrace::PtraceEvent::Stop(sig)) = kind
            && is_stop_signal(sig)
        {
            return Ok((t, Resume::Listen, 0));
        }
        Ok((t, Resume::Cont, 0))
    }
}

/// True for the signals whose default action stops the process (a group-stop): the recorder then
/// leaves the tracee stopped with `PTRACE_LISTEN`, as it would be natively, until `SIGCONT`.
fn is_stop_signal(sig: i32) -> bool {
    matches!(
        sig,
        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
    )
}

/// What a handler gives back: the tracee to resume, how, and the signal to deliver; or the error
/// with the tracee if it is still held.
type StopResult = Result<(Stopped, Resume, i32), Box<(Option<Stopped>, Error)>>;

trait GoneExt {
    fn is_gone(&self) -> bool;
}

impl GoneExt for Error {
    fn is_gone(&self) -> bool {
        matches!(self, Error::Ptrace(e) if e.is_tracee_gone())
    }
}

/// Compares two register files field by field (libc's struct has no `PartialEq`).
pub(crate) fn regs_eq(a: &Regs, b: &Regs) -> bool {
    let fa = [
        a.r15, a.r14, a.r13, a.r12, a.rbp, a.rbx, a.r11, a.r10, a.r9, a.r8, a.rax, a.rcx, a.rdx,
        a.rsi, a.rdi, a.orig_rax, a.rip, a.cs, a.eflags, a.rsp, a.ss, a.fs_base, a.gs_base, a.ds,
        a.es, a.fs, a.gs,
    ];
    let fb = [
        b.r15, b.r14, b.r13, b.r12, b.rbp, b.rbx, b.r11, b.r10, b.r9, b.r8, b.rax, b.rcx, b.rdx,
        b.rsi, b.rdi, b.orig_rax, b.rip, b.cs, b.eflags, b.rsp, b.ss, b.fs_base, b.gs_base, b.ds,
        b.es, b.fs, b.gs,
    ];
    fa == fb
}
