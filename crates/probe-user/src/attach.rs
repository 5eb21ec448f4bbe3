//! Attaching a loaded BPF program to a user-space probe of the catalog ([`crate::provider`]),
//! with its USDT semaphore.
//!
//! [`attach`] takes what the runtime knows after code generation (the program fd, the file, the
//! offsets, return or not, the pid filter, the semaphore's file offset) and returns a
//! [`UserAttachment`] that detaches everything and restores self-set semaphores when dropped.
//!
//! Order of attempts: one uprobe_multi link for all offsets of the file (when the kernel has it
//! and the program was loaded with `expected_attach_type = BPF_TRACE_UPROBE_MULTI`, see
//! [`crate::sys::BPF_TRACE_UPROBE_MULTI`]); otherwise one perf-event uprobe per offset. Semaphores
//! go through the kernel's reference counter; for a probe on one process, the semaphore is then
//! read back through `/proc/PID/mem` and, if the kernel did not set it (the lld double-mapping
//! case), incremented by a [`SemaphoreGuard`]. For a probe by path, the processes already
//! mapping the file are checked the same way; later processes rely on the kernel's counter.
//!
//! A `-c` command is held before its `execve`, so its memory cannot be written yet. If the
//! semaphore's file page is mapped by two segments ([`ElfFile::page_shared_by_segments`], the
//! lld layout), the kernel's counter would land in the wrong mapping at `execve`. Instead a tiny
//! program ([`sys::stop_self_program`]) is attached to the executable's entry point for that pid:
//! it stops the process there with SIGSTOP; a watcher thread sees the stop, adds 1 to the
//! semaphore through `/proc/PID/mem` and resumes it with SIGCONT, so the semaphore is set before
//! any of the program's own code runs. Dropping the attachment resumes the process if it is still
//! stopped there (it is never left stopped by us) and undoes the increment if it still runs. (A
//! semaphore of a shared library in that layout is not covered under `-c`.)

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::elf::ElfFile;
use crate::maps::ProcessMaps;
use crate::semaphore::{self, SemaphoreGuard};
use crate::sys::{self, PerfUprobe, SysError, UprobeSite};
use crate::{AbsAddr, FileOffset, VirtAddr};

/// Errors attaching.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The kernel refused (the error names the call).
    #[error("attaching {path}: {source}")]
    Sys {
        /// The file.
        path: PathBuf,
        /// The failed call.
        source: SysError,
    },
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
    /// The entry-point semaphore setter (see the module docs), if one was needed.
    setter: Option<EntrySetter>,
}

/// The entry-point rendezvous of a held `-c` command whose semaphore page is mapped twice.
#[derive(Debug)]
struct EntrySetter {
    pid: u32,
    done: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Option<AbsAddr>>>,
}

impl UserAttachment {
    /// True when a semaphore setter was attached at the executable's entry point.
    pub fn has_entry_setter(&self) -> bool {
        self.setter.is_some()
    }
}

impl Drop for UserAttachment {
    fn drop(&mut self) {
        let Some(mut s) = self.setter.take() else { return };
        s.stop.store(true, Ordering::Relaxed);
        let addr = s.thread.take().and_then(|t| t.join().ok()).flatten();
        // Never leave the target stopped: if it stopped at the entry but the watcher had not
        // resumed it yet, resume it now.
        if !s.done.load(Ordering::Relaxed) && process_state(s.pid) == Some('T') {
            let _ = sys::kill(s.pid, libc::SIGCONT);
        }
        // Undo our increment in a process that outlives the tracing.
        if let Some(addr) = addr
            && semaphore::read(s.pid, addr).is_ok_and(|v| v > 0)
        {
            let _ = semaphore::adjust(s.pid, addr, -1);
        }
    }
}

/// The state letter of `/proc/PID/stat` (field 3: `R`, `S`, `T` stopped, `Z`, ...).
fn process_state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 1..].trim_start().chars().next()
}

/// Watches `pid` until it stops at the entry point (sent SIGSTOP by the setter program), then
/// increments the semaphore at `vaddr` of `path` through `/proc/PID/mem` and resumes it.
/// Returns the semaphore's address once set. Gives up when the process exits or `stop` is set;
/// polls every 200 µs (the process is stopped for about that long).
fn watch_entry(pid: u32, path: PathBuf, vaddr: VirtAddr, done: Arc<AtomicBool>, stop: Arc<AtomicBool>) -> Option<AbsAddr> {
    let elf = ElfFile::open(&path).ok()?;
    while !stop.load(Ordering::Relaxed) {
        match process_state(pid) {
            None | Some('Z') | Some('X') => return None,
            Some('T') => {
                // Stopped: by our program only if the executable is mapped (after execve).
                let module = ProcessMaps::read(pid).ok().and_then(|m| m.module(&path, &elf));
                if let Some(module) = module {
                    let addr = module.abs(vaddr);
                    let set = semaphore::adjust(pid, addr, 1).is_ok();
                    done.store(true, Ordering::Relaxed);
                    let _ = sys::kill(pid, libc::SIGCONT);
                    return set.then_some(addr);
                }
            }
            _ => {}
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    None
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
}

/// Attaches `prog` per `req` (see the module docs).
///
/// # Errors
/// [`AttachError::Sys`] when the kernel refuses both ways of attaching.
pub fn attach(prog: RawFd, req: &AttachRequest<'_>) -> Result<UserAttachment, AttachError> {
    let err = |source| AttachError::Sys { path: req.path.to_path_buf(), source };
    let mut out = UserAttachment::default();
    let sites: Vec<UprobeSite> = req
        .offsets
        .iter()
        .enumerate()
        .map(|(i, &offset)| UprobeSite { offset, ref_ctr_offset: req.semaphore, cookie: i as u64 })
        .collect();
    if sites.is_empty() {
        return Ok(out);
    }
    let multi = if req.multi_prog && sys::uprobe_multi_supported() {
        sys::attach_uprobe_multi(prog, req.path, &sites, req.pid, req.ret).ok()
    } else {
        None
    };
    match multi {
        Some(link) => out.links.push(link),
        None => {
            for s in &sites {
                out.perf.push(sys::attach_uprobe_perf(prog, req.path, *s, req.pid, req.ret).map_err(err)?);
            }
        }
    }
    if let Some(sem) = req.semaphore {
        let pids = match req.pid {
            Some(p) => vec![p],
            None => processes_mapping(req.path),
        };
        if let Ok(elf) = ElfFile::open(req.path)
            && let Some(vaddr) = elf.vaddr_of_offset(sem)
        {
            for pid in pids {
                let Ok(maps) = ProcessMaps::read(pid) else { continue };
                let Some(module) = maps.module(req.path, &elf) else {
                    // Not mapped yet: a -c command held before its execve. The kernel's counter
                    // covers it unless the semaphore's page is mapped twice (lld): then set it
                    // from the executable's entry point, before any of its code runs.
                    if req.pid == Some(pid) && out.setter.is_none() && elf.page_shared_by_segments(sem) && elf.entry().0 != 0 {
                        let entry_off = elf.file_offset(elf.entry()).map_err(|e| err(SysError::Invalid(e.to_string())))?;
                        let stopper = sys::prog_load(
                            sys::BPF_PROG_TYPE_KPROBE,
                            sys::BPF_TRACE_UPROBE_MULTI,
                            &sys::stop_self_program(),
                            "sl_usdt_entry",
                        )
                        .map_err(|e| err(SysError::Syscall(e)))?;
                        let site = UprobeSite { offset: entry_off, ref_ctr_offset: None, cookie: 0 };
                        let link = sys::attach_uprobe_multi(stopper.as_raw_fd(), req.path, &[site], Some(pid), false)
                            .map_err(err)?;
                        out.links.push(link);
                        out.links.push(stopper);
                        let done = Arc::new(AtomicBool::new(false));
                        let stop = Arc::new(AtomicBool::new(false));
                        let (d, st, p) = (done.clone(), stop.clone(), req.path.to_path_buf());
                        let thread = std::thread::Builder::new()
                            .name("usdt-entry".into())
                            .spawn(move || watch_entry(pid, p, vaddr, d, st))
                            .ok();
                        out.setter = Some(EntrySetter { pid, done, stop, thread });
                    }
                    continue;
                };
                let addr = module.abs(vaddr);
                if matches!(semaphore::read(pid, addr), Ok(0)) {
                    let guard = out.semaphores.get_or_insert_with(|| SemaphoreGuard::new(&semaphore::default_record_dir()));
                    if guard.increment(pid, addr).is_ok() {
                        out.self_set_semaphores += 1;
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Pids of the processes that currently map `path` (scans `/proc/*/maps`).
pub fn processes_mapping(path: &Path) -> Vec<u32> {
    let Some(p) = path.to_str() else { return Vec::new() };
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut out: Vec<u32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.lines().any(|l| l.ends_with(p)))
        })
        .collect();
    out.sort_unstable();
    out
}
