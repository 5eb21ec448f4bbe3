//! Going live (issue 13, Scribe's "go live"): replay a recording up to a point, rebuild the
//! kernel state the recorded program had there, and detach, so the program runs on natively.
//!
//! How (docs/replay-go-live.md):
//! - The processes are replayed **without a seccomp filter** (a `SECCOMP_RET_TRACE` filter
//!   outliving its tracer makes the trapped calls fail with ENOSYS): every system call stops with
//!   `PTRACE_SYSCALL`, and [`Live::prog`], the recording's filter compiled but never installed,
//!   decides what the filter would have done (run, refuse, or trap: then the ordinary replay path).
//! - Each process stops at its **frontier**: the entry of its first system call at or after the
//!   point (its stream index reaches [`Plan::cuts`]). When every process is there (or gone), the
//!   state is rebuilt from inside each one with calls made at that entry stop
//!   ([`replay_ptrace::Stopped::call_at_entry`]) and from the replayer (`pidfd_getfd`):
//!   stand-in fds are reopened on their files at the recorded offsets, fds that were Sightline's
//!   stdin/stdout/stderr become ours, sockets that listened listen again, connections read as
//!   closed, pipes get back the bytes written and not yet read; the syscall buffer's patched sites
//!   get their original bytes back and its region is unmapped; RDTSC and CPUID stop faulting; the
//!   CPU pinning is undone. Then each process is detached at its frontier, where the call it was
//!   entering runs for real.
//! - The fd model ([`Desc`]) follows the recorded calls (open, socket, bind, listen, accept,
//!   connect, fcntl, read, write, lseek, fork) and the untrapped `close`/`dup*` the replay sees.
#![expect(
    non_upper_case_globals,
    reason = "libc's SYS_* constants are matched as patterns"
)]

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::os::unix::fs::OpenOptionsExt;
use std::rc::Rc;

use replay_ptrace::seccomp::SockFilter;
use replay_ptrace::{RemotePtr, Resume, Stopped, WaitKind};

use super::{Next, Replayer};
use crate::format::{Event, Recording};
use crate::syscalls;
use crate::{Error, describe};

/// Where a replay goes live (`--go-live-at POINT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Where the recording ends: after each process's last recorded event, or, for a process the
    /// recording's end killed (a fatal signal interrupting a blocking call: `sightline record`
    /// stopped with SIGTERM or Ctrl-C), at the entry of that interrupted call.
    End,
    /// Before event number N of the recording, as `sightline replay --dump` numbers them.
    Event(usize),
    /// Before the N-th system call (from 1) of recorded process `pid` (`PID:N`).
    Syscall {
        /// The recorded pid.
        pid: i32,
        /// The system call's ordinal in that process, from 1.
        n: usize,
    },
}

impl std::str::FromStr for Point {
    type Err = String;

    /// `end`, `N` or `PID:N`.
    fn from_str(s: &str) -> Result<Point, String> {
        let bad = || format!("{s:?} is not a go-live point (`end`, an event number, or PID:N)");
        if s == "end" {
            return Ok(Point::End);
        }
        match s.split_once(':') {
            Some((p, n)) => {
                let pid = p.parse().map_err(|_| bad())?;
                let n: usize = n.parse().map_err(|_| bad())?;
                if n == 0 {
                    return Err(format!("{s:?}: system calls are counted from 1"));
                }
                Ok(Point::Syscall { pid, n })
            }
            None => s.parse().map(Point::Event).map_err(|_| bad()),
        }
    }
}

/// A point resolved against a recording: per recorded pid, how many of its events replay before
/// it goes live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The event number of the point (the number of records for `end`).
    pub index: usize,
    /// Recorded pid → events of its stream replayed before its frontier.
    pub cuts: HashMap<i32, usize>,
}

/// One thread that went live (a process's first thread stands for the process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveProcess {
    /// Its recorded tid (the pid, for a process's first thread).
    pub recorded: i32,
    /// The recorded pid of its process (= [`LiveProcess::recorded`] for a first thread).
    pub process: i32,
    /// Its pid now (the kernel gave it another one unless the two are equal).
    pub live: i32,
    /// The system call it was entering, which it now makes for real.
    pub at: String,
}

/// What a replay that went live did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveOutcome {
    /// The point.
    pub plan: Plan,
    /// Events replayed before going live.
    pub events: u64,
    /// The processes now running untraced, the first process first when it is one of them.
    pub processes: Vec<LiveProcess>,
    /// What could not be rebuilt exactly (an fd left a stand-in, a pipe's bytes dropped...).
    pub notes: Vec<String>,
    /// Real pid of the first process when it went live (our child: [`LiveOutcome::wait`]).
    pub root: Option<i32>,
    /// The processes run in a pid namespace of the replay with their recorded pids
    /// ([`LiveProcess::live`] is then their pid outside it).
    pub pid_namespace: bool,
}

impl LiveOutcome {
    /// Waits for the first process to end, if it went live, and returns its exit code (128 +
    /// signal when killed); `None` when it had already exited in the replay.
    ///
    /// Errors: `waitpid` fails ([`Error::Ptrace`]).
    pub fn wait(&self) -> Result<Option<i32>, Error> {
        let Some(root) = self.root else {
            return Ok(None);
        };
        loop {
            match replay_ptrace::wait_any() {
                Ok(Some(ev)) if ev.tid == root && ev.is_death() => {
                    return Ok(Some(match ev.kind {
                        WaitKind::Exited(c) => c,
                        WaitKind::Signaled(s) => 128 + s,
                        _ => 0,
                    }));
                }
                Ok(_) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Resolves `point` against `rec` and checks that every process can go live there: it has
/// exited, or its next event is a system call (entered, not yet made) or an exit, or its stream
/// ends there. Recordings with threads are refused ([`Error::Unsupported`]).
///
/// Errors: [`Error::Format`] for a point outside the recording; [`Error::Unsupported`] for a
/// point that cannot be gone live from, naming why and the nearest point that can.
pub fn plan(rec: &Recording, point: Point) -> Result<Plan, Error> {
    let mut positions: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, r) in rec.records.iter().enumerate() {
        positions.entry(r.pid).or_default().push(i);
    }
    let len = rec.records.len();
    let index = match point {
        Point::End => {
            let plan = end_plan(rec, &positions);
            return match end_blocker(rec, &plan) {
                None => Ok(plan),
                Some(why) => Err(Error::Unsupported(format!(
                    "going live at the end of the recording: {why}"
                ))),
            };
        }
        Point::Event(e) if e > len => {
            return Err(Error::Format(format!(
                "event #{e} is past the recording's end (it has {len} events; `end` goes live there)"
            )));
        }
        Point::Event(e) => e,
        Point::Syscall { pid, n } => {
            let Some(pos) = positions.get(&pid) else {
                return Err(Error::Format(format!("the recording has no process {pid}")));
            };
            let calls: Vec<usize> = pos
                .iter()
                .copied()
                .filter(|&i| matches!(rec.records[i].event, Event::Syscall(_)))
                .collect();
            match calls.get(n - 1) {
                Some(&i) => i,
                None => {
                    return Err(Error::Format(format!(
                        "process {pid} made {} recorded system call(s), not {n}",
                        calls.len()
                    )));
                }
            }
        }
    };
    match blocker(rec, &positions, index) {
        None => Ok(cut_plan(rec, &positions, index)),
        Some(why) => {
            let nearest = (1..=len)
                .flat_map(|d| [index.checked_sub(d), Some(index + d)])
                .flatten()
                .find(|&e| e <= len && blocker(rec, &positions, e).is_none());
            let hint = match nearest {
                Some(e) => format!("; the nearest point that can is {}", name_point(rec, e)),
                None => "; no point of this recording can".into(),
            };
            Err(Error::Unsupported(format!(
                "going live at event #{index}: {why}{hint}"
            )))
        }
    }
}

/// The go-live point of a debugger's `monitor go-live` ([`Error::GoLive`]): before the next
/// event of recorded thread `rec_tid`, which had replayed `thread_events` of its events (its
/// position in the recording, as `--dump` numbers events); the end when it had none left.
pub fn go_live_point(rec: &Recording, rec_tid: i32, thread_events: usize) -> Point {
    rec.records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.pid == rec_tid)
        .nth(thread_events)
        .map_or(Point::End, |(i, _)| Point::Event(i))
}

/// `#E (PID:N)` for the event E, or `#E` when it is no system call.
fn name_point(rec: &Recording, e: usize) -> String {
    let Some(r) = rec.records.get(e) else {
        return format!("#{e} (end)");
    };
    if !matches!(r.event, Event::Syscall(_)) {
        return format!("#{e}");
    }
    let n = rec.records[..=e]
        .iter()
        .filter(|x| x.pid == r.pid && matches!(x.event, Event::Syscall(_)))
        .count();
    format!("#{e} ({}:{n})", r.pid)
}

/// Each process's events before `index`, and after it those that concern no other process
/// (trapped instructions, buffered calls, syscall-buffer patches, and the SIGPIPE that a write
/// before the point raised): a process goes live at the entry of its next recorded system call.
fn cut_plan(rec: &Recording, positions: &HashMap<i32, Vec<usize>>, index: usize) -> Plan {
    Plan {
        index,
        cuts: positions
            .iter()
            .map(|(pid, pos)| {
                let mut cut = pos.partition_point(|&i| i < index);
                while cut > 0 && cut < pos.len() {
                    let own = match &rec.records[pos[cut]].event {
                        Event::Cpuid { .. }
                        | Event::Rdtsc { .. }
                        | Event::Buffered(_)
                        | Event::SyscallbufPatch { .. } => true,
                        // The kernel raised it at the failed write that precedes it (already
                        // replayed): the process's own, whatever the other processes do later.
                        Event::Signal {
                            signo: libc::SIGPIPE,
                            sync: false,
                            ..
                        } => matches!(&rec.records[pos[cut - 1]].event,
                            Event::Syscall(e) if e.result == -i64::from(libc::EPIPE)),
                        _ => false,
                    };
                    if !own {
                        break;
                    }
                    cut += 1;
                }
                (*pid, cut)
            })
            .collect(),
    }
}

/// `end`: each stream's end, or, for a process that a fatal signal from outside the recording
/// ended (`sightline record` passing on Ctrl-C or SIGTERM, or a `kill` by an unrecorded process),
/// the point before that signal: the entry of the call it interrupted, or, when it came between
/// calls (held by the recorder until the next one), after the last call, so the process goes
/// live at the entry of its next one. Before, such a process replayed its death and nothing went
/// live (a server killed between two `poll` timeouts).
fn end_plan(rec: &Recording, positions: &HashMap<i32, Vec<usize>>) -> Plan {
    let recorded: HashSet<i32> = positions.keys().copied().collect();
    let mut cuts = HashMap::new();
    for (pid, pos) in positions {
        let evs: Vec<&Event> = pos.iter().map(|&i| &rec.records[i].event).collect();
        let mut cut = evs.len();
        if let [
            ..,
            Event::Signal {
                signo,
                info,
                sync: false,
            },
            Event::Exit { status, .. },
        ] = evs.as_slice()
            && libc::WIFSIGNALED(*status)
            && libc::WTERMSIG(*status) == *signo
            && sent_from_outside(info, &recorded)
        {
            cut = evs.len() - 2;
            if let Some(Event::Syscall(call)) = evs.get(cut.wrapping_sub(1))
                && (syscalls::is_restart(call.result) || call.result == -i64::from(libc::EINTR))
            {
                cut -= 1;
            }
        }
        cuts.insert(*pid, cut);
    }
    Plan {
        index: rec.records.len(),
        cuts,
    }
}

/// True when the `siginfo_t` `info` is of a signal that no recorded process sent: `si_code`
/// `SI_USER` or `SI_TKILL` (kill, tgkill: `si_pid`, at byte 16 on x86-64 after the padding
/// that aligns the union, names the sender) from a pid
/// outside `recorded`. Kernel-generated signals (a timer, SIGPIPE, a child's SIGCHLD) are the
/// recording's own.
fn sent_from_outside(info: &[u8; 128], recorded: &HashSet<i32>) -> bool {
    let code = i32::from_le_bytes(info[8..12].try_into().expect("4"));
    let pid = i32::from_le_bytes(info[16..20].try_into().expect("4"));
    (code == libc::SI_USER || code == libc::SI_TKILL) && !recorded.contains(&pid)
}

/// Why the end of the recording cannot be gone live from (see [`threads_blocker`]).
fn end_blocker(rec: &Recording, plan: &Plan) -> Option<String> {
    let mut positions: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, r) in rec.records.iter().enumerate() {
        positions.entry(r.pid).or_default().push(i);
    }
    threads_blocker(rec, &positions, plan)
}

/// Why the threads of some process cannot all go live at `plan`'s cuts (`None`: they can).
///
/// Replay runs a process's threads one at a time, each when the recording gave it the right to
/// run. A thread can be held at its frontier without running out of turn only when the right
/// left it at that very call: its last event before the cut is a switch at a blocking call (the
/// call it blocked in when recorded is then its frontier, or, when its stream ends there, the
/// call it was still blocked in). At most one thread of a process, the one holding the right at
/// the point, may be elsewhere: it runs on to its next system call while the others are held.
fn threads_blocker(
    rec: &Recording,
    positions: &HashMap<i32, Vec<usize>>,
    plan: &Plan,
) -> Option<String> {
    for (tgid, threads) in crate::format::thread_groups(&rec.records) {
        if threads.len() < 2 {
            continue;
        }
        let mut running = Vec::new();
        for t in &threads {
            let Some(pos) = positions.get(t) else {
                continue;
            };
            let cut = plan.cuts.get(t).copied().unwrap_or(0);
            let alive = cut > 0
                && !pos[..cut]
                    .iter()
                    .any(|&i| matches!(rec.records[i].event, Event::Exit { .. }))
                && pos
                    .get(cut)
                    .is_none_or(|&i| !matches!(rec.records[i].event, Event::Exit { .. }));
            if !alive {
                continue;
            }
            let blocked = matches!(
                rec.records[pos[cut - 1]].event,
                Event::Switch {
                    why: crate::format::SwitchPoint::BlockingCall,
                    ..
                }
            );
            if !blocked {
                running.push(*t);
            }
        }
        if running.len() > 1 {
            return Some(format!(
                "process {tgid} has threads {} running there, not blocked in a system call (threads go live where at most one of a process runs)",
                running
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    None
}

/// Why no process can go live at `index` (`None`: it can).
fn blocker(rec: &Recording, positions: &HashMap<i32, Vec<usize>>, index: usize) -> Option<String> {
    let plan = cut_plan(rec, positions, index);
    if let Some(why) = threads_blocker(rec, positions, &plan) {
        return Some(why);
    }
    for (pid, pos) in positions {
        let cut = plan.cuts[pid];
        if cut == 0 && *pid != rec.meta.root_pid && rec.meta.root_pid != 0 {
            continue; // not created yet
        }
        let done = pos[..cut]
            .iter()
            .any(|&i| matches!(rec.records[i].event, Event::Exit { .. }));
        if done || cut == pos.len() {
            continue;
        }
        match &rec.records[pos[cut]].event {
            Event::Exit { .. } => {}
            Event::Syscall(e) if syscalls::spec(e.nr).mode == syscalls::Mode::Fork => {
                let child = e.result as i32;
                if positions
                    .get(&child)
                    .is_some_and(|c| c.first().is_some_and(|&i| i < index))
                {
                    return Some(format!(
                        "process {pid} is inside its {} there (its child {child} already runs)",
                        syscalls::name(e.nr)
                    ));
                }
            }
            Event::Syscall(_) => {}
            other => {
                return Some(format!(
                    "process {pid} is not entering a system call there (its next event is {})",
                    describe(other)
                ));
            }
        }
    }
    None
}

/// What the fd model knows of an open file description.
#[derive(Debug, Clone, Default)]
pub(super) struct Desc {
    kind: Kind,
    /// The path it was opened at (absolute).
    path: Option<String>,
    /// The open flags.
    flags: i32,
    /// The recorded file offset.
    offset: u64,
    /// Status flags the program set with `fcntl(F_SETFL)` (emulated in replay).
    status: Option<i32>,
    /// The address a socket was bound to.
    bound: Option<Vec<u8>>,
    /// The backlog a socket listens with.
    backlog: Option<i32>,
    /// An epoll instance's interest list, in registration order: (fd, its description when
    /// registered, the `struct epoll_event`'s 12 bytes). `epoll_ctl` is emulated in replay.
    interests: Vec<(i32, std::rc::Weak<RefCell<Desc>>, [u8; 12])>,
    /// A timerfd's last `timerfd_settime`: its flags and `struct itimerspec` (32 bytes).
    /// Emulated in replay.
    timer: Option<(i32, [u8; 32])>,
    /// An inotify instance's watches: (watch descriptor, absolute path, mask). Emulated.
    watches: Vec<(i32, String, u32)>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Kind {
    /// Sightline's own fd 0, 1 or 2 when recorded.
    Stdio(i32),
    /// A file or directory opened by path.
    File,
    /// A socket the program made.
    Socket,
    /// An accepted or connected socket: a connection of the recording's time.
    Connection,
    /// An epoll instance (real in replay, its interest list emulated).
    Epoll,
    /// A timerfd (real in replay, its setting emulated).
    Timer,
    /// An inotify instance (real in replay, its watches emulated).
    Inotify,
    /// Anything else (pipes, eventfds...): real in replay, nothing to redo.
    #[default]
    Other,
}

type Table = HashMap<i32, Rc<RefCell<Desc>>>;

/// The go-live state of a replay.
pub(super) struct Live {
    plan: Plan,
    /// The recording's seccomp filter, compiled, never installed.
    prog: Vec<SockFilter>,
    /// Real tids held at their frontier.
    pub(super) frontier: HashSet<i32>,
    /// Recorded pid of a process (its first thread) → its fd table, shared by its threads.
    fds: HashMap<i32, Table>,
    /// Recorded tid of a thread → the recorded pid of its process (absent: itself).
    group_of: HashMap<i32, i32>,
    /// Pipe inode → bytes written to it in the replay and not read yet.
    pipes: HashMap<u64, VecDeque<u8>>,
    /// Pipe inode → bytes replayed reads took that no write captured yet had put there. Replay
    /// emulates reads, and a read may be replayed before the write whose bytes it returned (the
    /// writer's entry is still to come): those bytes are dropped when the write is captured.
    /// Before, they stayed, and a reader gone live read them again (`sort` given the last line
    /// of `seq` twice, about one go-live in 40 under load).
    pipe_debt: HashMap<u64, usize>,
    /// Recorded pid → (absolute path, flags) of the open it is entering.
    opening: HashMap<i32, (String, i32)>,
    /// Recorded pid → the address of the `bind` it is entering.
    binding: HashMap<i32, Vec<u8>>,
    /// Recorded pid → what the emulated setting call it is entering passed in memory: an
    /// `epoll_ctl`'s `struct epoll_event`, a `timerfd_settime`'s `struct itimerspec`, an
    /// `inotify_add_watch`'s path (absolute).
    setting: HashMap<i32, Vec<u8>>,
    /// Real tid → an untrapped fd call (`close`, `dup*`) awaiting its exit stop.
    untrapped: HashMap<i32, (i64, [u64; 6])>,
    /// The first process has entered its `execve` (its set-up calls before it pass).
    started: bool,
    /// The replay runs in a pid namespace of its own, where every process gets its recorded pid.
    pids: bool,
    /// Recorded (= real, in that namespace) pid of a child made by `clone3` in place of its
    /// parent's fork → the argument registers it must see (the parent's call's).
    child_args: HashMap<i32, (u64, [u64; 6])>,
    /// Said in the outcome.
    notes: Vec<String>,
}

impl Live {
    /// Go-live state for `plan`, with `root` the first process's recorded pid.
    pub(super) fn new(
        rec: &Recording,
        plan: Plan,
        root: i32,
        pids: bool,
        note: Option<String>,
    ) -> Live {
        let stdio: Table = (0..3)
            .map(|k| {
                (
                    k,
                    Rc::new(RefCell::new(Desc {
                        kind: Kind::Stdio(k),
                        ..Desc::default()
                    })),
                )
            })
            .collect();
        Live {
            plan,
            prog: crate::syscalls::filter_for_version(rec.meta.version).compile(),
            frontier: HashSet::new(),
            fds: HashMap::from([(root, stdio)]),
            group_of: crate::format::thread_groups(&rec.records)
                .into_iter()
                .flat_map(|(tgid, threads)| threads.into_iter().map(move |t| (t, tgid)))
                .collect(),
            pipes: HashMap::new(),
            pipe_debt: HashMap::new(),
            opening: HashMap::new(),
            binding: HashMap::new(),
            setting: HashMap::new(),
            untrapped: HashMap::new(),
            started: false,
            pids,
            child_args: HashMap::new(),
            notes: note.into_iter().collect(),
        }
    }

    /// Follows a replayed system call of recorded process `rec` in the fd model; `real` is its
    /// thread in the replay (for pipe reads).
    pub(super) fn on_recorded(
        &mut self,
        rec: i32,
        real: Option<i32>,
        e: &crate::format::SyscallEvent,
    ) {
        use libc::*;
        let r = e.result;
        let group = self.group(rec);
        let table = self.fds.entry(group).or_default();
        let fd0 = e.args[0] as i32;
        let new = |d: Desc| Rc::new(RefCell::new(d));
        match e.nr {
            // close_range(first, last, flags): closes them unless only marking them close-on-exec
            // (CLOSE_RANGE_CLOEXEC, 4).
            SYS_close_range if r == 0 && e.args[2] & 4 == 0 => {
                let (first, last) = (e.args[0] as u32, e.args[1] as u32);
                table.retain(|fd, _| !(first..=last).contains(&(*fd as u32)));
            }
            SYS_open | SYS_openat | SYS_creat | SYS_openat2 if r >= 0 => {
                let (path, flags) = self.opening.remove(&rec).unwrap_or_default();
                table.insert(
                    r as i32,
                    new(Desc {
                        kind: Kind::File,
                        path: Some(path),
                        flags,
                        ..Desc::default()
                    }),
                );
            }
            SYS_socket if r >= 0 => {
                table.insert(
                    r as i32,
                    new(Desc {
                        kind: Kind::Socket,
                        ..Desc::default()
                    }),
                );
            }
            SYS_epoll_create | SYS_epoll_create1 | SYS_timerfd_create | SYS_inotify_init
            | SYS_inotify_init1
                if r >= 0 =>
            {
                let kind = match e.nr {
                    SYS_timerfd_create => Kind::Timer,
                    SYS_inotify_init | SYS_inotify_init1 => Kind::Inotify,
                    _ => Kind::Epoll,
                };
                table.insert(
                    r as i32,
                    new(Desc {
                        kind,
                        ..Desc::default()
                    }),
                );
            }
            SYS_epoll_ctl if r == 0 => {
                let event = self.setting.remove(&rec);
                let target = e.args[2] as i32;
                let described = table.get(&target).map(Rc::downgrade);
                if let Some(d) = table.get(&fd0) {
                    let mut d = d.borrow_mut();
                    d.interests.retain(|(fd, _, _)| *fd != target);
                    let op = e.args[1] as i32;
                    if op != EPOLL_CTL_DEL
                        && let (Some(ev), Some(desc)) = (event, described)
                        && let Ok(ev) = <[u8; 12]>::try_from(&ev[..])
                    {
                        d.interests.push((target, desc, ev));
                    }
                }
            }
            SYS_timerfd_settime if r == 0 => {
                let spec = self.setting.remove(&rec);
                if let (Some(d), Some(spec)) = (table.get(&fd0), spec)
                    && let Ok(spec) = <[u8; 32]>::try_from(&spec[..])
                {
                    d.borrow_mut().timer = Some((e.args[1] as i32, spec));
                }
            }
            SYS_inotify_add_watch if r >= 0 => {
                let path = self.setting.remove(&rec);
                if let (Some(d), Some(path)) = (table.get(&fd0), path) {
                    let mut d = d.borrow_mut();
                    d.watches.retain(|(wd, _, _)| *wd != r as i32);
                    let path = String::from_utf8_lossy(&path).into_owned();
                    d.watches.push((r as i32, path, e.args[2] as u32));
                }
            }
            SYS_inotify_rm_watch if r == 0 => {
                if let Some(d) = table.get(&fd0) {
                    d.borrow_mut()
                        .watches
                        .retain(|(wd, _, _)| *wd != e.args[1] as i32);
                }
            }
            SYS_accept | SYS_accept4 if r >= 0 => {
                table.insert(
                    r as i32,
                    new(Desc {
                        kind: Kind::Connection,
                        ..Desc::default()
                    }),
                );
            }
            SYS_connect if r == 0 || r == -i64::from(EINPROGRESS) => {
                if let Some(d) = table.get(&fd0) {
                    d.borrow_mut().kind = Kind::Connection;
                }
            }
            SYS_bind if r == 0 => {
                if let (Some(d), Some(a)) = (table.get(&fd0), self.binding.remove(&rec)) {
                    d.borrow_mut().bound = Some(a);
                }
            }
            SYS_listen if r == 0 => {
                if let Some(d) = table.get(&fd0) {
                    d.borrow_mut().backlog = Some(e.args[1] as i32);
                }
            }
            SYS_fcntl if r >= 0 => match e.args[1] as i32 {
                F_SETFL => {
                    if let Some(d) = table.get(&fd0) {
                        d.borrow_mut().status = Some(e.args[2] as i32);
                    }
                }
                F_DUPFD | F_DUPFD_CLOEXEC => {
                    if let Some(d) = table.get(&fd0).cloned() {
                        table.insert(r as i32, d);
                    }
                }
                _ => {}
            },
            SYS_read | SYS_readv | SYS_write | SYS_writev if r > 0 => {
                if let Some(d) = table.get(&fd0) {
                    let mut d = d.borrow_mut();
                    if d.kind == Kind::File {
                        d.offset += r as u64;
                    }
                }
                if matches!(e.nr, SYS_read | SYS_readv)
                    && let Some(ino) = real.and_then(|t| pipe_inode(t, fd0))
                {
                    let q = self.pipes.entry(ino).or_default();
                    let n = (r as usize).min(q.len());
                    q.drain(..n);
                    if n < r as usize {
                        *self.pipe_debt.entry(ino).or_default() += r as usize - n;
                    }
                }
            }
            SYS_lseek if r >= 0 => {
                if let Some(d) = table.get(&fd0) {
                    d.borrow_mut().offset = r as u64;
                }
            }
            // Advances the output file's offset, and the input's when no offset was passed.
            // (Bytes it put into a pipe are not in the pipe model: they never passed through the
            // program's memory.)
            SYS_sendfile if r > 0 => {
                let advanced = [Some(fd0), (e.args[2] == 0).then_some(e.args[1] as i32)];
                for fd in advanced.into_iter().flatten() {
                    if let Some(d) = table.get(&fd) {
                        let mut d = d.borrow_mut();
                        if d.kind == Kind::File {
                            d.offset += r as u64;
                        }
                    }
                }
            }
            // The child's fd table was copied at the fork event ([`Live::inherit_fds`]); a thread
            // shares its process's.
            SYS_fork | SYS_vfork | SYS_clone
                if r > 0 && (e.nr != SYS_clone || e.args[0] & crate::sched::CLONE_THREAD == 0) =>
            {
                let copy = table.clone();
                self.fds.entry(r as i32).or_insert(copy);
            }
            SYS_pipe | SYS_pipe2 | SYS_socketpair if r == 0 => {
                if let Some(w) = e.writes.first()
                    && w.data.len() >= 8
                {
                    for k in 0..2 {
                        let fd =
                            i32::from_le_bytes(w.data[k * 4..k * 4 + 4].try_into().expect("4"));
                        table.insert(fd, new(Desc::default()));
                    }
                }
            }
            _ if r >= 0 && syscalls::spec(e.nr).returns_fd => {
                table.insert(r as i32, new(Desc::default()));
            }
            _ => {}
        }
    }

    /// At the fork event of recorded process `parent` that made recorded process `child`: the
    /// child starts with a copy of the parent's fd table (sharing its open file descriptions).
    /// Copied here, before the child runs, and not at the fork's syscall exit: the child's
    /// untrapped `dup2`s before its `execve` could come first, and the copy then undid them (a
    /// `head` gone live read the replay's stdin instead of its pipe, about one go-live in 40).
    pub(super) fn inherit_fds(&mut self, parent: i32, child: i32) {
        let copy = self
            .fds
            .get(&self.group(parent))
            .cloned()
            .unwrap_or_default();
        self.fds.insert(child, copy);
    }

    /// The recorded pid of the process of recorded thread `rec` (whose fd table it uses).
    fn group(&self, rec: i32) -> i32 {
        self.group_of.get(&rec).copied().unwrap_or(rec)
    }

    /// At a replayed write's entry: keeps the bytes written to a pipe (they are not written in
    /// replay), for the pipe's reader to find after go-live.
    pub(super) fn capture_write(&mut self, t: &Stopped, e: &crate::format::SyscallEvent) {
        if !matches!(e.nr, libc::SYS_write | libc::SYS_writev) || e.result <= 0 {
            return;
        }
        let Some(ino) = pipe_inode(t.tid(), e.args[0] as i32) else {
            return;
        };
        let mut read = |addr: u64, len: usize| t.read_bytes(RemotePtr::new(addr), len).ok();
        let q = self.pipes.entry(ino).or_default();
        for (addr, len) in syscalls::inputs(e.nr, &e.args, e.result, &mut read) {
            if let Some(d) = read(addr, len) {
                q.extend(d);
            }
        }
        if let Some(debt) = self.pipe_debt.get_mut(&ino) {
            let n = (*debt).min(q.len());
            q.drain(..n);
            *debt -= n;
        }
    }

    /// At the entry of a trapped call about to be replayed: what the model needs from the
    /// tracee's memory (an open's path, a bind's address).
    fn capture_entry(&mut self, t: &Stopped, rec: i32, nr: i64, args: &[u64; 6]) {
        match nr {
            libc::SYS_open | libc::SYS_openat | libc::SYS_creat | libc::SYS_openat2 => {
                let (dirfd, ptr, flags) = match nr {
                    libc::SYS_open => (libc::AT_FDCWD, args[0], args[1] as i32),
                    libc::SYS_creat => (
                        libc::AT_FDCWD,
                        args[0],
                        libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                    ),
                    libc::SYS_openat2 => (
                        args[0] as i32,
                        args[1],
                        t.read_u64(RemotePtr::new(args[2])).unwrap_or(0) as i32,
                    ),
                    _ => (args[0] as i32, args[1], args[2] as i32),
                };
                let Ok(p) = t.read_cstr(RemotePtr::new(ptr), 4096) else {
                    return;
                };
                let p = String::from_utf8_lossy(&p).into_owned();
                let tid = t.tid();
                let base = if dirfd == libc::AT_FDCWD {
                    std::fs::read_link(format!("/proc/{tid}/cwd"))
                } else {
                    std::fs::read_link(format!("/proc/{tid}/fd/{dirfd}"))
                };
                let abs = if p.starts_with('/') {
                    p
                } else {
                    base.map(|b| b.join(&p).display().to_string()).unwrap_or(p)
                };
                self.opening.insert(rec, (abs, flags));
            }
            libc::SYS_bind => {
                if let Ok(a) = t.read_bytes(RemotePtr::new(args[1]), (args[2] as usize).min(128)) {
                    self.binding.insert(rec, a);
                }
            }
            // x86-64's `struct epoll_event` is packed: 4 bytes of events, 8 of data.
            libc::SYS_epoll_ctl if args[1] as i32 != libc::EPOLL_CTL_DEL => {
                if let Ok(ev) = t.read_bytes(RemotePtr::new(args[3]), 12) {
                    self.setting.insert(rec, ev);
                }
            }
            libc::SYS_timerfd_settime => {
                if let Ok(spec) = t.read_bytes(RemotePtr::new(args[2]), 32) {
                    self.setting.insert(rec, spec);
                }
            }
            libc::SYS_inotify_add_watch => {
                let Ok(p) = t.read_cstr(RemotePtr::new(args[1]), 4096) else {
                    return;
                };
                let p = String::from_utf8_lossy(&p).into_owned();
                let abs = if p.starts_with('/') {
                    p
                } else {
                    std::fs::read_link(format!("/proc/{}/cwd", t.tid()))
                        .map(|b| b.join(&p).display().to_string())
                        .unwrap_or(p)
                };
                self.setting.insert(rec, abs.into_bytes());
            }
            _ => {}
        }
    }
}

/// The inode of the pipe fd `fd` of thread `tid` is (`None`: not a pipe).
fn pipe_inode(tid: i32, fd: i32) -> Option<u64> {
    let l = std::fs::read_link(format!("/proc/{tid}/fd/{fd}")).ok()?;
    l.to_str()?
        .strip_prefix("pipe:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// `flags:` of `/proc/PID/fdinfo/FD` (octal) and `pos:`.
fn fdinfo(pid: i32, fd: i32) -> Option<(i32, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let flags = i32::from_str_radix(&field("flags:")?, 8).ok()?;
    let pos = field("pos:")?.parse().ok()?;
    Some((flags, pos))
}

const PR_SET_TSC: u64 = 26;
const PR_TSC_ENABLE: u64 = 1;
const ARCH_SET_CPUID: u64 = 0x1012;

impl Replayer<'_> {
    /// True when the replayed processes have their recorded pids (go-live's pid namespace).
    pub(super) fn live_pids(&self) -> bool {
        self.live.as_ref().is_some_and(|l| l.pids)
    }

    /// `fork`/`vfork`/`clone` of a process (not a thread) in go-live's pid namespace: made as
    /// `clone3` with `set_tid`, so the child gets its recorded pid. The `clone_args` and the pid
    /// go below the stack's red zone, restored at the exit stop with the registers.
    pub(super) fn fork_at_recorded_pid(
        &mut self,
        t: &mut Stopped,
        ev: &crate::format::SyscallEvent,
    ) -> Result<super::syscall::Fixup, Error> {
        let mut regs = t.regs()?;
        let saved = super::syscall::args_of(&regs);
        let (flags, sp, ptid, ctid, tls) = match ev.nr {
            libc::SYS_fork => (libc::SIGCHLD as u64, 0, 0, 0, 0),
            libc::SYS_vfork => (
                (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64,
                0,
                0,
                0,
                0,
            ),
            _ => (saved[0], saved[1], saved[2], saved[3], saved[4]),
        };
        let at = (regs.rsp - 128 - 128) & !15;
        let set_tid = at + 96;
        let args = replay_ptrace::CloneArgs {
            flags: flags & !0xff,
            child_tid: ctid,
            parent_tid: ptid,
            exit_signal: flags & 0xff,
            // clone3 wants the stack's lowest byte and a size; clone, its top.
            stack: if sp != 0 { sp - 1 } else { 0 },
            stack_size: u64::from(sp != 0),
            tls,
            set_tid,
            set_tid_size: 1,
            ..replay_ptrace::CloneArgs::default()
        };
        let old = t.read_bytes(RemotePtr::new(at), 100)?;
        t.write_bytes(RemotePtr::new(at), &args.to_bytes())?;
        t.write_bytes(RemotePtr::new(set_tid), &(ev.result as i32).to_le_bytes())?;
        if let Some(l) = &mut self.live {
            l.child_args
                .insert(ev.result as i32, (regs.orig_rax, saved));
        }
        regs.orig_rax = libc::SYS_clone3 as u64;
        super::syscall::set_args(&mut regs, [at, 88, 0, 0, 0, 0]);
        t.set_regs(&regs)?;
        Ok(super::syscall::Fixup::rewritten(
            saved,
            Some((at, old)),
            ev.result,
        ))
    }

    /// At the first stop of a child that `clone3` made in place of a fork: gives it the
    /// registers the fork left (the parent's arguments).
    pub(super) fn live_child_first_stop(&mut self, t: &mut Stopped) -> Result<(), Error> {
        let Some(live) = self.live.as_mut() else {
            return Ok(());
        };
        if live.child_args.is_empty() {
            return Ok(());
        }
        let Some(rec) = self.procs.get(&t.tid()).map(|p| p.rec) else {
            return Ok(());
        };
        let Some((nr, args)) = live.child_args.remove(&rec) else {
            return Ok(());
        };
        let mut regs = t.regs()?;
        regs.orig_rax = nr;
        super::syscall::set_args(&mut regs, args);
        t.set_regs(&regs)?;
        Ok(())
    }

    /// A syscall stop of a replay without a seccomp filter: an exit stop goes the ordinary way;
    /// at an entry stop, the recording's filter decides (run it, refuse it, or trap it), and a
    /// process at its frontier is held there.
    pub(super) fn live_syscall_stop(&mut self, mut t: Stopped) -> Result<Next, Error> {
        let tid = t.tid();
        let Some(live) = self.live.as_mut() else {
            return self.syscall_exit(t);
        };
        if !t.at_syscall_entry()? {
            if let Some((nr, args)) = live.untrapped.remove(&tid) {
                let r = t.regs()?.rax as i64;
                let rec = self.procs.get(&tid).map_or(-1, |p| p.rec);
                let group = live.group(rec);
                let table = live.fds.entry(group).or_default();
                match nr {
                    libc::SYS_close if r == 0 => {
                        table.remove(&(args[0] as i32));
                    }
                    libc::SYS_dup | libc::SYS_dup2 | libc::SYS_dup3 if r >= 0 => {
                        match table.get(&(args[0] as i32)).cloned() {
                            Some(d) => table.insert(r as i32, d),
                            None => table.remove(&(r as i32)),
                        };
                    }
                    _ => {}
                }
            }
            return self.syscall_exit(t);
        }
        let mut regs = t.regs()?;
        let nr = regs.orig_rax as i64;
        let args = [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9];
        if !live.started {
            if nr != libc::SYS_execve {
                // The spawned child's own set-up before its execve.
                return Ok(Next::Resume(t, Resume::Syscall, 0));
            }
            live.started = true;
        }
        const ALLOW: u32 = 0x7fff_0000;
        const ERRNO: u32 = 0x0005_0000;
        let action = replay_ptrace::seccomp::evaluate_at(
            &live.prog,
            0xc000_003e, // AUDIT_ARCH_X86_64
            nr as u32,
            regs.rip,
            args,
        );
        if action == ALLOW {
            if matches!(
                nr,
                libc::SYS_close | libc::SYS_dup | libc::SYS_dup2 | libc::SYS_dup3
            ) {
                live.untrapped.insert(tid, (nr, args));
            }
            return Ok(Next::Resume(t, Resume::Syscall, 0));
        }
        if action & 0xffff_0000 == ERRNO {
            regs.orig_rax = u64::MAX;
            regs.rax = (-i64::from(action & 0xffff)) as u64;
            t.set_regs(&regs)?;
            return Ok(Next::Resume(t, Resume::Syscall, 0));
        }
        // Trapped: at the frontier, or replayed as at a seccomp stop.
        let (rec, busy) = match self.procs.get(&tid) {
            // Only our own re-issue of an interrupted call is no frontier.
            Some(p) => (p.rec, p.pending.as_ref().is_some_and(|q| q.restarting)),
            None => (-1, false),
        };
        let index = self.streams.get(&rec).map_or(0, |s| s.index);
        let cut = live.plan.cuts.get(&rec).copied().unwrap_or(0);
        if !busy && index >= cut && !crate::syscallbuf::from_handler(regs.rip) {
            live.frontier.insert(tid);
            return Ok(Next::Hold(t, WaitKind::SyscallStop));
        }
        live.capture_entry(&t, rec, nr, &args);
        self.syscall_entry(t)
    }

    /// True when going live and recorded thread `rec` has replayed every event before its
    /// frontier: what follows in its stream (a signal that ended it, say) is not replayed.
    pub(super) fn past_cut(&self, rec: i32) -> bool {
        let Some(live) = &self.live else { return false };
        let cut = live.plan.cuts.get(&rec).copied().unwrap_or(usize::MAX);
        self.streams.get(&rec).is_some_and(|s| s.index >= cut)
    }

    /// True when every replayed process is held at its frontier, or waits at an exit that comes
    /// at or after the point.
    pub(super) fn live_settled(&self) -> bool {
        let Some(live) = &self.live else { return false };
        self.unmapped.is_empty()
            && !self.procs.is_empty()
            && self.procs.iter().all(|(tid, p)| {
                live.frontier.contains(tid)
                    || matches!(
                        p.parked,
                        Some((_, WaitKind::Event(replay_ptrace::PtraceEvent::Exit)))
                    )
            })
    }

    /// With `SIGHTLINE_DEBUG`: the processes not yet at their frontier.
    pub(super) fn live_debug(&self) {
        let Some(live) = &self.live else { return };
        let waiting: Vec<String> = self
            .procs
            .iter()
            .filter(|(t, _)| !live.frontier.contains(t))
            .map(|(t, p)| {
                let s = self.streams.get(&p.rec);
                format!(
                    "{t} (recorded {}, at {} of cut {}, parked {}, held {})",
                    p.rec,
                    s.map_or(0, |s| s.index),
                    live.plan.cuts.get(&p.rec).copied().unwrap_or(0),
                    p.parked.is_some(),
                    p.held.is_some()
                )
            })
            .collect();
        eprintln!(
            "[replay] not at the frontier yet: {}; unmapped {:?}",
            waiting.join(", "),
            self.unmapped.keys().collect::<Vec<_>>()
        );
    }

    /// Rebuilds the kernel state of every process held at its frontier and detaches them all.
    pub(super) fn go_live_now(&mut self) -> Result<LiveOutcome, Error> {
        let mut live = self.live.take().expect("a go-live replay");
        let mut notes = std::mem::take(&mut live.notes);
        let mut held: Vec<(i32, i32, Stopped)> = Vec::new();
        let mut exiting = Vec::new();
        let tids: Vec<i32> = self.procs.keys().copied().collect();
        for tid in tids {
            let p = self.procs.get_mut(&tid).expect("listed");
            if let Some((t, _)) = p.held.take() {
                held.push((tid, p.rec, t));
            } else if let Some((t, _)) = p.parked.take() {
                exiting.push(t);
            }
        }
        held.sort_by_key(|(_, rec, _)| (*rec != self.root_rec, *rec));
        // Pipes first, while every process still holds its ends.
        for (ino, bytes) in &live.pipes {
            if bytes.is_empty() {
                continue;
            }
            let data: Vec<u8> = bytes.iter().copied().collect();
            let end = held.iter().find_map(|(tid, _, _)| {
                let dir = std::fs::read_dir(format!("/proc/{tid}/fd")).ok()?;
                dir.flatten().find_map(|e| {
                    let fd: i32 = e.file_name().to_str()?.parse().ok()?;
                    (pipe_inode(*tid, fd) == Some(*ino)).then_some((*tid, fd))
                })
            });
            // Nobody live holds it: nobody can read them.
            let Some((tid, fd)) = end else { continue };
            let wrote = Some((tid, fd)).and_then(|(tid, fd)| {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(format!("/proc/{tid}/fd/{fd}"))
                    .ok()?;
                std::io::Write::write_all(&mut &f, &data).ok()
            });
            if wrote.is_none() {
                notes.push(format!(
                    "{} byte(s) written to pipe {ino} and not read yet could not be put back",
                    data.len()
                ));
            }
        }
        let mut processes = Vec::new();
        let mut root = None;
        for (tid, rec, mut t) in held {
            let at = {
                let r = t.regs()?;
                let a = [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9];
                super::syscall::render_call(r.orig_rax as i64, &a)
            };
            // The fd table once per process (its threads share it), from its first thread held.
            let table = live.fds.remove(&live.group(rec));
            rebuild(&mut t, rec, table.as_ref(), live.pids, &mut notes)?;
            if let Err(e) = replay_ptrace::unpin(tid) {
                notes.push(format!("process {tid} stays pinned to one CPU: {e}"));
            }
            t.detach(0)?;
            if !live.pids {
                notes.push(format!(
                    "process {rec} of the recording runs on as pid {tid} (the kernel gave it another pid)"
                ));
            }
            if tid == self.root {
                root = Some(tid);
            }
            processes.push(LiveProcess {
                recorded: rec,
                process: live.group(rec),
                live: tid,
                at,
            });
        }
        for t in exiting {
            let _ = t.detach(0);
        }
        self.procs.clear();
        Ok(LiveOutcome {
            plan: live.plan,
            events: self.events,
            processes,
            notes,
            root,
            pid_namespace: live.pids,
        })
    }
}

/// Rebuilds the kernel state of one thread from its frontier's entry stop (see the module doc):
/// its own (RDTSC and CPUID faulting, debug registers), its process's syscall buffer, and, with
/// `table` (given for one thread of each process), its process's file descriptors.
fn rebuild(
    t: &mut Stopped,
    rec: i32,
    table: Option<&Table>,
    pids: bool,
    notes: &mut Vec<String>,
) -> Result<(), Error> {
    use replay_ptrace::syscallbuf::{BASE, MAP_LEN};
    let tid = t.tid();
    if crate::syscallbuf::header(t).is_some() {
        crate::syscallbuf::uninstall(t)?;
        t.call_at_entry(libc::SYS_munmap, [BASE, MAP_LEN, 0, 0, 0, 0])?;
    }
    t.call_at_entry(libc::SYS_prctl, [PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0, 0])?;
    let _ = t.call_at_entry(libc::SYS_arch_prctl, [ARCH_SET_CPUID, 1, 0, 0, 0, 0]);
    t.set_breakpoint(None)?;
    let Some(table) = table else {
        return Ok(());
    };
    // A scratch page for paths and socketpair's fds.
    let page = t.call_at_entry(
        libc::SYS_mmap,
        [
            0,
            4096,
            (libc::PROT_READ | libc::PROT_WRITE) as u64,
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64,
            u64::MAX,
            0,
        ],
    )?;
    if page < 0 {
        return Err(Error::Format(format!(
            "process {rec}: no scratch page for going live (mmap: {page})"
        )));
    }
    let page = page as u64;
    let mut fds: Vec<i32> = std::fs::read_dir(format!("/proc/{tid}/fd"))
        .map_err(|source| Error::Io {
            path: format!("/proc/{tid}/fd"),
            source,
        })?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    fds.sort_unstable();
    // Stand-ins already reopened, by description: a second fd of it becomes a dup of the first.
    let mut reopened: Vec<(Rc<RefCell<Desc>>, i32)> = Vec::new();
    // Epoll instances, registered again once every other fd is rebuilt (a reopened stand-in
    // is a new description: registered before, it would be dropped from the set).
    let mut epolls: Vec<(i32, Desc)> = Vec::new();
    let me = std::process::id();
    for fd in fds {
        let Some(d) = table.get(&fd) else { continue };
        let link = std::fs::read_link(format!("/proc/{tid}/fd/{fd}"))
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let cloexec = fdinfo(tid, fd).is_some_and(|(f, _)| f & libc::O_CLOEXEC != 0);
        let dup_flags = if cloexec { libc::O_CLOEXEC as u64 } else { 0 };
        if let Some((_, first)) = reopened.iter().find(|(x, _)| Rc::ptr_eq(x, d)) {
            t.call_at_entry(
                libc::SYS_dup3,
                [*first as u64, fd as u64, dup_flags, 0, 0, 0],
            )?;
            continue;
        }
        let desc = d.borrow().clone();
        let reopen = |t: &mut Stopped, path: &str, flags: i32| -> Result<Option<i32>, Error> {
            let mut bytes = path.as_bytes().to_vec();
            bytes.push(0);
            if bytes.len() > 4096 {
                return Ok(None);
            }
            t.write_bytes(RemotePtr::new(page), &bytes)?;
            let new = t.call_at_entry(
                libc::SYS_openat,
                [libc::AT_FDCWD as u64, page, flags as u64, 0, 0, 0],
            )?;
            if new < 0 {
                return Ok(None);
            }
            t.call_at_entry(libc::SYS_dup3, [new as u64, fd as u64, dup_flags, 0, 0, 0])?;
            t.call_at_entry(libc::SYS_close, [new as u64, 0, 0, 0, 0, 0])?;
            Ok(Some(fd))
        };
        match desc.kind {
            Kind::Stdio(k) => {
                let ours = std::fs::read_link(format!("/proc/self/fd/{k}"))
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                let Some((flags, pos)) = fdinfo(me as i32, k) else {
                    notes.push(format!(
                        "process {rec}: fd {fd} stays /dev/null (Sightline's fd {k} is closed)"
                    ));
                    continue;
                };
                // Our own description, shared (offsets included), taken by the tracee with
                // pidfd_getfd; else a reopen of it through /proc (a description of its own).
                // In the pid namespace our stdio is held by its init (pid 1 there), a fork of ours.
                let holder = if pids { 1 } else { me as i32 };
                if take_ours(t, holder, k, fd, dup_flags)? {
                    reopened.push((d.clone(), fd));
                    continue;
                }
                let keep = flags & (libc::O_ACCMODE | libc::O_APPEND | libc::O_NONBLOCK);
                if reopen(t, &format!("/proc/{me}/fd/{k}"), keep)?.is_none() {
                    notes.push(format!(
                        "process {rec}: fd {fd} stays /dev/null (Sightline's fd {k}, {ours}, cannot be reopened)"
                    ));
                    continue;
                }
                if ours.starts_with('/') && flags & libc::O_APPEND == 0 {
                    t.call_at_entry(libc::SYS_lseek, [fd as u64, pos, 0, 0, 0, 0])?;
                }
                reopened.push((d.clone(), fd));
            }
            Kind::File if link == "/dev/null" && desc.path.as_deref() != Some("/dev/null") => {
                let Some(path) = &desc.path else { continue };
                let flags = desc.flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC);
                if reopen(t, path, flags)?.is_none() {
                    notes.push(format!(
                        "process {rec}: fd {fd} stays /dev/null ({path} cannot be opened now)"
                    ));
                    continue;
                }
                if desc.flags & libc::O_APPEND == 0 && desc.offset > 0 {
                    t.call_at_entry(libc::SYS_lseek, [fd as u64, desc.offset, 0, 0, 0, 0])?;
                }
                reopened.push((d.clone(), fd));
            }
            Kind::File if desc.offset > 0 => {
                let f = std::fs::File::from(replay_ptrace::pidfd_getfd(tid, fd)?);
                if std::io::Seek::seek(&mut &f, std::io::SeekFrom::Start(desc.offset)).is_err() {
                    notes.push(format!("process {rec}: fd {fd} ({link}) cannot seek"));
                }
            }
            Kind::Socket => {
                if let (Some(addr), Some(backlog)) = (&desc.bound, desc.backlog) {
                    let s = replay_ptrace::pidfd_getfd(tid, fd)?;
                    if let Err(e) = replay_ptrace::listen_at(&s, addr, backlog) {
                        notes.push(format!(
                            "process {rec}: listening socket fd {fd} does not listen again: {e}"
                        ));
                    }
                } else if desc.bound.is_some() {
                    notes.push(format!(
                        "process {rec}: socket fd {fd} was bound but did not listen: left unbound"
                    ));
                }
            }
            Kind::Epoll => epolls.push((fd, desc.clone())),
            Kind::Timer => {
                if let Some((flags, spec)) = desc.timer {
                    t.write_bytes(RemotePtr::new(page), &spec)?;
                    let r = t.call_at_entry(
                        libc::SYS_timerfd_settime,
                        [fd as u64, flags as u64, page, 0, 0, 0],
                    )?;
                    if r < 0 {
                        notes.push(format!(
                            "process {rec}: timerfd {fd} is not set again (errno {})",
                            -r
                        ));
                    } else if flags & libc::TFD_TIMER_ABSTIME == 0 && spec[16..] != [0; 16] {
                        let secs = |b: &[u8]| {
                            let s = i64::from_le_bytes(b[..8].try_into().expect("8"));
                            let ns = i64::from_le_bytes(b[8..16].try_into().expect("8"));
                            s as f64 + ns as f64 / 1e9
                        };
                        notes.push(format!(
                            "process {rec}: timerfd {fd} restarts its recorded setting from now (first expiry in {} s, then every {} s)",
                            secs(&spec[16..]),
                            secs(&spec[..16])
                        ));
                    }
                }
            }
            Kind::Inotify => {
                for (wd, path, mask) in &desc.watches {
                    let mut bytes = path.as_bytes().to_vec();
                    bytes.push(0);
                    if bytes.len() > 4096 {
                        continue;
                    }
                    t.write_bytes(RemotePtr::new(page), &bytes)?;
                    let got = t.call_at_entry(
                        libc::SYS_inotify_add_watch,
                        [fd as u64, page, u64::from(*mask), 0, 0, 0],
                    )?;
                    if got != i64::from(*wd) {
                        notes.push(format!(
                            "process {rec}: inotify fd {fd}: the watch of {path} is {} now, not {wd}",
                            if got < 0 {
                                format!("refused (errno {})", -got)
                            } else {
                                format!("descriptor {got}")
                            }
                        ));
                    }
                }
            }
            Kind::Connection => {
                // A connection of the recording's time: it reads as closed from now on.
                let r = t.call_at_entry(
                    libc::SYS_socketpair,
                    [
                        libc::AF_UNIX as u64,
                        libc::SOCK_STREAM as u64,
                        0,
                        page,
                        0,
                        0,
                    ],
                )?;
                if r < 0 {
                    notes.push(format!("process {rec}: connection fd {fd} left as it is"));
                    continue;
                }
                let sv = t.read_bytes(RemotePtr::new(page), 8)?;
                let a = u32::from_le_bytes(sv[..4].try_into().expect("4")) as u64;
                let b = u32::from_le_bytes(sv[4..].try_into().expect("4")) as u64;
                t.call_at_entry(libc::SYS_dup3, [a, fd as u64, dup_flags, 0, 0, 0])?;
                t.call_at_entry(libc::SYS_close, [a, 0, 0, 0, 0, 0])?;
                t.call_at_entry(libc::SYS_close, [b, 0, 0, 0, 0, 0])?;
            }
            _ => {}
        }
        if let Some(fl) = desc.status
            && let Ok(f) = replay_ptrace::pidfd_getfd(tid, fd)
            && let Err(e) = replay_ptrace::set_status_flags(&f, fl)
        {
            notes.push(format!("process {rec}: fd {fd}'s status flags: {e}"));
        }
    }
    for (fd, desc) in epolls {
        for (target, described, event) in &desc.interests {
            // Only a registration whose fd still names the description it was made for (a
            // closed fd left the set; its number may name another file now).
            let same = match (table.get(target), described.upgrade()) {
                (Some(now), Some(then)) => Rc::ptr_eq(now, &then),
                _ => false,
            };
            if !same {
                continue;
            }
            t.write_bytes(RemotePtr::new(page), event)?;
            let r = t.call_at_entry(
                libc::SYS_epoll_ctl,
                [
                    fd as u64,
                    libc::EPOLL_CTL_ADD as u64,
                    *target as u64,
                    page,
                    0,
                    0,
                ],
            )?;
            if r < 0 {
                notes.push(format!(
                    "process {rec}: epoll fd {fd}: fd {target} is not in its set again (errno {})",
                    -r
                ));
            }
        }
    }
    t.call_at_entry(libc::SYS_munmap, [page, 4096, 0, 0, 0, 0])?;
    Ok(())
}

/// In the tracee: `pidfd_getfd` of our fd `k` onto its fd `fd`; false when it may not.
fn take_ours(t: &mut Stopped, me: i32, k: i32, fd: i32, dup_flags: u64) -> Result<bool, Error> {
    let pidfd = t.call_at_entry(libc::SYS_pidfd_open, [me as u64, 0, 0, 0, 0, 0])?;
    if pidfd < 0 {
        return Ok(false);
    }
    let got = t.call_at_entry(libc::SYS_pidfd_getfd, [pidfd as u64, k as u64, 0, 0, 0, 0])?;
    if got >= 0 {
        t.call_at_entry(libc::SYS_dup3, [got as u64, fd as u64, dup_flags, 0, 0, 0])?;
        t.call_at_entry(libc::SYS_close, [got as u64, 0, 0, 0, 0, 0])?;
    }
    t.call_at_entry(libc::SYS_close, [pidfd as u64, 0, 0, 0, 0, 0])?;
    Ok(got >= 0)
}

/// Replays `rec` up to `point` and goes live there (see the module doc). The program's output
/// up to the point is written to `stdout` and `stderr`, as [`super::replay`] does.
///
/// Errors: as [`super::replay`], and [`plan`]'s for the point; a replay that ended before every
/// process reached its frontier is a [`Error::Divergence`] of the first one that did not.
pub fn go_live(
    rec: &Recording,
    point: Point,
    stdout: &mut dyn std::io::Write,
    stderr: &mut dyn std::io::Write,
) -> Result<LiveOutcome, Error> {
    let plan = plan(rec, point)?;
    super::replay_run(rec, stdout, stderr, Some(plan.clone()), &mut None).map(|r| match r {
        super::Finished::Live(o) => o,
        super::Finished::Replayed(o) => LiveOutcome {
            plan,
            events: o.events,
            processes: Vec::new(),
            notes: vec!["every process had exited before the point: nothing went live".into()],
            root: None,
            pid_namespace: false,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_parse() {
        assert_eq!("end".parse::<Point>(), Ok(Point::End));
        assert_eq!("17".parse::<Point>(), Ok(Point::Event(17)));
        assert_eq!(
            "420:3".parse::<Point>(),
            Ok(Point::Syscall { pid: 420, n: 3 })
        );
        assert!("420:0".parse::<Point>().is_err());
        assert!("x".parse::<Point>().is_err());
        assert!("1:2:3".parse::<Point>().is_err());
    }
}
