//! Replaying signals and trapped instructions. Mirrors `recorder/signal.rs`.
//!
//! - A trapped RDTSC/RDTSCP/CPUID gets the recorded answer.
//! - An asynchronous signal is raised by the replayer (`tgkill`) right after the event it followed
//!   in the recording, before the program runs another instruction, and delivered with its recorded
//!   `siginfo_t`. Signals the replay's own kernel objects generate (a replayed child's real SIGCHLD)
//!   are suppressed: only recorded signals reach the program.
//! - A synchronous signal must recur by itself where it was recorded.

use replay_ptrace::{Resume, Stopped};

use super::{Next, Replayer};
use crate::format::Event;
use crate::machine::{self, SI_KERNEL, Trap};
use crate::{Error, describe};

impl Replayer<'_> {
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
            replay_ptrace::tgkill(tid, tid, signo)?;
            p.releasing = Some(signo);
        }
        Ok(())
    }

    /// Signal-delivery-stop.
    pub(super) fn on_signal(&mut self, mut t: Stopped, sig: i32) -> Result<Next, Error> {
        let tid = t.tid();
        let rec = self.rec_of(tid);
        let info = t.siginfo()?;
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
                        format!("synchronous signal {sig}"),
                    ));
                }
            }
        }
        // A signal of the replay's own making (e.g. a replayed child's real SIGCHLD): not recorded,
        // so not delivered.
        Ok(Next::Resume(t, self.resume_how(tid), 0))
    }
}
