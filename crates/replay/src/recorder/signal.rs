//! Recording signals and trapped instructions. Mirrors `replayer/signal.rs`.
//!
//! - RDTSC/RDTSCP/CPUID fault (SIGSEGV, `SI_KERNEL`) because the image was prepared so; the tracer
//!   executes the instruction itself, records the answer and steps over it. The program never sees
//!   these SIGSEGVs.
//! - Synchronous signals (faults of the program's own instructions) are delivered and recorded; they
//!   recur by themselves on replay.
//! - Asynchronous signals are delivered only at a sync point: right after a system call returns,
//!   before the program runs another instruction. One that arrives there (typically it interrupted a
//!   blocking call) is delivered at once; one that arrives while the program computes is held, then
//!   re-raised at the process's next trapped system call and delivered when that call returns. The
//!   position is recorded as "after event N", which the replayer reproduces exactly.

use replay_ptrace::{Resume, Stopped};

use super::{Recorder, StopResult, regs_eq};
use crate::Error;
use crate::format::Event;
use crate::machine::{self, SI_KERNEL, Trap};

/// Emulates a trapped RDTSC/RDTSCP/CPUID at the tracee's rip, if that is what faulted, and steps
/// over it. Returns the event to record, or `None` when the SIGSEGV is a real one.
pub(super) fn emulate_trap_if_any(t: &mut Stopped) -> Result<Option<Event>, Error> {
    let info = t.siginfo()?;
    if machine::si_code(&info) != SI_KERNEL {
        return Ok(None);
    }
    let Some(trap) = machine::decode_trap(t)? else {
        return Ok(None);
    };
    let mut regs = t.regs()?;
    let ev = match trap {
        Trap::Rdtsc => {
            let v = replay_ptrace::rdtsc();
            regs.rax = v & 0xffff_ffff;
            regs.rdx = v >> 32;
            Event::Rdtsc {
                value: v,
                aux: None,
            }
        }
        Trap::Rdtscp => {
            let (v, aux) = replay_ptrace::rdtscp();
            regs.rax = v & 0xffff_ffff;
            regs.rdx = v >> 32;
            regs.rcx = u64::from(aux);
            Event::Rdtsc {
                value: v,
                aux: Some(aux),
            }
        }
        Trap::Cpuid => {
            let (leaf, subleaf) = (regs.rax as u32, regs.rcx as u32);
            let out = machine::masked_cpuid(leaf, subleaf);
            [regs.rax, regs.rbx, regs.rcx, regs.rdx] = out.map(u64::from);
            Event::Cpuid { leaf, subleaf, out }
        }
    };
    regs.rip += trap.length();
    t.set_regs(&regs)?;
    Ok(Some(ev))
}

impl Recorder {
    /// Signal-delivery-stop.
    pub(super) fn on_signal(&mut self, mut t: Stopped, sig: i32) -> StopResult {
        match self.signal_inner(&mut t, sig) {
            Ok(deliver) => Ok((t, Resume::Cont, deliver)),
            Err(e) => Err(Box::new((Some(t), e))),
        }
    }

    /// Returns the signal to deliver (0 to suppress).
    fn signal_inner(&mut self, t: &mut Stopped, sig: i32) -> Result<i32, Error> {
        let tid = t.tid();
        if sig == libc::SIGSEGV
            && let Some(ev) = emulate_trap_if_any(t)?
        {
            self.emit(tid, ev)?;
            self.proc_mut(tid).last_exit_regs = None;
            return Ok(0);
        }
        let info = Box::new(t.siginfo()?);
        let p = self.proc_mut(tid);
        if let Some((_, orig)) = p.releasing.take_if(|(s, _)| *s == sig) {
            // A held signal, re-raised by us at a sync point: deliver its original siginfo.
            t.set_siginfo(&orig)?;
            p.last_exit_regs = None;
            self.emit(
                tid,
                Event::Signal {
                    signo: sig,
                    info: orig,
                    sync: false,
                },
            )?;
            return Ok(sig);
        }
        if machine::is_synchronous(sig, &info) {
            p.last_exit_regs = None;
            self.emit(
                tid,
                Event::Signal {
                    signo: sig,
                    info,
                    sync: true,
                },
            )?;
            return Ok(sig);
        }
        let regs = t.regs()?;
        let p = self.proc_mut(tid);
        let at_sync_point = p.last_exit_regs.as_ref().is_some_and(|r| regs_eq(r, &regs));
        if at_sync_point {
            p.last_exit_regs = None;
            // Still right after the last system call's exit: deliver here.
            self.emit(
                tid,
                Event::Signal {
                    signo: sig,
                    info,
                    sync: false,
                },
            )?;
            return Ok(sig);
        }
        if std::env::var_os("SIGHTLINE_DEBUG").is_some() {
            eprintln!(
                "[record] hold signal {sig} for {tid}: last exit regs {:?}, now rip {:#x} rax {:#x}",
                p.last_exit_regs.map(|r| (r.rip, r.rax, r.orig_rax)),
                regs.rip,
                regs.rax
            );
        }
        p.held.push_back((sig, info));
        Ok(0)
    }

    /// The stop of our `PTRACE_INTERRUPT`: a forced sync point when the thread holds the right to
    /// run, is in user mode at a reachable instruction, and another thread waits or a signal is
    /// held for it. Then the signature is recorded and either the held signal is raised (delivered
    /// at once, at this point) or the right passes on.
    pub(super) fn on_interrupt(&mut self, mut t: Stopped) -> StopResult {
        match self.interrupt_inner(&mut t) {
            Ok(None) => Ok((t, Resume::Cont, 0)),
            // Moving to a patchable instruction ran into a signal: that stop is a signal's.
            Ok(Some(sig)) => self.on_signal(t, sig),
            Err(e) => Err(Box::new((Some(t), e))),
        }
    }

    /// Returns the signal whose delivery-stop the thread is in when moving it to a patchable
    /// instruction was stopped by one.
    fn interrupt_inner(&mut self, t: &mut Stopped) -> Result<Option<i32>, Error> {
        let tid = t.tid();
        let p = self.proc_mut(tid);
        p.interrupting = false;
        if std::mem::take(&mut p.retry_entry) {
            return Ok(None);
        }
        let tgid = p.tgid;
        let held = !p.held.is_empty() && p.releasing.is_none();
        let regs = t.regs()?;
        let key = self.group_of(tid);
        let Some(g) = self.groups.get(&key) else {
            return Ok(None);
        };
        let switch = g.threaded && !g.waiting.is_empty();
        if g.holder != Some(tid)
            || !(switch || held)
            || regs.orig_rax != u64::MAX
            || !crate::sched::reachable_point(t, regs.rip)
        {
            return Ok(None);
        }
        self.drain_sysbuf(t)?;
        match crate::sched::advance_to_patchable(t)? {
            replay_ptrace::RunStop::Reached => {}
            replay_ptrace::RunStop::Signal(sig) => return Ok(Some(sig)),
            replay_ptrace::RunStop::Event(_) => return Ok(None),
        }
        let rip = t.regs()?.rip;
        if !crate::sched::reachable_point(t, rip) {
            return Ok(None);
        }
        // Replay checks every pass of a point; one where a check fits (a region of the
        // trampoline) costs a few instructions a pass, any other a breakpoint stop. Let the
        // thread run on and try again at a later tick, a few times, before taking a point replay
        // can only watch with the breakpoint. Not when a signal waits for this point: its
        // delivery would be late (and a timer signal every few ms stops the thread before the
        // next try can start).
        let checkable = t
            .read_bytes(replay_ptrace::RemotePtr::new(rip), 32)
            .is_ok_and(|code| crate::trampoline::region(&code, rip).is_some());
        let p = self.proc_mut(tid);
        if !checkable && !held && p.unpatchable_tries < crate::sched::UNPATCHABLE_TRIES {
            p.unpatchable_tries += 1;
            return Ok(None);
        }
        p.unpatchable_tries = 0;
        let sig = crate::sched::signature(t)?;
        if self.debug {
            eprintln!("[record] tid {tid}: forced sync point at {:#x}", sig.rip());
        }
        let cpu_ns = replay_ptrace::process_cpu_ns(tgid)
            .unwrap_or(0)
            .saturating_sub(self.proc_mut(tid).cpu_at_resume);
        self.emit(tid, Event::SyncPoint { sig, cpu_ns })?;
        self.sync_points += 1;
        let p = self.proc_mut(tid);
        p.last_exit_regs = None;
        if held {
            let (sig, info) = p.held.pop_front().expect("held");
            replay_ptrace::tgkill(tgid, tid, sig)?;
            p.releasing = Some((sig, info));
            if sig < 32 {
                p.held.retain(|(s, _)| *s != sig);
            }
        } else {
            self.yield_now = true;
            if let Some(g) = self.groups.get_mut(&key) {
                g.why = crate::format::SwitchPoint::SyncPoint;
            }
        }
        Ok(None)
    }

    fn proc_mut(&mut self, tid: i32) -> &mut super::Proc {
        self.procs.entry(tid).or_default()
    }
}
