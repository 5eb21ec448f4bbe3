//! Attaching a loaded BPF program to a user-space probe of the catalog ([`crate::provider`]),
//! with its USDT semaphore.
//!
//! [`attach`] takes what the runtime knows after code generation (the program fd, the file, the
//! offsets, return or not, the pid filter, the semaphore's file offset) and returns a
//! [`UserAttachment`] that detaches everything and restores self-set semaphores when dropped.
//!
//! Order of attempts: one uprobe_multi link for all offsets of the file (when the kernel has it
//! and the program was loaded with `expected_attach_type = BPF_TRACE_UPROBE_MULTI`, see
//! `BPF_TRACE_UPROBE_MULTI`, [`crate::uprobe::load_multi_program`]); otherwise one perf-event uprobe per offset. Semaphores
//! go through the kernel's reference counter; for a probe on one process, the semaphore is then
//! read back through `/proc/PID/mem` and, if the kernel did not set it (the lld double-mapping
//! case), incremented by a [`SemaphoreGuard`]. For a probe by path, the processes already
//! mapping the file are checked the same way; later processes rely on the kernel's counter.
//!
//! A `-c` command is held before its `execve`, so its memory cannot be written yet. If the
//! semaphore's file page is mapped by two segments ([`ElfFile::page_shared_by_segments`], the
//! lld layout), the kernel's counter would land in the wrong mapping at `execve`. Instead the
//! semaphore is incremented through `/proc/PID/mem` at the executable's entry point
//! ([`crate::entry`]: the process stops there briefly), before any of the program's own code
//! runs. Dropping the attachment resumes the process if it is still stopped there (it is never
//! left stopped by us) and undoes the increment if it still runs. (A semaphore of a shared library
//! in that layout is not covered under `-c`.)

use std::os::fd::{OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use crate::elf::ElfFile;
use crate::maps::ProcessMaps;
use crate::semaphore::{self, SemaphoreGuard};
use crate::uprobe::{self, PerfUprobe, UprobeError, UprobeSite};
use crate::{FileOffset, VirtAddr};

/// Errors attaching.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The kernel refused (the error names the file and the call).
    #[error(transparent)]
    Uprobe(#[from] UprobeError),
    /// The entry-point rendezvous that sets a semaphore for a held command could not be set up.
    #[error("setting the USDT semaphore of {path} at its entry point")]
    Entry {
        /// The executable.
        path: PathBuf,
        /// Why (boxed: the rendezvous's error is large and rare).
        #[source]
        source: Box<crate::entry::EntryError>,
    },
}

impl AttachError {
    /// The failed system call, if that was the cause.
    pub fn syscall(&self) -> Option<&probe_sys::SyscallError> {
        match self {
            AttachError::Uprobe(e) => e.syscall(),
            AttachError::Entry { source, .. } => source.syscall(),
        }
    }
}

/// Everything one [`attach`] call created. Dropping it detaches (closes the link / perf fds) and
/// undoes self-set semaphore increments.
#[derive(Debug, Default)]
pub struct UserAttachment {
    links: Vec<OwnedFd>,
    perf: Vec<PerfUprobe>,
    semaphores: Option<SemaphoreGuard>,
    /// Semaphores set through `/proc/PID/mem` because the kernel's counter did not take.
    pub self_set_semaphores: usize,
    /// Sites the kernel refused (`ENOTSUPP`) although the decoder let them through; the other
    /// sites of their link are attached without them.
    pub refused_sites: Vec<FileOffset>,
    /// A semaphore set at the executable's entry (see the module docs): the process, the file
    /// and the semaphore's link-time address, to undo at detach if the process still runs.
    setter: Option<(u32, PathBuf, VirtAddr)>,
}

impl UserAttachment {
    /// Number of kernel attachments held (links + perf events).
    pub fn len(&self) -> usize {
        self.links.len() + self.perf.len()
    }

    /// True when nothing is attached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes over `other`'s links and perf events (attachments without semaphores, e.g. the
    /// chunks of one multi-site program); `other`'s semaphore state is kept in `self` if it
    /// has none.
    pub fn absorb(&mut self, mut other: UserAttachment) {
        self.links.append(&mut other.links);
        self.perf.append(&mut other.perf);
        self.self_set_semaphores += other.self_set_semaphores;
        self.refused_sites.append(&mut other.refused_sites);
        if self.semaphores.is_none() {
            self.semaphores = other.semaphores.take();
        }
        if self.setter.is_none() {
            self.setter = other.setter.take();
        }
    }

    /// The BPF links (uprobe_multi), which can be pinned under bpffs, when they are all of this
    /// attachment: `None` when it also holds perf-event uprobes or semaphores (these live only
    /// as long as this process's descriptors and state).
    pub fn pinnable_links(&self) -> Option<&[OwnedFd]> {
        (self.perf.is_empty() && self.semaphores.is_none() && self.setter.is_none())
            .then_some(&self.links[..])
    }

    /// True when the semaphore is set at the executable's entry point.
    pub fn has_entry_setter(&self) -> bool {
        self.setter.is_some()
    }
}

impl Drop for UserAttachment {
    fn drop(&mut self) {
        // Semaphores first, links after: closing a uprobe link waits for RCU grace periods (tens
        // of ms under load), and a program that still sees its semaphore set in that time takes
        // the probe's slow path for a probe that no longer fires.
        drop(self.semaphores.take());
        let Some((pid, path, vaddr)) = self.setter.take() else {
            return;
        };
        // Never leave the target stopped at its entry.
        crate::entry::release_all();
        // Undo the increment in a process that outlives the tracing.
        if let Ok(maps) = ProcessMaps::read(pid)
            && let Ok(elf) = ElfFile::open(&path)
            && let Some(module) = maps.module(&path, &elf)
        {
            let addr = module.abs(vaddr);
            if semaphore::read(pid, addr).is_ok_and(|v| v > 0) {
                let _ = semaphore::adjust(pid, addr, -1);
            }
        }
    }
}

/// What to attach: one file, a set of offsets sharing one program.
#[derive(Debug, Clone)]
pub struct AttachRequest<'a> {
    /// The ELF file.
    pub path: &'a Path,
    /// File offsets of the probed instructions (function entries when `ret`).
    pub offsets: &'a [FileOffset],
    /// Return probes (uretprobes).
    pub ret: bool,
    /// Only this process (all threads); `None`: every process mapping the file.
    pub pid: Option<u32>,
    /// File offset of a USDT semaphore to hold while attached.
    pub semaphore: Option<FileOffset>,
    /// The program was loaded with `expected_attach_type = BPF_TRACE_UPROBE_MULTI`.
    pub multi_prog: bool,
    /// Per-site cookies (`bpf_get_attach_cookie()`), one per offset; empty means each site's index.
    pub cookies: &'a [u64],
}

/// Attaches `prog` per `req` (see the module docs).
///
/// # Errors
/// [`AttachError::Uprobe`] when the kernel refuses both ways of attaching,
/// [`AttachError::Entry`] when a held command's semaphore rendezvous cannot be set up.
pub fn attach(prog: RawFd, req: &AttachRequest<'_>) -> Result<UserAttachment, AttachError> {
    let mut out = UserAttachment::default();
    let sites: Vec<UprobeSite> = req
        .offsets
        .iter()
        .enumerate()
        .map(|(i, &offset)| UprobeSite {
            offset,
            ref_ctr_offset: req.semaphore,
            cookie: req.cookies.get(i).copied().unwrap_or(i as u64),
        })
        .collect();
    if sites.is_empty() {
        return Ok(out);
    }
    let multi = if req.multi_prog && uprobe::uprobe_multi_supported() {
        // A program loaded for uprobe_multi cannot take perf-event uprobes either (the kernel
        // refuses its expected attach type): the link's own error is the one to report.
        let mut links = Vec::new();
        out.refused_sites = attach_multi_split(prog, req, &sites, &mut links)?;
        out.links.append(&mut links);
        Some(())
    } else {
        None
    };
    match multi {
        Some(()) => {}
        None => {
            for s in &sites {
                out.perf.push(uprobe::attach_uprobe_perf(
                    prog, req.path, *s, req.pid, req.ret,
                )?);
            }
        }
    }
    if let Some(sem) = req.semaphore {
        repair_stale_once();
        let pids = match req.pid {
            Some(p) => vec![p],
            None => processes_mapping(req.path),
        };
        if let Ok(elf) = ElfFile::open(req.path)
            && let Some(vaddr) = elf.vaddr_of_offset(sem)
        {
            for pid in pids {
                let Ok(maps) = ProcessMaps::read(pid) else {
                    continue;
                };
                let Some(module) = maps.module(req.path, &elf) else {
                    // Not mapped yet: a -c command held before its execve. The kernel's counter
                    // covers it unless the semaphore's page is mapped twice (lld): then set it
                    // from the executable's entry point, before any of its code runs.
                    if req.pid == Some(pid)
                        && out.setter.is_none()
                        && elf.page_shared_by_segments(sem)
                    {
                        let path = req.path.to_path_buf();
                        let p2 = path.clone();
                        crate::entry::add_action(
                            req.path,
                            pid,
                            Box::new(move |pid| {
                                let module = ElfFile::open(&p2)
                                    .ok()
                                    .and_then(|e| ProcessMaps::read(pid).ok()?.module(&p2, &e));
                                if let Some(m) = module {
                                    let _ = semaphore::adjust(pid, m.abs(vaddr), 1);
                                }
                            }),
                        )
                        .map_err(|source| AttachError::Entry {
                            path: req.path.to_path_buf(),
                            source: Box::new(source),
                        })?;
                        out.setter = Some((pid, path, vaddr));
                    }
                    continue;
                };
                let addr = module.abs(vaddr);
                if matches!(semaphore::read(pid, addr), Ok(0)) {
                    let guard = out.semaphores.get_or_insert_with(|| {
                        SemaphoreGuard::new(&semaphore::default_record_dir())
                    });
                    if guard.increment(pid, addr).is_ok() {
                        out.self_set_semaphores += 1;
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Attaches `sites` with uprobe_multi links, splitting a set the kernel refuses with `ENOTSUPP`
/// (524: one instruction it cannot probe) in halves until the refused sites are alone; returns
/// those. Any other error fails the attachment.
fn attach_multi_split(
    prog: RawFd,
    req: &AttachRequest<'_>,
    sites: &[UprobeSite],
    links: &mut Vec<OwnedFd>,
) -> Result<Vec<FileOffset>, AttachError> {
    match uprobe::attach_uprobe_multi(prog, req.path, sites, req.pid, req.ret) {
        Ok(link) => {
            links.push(link);
            Ok(Vec::new())
        }
        Err(e) if e.syscall().and_then(|s| s.errno()) == Some(524) => {
            if sites.len() == 1 {
                return Ok(vec![sites[0].offset]);
            }
            let (a, b) = sites.split_at(sites.len() / 2);
            let mut refused = attach_multi_split(prog, req, a, links)?;
            refused.extend(attach_multi_split(prog, req, b, links)?);
            Ok(refused)
        }
        Err(e) => Err(e.into()),
    }
}

/// Undoes, once per process and before it sets semaphores of its own, the USDT semaphore
/// increments that an earlier Sightline recorded and left behind when it died without cleaning
/// up ([`semaphore::repair_stale`] over [`semaphore::default_record_dir`]; a no-op when there are
/// none). This writes to the processes named in those records, so it runs at attach time, when
/// the user asked for USDT probes, never when a catalog is built.
fn repair_stale_once() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        let _ = semaphore::repair_stale(&semaphore::default_record_dir());
    });
}

/// Detaches many attachments at once, closing them from parallel threads (up to 64).
///
/// Closing a uprobe_multi link waits for RCU grace periods in the kernel
/// (`bpf_uprobe_multi_link_release`), about 50 ms each here; closed one after another, 100
/// single-site links take 5 s, closed concurrently 0.09 s (they share grace periods). Perf-event
/// uprobes serialize in the kernel either way.
pub fn detach_all(all: Vec<UserAttachment>) {
    if all.len() < 2 {
        return;
    }
    let threads = all.len().min(64);
    let per = all.len().div_ceil(threads);
    let mut it = all.into_iter();
    std::thread::scope(|s| {
        loop {
            let chunk: Vec<UserAttachment> = it.by_ref().take(per).collect();
            if chunk.is_empty() {
                break;
            }
            // A thread that cannot start drops its chunk here, on this thread.
            let _ = std::thread::Builder::new().spawn_scoped(s, move || drop(chunk));
        }
    });
}

/// Pids of the processes that currently map `path` (scans `/proc/*/maps`).
pub fn processes_mapping(path: &Path) -> Vec<u32> {
    let Some(p) = path.to_str() else {
        return Vec::new();
    };
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<u32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .is_ok_and(|m| m.lines().any(|l| l.ends_with(p)))
        })
        .collect();
    out.sort_unstable();
    out
}
