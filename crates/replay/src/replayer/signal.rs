//! Replaying signals and trapped instructions. Mirrors `recorder/signal.rs`.
//!
//! - A trapped RDTSC/RDTSCP/CPUID gets the recorded answer.
//! - An asynchronous signal is raised by the replayer (`tkill`) right after the event it followed
//!   in the recording, before the program runs another instruction, and delivered with its recorded
//!   `siginfo_t`. Signals the replay's own kernel objects generate (a replayed child's real SIGCHLD)
//!   are suppressed: only recorded signals reach the program.
//! - A synchronous signal must recur by itself where it was recorded.

use replay_ptrace::{Resume, Stopped, WaitKind};

use super::{Next, Replayer};
use crate::format::Event;
use crate::machine::{self, SI_KERNEL, Trap};
use crate::{Error, describe};

/// `si_code` of a hardware breakpoint's SIGTRAP (`include/uapi/asm-generic/siginfo.h`).
const TRAP_HWBKPT: i32 = 4;

impl Replayer<'_> {
    /// The breakpoint at the next forced sync point's rip was hit: if the signature matches, the
    /// point is reached (then, as recorded, a held signal is raised or another thread runs);
    /// otherwise the thread runs on to the next hit.
    pub(super) fn on_breakpoint(&mut self, mut t: Stopped) -> Result<Next, Error> {
        let tid = t.tid();
        let rec = self.rec_of(tid);
        let Some(Event::SyncPoint { sig: want, .. }) = self.front(rec) else {
            return Err(self.divergence(rec, self.expected_text(rec), "a breakpoint hit".into()));
        };
        let want = *want;
        let here = crate::sched::signature(&mut t)?;
        let d = crate::sched::distance(&want, &here);
        let Some(p) = self.procs.get_mut(&tid) else {
            return Ok(Next::Resume(t, Resume::Cont, 0));
        };
        let seek = p.seeking.as_mut().expect("seeking");
        seek.hits += 1;
        self.seek_stops += 1;
        if d > 0 && seek.check.is_none() && !seek.no_check {
            // A pass that is not the point: check the next ones in the tracee.
            t.set_breakpoint(None)?;
            let installed = install_check(&mut t, &want, &here)?;
            if self.debug {
                eprintln!(
                    "[replay] tid {tid}: check at {:#x}: {}",
                    want.rip(),
                    installed
                        .as_ref()
                        .map_or("not installed".into(), |c| format!("page {:#x}", c.page))
                );
            }
            match installed {
                Some(c) => seek.check = Some(c),
                None => {
                    t.set_breakpoint(Some(want.rip()))?;
                    seek.no_check = true;
                }
            }
        }
        seek.idle_ticks = 0;
        if d > 0 {
            if seek.nearest.as_ref().is_none_or(|(_, nd)| d < *nd) {
                seek.nearest = Some((here, d));
            }
            return Ok(Next::Resume(t, Resume::Cont, 0));
        }
        self.reached(t, rec, want.rip())
    }

    /// The `int3` of an installed check: registers and flags match the point's; if the whole
    /// signature does, the point is reached (the instruction restored, the page unmapped),
    /// otherwise the thread runs on through the copied instruction.
    fn on_check(&mut self, mut t: Stopped) -> Result<Next, Error> {
        let tid = t.tid();
        let rec = self.rec_of(tid);
        let Some(Event::SyncPoint { sig: want, .. }) = self.front(rec) else {
            return Err(self.divergence(rec, self.expected_text(rec), "a check hit".into()));
        };
        let want = *want;
        let saved = t.regs()?;
        let mut at_point = saved;
        at_point.rip = want.rip();
        t.set_regs(&at_point)?;
        let here = crate::sched::signature(&mut t)?;
        let d = crate::sched::distance(&want, &here);
        let seek = self
            .procs
            .get_mut(&tid)
            .and_then(|p| p.seeking.as_mut())
            .expect("seeking");
        seek.hits += 1;
        seek.idle_ticks = 0;
        self.seek_stops += 1;
        if d > 0 {
            if seek.nearest.as_ref().is_none_or(|(_, nd)| d < *nd) {
                seek.nearest = Some((here, d));
            }
            t.set_regs(&saved)?;
            return Ok(Next::Resume(t, Resume::Cont, 0));
        }
        let c = seek.check.take().expect("check");
        t.write_bytes(replay_ptrace::RemotePtr::new(c.point), &c.orig)?;
        t.inject_syscall(
            libc::SYS_munmap,
            [c.page, crate::trampoline::MAP_LEN, 0, 0, 0, 0],
        )?;
        self.reached(t, rec, want.rip())
    }

    /// The thread stands at its forced sync point: as recorded, a held signal is raised or another
    /// thread runs.
    fn reached(&mut self, mut t: Stopped, rec: i32, rip: u64) -> Result<Next, Error> {
        let tid = t.tid();
        let Some(p) = self.procs.get_mut(&tid) else {
            return Ok(Next::Resume(t, Resume::Cont, 0));
        };
        let seek = p.seeking.as_ref().expect("seeking");
        if self.debug {
            eprintln!(
                "[replay] tid {tid}: forced sync point at {rip:#x} after {} hit(s)",
                seek.hits
            );
        }
        p.seeking = None;
        t.set_breakpoint(None)?;
        self.complete(rec);
        self.transfer = self.take_switch(rec, crate::format::SwitchPoint::SyncPoint);
        if self.transfer.is_some() {
            // Stays where it is until its next turn, as when recorded.
            let again = WaitKind::Event(replay_ptrace::PtraceEvent::Stop(libc::SIGTRAP));
            return Ok(Next::Hold(t, again));
        }
        self.raise_next_signal(tid)?;
        Ok(Next::Resume(t, Resume::Cont, 0))
    }

    /// For an `int3` stop of a seeking thread at an instruction inside its installed check's
    /// region (not the first), where that instruction's copy is.
    fn region_entry(&self, t: &mut Stopped) -> Result<Option<u64>, Error> {
        let Some(c) = self
            .procs
            .get(&t.tid())
            .and_then(|p| p.seeking.as_ref())
            .and_then(|s| s.check.as_ref())
        else {
            return Ok(None);
        };
        let at = t.regs()?.rip.wrapping_sub(1);
        Ok(c.entries.iter().find(|(a, _)| *a == at).map(|(_, to)| *to))
    }

    /// If the next recorded event of `tid` is an asynchronous signal, raises it now.
    pub(super) fn raise_next_signal(&mut self, tid: i32) -> Result<(), Error> {
        let rec = self.rec_of(tid);
        let Some(Event::Signal {
            signo, sync: false, ..
        }) = self.front(rec)
        else {
            return Ok(());
        };
        let signo = *signo;
        if self.past_cut(rec) {
            return Ok(());
        }
        let Some(p) = self.procs.get_mut(&tid) else {
            return Ok(());
        };
        if p.releasing.is_none() {
            replay_ptrace::tkill(tid, signo)?;
            p.releasing = Some(signo);
        }
        Ok(())
    }

    /// Signal-delivery-stop.
    pub(super) fn on_signal(&mut self, mut t: Stopped, sig: i32) -> Result<Next, Error> {
        let tid = t.tid();
        let rec = self.rec_of(tid);
        let info = t.siginfo()?;
        if sig == libc::SIGTRAP
            && machine::si_code(&info) == SI_KERNEL
            && let Some(at) = self
                .procs
                .get(&tid)
                .and_then(|p| p.seeking.as_ref())
                .and_then(|s| s.check.as_ref())
                .map(|c| c.int3_at)
            && t.regs()?.rip == at + 1
        {
            return self.on_check(t);
        }
        if sig == libc::SIGTRAP
            && machine::si_code(&info) == SI_KERNEL
            && let Some(to) = self.region_entry(&mut t)?
        {
            // Code from elsewhere entered the patched region (a jump to one of its instructions):
            // it runs that instruction's copy in the check.
            let mut regs = t.regs()?;
            regs.rip = to;
            t.set_regs(&regs)?;
            self.seek_stops += 1;
            return Ok(Next::Resume(t, Resume::Cont, 0));
        }
        if sig == libc::SIGTRAP
            && machine::si_code(&info) == TRAP_HWBKPT
            && self.procs.get(&tid).is_some_and(|p| p.seeking.is_some())
        {
            return self.on_breakpoint(t);
        }
        if sig == libc::SIGSEGV
            && machine::si_code(&info) == SI_KERNEL
            && let Some(trap) = machine::decode_trap(&mut t)?
        {
            let mut regs = t.regs()?;
            match (trap, self.front(rec)) {
                (Trap::Rdtsc | Trap::Rdtscp, Some(Event::Rdtsc { value, aux })) => {
                    regs.rax = value & 0xffff_ffff;
                    regs.rdx = value >> 32;
                    if trap == Trap::Rdtscp {
                        regs.rcx = u64::from(aux.unwrap_or(0));
                    }
                }
                (Trap::Cpuid, Some(Event::Cpuid { leaf, subleaf, out }))
                    if *leaf == regs.rax as u32 && *subleaf == regs.rcx as u32 =>
                {
                    [regs.rax, regs.rbx, regs.rcx, regs.rdx] = out.map(u64::from);
                }
                _ => {
                    let found = match trap {
                        Trap::Cpuid => format!(
                            "cpuid(leaf {:#x}, subleaf {})",
                            regs.rax as u32, regs.rcx as u32
                        ),
                        Trap::Rdtsc => "rdtsc".into(),
                        Trap::Rdtscp => "rdtscp".into(),
                    };
                    return Err(self.divergence(rec, self.expected_text(rec), found));
                }
            }
            regs.rip += trap.length();
            t.set_regs(&regs)?;
            self.complete(rec);
            self.raise_next_signal(tid)?;
            return Ok(Next::Resume(t, Resume::Cont, 0));
        }
        let releasing = self.procs.get(&tid).and_then(|p| p.releasing);
        if releasing == Some(sig) {
            let Some(Event::Signal {
                signo, info: orig, ..
            }) = self.front(rec)
            else {
                return Err(self.divergence(rec, self.expected_text(rec), format!("signal {sig}")));
            };
            debug_assert_eq!(*signo, sig);
            t.set_siginfo(orig)?;
            if let Some(p) = self.procs.get_mut(&tid) {
                p.releasing = None;
            }
            self.complete(rec);
            self.raise_next_signal(tid)?;
            return Ok(Next::Resume(t, Resume::Cont, sig));
        }
        if machine::is_synchronous(sig, &info) {
            match self.front(rec) {
                Some(Event::Signal {
                    signo, sync: true, ..
                }) if *signo == sig => {
                    self.complete(rec);
                    self.raise_next_signal(tid)?;
                    return Ok(Next::Resume(t, Resume::Cont, sig));
                }
                other => {
                    let expected = other
                        .map(describe)
                        .unwrap_or_else(|| self.expected_text(rec));
                    return Err(self.divergence(
                        rec,
                        expected,
                        format!(
                            "synchronous signal {sig} (si_code {})",
                            machine::si_code(&info)
                        ),
                    ));
                }
            }
        }
        // A signal of the replay's own making (e.g. a replayed child's real SIGCHLD): not recorded,
        // so not delivered.
        Ok(Next::Resume(t, self.resume_how(tid), 0))
    }
}

/// Installs the in-tracee check for forced sync point `want` ([`crate::trampoline`]) at a
/// signal-delivery-stop of the seeking thread, `seen` its state there (not the point): maps a page within reach of the point, writes the
/// check there and a `jmp` to it over the point's region. `None` when no region starts at the
/// point or no page in reach can be mapped.
///
/// Errors: ptrace requests fail.
fn install_check(
    t: &mut Stopped,
    want: &crate::format::Signature,
    seen: &crate::format::Signature,
) -> Result<Option<super::Installed>, Error> {
    use crate::trampoline::{MAP_LEN, PAGE, build, candidates, patch_region, region, targets};
    let point = want.rip();
    let Ok(code) = t.read_bytes(replay_ptrace::RemotePtr::new(point), 32) else {
        return Ok(None);
    };
    let Some(region) = region(&code, point) else {
        return Ok(None);
    };
    let prot = (libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) as u64;
    let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64;
    // A region whose patch displacement is free: first where the kernel puts the page (the hint
    // if free, else next to the lowest mappings, which is near the shared libraries), then free
    // places in steps around the point, the check at the page's start. A constrained one: the
    // places that meet its rule, exactly.
    let tries: Box<dyn Iterator<Item = (u64, bool)>> = if region.constrained() {
        Box::new(targets(&region).map(|a| (a, true)))
    } else {
        let hint = point & !(PAGE - 1);
        Box::new(std::iter::once((hint, false)).chain(candidates(point).map(|c| (c, true))))
    };
    for (cand, fixed) in tries.take(crate::trampoline::PAGE_TRIES) {
        let f = if fixed {
            flags
        } else {
            flags & !(libc::MAP_FIXED_NOREPLACE as u64)
        };
        let want_page = cand & !(PAGE - 1);
        let r = t.inject_syscall(libc::SYS_mmap, [want_page, MAP_LEN, prot, f, u64::MAX, 0])?;
        if r == -i64::from(libc::EEXIST) {
            continue;
        }
        if r < 0 {
            return Ok(None);
        }
        let page = r as u64;
        let at = if fixed { cand } else { page };
        let built = (!fixed || page == want_page)
            .then(|| {
                build(at, page + PAGE, want, Some(seen), &region).zip(patch_region(&region, at))
            })
            .flatten();
        let Some((check, jmp)) = built else {
            t.inject_syscall(libc::SYS_munmap, [page, MAP_LEN, 0, 0, 0, 0])?;
            continue;
        };
        t.write_bytes(replay_ptrace::RemotePtr::new(at), &check.code)?;
        t.write_bytes(replay_ptrace::RemotePtr::new(point), &jmp)?;
        let reloc = at + check.reloc_off;
        return Ok(Some(super::Installed {
            page,
            point,
            orig: region.bytes.clone(),
            int3_at: at + check.int3_off,
            entries: region
                .starts
                .iter()
                .map(|&s| (point + s as u64, reloc + s as u64))
                .collect(),
        }));
    }
    Ok(None)
}
