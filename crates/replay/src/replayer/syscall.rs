//! Replaying trapped system calls. Mirrors `recorder/syscall.rs`.
//!
//! At each seccomp stop the call is checked against the next recorded event (number and argument
//! registers); a mismatch is a divergence. Then, by [`Mode`]: emulated calls are skipped (system
//! call number set to -1) with the recorded result and memory injected; real calls run and their
//! result is checked and replaced by the recorded one at the exit stop.

use std::os::unix::fs::MetadataExt;

use replay_ptrace::{RemotePtr, Resume, Stopped, WaitKind};

use super::{Next, Replayer};
use crate::format::{Event, SyscallEvent};
use crate::syscalls::{self, HASH_SEED, Mode};
use crate::{Error, describe};

/// A system call running for real, awaiting its exit stop.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) ev: SyscallEvent,
    fixup: Fixup,
    /// Interrupted by a signal of the replay's own making (a real SIGCHLD): being re-issued.
    pub(super) restarting: bool,
}

#[derive(Debug)]
pub(super) enum Fixup {
    /// Run as is; check fd results; inject the recorded result and writes.
    Real,
    /// Skipped, but its recorded result is a restart code: at the exit stop, restore the system call
    /// number so the kernel restarts it (or turns it into -EINTR) when the signal is delivered.
    Restart,
    /// Run with some registers rewritten (and maybe scratch memory): restore them at exit.
    Rewritten {
        saved: [u64; 6],
        scratch: Option<(u64, Vec<u8>)>,
        expect: i64,
    },
    /// fork/vfork/clone: inject the recorded child pid.
    Fork,
    /// Skipped like [`Fixup::Real`]'s opposite, but completed only at the exit stop: a call that may
    /// block, in a process with threads, whose result the recording took when its thread had the
    /// right to run again (`crate::sched`).
    Emulated,
    /// execve: prepare the new image with the recorded AT_RANDOM.
    Exec,
}

impl Fixup {
    /// A call run with its argument registers rewritten (and maybe scratch memory), restored at
    /// its exit stop, where it must return `expect`.
    pub(super) fn rewritten(
        saved: [u64; 6],
        scratch: Option<(u64, Vec<u8>)>,
        expect: i64,
    ) -> Fixup {
        Fixup::Rewritten {
            saved,
            scratch,
            expect,
        }
    }
}

const AT_FDCWD: i64 = -100;
/// `recvmsg`'s flag that makes received fds close-on-exec (`include/linux/socket.h`).
const MSG_CMSG_CLOEXEC: u64 = 0x4000_0000;

/// The recorded child a wait4/waitid reaped (0 when none: WNOHANG with nothing ready).
fn waited_child(ev: &SyscallEvent) -> i32 {
    match ev.nr {
        libc::SYS_wait4 => ev.result.max(0) as i32,
        _ if ev.result != 0 => 0,
        _ => ev
            .writes
            .first()
            .filter(|w| w.data.len() >= 20)
            .map_or(0, |w| {
                i32::from_le_bytes(w.data[16..20].try_into().expect("4"))
            }),
    }
}

pub(super) fn args_of(r: &replay_ptrace::Regs) -> [u64; 6] {
    [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9]
}

pub(super) fn set_args(r: &mut replay_ptrace::Regs, a: [u64; 6]) {
    [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9] = a;
}

fn render(nr: i64, args: &[u64; 6]) -> String {
    syscalls::format_call(nr, args, None)
}

/// [`render`], for go-live's report.
pub(super) fn render_call(nr: i64, args: &[u64; 6]) -> String {
    render(nr, args)
}

/// [`render`] with the call's path argument read from the tracee and shown as a string
/// (`execve("./build/t")`), for divergence reports.
fn render_at(t: &Stopped, nr: i64, args: &[u64; 6]) -> String {
    syscalls::format_call(nr, args, syscalls::read_path(t, nr, args).as_deref())
}

/// A result as a report shows it: the errno name of a failure (`ENOENT`), else the number.
fn result_text(r: i64) -> String {
    syscalls::errno_name(r).map_or_else(|| r.to_string(), str::to_string)
}

impl Replayer<'_> {
    /// The syscall-buffering part of a seccomp stop (`crate::syscallbuf`): patch a site where the
    /// recording did, refill the buffer when the handler asks, and check that every buffered call
    /// was made. `Some(how)` when the stop was handled (resume the tracee so), `None` when it is an
    /// ordinary trapped call.
    fn syscallbuf_entry(
        &mut self,
        t: &mut Stopped,
        rec: i32,
        nr: i64,
        args: &[u64; 6],
        rip: u64,
    ) -> Result<Option<Resume>, Error> {
        use crate::syscallbuf as sb;
        let left = sb::unconsumed(t);
        if left > 0 {
            return Err(self.divergence(
                rec,
                format!("the buffered system calls recorded here ({left} bytes of them left)"),
                render(nr, args),
            ));
        }
        match self.front(rec) {
            Some(Event::Buffered(_)) if sb::from_handler(rip) => {
                self.load_batch(t, rec)?;
                // Skip this call; the handler starts over and finds it in the buffer.
                let mut r = t.regs()?;
                r.orig_rax = u64::MAX;
                r.rax = replay_ptrace::syscallbuf::RETRY as u64;
                t.set_regs(&r)?;
                Ok(Some(Resume::Cont))
            }
            Some(Event::Buffered(_)) => {
                Err(self.divergence(rec, self.expected_text(rec), render(nr, args)))
            }
            Some(Event::SyscallbufPatch { site, orig }) => {
                let (site, orig) = (*site, *orig);
                if rip.wrapping_sub(2) != site
                    || sb::candidate(t, nr, rip).map(|c| c.1) != Some(orig)
                {
                    return Err(self.divergence(rec, self.expected_text(rec), render(nr, args)));
                }
                match sb::install(t, site, &orig, replay_ptrace::syscallbuf::MODE_REPLAY)? {
                    sb::Installed::Patched => {
                        self.complete(rec);
                        Ok(Some(Resume::Cont))
                    }
                    other => Err(self.divergence(
                        rec,
                        self.expected_text(rec),
                        format!(
                            "{}: the syscall buffer could not be installed ({other:?})",
                            render(nr, args)
                        ),
                    )),
                }
            }
            _ => Ok(None),
        }
    }

    /// Seccomp stop: check, then emulate or run.
    pub(super) fn syscall_entry(&mut self, mut t: Stopped) -> Result<Next, Error> {
        let tid = t.tid();
        if let Some(p) = self.procs.get_mut(&tid).and_then(|p| p.pending.as_mut())
            && p.restarting
        {
            // Our own re-issue of an interrupted real call: already checked, let it run.
            p.restarting = false;
            return Ok(Next::Resume(t, Resume::Syscall, 0));
        }
        let rec = self.rec_of(tid);
        let regs = t.regs()?;
        let nr = regs.orig_rax as i64;
        let args = args_of(&regs);
        if nr == libc::SYS_clone
            && args[0] & crate::sched::CLONE_THREAD != 0
            && let Some(p) = self.procs.get(&tid)
            && self.threaded_procs.insert(p.tgid)
        {
            // As recorded: scheduled and unbuffered from the first thread on.
            if let Some(g) = self.groups.get_mut(&p.group) {
                g.threaded = true;
            }
            let left = crate::syscallbuf::unconsumed(&t);
            if left > 0 {
                return Err(self.divergence(
                    rec,
                    format!("the buffered system calls recorded here ({left} bytes of them left)"),
                    render(nr, &args),
                ));
            }
            crate::syscallbuf::switch_off(&t);
        }
        if self.threaded(tid) {
            let blocks = crate::sched::may_block(nr, &args);
            if let Some(Event::Switch { .. }) = self.front(rec) {
                // Given up here: a call that may block, or one that blocked when recorded.
                self.transfer = self.take_switch(rec, crate::format::SwitchPoint::BlockingCall);
                if self.transfer.is_none() {
                    return Err(self.divergence(rec, self.expected_text(rec), render(nr, &args)));
                }
                // Going live with the switch the thread's last event before its frontier: this
                // entry is the frontier (the call it blocked in when recorded runs live), held
                // there while the right to run passes on as recorded.
                if self.past_cut(rec)
                    && let Some(live) = self.live.as_mut()
                {
                    live.frontier.insert(tid);
                    return Ok(Next::Hold(t, WaitKind::SyscallStop));
                }
            }
            let killed_here = match self.front(rec) {
                None => true,
                Some(Event::Switch { why, .. }) => *why == crate::format::SwitchPoint::Exit,
                _ => false,
            };
            if blocks && killed_here {
                // Still blocked here when its process ended in the recording (killed by another
                // thread's exit): it stays so, and its death hands the right on as recorded.
                return Ok(Next::Hold(
                    t,
                    WaitKind::Event(replay_ptrace::PtraceEvent::Seccomp),
                ));
            }
        }
        if let Some(how) = self.syscallbuf_entry(&mut t, rec, nr, &args, regs.rip)? {
            return Ok(Next::Resume(t, how, 0));
        }
        let mut ev = match self.front(rec) {
            Some(Event::Syscall(e)) => {
                let n = syscalls::spec(nr).nargs;
                if e.nr != nr || e.args[..n] != args[..n] {
                    return Err(self.divergence(
                        rec,
                        describe(&Event::Syscall(e.clone())),
                        render_at(&t, nr, &args),
                    ));
                }
                e.clone()
            }
            Some(Event::Exit { status, .. })
                if libc::WIFSIGNALED(*status) && libc::WTERMSIG(*status) == libc::SIGKILL =>
            {
                // SIGKILL ended it here in the recording (sent by another recorded process, whose
                // `kill` is emulated in replay, or from outside). It cannot be caught, blocked or
                // held, so the process made no further system call: kill it at this one. Its exit
                // stop then matches the recorded status.
                if self.debug {
                    eprintln!("[replay] tid {tid}: SIGKILL at {}", render(nr, &args));
                }
                replay_ptrace::tkill(tid, libc::SIGKILL)?;
                return Ok(Next::Resume(t, Resume::Cont, 0));
            }
            _ => {
                return Err(self.divergence(
                    rec,
                    self.expected_text(rec),
                    render_at(&t, nr, &args),
                ));
            }
        };
        if crate::syscallbuf::touches_region(nr, &args) {
            // As recorded: the program takes the handler's region over; unpatch first.
            crate::syscallbuf::uninstall(&t)?;
        }
        if !self.progress.ready(&ev.rendezvous) {
            return Ok(Next::Park(
                t,
                WaitKind::Event(replay_ptrace::PtraceEvent::Seccomp),
            ));
        }
        if syscalls::is_write(nr) && ev.result > 0 {
            self.check_and_output(&t, rec, &ev)?;
            if let Some(l) = &mut self.live {
                l.capture_write(&t, &ev);
            }
        }
        if let Some(fixup) = self.masked_wait(&mut t, rec, &ev)? {
            return Ok(self.run_to_exit(t, ev, fixup));
        }
        let spec = syscalls::spec(nr);
        let failed = ev.result < 0 && !syscalls::is_restart(ev.result);
        let mode = match spec.mode {
            _ if failed => Mode::Emulate,
            // Changes to a file that is mapped shared reach the replay's own file for it, so
            // its mappings show them (its reads stay emulated).
            _ if self.changes_shared_file(tid, nr, &args) => Mode::Real,
            Mode::Wait if waited_child(&ev) <= 0 => Mode::Emulate,
            // A fork interrupted by a signal (-ERESTARTNOINTR: typically a held signal released
            // at this sync point, often a child's SIGCHLD) made no child; the kernel restarts it
            // once the signal is handled, which is the next recorded fork. Skipped here, restarted
            // likewise.
            Mode::Fork if syscalls::is_restart(ev.result) => Mode::Emulate,
            Mode::Fcntl => match args[1] as i32 {
                libc::F_DUPFD | libc::F_DUPFD_CLOEXEC | libc::F_GETFD | libc::F_SETFD => Mode::Real,
                _ => Mode::Emulate,
            },
            Mode::Ioctl => match args[1] {
                0x5450 | 0x5451 => Mode::Real, // FIONCLEX, FIOCLEX
                _ => Mode::Emulate,
            },
            Mode::SigSuspend => {
                let interrupted =
                    syscalls::is_restart(ev.result) || ev.result == -i64::from(libc::EINTR);
                let next_signal = self
                    .streams
                    .get(&rec)
                    .and_then(|s| s.events.get(1))
                    .and_then(|e| match e {
                        Event::Signal {
                            signo, sync: false, ..
                        } => Some(*signo),
                        _ => None,
                    });
                match (interrupted, next_signal) {
                    (true, Some(sig)) => {
                        // Raise it now: the real rt_sigsuspend returns at once and the handler runs
                        // under the temporary mask, as recorded.
                        replay_ptrace::tkill(tid, sig)?;
                        if let Some(p) = self.procs.get_mut(&tid) {
                            p.releasing = Some(sig);
                        }
                        Mode::Real
                    }
                    _ => Mode::Emulate,
                }
            }
            m => m,
        };
        if mode == Mode::Emulate
            && nr == libc::SYS_recvmsg
            && ev.result >= 0
            && let Some(fixup) = self.receive_fds(&mut t, rec, &ev)?
        {
            return Ok(self.run_to_exit(t, ev, fixup));
        }
        let fixup = match mode {
            Mode::Emulate => return self.emulate(t, rec, ev),
            Mode::Real
                if nr == libc::SYS_mmap
                    && (crate::files::SharedMapping::decode(&ev.extra).is_some()
                        || syscalls::is_shared_writable_file_mapping(&args)) =>
            {
                if self.fill_shared_file(tid, &ev)? {
                    // The recorded bytes are in the file, so in the mapping.
                    ev.writes.clear();
                    Fixup::Real
                } else if syscalls::is_shared_writable_file_mapping(&args) {
                    self.rewrite_shared_mapping(&mut t, &ev)?
                } else {
                    Fixup::Real
                }
            }
            Mode::Real | Mode::SigSuspend => Fixup::Real,
            Mode::Fork if self.live_pids() => self.fork_at_recorded_pid(&mut t, &ev)?,
            Mode::Fork => Fixup::Fork,
            Mode::Exec => Fixup::Exec,
            Mode::Wait => self.rewrite_wait(&mut t, &ev)?,
            Mode::Open => self.rewrite_open(&mut t, &ev)?,
            Mode::StandIn => {
                let flags = if nr == libc::SYS_accept4 {
                    args[3] as i32 & libc::O_CLOEXEC
                } else {
                    0
                };
                self.stand_in(&mut t, &ev, "/dev/null", libc::O_RDWR | flags, None)?
            }
            Mode::Fcntl | Mode::Ioctl => unreachable!("resolved above"),
        };
        Ok(self.run_to_exit(t, ev, fixup))
    }

    /// Lets the call at `t`'s seccomp stop run to its exit stop, where `fixup` completes `ev`.
    fn run_to_exit(&mut self, t: Stopped, ev: SyscallEvent, fixup: Fixup) -> Next {
        if let Some(p) = self.procs.get_mut(&t.tid()) {
            p.pending = Some(Pending {
                ev,
                fixup,
                restarting: false,
            });
        }
        Next::Resume(t, Resume::Syscall, 0)
    }

    /// `pselect6`, `ppoll` and `epoll_pwait` with a signal mask, interrupted by a signal when
    /// recorded: the signal is usually blocked outside the call and unblocked only by its mask, so
    /// it cannot simply be raised after an emulated call. The call becomes a real
    /// `rt_sigsuspend(mask)` with the recorded signal raised first: it returns at once and the
    /// handler runs under the call's mask, exactly as recorded (both calls restore the old mask
    /// the same way, through `TIF_RESTORE_SIGMASK`).
    fn masked_wait(
        &mut self,
        t: &mut Stopped,
        rec: i32,
        ev: &SyscallEvent,
    ) -> Result<Option<Fixup>, Error> {
        let interrupted = syscalls::is_restart(ev.result) || ev.result == -i64::from(libc::EINTR);
        if !interrupted
            || !matches!(
                ev.nr,
                libc::SYS_pselect6 | libc::SYS_ppoll | libc::SYS_epoll_pwait
            )
        {
            return Ok(None);
        }
        let Some(Event::Signal {
            signo, sync: false, ..
        }) = self.streams.get(&rec).and_then(|s| s.events.get(1))
        else {
            return Ok(None);
        };
        let signo = *signo;
        let mask = match ev.nr {
            libc::SYS_pselect6 if ev.args[5] != 0 => t.read_u64(RemotePtr::new(ev.args[5]))?,
            libc::SYS_ppoll => ev.args[3],
            libc::SYS_epoll_pwait => ev.args[4],
            _ => 0,
        };
        if mask == 0 {
            return Ok(None);
        }
        let tid = t.tid();
        let mut regs = t.regs()?;
        let saved = args_of(&regs);
        regs.orig_rax = libc::SYS_rt_sigsuspend as u64;
        set_args(&mut regs, [mask, 8, 0, 0, 0, 0]);
        t.set_regs(&regs)?;
        replay_ptrace::tkill(tid, signo)?;
        if let Some(p) = self.procs.get_mut(&tid) {
            p.releasing = Some(signo);
        }
        Ok(Some(Fixup::Rewritten {
            saved,
            scratch: None,
            expect: -514,
        }))
    }

    /// Checks a write's data against the recorded hash, and writes program output to our own
    /// stdout/stderr.
    fn check_and_output(&mut self, t: &Stopped, rec: i32, ev: &SyscallEvent) -> Result<(), Error> {
        let mut read = |addr: u64, len: usize| t.read_bytes(RemotePtr::new(addr), len).ok();
        let mut h = HASH_SEED;
        let mut data = Vec::new();
        for (addr, len) in syscalls::inputs(ev.nr, &ev.args, ev.result, &mut read) {
            if let Some(d) = read(addr, len) {
                h = syscalls::hash(h, &d);
                if ev.output != 0 {
                    data.extend_from_slice(&d);
                }
            }
        }
        if h != ev.data_hash {
            return Err(self.divergence(
                rec,
                format!(
                    "{} writing the recorded data",
                    describe(&Event::Syscall(ev.clone()))
                ),
                format!(
                    "{} writing different data (hash {h:#x}, recorded {:#x})",
                    render(ev.nr, &ev.args),
                    ev.data_hash
                ),
            ));
        }
        let sink: &mut dyn std::io::Write = match ev.output {
            1 => self.stdout,
            2 => self.stderr,
            _ => return Ok(()),
        };
        // Flushed at once, so stdout and stderr interleave as they did when recorded.
        sink.write_all(&data)
            .and_then(|()| sink.flush())
            .map_err(|source| Error::Io {
                path: "<program output>".into(),
                source,
            })
    }

    /// Skips the call and injects its recorded result and memory.
    fn emulate(&mut self, mut t: Stopped, rec: i32, ev: SyscallEvent) -> Result<Next, Error> {
        let tid = t.tid();
        // Completed (memory included) at its exit stop, when its thread runs again.
        let deferred = self.threaded(tid)
            && (crate::sched::may_block(ev.nr, &ev.args) || self.transfer.is_some());
        if !deferred {
            for w in &ev.writes {
                t.write_bytes(RemotePtr::new(w.addr), &w.data)?;
            }
        }
        let mut regs = t.regs()?;
        regs.orig_rax = u64::MAX;
        regs.rax = ev.result as u64;
        t.set_regs(&regs)?;
        if syscalls::is_restart(ev.result) || deferred {
            let fixup = if syscalls::is_restart(ev.result) {
                Fixup::Restart
            } else {
                Fixup::Emulated
            };
            return Ok(self.run_to_exit(t, ev, fixup));
        }
        self.complete(rec);
        self.after_syscall(t)
    }

    /// wait4/waitid: wait for the translated child for real (its exit was replayed: rendezvous).
    fn rewrite_wait(&mut self, t: &mut Stopped, ev: &SyscallEvent) -> Result<Fixup, Error> {
        let rec = self.rec_of(t.tid());
        let child_rec = waited_child(ev);
        let Some(&child) = self.real_of.get(&child_rec) else {
            return Err(self.divergence(
                rec,
                describe(&Event::Syscall(ev.clone())),
                format!("a wait for recorded child {child_rec}, which this replay never created"),
            ));
        };
        // In go-live's pid namespace the tracee's pids are the recorded ones.
        let child = if self.live_pids() { child_rec } else { child };
        let mut regs = t.regs()?;
        let saved = args_of(&regs);
        let mut a = saved;
        let expect = if ev.nr == libc::SYS_wait4 {
            a[0] = child as u64;
            a[2] &= !(libc::WNOHANG as u64);
            i64::from(child)
        } else {
            a[0] = libc::P_PID as u64;
            a[1] = child as u64;
            a[3] &= !(libc::WNOHANG as u64);
            0
        };
        set_args(&mut regs, a);
        t.set_regs(&regs)?;
        Ok(Fixup::Rewritten {
            saved,
            scratch: None,
            expect,
        })
    }

    /// True for a call that changes the contents or size of a file through an fd that is one
    /// of the replay's own shared files (`write`, `pwrite64`, `writev`, `pwritev`, `pwritev2`,
    /// `ftruncate`, `fallocate`).
    fn changes_shared_file(&self, tid: i32, nr: i64, args: &[u64; 6]) -> bool {
        const CHANGES: [i64; 7] = [
            libc::SYS_write,
            libc::SYS_pwrite64,
            libc::SYS_writev,
            libc::SYS_pwritev,
            libc::SYS_pwritev2,
            libc::SYS_ftruncate,
            libc::SYS_fallocate,
        ];
        if !self.shared_files.any() || !CHANGES.contains(&nr) {
            return false;
        }
        std::fs::read_link(format!("/proc/{tid}/fd/{}", args[0] as i32))
            .is_ok_and(|p| self.shared_files.contains(&p))
    }

    /// When the fd of a shared `mmap` is one of the replay's own shared files, makes the file at
    /// least as long as the mapping and puts the bytes recorded under the mapping there (what
    /// other replayed processes or the program's own writes put there is the same when the
    /// replay is faithful), so the mapping runs for real and the replayed processes share it;
    /// false for any other fd.
    fn fill_shared_file(&mut self, tid: i32, ev: &SyscallEvent) -> Result<bool, Error> {
        let args = &ev.args;
        let fd_path = format!("/proc/{tid}/fd/{}", args[4] as i32);
        let Ok(target) = std::fs::read_link(&fd_path) else {
            return Ok(false);
        };
        if !self.shared_files.contains(&target) {
            return Ok(false);
        }
        let io = |source| Error::Io {
            path: target.display().to_string(),
            source,
        };
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&target)
            .map_err(io)?;
        let end = args[5].saturating_add(args[1]);
        if f.metadata().map_err(io)?.len() < end {
            f.set_len(end).map_err(io)?;
        }
        // The range holds what was recorded under the mapping once the exit stop has written
        // the recorded nonzero pages: zero it first (an earlier file with the same inode number,
        // or pages the program cleared since, may have left other bytes there).
        let zeros = vec![0u8; 1 << 16];
        let mut at = args[5];
        while at < end {
            let n = (end - at).min(zeros.len() as u64) as usize;
            std::os::unix::fs::FileExt::write_all_at(&f, &zeros[..n], at).map_err(io)?;
            at += n as u64;
        }
        for w in &ev.writes {
            let off = args[5] + w.addr.wrapping_sub(ev.result as u64);
            std::os::unix::fs::FileExt::write_all_at(&f, &w.data, off).map_err(io)?;
        }
        Ok(true)
    }

    /// A writable `MAP_SHARED` mapping of a file (the replay's fd is a stand-in, or a memfd
    /// whose size was emulated): mapped as shared anonymous memory at the recorded address
    /// (`MAP_FIXED_NOREPLACE` unless the program asked for `MAP_FIXED`), into which the exit stop
    /// writes the file's bytes recorded under it. Children forked later share it, as they shared
    /// the file's pages when recorded (they run in the same scheduling group).
    fn rewrite_shared_mapping(
        &mut self,
        t: &mut Stopped,
        ev: &SyscallEvent,
    ) -> Result<Fixup, Error> {
        let mut regs = t.regs()?;
        let saved = args_of(&regs);
        let mut a = saved;
        let flags = a[3] as i32;
        let placement = if flags & libc::MAP_FIXED != 0 {
            libc::MAP_FIXED
        } else {
            libc::MAP_FIXED_NOREPLACE
        };
        let kept = flags & !(0x0f | libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE);
        a[0] = ev.result as u64;
        a[3] = (kept | libc::MAP_SHARED | libc::MAP_ANONYMOUS | placement) as u32 as u64;
        a[4] = u64::MAX; // fd -1
        a[5] = 0;
        set_args(&mut regs, a);
        t.set_regs(&regs)?;
        Ok(Fixup::Rewritten {
            saved,
            scratch: None,
            expect: ev.result,
        })
    }

    /// open/openat/creat/openat2: a read-only open of an existing file or directory runs for real;
    /// anything else opens a stand-in with the same fd number.
    fn rewrite_open(&mut self, t: &mut Stopped, ev: &SyscallEvent) -> Result<Fixup, Error> {
        let a = ev.args;
        let (dirfd, path_ptr, flags) = match ev.nr {
            libc::SYS_open => (AT_FDCWD, a[0], a[1] as i32),
            libc::SYS_creat => (
                AT_FDCWD,
                a[0],
                libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
            ),
            libc::SYS_openat2 => (
                a[0] as i32 as i64,
                a[1],
                t.read_u64(RemotePtr::new(a[2]))? as i32,
            ),
            _ => (a[0] as i32 as i64, a[1], a[2] as i32),
        };
        let path = t.read_cstr(RemotePtr::new(path_ptr), 4096)?;
        let path_str = String::from_utf8_lossy(&path).into_owned();
        let tid = t.tid();
        let resolved = if path_str.starts_with('/') {
            path_str.clone()
        } else if dirfd == AT_FDCWD {
            format!("/proc/{tid}/cwd/{path_str}")
        } else {
            format!("/proc/{tid}/fd/{dirfd}/{path_str}")
        };
        let read_only = flags & libc::O_ACCMODE == libc::O_RDONLY
            && flags & (libc::O_CREAT | libc::O_TRUNC | libc::O_TMPFILE) == 0;
        let rec = self.rec_of(tid);
        let index = self.streams.get(&rec).map_or(usize::MAX, |s| s.index);
        if ev.result >= 0
            && let Some(name) = self.kept.get(&(rec, index))
        {
            // This fd is mapped later: open the file as it was when recorded, kept in the
            // recording, never the file as it is now.
            let kept = self.files_dir.join(name);
            if !kept.is_file() {
                return Err(Error::Command {
                    command: path_str,
                    reason: format!(
                        "the recording's copy of this mapped file, {}, is missing",
                        kept.display()
                    ),
                });
            }
            let kept = self.files_seen_at.join(name).display().to_string();
            return self.stand_in(
                t,
                ev,
                &kept,
                libc::O_RDONLY | (flags & libc::O_CLOEXEC),
                Some((path_ptr, path.len() + 1)),
            );
        }
        if ev.result >= 0
            && let Some(&n) = self.shared_opens.get(&(rec, index))
            && let Some(shared) = self.shared_files.path(n)
        {
            // This fd is mapped shared later: open the replay's own file for it, which every
            // replayed process that maps this file opens, so they share its pages.
            return self.stand_in(
                t,
                ev,
                &shared.display().to_string(),
                libc::O_RDWR | (flags & libc::O_CLOEXEC),
                Some((path_ptr, path.len() + 1)),
            );
        }
        let kind = std::fs::metadata(&resolved)
            .ok()
            .map(|m| m.mode() & libc::S_IFMT);
        // A /proc/PID path names a process of the recording's time: it may have exited between
        // the check above and a real open (ESRCH), so it always gets a stand-in (its reads are
        // replayed from the recording either way).
        // (The program's own absolute path: a relative one resolves through the replay's own
        // /proc/TID/cwd, which is not a recorded process's.)
        let of_a_process = is_proc_pid_path(&path_str);
        let real_ok =
            read_only && !of_a_process && matches!(kind, Some(libc::S_IFREG | libc::S_IFDIR));
        if real_ok {
            return Ok(Fixup::Real);
        }
        let cloexec = flags & libc::O_CLOEXEC;
        if flags & libc::O_DIRECTORY != 0 || (of_a_process && kind == Some(libc::S_IFDIR)) {
            self.stand_in(
                t,
                ev,
                "/",
                libc::O_RDONLY | libc::O_DIRECTORY | cloexec,
                Some((path_ptr, path.len() + 1)),
            )
        } else {
            self.stand_in(
                t,
                ev,
                "/dev/null",
                libc::O_RDWR | cloexec,
                Some((path_ptr, path.len() + 1)),
            )
        }
    }

    /// Turns the call into `openat(AT_FDCWD, stand_in, flags)`: the kernel hands out the lowest free
    /// fd, which is the recorded one when the replay is faithful (checked at exit). The path is
    /// written over the program's own path buffer when it fits, else just below the stack's red
    /// zone; either way the bytes are restored at the exit stop.
    /// A `recvmsg` that received an fd (`SCM_RIGHTS`, as nginx's master passes its workers'
    /// channels, or a socket handed to another process): emulated, it would install none, and the
    /// fd numbers after it would differ from the recording. The call runs instead as
    /// `dup3(socket, fd)`, a stand-in at the recorded number (a duplicate of the socket the message
    /// came on; whatever the program does with it is emulated like any socket), with the
    /// recorded result and memory put in place at its exit. Returns `None` when it received none.
    ///
    /// Errors: more than one fd in the message (replay stands in for one per message), reported
    /// as a divergence; a ptrace request fails.
    fn receive_fds(
        &mut self,
        t: &mut Stopped,
        rec: i32,
        ev: &SyscallEvent,
    ) -> Result<Option<Fixup>, Error> {
        let writes: Vec<(u64, &[u8])> = ev.writes.iter().map(|w| (w.addr, &w.data[..])).collect();
        let fds = syscalls::received_fds(&ev.args, &writes);
        match fds[..] {
            [] => Ok(None),
            [fd] => {
                let mut regs = t.regs()?;
                let saved = args_of(&regs);
                let cloexec = if ev.args[2] & MSG_CMSG_CLOEXEC != 0 {
                    libc::O_CLOEXEC
                } else {
                    0
                };
                regs.orig_rax = libc::SYS_dup3 as u64;
                set_args(&mut regs, [ev.args[0], fd as u64, cloexec as u64, 0, 0, 0]);
                t.set_regs(&regs)?;
                Ok(Some(Fixup::rewritten(saved, None, i64::from(fd))))
            }
            _ => Err(self.divergence(
                rec,
                describe(&Event::Syscall(ev.clone())),
                format!(
                    "{} received {} fds in one message (SCM_RIGHTS {fds:?}); replay stands in for one fd per message",
                    render(ev.nr, &ev.args),
                    fds.len()
                ),
            )),
        }
    }

    fn stand_in(
        &mut self,
        t: &mut Stopped,
        ev: &SyscallEvent,
        stand_in: &str,
        flags: i32,
        buffer: Option<(u64, usize)>,
    ) -> Result<Fixup, Error> {
        let mut regs = t.regs()?;
        let saved = args_of(&regs);
        let mut bytes = stand_in.as_bytes().to_vec();
        bytes.push(0);
        let at = match buffer {
            Some((p, cap)) if cap >= bytes.len() => p,
            _ => (regs.rsp - 128 - 64) & !7,
        };
        let old = t.read_bytes(RemotePtr::new(at), bytes.len())?;
        t.write_bytes(RemotePtr::new(at), &bytes)?;
        regs.orig_rax = libc::SYS_openat as u64;
        set_args(&mut regs, [AT_FDCWD as u64, at, flags as u64, 0, 0, 0]);
        t.set_regs(&regs)?;
        Ok(Fixup::Rewritten {
            saved,
            scratch: Some((at, old)),
            expect: ev.result,
        })
    }

    /// Syscall-exit stop of a call that ran for real (or a restart fixup).
    pub(super) fn syscall_exit(&mut self, mut t: Stopped) -> Result<Next, Error> {
        let tid = t.tid();
        let rec = self.rec_of(tid);
        let Some(Pending { ev, fixup, .. }) =
            self.procs.get_mut(&tid).and_then(|p| p.pending.take())
        else {
            return Ok(Next::Resume(t, Resume::Cont, 0));
        };
        let mut regs = t.regs()?;
        let real = regs.rax as i64;
        let expected_here = matches!(&fixup, Fixup::Rewritten { expect, .. } if *expect == real);
        if syscalls::is_restart(real)
            && !syscalls::is_restart(ev.result)
            && !matches!(fixup, Fixup::Restart | Fixup::Emulated)
            && !expected_here
        {
            // A real signal of the replay's own (suppressed when it stops) interrupted a call that
            // completed when recorded: re-issue it, as the kernel's restart would.
            regs.rax = regs.orig_rax;
            regs.rip -= 2;
            t.set_regs(&regs)?;
            if let Some(p) = self.procs.get_mut(&tid) {
                p.pending = Some(Pending {
                    ev,
                    fixup,
                    restarting: true,
                });
            }
            return Ok(Next::Resume(t, Resume::Cont, 0));
        }
        // A rewritten call's path buffer may hold its stand-in's path until restored below.
        let call = if matches!(fixup, Fixup::Rewritten { .. }) {
            render(ev.nr, &ev.args)
        } else {
            render_at(&t, ev.nr, &ev.args)
        };
        let mismatch = |me: &Self, what: String| {
            me.divergence(
                rec,
                describe(&Event::Syscall(ev.clone())),
                format!("{call} returned {}{what}", result_text(real)),
            )
        };
        match &fixup {
            Fixup::Real => {
                let spec = syscalls::spec(ev.nr);
                if ev.nr == libc::SYS_mmap && real != ev.result {
                    // The program would go on with a mapping that is not there (or elsewhere).
                    let fd = ev.args[4] as i32;
                    let target = std::fs::read_link(format!("/proc/{tid}/fd/{fd}"))
                        .map_or_else(|_| "no file".to_string(), |p| p.display().to_string());
                    let why = if target == "/dev/null" {
                        ": the replay's fd is a stand-in for a file the program created or opened for writing, whose shared mappings are not yet replayed"
                    } else {
                        ""
                    };
                    return Err(mismatch(
                        self,
                        format!(" (mapping fd {fd}, in replay {target}{why})"),
                    ));
                }
                if spec.returns_fd && real != ev.result {
                    return Err(mismatch(
                        self,
                        " (the fd table differs from the recording)".into(),
                    ));
                }
                if matches!(
                    ev.nr,
                    libc::SYS_pipe | libc::SYS_pipe2 | libc::SYS_socketpair
                ) {
                    let w = ev.writes.first().map(|w| (w.addr, w.data.clone()));
                    if let Some((addr, data)) = w
                        && t.read_bytes(RemotePtr::new(addr), data.len())? != data
                    {
                        return Err(mismatch(
                            self,
                            " with other fd numbers than recorded".into(),
                        ));
                    }
                }
            }
            Fixup::Restart => {
                regs.orig_rax = ev.nr as u64;
            }
            Fixup::Emulated => {}
            Fixup::Rewritten {
                saved,
                scratch,
                expect,
            } => {
                if real != *expect {
                    return Err(mismatch(self, format!(" (replay expected {expect})")));
                }
                if let Some((at, old)) = scratch {
                    t.write_bytes(RemotePtr::new(*at), old)?;
                }
                set_args(&mut regs, *saved);
                regs.orig_rax = ev.nr as u64;
            }
            Fixup::Fork => {
                if real < 0 {
                    return Err(mismatch(self, String::new()));
                }
            }
            Fixup::Exec => {
                if real != 0 {
                    return Err(mismatch(self, String::new()));
                }
                t.set_regs(&regs)?;
                crate::machine::prepare_image(&mut t, Some(&ev.extra[..ev.extra.len().min(16)]))?;
                regs = t.regs()?;
            }
        }
        if !matches!(fixup, Fixup::Exec) {
            for w in &ev.writes {
                t.write_bytes(RemotePtr::new(w.addr), &w.data)?;
            }
        }
        regs.rax = ev.result as u64;
        if matches!(fixup, Fixup::Restart) && !self.signal_follows(rec) {
            // No signal is delivered here (the one that interrupted the call when recorded was
            // held for a later sync point, or ignored): the kernel restarted the call then, and
            // with no signal pending now it would hand the restart code to the program. Restart
            // it as the kernel did (`arch_do_signal_or_restart` without a handler).
            regs.rax = if ev.result == -516 {
                libc::SYS_restart_syscall as u64
            } else {
                ev.nr as u64
            };
            regs.rip -= 2;
        }
        t.set_regs(&regs)?;
        self.complete(rec);
        self.after_syscall(t)
    }

    /// True when the event after `rec`'s current one is a signal delivered there.
    fn signal_follows(&self, rec: i32) -> bool {
        matches!(
            self.streams.get(&rec).and_then(|s| s.events.get(1)),
            Some(Event::Signal { .. })
        )
    }
}

/// True for a path in a process's `/proc/PID` (or `/proc/PID/task/TID`) directory, which may vanish
/// at any moment during replay (issue 11: `ps` replays diverged when a process it had read had
/// exited by the time replay opened the same file for real).
fn is_proc_pid_path(resolved: &str) -> bool {
    resolved
        .strip_prefix("/proc/")
        .and_then(|rest| rest.split('/').next())
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::is_proc_pid_path;

    #[test]
    fn proc_pid_paths_are_recognized() {
        assert!(is_proc_pid_path("/proc/1234/status"));
        assert!(is_proc_pid_path("/proc/1234"));
        assert!(is_proc_pid_path("/proc/1/task/1/stat"));
        assert!(!is_proc_pid_path("/proc/self/status"));
        assert!(!is_proc_pid_path("/proc/meminfo"));
        assert!(!is_proc_pid_path("/proc//status"));
        assert!(!is_proc_pid_path("/usr/lib/1234/x"));
    }
}
