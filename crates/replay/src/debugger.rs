//! The replayer's debugger hook: a "stop here / resume" interface between
//! [`crate::replayer`] and a debugger such as the GDB remote-protocol server ([`crate::gdb`]).
//!
//! The replayer calls a [`Debugger`] at three places of its main loop, and nowhere else:
//!
//! - [`Debugger::on_stop`]: every ptrace stop of a replayed thread whose turn it is (after the
//!   schedule of threads let it run), *before* replay handles it. The debugger takes the stops that
//!   are its own (its breakpoints, watchpoints, single-steps) and answers [`Verdict::Resume`]; the
//!   replayer then resumes the thread without looking at the stop. Any other stop is replay's
//!   ([`Verdict::Replay`]); before answering so the debugger must take its own code patches
//!   (breakpoint `int3`s) out of memory, so that replay reads, patches and forks the original code.
//! - [`Debugger::on_resume`]: right before the replayer resumes a thread it has handled, with the
//!   resumption replay chose and the signal it delivers (a recorded signal). The debugger may stop
//!   there (report the signal to its user, finish a single-step), put its patches back, and turn
//!   `Cont` into `Step`.
//! - [`Debugger::on_exit`]: the first process of the recording died.
//!
//! A method that returns [`Error::Restart`] ends the run (its processes are killed) and starts the
//! replay again from the beginning ([`Debugger::on_restart`]): a deterministic replay reaches
//! every earlier point again, which is how a debugger goes backwards.
//!
//! Replay's own use of the machine that a debugger must respect: debug register 0 is replay's
//! (forced sync points, [`replay_ptrace::Stopped::set_breakpoint`]); DR1–DR3 are free. Replay's
//! in-tracee checks for forced sync points overwrite the instructions at a point while they are
//! installed: [`StopView::patches`] lists them, with the original bytes, so that a debugger shows
//! the original code and plants no `int3` inside them.

use replay_ptrace::{Resume, Stopped, WaitKind};

use crate::Error;

/// A thread of the recording's first process, as the debugger sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadView {
    /// The thread id of the recording (what the program saw).
    pub rec: i32,
    /// The replayed thread's real id.
    pub real: i32,
    /// True when it is in a ptrace stop the replayer holds (its registers can be read with
    /// [`replay_ptrace::regs_of`]); false while it runs.
    pub stopped: bool,
}

/// What the replayer tells a debugger at a stop.
#[derive(Debug, Clone)]
pub struct StopView {
    /// Recorded tid of the stopped thread.
    pub rec_tid: i32,
    /// Recorded pid (tgid) of its process.
    pub rec_pid: i32,
    /// True when it belongs to the recording's first process.
    pub first: bool,
    /// Recorded pid of the first process and the real pid replaying it.
    pub first_pid: (i32, i32),
    /// The first process's threads, by recorded tid.
    pub threads: Vec<ThreadView>,
    /// Replay's own code patches in the first process: (address, original bytes).
    pub patches: Vec<(u64, Vec<u8>)>,
    /// Events of the recording replayed so far (all processes), and this thread's next event's
    /// index in its own stream (`replay --dump` numbers events of all processes in file order).
    pub events: u64,
    /// The stopped thread's events replayed so far.
    pub thread_events: usize,
}

/// A debugger's answer at a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The stop is replay's: handle it as without a debugger.
    Replay,
    /// The stop was the debugger's: resume the thread so, with no signal.
    Resume(Resume),
}

/// A debugger driven by the replayer (see the module documentation for when each method runs).
///
/// Errors returned end the replay (its processes are killed, as after a divergence).
pub trait Debugger {
    /// A stop of a thread whose turn it is, before replay handles it.
    fn on_stop(
        &mut self,
        t: &mut Stopped,
        kind: WaitKind,
        view: &StopView,
    ) -> Result<Verdict, Error>;

    /// Replay is about to resume `t` with `how`, delivering `sig` (nonzero: a signal of the
    /// recording); `kind` is the stop it is resumed from. Returns how to resume it (`how`, or
    /// [`Resume::Step`] in place of [`Resume::Cont`]).
    fn on_resume(
        &mut self,
        t: &mut Stopped,
        kind: WaitKind,
        how: Resume,
        sig: i32,
        view: &StopView,
    ) -> Result<Resume, Error>;

    /// The first process died: `kind` is [`WaitKind::Exited`] or [`WaitKind::Signaled`].
    fn on_exit(&mut self, kind: WaitKind);

    /// The replay is run again from the start, after a method of this debugger returned
    /// [`Error::Restart`] (reverse execution: the replayed processes were killed). The program's
    /// output is not written twice.
    fn on_restart(&mut self);

    /// The replay ended with `error` (a divergence, a point the replay cannot go on from), or
    /// `None` when it completed.
    fn on_end(&mut self, error: Option<&Error>);
}
