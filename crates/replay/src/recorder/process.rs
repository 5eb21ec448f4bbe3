//! Recording process creation and exit. Mirrors `replayer/process.rs`.
//!
//! A fork/vfork/clone event names the new child. A process's exit is recorded at `PTRACE_EVENT_EXIT` with its wait status
//! and a rendezvous point on the process object, which the parent's `wait4`/`waitid` follows.

use replay_ptrace::Stopped;

use super::{Recorder, StopResult};
use crate::format::Event;
use crate::rendezvous::process_object;

impl Recorder {
    /// Fork, vfork or clone event stop in the parent (the system call's exit stop follows).
    pub(super) fn on_new_child(&mut self, t: Stopped) -> StopResult {
        let child = match t.event_msg() {
            Ok(c) => c as i32,
            Err(e) => return Err(Box::new((Some(t), e.into()))),
        };
        self.procs.entry(child).or_default();
        self.seen_processes += 1;
        let how = self.resume_how(t.tid());
        Ok((t, how, 0))
    }

    /// `PTRACE_EVENT_EXIT`: the process is exiting.
    pub(super) fn on_exit(&mut self, t: Stopped) -> StopResult {
        let tid = t.tid();
        let status = match t.event_msg() {
            Ok(s) => s as i32,
            Err(e) => return Err(Box::new((Some(t), e.into()))),
        };
        let rdv = self.next_rdv(process_object(tid));
        if let Err(e) = self.emit(
            tid,
            Event::Exit {
                status,
                rendezvous: vec![rdv],
            },
        ) {
            return Err(Box::new((Some(t), e)));
        }
        Ok((t, replay_ptrace::Resume::Cont, 0))
    }
}
