//! A rendezvous at a held command's entry point: work that must happen after its `execve` but
//! before any of its code runs (setting a USDT semaphore the kernel cannot; reading its mappings
//! for symbols while they exist).
//!
//! `sightline probe -c` holds the command before `execve`, when its memory is still a copy of
//! Sightline's. [`add_action`] attaches a tiny program to the executable's entry point (`e_entry`,
//! `_start`) for that pid ([`crate::uprobe::stop_self_program`]): when the process gets there — after
//! the dynamic loader mapped its libraries, before `main` and the executable's constructors — the
//! program stops it with SIGSTOP. A watcher thread sees the stop (state `T` in
//! `/proc/PID/stat` while the executable is mapped), runs every registered action with the pid,
//! and resumes the process with SIGCONT. One rendezvous per pid, however many actions.
//!
//! The process is never left stopped by us: [`release_all`] (called when attachments and the
//! catalog are dropped) stops the watchers and resumes any process still stopped at its entry.
//! Only a crash of Sightline within the sub-millisecond stop could leave it stopped.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::elf::ElfFile;
use crate::maps::ProcessMaps;
use crate::uprobe::{self, UprobeError, UprobeSite};

/// Work to do at the entry stop, given the pid.
pub type Action = Box<dyn FnOnce(u32) + Send>;

/// Errors setting up a rendezvous.
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    /// The executable could not be read, or its entry point is not in the file.
    #[error("entry rendezvous for {path}")]
    Exe {
        /// The executable.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: crate::elf::ElfError,
    },
    /// The executable has no entry point (`e_entry` is 0: a shared library).
    #[error("entry rendezvous for {path}: it has no entry point")]
    NoEntry {
        /// The executable.
        path: PathBuf,
    },
    /// Loading the stop program failed.
    #[error("entry rendezvous for {path}: loading the stop program")]
    Load {
        /// The executable.
        path: PathBuf,
        /// The failed call.
        #[source]
        source: probe_sys::SyscallError,
    },
    /// Attaching the stop program failed.
    #[error("entry rendezvous for {path}")]
    Attach {
        /// The executable.
        path: PathBuf,
        /// The failed attach.
        #[source]
        source: UprobeError,
    },
}

impl EntryError {
    /// The failed system call, if that was the cause.
    pub fn syscall(&self) -> Option<&probe_sys::SyscallError> {
        match self {
            EntryError::Exe { .. } | EntryError::NoEntry { .. } => None,
            EntryError::Load { source, .. } => Some(source),
            EntryError::Attach { source, .. } => source.syscall(),
        }
    }
}

struct Rendezvous {
    exe: PathBuf,
    actions: Mutex<Vec<Action>>,
    done: AtomicBool,
    stop: Arc<AtomicBool>,
    _link: OwnedFd,
    _prog: OwnedFd,
}

fn registry() -> &'static Mutex<HashMap<u32, Arc<Rendezvous>>> {
    static R: std::sync::OnceLock<Mutex<HashMap<u32, Arc<Rendezvous>>>> =
        std::sync::OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The state letter of `/proc/PID/stat` (field 3: `R`, `S`, `T` stopped, `Z`, ...).
pub fn process_state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 1..].trim_start().chars().next()
}

/// Registers `action` to run when held process `pid` reaches the entry point of `exe` (the
/// command it will execute). The first call for a pid attaches the stop program and starts the
/// watcher; later calls add actions, which run in registration order. An action added after the
/// stop was handled runs at once.
///
/// # Errors
/// [`EntryError`] when `exe` has no entry point in the file or the program cannot be attached.
pub fn add_action(exe: &Path, pid: u32, action: Action) -> Result<(), EntryError> {
    let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = reg.get(&pid) {
        if r.done.load(Ordering::Acquire) {
            drop(reg);
            action(pid);
        } else {
            r.actions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(action);
        }
        return Ok(());
    }
    let exe_err = |source| EntryError::Exe {
        path: exe.to_path_buf(),
        source,
    };
    let elf = ElfFile::open(exe).map_err(exe_err)?;
    if elf.entry().0 == 0 {
        return Err(EntryError::NoEntry {
            path: exe.to_path_buf(),
        });
    }
    let entry = elf.file_offset(elf.entry()).map_err(exe_err)?;
    let prog = uprobe::load_multi_program(&uprobe::stop_self_program(), "sl_entry_stop").map_err(
        |source| EntryError::Load {
            path: exe.to_path_buf(),
            source,
        },
    )?;
    let site = UprobeSite {
        offset: entry,
        ref_ctr_offset: None,
        cookie: 0,
    };
    let link = uprobe::attach_uprobe_multi(prog.as_raw_fd(), exe, &[site], Some(pid), false)
        .map_err(|source| EntryError::Attach {
            path: exe.to_path_buf(),
            source,
        })?;
    let stop = Arc::new(AtomicBool::new(false));
    let r = Arc::new(Rendezvous {
        exe: exe.to_path_buf(),
        actions: Mutex::new(vec![action]),
        done: AtomicBool::new(false),
        stop: stop.clone(),
        _link: link,
        _prog: prog,
    });
    reg.insert(pid, r.clone());
    drop(reg);
    let exe = exe.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("entry-rendezvous".into())
        .spawn(move || watch(pid, &exe, &r, &stop));
    if spawned.is_err() {
        // Without a watcher nobody would resume the process: take the hook away again.
        registry()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pid);
    }
    Ok(())
}

/// Waits for `pid` to stop at the entry of `exe`, runs the actions, resumes it.
fn watch(pid: u32, exe: &Path, r: &Rendezvous, stop: &AtomicBool) {
    let elf = ElfFile::open(exe).ok();
    while !stop.load(Ordering::Relaxed) {
        match process_state(pid) {
            None | Some('Z') | Some('X') => break,
            // `T` stopped; `t` stopped under a tracer (strace, gdb) that passed our SIGSTOP on.
            Some('T' | 't') => {
                // Ours only once the executable is mapped (after execve); before it, the consumer
                // holds the process stopped itself.
                let mapped = ProcessMaps::read(pid)
                    .ok()
                    .zip(elf.as_ref())
                    .and_then(|(m, e)| m.module(exe, e))
                    .is_some();
                if mapped {
                    let actions =
                        std::mem::take(&mut *r.actions.lock().unwrap_or_else(|e| e.into_inner()));
                    for a in actions {
                        a(pid);
                    }
                    r.done.store(true, Ordering::Release);
                    let _ = probe_sys::os::kill(pid, libc::SIGCONT);
                    break;
                }
            }
            _ => {}
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    // The hook has served (or the process is gone): detach it.
    registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&pid);
}

/// Stops every watcher and resumes any process still stopped at its entry by us. A process that
/// is stopped but has not executed its command yet (held by the consumer before `execve`) is left
/// to the consumer.
pub fn release_all() {
    let all: Vec<(u32, Arc<Rendezvous>)> = registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .collect();
    for (pid, r) in all {
        r.stop.store(true, Ordering::Relaxed);
        if !r.done.load(Ordering::Acquire)
            && matches!(process_state(pid), Some('T' | 't'))
            && at_entry(pid, &r.exe)
        {
            let _ = probe_sys::os::kill(pid, libc::SIGCONT);
        }
    }
}

/// True when `pid` runs `exe` (mapped: it is past its `execve`).
fn at_entry(pid: u32, exe: &Path) -> bool {
    let Ok(elf) = ElfFile::open(exe) else {
        return false;
    };
    ProcessMaps::read(pid)
        .ok()
        .and_then(|m| m.module(exe, &elf))
        .is_some()
}

/// True while a rendezvous for `pid` is pending.
pub fn pending(pid: u32) -> bool {
    registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&pid)
        .is_some_and(|r| !r.done.load(Ordering::Acquire))
}
