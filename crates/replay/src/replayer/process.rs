//! Replaying process creation and exit. Mirrors `recorder/process.rs`.
//!
//! The fork event names the real child; the parent's pending fork event names the recorded one, so
//! the two are paired here, and a child that reported before its parent's event is released now.
//! Exits are checked against the recorded wait status.

use replay_ptrace::{Resume, Stopped, WaitKind};

use super::{Next, RProc, Replayer};
use crate::Error;
use crate::format::Event;

impl Replayer<'_> {
    /// Fork, vfork or clone event stop in the parent.
    pub(super) fn on_new_child(&mut self, t: Stopped) -> Result<Next, Error> {
        let tid = t.tid();
        let child = t.event_msg()? as i32;
        let child_rec = match self.procs.get(&tid).and_then(|p| p.pending.as_ref()) {
            Some(p) => p.ev.result as i32,
            None => {
                let rec = self.rec_of(tid);
                return Err(self.divergence(rec, self.expected_text(rec), format!("a new child process {child}")));
            }
        };
        self.real_of.insert(child_rec, child);
        self.processes += 1;
        self.procs.insert(child, RProc { rec: child_rec, thread: None, parked: None, pending: None, releasing: None });
        if let Some((ct, kind)) = self.unmapped.remove(&child) {
            self.dispatch(ct, kind)?;
        } else {
            self.procs.get_mut(&child).expect("just inserted").thread =
                Some(replay_ptrace::Running::attached(child));
        }
        Ok(Next::Resume(t, Resume::Syscall, 0))
    }

    /// `PTRACE_EVENT_EXIT`: check the exit against the recording.
    pub(super) fn on_exit(&mut self, t: Stopped) -> Result<Next, Error> {
        let tid = t.tid();
        let rec = self.rec_of(tid);
        let status = t.event_msg()? as i32;
        let left = crate::syscallbuf::unconsumed(&t);
        if left > 0 {
            return Err(self.divergence(
                rec,
                format!("the buffered system calls recorded here ({left} bytes of them left)"),
                format!("exit (wait status {status:#x})"),
            ));
        }
        match self.front(rec) {
            Some(Event::Exit { status: s, rendezvous }) if *s == status => {
                if !self.progress.ready(rendezvous) {
                    return Ok(Next::Park(t, WaitKind::Event(replay_ptrace::PtraceEvent::Exit)));
                }
                self.complete(rec);
                Ok(Next::Resume(t, Resume::Cont, 0))
            }
            _ => Err(self.divergence(rec, self.expected_text(rec), format!("exit (wait status {status:#x})"))),
        }
    }

    /// The thread is gone (reaped by us).
    pub(super) fn on_death(&mut self, tid: i32, kind: WaitKind) -> Result<(), Error> {
        // The recorded pid keeps its real pid: the parent may reap the zombie later (its wait4 is
        // replayed for real on it).
        self.procs.remove(&tid);
        if tid == self.root {
            self.root_exit = Some(match kind {
                WaitKind::Exited(c) => c,
                WaitKind::Signaled(s) => 128 + s,
                _ => 0,
            });
        }
        self.unmapped.remove(&tid);
        Ok(())
    }
}
