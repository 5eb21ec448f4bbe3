//! Recording trapped system calls: arguments at the seccomp stop, result and kernel-written memory
//! at the syscall-exit stop. Mirrors `replayer/syscall.rs`.

use std::os::unix::fs::{FileTypeExt, MetadataExt};

use replay_ptrace::{RemotePtr, Resume, Stopped};

use super::{FdInfo, Recorder, StopResult};
use crate::Error;
use crate::format::{Event, MemWrite, Rendezvous, SyscallEvent};
use crate::rendezvous::{fd_object, process_object};
use crate::syscalls::{self, HASH_SEED};

/// A system call between its seccomp stop and its exit stop.
#[derive(Debug)]
pub(super) struct Pending {
    nr: i64,
    args: [u64; 6],
    fd: Option<FdInfo>,
    /// Its path argument, read at entry ([`crate::format::SyscallEvent::path`]).
    path: Vec<u8>,
}

impl Pending {
    /// True for a write-family call to Sightline's own stdout or stderr: these run one at a time
    /// across processes so that their recorded order is the order the bytes came out in.
    pub(super) fn is_output(&self) -> bool {
        syscalls::is_write(self.nr) && self.fd.is_some_and(|f| f.out != 0)
    }

    /// True for a `clone` that starts a thread of the same process.
    pub(super) fn is_thread_clone(&self) -> bool {
        self.nr == libc::SYS_clone && self.args[0] & CLONE_THREAD != 0
    }

    /// True for `execve`/`execveat`: in a process with several threads the kernel kills the
    /// others while it runs, so it keeps the right to run however long it takes.
    pub(super) fn is_exec(&self) -> bool {
        matches!(self.nr, libc::SYS_execve | libc::SYS_execveat)
    }

    /// True when the call may block, so its thread gives up the right to run (`crate::sched`).
    pub(super) fn may_block(&self) -> bool {
        crate::sched::may_block(self.nr, &self.args)
    }
}

/// Signals below this number are standard (not real-time) signals, which do not queue
/// (signal(7), "Real-time signals"; the kernel's `SIGRTMIN` is 32).
const STANDARD_SIGNALS_END: i32 = 32;

use crate::sched::CLONE_THREAD;

/// The call whose outputs a system call's exit records: `restart_syscall` continues an
/// interrupted poll/nanosleep/futex wait, so what it writes is what the interrupted call would have
/// written (its number and arguments, kept in `restart_of` when it returned
/// `-ERESTART_RESTARTBLOCK`, 516). A restart that is itself interrupted (a second signal) keeps
/// them for the next restart.
pub(super) fn restarted_call(
    restart_of: &mut Option<(i64, [u64; 6])>,
    nr: i64,
    args: [u64; 6],
    result: i64,
) -> (i64, [u64; 6]) {
    let call = if nr == libc::SYS_restart_syscall {
        restart_of.take().unwrap_or((nr, args))
    } else {
        (nr, args)
    };
    *restart_of = (result == -516).then_some(call);
    call
}

pub(super) fn args_of(r: &replay_ptrace::Regs) -> [u64; 6] {
    [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9]
}

impl Recorder {
    /// Seccomp stop: note the call, release a held signal (this is a sync point), let it run to its
    /// exit stop.
    pub(super) fn syscall_entry(&mut self, mut t: Stopped) -> StopResult {
        let tid = t.tid();
        let regs = match t.regs() {
            Ok(r) => r,
            Err(e) => return Err(Box::new((Some(t), e.into()))),
        };
        let nr = regs.orig_rax as i64;
        let args = args_of(&regs);
        if let Some(p) = self.procs.get_mut(&tid)
            && p.interrupting
        {
            // Our PTRACE_INTERRUPT is pending: it would cut a blocking call short (and a restart
            // would show). Skip the call and rewind to its `syscall` instruction: the interrupt
            // stop comes at once, in user mode, and the call then runs again, unrecorded so far.
            let mut r = regs;
            r.orig_rax = u64::MAX;
            r.rax = nr as u64;
            r.rip -= 2;
            p.retry_entry = true;
            return match t.set_regs(&r) {
                Ok(()) => Ok((t, Resume::Cont, 0)),
                Err(e) => Err(Box::new((Some(t), e.into()))),
            };
        }
        let tgid = self.procs.get(&tid).map_or(tid, |p| p.tgid);
        let live = self.procs.values().filter(|p| p.tgid == tgid).count();
        if nr == libc::SYS_clone && args[0] & CLONE_THREAD != 0 && self.threaded_procs.insert(tgid)
        {
            // From the first thread on the process is scheduled, and unbuffered: the handler
            // keeps one buffer per process, which threads would share (the replay does the
            // same at this call).
            let key = self.group_of(tid);
            if let Some(g) = self.groups.get_mut(&key) {
                g.threaded = true;
            }
            // (`drain_sysbuf` skips threaded processes, which this one is from now on.)
            if let Err(e) = crate::syscallbuf::drain(&t).and_then(|recs| {
                if recs.is_empty() {
                    Ok(())
                } else {
                    self.emit(tid, Event::Buffered(recs))
                }
            }) {
                return Err(Box::new((Some(t), e)));
            }
            crate::syscallbuf::switch_off(&t);
        }
        // Entering a trapped call, the handler is not mid-append: drain and empty the buffer
        // (not in a process that started a thread: its buffer was drained and switched off
        // then, and reading its header at every stop cost one process_vm_readv a stop).
        let drained = if self.sysbuf_live(tgid) {
            crate::syscallbuf::drain_and_reset(&t)
        } else {
            Ok(Vec::new())
        };
        if let Err(e) = drained.and_then(|recs| {
            if recs.is_empty() {
                Ok(())
            } else {
                self.emit(tid, Event::Buffered(recs))
            }
        }) {
            return Err(Box::new((Some(t), e)));
        }
        if crate::syscallbuf::touches_region(nr, &args) {
            // The program maps over (or unmaps) the handler's region: unpatch first, as the replay
            // does at this call, and patch nothing more in this image.
            if let Err(e) = crate::syscallbuf::uninstall(&t) {
                return Err(Box::new((Some(t), e)));
            }
            if let Some(p) = self.procs.get_mut(&tid) {
                p.sysbuf_off = true;
            }
        }
        let mut t = match self.try_syscallbuf(t, nr, regs.rip) {
            Ok(handled) => return handled,
            Err(t) => *t,
        };
        if nr == libc::SYS_mmap {
            // The bytes a shared file mapping starts with, read now, while this thread holds
            // the right (at the exit another process may have run: a call still in the kernel
            // after two ticks gives the right up); replay puts them there at this stop.
            let tgid = self.procs.get(&tid).map_or(tid, |p| p.tgid);
            self.files.contents.remove(&tid);
            if let Some(bytes) = self.read_shared_contents(tid, tgid, &args) {
                self.files.contents.insert(tid, bytes);
                self.take_shared_rdv(tid, &args);
            }
        }
        let spec = syscalls::spec(nr);
        let fd = spec.fd_arg.map(|i| self.fd_info(tid, args[i] as i32));
        // Refused here (skipped: it returns ENOSYS and programs fall back), said once each:
        // io_uring (its rings are memory the kernel and the program share), and `sendfile` into
        // Sightline's stdout or stderr (replay writes those bytes again from the program's
        // memory, and these never pass through it; elsewhere it is recorded from version 6).
        let refusal = match nr {
            libc::SYS_io_uring_setup => Some((
                "io_uring disabled: io_uring_setup returns ENOSYS",
                "ordinary system calls",
            )),
            libc::SYS_sendfile if fd.is_some_and(|f| f.out != 0) => Some((
                "sendfile into the recording's stdout or stderr returns ENOSYS",
                "read and write",
            )),
            _ => None,
        };
        if let Some((what, fallback)) = refusal {
            if self.refusals_said.insert(nr) {
                let tgid = self.procs.get(&tid).map_or(tid, |p| p.tgid);
                eprintln!(
                    "sightline: {what} (process {tgid}, thread {tid}); programs fall back to {fallback}"
                );
            }
            let mut r = regs;
            r.orig_rax = u64::MAX;
            r.rax = (-i64::from(libc::ENOSYS)) as u64;
            if let Err(e) = t.set_regs(&r) {
                return Err(Box::new((Some(t), e.into())));
            }
        }
        // Read at entry: a successful execve replaces the memory that held it. A path that cannot
        // be read (a bad pointer: the call fails with EFAULT) stays empty.
        let path = syscalls::read_path(&t, nr, &args).unwrap_or_default();
        let p = self.procs.get_mut(&tid).expect("stopped tracee has state");
        if p.releasing.is_none()
            && let Some((sig, info)) = p.held.pop_front()
        {
            // Raised now, delivered when this system call returns (or interrupts it).
            // Process-directed, like the timer or `kill` that sent it: if another instance of a
            // standard signal is pending meanwhile, the kernel keeps one, as it would natively.
            // With threads, to this thread: another one would be interrupted wherever it is.
            let raised = if live > 1 {
                replay_ptrace::tgkill(tgid, tid, sig)
            } else {
                replay_ptrace::kill(tid, sig)
            };
            if let Err(e) = raised {
                return Err(Box::new((Some(t), e.into())));
            }
            p.releasing = Some((sig, info));
            // A standard signal is pending at most once: the kernel merges a second instance
            // into the first until it is delivered. Each instance we held was taken off the
            // kernel's pending set, so a timer or child exits re-generated it; natively those
            // would have merged. Delivering the copies later (a backlog, long after the program
            // stopped its timer, maybe after it reset the handler) is not what the program would
            // have seen.
            if sig < STANDARD_SIGNALS_END {
                p.held.retain(|(s, _)| *s != sig);
            }
        }
        p.last_exit_regs = None;
        p.pending = Some(Pending { nr, args, fd, path });
        Ok((t, Resume::Syscall, 0))
    }

    /// At the seccomp stop of a bufferable call from a patchable libc site: patch the site (mapping
    /// the handler first if needed), record that, and let the call restart through the handler.
    /// `None` when the stop is to be handled as usual.
    fn try_syscallbuf(
        &mut self,
        mut t: Stopped,
        nr: i64,
        rip: u64,
    ) -> Result<StopResult, Box<Stopped>> {
        use crate::syscallbuf::{self as sb, Installed};
        let tid = t.tid();
        let tgid = self.procs.get(&tid).map_or(tid, |p| p.tgid);
        if !self.syscallbuf
            || self.procs.get(&tid).is_none_or(|p| p.sysbuf_off)
            || self.threaded_procs.contains(&tgid)
            || sb::from_handler(rip)
        {
            return Err(Box::new(t));
        }
        let Some((site, orig)) = sb::candidate(&t, nr, rip) else {
            return Err(Box::new(t));
        };
        match sb::install(&mut t, site, &orig, replay_ptrace::syscallbuf::MODE_RECORD) {
            Ok(Installed::Patched) => {
                if self.debug {
                    eprintln!(
                        "[record] tid {tid}: patched {} site at {site:#x}",
                        syscalls::name(nr)
                    );
                }
                Ok(
                    match self.emit(tid, Event::SyscallbufPatch { site, orig }) {
                        Ok(()) => Ok((t, Resume::Cont, 0)),
                        Err(e) => Err(Box::new((Some(t), e))),
                    },
                )
            }
            Ok(outcome) => {
                if let Some(p) = self.procs.get_mut(&tid) {
                    p.sysbuf_off = true;
                }
                if self.debug {
                    eprintln!("[record] tid {tid}: no syscall buffering ({outcome:?})");
                }
                if outcome == Installed::Rewound {
                    Ok(Ok((t, Resume::Cont, 0)))
                } else {
                    Err(Box::new(t))
                }
            }
            Err(e) => Ok(Err(Box::new((Some(t), e)))),
        }
    }

    /// Syscall-exit stop: record the result, the memory it wrote, its rendezvous points.
    pub(super) fn syscall_exit(&mut self, mut t: Stopped) -> StopResult {
        let tid = t.tid();
        let Some(pending) = self.procs.get_mut(&tid).and_then(|p| p.pending.take()) else {
            return Ok((t, Resume::Cont, 0));
        };
        match self.finish_syscall(&mut t, pending) {
            Ok(()) => Ok((t, Resume::Cont, 0)),
            Err(e) => Err(Box::new((Some(t), e))),
        }
    }

    fn finish_syscall(&mut self, t: &mut Stopped, pending: Pending) -> Result<(), Error> {
        let tid = t.tid();
        let regs = t.regs()?;
        let result = regs.rax as i64;
        let Pending { nr, args, fd, path } = pending;
        let (out_nr, out_args) = match self.procs.get_mut(&tid) {
            Some(p) => restarted_call(&mut p.restart_of, nr, args, result),
            None => (nr, args),
        };
        let mut read = |addr: u64, len: usize| t.read_bytes(RemotePtr::new(addr), len).ok();
        let mut writes = Vec::new();
        for (addr, len) in syscalls::outputs(out_nr, &out_args, result, &mut read) {
            if let Some(data) = read(addr, len) {
                writes.push(MemWrite { addr, data });
            }
        }
        let mut data_hash = 0;
        let mut output = 0;
        if syscalls::is_write(nr) && result > 0 {
            let mut h = HASH_SEED;
            for (addr, len) in syscalls::inputs(nr, &args, result, &mut read) {
                if let Some(data) = read(addr, len) {
                    h = syscalls::hash(h, &data);
                }
            }
            data_hash = h;
            output = fd.map_or(0, |f| f.out);
        }
        let mut rendezvous: Vec<Rendezvous> = Vec::new();
        if let Some(obj) = fd.and_then(|f| f.obj) {
            rendezvous.push(self.next_rdv(obj));
        }
        let child = match nr {
            libc::SYS_wait4 if result > 0 => Some(result as i32),
            libc::SYS_waitid if result == 0 => writes
                .first()
                .filter(|w| w.data.len() >= 20)
                .map(|w| i32::from_le_bytes(w.data[16..20].try_into().expect("4")))
                .filter(|&p| p > 0),
            _ => None,
        };
        if let Some(child) = child {
            rendezvous.push(self.next_rdv(process_object(child)));
        }
        let mut extra = Vec::new();
        if matches!(nr, libc::SYS_execve | libc::SYS_execveat) && result == 0 {
            let info = crate::machine::prepare_image(t, None)?;
            self.cpuid_faulting |= info.cpuid_faulting;
            extra = info.at_random;
            extra.extend(self.keep_exec(tid));
        }
        let tgid = self.procs.get(&tid).map_or(tid, |p| p.tgid);
        if matches!(nr, libc::SYS_execve | libc::SYS_execveat) && result == 0 {
            // The old image's shared mappings are gone.
            rendezvous.extend(self.shared_files_released(tgid));
        }
        if matches!(nr, libc::SYS_fork | libc::SYS_vfork | libc::SYS_clone)
            && self.joined_forks.remove(&tid)
        {
            extra = vec![crate::sched::JOINED];
        }
        if nr == libc::SYS_mmap {
            extra = self.keep_mapped(tid, tgid, &args, result);
            if self.is_shared_file_mapping(tgid, &args) {
                extra = self.shared_mapping(tid, tgid, &args, result);
            }
            writes.extend(self.shared_contents(tid, &args, result));
            if let Some(rdv) = self.shared_mmap_rdv(tid, tgid, result) {
                rendezvous.push(rdv);
            }
        } else if nr == libc::SYS_ioctl && result >= 0 {
            self.unmodelled_ioctl(tgid, tid, &args);
        } else {
            self.unmodelled_call(tgid, tid, nr, result);
            self.note_open(t, tgid, nr, &args, result);
        }
        if let Some(rdv) = self.shared_fd_rdv(tgid, nr, args[0] as i32) {
            rendezvous.push(rdv);
        }
        let ev = SyscallEvent {
            nr,
            args,
            result,
            writes,
            rendezvous,
            output,
            data_hash,
            extra,
            path,
        };
        self.emit(tid, Event::Syscall(ev))?;
        let regs = t.regs()?;
        if let Some(p) = self.procs.get_mut(&tid) {
            p.last_exit_regs = Some(regs);
        }
        Ok(())
    }

    /// What fd `fd` of `tid` refers to: one `stat` of `/proc/<tid>/fd/<fd>` per call.
    ///
    /// # Why no cache?
    /// `dup`, `dup2`, `dup3`, `close` and fd-duplicating `fcntl`s run untrapped at full speed (they
    /// are a large share of `find`'s system calls), so the recorder cannot see an fd number being
    /// reused; a cached answer could be stale. A stat costs about 2 µs, only on fd-based calls.
    fn fd_info(&mut self, tid: i32, fd: i32) -> FdInfo {
        match std::fs::metadata(format!("/proc/{tid}/fd/{fd}")) {
            Ok(m) => {
                let id = (m.dev(), m.ino());
                let (is_out, is_err) = (Some(id) == self.stdout_id, Some(id) == self.stderr_id);
                let out = match (is_out, is_err) {
                    (true, true) => {
                        if fd == 2 {
                            2
                        } else {
                            1
                        }
                    }
                    (true, false) => 1,
                    (false, true) => 2,
                    _ => 0,
                };
                let ft = m.file_type();
                let shared = ft.is_fifo() || ft.is_socket() || ft.is_char_device();
                FdInfo {
                    obj: (shared || out != 0).then(|| fd_object(id.0, id.1)),
                    out,
                }
            }
            Err(_) => FdInfo { obj: None, out: 0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::restarted_call;

    #[test]
    fn a_restart_interrupted_again_still_records_the_first_calls_outputs() {
        let poll = [0x7fff_0000, 4, u64::MAX, 0, 0, 0];
        let mut kept = None;
        // poll, interrupted by a signal without a handler: the kernel restarts it.
        assert_eq!(
            restarted_call(&mut kept, libc::SYS_poll, poll, -516),
            (libc::SYS_poll, poll)
        );
        // Its restart is interrupted too (a second SIGCHLD), then completes with one fd ready:
        // both restarts write what poll writes.
        let none = [0; 6];
        let restart = libc::SYS_restart_syscall;
        assert_eq!(
            restarted_call(&mut kept, restart, none, -516),
            (libc::SYS_poll, poll)
        );
        assert_eq!(
            restarted_call(&mut kept, restart, none, 1),
            (libc::SYS_poll, poll)
        );
        // Done: the next call is its own, and a stray restart records nothing of poll's.
        assert_eq!(kept, None);
        assert_eq!(restarted_call(&mut kept, restart, none, 0), (restart, none));
        let read = [3, 0x1000, 64, 0, 0, 0];
        assert_eq!(
            restarted_call(&mut kept, libc::SYS_read, read, 5),
            (libc::SYS_read, read)
        );
        assert_eq!(kept, None);
    }
}
