//! Replaying process creation and exit. Mirrors `recorder/process.rs`.
//!
//! The fork event names the real child; the parent's pending fork event names the recorded one, so
//! the two are paired here, and a child that reported before its parent's event is released now.
//! Exits are checked against the recorded wait status.

use replay_ptrace::{Resume, Stopped, WaitKind};

use super::{Next, RProc, Replayer};
use crate::format::Event;
use crate::{Error, describe};

impl Replayer<'_> {
    /// Fork, vfork or clone event stop in the parent.
    pub(super) fn on_new_child(&mut self, t: Stopped) -> Result<Next, Error> {
        let tid = t.tid();
        let child = t.event_msg()? as i32;
        let (child_rec, thread, joins) = match self.procs.get(&tid).and_then(|p| p.pending.as_ref())
        {
            Some(p) => (
                p.ev.result as i32,
                p.ev.nr == libc::SYS_clone && p.ev.args[0] & crate::sched::CLONE_THREAD != 0,
                p.ev.extra == [crate::sched::JOINED],
            ),
            None => {
                let rec = self.rec_of(tid);
                return Err(self.divergence(
                    rec,
                    self.expected_text(rec),
                    format!("a new child process {child}"),
                ));
            }
        };
        self.real_of.insert(child_rec, child);
        if !thread && let Some(l) = self.live.as_mut() {
            // Now, before the child can run: its untrapped dup2s before exec change its own copy.
            l.inherit_fds(self.procs.get(&tid).map_or(-1, |p| p.rec), child_rec);
        }
        let parent_group = self.procs.get(&tid).map_or(child_rec, |p| p.group);
        let tgid = if thread {
            self.procs.get(&tid).map_or(child_rec, |p| p.tgid)
        } else {
            child_rec
        };
        let group = if thread {
            self.threads += 1;
            parent_group
        } else if joins {
            // As recorded: it shares writable memory with its parent and runs in its group.
            self.processes += 1;
            if let Some(g) = self.groups.get_mut(&parent_group) {
                g.threaded = true;
            }
            parent_group
        } else {
            self.processes += 1;
            self.groups.insert(
                child_rec,
                super::RGroup {
                    holder: child_rec,
                    threaded: false,
                },
            );
            child_rec
        };
        self.procs
            .insert(child, RProc::new(child_rec, tgid, group, None));
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
        let (group, holder) = match self.procs.get(&tid).and_then(|p| self.groups.get(&p.group)) {
            Some(g) if g.threaded => (self.procs[&tid].group, g.holder),
            _ => (rec, rec),
        };
        if holder != rec || (group != rec && self.front(rec).is_none()) {
            // Killed by another thread's exit, as when recorded (where nothing of it was kept):
            // also when it was handed the right to run at that exit, since the recorder keeps
            // nothing of a thread killed while a stop of it was processed.
            return Ok(Next::Resume(t, Resume::Cont, 0));
        }
        // Killed by another thread's exit_group before its last recorded events (see
        // `forgive_killed`).
        if self.killed.contains(&rec)
            && !matches!(self.front(rec), Some(Event::Exit { .. }))
            && self.forgive_killed(rec)
        {
            return Ok(Next::Resume(t, Resume::Cont, 0));
        }
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
            Some(Event::Exit {
                status: s,
                rendezvous,
            }) if *s == status => {
                if !self.progress.ready(rendezvous) {
                    return Ok(Next::Park(
                        t,
                        WaitKind::Event(replay_ptrace::PtraceEvent::Exit),
                    ));
                }
                self.complete(rec);
                // The leader gives the right up at its exit; another thread at its death.
                if rec == group {
                    self.transfer = self.take_switch(rec, crate::format::SwitchPoint::Exit);
                }
                Ok(Next::Resume(t, Resume::Cont, 0))
            }
            _ => Err(self.divergence(
                rec,
                self.expected_text(rec),
                format!("exit (wait status {status:#x})"),
            )),
        }
    }

    /// The thread is gone (reaped by us).
    pub(super) fn on_death(&mut self, tid: i32, kind: WaitKind) -> Result<(), Error> {
        let rec = self.rec_of(tid);
        if self.debug {
            eprintln!(
                "[replay] tid {tid} (recorded {rec}) {kind:?}; next event {:?}",
                self.front(rec).map(describe)
            );
        }
        // Died without reporting its exit stop: seen (often, on kernel 6.18) after the replay's own
        // SIGKILL at a recorded SIGKILL death (`syscall.rs`) when the process was making buffered
        // calls; ptrace_stop() does not stop a task with a SIGKILL pending. Its recorded exit
        // happened all the same: replay it now, or once its rendezvous points are met. Left
        // undone, a parent waiting for it would stay parked with nothing left to wake it.
        if self.procs.contains_key(&tid)
            && let Some(Event::Exit { status, .. }) = self.front(rec)
            && died_as(kind, *status)
        {
            self.dead.push(rec);
        }
        // The recorded pid keeps its real pid: the parent may reap the zombie later (its wait4 is
        // replayed for real on it).
        let gone = self.procs.remove(&tid);
        if let Some(p) = &gone
            && self
                .groups
                .get(&p.group)
                .is_some_and(|g| g.threaded && g.holder == p.rec)
            && let Some(to) = self.take_switch(p.rec, crate::format::SwitchPoint::Exit)
        {
            if let Some(g) = self.groups.get_mut(&p.group) {
                g.holder = to;
            }
            let held = self
                .real_of
                .get(&to)
                .and_then(|t| self.procs.get_mut(t))
                .and_then(|q| q.held.take());
            if let Some((t, kind)) = held {
                self.dispatch(t, kind)?;
            }
        }
        if tid == self.root {
            self.root_exit = Some(match kind {
                WaitKind::Exited(c) => c,
                WaitKind::Signaled(s) => 128 + s,
                _ => 0,
            });
        }
        self.unmapped.remove(&tid);
        // Its death may be what a parked process waits for (or leave all of them stuck: reported).
        self.unpark()
    }

    /// Replays the recorded exits of processes that died without an exit stop, once ready.
    pub(super) fn complete_dead_exits(&mut self) {
        let dead = std::mem::take(&mut self.dead);
        for rec in dead {
            match self.front(rec) {
                Some(Event::Exit { rendezvous, .. }) if self.progress.ready(rendezvous) => {
                    self.complete(rec)
                }
                Some(Event::Exit { .. }) => self.dead.push(rec),
                _ => {}
            }
        }
    }
}

/// True when a death reported as `kind` is the recorded wait status `status`.
fn died_as(kind: WaitKind, status: i32) -> bool {
    match kind {
        WaitKind::Exited(code) => libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == code,
        WaitKind::Signaled(sig) => libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == sig,
        _ => false,
    }
}
