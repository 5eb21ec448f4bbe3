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
        if std::mem::take(&mut seek.interrupting) {
            // The run ahead without the breakpoint is over: arm it now (the state here may
            // already be the point).
            seek.skip_until = None;
            if d > 0 {
                t.set_breakpoint(Some(want.rip()))?;
            }
        } else {
            seek.hits += 1;
        }
        seek.idle_ticks = 0;
        if d > 0 {
            if seek.nearest.as_ref().is_none_or(|(_, nd)| d < *nd) {
                seek.nearest = Some((here, d));
            }
            return Ok(Next::Resume(t, Resume::Cont, 0));
        }
        if self.debug {
            eprintln!(
                "[replay] tid {tid}: forced sync point at {:#x} after {} hit(s)",
                want.rip(),
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
