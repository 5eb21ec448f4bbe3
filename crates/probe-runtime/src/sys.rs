//! The kernel-facing layer: one function per kernel interface (bpf(2) commands, perf_event_open(2),
//! ioctl(2) on perf events, mount(2) for tracefs). Every failure is a [`SyscallError`] naming the
//! call. Everything `unsafe` in this crate lives here and in [`crate::ringbuf`].
//!
//! Attribute layouts follow `include/uapi/linux/bpf.h` (`union bpf_attr`) and
//! `include/uapi/linux/perf_event.h` (`struct perf_event_attr`) of Linux 6.x; the kernel accepts a
//! shorter attribute than its own and zero-fills the rest, and we zero every field we do not set.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A failed system call: which one (e.g. `bpf(BPF_PROG_LOAD)`) and the OS error.
///
/// Its message names the call only; the OS error is its [`std::error::Error::source`], so a
/// chain printed with `{:#}` reads `bpf(BPF_PROG_LOAD): Invalid argument (os error 22)` once
/// (putting the error in the message too printed it twice, and three times under a wrapper
/// doing the same).
#[derive(Debug, thiserror::Error)]
#[error("{call}")]
pub struct SyscallError {
    /// The call and command that failed, e.g. `bpf(BPF_MAP_CREATE)`.
    pub call: &'static str,
    /// The error the kernel returned.
    #[source]
    pub source: io::Error,
}

impl SyscallError {
    fn last(call: &'static str) -> SyscallError {
        SyscallError {
            call,
            source: io::Error::last_os_error(),
        }
    }
    /// True when the kernel said EPERM/EACCES (missing CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN).
    pub fn is_permission(&self) -> bool {
        matches!(
            self.source.raw_os_error(),
            Some(libc::EPERM) | Some(libc::EACCES)
        )
    }
}

/// Result of a kernel call.
pub type SysResult<T> = Result<T, SyscallError>;

// bpf(2) commands (enum bpf_cmd).
const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_int = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_MAP_DELETE_ELEM: libc::c_int = 3;
const BPF_MAP_GET_NEXT_KEY: libc::c_int = 4;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_PROG_TEST_RUN: libc::c_int = 10;
const BPF_RAW_TRACEPOINT_OPEN: libc::c_int = 17;

/// Map types used by the code generator (enum bpf_map_type).
pub mod map_type {
    /// BPF_MAP_TYPE_HASH
    pub const HASH: u32 = 1;
    /// BPF_MAP_TYPE_ARRAY
    pub const ARRAY: u32 = 2;
    /// BPF_MAP_TYPE_PERCPU_HASH
    pub const PERCPU_HASH: u32 = 5;
    /// BPF_MAP_TYPE_PERCPU_ARRAY
    pub const PERCPU_ARRAY: u32 = 6;
    /// BPF_MAP_TYPE_RINGBUF (Linux 5.8)
    pub const RINGBUF: u32 = 27;
}

/// Program types (enum bpf_prog_type).
pub mod prog_type {
    /// BPF_PROG_TYPE_KPROBE: context is `struct pt_regs` (kprobes and uprobes).
    pub const KPROBE: u32 = 2;
    /// BPF_PROG_TYPE_TRACEPOINT: context is the tracefs record (format file layout).
    pub const TRACEPOINT: u32 = 5;
    /// BPF_PROG_TYPE_PERF_EVENT: context is `struct bpf_perf_event_data`.
    pub const PERF_EVENT: u32 = 7;
    /// BPF_PROG_TYPE_RAW_TRACEPOINT: context is the tracepoint's `u64` arguments.
    pub const RAW_TRACEPOINT: u32 = 17;
}

/// Performs bpf(2) with `attr` as the attribute block.
fn bpf<T>(cmd: libc::c_int, attr: &mut T, call: &'static str) -> SysResult<libc::c_long> {
    // SAFETY: `attr` is a live, initialized `#[repr(C)]` struct laid out as the prefix of
    // `union bpf_attr` for `cmd`, and its size is passed, so the kernel reads/writes only it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(SyscallError::last(call))
    } else {
        Ok(r)
    }
}

fn fd_from(r: libc::c_long) -> OwnedFd {
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
    map_ifindex: u32,
    btf_fd: u32,
    btf_key_type_id: u32,
    btf_value_type_id: u32,
    btf_vmlinux_value_type_id: u32,
    map_extra: u64,
}

fn obj_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, b) in name
        .bytes()
        .filter(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .take(15)
        .enumerate()
    {
        out[i] = b;
    }
    out
}

/// `bpf(BPF_MAP_CREATE)`: a map of `map_type` with the given key/value sizes (bytes) and capacity.
/// For a ring buffer `key_size = value_size = 0` and `max_entries` is the data size in bytes
/// (a power-of-two multiple of the page size).
pub fn map_create(
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    name: &str,
) -> SysResult<OwnedFd> {
    map_create_flags(map_type, key_size, value_size, max_entries, 0, name)
}

/// [`map_create`] with `map_flags` (e.g. `BPF_F_NO_PREALLOC` = 1 for hash maps).
pub fn map_create_flags(
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    name: &str,
) -> SysResult<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type,
        key_size,
        value_size,
        max_entries,
        map_flags,
        map_name: obj_name(name),
        ..Default::default()
    };
    bpf(BPF_MAP_CREATE, &mut attr, "bpf(BPF_MAP_CREATE)").map(fd_from)
}

#[repr(C)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `bpf(BPF_MAP_UPDATE_ELEM)` with `BPF_ANY`. `key`/`value` must have the map's sizes (for per-CPU
/// maps, `value` holds one 8-byte-aligned slot per possible CPU).
pub fn map_update(map: &OwnedFd, key: &[u8], value: &[u8]) -> SysResult<()> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: key.as_ptr() as u64,
        value: value.as_ptr() as u64,
        flags: 0,
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr, "bpf(BPF_MAP_UPDATE_ELEM)").map(|_| ())
}

/// `bpf(BPF_MAP_LOOKUP_ELEM)`: fills `value` (the map's value size, or one slot per possible CPU
/// for per-CPU maps). Returns `false` when the key is absent (ENOENT).
pub fn map_lookup(map: &OwnedFd, key: &[u8], value: &mut [u8]) -> SysResult<bool> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: key.as_ptr() as u64,
        value: value.as_mut_ptr() as u64,
        flags: 0,
    };
    match bpf(BPF_MAP_LOOKUP_ELEM, &mut attr, "bpf(BPF_MAP_LOOKUP_ELEM)") {
        Ok(_) => Ok(true),
        Err(e) if e.source.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `bpf(BPF_MAP_DELETE_ELEM)`. Returns `false` when the key was absent.
pub fn map_delete(map: &OwnedFd, key: &[u8]) -> SysResult<bool> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: key.as_ptr() as u64,
        value: 0,
        flags: 0,
    };
    match bpf(BPF_MAP_DELETE_ELEM, &mut attr, "bpf(BPF_MAP_DELETE_ELEM)") {
        Ok(_) => Ok(true),
        Err(e) if e.source.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `bpf(BPF_MAP_GET_NEXT_KEY)`: writes the key after `key` (or the first key when `key` is
/// `None`) into `next`. Returns `false` at the end of the map.
pub fn map_next_key(map: &OwnedFd, key: Option<&[u8]>, next: &mut [u8]) -> SysResult<bool> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: key.map_or(0, |k| k.as_ptr() as u64),
        value: next.as_mut_ptr() as u64,
        flags: 0,
    };
    match bpf(BPF_MAP_GET_NEXT_KEY, &mut attr, "bpf(BPF_MAP_GET_NEXT_KEY)") {
        Ok(_) => Ok(true),
        Err(e) if e.source.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// `bpf(BPF_MAP_UPDATE_BATCH)` (Linux 5.6): writes `count` keys and values in one call. `keys`
/// and `values` hold `count` entries of the map's key and value sizes, back to back.
pub fn map_update_batch(map: &OwnedFd, keys: &[u8], values: &[u8], count: u32) -> SysResult<()> {
    const BPF_MAP_UPDATE_BATCH: libc::c_int = 26;
    let mut attr = BatchAttr {
        keys: keys.as_ptr() as u64,
        values: values.as_ptr() as u64,
        count,
        map_fd: map.as_raw_fd() as u32,
        ..Default::default()
    };
    bpf(BPF_MAP_UPDATE_BATCH, &mut attr, "bpf(BPF_MAP_UPDATE_BATCH)").map(|_| ())
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// A program rejected by the verifier (or otherwise refused by `BPF_PROG_LOAD`), with its log.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct LoadError {
    /// The failed call.
    pub error: SyscallError,
    /// The verifier log (empty when the kernel produced none).
    pub log: String,
}

/// `bpf(BPF_PROG_LOAD)`: loads `insns` (8 bytes each, as the kernel's `struct bpf_insn`) as a program
/// of `prog_type` under the GPL license (tracing helpers need it). With `verbose` the verifier logs
/// every instruction (log level 2); otherwise the log is kept only for errors. On failure returns
/// the verifier log.
pub fn prog_load(
    prog_type: u32,
    insns: &[[u8; 8]],
    name: &str,
    verbose: bool,
) -> Result<OwnedFd, LoadError> {
    let license = c"GPL";
    let attempt = |log: &mut Vec<u8>, level: u32| {
        let mut attr = ProgLoadAttr {
            prog_type,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: level,
            log_size: log.len() as u32,
            log_buf: if log.is_empty() {
                0
            } else {
                log.as_mut_ptr() as u64
            },
            prog_name: obj_name(name),
            ..Default::default()
        };
        bpf(BPF_PROG_LOAD, &mut attr, "bpf(BPF_PROG_LOAD)")
    };
    let mut none = Vec::new();
    let first = if verbose {
        Err(SyscallError::last("bpf(BPF_PROG_LOAD)"))
    } else {
        attempt(&mut none, 0)
    };
    match first {
        Ok(fd) => Ok(fd_from(fd)),
        Err(_) => {
            // Retry with a log so the verifier's reason can be quoted.
            let mut log = vec![0u8; 4 << 20];
            match attempt(&mut log, if verbose { 2 } else { 1 }) {
                Ok(fd) => Ok(fd_from(fd)),
                Err(error) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    Err(LoadError {
                        error,
                        log: String::from_utf8_lossy(&log[..end]).into_owned(),
                    })
                }
            }
        }
    }
}

#[repr(C)]
#[derive(Default)]
struct RawTpAttr {
    name: u64,
    prog_fd: u32,
    _pad: u32,
    cookie: u64,
}

/// `bpf(BPF_RAW_TRACEPOINT_OPEN)`: attaches a raw-tracepoint program to tracepoint `name` (e.g.
/// `sys_enter`). The program stays attached while the returned descriptor is open (Linux 4.17).
pub fn raw_tracepoint_open(name: &str, prog: &OwnedFd) -> SysResult<OwnedFd> {
    let cname = CString::new(name).map_err(|_| SyscallError {
        call: "bpf(BPF_RAW_TRACEPOINT_OPEN)",
        source: io::Error::from(io::ErrorKind::InvalidInput),
    })?;
    let mut attr = RawTpAttr {
        name: cname.as_ptr() as u64,
        prog_fd: prog.as_raw_fd() as u32,
        ..Default::default()
    };
    bpf(
        BPF_RAW_TRACEPOINT_OPEN,
        &mut attr,
        "bpf(BPF_RAW_TRACEPOINT_OPEN)",
    )
    .map(fd_from)
}

#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// `bpf(BPF_PROG_TEST_RUN)` of a raw-tracepoint program with `ctx` as its `u64` arguments, on the
/// calling thread (so `pid`, `tid`, `execname` are ours). Returns the program's return value.
/// Raw-tracepoint test runs exist since Linux 5.10 (`bpf_prog_test_run_raw_tp`).
pub fn prog_test_run_raw_tp(prog: &OwnedFd, ctx: &[u64]) -> SysResult<u32> {
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        ctx_size_in: std::mem::size_of_val(ctx) as u32,
        ctx_in: if ctx.is_empty() {
            0
        } else {
            ctx.as_ptr() as u64
        },
        ..Default::default()
    };
    bpf(BPF_PROG_TEST_RUN, &mut attr, "bpf(BPF_PROG_TEST_RUN)")?;
    Ok(attr.retval)
}

/// `struct perf_event_attr` up to `config3` (PERF_ATTR_SIZE_VER8, 136 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    _reserved2: u16,
    aux_sample_size: u32,
    _reserved3: u32,
    sig_data: u64,
    config3: u64,
}

/// What a perf event counts.
#[derive(Debug, Clone, Copy)]
pub enum PerfKind {
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
}

/// `perf_event_open(2)` for all processes (`pid = -1`) on `cpu`, created disabled. Enable it with
/// [`perf_event_enable`] after attaching a program with [`perf_event_set_bpf`].
pub fn perf_event_open(kind: PerfKind, cpu: i32) -> SysResult<OwnedFd> {
    const PERF_TYPE_SOFTWARE: u32 = 1;
    const PERF_TYPE_TRACEPOINT: u32 = 2;
    const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
    const DISABLED: u64 = 1;
    let mut attr = PerfEventAttr {
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        flags: DISABLED,
        ..Default::default()
    };
    match kind {
        PerfKind::CpuClock { period_ns } => {
            attr.type_ = PERF_TYPE_SOFTWARE;
            attr.config = PERF_COUNT_SW_CPU_CLOCK;
            attr.sample_period = period_ns.max(1);
        }
        PerfKind::Tracepoint { id } => {
            attr.type_ = PERF_TYPE_TRACEPOINT;
            attr.config = id;
            attr.sample_period = 1;
            attr.wakeup_events = 1;
        }
    }
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    // SAFETY: `attr` is a fully initialized perf_event_attr whose `size` field matches its layout;
    // the kernel only reads it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &mut attr as *mut PerfEventAttr,
            -1 as libc::pid_t,
            cpu,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if r < 0 {
        Err(SyscallError::last("perf_event_open"))
    } else {
        Ok(fd_from(r))
    }
}

/// `ioctl(PERF_EVENT_IOC_SET_BPF)`: runs `prog` on every sample of `event` (Linux 4.1).
pub fn perf_event_set_bpf(event: &OwnedFd, prog: &OwnedFd) -> SysResult<()> {
    const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
    // SAFETY: the ioctl takes the program fd by value; both descriptors are open.
    let r = unsafe {
        libc::ioctl(
            event.as_raw_fd(),
            PERF_EVENT_IOC_SET_BPF as _,
            prog.as_raw_fd(),
        )
    };
    if r < 0 {
        Err(SyscallError::last("ioctl(PERF_EVENT_IOC_SET_BPF)"))
    } else {
        Ok(())
    }
}

/// `ioctl(PERF_EVENT_IOC_ENABLE)`.
pub fn perf_event_enable(event: &OwnedFd) -> SysResult<()> {
    const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
    // SAFETY: the ioctl takes no argument; the descriptor is open.
    let r = unsafe { libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_ENABLE as _, 0) };
    if r < 0 {
        Err(SyscallError::last("ioctl(PERF_EVENT_IOC_ENABLE)"))
    } else {
        Ok(())
    }
}

/// Number of possible CPUs (`/sys/devices/system/cpu/possible`), the slot count of per-CPU map
/// values.
pub fn possible_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| parse_cpu_list(&s).last().map(|c| c + 1))
        .unwrap_or(1)
}

/// CPUs that are online now (`/sys/devices/system/cpu/online`), where perf events can be opened.
pub fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| parse_cpu_list(&s))
        .unwrap_or_else(|_| vec![0])
}

/// Parses a kernel CPU list such as `0-3,5` (Documentation/admin-guide/cputopology.rst).
pub fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<usize>().ok()),
        }
    }
    out
}

/// `mount("nodev", dir, "tracefs")`: mounts tracefs where it is absent.
pub fn mount_tracefs(dir: &str) -> SysResult<()> {
    let src = c"nodev";
    let fstype = c"tracefs";
    let target = CString::new(dir).map_err(|_| SyscallError {
        call: "mount(tracefs)",
        source: io::Error::from(io::ErrorKind::InvalidInput),
    })?;
    // SAFETY: all three strings are NUL-terminated and live across the call; data is null.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r < 0 {
        Err(SyscallError::last("mount(tracefs)"))
    } else {
        Ok(())
    }
}

/// Raises RLIMIT_MEMLOCK to infinity (kernels before 5.11 charged BPF memory to it; harmless after).
pub fn raise_memlock() {
    let lim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: `lim` is a valid rlimit; failure is ignored (memcg accounting makes it moot on 5.11+).
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) };
}

/// `CLOCK_REALTIME - CLOCK_MONOTONIC` in ns (clock_gettime(2)), for `walltimestamp`.
pub fn wall_offset_ns() -> i64 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to fill.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    };
    read(libc::CLOCK_REALTIME) - read(libc::CLOCK_MONOTONIC)
}

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Installs a SIGINT/SIGTERM handler (sigaction(2), without `SA_RESTART` so blocking waits return
/// EINTR) that only sets a flag; [`interrupted`] reads it.
pub fn install_interrupt_handler() -> SysResult<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic, which is
        // async-signal-safe.
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigint as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r < 0 {
            return Err(SyscallError::last("sigaction(SIGINT)"));
        }
    }
    Ok(())
}

/// True once SIGINT or SIGTERM arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// True while process `pid` exists and is not a zombie (kill(2) with signal 0, then
/// `/proc/PID/stat`).
pub fn process_alive(pid: u32) -> bool {
    // SAFETY: signal 0 performs only the existence/permission check.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
        Err(_) => false,
    }
}
