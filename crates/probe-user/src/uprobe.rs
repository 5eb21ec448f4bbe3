//! Attaching a loaded BPF program (type `BPF_PROG_TYPE_KPROBE`) to user-space sites, over the
//! kernel calls of probe-sys (the one chokepoint for `bpf(2)` and `perf_event_open(2)`):
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
//! [`uprobe_multi_supported`] probes the kernel once; [`stop_self_program`] is the entry
//! rendezvous's program ([`crate::entry`]).

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use probe_sys::SyscallError;
use probe_sys::bpf::{self, ProgLoad, UprobeMulti, VerifierLog, attach_type, prog_type};
use probe_sys::perf::{self, PerfKind, Scope};

use crate::FileOffset;

/// Errors attaching uprobes.
#[derive(Debug, thiserror::Error)]
pub enum UprobeError {
    /// A system call failed (it names itself).
    #[error("attaching {sites} site(s) of {path}")]
    Syscall {
        /// The file.
        path: PathBuf,
        /// How many sites the call attached.
        sites: usize,
        /// The failed call.
        #[source]
        source: SyscallError,
    },
    /// A sysfs file describing the uprobe PMU was missing.
    #[error("reading the uprobe PMU's {path}")]
    PmuMissing {
        /// The sysfs file.
        path: String,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// A sysfs file describing the uprobe PMU did not hold what it should.
    #[error("uprobe PMU: {path} holds {text:?}, not {expected}")]
    PmuFormat {
        /// The sysfs file.
        path: String,
        /// What it holds.
        text: String,
        /// What it should hold.
        expected: &'static str,
    },
    /// The kernel has no `ref_ctr_offset` field in its uprobe PMU (Linux < 4.20), so it cannot
    /// maintain a USDT semaphore for a perf-event uprobe.
    #[error("this kernel's uprobe PMU has no ref_ctr_offset: it cannot maintain USDT semaphores")]
    NoRefCtr,
    /// The request has no sites.
    #[error("attaching uprobes to {0}: no sites")]
    NoSites(PathBuf),
    /// The path cannot be passed to the kernel.
    #[error("attaching uprobes: path {0} contains a NUL byte")]
    NulInPath(PathBuf),
}

impl UprobeError {
    /// The failed system call, if that was the cause.
    pub fn syscall(&self) -> Option<&SyscallError> {
        match self {
            UprobeError::Syscall { source, .. } => Some(source),
            _ => None,
        }
    }
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

fn c_path(path: &Path) -> Result<CString, UprobeError> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| UprobeError::NulInPath(path.to_path_buf()))
}

/// Attaches `prog` (loaded with `expected_attach_type = BPF_TRACE_UPROBE_MULTI`) to every site of
/// the file at `path` with one uprobe_multi link; `pid` restricts it to one process (all threads),
/// `retprobe` makes the sites return probes (the site offsets must then be function entries).
///
/// Returns the link; dropping it detaches all sites. Linux ≥ 6.6.
///
/// # Errors
/// [`UprobeError::NoSites`] for an empty site list, [`UprobeError::NulInPath`], and
/// [`UprobeError::Syscall`] naming `bpf(BPF_LINK_CREATE)` otherwise (`EINVAL` on a bad offset or
/// an old kernel, `ESRCH` for a dead pid, `EBADF` when `prog` is not a BPF program).
pub fn attach_uprobe_multi(
    prog: RawFd,
    path: &Path,
    sites: &[UprobeSite],
    pid: Option<u32>,
    retprobe: bool,
) -> Result<OwnedFd, UprobeError> {
    if sites.is_empty() {
        return Err(UprobeError::NoSites(path.to_path_buf()));
    }
    let cpath = c_path(path)?;
    let offsets: Vec<u64> = sites.iter().map(|s| s.offset.0).collect();
    let cookies: Vec<u64> = sites.iter().map(|s| s.cookie).collect();
    let ref_ctrs: Vec<u64> = if sites.iter().any(|s| s.ref_ctr_offset.is_some()) {
        sites
            .iter()
            .map(|s| s.ref_ctr_offset.map_or(0, |o| o.0))
            .collect()
    } else {
        Vec::new()
    };
    bpf::link_create_uprobe_multi(
        prog,
        &UprobeMulti {
            path: &cpath,
            offsets: &offsets,
            ref_ctr_offsets: &ref_ctrs,
            cookies: &cookies,
            pid,
            retprobe,
        },
    )
    .map_err(|source| UprobeError::Syscall {
        path: path.to_path_buf(),
        sites: sites.len(),
        source,
    })
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

/// Where the uprobe PMU describes itself.
const PMU_DIR: &str = "/sys/bus/event_source/devices/uprobe";

/// The first bit of a PMU format field `config:N` or `config:N-M`.
fn first_config_bit(text: &str) -> Option<u32> {
    text.trim()
        .strip_prefix("config:")?
        .split('-')
        .next()?
        .parse()
        .ok()
}

fn read_pmu() -> Result<UprobePmu, UprobeError> {
    let read = |f: &str| {
        let path = format!("{PMU_DIR}/{f}");
        std::fs::read_to_string(&path).map_err(|source| UprobeError::PmuMissing {
            path: path.clone(),
            source,
        })
    };
    let bad = |f: &str, text: &str, expected| UprobeError::PmuFormat {
        path: format!("{PMU_DIR}/{f}"),
        text: text.trim().to_string(),
        expected,
    };
    let t = read("type")?;
    let pmu_type = t
        .trim()
        .parse::<u32>()
        .map_err(|_| bad("type", &t, "a number"))?;
    let r = read("format/retprobe")?;
    let retprobe_bit =
        first_config_bit(&r).ok_or_else(|| bad("format/retprobe", &r, "config:N"))?;
    let ref_ctr_shift = read("format/ref_ctr_offset")
        .ok()
        .and_then(|t| first_config_bit(&t));
    Ok(UprobePmu {
        pmu_type,
        retprobe_bit,
        ref_ctr_shift,
    })
}

/// Reads the uprobe PMU's type and config layout from `/sys/bus/event_source/devices/uprobe/`
/// (cached after the first success).
///
/// # Errors
/// [`UprobeError::PmuMissing`] when the files are missing (kernel without
/// `CONFIG_UPROBE_EVENTS`), [`UprobeError::PmuFormat`] when they are malformed.
pub fn uprobe_pmu() -> Result<UprobePmu, UprobeError> {
    static PMU: OnceLock<UprobePmu> = OnceLock::new();
    if let Some(p) = PMU.get() {
        return Ok(*p);
    }
    let p = read_pmu()?;
    Ok(*PMU.get_or_init(|| p))
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
/// [`UprobeError::PmuMissing`]/[`UprobeError::PmuFormat`] when the PMU is unavailable,
/// [`UprobeError::NoRefCtr`] for a semaphore the kernel cannot count, and
/// [`UprobeError::Syscall`] naming `perf_event_open`, `bpf(BPF_LINK_CREATE)` or the ioctl.
pub fn attach_uprobe_perf(
    prog: RawFd,
    path: &Path,
    site: UprobeSite,
    pid: Option<u32>,
    retprobe: bool,
) -> Result<PerfUprobe, UprobeError> {
    let pmu = uprobe_pmu()?;
    let cpath = c_path(path)?;
    let mut config = 0u64;
    if retprobe {
        config |= 1u64 << pmu.retprobe_bit;
    }
    if let Some(r) = site.ref_ctr_offset {
        config |= r.0 << pmu.ref_ctr_shift.ok_or(UprobeError::NoRefCtr)?;
    }
    let err = |source| UprobeError::Syscall {
        path: path.to_path_buf(),
        sites: 1,
        source,
    };
    // A system-wide uprobe event is opened with pid -1 on one CPU (it fires on every CPU anyway:
    // uprobe events filter by task, not CPU); a per-process one with cpu -1.
    let scope = match pid {
        Some(p) => Scope::Process(p),
        None => Scope::Cpu(0),
    };
    let fd = perf::perf_event_open(
        PerfKind::Uprobe {
            pmu_type: pmu.pmu_type,
            config,
            path: &cpath,
            offset: site.offset.0,
        },
        scope,
    )
    .map_err(err)?;
    // A BPF link carries the site's cookie (Linux ≥ 5.15, `BPF_PERF_EVENT`); without a cookie the
    // older ioctl does the same job.
    if site.cookie != 0 {
        let link = bpf::link_create_perf_event(prog, fd.as_raw_fd(), site.cookie).map_err(err)?;
        return Ok(PerfUprobe {
            fd,
            link: Some(link),
        });
    }
    perf::set_bpf(&fd, prog).map_err(err)?;
    perf::enable(&fd).map_err(err)?;
    Ok(PerfUprobe { fd, link: None })
}

/// The instructions of a uprobe program that stops the process that hits it: `bpf_send_signal
/// (SIGSTOP)` (helper 109, Linux ≥ 5.3), delivered when the task returns to user mode, so the
/// process stops *at* the probed instruction, before executing it.
///
/// Attached at an executable's entry point, it gives a rendezvous where the process's memory can
/// be written before any of its code runs (see [`crate::attach`]; `bpf_probe_write_user` would do
/// it from the program but is refused under kernel lockdown).
pub fn stop_self_program() -> Vec<[u8; 8]> {
    let insn = |op: u8, dst: u8, imm: i32| {
        (u64::from(op) | (u64::from(dst) << 8) | (u64::from(imm as u32) << 32)).to_le_bytes()
    };
    vec![
        insn(0xb7, 1, libc::SIGSTOP), // r1 = SIGSTOP
        insn(0x85, 0, 109),           // bpf_send_signal(r1)
        insn(0xb7, 0, 0),             // r0 = 0
        insn(0x95, 0, 0),             // exit
    ]
}

/// Loads `insns` as a `BPF_PROG_TYPE_KPROBE` program for uprobe_multi links
/// (`expected_attach_type = BPF_TRACE_UPROBE_MULTI`), the verifier log kept on failure.
///
/// # Errors
/// [`SyscallError`] naming `bpf(BPF_PROG_LOAD)`, with the verifier log.
pub fn load_multi_program(insns: &[[u8; 8]], name: &str) -> Result<OwnedFd, SyscallError> {
    bpf::prog_load(&ProgLoad {
        prog_type: prog_type::KPROBE,
        expected_attach_type: attach_type::TRACE_UPROBE_MULTI,
        insns,
        name,
        log: VerifierLog::OnError,
    })
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
        let insns = [
            0x0000_0000_0000_00b7u64.to_le_bytes(),
            0x0000_0000_0000_0095u64.to_le_bytes(),
        ];
        let Ok(prog) = load_multi_program(&insns, "sl_probe_umulti") else {
            return false;
        };
        let site = UprobeSite {
            offset: FileOffset(0),
            ref_ctr_offset: None,
            cookie: 0,
        };
        match attach_uprobe_multi(prog.as_raw_fd(), Path::new("/"), &[site], None, false) {
            Ok(_) => true,
            Err(e) => e.syscall().and_then(SyscallError::errno) == Some(libc::EBADF),
        }
    })
}
