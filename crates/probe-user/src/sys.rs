//! The kernel interface for uprobes: every `bpf(2)`, `perf_event_open(2)` and `ioctl(2)` call of
//! this crate goes through this module, and every failure names the call.
//!
//! Two ways to attach a loaded BPF program (type `BPF_PROG_TYPE_KPROBE`) to user-space sites:
//!
//! - [`attach_uprobe_multi`]: one `BPF_LINK_CREATE` with attach type `BPF_TRACE_UPROBE_MULTI`
//!   (Linux ≥ 6.6; `include/uapi/linux/bpf.h`, `kernel/trace/bpf_trace.c`
//!   `bpf_uprobe_multi_link_attach`) attaches the program to any number of offsets of one file,
//!   with per-site reference-counter offsets (USDT semaphores) and cookies, an optional pid filter
//!   and a return-probe flag. The program must have been loaded with `expected_attach_type =
//!   BPF_TRACE_UPROBE_MULTI`. Closing the link detaches every site at once.
//! - [`attach_uprobe_perf`]: the fallback, one `perf_event_open` per site on the dynamic `uprobe`
//!   PMU (`/sys/bus/event_source/devices/uprobe/type`; `config1` = path pointer, `config2` = file
//!   offset, the `retprobe` and `ref_ctr_offset` fields placed where that PMU's `format/` files say),
//!   then `PERF_EVENT_IOC_SET_BPF` and `PERF_EVENT_IOC_ENABLE` (perf_event_open(2)). Any
//!   kprobe-type program can be attached this way.
//!
//! A minimal program loader ([`prog_load`], [`array_map_create`], [`map_lookup`]) is here for
//! feature probes ([`uprobe_multi_supported`]) and tests; the probe runtime has the full one.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::OnceLock;

use crate::FileOffset;

/// A failed system call, named.
#[derive(Debug, thiserror::Error)]
#[error("{call} failed ({context}): {source}")]
pub struct SyscallError {
    /// The call, e.g. `bpf(BPF_LINK_CREATE)`.
    pub call: &'static str,
    /// What it was for (path, offset, pid).
    pub context: String,
    /// The errno.
    pub source: std::io::Error,
    /// The verifier log, for `bpf(BPF_PROG_LOAD)` failures.
    pub log: Option<String>,
}

/// Errors of the uprobe kernel interface.
#[derive(Debug, thiserror::Error)]
pub enum SysError {
    /// A system call failed.
    #[error(transparent)]
    Syscall(#[from] SyscallError),
    /// A sysfs file describing the uprobe PMU was missing or malformed.
    #[error("uprobe PMU: cannot use {path}: {reason}")]
    Pmu {
        /// The sysfs file.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// The arguments cannot be passed to the kernel (a path with a NUL byte, no sites).
    #[error("invalid uprobe attach request: {0}")]
    Invalid(String),
}

/// `bpf(2)` commands used here (`enum bpf_cmd`).
const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_PROG_LOAD: u32 = 5;
const BPF_LINK_CREATE: u32 = 28;

/// `BPF_PROG_TYPE_KPROBE`: the program type of kprobes and uprobes.
pub const BPF_PROG_TYPE_KPROBE: u32 = 2;
/// `BPF_TRACE_UPROBE_MULTI` (`enum bpf_attach_type`, Linux 6.6).
pub const BPF_TRACE_UPROBE_MULTI: u32 = 48;
/// `BPF_F_UPROBE_MULTI_RETURN`: attach as return probes (uretprobes).
const BPF_F_UPROBE_MULTI_RETURN: u32 = 1;
/// `BPF_PERF_EVENT` (`enum bpf_attach_type`): a BPF link to a perf event.
const BPF_PERF_EVENT: u32 = 41;
/// `BPF_MAP_TYPE_ARRAY`.
const BPF_MAP_TYPE_ARRAY: u32 = 2;

/// `_IOW('$', 8, __u32)` and `_IO('$', 0)` from `include/uapi/linux/perf_event.h`.
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// A `union bpf_attr` buffer: 128 zeroed, 8-aligned bytes (the kernel zero-extends a shorter attr
/// and accepts a longer one whose extra bytes are zero).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Self {
        Attr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

/// Calls `bpf(cmd, attr, sizeof attr)` and returns the non-negative result.
fn bpf(
    cmd: u32,
    attr: &mut Attr,
    call: &'static str,
    context: impl FnOnce() -> String,
) -> Result<i64, SyscallError> {
    // SAFETY: `attr` points to 128 initialized bytes that live across the call; every pointer the
    // caller stored in it refers to memory that outlives this call (the callers keep the buffers in
    // locals until after it returns), and the kernel reads at most the given size.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr.0.as_mut_ptr(),
            attr.0.len() as libc::c_long,
        )
    };
    if r < 0 {
        return Err(SyscallError {
            call,
            context: context(),
            source: std::io::Error::last_os_error(),
            log: None,
        });
    }
    Ok(r)
}

/// Wraps a new file descriptor returned by the kernel.
fn owned(fd: i64) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful syscall that creates a descriptor; nothing else
    // owns it, so `OwnedFd` may close it.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// One site of a [`attach_uprobe_multi`] request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UprobeSite {
    /// File offset of the probed instruction.
    pub offset: FileOffset,
    /// File offset of the u16 semaphore the kernel increments while the probe is attached (USDT),
    /// or `None`.
    pub ref_ctr_offset: Option<FileOffset>,
    /// A 64-bit value the program reads with `bpf_get_attach_cookie()` (which clause/site fired).
    pub cookie: u64,
}

/// Attaches `prog` (loaded with `expected_attach_type = BPF_TRACE_UPROBE_MULTI`) to every site of
/// the file at `path` with one uprobe_multi link; `pid` restricts it to one process (all threads),
/// `retprobe` makes the sites return probes (the site offsets must then be function entries).
///
/// Returns the link; dropping it detaches all sites. Linux ≥ 6.6.
///
/// # Errors
/// [`SysError::Invalid`] for an empty site list or a path with a NUL byte,
/// [`SysError::Syscall`] naming `bpf(BPF_LINK_CREATE)` otherwise (`EINVAL` on a bad offset or an
/// old kernel, `ESRCH` for a dead pid, `EBADF` when `prog` is not a BPF program).
pub fn attach_uprobe_multi(
    prog: RawFd,
    path: &Path,
    sites: &[UprobeSite],
    pid: Option<u32>,
    retprobe: bool,
) -> Result<OwnedFd, SysError> {
    if sites.is_empty() {
        return Err(SysError::Invalid("no uprobe sites".into()));
    }
    let cpath = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| SysError::Invalid(format!("path {} contains a NUL byte", path.display())))?;
    let offsets: Vec<u64> = sites.iter().map(|s| s.offset.0).collect();
    let cookies: Vec<u64> = sites.iter().map(|s| s.cookie).collect();
    let ref_ctrs: Vec<u64> = sites
        .iter()
        .map(|s| s.ref_ctr_offset.map_or(0, |o| o.0))
        .collect();
    let any_ref = sites.iter().any(|s| s.ref_ctr_offset.is_some());
    let mut attr = Attr::new();
    attr.u32(0, prog as u32)
        .u32(8, BPF_TRACE_UPROBE_MULTI)
        .u64(16, cpath.as_ptr() as u64)
        .u64(24, offsets.as_ptr() as u64)
        .u64(32, if any_ref { ref_ctrs.as_ptr() as u64 } else { 0 })
        .u64(40, cookies.as_ptr() as u64)
        .u32(48, sites.len() as u32)
        .u32(
            52,
            if retprobe {
                BPF_F_UPROBE_MULTI_RETURN
            } else {
                0
            },
        )
        .u32(56, pid.unwrap_or(0));
    let fd = bpf(
        BPF_LINK_CREATE,
        &mut attr,
        "bpf(BPF_LINK_CREATE uprobe_multi)",
        || {
            format!(
                "{} site(s) in {}, first offset {}, pid {}",
                sites.len(),
                path.display(),
                sites[0].offset,
                pid.map_or("any".to_string(), |p| p.to_string())
            )
        },
    )?;
    // The kernel copied the arrays during the call; they may be freed now.
    drop((cpath, offsets, cookies, ref_ctrs));
    Ok(owned(fd))
}

/// The uprobe PMU's parameters from sysfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UprobePmu {
    /// `perf_event_attr.type` of the dynamic `uprobe` PMU.
    pub pmu_type: u32,
    /// Bit of `config` that makes a return probe (`format/retprobe`: `config:0`).
    pub retprobe_bit: u32,
    /// Shift of the ref_ctr_offset field in `config` (`format/ref_ctr_offset`: `config:32-63`).
    pub ref_ctr_shift: Option<u32>,
}

/// Reads the uprobe PMU's type and config layout from `/sys/bus/event_source/devices/uprobe/`
/// (cached after the first call).
///
/// # Errors
/// [`SysError::Pmu`] when the files are missing (kernel without `CONFIG_UPROBE_EVENTS`) or
/// malformed.
pub fn uprobe_pmu() -> Result<UprobePmu, SysError> {
    static PMU: OnceLock<Result<UprobePmu, String>> = OnceLock::new();
    const DIR: &str = "/sys/bus/event_source/devices/uprobe";
    let r = PMU.get_or_init(|| {
        let read = |f: &str| {
            std::fs::read_to_string(format!("{DIR}/{f}")).map_err(|e| format!("{DIR}/{f}: {e}"))
        };
        let pmu_type = read("type")?
            .trim()
            .parse::<u32>()
            .map_err(|e| format!("{DIR}/type: {e}"))?;
        // `config:N` or `config:N-M`: the first bit.
        let first_bit = |t: &str| -> Option<u32> {
            t.trim()
                .strip_prefix("config:")?
                .split('-')
                .next()?
                .parse()
                .ok()
        };
        let retprobe_bit = first_bit(&read("format/retprobe")?)
            .ok_or(format!("{DIR}/format/retprobe: not config:N"))?;
        let ref_ctr_shift = read("format/ref_ctr_offset")
            .ok()
            .and_then(|t| first_bit(&t));
        Ok(UprobePmu {
            pmu_type,
            retprobe_bit,
            ref_ctr_shift,
        })
    });
    r.clone().map_err(|reason| SysError::Pmu {
        path: DIR.into(),
        reason,
    })
}

/// A perf-event uprobe with a BPF program attached; dropping it detaches.
#[derive(Debug)]
pub struct PerfUprobe {
    fd: OwnedFd,
    /// The `BPF_PERF_EVENT` link when the site has a cookie (dropped before the event).
    link: Option<OwnedFd>,
}

impl PerfUprobe {
    /// The perf event's file descriptor.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// True when the program is attached through a BPF link (a site with a cookie).
    pub fn has_link(&self) -> bool {
        self.link.is_some()
    }
}

/// Attaches `prog` (a `BPF_PROG_TYPE_KPROBE` program) to one site through a perf event on
/// the uprobe PMU: for process `pid` (all its threads), or every process when `None`. A non-zero
/// cookie is attached with a `BPF_LINK_CREATE` (`BPF_PERF_EVENT`) link, which carries it;
/// otherwise with `PERF_EVENT_IOC_SET_BPF`.
///
/// # Errors
/// [`SysError::Pmu`] when the PMU is unavailable; [`SysError::Syscall`] naming
/// `perf_event_open(uprobe)`, `bpf(BPF_LINK_CREATE perf_event)` or
/// `ioctl(PERF_EVENT_IOC_SET_BPF)` / `ioctl(PERF_EVENT_IOC_ENABLE)`.
pub fn attach_uprobe_perf(
    prog: RawFd,
    path: &Path,
    site: UprobeSite,
    pid: Option<u32>,
    retprobe: bool,
) -> Result<PerfUprobe, SysError> {
    let pmu = uprobe_pmu()?;
    let cpath = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| SysError::Invalid(format!("path {} contains a NUL byte", path.display())))?;
    let mut config = 0u64;
    if retprobe {
        config |= 1u64 << pmu.retprobe_bit;
    }
    if let Some(r) = site.ref_ctr_offset {
        let shift = pmu.ref_ctr_shift.ok_or_else(|| SysError::Pmu {
            path: "/sys/bus/event_source/devices/uprobe/format/ref_ctr_offset".into(),
            reason: "absent: this kernel cannot maintain USDT semaphores".into(),
        })?;
        config |= r.0 << shift;
    }
    // struct perf_event_attr (include/uapi/linux/perf_event.h): type @0, size @4, config @8,
    // config1 (uprobe_path) @56, config2 (probe_offset) @64. PERF_ATTR_SIZE_VER7 = 128.
    let mut attr = Attr::new();
    attr.u32(0, pmu.pmu_type)
        .u32(4, 128)
        .u64(8, config)
        .u64(56, cpath.as_ptr() as u64)
        .u64(64, site.offset.0);
    let context = || {
        format!(
            "{} offset {} pid {}",
            path.display(),
            site.offset,
            pid.map_or(-1, |p| p as i64)
        )
    };
    // A system-wide uprobe event is opened with pid -1 on one CPU (it fires on every CPU anyway:
    // uprobe events filter by task, not CPU); a per-process one with cpu -1.
    let (p, cpu) = match pid {
        Some(p) => (p as libc::pid_t, -1),
        None => (-1, 0),
    };
    // SAFETY: `attr` is a zero-initialized perf_event_attr of the declared size whose path pointer
    // (`cpath`) outlives the call; the other arguments are plain integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.0.as_mut_ptr(),
            p,
            cpu,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(SyscallError {
            call: "perf_event_open(uprobe)",
            context: context(),
            source: std::io::Error::last_os_error(),
            log: None,
        }
        .into());
    }
    let fd = owned(fd);
    drop(cpath);
    // A BPF link carries the site's cookie (Linux ≥ 5.15, `BPF_PERF_EVENT`); without a cookie the
    // older ioctl does the same job.
    if site.cookie != 0 {
        let mut attr = Attr::new();
        attr.u32(0, prog as u32)
            .u32(4, fd.as_raw_fd() as u32)
            .u32(8, BPF_PERF_EVENT)
            .u64(16, site.cookie);
        let link = bpf(
            BPF_LINK_CREATE,
            &mut attr,
            "bpf(BPF_LINK_CREATE perf_event)",
            context,
        )?;
        return Ok(PerfUprobe {
            fd,
            link: Some(owned(link)),
        });
    }
    for (req, arg, call) in [
        (
            PERF_EVENT_IOC_SET_BPF,
            prog as libc::c_ulong,
            "ioctl(PERF_EVENT_IOC_SET_BPF)",
        ),
        (PERF_EVENT_IOC_ENABLE, 0, "ioctl(PERF_EVENT_IOC_ENABLE)"),
    ] {
        // SAFETY: `fd` is a perf event we own; both requests take an integer argument, not a pointer.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), req, arg) };
        if r < 0 {
            return Err(SyscallError {
                call,
                context: context(),
                source: std::io::Error::last_os_error(),
                log: None,
            }
            .into());
        }
    }
    Ok(PerfUprobe { fd, link: None })
}

/// Loads a BPF program of `prog_type` from raw 8-byte instructions, with `expected_attach_type`,
/// license `GPL` (helpers such as `bpf_probe_read_user` require it) and a verifier log kept on
/// failure.
///
/// # Errors
/// [`SyscallError`] naming `bpf(BPF_PROG_LOAD)` with the verifier log.
pub fn prog_load(
    prog_type: u32,
    expected_attach_type: u32,
    insns: &[u64],
    name: &str,
) -> Result<OwnedFd, SyscallError> {
    let license = c"GPL";
    let attempt = |log: &mut [u8]| {
        let mut attr = Attr::new();
        attr.u32(0, prog_type)
            .u32(4, insns.len() as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(68, expected_attach_type);
        if !log.is_empty() {
            attr.u32(24, 1)
                .u32(28, log.len() as u32)
                .u64(32, log.as_mut_ptr() as u64);
        }
        let n = name.len().min(15);
        attr.0[48..48 + n].copy_from_slice(&name.as_bytes()[..n]);
        bpf(BPF_PROG_LOAD, &mut attr, "bpf(BPF_PROG_LOAD)", || {
            format!("program {name}")
        })
    };
    // Without a log first (faster); on failure again with one, to quote the verifier.
    if let Ok(fd) = attempt(&mut []) {
        return Ok(owned(fd));
    }
    let mut log = vec![0u8; 1 << 20];
    match attempt(&mut log) {
        Ok(fd) => Ok(owned(fd)),
        Err(mut e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            e.log = Some(String::from_utf8_lossy(&log[..end]).into_owned());
            Err(e)
        }
    }
}

/// Creates a `BPF_MAP_TYPE_ARRAY` map of `entries` u64 values (key u32).
///
/// # Errors
/// [`SyscallError`] naming `bpf(BPF_MAP_CREATE)`.
pub fn array_map_create(entries: u32) -> Result<OwnedFd, SyscallError> {
    let mut attr = Attr::new();
    attr.u32(0, BPF_MAP_TYPE_ARRAY)
        .u32(4, 4)
        .u32(8, 8)
        .u32(12, entries);
    bpf(BPF_MAP_CREATE, &mut attr, "bpf(BPF_MAP_CREATE)", || {
        format!("array of {entries} u64")
    })
    .map(owned)
}

/// Reads the u64 value at `key` of an array map made by [`array_map_create`].
///
/// # Errors
/// [`SyscallError`] naming `bpf(BPF_MAP_LOOKUP_ELEM)`.
pub fn map_lookup(map: RawFd, key: u32) -> Result<u64, SyscallError> {
    let mut value = 0u64;
    let mut attr = Attr::new();
    attr.u32(0, map as u32)
        .u64(8, &key as *const u32 as u64)
        .u64(16, &mut value as *mut u64 as u64);
    bpf(
        BPF_MAP_LOOKUP_ELEM,
        &mut attr,
        "bpf(BPF_MAP_LOOKUP_ELEM)",
        || format!("key {key}"),
    )?;
    Ok(value)
}

/// The instructions of a uprobe program that stops the process that hits it: `bpf_send_signal
/// (SIGSTOP)` (helper 109, Linux ≥ 5.3), delivered when the task returns to user mode, so the
/// process stops *at* the probed instruction, before executing it.
///
/// Attached at an executable's entry point, it gives a rendezvous where the process's memory can
/// be written before any of its code runs (see [`crate::attach`]; `bpf_probe_write_user` would do
/// it from the program but is refused under kernel lockdown).
pub fn stop_self_program() -> Vec<u64> {
    let insn = |op: u8, dst: u8, imm: i32| {
        u64::from(op) | (u64::from(dst) << 8) | (u64::from(imm as u32) << 32)
    };
    vec![
        insn(0xb7, 1, libc::SIGSTOP), // r1 = SIGSTOP
        insn(0x85, 0, 109),           // bpf_send_signal(r1)
        insn(0xb7, 0, 0),             // r0 = 0
        insn(0x95, 0, 0),             // exit
    ]
}

/// Sends `sig` to process `pid` (kill(2)).
///
/// # Errors
/// [`SyscallError`] naming `kill`.
pub fn kill(pid: u32, sig: i32) -> Result<(), SyscallError> {
    // SAFETY: kill(2) takes two integers and touches no memory of ours.
    let r = unsafe { libc::kill(pid as libc::pid_t, sig) };
    if r < 0 {
        return Err(SyscallError {
            call: "kill",
            context: format!("pid {pid} signal {sig}"),
            source: std::io::Error::last_os_error(),
            log: None,
        });
    }
    Ok(())
}

/// True when the kernel can attach uprobe_multi links (checked once, then cached).
///
/// The probe loads a two-instruction program with `expected_attach_type = BPF_TRACE_UPROBE_MULTI`
/// and links it to `/` at offset 0: a kernel with uprobe_multi rejects the path (it is not a
/// regular file) with `EBADF`, one without rejects the attach type with `EINVAL`. A failure to load
/// the program (no privileges) reports `false`.
pub fn uprobe_multi_supported() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        // r0 = 0; exit
        let insns = [0x0000_0000_0000_00b7u64, 0x0000_0000_0000_0095];
        let Ok(prog) = prog_load(
            BPF_PROG_TYPE_KPROBE,
            BPF_TRACE_UPROBE_MULTI,
            &insns,
            "sl_probe_umulti",
        ) else {
            return false;
        };
        let site = UprobeSite {
            offset: FileOffset(0),
            ref_ctr_offset: None,
            cookie: 0,
        };
        match attach_uprobe_multi(prog.as_raw_fd(), Path::new("/"), &[site], None, false) {
            Ok(_) => true,
            Err(SysError::Syscall(e)) => e.source.raw_os_error() == Some(libc::EBADF),
            Err(_) => false,
        }
    })
}
