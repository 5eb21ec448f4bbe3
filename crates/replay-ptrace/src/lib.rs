//! Typestate ptrace, tracee memory and seccomp filters: the unsafe boundary of record/replay.
//!
//! This crate is the only place where Sightline's record/replay talks to the kernel. Everything here
//! is mechanism; the `replay` crate decides policy (what to record, what to inject).
//!
//! Main types:
//! - [`Running`] and [`Stopped`]: a tracee thread in its two ptrace states (safeptrace's typestate).
//!   Registers and memory exist only on a [`Stopped`] value; [`Stopped::resume`] consumes it and gives
//!   back a [`Running`]. A tracee that vanishes while we hold it stopped (ESRCH) surfaces as
//!   [`Error::TraceeDied`], never as a generic failure.
//! - [`wait_any`] returns the next [`WaitEvent`] of any tracee (`waitpid(-1, __WALL)`), which the
//!   caller turns into a [`Stopped`] with [`Running::into_stopped`].
//! - [`RemotePtr`]: an address in a tracee's address space (rr's `remote_ptr<T>`), never a bare `u64`.
//! - [`seccomp::Filter`]: a classic-BPF seccomp filter that returns `SECCOMP_RET_TRACE` only for the
//!   system calls the policy names, `SECCOMP_RET_ERRNO` for the ones it refuses, and lets every other
//!   system call run at full speed.
//! - [`exec::find_executable`]: the file a command name runs, with execvp(3)'s `PATH` rules.
//! - [`spawn`] and [`SpawnSpec`]: start a program under `PTRACE_SEIZE`, pinned to one CPU, without
//!   address-space randomization, with the filter installed just before `execve`.
//!
//! Architecture: x86-64 only (system call numbers and `user_regs_struct` layout from
//! `arch/x86/include/asm/user_64.h`); minimum kernel 5.3 (`PTRACE_GET_SYSCALL_INFO` is not needed,
//! but seccomp stops before syscall-entry stops, the 4.8 ordering, are assumed).
#![deny(missing_docs)]
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

pub mod exec;
pub mod seccomp;
mod sys;
pub mod syscallbuf;
mod tracee;

pub use sys::{
    CloneArgs, CpuidResult, FpRegs, Regs, Ticker, coarse_monotonic_ns, cpuid, enter_pid_namespace,
    forward_signal_handlers, get_fpregs, ignored_signals, kill, listen_at, own_cpuid_fallbacks,
    own_rdtsc_fallbacks, pidfd_getfd, pin_current_to_cpu, process_cpu_ns, rdtsc, rdtscp,
    set_status_flags, start_ticks, take_pending_signal, take_tick, tgkill, tkill, trap_own_cpuid,
    trap_own_rdtsc, unpin, untrap_own_cpuid, untrap_own_rdtsc,
};
pub use tracee::{
    PtraceEvent, Resume, RunStop, Running, SpawnSpec, Stopped, WaitEvent, WaitKind, regs_of, spawn,
    try_wait_any, wait_any,
};

use std::fmt;
use std::marker::PhantomData;

/// Errors of the ptrace boundary. Each names the system call that failed and the thread it concerned.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call failed.
    #[error("{call} failed for tid {tid}: {source}")]
    Sys {
        /// The system call (or ptrace request) that failed, e.g. `ptrace(PTRACE_GETREGS)`.
        call: &'static str,
        /// The thread concerned (0 when none).
        tid: i32,
        /// The errno.
        #[source]
        source: std::io::Error,
    },
    /// The tracee disappeared (ESRCH) while we believed it stopped: it was killed (SIGKILL from
    /// outside, or its process exited under it).
    #[error("tracee {tid} died while stopped (during {call})")]
    TraceeDied {
        /// The thread that died.
        tid: i32,
        /// The request that found it gone.
        call: &'static str,
    },
    /// Reading or writing tracee memory moved fewer bytes than asked.
    #[error("{call} on tid {tid} at {addr}: moved {done} of {len} bytes")]
    ShortMemory {
        /// `process_vm_readv`, `process_vm_writev`, or the `/proc/<tid>/mem` fallback.
        call: &'static str,
        /// The thread.
        tid: i32,
        /// Start address.
        addr: RemotePtr<u8>,
        /// Bytes asked.
        len: usize,
        /// Bytes moved.
        done: usize,
    },
    /// A spawn argument was unusable (an interior NUL byte, an empty command).
    #[error("cannot spawn: {0}")]
    Spawn(String),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// True when this error means the tracee is gone (ESRCH), so callers can treat it as an exit.
    pub fn is_tracee_gone(&self) -> bool {
        match self {
            Error::TraceeDied { .. } => true,
            Error::Sys { source, .. } => source.raw_os_error() == Some(libc::ESRCH),
            _ => false,
        }
    }
}

/// An address in a tracee's address space, typed by what it points to (rr's `remote_ptr<T>`).
///
/// It cannot be dereferenced here: memory is read and written through [`Stopped::read_bytes`] and
/// [`Stopped::write_bytes`]. `RemotePtr<u8>` is the byte-addressed form.
pub struct RemotePtr<T> {
    addr: u64,
    _pointee: PhantomData<fn() -> T>,
}

impl<T> RemotePtr<T> {
    /// Wraps a raw tracee address (as found in a register or a tracee structure).
    pub const fn new(addr: u64) -> Self {
        RemotePtr {
            addr,
            _pointee: PhantomData,
        }
    }
    /// The null pointer.
    pub const fn null() -> Self {
        Self::new(0)
    }
    /// The raw address.
    pub const fn addr(self) -> u64 {
        self.addr
    }
    /// True for address 0.
    pub const fn is_null(self) -> bool {
        self.addr == 0
    }
    /// The same address viewed as bytes.
    pub const fn cast<U>(self) -> RemotePtr<U> {
        RemotePtr::new(self.addr)
    }
    /// This address plus `n` elements of `T` (wrapping, as the tracee's own arithmetic would).
    pub const fn add(self, n: u64) -> Self {
        Self::new(
            self.addr
                .wrapping_add(n.wrapping_mul(std::mem::size_of::<T>() as u64)),
        )
    }
    /// This address minus `bytes` bytes.
    pub const fn sub_bytes(self, bytes: u64) -> Self {
        Self::new(self.addr.wrapping_sub(bytes))
    }
}

impl<T> Clone for RemotePtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for RemotePtr<T> {}
impl<T> PartialEq for RemotePtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.addr == other.addr
    }
}
impl<T> Eq for RemotePtr<T> {}
impl<T> fmt::Debug for RemotePtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RemotePtr({:#x})", self.addr)
    }
}
impl<T> fmt::Display for RemotePtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_ptr_arithmetic_scales_by_pointee() {
        let p: RemotePtr<u64> = RemotePtr::new(0x1000);
        assert_eq!(p.add(3).addr(), 0x1018);
        assert_eq!(p.cast::<u8>().add(3).addr(), 0x1003);
        assert_eq!(p.sub_bytes(0x10).addr(), 0xff0);
        assert!(RemotePtr::<u8>::null().is_null());
        assert_eq!(format!("{p}"), "0x1000");
    }
}
