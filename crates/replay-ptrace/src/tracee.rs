//! The typestate tracee: [`Running`] and [`Stopped`], waiting, resuming, spawning.

use std::ffi::CString;

use crate::seccomp::Filter;
use crate::sys::{self, Regs};
use crate::{Error, RemotePtr, Result};

/// `PTRACE_EVENT_STOP` (`include/uapi/linux/ptrace.h`); libc does not export it.
const PTRACE_EVENT_STOP: i32 = 128;

/// Options the engine seizes tracees with: stop on fork/vfork/clone (children are auto-attached),
/// exec, exit and seccomp `RET_TRACE`; mark syscall stops with 0x80 (TRACESYSGOOD); kill the
/// tracees if the tracer dies (EXITKILL, see [`SpawnSpec::exit_kill`]).
fn seize_options(exit_kill: bool) -> u32 {
    let mut o = libc::PTRACE_O_TRACESYSGOOD
        | libc::PTRACE_O_TRACEFORK
        | libc::PTRACE_O_TRACEVFORK
        | libc::PTRACE_O_TRACECLONE
        | libc::PTRACE_O_TRACEEXEC
        | libc::PTRACE_O_TRACEEXIT
        | libc::PTRACE_O_TRACESECCOMP;
    if exit_kill {
        o |= libc::PTRACE_O_EXITKILL;
    }
    o as u32
}

/// A ptrace event stop (`status >> 16` of a stopped tracee; ptrace(2) "PTRACE_EVENT stops").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PtraceEvent {
    /// `fork` created a child; its pid is in the event message.
    Fork,
    /// `vfork` created a child.
    Vfork,
    /// `clone` created a child (a process or a thread, depending on the flags).
    Clone,
    /// `execve` replaced the image; the old thread id is in the event message.
    Exec,
    /// The vfork child released its parent.
    VforkDone,
    /// The thread is about to exit; its wait status is in the event message.
    Exit,
    /// A seccomp filter returned `SECCOMP_RET_TRACE`; `SECCOMP_RET_DATA` is in the event message.
    Seccomp,
    /// A group-stop or the initial stop of an auto-attached child (`PTRACE_EVENT_STOP`); the
    /// stopping signal is given.
    Stop(i32),
}

/// What a wait reported for one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitKind {
    /// The thread exited with this code (`WIFEXITED`).
    Exited(i32),
    /// The thread was killed by this signal (`WIFSIGNALED`).
    Signaled(i32),
    /// A syscall-entry or syscall-exit stop (`SIGTRAP | 0x80`); the caller knows which.
    SyscallStop,
    /// A ptrace event stop.
    Event(PtraceEvent),
    /// A signal-delivery-stop for this signal: the signal is delivered only if passed to
    /// [`Stopped::resume`].
    Signal(i32),
}

/// One report of [`wait_any`]: thread id and what happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitEvent {
    /// The thread (tid; equals the pid for a single-threaded process).
    pub tid: i32,
    /// What happened.
    pub kind: WaitKind,
}

impl WaitEvent {
    /// True when the thread is gone (exited or killed), so no [`Stopped`] exists for it.
    pub fn is_death(&self) -> bool {
        matches!(self.kind, WaitKind::Exited(_) | WaitKind::Signaled(_))
    }
}

fn decode(tid: i32, status: i32) -> WaitEvent {
    let kind = if libc::WIFEXITED(status) {
        WaitKind::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        WaitKind::Signaled(libc::WTERMSIG(status))
    } else {
        let sig = libc::WSTOPSIG(status);
        let event = (status >> 16) & 0xff;
        if sig == libc::SIGTRAP | 0x80 {
            WaitKind::SyscallStop
        } else if event != 0 {
            WaitKind::Event(match event {
                libc::PTRACE_EVENT_FORK => PtraceEvent::Fork,
                libc::PTRACE_EVENT_VFORK => PtraceEvent::Vfork,
                libc::PTRACE_EVENT_CLONE => PtraceEvent::Clone,
                libc::PTRACE_EVENT_EXEC => PtraceEvent::Exec,
                libc::PTRACE_EVENT_VFORK_DONE => PtraceEvent::VforkDone,
                libc::PTRACE_EVENT_EXIT => PtraceEvent::Exit,
                libc::PTRACE_EVENT_SECCOMP => PtraceEvent::Seccomp,
                _ => PtraceEvent::Stop(sig),
            })
        } else {
            WaitKind::Signal(sig)
        }
    };
    let _ = PTRACE_EVENT_STOP;
    WaitEvent { tid, kind }
}

/// Waits for the next report of any tracee (`waitpid(-1, __WALL)`).
///
/// Returns `Ok(None)` when the wait was interrupted by a signal the tracer noted (see
/// [`crate::forward_signal_handlers`]), so the caller can forward it and wait again.
/// Errors: `ECHILD` when no tracee is left, as [`Error::Sys`] with call `waitpid(-1, __WALL)`.
pub fn wait_any() -> Result<Option<WaitEvent>> {
    Ok(sys::waitpid_any()?.map(|(tid, status)| decode(tid, status)))
}

/// The next report of any tracee if one is ready now (`waitpid(-1, __WALL | WNOHANG)`), else
/// `Ok(None)` (also when a signal interrupted the call).
///
/// Errors: `ECHILD` when no child is left, as [`Error::Sys`].
pub fn try_wait_any() -> Result<Option<WaitEvent>> {
    Ok(sys::waitpid_any_nohang()?.map(|(tid, status)| decode(tid, status)))
}

/// How to resume a stopped tracee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// `PTRACE_CONT`: run until the next seccomp stop, event or signal.
    Cont,
    /// `PTRACE_SYSCALL`: also stop at the next syscall-entry or syscall-exit (used after a seccomp
    /// stop to see the system call's result at its exit).
    Syscall,
    /// `PTRACE_LISTEN`: only for a group-stop (a [`PtraceEvent::Stop`] carrying a stop signal) of
    /// a seized tracee. It stays stopped, as job control wants, and its `SIGCONT` is reported as a
    /// new stop (ptrace(2), "Group-stop"). The signal argument must be 0.
    Listen,
    /// `PTRACE_SINGLESTEP`: run one instruction (a debugger's single-step), then stop with a
    /// `SIGTRAP` (`si_code` `TRAP_TRACE`), unless a system call, event or signal stops it first.
    Step,
}

/// A tracee thread that is running (or blocked in the kernel): nothing can be read from it.
#[derive(Debug)]
pub struct Running {
    tid: i32,
}

impl Running {
    /// A thread the kernel attached for us (a child reported by a fork/vfork/clone event); it
    /// reports its first stop through [`wait_any`].
    pub fn attached(tid: i32) -> Running {
        Running { tid }
    }

    /// The thread id.
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// Turns this running thread into a stopped one, given a wait report for it that is a stop.
    ///
    /// # Panics
    /// If `event` is about another thread or is a death (a programming error of the caller).
    pub fn into_stopped(self, event: &WaitEvent) -> Stopped {
        assert_eq!(event.tid, self.tid, "wait event for another tracee");
        assert!(!event.is_death(), "a dead tracee cannot be stopped");
        Stopped {
            tid: self.tid,
            regs: None,
        }
    }

    /// Sends `sig` to this thread with `tkill(2)`.
    pub fn signal(&self, sig: i32) -> Result<()> {
        sys::tkill(self.tid, sig)
    }

    /// Asks the kernel to stop this (seized) thread with `PTRACE_INTERRUPT` (kernel ≥ 3.4). It then
    /// reports a [`PtraceEvent::Stop`] with `SIGTRAP` when running in user space; if another stop
    /// comes first, that one is reported and the interrupt stop follows when the thread next heads
    /// back to user space (ptrace(2), "PTRACE_INTERRUPT").
    pub fn interrupt(&self) -> Result<()> {
        sys::ptrace(
            "ptrace(PTRACE_INTERRUPT)",
            libc::PTRACE_INTERRUPT,
            self.tid,
            0,
            0,
        )?;
        Ok(())
    }
}

/// What stopped a thread that [`Stopped::run_to`] ran forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStop {
    /// It reached the breakpoint, or made its single step.
    Reached,
    /// A signal-delivery-stop for this other signal came first.
    Signal(i32),
    /// A ptrace event stop came first.
    Event(WaitKind),
}

/// A tracee thread in a ptrace stop. Registers and memory are available only here; [`Self::resume`]
/// consumes the value. An ESRCH from any request means the thread died under us and is reported as
/// [`Error::TraceeDied`].
#[derive(Debug)]
pub struct Stopped {
    tid: i32,
    regs: Option<Regs>,
}

impl Stopped {
    /// The thread id.
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// The registers (`PTRACE_GETREGS`, cached until changed).
    pub fn regs(&mut self) -> Result<Regs> {
        if let Some(r) = self.regs {
            return Ok(r);
        }
        let r = sys::get_regs(self.tid)?;
        self.regs = Some(r);
        Ok(r)
    }

    /// Replaces the registers (`PTRACE_SETREGS`).
    pub fn set_regs(&mut self, regs: &Regs) -> Result<()> {
        sys::set_regs(self.tid, regs)?;
        self.regs = Some(*regs);
        Ok(())
    }

    /// Reads `len` bytes of tracee memory at `addr`.
    pub fn read_bytes(&self, addr: RemotePtr<u8>, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        sys::read_mem(self.tid, addr, &mut buf)?;
        Ok(buf)
    }

    /// Reads a little-endian `u64` at `addr`.
    pub fn read_u64(&self, addr: RemotePtr<u64>) -> Result<u64> {
        let mut buf = [0u8; 8];
        sys::read_mem(self.tid, addr.cast(), &mut buf)?;
        Ok(u64::from_le_bytes(buf))
    }

    /// Reads a NUL-terminated string of at most `max` bytes at `addr` (without the NUL).
    pub fn read_cstr(&self, addr: RemotePtr<u8>, max: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < max {
            // Read up to the end of the page so we never cross into an unmapped one needlessly.
            let page_left = 4096 - (at.addr() % 4096) as usize;
            let n = page_left.min(max - out.len());
            let chunk = self.read_bytes(at, n)?;
            if let Some(z) = chunk.iter().position(|&b| b == 0) {
                out.extend_from_slice(&chunk[..z]);
                return Ok(out);
            }
            out.extend_from_slice(&chunk);
            at = at.add(n as u64);
        }
        Ok(out)
    }

    /// Writes `data` into tracee memory at `addr` (read-only pages included, via `/proc/<tid>/mem`).
    pub fn write_bytes(&self, addr: RemotePtr<u8>, data: &[u8]) -> Result<()> {
        sys::write_mem(self.tid, addr, data)
    }

    /// The event message of the current event stop (`PTRACE_GETEVENTMSG`): a new child's pid, an
    /// exit status, seccomp's `SECCOMP_RET_DATA`.
    pub fn event_msg(&self) -> Result<u64> {
        sys::get_event_msg(self.tid)
    }

    /// The 128-byte `siginfo_t` of the current signal-delivery-stop (`PTRACE_GETSIGINFO`).
    pub fn siginfo(&self) -> Result<[u8; 128]> {
        sys::get_siginfo(self.tid)
    }

    /// Replaces the `siginfo_t` that will be delivered (`PTRACE_SETSIGINFO`).
    pub fn set_siginfo(&self, info: &[u8; 128]) -> Result<()> {
        sys::set_siginfo(self.tid, info)
    }

    /// Arms (`Some(addr)`) or clears (`None`) an execution breakpoint at `addr` in debug register 0
    /// of this thread (`PTRACE_POKEUSER` of `u_debugreg[0]` and `u_debugreg[7]`: DR7 bit 0 enables
    /// DR0 locally, R/W0 = 00 and LEN0 = 00 make it an instruction breakpoint; Intel SDM vol. 3B,
    /// 18.2.4). A hit is a `SIGTRAP` signal-delivery-stop with `si_code == TRAP_HWBKPT` before the
    /// instruction runs; the kernel sets EFLAGS.RF so resuming does not hit it again at once.
    ///
    /// The other debug registers' bits of DR7 are kept (a debugger's breakpoints and watchpoints
    /// use DR1–DR3: [`Self::debugreg`], [`Self::set_debugreg`]).
    pub fn set_breakpoint(&mut self, addr: Option<u64>) -> Result<()> {
        // DR0's bits in DR7: L0/G0 (bits 0-1), R/W0 and LEN0 (bits 16-19).
        const DR0_BITS: u64 = 0b11 | (0xf << 16);
        let others = sys::get_debugreg(self.tid, 7)? & !DR0_BITS;
        match addr {
            Some(a) => {
                sys::set_debugreg(self.tid, 7, others)?;
                sys::set_debugreg(self.tid, 0, a)?;
                sys::set_debugreg(self.tid, 7, others | 1)
            }
            None => sys::set_debugreg(self.tid, 7, others),
        }
    }

    /// Reads debug register `n` (0–3 addresses, 6 status, 7 control) of this thread
    /// (`PTRACE_PEEKUSER` of `u_debugreg[n]`). After a hardware breakpoint's `SIGTRAP`, DR6 bit
    /// `i` says debug register `i` matched (Intel SDM vol. 3B, 18.2.3).
    pub fn debugreg(&self, n: usize) -> Result<u64> {
        sys::get_debugreg(self.tid, n)
    }

    /// Writes debug register `n` of this thread (`PTRACE_POKEUSER`; the kernel checks DR7 against
    /// the addresses set, so write an address before enabling it).
    pub fn set_debugreg(&self, n: usize, value: u64) -> Result<()> {
        sys::set_debugreg(self.tid, n, value)
    }

    /// Runs the stopped thread forward in user mode: to the execution breakpoint `Some(addr)` (set
    /// in debug register 0 for the run, cleared after), or one instruction (`None`,
    /// `PTRACE_SINGLESTEP`). Returns what stopped it: [`RunStop::Reached`] (a `SIGTRAP`
    /// signal-delivery-stop, to be resumed with signal 0), [`RunStop::Signal`] (another signal
    /// came first, a fault on the way or an asynchronous one: the thread is in that signal's
    /// delivery-stop, its siginfo intact, for the caller to handle as any other), or
    /// [`RunStop::Event`] (a ptrace event stop). Only for a thread between instructions in user
    /// mode whose path to `addr` makes no system call (the caller checks the code).
    ///
    /// Errors: a ptrace request fails, or the thread dies ([`Error::TraceeDied`]).
    pub fn run_to(&mut self, addr: Option<u64>) -> Result<RunStop> {
        self.regs = None;
        let req = match addr {
            Some(a) => {
                self.set_breakpoint(Some(a))?;
                ("ptrace(PTRACE_CONT)", libc::PTRACE_CONT)
            }
            None => ("ptrace(PTRACE_SINGLESTEP)", libc::PTRACE_SINGLESTEP),
        };
        sys::ptrace(req.0, req.1, self.tid, 0, 0)?;
        let status = sys::waitpid_one(self.tid)?;
        if addr.is_some() {
            self.set_breakpoint(None)?;
        }
        match decode(self.tid, status).kind {
            WaitKind::Signal(libc::SIGTRAP) => Ok(RunStop::Reached),
            WaitKind::Signal(s) => Ok(RunStop::Signal(s)),
            WaitKind::Exited(_) | WaitKind::Signaled(_) => Err(Error::TraceeDied {
                tid: self.tid,
                call: "run to a forced sync point",
            }),
            other => Ok(RunStop::Event(other)),
        }
    }

    /// Resumes the thread, delivering `sig` if nonzero (meaningful in a signal-delivery-stop).
    pub fn resume(self, how: Resume, sig: i32) -> Result<Running> {
        let (call, req) = match how {
            Resume::Cont => ("ptrace(PTRACE_CONT)", libc::PTRACE_CONT),
            Resume::Syscall => ("ptrace(PTRACE_SYSCALL)", libc::PTRACE_SYSCALL),
            Resume::Listen => ("ptrace(PTRACE_LISTEN)", libc::PTRACE_LISTEN),
            Resume::Step => ("ptrace(PTRACE_SINGLESTEP)", libc::PTRACE_SINGLESTEP),
        };
        sys::ptrace(call, req, self.tid, 0, sig as usize)?;
        Ok(Running { tid: self.tid })
    }

    /// Detaches (`PTRACE_DETACH`), delivering `sig` if nonzero. The thread runs on untraced.
    pub fn detach(self, sig: i32) -> Result<()> {
        sys::ptrace(
            "ptrace(PTRACE_DETACH)",
            libc::PTRACE_DETACH,
            self.tid,
            0,
            sig as usize,
        )?;
        Ok(())
    }

    /// Kills the whole process of this thread with SIGKILL (used only on tracees the engine itself
    /// created for a replay, never on a recorded program).
    pub fn kill_process(self) -> Result<()> {
        sys::kill(self.tid, libc::SIGKILL)
    }

    /// At a seccomp stop: runs system call `nr` with `args` *instead of* the one being entered and
    /// returns its result (rax at the syscall-exit stop; `-errno` on failure). The seccomp filter is
    /// applied to the substitute again (kernel ≥ 4.8), so it must be one the filter allows. The
    /// caller then sets the registers it wants the tracee to continue with (typically the saved
    /// ones, rewound to re-execute the original call).
    ///
    /// Signals that arrive meanwhile are re-raised afterwards with `tgkill`, so none is lost.
    pub fn substitute_syscall(&mut self, nr: i64, args: [u64; 6]) -> Result<i64> {
        let mut r = self.regs()?;
        r.orig_rax = nr as u64;
        [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9] = args;
        self.set_regs(&r)?;
        let held = self.run_to_syscall_stop("substituted syscall")?;
        self.regs = None;
        let result = self.regs()?.rax as i64;
        for s in held {
            sys::tkill(self.tid, s)?;
        }
        Ok(result)
    }

    /// Resumes with `PTRACE_SYSCALL` until the next syscall stop, holding the signals that stop
    /// the thread meanwhile (returned, for the caller to re-raise).
    ///
    /// Errors: a ptrace request fails, or the thread dies during `call` ([`Error::TraceeDied`]).
    fn run_to_syscall_stop(&mut self, call: &'static str) -> Result<Vec<i32>> {
        let mut held = Vec::new();
        loop {
            sys::ptrace(
                "ptrace(PTRACE_SYSCALL)",
                libc::PTRACE_SYSCALL,
                self.tid,
                0,
                0,
            )?;
            let status = sys::waitpid_one(self.tid)?;
            match decode(self.tid, status).kind {
                WaitKind::SyscallStop => return Ok(held),
                WaitKind::Signal(s) => held.push(s),
                WaitKind::Exited(_) | WaitKind::Signaled(_) => {
                    return Err(Error::TraceeDied {
                        tid: self.tid,
                        call,
                    });
                }
                WaitKind::Event(_) => {}
            }
        }
    }

    /// At a syscall stop: true for a syscall-entry stop, false for an exit (or seccomp) stop
    /// (`PTRACE_GET_SYSCALL_INFO`). Tracers that resume with `PTRACE_SYSCALL` throughout, without
    /// a seccomp filter, tell the two apart with it.
    ///
    /// Errors: the request fails ([`Error::Sys`]).
    pub fn at_syscall_entry(&self) -> Result<bool> {
        Ok(sys::syscall_stop_op(self.tid)? == 1)
    }

    /// At a syscall-entry stop (no seccomp filter): runs system call `nr` with `args` instead of
    /// the one being entered, then makes the thread enter the original call again, so it is back
    /// in that call's entry stop with its registers as they were. Returns the substitute's result
    /// (`-errno` on failure). Go-live uses it to rebuild kernel state from inside the tracee.
    ///
    /// Signals that arrive meanwhile are re-raised afterwards with `tgkill`, so none is lost.
    /// Errors: a ptrace request fails, or the thread dies ([`Error::TraceeDied`]).
    pub fn call_at_entry(&mut self, nr: i64, args: [u64; 6]) -> Result<i64> {
        let saved = self.regs()?;
        let result = self.substitute_syscall(nr, args)?;
        // At the substitute's exit stop: back before the `syscall` instruction, which enters the
        // original call again.
        let mut r = saved;
        r.rax = saved.orig_rax;
        r.rip = saved.rip - 2;
        self.set_regs(&r)?;
        let held = self.run_to_syscall_stop("re-entered syscall")?;
        self.regs = None;
        self.set_regs(&saved)?;
        for s in held {
            sys::tkill(self.tid, s)?;
        }
        Ok(result)
    }

    /// Runs one system call in the tracee by placing a `syscall` instruction at the current
    /// instruction pointer, then restores code and registers. Returns the raw result (`-errno` on
    /// failure). Only for stops where the tracee is between instructions in user mode (an exec event
    /// stop or a signal-delivery-stop), and only for system calls the seccomp filter allows.
    ///
    /// Signals that arrive meanwhile are re-raised afterwards with `tgkill`, so none is lost.
    pub fn inject_syscall(&mut self, nr: i64, args: [u64; 6]) -> Result<i64> {
        let saved = self.regs()?;
        let at = RemotePtr::<u8>::new(saved.rip);
        let code = self.read_bytes(at, 2)?;
        self.write_bytes(at, &[0x0f, 0x05])?;
        let mut r = saved;
        r.rax = nr as u64;
        r.orig_rax = u64::MAX;
        [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9] = args;
        sys::set_regs(self.tid, &r)?;
        let mut held = Vec::new();
        let mut stops = 0;
        while stops < 2 {
            sys::ptrace(
                "ptrace(PTRACE_SYSCALL)",
                libc::PTRACE_SYSCALL,
                self.tid,
                0,
                0,
            )?;
            let status = sys::waitpid_one(self.tid)?;
            let ev = decode(self.tid, status);
            match ev.kind {
                WaitKind::SyscallStop => stops += 1,
                WaitKind::Signal(s) => held.push(s),
                WaitKind::Exited(_) | WaitKind::Signaled(_) => {
                    return Err(Error::TraceeDied {
                        tid: self.tid,
                        call: "injected syscall",
                    });
                }
                WaitKind::Event(_) => {}
            }
        }
        let result = sys::get_regs(self.tid)?.rax as i64;
        self.write_bytes(at, &code)?;
        self.set_regs(&saved)?;
        for s in held {
            sys::tkill(self.tid, s)?;
        }
        Ok(result)
    }
}

/// What to run and how (see [`spawn`]).
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// Path of the executable (already resolved against `PATH`).
    pub path: String,
    /// `argv`, including `argv[0]`.
    pub argv: Vec<String>,
    /// The complete environment, as `NAME=value` strings.
    pub env: Vec<String>,
    /// Working directory to start in.
    pub cwd: String,
    /// CPU to pin the tracee to (and, by [`spawn`], the calling tracer thread).
    pub cpu: Option<usize>,
    /// Disable address-space randomization (`personality(ADDR_NO_RANDOMIZE)`, inherited by children).
    pub no_aslr: bool,
    /// Replace fds 0, 1 and 2 with `/dev/null` (replay: the program's output is written by the
    /// replayer, never by the tracee, so the tracee cannot have an external side effect).
    pub stdio_null: bool,
    /// Seize with `PTRACE_O_EXITKILL`: if the tracer dies, the kernel kills the tracees.
    ///
    /// # Why is this wanted while recording?
    /// The seccomp filter returns `SECCOMP_RET_TRACE`; with no tracer attached, such system calls fail
    /// with ENOSYS, so a program that outlived its recorder would run on with its reads, writes and
    /// opens failing: silently corrupted. Killing it is the lesser harm, and it is what the issue
    /// asks for; Sightline's own exits (errors, Ctrl-C) never take this path because the recorder
    /// keeps serving the tracees until they exit.
    pub exit_kill: bool,
    /// The seccomp filter to install just before `execve`; `None`: no filter, and the tracee is
    /// resumed with `PTRACE_SYSCALL` from the start, so its first reports are the syscall stops of
    /// its own set-up calls before `execve` (go-live: a process that will run on untraced must
    /// carry no filter).
    pub filter: Option<Filter>,
    /// Signals the program starts with ignored (`SIG_IGN`), as the user started the recording
    /// (`nohup` ignores SIGHUP); every other disposition is the default.
    pub ignored_signals: Vec<i32>,
    /// Overlay mounts `(directory, overlayfs options)` made in a private mount namespace of the
    /// tracee before it starts (replay provides files the program created this way); empty: none,
    /// and no namespace of its own.
    pub overlays: Vec<(String, String)>,
    /// Bind mounts `(source, target)` made in that namespace before the overlays (replay: the
    /// recording's kept files, seen at a path no overlay covers).
    pub binds: Vec<(String, String)>,
    /// The pid to start the program with in our pid namespace for children (after
    /// [`crate::enter_pid_namespace`]); `None`: any.
    pub pid: Option<i32>,
}

/// Starts `spec` as a seized tracee and returns it running. The child waits on a pipe until
/// `PTRACE_SEIZE` has succeeded, then sets personality, affinity, fds, working directory and the
/// seccomp filter, and calls `execve`; the first report is the `execve` seccomp stop (if traced) or
/// the exec event.
///
/// Errors: an argument with an interior NUL ([`Error::Spawn`]); `fork`, `pipe2`,
/// `ptrace(PTRACE_SEIZE)` and `sched_setaffinity` failures ([`Error::Sys`]).
pub fn spawn(spec: &SpawnSpec) -> Result<Running> {
    let cstr = |s: &str| CString::new(s).map_err(|_| Error::Spawn(format!("NUL byte in {s:?}")));
    if spec.argv.is_empty() {
        return Err(Error::Spawn("empty command".into()));
    }
    let cpu = match spec.cpu {
        Some(c) => c,
        None => sys::first_cpu()?,
    };
    sys::pin_current_to_cpu(cpu)?;
    let plan = sys::ChildPlan {
        path: cstr(&spec.path)?,
        argv: spec.argv.iter().map(|a| cstr(a)).collect::<Result<_>>()?,
        envp: spec.env.iter().map(|a| cstr(a)).collect::<Result<_>>()?,
        cwd: Some(cstr(&spec.cwd)?),
        cpu: Some(cpu),
        no_aslr: spec.no_aslr,
        stdio_null: spec.stdio_null,
        close_fds: true,
        filter: spec.filter.as_ref().map(Filter::compile),
        hold: spec.filter.is_none(),
        sh_fallback: false,
        exec_errors: false,
        ignored_signals: spec.ignored_signals.clone(),
        overlays: spec
            .overlays
            .iter()
            .map(|(d, o)| Ok((cstr(d)?, cstr(o)?)))
            .collect::<Result<_>>()?,
        binds: spec
            .binds
            .iter()
            .map(|(s, d)| Ok((cstr(s)?, cstr(d)?)))
            .collect::<Result<_>>()?,
        pid: spec.pid,
    };
    let (pid, _) = sys::fork_seized(&plan, seize_options(spec.exit_kill))?;
    if spec.filter.is_none() {
        // Held in its SIGSTOP before its set-up calls: discard the signal and stop at every
        // system call from here on.
        sys::ptrace("ptrace(PTRACE_SYSCALL)", libc::PTRACE_SYSCALL, pid, 0, 0)?;
    }
    Ok(Running { tid: pid })
}

/// The registers of thread `tid`, which the caller knows to be in a ptrace stop it has not
/// resumed (a debugger reading a thread other than the one whose stop it handles).
///
/// Errors: the thread is running or gone (`ESRCH`, [`Error::TraceeDied`]).
pub fn regs_of(tid: i32) -> Result<Regs> {
    sys::get_regs(tid)
}
