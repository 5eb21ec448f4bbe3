//! USDT semaphores set by Sightline itself, through `/proc/PID/mem`, with a restore guard and a
//! crash record.
//!
//! A USDT probe with a semaphore only runs its argument set-up when the process's u16 semaphore is
//! non-zero (`<sys/sdt.h>` `_SDT_HAS_SEMAPHORES`; the program tests it with `PROBE_ENABLED()`). The
//! first choice is the kernel's reference counter: a uprobe attached with `ref_ctr_offset` makes
//! the kernel increment the semaphore in every process that maps the file, and decrement it on
//! detach, even when Sightline is killed (`kernel/events/uprobes.c`, `update_ref_ctr`). That fails
//! when the kernel cannot find the semaphore's page in a single writable private mapping of the
//! file: for example in small Rust binaries linked with lld, whose data page is mapped twice. Then
//! the caller falls back to this module: [`SemaphoreGuard::increment`] adds one through
//! `/proc/PID/mem` and the guard subtracts it again when dropped (normal exit, error return, Ctrl-C
//! handled by the caller, panic unwinding).
//!
//! If Sightline dies without unwinding (SIGKILL, abort), the guard's *record file* survives:
//! `<dir>/<owner pid>.sem`, one line `OWNER_PID OWNER_START` then one line per increment
//! `PID START ADDR` (decimal, decimal, hex; START is field 22 of `/proc/PID/stat`, which tells a
//! process from a later one reusing its pid). [`repair_stale`], run at the next start, decrements
//! what a dead owner left, in processes that still exist. The record line is written *after* the
//! increment, so a crash in between leaks one increment (the probe's set-up keeps running, which is
//! harmless) rather than ever decrementing a counter that was not incremented.
//!
//! The read-modify-write is not atomic with respect to another tracer changing the same semaphore
//! at the same instant; the traced program itself only reads it.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::AbsAddr;

/// Errors adjusting semaphores.
#[derive(Debug, thiserror::Error)]
pub enum SemaphoreError {
    /// `/proc/PID/mem` could not be opened, read or written.
    #[error("semaphore at {addr} in pid {pid}: {op} /proc/{pid}/mem failed")]
    Mem {
        /// The process.
        pid: u32,
        /// The semaphore's address.
        addr: AbsAddr,
        /// `open`, `pread` or `pwrite`.
        op: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The record file could not be written.
    #[error("writing semaphore record {path}")]
    Record {
        /// The record file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

fn mem_err(
    pid: u32,
    addr: AbsAddr,
    op: &'static str,
) -> impl FnOnce(std::io::Error) -> SemaphoreError {
    move |source| SemaphoreError::Mem {
        pid,
        addr,
        op,
        source,
    }
}

/// Reads the u16 semaphore at `addr` of process `pid`.
///
/// # Errors
/// [`SemaphoreError::Mem`] when the process is gone, not ptrace-accessible, or the address unmapped.
pub fn read(pid: u32, addr: AbsAddr) -> Result<u16, SemaphoreError> {
    let f = std::fs::File::open(format!("/proc/{pid}/mem")).map_err(mem_err(pid, addr, "open"))?;
    let mut b = [0u8; 2];
    f.read_exact_at(&mut b, addr.0)
        .map_err(mem_err(pid, addr, "pread"))?;
    Ok(u16::from_ne_bytes(b))
}

/// Adds `delta` to the u16 semaphore at `addr` of `pid` (saturating at 0 and `u16::MAX`) and
/// returns the new value.
///
/// # Errors
/// As [`read`], plus a failed `pwrite`.
pub fn adjust(pid: u32, addr: AbsAddr, delta: i32) -> Result<u16, SemaphoreError> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/mem"))
        .map_err(mem_err(pid, addr, "open"))?;
    let mut b = [0u8; 2];
    f.read_exact_at(&mut b, addr.0)
        .map_err(mem_err(pid, addr, "pread"))?;
    let v = (i32::from(u16::from_ne_bytes(b)) + delta).clamp(0, i32::from(u16::MAX)) as u16;
    f.write_all_at(&v.to_ne_bytes(), addr.0)
        .map_err(mem_err(pid, addr, "pwrite"))?;
    Ok(v)
}

/// The start time of `pid` in clock ticks since boot (field 22 of `/proc/PID/stat`, proc(5)), or
/// `None` when the process is gone.
pub fn start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: split after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The default directory for record files: `/run/sightline/semaphores` when it can be created
/// (root), else `$TMPDIR/sightline-semaphores`.
pub fn default_record_dir() -> PathBuf {
    let run = PathBuf::from("/run/sightline/semaphores");
    if std::fs::create_dir_all(&run).is_ok() {
        return run;
    }
    std::env::temp_dir().join("sightline-semaphores")
}

/// One increment this guard made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Increment {
    /// The process.
    pub pid: u32,
    /// Its start time (see [`start_time`]).
    pub start: u64,
    /// The semaphore's address in it.
    pub addr: AbsAddr,
}

/// Semaphores incremented through `/proc/PID/mem`, decremented again on drop.
#[derive(Debug)]
pub struct SemaphoreGuard {
    record: PathBuf,
    owner: (u32, u64),
    done: Vec<Increment>,
}

impl SemaphoreGuard {
    /// A guard whose record file is `<dir>/<our pid>.sem` (created on the first increment).
    pub fn new(dir: &Path) -> Self {
        let me = std::process::id();
        SemaphoreGuard {
            record: dir.join(format!("{me}.sem")),
            owner: (me, start_time(me).unwrap_or(0)),
            done: Vec::new(),
        }
    }

    /// The record file's path.
    pub fn record_path(&self) -> &Path {
        &self.record
    }

    /// The increments made so far.
    pub fn increments(&self) -> &[Increment] {
        &self.done
    }

    /// Increments the semaphore at `addr` of `pid` and records it. Returns the new value.
    ///
    /// # Errors
    /// [`SemaphoreError::Mem`] when the increment fails (nothing is recorded then),
    /// [`SemaphoreError::Record`] when the record cannot be written (the increment stays and is
    /// still undone on drop).
    pub fn increment(&mut self, pid: u32, addr: AbsAddr) -> Result<u16, SemaphoreError> {
        let start = start_time(pid).ok_or_else(|| SemaphoreError::Mem {
            pid,
            addr,
            op: "open",
            source: std::io::Error::from_raw_os_error(libc::ESRCH),
        })?;
        let v = adjust(pid, addr, 1)?;
        self.done.push(Increment { pid, start, addr });
        self.write_record()?;
        Ok(v)
    }

    fn write_record(&self) -> Result<(), SemaphoreError> {
        let err = |source| SemaphoreError::Record {
            path: self.record.clone(),
            source,
        };
        if let Some(d) = self.record.parent() {
            std::fs::create_dir_all(d).map_err(err)?;
        }
        let mut text = format!("{} {}\n", self.owner.0, self.owner.1);
        for i in &self.done {
            text.push_str(&format!("{} {} {:x}\n", i.pid, i.start, i.addr.0));
        }
        let tmp = self.record.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).map_err(err)?;
        f.write_all(text.as_bytes()).map_err(err)?;
        f.sync_all().map_err(err)?;
        std::fs::rename(&tmp, &self.record).map_err(err)
    }

    /// Undoes every increment now (in processes that still exist with the same start time) and
    /// removes the record. Returns how many were undone. Called by `Drop`.
    pub fn restore(&mut self) -> usize {
        let mut n = 0;
        for i in self.done.drain(..) {
            if start_time(i.pid) == Some(i.start) && adjust(i.pid, i.addr, -1).is_ok() {
                n += 1;
            }
        }
        let _ = std::fs::remove_file(&self.record);
        n
    }
}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        self.restore();
    }
}

/// What [`repair_stale`] did with one record file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// The record file (now removed).
    pub record: PathBuf,
    /// Increments undone (the process still existed).
    pub restored: usize,
    /// Increments skipped because their process is gone or was replaced.
    pub gone: usize,
}

/// Undoes the increments recorded in `dir` by owners that are no longer running, and removes those
/// records. Records of live owners are left alone. Unreadable or malformed records are removed
/// without action.
pub fn repair_stale(dir: &Path) -> Vec<Repair> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "sem") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let mut lines = text.lines();
        let owner = lines.next().and_then(|l| {
            let mut f = l.split_whitespace();
            Some((
                f.next()?.parse::<u32>().ok()?,
                f.next()?.parse::<u64>().ok()?,
            ))
        });
        if let Some((pid, start)) = owner
            && start_time(pid) == Some(start)
        {
            continue; // The owner is alive: its guard will restore.
        }
        let (mut restored, mut gone) = (0, 0);
        for l in lines {
            let mut f = l.split_whitespace();
            let parsed = (|| {
                Some((
                    f.next()?.parse::<u32>().ok()?,
                    f.next()?.parse::<u64>().ok()?,
                    u64::from_str_radix(f.next()?, 16).ok()?,
                ))
            })();
            let Some((pid, start, addr)) = parsed else {
                continue;
            };
            if start_time(pid) == Some(start) && adjust(pid, AbsAddr(addr), -1).is_ok() {
                restored += 1;
            } else {
                gone += 1;
            }
        }
        let _ = std::fs::remove_file(&path);
        out.push(Repair {
            record: path,
            restored,
            gone,
        });
    }
    out
}
