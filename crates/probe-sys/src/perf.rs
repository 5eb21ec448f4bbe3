//! `perf_event_open(2)` and the perf-event `ioctl(2)`s: CPU-clock timers (`profile`/`tick`),
//! tracepoints, and uprobes on the dynamic `uprobe` PMU.
//!
//! `struct perf_event_attr` (include/uapi/linux/perf_event.h): `type` @0, `size` @4, `config` @8,
//! `sample_period` @16, flags @40 (bit 0 `disabled`), `wakeup_events` @48, `config1` @56,
//! `config2` @64.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::{PERF_ATTR_SIZE, PerfAttr, PerfIoctl, SysResult, Syscall, owned_fd, syscall};

/// What a perf event counts.
#[derive(Debug, Clone, Copy)]
pub enum PerfKind<'a> {
    /// `PERF_TYPE_SOFTWARE`/`PERF_COUNT_SW_CPU_CLOCK` sampling every `period_ns` nanoseconds.
    CpuClock {
        /// Sampling period in ns.
        period_ns: u64,
    },
    /// `PERF_TYPE_TRACEPOINT` with the tracefs event id (`events/<cat>/<name>/id`).
    Tracepoint {
        /// The tracefs id.
        id: u64,
    },
    /// A uprobe on the dynamic `uprobe` PMU (`/sys/bus/event_source/devices/uprobe/type`):
    /// `config1` = the path, `config2` = the file offset, `config` = the retprobe bit and the
    /// reference-counter offset placed where that PMU's `format/` files say.
    Uprobe {
        /// `perf_event_attr.type` of the uprobe PMU.
        pmu_type: u32,
        /// `config` (retprobe bit, `ref_ctr_offset` field).
        config: u64,
        /// The probed file.
        path: &'a CStr,
        /// File offset of the probed instruction.
        offset: u64,
    },
}

/// Which tasks and CPUs a perf event watches (perf_event_open(2): `pid`, `cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every process on one CPU (`pid = -1`, `cpu`).
    Cpu(u32),
    /// One process, all its threads, on every CPU (`pid`, `cpu = -1`).
    Process(u32),
}

/// `perf_event_open(2)` of `kind` in `scope`, with `PERF_FLAG_FD_CLOEXEC`. Timers and tracepoints
/// are created disabled (enable them with [`enable`] after [`set_bpf`]); uprobes enabled.
///
/// # Errors
/// [`crate::SyscallError`] naming `perf_event_open` (ENOENT for an unknown tracepoint id,
/// EACCES/EPERM without CAP_PERFMON).
pub fn perf_event_open(kind: PerfKind<'_>, scope: Scope) -> SysResult<OwnedFd> {
    const PERF_TYPE_SOFTWARE: u32 = 1;
    const PERF_TYPE_TRACEPOINT: u32 = 2;
    const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
    const DISABLED: u64 = 1;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    let mut attr = PerfAttr::default();
    attr.set_u32(4, PERF_ATTR_SIZE as u32);
    match kind {
        PerfKind::CpuClock { period_ns } => {
            attr.set_u32(0, PERF_TYPE_SOFTWARE)
                .set_u64(8, PERF_COUNT_SW_CPU_CLOCK)
                .set_u64(16, period_ns.max(1))
                .set_u64(40, DISABLED);
        }
        PerfKind::Tracepoint { id } => {
            attr.set_u32(0, PERF_TYPE_TRACEPOINT)
                .set_u64(8, id)
                .set_u64(16, 1)
                .set_u64(40, DISABLED)
                .set_u32(48, 1);
        }
        PerfKind::Uprobe {
            pmu_type,
            config,
            path,
            offset,
        } => {
            attr.set_u32(0, pmu_type)
                .set_u64(8, config)
                .set_u64(56, path.as_ptr() as u64)
                .set_u64(64, offset);
        }
    }
    let (pid, cpu) = match scope {
        Scope::Cpu(c) => (-1, c as libc::c_int),
        Scope::Process(p) => (p as libc::pid_t, -1),
    };
    syscall(Syscall::PerfEventOpen {
        attr: &mut attr,
        pid,
        cpu,
        group_fd: -1,
        flags: PERF_FLAG_FD_CLOEXEC,
    })
    .map(owned_fd)
}

/// `ioctl(PERF_EVENT_IOC_SET_BPF)`: runs the program `prog` (a descriptor number) on every
/// sample of `event` (Linux 4.1).
///
/// # Errors
/// [`crate::SyscallError`] naming `ioctl(PERF_EVENT_IOC_SET_BPF)` (EEXIST when one is attached,
/// EBADF/EINVAL when `prog` is not a suitable program).
pub fn set_bpf(event: &OwnedFd, prog: RawFd) -> SysResult<()> {
    syscall(Syscall::PerfIoctl {
        fd: event.as_raw_fd(),
        request: PerfIoctl::SetBpf,
        arg: prog as libc::c_ulong,
    })
    .map(|_| ())
}

/// `ioctl(PERF_EVENT_IOC_ENABLE)`.
///
/// # Errors
/// [`crate::SyscallError`] naming `ioctl(PERF_EVENT_IOC_ENABLE)`.
pub fn enable(event: &OwnedFd) -> SysResult<()> {
    syscall(Syscall::PerfIoctl {
        fd: event.as_raw_fd(),
        request: PerfIoctl::Enable,
        arg: 0,
    })
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::override_syscall;
    use std::io;

    #[test]
    fn a_timer_is_opened_disabled_on_its_cpu_and_errors_name_the_call() {
        let _g = override_syscall(|call| match call {
            Syscall::PerfEventOpen { attr, pid, cpu, .. } => {
                assert_eq!((attr.u32(0), attr.u32(4)), (1, PERF_ATTR_SIZE as u32));
                assert_eq!(attr.u64(16), 1_000_000, "period in ns");
                assert_eq!(attr.u64(40) & 1, 1, "disabled");
                assert_eq!((*pid, *cpu), (-1, 3));
                Err(io::Error::from_raw_os_error(libc::EACCES))
            }
            other => panic!("unexpected call {}", other.call()),
        });
        let e = perf_event_open(
            PerfKind::CpuClock {
                period_ns: 1_000_000,
            },
            Scope::Cpu(3),
        )
        .unwrap_err();
        assert_eq!(e.call, "perf_event_open");
        assert!(e.is_permission());
    }

    #[test]
    fn a_uprobe_event_carries_path_and_offset_for_one_process() {
        let path = c"/bin/true";
        let _g = override_syscall(move |call| match call {
            Syscall::PerfEventOpen { attr, pid, cpu, .. } => {
                assert_eq!(attr.u32(0), 9);
                assert_eq!(attr.u64(8), 1, "retprobe bit");
                assert_eq!(attr.u64(56), path.as_ptr() as u64);
                assert_eq!(attr.u64(64), 0x1234);
                assert_eq!((*pid, *cpu), (42, -1));
                Err(io::Error::from_raw_os_error(libc::ESRCH))
            }
            other => panic!("unexpected call {}", other.call()),
        });
        let e = perf_event_open(
            PerfKind::Uprobe {
                pmu_type: 9,
                config: 1,
                path,
                offset: 0x1234,
            },
            Scope::Process(42),
        )
        .unwrap_err();
        assert_eq!(e.errno(), Some(libc::ESRCH));
    }
}
