//! Every system call of the record/replay engine goes through this module (aya's `sys` habit).
//!
//! Each wrapper names its call in the error it returns. All `unsafe` of the crate lives here.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};

use crate::seccomp::SockFilter;
use crate::{Error, RemotePtr, Result};

/// The tracee's general-purpose registers (`struct user_regs_struct`, `arch/x86/include/asm/user_64.h`).
pub type Regs = libc::user_regs_struct;

fn last_err(call: &'static str, tid: i32) -> Error {
    let source = io::Error::last_os_error();
    if source.raw_os_error() == Some(libc::ESRCH) {
        Error::TraceeDied { tid, call }
    } else {
        Error::Sys { call, tid, source }
    }
}

/// `ptrace(2)` with the request's name for errors. ESRCH becomes [`Error::TraceeDied`].
pub(crate) fn ptrace(
    call: &'static str,
    req: libc::c_uint,
    tid: i32,
    addr: usize,
    data: usize,
) -> Result<libc::c_long> {
    // SAFETY: the requests used by this crate either take no pointer (addr/data are integers) or take
    // a pointer to a live, correctly sized buffer owned by the caller for the duration of the call
    // (GETREGS/SETREGS: `Regs`; GETFPREGS: `FpRegs`; GETSIGINFO/SETSIGINFO: 128 bytes; GETEVENTMSG: a `c_ulong`).
    let r = unsafe {
        libc::ptrace(
            req,
            tid,
            addr as *mut libc::c_void,
            data as *mut libc::c_void,
        )
    };
    if r == -1 {
        Err(last_err(call, tid))
    } else {
        Ok(r)
    }
}

pub(crate) fn get_regs(tid: i32) -> Result<Regs> {
    // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
    let mut regs: Regs = unsafe { std::mem::zeroed() };
    ptrace(
        "ptrace(PTRACE_GETREGS)",
        libc::PTRACE_GETREGS,
        tid,
        0,
        &raw mut regs as usize,
    )?;
    Ok(regs)
}

/// The x87/SSE state of a thread (`PTRACE_GETFPREGS`: the FXSAVE layout, Intel SDM vol. 1, 10.5.1).
pub type FpRegs = libc::user_fpregs_struct;

/// Reads the x87/SSE registers of a stopped thread (`PTRACE_GETFPREGS`).
pub fn get_fpregs(tid: i32) -> Result<FpRegs> {
    // SAFETY: user_fpregs_struct is plain integers; all-zero is a valid value.
    let mut regs: FpRegs = unsafe { std::mem::zeroed() };
    ptrace(
        "ptrace(PTRACE_GETFPREGS)",
        libc::PTRACE_GETFPREGS,
        tid,
        0,
        &raw mut regs as usize,
    )?;
    Ok(regs)
}

pub(crate) fn set_regs(tid: i32, regs: &Regs) -> Result<()> {
    ptrace(
        "ptrace(PTRACE_SETREGS)",
        libc::PTRACE_SETREGS,
        tid,
        0,
        regs as *const Regs as usize,
    )?;
    Ok(())
}

pub(crate) fn get_event_msg(tid: i32) -> Result<u64> {
    let mut msg: libc::c_ulong = 0;
    ptrace(
        "ptrace(PTRACE_GETEVENTMSG)",
        libc::PTRACE_GETEVENTMSG,
        tid,
        0,
        &raw mut msg as usize,
    )?;
    Ok(msg)
}

pub(crate) fn get_siginfo(tid: i32) -> Result<[u8; 128]> {
    let mut buf = [0u8; 128];
    ptrace(
        "ptrace(PTRACE_GETSIGINFO)",
        libc::PTRACE_GETSIGINFO,
        tid,
        0,
        buf.as_mut_ptr() as usize,
    )?;
    Ok(buf)
}

pub(crate) fn set_siginfo(tid: i32, info: &[u8; 128]) -> Result<()> {
    ptrace(
        "ptrace(PTRACE_SETSIGINFO)",
        libc::PTRACE_SETSIGINFO,
        tid,
        0,
        info.as_ptr() as usize,
    )?;
    Ok(())
}

/// Reads tracee memory with `process_vm_readv(2)`, falling back to `/proc/<tid>/mem` (which can
/// also read pages the tracee cannot, e.g. PROT_NONE guard pages under FOLL_FORCE).
pub(crate) fn read_mem(tid: i32, addr: RemotePtr<u8>, buf: &mut [u8]) -> Result<()> {
    if buf.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr.addr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes `buf`, which we borrow mutably for the call; the remote iovec is only
    // interpreted in the tracee's address space by the kernel.
    let n = unsafe { libc::process_vm_readv(tid, &raw const local, 1, &raw const remote, 1, 0) };
    if n >= 0 && n as usize == buf.len() {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if n < 0 && err.raw_os_error() == Some(libc::ESRCH) {
        return Err(Error::TraceeDied {
            tid,
            call: "process_vm_readv",
        });
    }
    proc_mem(tid, addr, MemOp::Read(buf))
}

/// Writes tracee memory with `process_vm_writev(2)`, falling back to `/proc/<tid>/mem` (which also
/// writes read-only pages, e.g. code, through FOLL_FORCE).
pub(crate) fn write_mem(tid: i32, addr: RemotePtr<u8>, data: &[u8]) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: addr.addr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: `local` describes `data`, only read by the kernel; the remote iovec names tracee memory.
    let n = unsafe { libc::process_vm_writev(tid, &raw const local, 1, &raw const remote, 1, 0) };
    if n >= 0 && n as usize == data.len() {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if n < 0 && err.raw_os_error() == Some(libc::ESRCH) {
        return Err(Error::TraceeDied {
            tid,
            call: "process_vm_writev",
        });
    }
    proc_mem(tid, addr, MemOp::Write(data))
}

enum MemOp<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

fn proc_mem(tid: i32, addr: RemotePtr<u8>, op: MemOp<'_>) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let path = format!("/proc/{tid}/mem");
    let write = matches!(op, MemOp::Write(_));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .open(&path)
        .map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                Error::TraceeDied {
                    tid,
                    call: "open(/proc/<tid>/mem)",
                }
            } else {
                Error::Sys {
                    call: "open(/proc/<tid>/mem)",
                    tid,
                    source,
                }
            }
        })?;
    let (call, len, res) = match op {
        MemOp::Read(buf) => (
            "pread(/proc/<tid>/mem)",
            buf.len(),
            file.read_exact_at(buf, addr.addr()),
        ),
        MemOp::Write(data) => (
            "pwrite(/proc/<tid>/mem)",
            data.len(),
            file.write_all_at(data, addr.addr()),
        ),
    };
    res.map_err(|source| {
        if source.kind() == io::ErrorKind::UnexpectedEof
            || source.kind() == io::ErrorKind::WriteZero
        {
            Error::ShortMemory {
                call,
                tid,
                addr,
                len,
                done: 0,
            }
        } else {
            Error::Sys { call, tid, source }
        }
    })
}

/// Outcome of `waitpid(2)`: the thread and its raw status.
pub(crate) fn waitpid_any() -> Result<Option<(i32, i32)>> {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer for the call.
        let r = unsafe { libc::waitpid(-1, &raw mut status, libc::__WALL) };
        if r > 0 {
            return Ok(Some((r, status)));
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => {
                if SIGNAL_SEEN.load(Ordering::Relaxed) != 0 || TICK_SEEN.load(Ordering::Relaxed) {
                    // Let the caller look at the forwarded signal, then wait again.
                    return Ok(None);
                }
            }
            Some(libc::ECHILD) => {
                return Err(Error::Sys {
                    call: "waitpid(-1, __WALL)",
                    tid: -1,
                    source: err,
                });
            }
            _ => {
                return Err(Error::Sys {
                    call: "waitpid(-1, __WALL)",
                    tid: -1,
                    source: err,
                });
            }
        }
    }
}

/// `waitpid(-1, __WALL | WNOHANG)`: a report of any tracee if one is ready, `None` if none is.
///
/// Errors: `ECHILD` (no child left) and others as [`Error::Sys`].
pub(crate) fn waitpid_any_nohang() -> Result<Option<(i32, i32)>> {
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer for the call.
    let r = unsafe { libc::waitpid(-1, &raw mut status, libc::__WALL | libc::WNOHANG) };
    if r > 0 {
        return Ok(Some((r, status)));
    }
    if r == 0 {
        return Ok(None);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EINTR) {
        return Ok(None);
    }
    Err(Error::Sys {
        call: "waitpid(-1, __WALL | WNOHANG)",
        tid: -1,
        source: err,
    })
}

/// `waitpid(tid, __WALL)`: waits for one specific thread (used while injecting a system call).
pub(crate) fn waitpid_one(tid: i32) -> Result<i32> {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer for the call.
        let r = unsafe { libc::waitpid(tid, &raw mut status, libc::__WALL) };
        if r == tid {
            return Ok(status);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(Error::Sys {
                call: "waitpid(tid, __WALL)",
                tid,
                source: err,
            });
        }
    }
}

/// `tgkill(2)`: sends `sig` to thread `tid` of thread group `tgid`.
pub fn tgkill(tgid: i32, tid: i32, sig: i32) -> Result<()> {
    // SAFETY: tgkill takes only integers.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, sig) };
    if r == -1 {
        Err(last_err("tgkill", tid))
    } else {
        Ok(())
    }
}

/// `tkill(2)`: sends `sig` to thread `tid`, whatever its process (a thread-directed signal; unlike
/// `tgkill(tid, tid, …)` it also reaches a thread that is not its process's leader).
pub fn tkill(tid: i32, sig: i32) -> Result<()> {
    // SAFETY: tkill takes only integers.
    let r = unsafe { libc::syscall(libc::SYS_tkill, tid, sig) };
    if r == -1 {
        Err(last_err("tkill", tid))
    } else {
        Ok(())
    }
}

/// `kill(2)`: sends `sig` to process `pid` (process-directed: a standard signal already pending for
/// the process is not queued twice).
pub fn kill(pid: i32, sig: i32) -> Result<()> {
    // SAFETY: kill takes only integers.
    let r = unsafe { libc::kill(pid, sig) };
    if r == -1 {
        Err(last_err("kill", pid))
    } else {
        Ok(())
    }
}

/// Pins the calling thread to `cpu` with `sched_setaffinity(2)`.
///
/// # Why is this needed?
/// A trapped system call is a round trip tracee → tracer → tracee; on this VM it costs 2.5–4.4 µs
/// when both sit on one CPU and up to 50 µs when the scheduler moves them apart.
pub fn pin_current_to_cpu(cpu: usize) -> Result<()> {
    // SAFETY: cpu_set_t is a plain bit array; CPU_ZERO/CPU_SET only touch it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t and cpu < CPU_SETSIZE is checked by the caller's choice
    // (we only pass CPUs from our own affinity mask).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` lives for the call and its size is passed.
    let r = unsafe {
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &raw const set)
    };
    if r == -1 {
        Err(last_err("sched_setaffinity", 0))
    } else {
        Ok(())
    }
}

/// The first CPU in the calling thread's affinity mask (`sched_getaffinity(2)`).
pub(crate) fn first_allowed_cpu() -> Result<usize> {
    // SAFETY: as above, a zeroed cpu_set_t is valid.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid out-buffer of the passed size.
    let r =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &raw mut set) };
    if r == -1 {
        return Err(last_err("sched_getaffinity", 0));
    }
    // SAFETY: CPU_ISSET only reads the set.
    Ok((0..libc::CPU_SETSIZE as usize)
        .find(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .unwrap_or(0))
}

static SIGNAL_SEEN: AtomicI32 = AtomicI32::new(0);
static SIGNAL_FROM_TTY: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t for the duration of the handler.
    let code = unsafe { (*info).si_code };
    // SI_KERNEL: sent by the terminal driver to the whole foreground process group.
    SIGNAL_FROM_TTY.store(i32::from(code == 0x80), Ordering::Relaxed);
    SIGNAL_SEEN.store(sig, Ordering::Relaxed);
}

/// Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT in the tracer that only note the
/// signal (see [`take_pending_signal`]), so that the tracer survives Ctrl-C and can forward it.
///
/// # Why a handler and not SIG_IGN?
/// Ignored dispositions survive `execve` and would be inherited by the recorded program; handled
/// ones are reset to default by `execve`, so the tracee sees the signals it would see natively.
///
/// A signal that is ignored already (Sightline started under `nohup`, or by a shell running it in
/// the background without job control) stays ignored: the recorded program inherits that
/// disposition across `execve`, as it would natively, and Sightline is not ended by it either.
pub fn forward_signal_handlers() -> Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: a zeroed sigaction is valid storage for the old action.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only reads the current one into `old`.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &raw mut old) } == 0
            && old.sa_sigaction == libc::SIG_IGN
        {
            continue;
        }
        // SAFETY: a zeroed sigaction is valid; we fill the handler and an empty mask.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = note_signal as *const () as usize;
        // No SA_RESTART: waitpid must return EINTR so we can forward promptly.
        act.sa_flags = libc::SA_SIGINFO;
        // SAFETY: act.sa_mask is a valid sigset_t inside `act`.
        unsafe { libc::sigemptyset(&raw mut act.sa_mask) };
        // SAFETY: `act` is fully initialised; the old action is not wanted.
        let r = unsafe { libc::sigaction(sig, &raw const act, std::ptr::null_mut()) };
        if r == -1 {
            return Err(last_err("sigaction", 0));
        }
    }
    Ok(())
}

/// The last signal noted by the handlers of [`forward_signal_handlers`], cleared by this call, and
/// whether it came from the terminal (`si_code == SI_KERNEL`: the tracees, in the same foreground
/// process group, received it too and it must not be forwarded again).
pub fn take_pending_signal() -> Option<(i32, bool)> {
    match SIGNAL_SEEN.swap(0, Ordering::Relaxed) {
        0 => None,
        s => Some((s, SIGNAL_FROM_TTY.load(Ordering::Relaxed) != 0)),
    }
}

/// The standard signals (1-31, SIGKILL, SIGSTOP and SIGPIPE, which Rust's runtime ignores, left
/// out) whose disposition in this process is `SIG_IGN`: what a program started from here would
/// inherit (`nohup` ignores SIGHUP). Call it before [`forward_signal_handlers`].
pub fn ignored_signals() -> Vec<i32> {
    (1..32)
        .filter(|&sig| !matches!(sig, libc::SIGKILL | libc::SIGSTOP | libc::SIGPIPE))
        .filter(|&sig| {
            // SAFETY: a zeroed sigaction is valid storage for the old action.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: a null new action only reads the current one into `old`.
            let r = unsafe { libc::sigaction(sig, std::ptr::null(), &raw mut old) };
            r == 0 && old.sa_sigaction == libc::SIG_IGN
        })
        .collect()
}

/// Reads the time-stamp counter in the tracer (the value the recorder gives a trapped RDTSC).
///
/// Works whether or not [`trap_own_rdtsc`] is in effect: the counter is then enabled for the one read.
pub fn rdtsc() -> u64 {
    with_own_tsc(|| {
        // SAFETY: RDTSC is available on every x86-64 CPU and has no memory effects; `with_own_tsc`
        // has enabled it for this thread.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    })
}

/// Reads the time-stamp counter and TSC_AUX in the tracer (for a trapped RDTSCP).
pub fn rdtscp() -> (u64, u32) {
    with_own_tsc(|| {
        let mut aux = 0u32;
        // SAFETY: RDTSCP is present on CPUs with constant_tsc (all we run on); it writes only `aux`;
        // `with_own_tsc` has enabled it for this thread.
        #[allow(unused_unsafe)]
        let t = unsafe { core::arch::x86_64::__rdtscp(&raw mut aux) };
        (t, aux)
    })
}

/// Set while the tracer thread runs with RDTSC faulting ([`trap_own_rdtsc`]).
static OWN_TSC_TRAPPED: AtomicBool = AtomicBool::new(false);
/// How many times the SIGSEGV safety net had to re-enable the tracer's own counter.
static OWN_TSC_FALLBACKS: AtomicU64 = AtomicU64::new(0);
/// The SIGSEGV action that was in place before [`trap_own_rdtsc`] installed its safety net.
static OLD_SEGV_ACTION: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());

fn set_own_tsc(trapped: bool) -> Result<()> {
    let mode = if trapped {
        libc::PR_TSC_SIGSEGV
    } else {
        libc::PR_TSC_ENABLE
    };
    // SAFETY: prctl(PR_SET_TSC) takes only integers and affects only the calling thread.
    let r = unsafe { libc::prctl(libc::PR_SET_TSC, mode as libc::c_ulong, 0, 0, 0) };
    if r == -1 {
        Err(last_err("prctl(PR_SET_TSC)", 0))
    } else {
        Ok(())
    }
}

fn with_own_tsc<T>(f: impl FnOnce() -> T) -> T {
    let trapped = OWN_TSC_TRAPPED.load(Ordering::Relaxed);
    if trapped {
        let _ = set_own_tsc(false);
    }
    let v = f();
    if trapped {
        let _ = set_own_tsc(true);
    }
    v
}

extern "C" fn own_tsc_fault(_sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t and ucontext_t for the duration of
    // the handler.
    let (code, rip) = unsafe {
        (
            (*info).si_code,
            (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs[libc::REG_RIP as usize],
        )
    };
    // A faulting RDTSC raises #GP, which the kernel reports as SIGSEGV with SI_KERNEL; RIP then points
    // at the instruction, in mapped executable memory, so its bytes can be read.
    if code == 0x80 {
        let p = rip as usize as *const u8;
        // SAFETY: see above: RIP is the address of the instruction that raised #GP, mapped and readable.
        let b = unsafe { [p.read(), p.add(1).read(), p.add(2).read()] };
        if b[..2] == [0x0f, 0x31] || b == [0x0f, 0x01, 0xf9] {
            OWN_TSC_TRAPPED.store(false, Ordering::Relaxed);
            OWN_TSC_FALLBACKS.fetch_add(1, Ordering::Relaxed);
            let _ = set_own_tsc(false);
            return; // the RDTSC runs again, now enabled
        }
        if b[..2] == [0x0f, 0xa2] && OWN_CPUID_TRAPPED.load(Ordering::Relaxed) {
            OWN_CPUID_TRAPPED.store(false, Ordering::Relaxed);
            OWN_CPUID_FALLBACKS.fetch_add(1, Ordering::Relaxed);
            let _ = set_own_cpuid(false);
            return; // the CPUID runs again, now allowed
        }
    }
    // Any other fault: put the previous action back and return; the instruction faults again and is
    // handled as it would have been without us (Rust's stack-overflow report, or the default crash).
    let old = OLD_SEGV_ACTION.load(Ordering::Relaxed);
    // SAFETY: `old` is null or the leaked, never-freed sigaction saved by `trap_own_rdtsc`; a null
    // pointer makes us install SIG_DFL instead.
    unsafe {
        if old.is_null() {
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
        } else {
            libc::sigaction(libc::SIGSEGV, old, std::ptr::null_mut());
        }
    }
}

/// Makes RDTSC fault in the calling (tracer) thread too, as it does in the tracees.
///
/// # Why?
/// `PR_SET_TSC` works by setting CR4.TSD while the task runs; every context switch between a task
/// with the counter disabled and one without rewrites CR4, which in a virtual machine is a VM exit.
/// A trapped system call is four such switches (tracee → tracer → tracee, twice), and on this VM that
/// raised its cost from 14 µs to 35 µs. With the tracer in the same TSC mode, CR4 stays as it is.
///
/// The tracer thread must then not execute RDTSC itself: [`rdtsc`]/[`rdtscp`] enable it for their one
/// read, and the recording writer uses a coarse clock that needs no counter. As a safety net, a SIGSEGV
/// handler recognizes a faulting RDTSC/RDTSCP in this thread, switches the counter back on for good
/// and lets the instruction run again ([`own_rdtsc_fallbacks`] counts it); any other SIGSEGV goes to
/// the handler that was there before.
///
/// Errors: `sigaction` or `prctl(PR_SET_TSC)` failing ([`Error::Sys`]); the tracer then simply runs
/// with its counter enabled.
pub fn trap_own_rdtsc() -> Result<()> {
    install_segv_net()?;
    set_own_tsc(true)?;
    OWN_TSC_TRAPPED.store(true, Ordering::Relaxed);
    Ok(())
}

/// Installs (once) the SIGSEGV handler behind [`trap_own_rdtsc`] and [`trap_own_cpuid`].
fn install_segv_net() -> Result<()> {
    if OLD_SEGV_ACTION.load(Ordering::Relaxed).is_null() {
        // SAFETY: a zeroed sigaction is valid; we fill the handler and an empty mask.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = own_tsc_fault as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: act.sa_mask is a valid sigset_t inside `act`.
        unsafe { libc::sigemptyset(&raw mut act.sa_mask) };
        // SAFETY: a zeroed sigaction is a valid out-buffer.
        let old: Box<libc::sigaction> = Box::new(unsafe { std::mem::zeroed() });
        let old = Box::into_raw(old);
        // SAFETY: `act` is initialised; `old` points to a live sigaction we own (leaked on purpose:
        // the handler may read it at any later time).
        let r = unsafe { libc::sigaction(libc::SIGSEGV, &raw const act, old) };
        if r == -1 {
            // SAFETY: `old` came from Box::into_raw above and was not shared.
            drop(unsafe { Box::from_raw(old) });
            return Err(last_err("sigaction(SIGSEGV)", 0));
        }
        OLD_SEGV_ACTION.store(old, Ordering::Relaxed);
    }
    Ok(())
}

/// Set while the tracer thread runs with CPUID faulting ([`trap_own_cpuid`]).
static OWN_CPUID_TRAPPED: AtomicBool = AtomicBool::new(false);
/// How many times the SIGSEGV safety net had to switch the tracer's CPUID faulting off.
static OWN_CPUID_FALLBACKS: AtomicU64 = AtomicU64::new(0);

/// `ARCH_SET_CPUID` (`arch/x86/include/uapi/asm/prctl.h`): argument 0 makes CPUID fault.
const ARCH_SET_CPUID: libc::c_long = 0x1012;

fn set_own_cpuid(faulting: bool) -> Result<()> {
    // SAFETY: arch_prctl(ARCH_SET_CPUID) takes only integers and affects only the calling thread.
    let r = unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_SET_CPUID,
            libc::c_long::from(!faulting),
        )
    };
    if r == -1 {
        Err(last_err("arch_prctl(ARCH_SET_CPUID)", 0))
    } else {
        Ok(())
    }
}

fn with_own_cpuid<T>(f: impl FnOnce() -> T) -> T {
    let trapped = OWN_CPUID_TRAPPED.load(Ordering::Relaxed);
    if trapped {
        let _ = set_own_cpuid(false);
    }
    let v = f();
    if trapped {
        let _ = set_own_cpuid(true);
    }
    v
}

/// Makes CPUID fault in the calling (tracer) thread too, as it does in the tracees
/// (`ARCH_SET_CPUID`, which the recorder and replayer set in every image they run).
///
/// # Why?
/// CPUID faulting is a per-task bit of the `MSR_MISC_FEATURES_ENABLES` register that the kernel
/// rewrites at every context switch between a task with it and one without
/// (`__switch_to_xtra`); in a virtual machine that write is a VM exit. Measured on this VM (a
/// pipe ping-pong of two processes on one CPU): 3.5 µs a round trip, 20–23 µs with one side
/// faulting. Every ptrace stop is two such switches (tracee → tracer → tracee). With the tracer
/// in the same mode the register stays as it is.
///
/// The tracer thread must then not execute CPUID itself: [`cpuid`] switches faulting off for its
/// one instruction. As a safety net, the SIGSEGV handler of [`trap_own_rdtsc`] recognizes a
/// faulting CPUID in this thread, switches faulting off for good and lets the instruction run
/// again ([`own_cpuid_fallbacks`] counts it).
///
/// Errors: `sigaction` or `arch_prctl(ARCH_SET_CPUID)` failing ([`Error::Sys`]: the machine has
/// no CPUID faulting, and neither have the tracees); the tracer then runs as before.
pub fn trap_own_cpuid() -> Result<()> {
    install_segv_net()?;
    set_own_cpuid(true)?;
    OWN_CPUID_TRAPPED.store(true, Ordering::Relaxed);
    Ok(())
}

/// Undoes [`trap_own_cpuid`] for the calling thread.
pub fn untrap_own_cpuid() {
    if OWN_CPUID_TRAPPED.swap(false, Ordering::Relaxed) {
        let _ = set_own_cpuid(false);
    }
}

/// How many times the tracer executed CPUID while [`trap_own_cpuid`] was in effect (each time
/// faulting was switched off for good). Zero in a healthy recording.
pub fn own_cpuid_fallbacks() -> u64 {
    OWN_CPUID_FALLBACKS.load(Ordering::Relaxed)
}

/// Undoes [`trap_own_rdtsc`] for the calling thread (the SIGSEGV safety net stays; it is inert).
pub fn untrap_own_rdtsc() {
    if OWN_TSC_TRAPPED.swap(false, Ordering::Relaxed) {
        let _ = set_own_tsc(false);
    }
}

/// How many times the tracer executed RDTSC while [`trap_own_rdtsc`] was in effect (each time the
/// counter was switched back on for good). Zero in a healthy recording.
pub fn own_rdtsc_fallbacks() -> u64 {
    OWN_TSC_FALLBACKS.load(Ordering::Relaxed)
}

/// A monotonic clock in nanoseconds that never reads the time-stamp counter
/// (`clock_gettime(CLOCK_MONOTONIC_COARSE)`, resolution one jiffy, 1–10 ms), for the tracer thread
/// while [`trap_own_rdtsc`] is in effect.
pub fn coarse_monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-buffer for the call; the coarse clock is served from the vDSO's
    // data page without RDTSC.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &raw mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The four output registers of CPUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuidResult {
    /// EAX.
    pub eax: u32,
    /// EBX.
    pub ebx: u32,
    /// ECX.
    pub ecx: u32,
    /// EDX.
    pub edx: u32,
}

/// Executes CPUID in the tracer for `leaf`/`subleaf` (the answer the recorder gives a faulting CPUID).
pub fn cpuid(leaf: u32, subleaf: u32) -> CpuidResult {
    // SAFETY: CPUID is always available on x86-64 and has no memory effects; `with_own_cpuid`
    // lets it run in a thread that has CPUID faulting on.
    #[allow(unused_unsafe)]
    let r = with_own_cpuid(|| unsafe { core::arch::x86_64::__cpuid_count(leaf, subleaf) });
    CpuidResult {
        eax: r.eax,
        ebx: r.ebx,
        ecx: r.ecx,
        edx: r.edx,
    }
}

/// Everything the child needs between `fork` and `execve`, prepared before forking so the child only
/// makes raw system calls (no allocation: the parent may hold allocator locks).
///
/// One plan serves both kinds of traced child: a recorded program (pinned, no ASLR, only fds 0-2,
/// the recorded working directory, the seccomp filter) and a held `-c` command of `probe` (stopped
/// before its exec until released, nothing of ours installed, exec errors reported through a pipe).
pub(crate) struct ChildPlan {
    pub path: CString,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    /// Working directory to change to (`None`: the parent's).
    pub cwd: Option<CString>,
    /// CPU to pin the child to (`None`: the parent's affinity).
    pub cpu: Option<usize>,
    pub no_aslr: bool,
    pub stdio_null: bool,
    /// Close every fd above 2 (`close_range(3, ~0)`), so fd numbers are the same on replay.
    pub close_fds: bool,
    /// The seccomp filter to install just before `execve`.
    pub filter: Option<Vec<SockFilter>>,
    /// Stop with SIGSTOP (a signal-delivery-stop of our tracee) before `execve`, until the tracer
    /// detaches or resumes it: a held command.
    pub hold: bool,
    /// execvp(3)'s `ENOEXEC` fallback: a file the kernel cannot execute runs as
    /// `/bin/sh PATH ARGS...`.
    pub sh_fallback: bool,
    /// Report a failed `execve` (or set-up step) as its errno through a close-on-exec pipe, whose
    /// read end [`fork_seized`] returns, instead of a message on stderr.
    pub exec_errors: bool,
    /// Signals set to `SIG_IGN` before `execve` (the dispositions the user started the recording
    /// with, e.g. SIGHUP under `nohup`).
    pub ignored_signals: Vec<i32>,
    /// Overlay mounts `(directory, options)` made in a private mount namespace of the child before
    /// it changes directory (replay: files the program created, provided from the recording).
    pub overlays: Vec<(CString, CString)>,
    /// Bind mounts `(source, target)` made in that namespace before the overlays.
    pub binds: Vec<(CString, CString)>,
    /// The pid the child gets in the caller's pid namespace for children (`clone3` with
    /// `set_tid`; see [`enter_pid_namespace`]); `None`: whatever `fork` gives.
    pub pid: Option<i32>,
}

/// `fork(2)`s a child that waits until the parent has seized it (`PTRACE_SEIZE` with `opts`), then
/// prepares itself as `plan` says and `execve`s. Returns the child's pid and, with
/// [`ChildPlan::exec_errors`], the read end of the exec-error pipe (end of file once the exec
/// succeeded; the errno as 4 native-endian bytes when it failed). A held child ([`ChildPlan::hold`])
/// has been waited for in its SIGSTOP stop when this returns.
///
/// Concurrent calls (threads of one process) are serialized from the pipes' creation until the
/// parent has closed its write ends: otherwise a child forked by one call inherits the other's
/// write ends and, held before its exec, keeps the other child waiting for the seize hand-off
/// and the other's exec-error pipe from reaching end of file: two held children deadlocked.
pub(crate) fn fork_seized(plan: &ChildPlan, opts: u32) -> Result<(i32, Option<OwnedFd>)> {
    static FORKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    /// The byte written to release the child after the seize.
    const HANDOFF: u8 = b'g';
    let forking = FORKING.lock().unwrap_or_else(|e| e.into_inner());
    let pipe = || -> Result<(OwnedFd, OwnedFd)> {
        let mut fds = [0i32; 2];
        // SAFETY: `fds` is a valid 2-element out-array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
            return Err(last_err("pipe2", 0));
        }
        // SAFETY: pipe2 returned two fresh descriptors that nothing else owns.
        Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
    };
    let (rd, wr) = pipe()?;
    let errors = if plan.exec_errors {
        Some(pipe()?)
    } else {
        None
    };
    let err_fd = errors.as_ref().map_or(-1, |(_, w)| w.as_raw_fd());

    let mut argv: Vec<*const libc::c_char> = plan.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // execvp(3)'s ENOEXEC fallback: `/bin/sh PATH ARGS...`.
    let sh = c"/bin/sh";
    let mut sh_argv: Vec<*const libc::c_char> = vec![sh.as_ptr(), plan.path.as_ptr()];
    sh_argv.extend(plan.argv.iter().skip(1).map(|a| a.as_ptr()));
    sh_argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = plan.envp.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    let prog = plan.filter.as_ref().map(|f| libc::sock_fprog {
        len: f.len() as u16,
        filter: f.as_ptr() as *mut libc::sock_filter,
    });
    let devnull = c"/dev/null";

    // SAFETY: fork is followed in the child only by async-signal-safe raw system calls on data
    // prepared above (no allocation, no locks), ending in execve or _exit.
    let pid = match plan.pid {
        // SAFETY: see the fork comment above.
        None => unsafe { libc::fork() },
        Some(want) => {
            let set_tid = [want];
            let args = CloneArgs {
                exit_signal: libc::SIGCHLD as u64,
                set_tid: set_tid.as_ptr() as u64,
                set_tid_size: 1,
                ..CloneArgs::default()
            };
            // SAFETY: as fork (no CLONE_VM): `args` and `set_tid` are live for the call.
            unsafe {
                libc::syscall(
                    libc::SYS_clone3,
                    &raw const args,
                    std::mem::size_of::<CloneArgs>(),
                ) as i32
            }
        }
    };
    if pid == -1 {
        return Err(last_err("fork", 0));
    }
    if pid == 0 {
        // SAFETY: child side; see the fork comment. Every pointer passed is into `plan`, `argv`,
        // `sh_argv`, `envp`, `prog` or static strings, all alive in this copy of the address space.
        unsafe {
            let mut b = 0u8;
            // Wait for the parent's PTRACE_SEIZE: it writes a byte (end of file if it failed and
            // gave up). A byte, not the end of file alone, because another fork of this process
            // (std::process::Command's) may hold a copy of the write end until its exec.
            libc::close(wr.as_raw_fd());
            libc::read(rd.as_raw_fd(), (&raw mut b).cast(), 1);
            // Rust's runtime ignores SIGPIPE and ignored dispositions survive execve: give the
            // program the default a shell would.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            for &sig in &plan.ignored_signals {
                libc::signal(sig, libc::SIG_IGN);
            }
            if plan.hold {
                // A signal-delivery-stop of our tracer's tracee; PTRACE_DETACH with signal 0
                // discards it (ptrace(2)), so the program never sees this SIGSTOP.
                libc::kill(libc::getpid(), libc::SIGSTOP);
            }
            if plan.no_aslr {
                libc::personality(libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
            }
            if let Some(cpu) = plan.cpu {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &raw const set);
            }
            if plan.stdio_null {
                let fd = libc::open(devnull.as_ptr(), libc::O_RDWR);
                if fd >= 0 {
                    libc::dup2(fd, 0);
                    libc::dup2(fd, 1);
                    libc::dup2(fd, 2);
                }
            }
            if plan.close_fds {
                // Only 0, 1 and 2 cross into the program, so fd numbers are the same on replay.
                libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
            }
            if !plan.overlays.is_empty() {
                // A mount namespace of the replay's own: nothing outside it sees these files.
                if libc::unshare(libc::CLONE_NEWNS) == -1
                    || libc::mount(
                        c"none".as_ptr(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) == -1
                {
                    child_fail(err_fd, b"sightline: a private mount namespace failed\n");
                }
                for (src, dst) in &plan.binds {
                    if libc::mount(
                        src.as_ptr(),
                        dst.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND,
                        std::ptr::null(),
                    ) == -1
                    {
                        child_fail(err_fd, b"sightline: a bind mount failed\n");
                    }
                }
                for (dir, opts) in &plan.overlays {
                    if libc::mount(
                        c"overlay".as_ptr(),
                        dir.as_ptr(),
                        c"overlay".as_ptr(),
                        0,
                        opts.as_ptr().cast(),
                    ) == -1
                    {
                        child_fail(err_fd, b"sightline: an overlay mount failed\n");
                    }
                }
            }
            if let Some(cwd) = &plan.cwd
                && libc::chdir(cwd.as_ptr()) == -1
            {
                child_fail(
                    err_fd,
                    b"sightline: chdir to the recorded working directory failed\n",
                );
            }
            if let Some(prog) = &prog {
                // SECCOMP_SET_MODE_FILTER = 1. As root no_new_privs is not needed; otherwise set it.
                if libc::syscall(libc::SYS_seccomp, 1, 0, prog as *const libc::sock_fprog) == -1 {
                    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                    if libc::syscall(libc::SYS_seccomp, 1, 0, prog as *const libc::sock_fprog) == -1
                    {
                        child_fail(err_fd, b"sightline: installing the seccomp filter failed\n");
                    }
                }
            }
            libc::execve(plan.path.as_ptr(), argv.as_ptr(), envp.as_ptr());
            if plan.sh_fallback && *libc::__errno_location() == libc::ENOEXEC {
                libc::execve(sh.as_ptr(), sh_argv.as_ptr(), envp.as_ptr());
            }
            child_fail(err_fd, b"sightline: execve of the command failed\n");
        }
    }
    drop(rd);
    let seized = ptrace(
        "ptrace(PTRACE_SEIZE)",
        libc::PTRACE_SEIZE,
        pid,
        0,
        opts as usize,
    );
    if let Err(e) = seized {
        let _ = kill(pid, libc::SIGKILL);
        let _ = waitpid_one(pid);
        return Err(e);
    }
    // SAFETY: write(2) of one byte from a live temporary array to our pipe's write end.
    let woke = unsafe { libc::write(wr.as_raw_fd(), [HANDOFF].as_ptr().cast(), 1) };
    if woke != 1 {
        let e = last_err("write(fork hand-off pipe)", pid);
        let _ = kill(pid, libc::SIGKILL);
        let _ = waitpid_one(pid);
        return Err(e);
    }
    drop(wr);
    // Our copy of the error pipe's write end closes here, so a successful exec leaves it at EOF.
    let errors = errors.map(|(r, _)| r);
    drop(forking);
    if plan.hold {
        let status = waitpid_one(pid)?;
        if !libc::WIFSTOPPED(status) || libc::WSTOPSIG(status) != libc::SIGSTOP {
            let _ = kill(pid, libc::SIGKILL);
            let _ = waitpid_one(pid);
            return Err(Error::Spawn(format!(
                "the held child did not stop before its exec (wait status {status:#x})"
            )));
        }
    }
    Ok((pid, errors))
}

/// Child-side failure: reports the errno through the exec-error pipe `err_fd` when there is one
/// (`-1`: none), else writes `msg` to stderr; then exits 127, as a shell does for a failed exec.
///
/// # Safety
/// Only called in the forked child.
unsafe fn child_fail(err_fd: i32, msg: &[u8]) -> ! {
    // SAFETY: __errno_location, write and _exit are async-signal-safe; msg and errno's bytes are
    // live.
    unsafe {
        if err_fd >= 0 {
            let errno = (*libc::__errno_location()).to_ne_bytes();
            libc::write(err_fd, errno.as_ptr().cast(), errno.len());
        } else {
            libc::write(2, msg.as_ptr().cast(), msg.len());
        }
        libc::_exit(127)
    }
}

/// faccessat(2) `X_OK` with `AT_EACCESS`: may our effective ids execute `path` (for root: any
/// execute bit)?
pub(crate) fn may_execute(path: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: faccessat(2) reads the NUL-terminated path, which outlives the call.
    if unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::X_OK, libc::AT_EACCESS) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(crate) fn first_cpu() -> Result<usize> {
    first_allowed_cpu()
}

/// Set by the tick timer's handler ([`start_ticks`]).
static TICK_SEEN: AtomicBool = AtomicBool::new(false);

extern "C" fn note_tick(_sig: libc::c_int) {
    TICK_SEEN.store(true, Ordering::Relaxed);
}

/// The signal of the tick timer. SIGALRM: the tracer never uses it otherwise, and the timer sends it
/// to the tracer thread only (`SIGEV_THREAD_ID`), so no other thread of Sightline sees it.
const TICK_SIGNAL: i32 = libc::SIGALRM;

/// A periodic timer that interrupts the calling thread's waits (`timer_create(2)` with
/// `SIGEV_THREAD_ID`, kernel ≥ 2.6.12): each expiry makes a blocked [`crate::wait_any`] return
/// `Ok(None)` and [`take_tick`] return true. Deleted on drop.
///
/// # Why?
/// The recorder must notice a thread that computes without stopping (to force a sync point) and
/// the replayer a thread that never reaches its recorded one; both otherwise sit in
/// `waitpid(-1)`, which only a signal interrupts.
#[derive(Debug)]
pub struct Ticker {
    timer: libc::timer_t,
}

/// Starts a [`Ticker`] firing every `interval_ns` nanoseconds at the calling thread.
///
/// Errors: `sigaction` or `timer_create`/`timer_settime` failing ([`Error::Sys`]).
pub fn start_ticks(interval_ns: u64) -> Result<Ticker> {
    // SAFETY: a zeroed sigaction is valid; we fill the handler and an empty mask.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = note_tick as *const () as usize;
    // No SA_RESTART: waitpid must return EINTR.
    act.sa_flags = 0;
    // SAFETY: act.sa_mask is a valid sigset_t inside `act`.
    unsafe { libc::sigemptyset(&raw mut act.sa_mask) };
    // SAFETY: `act` is initialised; the old action is not wanted.
    if unsafe { libc::sigaction(TICK_SIGNAL, &raw const act, std::ptr::null_mut()) } == -1 {
        return Err(last_err("sigaction(SIGALRM)", 0));
    }
    // SAFETY: a zeroed sigevent is valid; the fields the kernel reads for SIGEV_THREAD_ID are set.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_THREAD_ID;
    sev.sigev_signo = TICK_SIGNAL;
    // SAFETY: gettid takes no arguments.
    sev.sigev_notify_thread_id = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    let mut timer: libc::timer_t = std::ptr::null_mut();
    // SAFETY: `sev` and `timer` are valid for the call.
    if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &raw mut sev, &raw mut timer) } == -1 {
        return Err(last_err("timer_create", 0));
    }
    let ts = libc::timespec {
        tv_sec: (interval_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (interval_ns % 1_000_000_000) as libc::c_long,
    };
    let spec = libc::itimerspec {
        it_interval: ts,
        it_value: ts,
    };
    // SAFETY: `timer` was just created; `spec` is valid for the call.
    if unsafe { libc::timer_settime(timer, 0, &raw const spec, std::ptr::null_mut()) } == -1 {
        let e = last_err("timer_settime", 0);
        // SAFETY: `timer` is ours and not used afterwards.
        unsafe { libc::timer_delete(timer) };
        return Err(e);
    }
    Ok(Ticker { timer })
}

impl Drop for Ticker {
    fn drop(&mut self) {
        // SAFETY: the timer is ours and deleted once.
        unsafe { libc::timer_delete(self.timer) };
        TICK_SEEN.store(false, Ordering::Relaxed);
    }
}

/// True once per expiry of the [`Ticker`] since the last call.
pub fn take_tick() -> bool {
    TICK_SEEN.swap(false, Ordering::Relaxed)
}

/// `offsetof(struct user, u_debugreg)` on x86-64 (`arch/x86/include/asm/user_64.h`).
const DEBUGREG_OFFSET: usize = 848;

/// Writes debug register `n` (0–7) of a stopped thread with `PTRACE_POKEUSER`.
pub(crate) fn set_debugreg(tid: i32, n: usize, value: u64) -> Result<()> {
    ptrace(
        "ptrace(PTRACE_POKEUSER, u_debugreg)",
        libc::PTRACE_POKEUSER,
        tid,
        DEBUGREG_OFFSET + 8 * n,
        value as usize,
    )?;
    Ok(())
}

/// Reads debug register `n` (0–7) of a stopped thread with `PTRACE_PEEKUSER`. The registers read
/// here never hold -1 (addresses in user space, DR6 status and DR7 control bits), so the request's
/// -1 error return is not ambiguous.
pub(crate) fn get_debugreg(tid: i32, n: usize) -> Result<u64> {
    let v = ptrace(
        "ptrace(PTRACE_PEEKUSER, u_debugreg)",
        libc::PTRACE_PEEKUSER,
        tid,
        DEBUGREG_OFFSET + 8 * n,
        0,
    )?;
    Ok(v as u64)
}

/// CPU time consumed so far by all threads of process `pid`, in nanoseconds: `clock_gettime(2)` on
/// its process CPU clock (`MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)`,
/// `include/linux/posix-timers_types.h`). `None` when the process is gone.
///
/// # Why the process clock?
/// The kernel lets another process read only process clocks, not per-thread ones; with one thread
/// of a recorded process running at a time, the process clock advances with that thread.
pub fn process_cpu_ns(pid: i32) -> Option<u64> {
    let clock = ((!pid) << 3) | 2;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-buffer; CPU clocks are served by the system call, not the vDSO,
    // so no RDTSC runs in the tracer.
    let r = unsafe { libc::clock_gettime(clock, &raw mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// `PTRACE_GET_SYSCALL_INFO` (`include/uapi/linux/ptrace.h`, kernel 5.3).
const PTRACE_GET_SYSCALL_INFO: libc::c_uint = 0x420e;

/// Which kind of syscall stop `tid` is in (`PTRACE_GET_SYSCALL_INFO`'s `op`): 1 entry, 2 exit,
/// 3 seccomp, 0 none.
pub(crate) fn syscall_stop_op(tid: i32) -> Result<u8> {
    // struct ptrace_syscall_info is 88 bytes; `op` is its first byte.
    let mut info = [0u64; 11];
    ptrace(
        "ptrace(PTRACE_GET_SYSCALL_INFO)",
        PTRACE_GET_SYSCALL_INFO,
        tid,
        std::mem::size_of_val(&info),
        info.as_mut_ptr() as usize,
    )?;
    Ok(info[0] as u8)
}

/// A duplicate of fd `fd` of process `pid`, sharing its open file description
/// (`pidfd_open` + `pidfd_getfd`, kernel 5.6; the caller must be allowed to ptrace `pid`).
///
/// Errors: either call fails ([`Error::Sys`]; `EBADF` when `pid` has no such fd).
pub fn pidfd_getfd(pid: i32, fd: i32) -> Result<OwnedFd> {
    // SAFETY: pidfd_open takes two integers.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(last_err("pidfd_open", pid));
    }
    // SAFETY: pidfd_open returned a fresh descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    // SAFETY: pidfd_getfd takes three integers.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(last_err("pidfd_getfd", pid));
    }
    // SAFETY: pidfd_getfd returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(got as i32) })
}

/// Lets thread `tid` run on every online CPU again (`sched_setaffinity`), undoing the pinning of
/// [`crate::spawn`].
///
/// Errors: `sched_setaffinity` fails ([`Error::Sys`]).
pub fn unpin(tid: i32) -> Result<()> {
    // SAFETY: sysconf takes an integer.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.clamp(1, 1024) as usize;
    // SAFETY: a zeroed cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for cpu in 0..n {
        // SAFETY: `cpu` < 1024, within cpu_set_t.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size given.
    let r = unsafe {
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &raw const set)
    };
    if r == -1 {
        return Err(last_err("sched_setaffinity", tid));
    }
    Ok(())
}

/// Sets the file status flags of `fd`'s open file description (`fcntl(F_SETFL)`: only
/// `O_APPEND`, `O_ASYNC`, `O_DIRECT`, `O_NOATIME` and `O_NONBLOCK` can change).
///
/// Errors: `fcntl` fails ([`Error::Sys`]).
pub fn set_status_flags(fd: &OwnedFd, flags: i32) -> Result<()> {
    // SAFETY: fcntl(F_SETFL) takes integers.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) } == -1 {
        return Err(last_err("fcntl(F_SETFL)", 0));
    }
    Ok(())
}

/// Makes the socket `fd` listen again at the address it was bound to: `SO_REUSEADDR`, `bind`
/// to `addr` (a `struct sockaddr` as the program passed it), `listen` with `backlog`.
///
/// Errors: a call fails ([`Error::Sys`] naming it; `EADDRINUSE` when the address is taken).
pub fn listen_at(fd: &OwnedFd, addr: &[u8], backlog: i32) -> Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: `one` is a valid int of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&raw const one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == -1 {
        return Err(last_err("setsockopt(SO_REUSEADDR)", 0));
    }
    // SAFETY: `addr` is a live buffer of the length given; the kernel copies it.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            addr.as_ptr().cast(),
            addr.len() as libc::socklen_t,
        )
    };
    if r == -1 {
        return Err(last_err("bind", 0));
    }
    // SAFETY: listen takes integers.
    if unsafe { libc::listen(fd.as_raw_fd(), backlog) } == -1 {
        return Err(last_err("listen", 0));
    }
    Ok(())
}

/// `struct clone_args` (`include/uapi/linux/sched.h`, `CLONE_ARGS_SIZE_VER2`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct CloneArgs {
    /// Flags (without the exit signal).
    pub flags: u64,
    /// Where to store a pidfd (`CLONE_PIDFD`).
    pub pidfd: u64,
    /// Where to store the child's tid in the child (`CLONE_CHILD_SETTID`).
    pub child_tid: u64,
    /// Where to store the child's tid in the parent (`CLONE_PARENT_SETTID`).
    pub parent_tid: u64,
    /// Signal to the parent when the child exits.
    pub exit_signal: u64,
    /// Lowest byte of the child's stack.
    pub stack: u64,
    /// Size of the stack.
    pub stack_size: u64,
    /// Thread-local storage (`CLONE_SETTLS`).
    pub tls: u64,
    /// Array of pids, innermost namespace first.
    pub set_tid: u64,
    /// Elements in `set_tid`.
    pub set_tid_size: u64,
    /// Cgroup fd (`CLONE_INTO_CGROUP`).
    pub cgroup: u64,
}

impl CloneArgs {
    /// The struct's bytes, as the kernel reads them.
    pub fn to_bytes(&self) -> [u8; 88] {
        let f = [
            self.flags,
            self.pidfd,
            self.child_tid,
            self.parent_tid,
            self.exit_signal,
            self.stack,
            self.stack_size,
            self.tls,
            self.set_tid,
            self.set_tid_size,
            self.cgroup,
        ];
        let mut out = [0u8; 88];
        for (i, v) in f.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        out
    }
}

/// Puts this process's future children in a new pid namespace (`unshare(CLONE_NEWPID)`) and
/// starts its init (pid 1 there): a fork of ours that reaps orphans and dies with us
/// (`PR_SET_PDEATHSIG`), taking the namespace's processes with it. Children made after this
/// with [`crate::SpawnSpec::pid`] or `clone3`'s `set_tid` get the pids asked for there. Returns the
/// init's pid (in our namespace). Once per process.
///
/// Errors: `unshare` (EPERM without CAP_SYS_ADMIN) or `fork` fails ([`Error::Sys`]).
pub fn enter_pid_namespace() -> Result<i32> {
    // SAFETY: unshare takes an integer.
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } == -1 {
        return Err(last_err("unshare(CLONE_NEWPID)", 0));
    }
    // SAFETY: the child makes only raw, async-signal-safe calls in a loop and never returns.
    let pid = unsafe { libc::fork() };
    if pid == -1 {
        return Err(last_err("fork", 0));
    }
    if pid == 0 {
        // SAFETY: child side: raw calls on local data only.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            let tick = libc::timespec {
                tv_sec: 0,
                tv_nsec: 50_000_000,
            };
            loop {
                let mut status = 0;
                if libc::waitpid(-1, &raw mut status, libc::WNOHANG | libc::__WALL) <= 0 {
                    libc::nanosleep(&raw const tick, std::ptr::null_mut());
                }
            }
        }
    }
    Ok(pid)
}
