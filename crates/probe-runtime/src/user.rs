//! User space in the runtime: attaching `Attach::Uprobe` programs through probe-user, the entry
//! snapshot of a held `-c` command, and user-space symbolization for `ustack()`, `usym()`,
//! `ufunc()`, `umod()` and `uaddr()`. (The pid and USDT providers are in [`crate::catalog::system`].)
//!
//! See `docs/probe-user.md` for the provider syntax and semantics.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use probe_format::value::Symbol;
use probe_user::attach::{AttachError, AttachRequest, UserAttachment};
use probe_user::maps::ProcessMaps;
use probe_user::symbolize::Symbolizer;
use probe_user::{AbsAddr, FileOffset};

/// The entry-point rendezvous of a held `-c` command that snapshots its mappings for user
/// symbols ([`snapshot_at_entry`]). Dropping it resumes the command if it is still stopped at its
/// entry (it is never left stopped by us).
#[derive(Debug)]
pub struct EntrySnapshot {
    _private: (),
}

/// Snapshots held process `pid`'s mappings at the entry point of `exe` (probe-user's entry
/// rendezvous, after its `execve`), so user addresses resolve however short-lived it is. A
/// command that is not an ELF executable (a script) gets no snapshot there; the watcher in
/// [`UserSymbols`] still polls it.
///
/// The snapshot stops the command at its entry for a moment (a SIGSTOP that the command's own
/// tracing sees: `proc:::signal-send`, `signal:::signal_generate`), so take it only when the
/// program prints user symbols (`probe_sema::needs_user_symbols`).
pub fn snapshot_at_entry(pid: u32, exe: &Path) -> EntrySnapshot {
    let _ = probe_user::entry::add_action(
        exe,
        pid,
        Box::new(|pid| {
            if let Ok(m) = ProcessMaps::read(pid) {
                store_snapshot(m);
            }
        }),
    );
    EntrySnapshot { _private: () }
}

impl Drop for EntrySnapshot {
    fn drop(&mut self) {
        // Never leave a held command stopped at its entry point.
        probe_user::entry::release_all();
    }
}

/// Mapping snapshots of target processes, by pid (the entry rendezvous and the watcher thread
/// write them; [`UserSymbols`] reads them).
fn snapshots() -> &'static Mutex<HashMap<u32, ProcessMaps>> {
    static S: std::sync::OnceLock<Mutex<HashMap<u32, ProcessMaps>>> = std::sync::OnceLock::new();
    S.get_or_init(|| Mutex::new(HashMap::new()))
}

fn store_snapshot(m: ProcessMaps) {
    snapshots()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(m.pid, m);
}

/// Loads a uprobe program (`BPF_PROG_TYPE_KPROBE`) with `expected_attach_type =
/// BPF_TRACE_UPROBE_MULTI` when the kernel has uprobe_multi links, so [`attach`] can use one
/// (they detach concurrently in milliseconds; perf-event uprobes take ~0.1 s each, serialized).
/// `None` when the kernel lacks them or refuses the program: the caller then loads it the usual way
/// (which also quotes the verifier).
pub fn load_uprobe_program(insns: &[[u8; 8]], name: &str) -> Option<OwnedFd> {
    if !probe_user::uprobe::uprobe_multi_supported() {
        return None;
    }
    probe_user::uprobe::load_multi_program(insns, name).ok()
}

/// Attaches a loaded uprobe program to one probe, with its USDT semaphore: through a uprobe_multi
/// link when the program was loaded by [`load_uprobe_program`], else through perf events.
///
/// A `return` probe (`ret`, `offset` = the function's entry) is attached at each return site of
/// the function (every `ret` and tail-call jump, from probe-user's disassembly) with the site's
/// offset in the function as the attach cookie, which the generated code reads as `arg0`
/// (DTrace's semantics; `arg1` is `%rax`). When none of its return sites can be probed it is a
/// uretprobe on the entry, where `arg0` reads 0. A function that never returns or does not decode
/// gets nothing (the catalog offers no such probe): a uretprobe there would overwrite the word
/// at its stack pointer, which need not be a return address (`argc` at `_start`).
///
/// # Errors
/// [`AttachError`] naming the failed call.
pub fn attach(
    prog: &OwnedFd,
    path: &str,
    offset: u64,
    ret: bool,
    pid: Option<u32>,
    semaphore: Option<u64>,
) -> Result<UserAttachment, AttachError> {
    use probe_user::list::ReturnPlan;
    let plan = if ret {
        probe_user::elf::ElfFile::open(path)
            .ok()
            .and_then(|elf| probe_user::list::return_plan_at(&elf, FileOffset(offset)).ok())
    } else {
        None
    };
    let (offsets, cookies, as_ret): (Vec<FileOffset>, Vec<u64>, bool) = match plan {
        Some(ReturnPlan::Sites(s)) => (
            s.iter().map(|x| x.0).collect(),
            s.iter().map(|x| x.1).collect(),
            false,
        ),
        Some(ReturnPlan::Never | ReturnPlan::Undecodable(_)) => {
            return Ok(UserAttachment::default());
        }
        Some(ReturnPlan::Uretprobe) | None => (vec![FileOffset(offset)], vec![0], ret),
    };
    let req = AttachRequest {
        path: Path::new(path),
        offsets: &offsets,
        ret: as_ret,
        pid,
        semaphore: semaphore.map(FileOffset),
        // Programs from [`load_uprobe_program`] take a uprobe_multi link; others fall back to perf.
        multi_prog: true,
        cookies: &cookies,
    };
    probe_user::attach::attach(prog.as_raw_fd(), &req)
}

/// Attaches a program loaded by [`load_uprobe_program`] to many sites of one file through one
/// uprobe_multi link: `sites` are (file offset, attach cookie = probe id) pairs.
///
/// # Errors
/// [`AttachError`] naming the failed call.
pub fn attach_multi(
    prog: &OwnedFd,
    path: &str,
    sites: &[(u64, u64)],
    pid: Option<u32>,
) -> Result<UserAttachment, AttachError> {
    let mut all = UserAttachment::default();
    // The kernel's MAX_UPROBE_MULTI_CNT (1 << 20) sites per link.
    for chunk in sites.chunks(1 << 20) {
        let offsets: Vec<FileOffset> = chunk.iter().map(|s| FileOffset(s.0)).collect();
        let cookies: Vec<u64> = chunk.iter().map(|s| s.1).collect();
        let req = AttachRequest {
            path: Path::new(path),
            offsets: &offsets,
            ret: false,
            pid,
            semaphore: None,
            multi_prog: true,
            cookies: &cookies,
        };
        all.absorb(probe_user::attach::attach(prog.as_raw_fd(), &req)?);
    }
    Ok(all)
}

/// User-address symbolization for the consumer, in the process each address was taken in (user
/// stacks and symbols are recorded with their process id, as DTrace records them).
///
/// A process's mappings are read at the first record that names it (and read again when an
/// address falls outside them, while it runs) and kept after it exits, so aggregation keys
/// printed at the end still resolve; a process that exited before its first record was read
/// leaves its addresses numeric. The `$target` process is covered more closely: a `-c`
/// command's mappings are snapshotted at its entry point ([`snapshot_at_entry`]: everything the
/// dynamic loader mapped), and a watcher thread re-snapshots it while it runs (every 0.5 ms for
/// its first second, then every 10 ms; only after its `execve`, before which a held command is a
/// copy of sightline) to catch libraries it loads later. A library mapped and unmapped between
/// two snapshots leaves its addresses numeric.
#[derive(Debug, Default)]
pub struct UserSymbols {
    pid: Option<u32>,
    inner: Option<Symbolizer>,
    stop: Option<Arc<AtomicBool>>,
}

impl UserSymbols {
    /// Symbolization, with the mappings of process `pid` (`$target`) watched closely when there
    /// is one (starts the watcher thread).
    pub fn new(pid: Option<u32>) -> UserSymbols {
        let Some(pid) = pid else {
            return UserSymbols::default();
        };
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let own_exe = std::fs::read_link("/proc/self/exe").ok();
        let spawned = std::thread::Builder::new()
            .name("usym-maps".into())
            .spawn(move || {
                let start = Instant::now();
                while !st.load(Ordering::Relaxed) {
                    match ProcessMaps::read(pid) {
                        // A held -c child still runs our own image until its execve.
                        Ok(m) if Some(&m.exe) != own_exe.as_ref() && !m.mappings.is_empty() => {
                            // A poll read before the entry snapshot may be stored after it: never replace a
                            // snapshot by one with fewer mappings.
                            let mut all = snapshots().lock().unwrap_or_else(|e| e.into_inner());
                            if all
                                .get(&pid)
                                .is_none_or(|old| old.mappings.len() <= m.mappings.len())
                            {
                                all.insert(pid, m);
                            }
                        }
                        Ok(_) => {}
                        Err(_) => {
                            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                                break;
                            }
                        }
                    }
                    let fast = start.elapsed() < Duration::from_secs(1);
                    std::thread::sleep(if fast {
                        Duration::from_micros(500)
                    } else {
                        Duration::from_millis(10)
                    });
                }
            });
        let _ = spawned;
        UserSymbols {
            pid: Some(pid),
            inner: None,
            stop: Some(stop),
        }
    }

    /// Takes the watcher's latest snapshot of the target's mappings.
    pub fn refresh(&mut self) {
        let Some(pid) = self.pid else { return };
        let snap = snapshots()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&pid)
            .cloned();
        if let Some(m) = snap {
            self.inner.get_or_insert_with(Symbolizer::new).set_maps(m);
        }
    }

    /// The symbol of user address `addr` in process `pid` (or the bare address). A `pid` of 0
    /// (a record of a kernel thread, which has no user mappings) leaves it numeric.
    pub fn resolve(&mut self, pid: u32, addr: u64) -> Symbol {
        if pid == 0 {
            return Symbol::unknown(addr);
        }
        if Some(pid) == self.pid {
            self.refresh();
        }
        let s = self
            .inner
            .get_or_insert_with(Symbolizer::new)
            .resolve(pid, AbsAddr(addr));
        Symbol {
            addr,
            module: s.module,
            name: s.function,
            offset: s.offset,
        }
    }
}

impl Drop for UserSymbols {
    fn drop(&mut self) {
        if let Some(s) = &self.stop {
            s.store(true, Ordering::Relaxed);
        }
    }
}
