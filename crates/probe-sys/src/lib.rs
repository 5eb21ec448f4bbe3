//! The probe pipeline's kernel chokepoint: every `bpf(2)` and `perf_event_open(2)` call of
//! Sightline's probe crates (and the `ioctl(2)`s on perf events) goes through `syscall`, the one
//! function that enters the kernel for them. Unit tests replace the kernel there with
//! [`override_syscall`] (as aya's `override_syscall`), so the code that builds attributes and reads
//! results runs without root.
//!
//! Main items: [`SyscallError`] (the one error type: which call failed, the OS error as its
//! source, and for `BPF_PROG_LOAD` the verifier log), [`Syscall`] (the calls the seam sees),
//! [`bpf`] (map and program commands, links, test runs), [`perf`] (perf events: CPU clock,
//! tracepoints, uprobes), [`os`] (the other system calls of the probe runtime: signals, mount,
//! clocks, rlimits, and sysfs CPU lists).
//!
//! Attribute layouts follow `include/uapi/linux/bpf.h` (`union bpf_attr`) and
//! `include/uapi/linux/perf_event.h` (`struct perf_event_attr`) of Linux 6.x. Each is a zeroed byte
//! block ([`Attr`]) written at the field offsets those headers give: the kernel zero-fills a
//! shorter attribute and accepts a longer one whose extra bytes are zero
//! (`bpf_check_uarg_tail_zero`, `perf_copy_attr`).
#![deny(missing_docs)]

pub mod bpf;
pub mod os;
pub mod perf;

use std::cell::RefCell;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// A failed system call: which call (e.g. `bpf(BPF_PROG_LOAD)`) and the OS error.
///
/// The message names the call only (`` `bpf(BPF_PROG_LOAD)` failed ``); the OS error is its
/// [`std::error::Error::source`], so a chain printed with `{:#}` says each cause once.
#[derive(Debug, thiserror::Error)]
#[error("`{call}` failed")]
pub struct SyscallError {
    /// The call and command that failed, e.g. `bpf(BPF_MAP_CREATE)`, `perf_event_open`.
    pub call: &'static str,
    /// The error the kernel returned.
    #[source]
    pub io_error: io::Error,
    /// For `bpf(BPF_PROG_LOAD)`: the verifier log of the failed load (`Some("")` when the kernel
    /// wrote none); `None` for every other call.
    pub verifier_log: Option<String>,
}

impl SyscallError {
    /// The error of `call` with `io_error` (no verifier log).
    pub fn new(call: &'static str, io_error: io::Error) -> SyscallError {
        SyscallError {
            call,
            io_error,
            verifier_log: None,
        }
    }

    /// The error of `call` from `errno` ([`io::Error::last_os_error`]).
    pub fn last(call: &'static str) -> SyscallError {
        SyscallError::new(call, io::Error::last_os_error())
    }

    /// True when the kernel said EPERM/EACCES (missing CAP_BPF, CAP_PERFMON or CAP_SYS_ADMIN).
    pub fn is_permission(&self) -> bool {
        matches!(
            self.io_error.raw_os_error(),
            Some(libc::EPERM) | Some(libc::EACCES)
        )
    }

    /// The OS error number, if the error has one.
    pub fn errno(&self) -> Option<i32> {
        self.io_error.raw_os_error()
    }
}

/// Result of a kernel call.
pub type SysResult<T> = Result<T, SyscallError>;

/// A zeroed, 8-aligned attribute block of `N` bytes (`union bpf_attr`, `struct
/// perf_event_attr`), written and read at the byte offsets of the kernel's headers.
#[derive(Clone, PartialEq, Eq)]
#[repr(C, align(8))]
pub struct Attr<const N: usize>(pub [u8; N]);

impl<const N: usize> std::fmt::Debug for Attr<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Attr<{N}>")
    }
}

impl<const N: usize> Default for Attr<N> {
    fn default() -> Self {
        Attr([0; N])
    }
}

impl<const N: usize> Attr<N> {
    /// Writes a native-endian `u32` at byte `off`.
    pub fn set_u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }

    /// Writes a native-endian `u64` at byte `off`.
    pub fn set_u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }

    /// The native-endian `u32` at byte `off`.
    pub fn u32(&self, off: usize) -> u32 {
        u32::from_ne_bytes(self.0[off..off + 4].try_into().expect("4 bytes"))
    }

    /// The native-endian `u64` at byte `off`.
    pub fn u64(&self, off: usize) -> u64 {
        u64::from_ne_bytes(self.0[off..off + 8].try_into().expect("8 bytes"))
    }
}

/// Size of the `union bpf_attr` block passed to every `bpf(2)` command (bytes).
pub const BPF_ATTR_SIZE: usize = 128;
/// Size of `struct perf_event_attr` as passed (`PERF_ATTR_SIZE_VER8`, bytes).
pub const PERF_ATTR_SIZE: usize = 136;

/// A `bpf(2)` attribute block.
pub type BpfAttr = Attr<BPF_ATTR_SIZE>;
/// A `perf_event_open(2)` attribute block.
pub type PerfAttr = Attr<PERF_ATTR_SIZE>;

/// The `bpf(2)` commands Sightline uses (`enum bpf_cmd`, include/uapi/linux/bpf.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum BpfCmd {
    /// `BPF_MAP_CREATE` (Linux 3.18).
    MapCreate = 0,
    /// `BPF_MAP_LOOKUP_ELEM`.
    MapLookupElem = 1,
    /// `BPF_MAP_UPDATE_ELEM`.
    MapUpdateElem = 2,
    /// `BPF_MAP_DELETE_ELEM`.
    MapDeleteElem = 3,
    /// `BPF_MAP_GET_NEXT_KEY`.
    MapGetNextKey = 4,
    /// `BPF_PROG_LOAD`.
    ProgLoad = 5,
    /// `BPF_OBJ_PIN` (Linux 4.4): a map, program or link given a path under bpffs.
    ObjPin = 6,
    /// `BPF_OBJ_GET` (Linux 4.4): a descriptor of the object pinned at a path.
    ObjGet = 7,
    /// `BPF_PROG_TEST_RUN` (Linux 4.12; raw tracepoints 5.10).
    ProgTestRun = 10,
    /// `BPF_PROG_GET_FD_BY_ID` (Linux 4.13).
    ProgGetFdById = 13,
    /// `BPF_OBJ_GET_INFO_BY_FD` (Linux 4.13).
    ObjGetInfoByFd = 15,
    /// `BPF_RAW_TRACEPOINT_OPEN` (Linux 4.17).
    RawTracepointOpen = 17,
    /// `BPF_MAP_UPDATE_BATCH` (Linux 5.6).
    MapUpdateBatch = 26,
    /// `BPF_LINK_CREATE` (Linux 5.7; perf events 5.15, uprobe_multi 6.6).
    LinkCreate = 28,
    /// `BPF_LINK_GET_FD_BY_ID` (Linux 5.8).
    LinkGetFdById = 30,
}

impl BpfCmd {
    /// The call as errors name it: `bpf(BPF_PROG_LOAD)`.
    pub fn call(self) -> &'static str {
        match self {
            BpfCmd::MapCreate => "bpf(BPF_MAP_CREATE)",
            BpfCmd::MapLookupElem => "bpf(BPF_MAP_LOOKUP_ELEM)",
            BpfCmd::MapUpdateElem => "bpf(BPF_MAP_UPDATE_ELEM)",
            BpfCmd::MapDeleteElem => "bpf(BPF_MAP_DELETE_ELEM)",
            BpfCmd::MapGetNextKey => "bpf(BPF_MAP_GET_NEXT_KEY)",
            BpfCmd::ProgLoad => "bpf(BPF_PROG_LOAD)",
            BpfCmd::ObjPin => "bpf(BPF_OBJ_PIN)",
            BpfCmd::ObjGet => "bpf(BPF_OBJ_GET)",
            BpfCmd::ProgTestRun => "bpf(BPF_PROG_TEST_RUN)",
            BpfCmd::ProgGetFdById => "bpf(BPF_PROG_GET_FD_BY_ID)",
            BpfCmd::ObjGetInfoByFd => "bpf(BPF_OBJ_GET_INFO_BY_FD)",
            BpfCmd::LinkGetFdById => "bpf(BPF_LINK_GET_FD_BY_ID)",
            BpfCmd::RawTracepointOpen => "bpf(BPF_RAW_TRACEPOINT_OPEN)",
            BpfCmd::MapUpdateBatch => "bpf(BPF_MAP_UPDATE_BATCH)",
            BpfCmd::LinkCreate => "bpf(BPF_LINK_CREATE)",
        }
    }
}

/// The perf-event `ioctl(2)` requests Sightline uses (include/uapi/linux/perf_event.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerfIoctl {
    /// `PERF_EVENT_IOC_SET_BPF` (`_IOW('$', 8, __u32)`, Linux 4.1): run a BPF program per sample.
    SetBpf,
    /// `PERF_EVENT_IOC_ENABLE` (`_IO('$', 0)`).
    Enable,
}

impl PerfIoctl {
    /// The request number.
    pub fn request(self) -> libc::c_ulong {
        match self {
            PerfIoctl::SetBpf => 0x4004_2408,
            PerfIoctl::Enable => 0x2400,
        }
    }

    /// The call as errors name it: `ioctl(PERF_EVENT_IOC_SET_BPF)`.
    pub fn call(self) -> &'static str {
        match self {
            PerfIoctl::SetBpf => "ioctl(PERF_EVENT_IOC_SET_BPF)",
            PerfIoctl::Enable => "ioctl(PERF_EVENT_IOC_ENABLE)",
        }
    }
}

/// One call through the chokepoint, as `syscall` and an [`override_syscall`] hook see it.
///
/// Pointers that the attribute block holds (instructions, keys, paths, log buffers) point into
/// memory that the caller keeps alive across the call.
#[derive(Debug)]
pub enum Syscall<'a> {
    /// `bpf(cmd, attr, sizeof attr)`.
    Bpf {
        /// The command.
        cmd: BpfCmd,
        /// The attribute block; the kernel (or the hook) may write results into it.
        attr: &'a mut BpfAttr,
    },
    /// `perf_event_open(attr, pid, cpu, group_fd, flags)`.
    PerfEventOpen {
        /// The attribute block.
        attr: &'a mut PerfAttr,
        /// Process (`-1`: every process).
        pid: libc::pid_t,
        /// CPU (`-1`: every CPU).
        cpu: libc::c_int,
        /// Group leader fd (`-1`: none).
        group_fd: libc::c_int,
        /// `PERF_FLAG_*`.
        flags: libc::c_ulong,
    },
    /// `ioctl(fd, request, arg)` on a perf event.
    PerfIoctl {
        /// The perf event's descriptor.
        fd: RawFd,
        /// The request.
        request: PerfIoctl,
        /// The integer argument (a program fd for `SET_BPF`).
        arg: libc::c_ulong,
    },
}

impl Syscall<'_> {
    /// The call as errors name it (`bpf(BPF_MAP_CREATE)`, `perf_event_open`, ...).
    pub fn call(&self) -> &'static str {
        match self {
            Syscall::Bpf { cmd, .. } => cmd.call(),
            Syscall::PerfEventOpen { .. } => "perf_event_open",
            Syscall::PerfIoctl { request, .. } => request.call(),
        }
    }
}

/// A replacement for the kernel: returns what the call would (a descriptor, 0) or its error.
pub type SyscallHook = Box<dyn FnMut(&mut Syscall<'_>) -> io::Result<i64>>;

thread_local! {
    static HOOK: RefCell<Option<SyscallHook>> = const { RefCell::new(None) };
}

/// Replaces the kernel for every call through the chokepoint on this thread until the returned guard is dropped:
/// `hook` receives each call and returns its result. For unit tests (no root needed): make
/// `BPF_MAP_CREATE` fail, write a verifier log, record the attributes a function built.
///
/// A hook that returns a "descriptor" must return one that the caller may own and close (for
/// example a dup of a real fd): the wrappers wrap it in an [`OwnedFd`].
pub fn override_syscall(
    hook: impl FnMut(&mut Syscall<'_>) -> io::Result<i64> + 'static,
) -> OverrideGuard {
    let previous = HOOK.with(|h| h.borrow_mut().replace(Box::new(hook)));
    OverrideGuard { previous }
}

/// Restores the previous hook (usually none: the real kernel) when dropped.
pub struct OverrideGuard {
    previous: Option<SyscallHook>,
}

impl std::fmt::Debug for OverrideGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OverrideGuard")
    }
}

impl Drop for OverrideGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        HOOK.with(|h| *h.borrow_mut() = previous);
    }
}

/// The chokepoint: performs `call` (or hands it to this thread's [`override_syscall`] hook) and
/// returns its non-negative result.
///
/// Crate-private because the attribute blocks carry raw pointers: only this crate's wrappers,
/// which keep the pointed-to memory alive across the call, may build them.
///
/// # Errors
/// [`SyscallError`] naming the call, with the OS error.
pub(crate) fn syscall(mut call: Syscall<'_>) -> SysResult<i64> {
    let hooked = HOOK.with(|h| h.borrow_mut().as_mut().map(|hook| hook(&mut call)));
    let r = match hooked {
        Some(r) => r,
        None => real_syscall(&mut call),
    };
    r.map_err(|e| SyscallError::new(call.call(), e))
}

fn real_syscall(call: &mut Syscall<'_>) -> io::Result<i64> {
    let r = match call {
        // SAFETY: `attr` is a live, initialized block of `attr.0.len()` bytes laid out as `union
        // bpf_attr` for `cmd`, and that size is passed, so the kernel reads and writes only it;
        // every pointer stored in it refers to memory the calling wrapper keeps alive until this
        // call returns (see each wrapper in `bpf`).
        Syscall::Bpf { cmd, attr } => unsafe {
            libc::syscall(
                libc::SYS_bpf,
                *cmd as libc::c_long,
                attr.0.as_mut_ptr(),
                attr.0.len() as libc::c_long,
            )
        },
        Syscall::PerfEventOpen {
            attr,
            pid,
            cpu,
            group_fd,
            flags,
        } => {
            // SAFETY: `attr` is a zero-initialized `struct perf_event_attr` whose `size` field the
            // wrapper set to at most `attr.0.len()`; a path pointer in it (uprobes) outlives the
            // call; the other arguments are integers.
            unsafe {
                libc::syscall(
                    libc::SYS_perf_event_open,
                    attr.0.as_mut_ptr(),
                    *pid,
                    *cpu,
                    *group_fd,
                    *flags,
                )
            }
        }
        // SAFETY: both requests take an integer argument, not a pointer; a bad descriptor is an
        // error (EBADF), not memory unsafety.
        Syscall::PerfIoctl { fd, request, arg } => unsafe {
            libc::ioctl(*fd, request.request(), *arg) as libc::c_long
        },
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Wraps a descriptor just returned by [`syscall`].
pub(crate) fn owned_fd(r: i64) -> OwnedFd {
    // SAFETY: `r` is the result of a successful call that creates a descriptor (or a hook's
    // stand-in for one, which `override_syscall` requires to be ours to close); nothing else
    // owns it.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error and its causes joined with ": ", as anyhow's `{:#}` prints them.
    pub(crate) fn chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut cur = e.source();
        while let Some(c) = cur {
            out.push_str(": ");
            out.push_str(&c.to_string());
            cur = c.source();
        }
        out
    }

    #[test]
    fn a_failed_call_is_named_once_with_its_os_error_as_source() {
        let e = SyscallError::new("bpf(BPF_PROG_LOAD)", io::Error::from_raw_os_error(22));
        assert_eq!(e.to_string(), "`bpf(BPF_PROG_LOAD)` failed");
        assert_eq!(
            chain(&e),
            "`bpf(BPF_PROG_LOAD)` failed: Invalid argument (os error 22)"
        );
        assert!(!e.is_permission());
        assert!(SyscallError::new("x", io::Error::from_raw_os_error(1)).is_permission());
    }

    #[test]
    fn the_hook_is_removed_when_its_guard_drops() {
        {
            let _g = override_syscall(|_| Err(io::Error::from_raw_os_error(libc::ENOSYS)));
            let mut attr = BpfAttr::default();
            let e = syscall(Syscall::Bpf {
                cmd: BpfCmd::MapGetNextKey,
                attr: &mut attr,
            })
            .unwrap_err();
            assert_eq!(e.errno(), Some(libc::ENOSYS));
            assert_eq!(e.call, "bpf(BPF_MAP_GET_NEXT_KEY)");
        }
        assert!(HOOK.with(|h| h.borrow().is_none()));
    }
}
