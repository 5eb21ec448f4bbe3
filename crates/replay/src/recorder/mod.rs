//! The recorder: runs a program under ptrace + seccomp and writes its nondeterministic inputs.
//!
//! Mirrors [`crate::replayer`] file for file: `syscall.rs` (trapped system calls at entry and exit),
//! `signal.rs` (signals and trapped instructions), `process.rs` (fork, exec, exit).
//!
//! The loop waits for any tracee's stop, hands it to the matching handler and resumes it. Every
//! tracee is resumed by the end of each handler; none is ever left stopped. If recording cannot go
//! on (a thread, an internal error), the recorder switches to *pass-through*: it keeps serving the
//! tracees (their trapped system calls run unchanged, trapped instructions are still emulated) until
//! they exit, so the program is never harmed, and the recording is marked incomplete.

mod process;
mod signal;
mod syscall;

use std::collections::{HashMap, VecDeque};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use replay_ptrace::{Regs, Resume, Running, SpawnSpec, Stopped, WaitKind};

use crate::Error;
use crate::format::{Event, Meta, Record, Rendezvous, Writer, WriterStats};
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
}

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
        filter: crate::syscalls::filter(),
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
    };
    r.procs.insert(
        root_pid,
        Proc {
            thread: Some(root),
            ..Proc::default()
        },
    );
    // Same TSC mode as the tracees: no CR4 rewrite (a VM exit) on each switch to and from them.
    if let Err(e) = replay_ptrace::trap_own_rdtsc()
        && r.debug
    {
        eprintln!("sightline: tracer runs with its TSC enabled: {e}");
    }
    r.run();
    replay_ptrace::untrap_own_rdtsc();
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
            let ev = match replay_ptrace::wait_any() {
                Ok(Some(ev)) => ev,
                Ok(None) => continue,
                Err(_) => return, // ECHILD: every tracee is gone
            };
            match ev.kind {
                WaitKind::Exited(code) => {
                    self.procs.remove(&ev.tid);
                    self.output_done(ev.tid);
                    if ev.tid == self.root {
                        self.root_exit = Some(code);
                    }
                    continue;
                }
                WaitKind::Signaled(sig) => {
                    self.procs.remove(&ev.tid);
                    self.output_done(ev.tid);
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
            let proc = self.procs.entry(ev.tid).or_default();
            let running = proc
                .thread
                .take()
                .unwrap_or_else(|| Running::attached(ev.tid));
            let stopped = running.into_stopped(&ev);
            let result = if self.passthrough.is_some() {
                self.passthrough_stop(ev.kind, stopped)
            } else {
                self.on_stop(ev.kind, stopped)
            };
            let (stopped, how, sig) = match result {
                Ok(x) => x,
                Err(boxed) => {
                    let (stopped, err) = *boxed;
                    if err.is_gone() {
                        continue;
                    }
                    self.stop_recording(format!("internal error: {err}"));
                    let Some(stopped) = stopped else { continue };
                    (stopped, Resume::Cont, 0)
                }
            };
            // An output write's exit stop (or anything that ended it) lets the next one run.
            if self.output_inflight == Some(ev.tid)
                && self.procs.get(&ev.tid).is_none_or(|p| p.pending.is_none())
            {
                self.output_done(ev.tid);
            }
            let is_output = how == Resume::Syscall
                && self.passthrough.is_none()
                && self
                    .procs
                    .get(&ev.tid)
                    .and_then(|p| p.pending.as_ref())
                    .is_some_and(|p| p.is_output());
            if is_output {
                match self.output_inflight {
                    Some(other) if other != ev.tid => {
                        self.output_waiting.push_back((stopped, how, sig));
                        continue;
                    }
                    _ => self.output_inflight = Some(ev.tid),
                }
            }
            self.resume(stopped, how, sig);
        }
    }

    fn resume(&mut self, stopped: Stopped, how: Resume, sig: i32) {
        let tid = stopped.tid();
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
        self.w.push(&Record { pid, event })
    }

    /// Records the calls the tracee's syscall-buffering handler made since its last stop (before
    /// any other event of this stop, so they keep their place).
    fn drain_sysbuf(&mut self, t: &Stopped) -> Result<(), Error> {
        let recs = crate::syscallbuf::drain(t)?;
        if !recs.is_empty() {
            self.emit(t.tid(), Event::Buffered(recs))?;
        }
        Ok(())
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
            for (tid, p) in &mut self.procs {
                for (sig, _) in p.held.drain(..) {
                    let _ = replay_ptrace::tgkill(*tid, *tid, sig);
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
