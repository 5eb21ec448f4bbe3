//! Recording process creation and exit. Mirrors `replayer/process.rs`.
//!
//! A fork/vfork/clone event names the new child. A process's exit is recorded at `PTRACE_EVENT_EXIT` with its wait status
//! and a rendezvous point on the process object, which the parent's `wait4`/`waitid` follows.

use replay_ptrace::Stopped;

use super::{Group, Recorder, StopResult};
use crate::format::Event;
use crate::rendezvous::process_object;

impl Recorder {
    /// Fork, vfork or clone event stop in the parent (the system call's exit stop follows).
    pub(super) fn on_new_child(&mut self, t: Stopped) -> StopResult {
        let child = match t.event_msg() {
            Ok(c) => c as i32,
            Err(e) => return Err(Box::new((Some(t), e.into()))),
        };
        let tid = t.tid();
        let parent_tgid = self.procs.get(&tid).map_or(tid, |p| p.tgid);
        let parent_group = self.group_of(tid);
        let thread = self
            .procs
            .get(&tid)
            .and_then(|p| p.pending.as_ref())
            .is_some_and(|p| p.is_thread_clone());
        let tgid = if thread { parent_tgid } else { child };
        // A child that shares writable memory with its parent (a MAP_SHARED mapping inherited
        // through fork) runs in the parent's group, one at a time with it, like a thread.
        let joins = !thread && crate::sched::shares_writable_memory(tid);
        let group = if thread || joins { parent_group } else { child };
        {
            let p = self.procs.entry(child).or_default();
            p.tgid = tgid;
            p.group = group;
        }
        if thread {
            self.threads += 1;
            if let Some(leader) = self.procs.get_mut(&tgid) {
                leader.had_threads = true;
            }
            if let Some(g) = self.groups.get_mut(&group) {
                g.threaded = true;
            }
        } else {
            self.seen_processes += 1;
            self.inherit_opens(parent_tgid, child);
            if joins {
                if self.debug {
                    eprintln!("[record] process {child} joins group {group} (shared memory)");
                }
                self.joined_forks.insert(tid);
                if let Some(g) = self.groups.get_mut(&group) {
                    g.threaded = true;
                }
            } else {
                self.groups.insert(
                    child,
                    Group {
                        holder: Some(child),
                        last: child,
                        ..Group::default()
                    },
                );
            }
        }
        if let Some(stop) = self.newborn.remove(&child) {
            self.deferred.push(stop);
        }
        let how = self.resume_how(tid);
        Ok((t, how, 0))
    }

    /// `PTRACE_EVENT_EXIT`: the process is exiting.
    ///
    /// When the holder of a scheduled process exits with the whole process (its exit stop's
    /// call is `exit_group`, or its status says a signal killed it), that process is *dying*:
    /// the right to run is not handed to its other threads, which the kernel is killing. Before,
    /// a thread whose blocking call had just completed got the right, its call was recorded, and
    /// it died before returning to user code: replay needed an allowance for those events
    /// (`replayer::Replayer::forgive_killed`, kept for recordings made so).
    pub(super) fn on_exit(&mut self, mut t: Stopped) -> StopResult {
        let tid = t.tid();
        let tgid = self.group_of(tid);
        if let Some(p) = self.procs.get_mut(&tid) {
            p.exit_seen = true;
        }
        let killed = self.procs.get(&tid).is_some_and(|p| p.killed);
        let threaded = self.groups.get(&tgid).is_some_and(|g| g.threaded);
        if threaded
            && !killed
            && self
                .groups
                .get(&tgid)
                .is_some_and(|g| g.holder == Some(tid))
        {
            let whole = t
                .regs()
                .is_ok_and(|r| r.orig_rax == libc::SYS_exit_group as u64)
                || t.event_msg().is_ok_and(|s| libc::WIFSIGNALED(s as i32));
            if whole && let Some(p) = self.procs.get(&tid) {
                self.dying.insert(p.tgid);
            }
        }
        if let Some(g) = self.groups.get_mut(&tgid)
            && g.threaded
        {
            if g.holder != Some(tid) || killed {
                // Killed by another thread's exit_group (or a signal from outside), wherever it
                // was: nothing of it to replay.
                return Ok((t, replay_ptrace::Resume::Cont, 0));
            }
            // Any thread but the group's first: nobody runs until its death is reaped.
            if tid != tgid {
                g.exiting = Some(tid);
            }
            self.release = true;
        }
        let status = match t.event_msg() {
            Ok(s) => s as i32,
            Err(e) => return Err(Box::new((Some(t), e.into()))),
        };
        if let Err(e) = self.record_exit(tid, status) {
            return Err(Box::new((Some(t), e)));
        }
        Ok((t, replay_ptrace::Resume::Cont, 0))
    }

    /// Records the exit of `tid` with wait status `status`: a rendezvous point on its process
    /// object (which its parent's wait follows) and, for a process, the end of its shared file
    /// mappings.
    fn record_exit(&mut self, tid: i32, status: i32) -> Result<(), crate::Error> {
        let mut rendezvous = vec![self.next_rdv(process_object(tid))];
        if self.procs.get(&tid).is_none_or(|p| p.tgid == tid) {
            // The process's shared file mappings end with it.
            rendezvous.extend(self.shared_files_released(tid));
        }
        self.emit(tid, Event::Exit { status, rendezvous })
    }

    /// A single-threaded process killed by signal `sig` whose exit stop never came: the kernel
    /// does not stop a task at `PTRACE_EVENT_EXIT` while a SIGKILL is pending (seen on 6.18 when
    /// the SIGKILL arrives as the process makes syscall-buffered calls). Its exit is recorded
    /// from the death, so the replay kills it where its recorded calls end (before, its stream
    /// ended without an exit and the replay diverged: "the recorded process had no further
    /// events"). Threads of a process with several have no exit of their own when killed
    /// (`replayer::killed_by_group_exit`), so they get none here either.
    pub(super) fn exit_without_stop(&mut self, tid: i32, sig: i32) {
        if self.passthrough.is_some() {
            return;
        }
        let Some(p) = self.procs.get(&tid) else {
            return;
        };
        if p.tgid != tid || p.exit_seen || p.had_threads {
            return;
        }
        if self.debug {
            eprintln!("[record] tid {tid} killed by signal {sig} without an exit stop");
        }
        if let Err(e) = self.record_exit(tid, sig & 0x7f) {
            self.stop_recording(format!("internal error: {e}"));
        }
    }
}
