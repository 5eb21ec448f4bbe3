//! The replayer: re-runs the recorded program under ptrace and feeds it its recorded inputs.
//!
//! Mirrors [`crate::recorder`] file for file: `syscall.rs` (each trapped call checked against the
//! recording, then emulated or run for real), `signal.rs` (signals and trapped instructions),
//! `process.rs` (fork, exec, exit).
//!
//! Processes are re-created for real (fork, exec, pipes, memory maps, fds with their recorded
//! numbers), so the replayed processes are real processes in the recorded state; only inputs come
//! from the recording. The tracee's stdin/stdout/stderr are `/dev/null`: the program's output is
//! read from its memory at each recorded write to Sightline's stdout/stderr, checked against the
//! recorded hash, and written by the replayer. Nothing else leaves the replay.
//!
//! Events of one process replay in their recorded order; events of different processes are ordered
//! only by their rendezvous points ([`crate::rendezvous`]): a tracee whose next event must wait stays
//! stopped ("parked") until the events before it on the same object have been replayed.
//!
//! Threads of one process follow the recorded schedule (`crate::sched`): only the holder's stops
//! are processed; another thread's stop is held until a recorded [`Event::Switch`] hands it the
//! right to run. A forced sync point is reached with a hardware breakpoint at its recorded rip and
//! the signature checked at each hit (`signal.rs`); a watchdog turns a point never reached into a
//! divergence.

mod live;
mod process;
mod signal;
mod syscall;

pub use live::{LiveOutcome, LiveProcess, Plan, Point, go_live, go_live_point, plan};

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::Path;

use replay_ptrace::{Resume, Running, SpawnSpec, Stopped, WaitKind};

use crate::format::{Event, Recording, SwitchPoint};
use crate::rendezvous::Progress;
use crate::{Divergence, Error, describe};

/// How many matching events a divergence report shows.
const RECENT: usize = 6;

/// How a replay went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayOutcome {
    /// Exit code of the first process (128 + signal when killed).
    pub exit_code: i32,
    /// Events replayed.
    pub events: u64,
    /// Processes replayed.
    pub processes: usize,
    /// Per recorded pid, the system call numbers replayed, in order (for comparing runs).
    pub syscalls: Vec<(i32, Vec<i64>)>,
    /// Threads started (`clone` with `CLONE_THREAD`).
    pub threads: usize,
    /// Ptrace stops spent running threads to their forced sync points: hardware breakpoint hits,
    /// the in-tracee checks' `int3`s (a pass whose registers match) and entries into a patched
    /// region from elsewhere ([`crate::trampoline::Region`]). A pass the check rejects costs none.
    pub seek_stops: u64,
}

/// The recorded events of one process, consumed in order.
#[derive(Debug, Default)]
struct Stream {
    events: VecDeque<Event>,
    index: usize,
    recent: VecDeque<String>,
    syscalls: Vec<i64>,
}

#[derive(Debug)]
struct RProc {
    rec: i32,
    /// Recorded tgid of its process.
    tgid: i32,
    /// The scheduling group it runs in (its key): `tgid`, or the group of the parent it shares
    /// writable memory with (`crate::sched::JOINED`).
    group: i32,
    thread: Option<Running>,
    parked: Option<(Stopped, WaitKind)>,
    pending: Option<syscall::Pending>,
    releasing: Option<i32>,
    /// A stop held until this thread has the right to run.
    held: Option<(Stopped, WaitKind)>,
    /// The forced sync point this thread runs to (breakpoint armed).
    seeking: Option<Seek>,
}

impl RProc {
    fn new(rec: i32, tgid: i32, group: i32, thread: Option<Running>) -> RProc {
        RProc {
            rec,
            tgid,
            group,
            thread,
            parked: None,
            pending: None,
            releasing: None,
            held: None,
            seeking: None,
        }
    }
}

/// The scheduler state of thread `tid` (`R` running, `S` asleep, `t` stopped by its tracer, ...:
/// proc(5), /proc/pid/stat field 3), `?` when it cannot be read.
fn task_state(tid: i32) -> char {
    std::fs::read_to_string(format!("/proc/{tid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next())
        })
        .unwrap_or('?')
}

/// The recorded threads that another thread's `exit_group` (or a signal) ended: threads of a
/// process with several threads whose recorded stream has no exit of their own (`exit_group` runs
/// untrapped, so the kill shows only as that missing exit; a thread that ended by itself has one).
fn killed_by_group_exit(rec: &Recording) -> std::collections::HashSet<i32> {
    let exited: std::collections::HashSet<i32> = rec
        .records
        .iter()
        .filter(|r| matches!(r.event, Event::Exit { .. }))
        .map(|r| r.pid)
        .collect();
    crate::format::thread_groups(&rec.records)
        .into_values()
        .filter(|threads| threads.len() > 1)
        .flatten()
        .filter(|t| !exited.contains(t))
        .collect()
}

/// A thread on its way to a forced sync point.
#[derive(Debug)]
struct Seek {
    /// Watchdog ticks in all.
    ticks: u32,
    /// Breakpoint hits so far.
    hits: u64,
    /// Watchdog ticks since the last hit.
    idle_ticks: u32,
    /// The nearest state seen at a hit, and how many parts of the signature differed.
    nearest: Option<(crate::format::Signature, usize)>,
    /// The in-tracee check at the point, once installed ([`crate::trampoline`]).
    check: Option<Installed>,
    /// A check could not be installed (point not patchable, no page in reach): hardware
    /// breakpoint hits only.
    no_check: bool,
}

/// A check installed for a forced sync point: its page, the point and the instruction it replaced.
#[derive(Debug)]
struct Installed {
    page: u64,
    point: u64,
    orig: Vec<u8>,
    /// Address of the check's `int3`.
    int3_at: u64,
    /// The region's instructions after the first: their address, where an entry from elsewhere
    /// stops at an `int3`, and their copy's in the check, where the replayer moves it on.
    entries: Vec<(u64, u64)>,
}

/// The replayer's tick period: 1 ms.
const TICK_NS: u64 = 1_000_000;
/// Ticks a seeking thread may go without a breakpoint hit (10 s), and in all (60 s), before replay
/// reports that it cannot reach its forced sync point.
const SEEK_IDLE_TICKS: u32 = 10_000;
const SEEK_TICKS: u32 = 60_000;
/// The tick period of a replay without forced sync points: only the stall check needs it (1 s).
const STALL_TICK_NS: u64 = 1_000_000_000;
/// How long no tracee may report, none of them running on a CPU, before replay reports that it is
/// stuck ([`Replayer::stall_check`]): 20 s, or `SIGHTLINE_REPLAY_STALL_SECS`.
fn stall_limit() -> std::time::Duration {
    let secs = std::env::var("SIGHTLINE_REPLAY_STALL_SECS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .unwrap_or(20);
    std::time::Duration::from_secs(secs)
}

/// The replay schedule of one process, or of processes that share writable memory.
#[derive(Debug, Default)]
struct RGroup {
    /// Recorded tid of the thread that may run user code.
    holder: i32,
    /// A second thread was started, or a process joined (from the same `clone` or fork on as
    /// when recorded).
    threaded: bool,
}

struct Replayer<'o> {
    streams: HashMap<i32, Stream>,
    /// Recorded threads that another thread's exit_group ended ([`killed_by_group_exit`]).
    killed: std::collections::HashSet<i32>,
    procs: HashMap<i32, RProc>,
    real_of: HashMap<i32, i32>,
    unmapped: HashMap<i32, (Stopped, WaitKind)>,
    /// Recorded pids whose process died without an exit stop and whose recorded exit awaits its
    /// rendezvous points (`process.rs`, `on_death`).
    dead: Vec<i32>,
    progress: Progress,
    stdout: &'o mut dyn Write,
    stderr: &'o mut dyn Write,
    root: i32,
    root_exit: Option<i32>,
    truncated: bool,
    events: u64,
    processes: usize,
    debug: bool,
    groups: HashMap<i32, RGroup>,
    /// Set by a handler at a point where the recording may switch threads: after resuming the
    /// tracee, hand the right to run to this recorded tid.
    transfer: Option<i32>,
    threads: usize,
    /// [`ReplayOutcome::seek_stops`].
    seek_stops: u64,
    /// (recorded tid, stream index) of an open whose fd was later mapped → the kept file's name
    /// ([`crate::files`]): that open opens the kept copy instead.
    kept: HashMap<(i32, usize), String>,
    /// The recording's `files/` directory.
    files_dir: std::path::PathBuf,
    /// Recorded processes (tgids) that started a thread: unbuffered from then on, as recorded.
    threaded_procs: std::collections::HashSet<i32>,
    /// Opens of files later mapped shared ([`shared_opens`]) → the shared file's number.
    shared_opens: HashMap<(i32, usize), u32>,
    /// The replay's own files behind them.
    shared_files: SharedFiles,
    /// Where the tracees see it: `files_dir`, or a bind mount of it outside the overlays of
    /// provided files (`crate::files::Provided`), so kept files are not read through overlayfs,
    /// which places large mappings differently (no huge-page alignment).
    files_seen_at: std::path::PathBuf,
    /// A debugger driving the replay ([`crate::debugger`]), if any.
    debugger: Option<&'o mut dyn crate::debugger::Debugger>,
    /// When a tracee last reported a stop or its death.
    last_report: std::time::Instant,
    /// [`stall_limit`].
    stall: std::time::Duration,
    /// No stall check before this ([`Replayer::stall_check`]).
    next_stall_check: std::time::Instant,
    /// Going live ([`live`]): replayed without a seccomp filter, every process held at its
    /// frontier.
    live: Option<Box<live::Live>>,
    /// Recorded pid of the first process.
    root_rec: i32,
}

/// How [`replay_run`] ended.
enum Finished {
    Replayed(ReplayOutcome),
    Live(LiveOutcome),
}

/// The opens to redirect to kept files: for every `mmap` record naming a kept file and the open
/// that made its fd, that open's (recorded tid, stream index).
fn kept_opens(rec: &Recording) -> HashMap<(i32, usize), String> {
    let mut kept = HashMap::new();
    for r in &rec.records {
        if let Event::Syscall(e) = &r.event
            && e.nr == libc::SYS_mmap
            && let Some(k) = crate::files::KeptMapping::decode(&e.extra)
            && k.opener != 0
        {
            kept.insert((k.opener, k.seq as usize), k.name);
        }
    }
    kept
}

/// The opens that made shared mappings' fds ([`crate::files::SharedMapping`]): (recorded tid,
/// stream index) → the shared file's number. Replay opens its own copy of that file there.
fn shared_opens(rec: &Recording) -> HashMap<(i32, usize), u32> {
    let mut opens = HashMap::new();
    for r in &rec.records {
        if let Event::Syscall(e) = &r.event
            && e.nr == libc::SYS_mmap
            && let Some(m) = crate::files::SharedMapping::decode(&e.extra)
            && m.opener != 0
        {
            opens.insert((m.opener, m.seq as usize), m.file);
        }
    }
    opens
}

/// The replay's own files behind shared file mappings, one per shared file of the recording,
/// in a directory of its own (removed when the replay ends).
#[derive(Debug)]
pub(crate) struct SharedFiles {
    dir: Option<std::path::PathBuf>,
}

impl SharedFiles {
    /// Creates `count` empty files (none, and no directory, for 0) in a new directory under
    /// `/dev/shm` (else the temporary directory), readable by root only.
    fn new(count: usize) -> Result<SharedFiles, Error> {
        use std::os::unix::fs::DirBuilderExt;
        if count == 0 {
            return Ok(SharedFiles { dir: None });
        }
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| Error::Io { path, source }
        };
        let base = if Path::new("/dev/shm").is_dir() {
            std::path::PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = base.join(format!("sightline-replay-{}-{stamp}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(io(&dir))?;
        let files = SharedFiles { dir: Some(dir) };
        for n in 0..count {
            let path = files.path(n as u32).expect("a directory");
            std::fs::File::create(&path).map_err(io(&path))?;
        }
        Ok(files)
    }

    /// The path of shared file `n`.
    fn path(&self, n: u32) -> Option<std::path::PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("shared-{n}")))
    }

    /// True when the recording has shared files.
    fn any(&self) -> bool {
        self.dir.is_some()
    }

    /// True when `path` (an fd's link target) is one of these files.
    fn contains(&self, path: &Path) -> bool {
        self.dir.as_ref().is_some_and(|d| path.starts_with(d))
    }
}

impl Drop for SharedFiles {
    fn drop(&mut self) {
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// What a handler decided for a stopped tracee.
enum Next {
    /// Resume it so.
    Resume(Stopped, Resume, i32),
    /// Keep it stopped until a rendezvous point is met.
    Park(Stopped, WaitKind),
    /// Keep it stopped until it has the right to run (forever, for a thread that was still
    /// blocked when its process ended in the recording).
    Hold(Stopped, WaitKind),
}

/// Replays `rec`, writing the program's stdout and stderr to `stdout` and `stderr`.
///
/// Errors: [`Error::Divergence`] when the program departs from the recording (the replay's
/// processes are killed: they are the replayer's own, never the recorded program);
/// [`Error::Unsupported`] for a recording that stopped early; [`Error::Command`] when the recorded
/// executable or working directory no longer exists; [`Error::Ptrace`] when the replay's tracees
/// cannot be driven.
pub fn replay(
    rec: &Recording,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<ReplayOutcome, Error> {
    replay_inner(rec, stdout, stderr, None)
}

/// Replays `rec` as [`replay`] does, with `debugger` stopping and resuming it
/// ([`crate::debugger`]). The debugger is told how the replay ended ([`Debugger::on_end`]).
///
/// Errors: those of [`replay`], and the debugger's.
///
/// [`Debugger::on_end`]: crate::debugger::Debugger::on_end
pub fn replay_debugged(
    rec: &Recording,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    debugger: &mut dyn crate::debugger::Debugger,
) -> Result<ReplayOutcome, Error> {
    replay_inner(rec, stdout, stderr, Some(debugger))
}

fn replay_inner<'o>(
    rec: &Recording,
    stdout: &'o mut dyn Write,
    stderr: &'o mut dyn Write,
    debugger: Option<&'o mut dyn crate::debugger::Debugger>,
) -> Result<ReplayOutcome, Error> {
    let Some(d) = debugger else {
        return replay_with(rec, stdout, stderr, &mut None);
    };
    // A debugger may ask for the run again from the start (reverse execution): the program's
    // output is written once, so each run writes only what goes beyond the runs before it.
    let mut out = HighWater::new(stdout);
    let mut err = HighWater::new(stderr);
    loop {
        out.rewind();
        err.rewind();
        let mut this_run: Option<&mut dyn crate::debugger::Debugger> = Some(&mut *d);
        let result = replay_with(rec, &mut out, &mut err, &mut this_run);
        match result {
            Err(Error::Restart) => d.on_restart(),
            result => {
                d.on_end(result.as_ref().err());
                return result;
            }
        }
    }
}

/// A writer that lets through only bytes past the furthest position written so far: a replay run
/// again from the start (reverse execution, or a go-live replay after a debugged one) writes the
/// recorded output again, which must not be printed twice.
///
/// Positions are byte offsets into the replayed stream, counted from the start of a run.
pub struct HighWater<W: Write> {
    inner: W,
    /// Bytes written in this run.
    pos: u64,
    /// Bytes written in all runs (the furthest `pos`), or the bytes known written before.
    high: u64,
}

impl<W: Write> HighWater<W> {
    /// A writer to `inner` that has written nothing yet.
    pub fn new(inner: W) -> HighWater<W> {
        HighWater::past(inner, 0)
    }

    /// A writer to `inner` that drops the first `written` bytes of its run: they were written
    /// to `inner` already (by an earlier replay of the same recording).
    pub fn past(inner: W, written: u64) -> HighWater<W> {
        HighWater {
            inner,
            pos: 0,
            high: written,
        }
    }

    /// A new run starts at position 0.
    pub fn rewind(&mut self) {
        self.pos = 0;
    }

    /// The furthest position reached: the bytes that `inner` has received in all runs, plus
    /// those it was created [`past`](Self::past).
    pub fn high(&self) -> u64 {
        self.high
    }
}

impl<W: Write> std::fmt::Debug for HighWater<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HighWater")
            .field("pos", &self.pos)
            .field("high", &self.high)
            .finish_non_exhaustive()
    }
}

impl<W: Write> Write for HighWater<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let end = self.pos + buf.len() as u64;
        if end > self.high {
            let skip = self.high.saturating_sub(self.pos) as usize;
            self.inner.write_all(&buf[skip..])?;
            self.high = end;
        }
        self.pos = end;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One replay run of `rec`, driven by `debugger` when there is one.
fn replay_with<'o>(
    rec: &Recording,
    stdout: &'o mut dyn Write,
    stderr: &'o mut dyn Write,
    debugger: &mut Option<&'o mut dyn crate::debugger::Debugger>,
) -> Result<ReplayOutcome, Error> {
    match replay_run(rec, stdout, stderr, None, debugger)? {
        Finished::Replayed(o) => Ok(o),
        Finished::Live(_) => unreachable!("no go-live plan"),
    }
}

/// A replay run, or with `live` a replay that goes live at that plan ([`live::go_live`]), driven
/// by `debugger` when there is one.
fn replay_run<'o>(
    rec: &Recording,
    stdout: &'o mut dyn Write,
    stderr: &'o mut dyn Write,
    live: Option<live::Plan>,
    debugger: &mut Option<&'o mut dyn crate::debugger::Debugger>,
) -> Result<Finished, Error> {
    if let Some(why) = rec.meta.status.strip_prefix("unsupported: ") {
        return Err(Error::Unsupported(format!(
            "this recording stopped early: {why}"
        )));
    }
    // The first process is started again from the recorded executable in the recorded directory;
    // say so plainly instead of reporting a divergence at its first event.
    let command = rec.meta.path.clone();
    if let Err(e) = std::fs::metadata(&rec.meta.path) {
        return Err(Error::Command {
            command,
            reason: format!("the recorded executable is not there: {e}"),
        });
    }
    if !Path::new(&rec.meta.cwd).is_dir() {
        return Err(Error::Command {
            command,
            reason: format!(
                "the recorded working directory {} does not exist",
                rec.meta.cwd
            ),
        });
    }
    let provided = crate::files::provide_created(rec)?;
    let shared_opens = shared_opens(rec);
    let shared_count = rec
        .records
        .iter()
        .filter_map(|r| match &r.event {
            Event::Syscall(e) if e.nr == libc::SYS_mmap => {
                crate::files::SharedMapping::decode(&e.extra).map(|m| m.file as usize + 1)
            }
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let shared_files = SharedFiles::new(shared_count)?;
    let mut streams: HashMap<i32, Stream> = HashMap::new();
    for r in &rec.records {
        streams
            .entry(r.pid)
            .or_default()
            .events
            .push_back(r.event.clone());
    }
    let root_pid = match rec.meta.root_pid {
        0 => rec.records.first().map_or(0, |r| r.pid),
        pid => pid,
    };
    let mut pid_note = None;
    let pid_ns = live.is_some()
        && match replay_ptrace::enter_pid_namespace() {
            Ok(_) => true,
            Err(e) => {
                pid_note = Some(format!(
                    "the live processes have other pids than recorded (no pid namespace: {e})"
                ));
                false
            }
        };
    let spec = SpawnSpec {
        path: rec.meta.path.clone(),
        argv: rec.meta.argv.clone(),
        env: rec.meta.env.clone(),
        cwd: rec.meta.cwd.clone(),
        cpu: None,
        no_aslr: true,
        stdio_null: true,
        exit_kill: true,
        // A process that goes live must carry no filter: stopped at every call instead.
        filter: live
            .is_none()
            .then(|| crate::syscalls::filter_for_version(rec.meta.version)),
        ignored_signals: rec.meta.ignored_signals.clone(),
        overlays: provided.overlays.clone(),
        binds: provided.binds.clone(),
        // Going live: the recorded pids, in a pid namespace of the replay's own.
        pid: pid_ns.then_some(root_pid),
    };
    // A recording whose recorder was killed before it could update meta.json says root_pid 0 (the
    // format's older recorders): the first record is always the first process's (above).
    let root = replay_ptrace::spawn(&spec)?;
    let root_tid = root.tid();
    let mut r = Replayer {
        killed: killed_by_group_exit(rec),
        streams,
        procs: HashMap::new(),
        real_of: HashMap::new(),
        unmapped: HashMap::new(),
        dead: Vec::new(),
        progress: Progress::new(rec.records.iter().flat_map(|r| match &r.event {
            Event::Syscall(e) => e.rendezvous.as_slice(),
            Event::Exit { rendezvous, .. } => rendezvous.as_slice(),
            _ => &[],
        })),
        stdout,
        stderr,
        root: root_tid,
        root_exit: None,
        truncated: rec.truncated || rec.meta.status != "complete",
        events: 0,
        processes: 1,
        debug: std::env::var_os("SIGHTLINE_DEBUG").is_some(),
        groups: HashMap::new(),
        transfer: None,
        threads: 0,
        seek_stops: 0,
        kept: kept_opens(rec),
        threaded_procs: std::collections::HashSet::new(),
        shared_opens,
        shared_files,
        files_dir: rec.dir.join(crate::files::FILES_DIR),
        files_seen_at: provided
            .files_at
            .clone()
            .unwrap_or_else(|| rec.dir.join(crate::files::FILES_DIR)),
        debugger: debugger.take(),
        last_report: std::time::Instant::now(),
        stall: stall_limit(),
        next_stall_check: std::time::Instant::now(),
        live: live.map(|plan| Box::new(live::Live::new(rec, plan, root_pid, pid_ns, pid_note))),
        root_rec: root_pid,
    };
    r.real_of.insert(root_pid, root_tid);
    r.procs.insert(
        root_tid,
        RProc::new(root_pid, root_pid, root_pid, Some(root)),
    );
    r.groups.insert(
        root_pid,
        RGroup {
            holder: root_pid,
            threaded: false,
        },
    );
    // The watchdog and run-ahead of forced sync points need ticks; without any, a slow timer
    // for the stall check alone (none under a debugger, which may keep everything stopped).
    let ticker = if rec
        .records
        .iter()
        .any(|r| matches!(r.event, Event::SyncPoint { .. }))
    {
        Some(replay_ptrace::start_ticks(TICK_NS)?)
    } else if r.debugger.is_none() {
        Some(replay_ptrace::start_ticks(STALL_TICK_NS)?)
    } else {
        None
    };
    // Same TSC mode as the tracees: no CR4 rewrite (a VM exit) on each switch to and from them.
    if let Err(e) = replay_ptrace::trap_own_rdtsc()
        && r.debug
    {
        eprintln!("sightline: tracer runs with its TSC enabled: {e}");
    }
    // Same CPUID faulting as the tracees: no MSR write (a VM exit) on each switch either.
    if let Err(e) = replay_ptrace::trap_own_cpuid()
        && r.debug
    {
        eprintln!("sightline: tracer runs without CPUID faulting: {e}");
    }
    let result = r.run();
    *debugger = r.debugger.take();
    drop(ticker);
    replay_ptrace::untrap_own_rdtsc();
    replay_ptrace::untrap_own_cpuid();
    if result.is_err() {
        r.kill_all();
    }
    result?;
    if r.live_settled() {
        let out = r.go_live_now();
        replay_ptrace::untrap_own_rdtsc();
        if out.is_err() {
            r.kill_all();
        }
        r.stdout.flush().map_err(|source| Error::Io {
            path: "<stdout>".into(),
            source,
        })?;
        return out.map(Finished::Live);
    }
    r.stdout.flush().map_err(|source| Error::Io {
        path: "<stdout>".into(),
        source,
    })?;
    r.stderr.flush().map_err(|source| Error::Io {
        path: "<stderr>".into(),
        source,
    })?;
    // Every recorded event must have been replayed, except the last of a thread that another
    // thread's exit_group killed (no exit of its own recorded): see `Replayer::forgive_killed`.
    let killed: Vec<i32> = r.killed.iter().copied().collect();
    for rec in killed {
        r.forgive_killed(rec);
    }
    let mut left: Vec<(&i32, &Stream)> = r
        .streams
        .iter()
        .filter(|(_, s)| !s.events.is_empty())
        .collect();
    left.sort_by_key(|(p, _)| **p);
    if let Some((pid, s)) = left.first() {
        return Err(Error::Divergence(Box::new(Divergence {
            pid: **pid,
            index: s.index,
            expected: describe(&s.events[0]),
            found: "the process had already exited (or was never created)".into(),
            last_matching: s.recent.iter().cloned().collect(),
        })));
    }
    let mut syscalls: Vec<(i32, Vec<i64>)> = r
        .streams
        .iter_mut()
        .map(|(p, s)| (*p, std::mem::take(&mut s.syscalls)))
        .collect();
    syscalls.sort_by_key(|(p, _)| *p);
    Ok(Finished::Replayed(ReplayOutcome {
        exit_code: r.root_exit.unwrap_or(0),
        events: r.events,
        processes: r.processes,
        syscalls,
        threads: r.threads,
        seek_stops: r.seek_stops,
    }))
}

impl Replayer<'_> {
    fn run(&mut self) -> Result<(), Error> {
        loop {
            if replay_ptrace::take_tick() {
                self.watchdog()?;
                self.stall_check()?;
            }
            let ev = match replay_ptrace::wait_any() {
                Ok(Some(ev)) => ev,
                Ok(None) => continue,
                Err(_) => return Ok(()), // ECHILD: all replayed processes are gone
            };
            self.last_report = std::time::Instant::now();
            // A held thread that reports again (the SIGKILL of a group exit woke it).
            if let Some(p) = self.procs.get_mut(&ev.tid) {
                p.held = None;
            }
            if ev.is_death() {
                if ev.tid == self.root
                    && let Some(d) = self.debugger.as_mut()
                {
                    d.on_exit(ev.kind);
                }
                self.on_death(ev.tid, ev.kind)?;
                // The last process not at its frontier may be this one.
                if self.live_settled() {
                    return Ok(());
                }
                // No tracee left. `wait_any` would not say so (ECHILD) when the replay has a
                // child that is no tracee, the init of its pid namespace when going live: it
                // blocked for ever (a go-live CI run hung 900 s after every process had died).
                if self.procs.is_empty() && self.unmapped.is_empty() {
                    return Ok(());
                }
                continue;
            }
            if ev.kind == WaitKind::Event(replay_ptrace::PtraceEvent::Exec) {
                self.exec_takes_over(&ev);
            }
            let Some(p) = self.procs.get_mut(&ev.tid) else {
                // A child whose parent's fork event we have not seen yet: wait for it.
                let t = Running::attached(ev.tid).into_stopped(&ev);
                self.unmapped.insert(ev.tid, (t, ev.kind));
                continue;
            };
            let t = p
                .thread
                .take()
                .unwrap_or_else(|| Running::attached(ev.tid))
                .into_stopped(&ev);
            if self.debug {
                eprintln!("[replay] tid {} {:?}", ev.tid, ev.kind);
            }
            self.dispatch(t, ev.kind)?;
            self.unpark()?;
            if self.live_settled() {
                return Ok(());
            }
            if self.debug && self.live.is_some() {
                self.live_debug();
            }
        }
    }

    /// At `PTRACE_EVENT_EXEC` of a thread that was not its process's leader: the kernel killed
    /// the other threads and gave the exec'ing one the leader's tid (the event message is its
    /// former tid), as when recorded, where its records went on in its own stream
    /// (`recorder::Recorder::exec_takes_over`). Its state moves to the leader's tid.
    fn exec_takes_over(&mut self, ev: &replay_ptrace::WaitEvent) {
        let Ok(former) = Running::attached(ev.tid)
            .into_stopped(ev)
            .event_msg()
            .map(|m| m as i32)
        else {
            return;
        };
        if former == ev.tid || former <= 0 {
            return;
        }
        let Some(mut p) = self.procs.remove(&former) else {
            return;
        };
        if self.debug {
            eprintln!(
                "[replay] thread {former} (recorded {}) ran execve: it is now {}",
                p.rec, ev.tid
            );
        }
        // The old leader's own state (it reports no death) is dropped; its thread handle, if
        // any, is the one this stop arrives on.
        p.thread = self.procs.remove(&ev.tid).and_then(|old| old.thread);
        self.real_of.insert(p.rec, ev.tid);
        self.procs.insert(ev.tid, p);
    }

    /// Handles one stop and resumes or parks the tracee; a stop of a thread that does not have
    /// the right to run is held (unprocessed) until it gets it.
    fn dispatch(&mut self, t: Stopped, kind: WaitKind) -> Result<(), Error> {
        let tid = t.tid();
        if kind == WaitKind::Event(replay_ptrace::PtraceEvent::Seccomp) {
            self.join_by_file(tid);
        }
        // The exit of a process that joined another's group waits for its turn, as recorded;
        // other exits (threads killed by an exit_group) need none.
        if let Some(p) = self.procs.get(&tid)
            && let Some(g) = self.groups.get(&p.group)
            && g.threaded
            && g.holder != p.rec
            && (kind != WaitKind::Event(replay_ptrace::PtraceEvent::Exit)
                || (p.rec == p.tgid && p.group != p.tgid))
        {
            if self.debug {
                eprintln!("[replay] tid {tid} (recorded {}) waits for its turn", p.rec);
            }
            self.procs.get_mut(&tid).expect("present").held = Some((t, kind));
            return Ok(());
        }
        let mut t = t;
        if let Some(how) = self.debugger_stop(&mut t, kind)? {
            let how = self.debugger_resume(&mut t, kind, how, 0)?;
            match t.resume(how, 0) {
                Ok(r) => {
                    if let Some(p) = self.procs.get_mut(&tid) {
                        p.thread = Some(r);
                    }
                }
                Err(e) if e.is_tracee_gone() => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(());
        }
        self.transfer = None;
        let result = self.on_stop(t, kind);
        let transfer = self.transfer.take();
        match result {
            Ok(Next::Resume(mut t, how, sig)) => {
                // Without a filter, only PTRACE_SYSCALL stops the tracee at its next call.
                let how = match how {
                    Resume::Cont if self.live.is_some() => Resume::Syscall,
                    how => how,
                };
                self.prefill(&mut t)?;
                self.arm_sync_point(&mut t)?;
                let how = self.debugger_resume(&mut t, kind, how, sig)?;
                match t.resume(how, sig) {
                    Ok(r) => {
                        if let Some(p) = self.procs.get_mut(&tid) {
                            p.thread = Some(r);
                        }
                    }
                    Err(e) if e.is_tracee_gone() => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(Next::Park(t, kind)) => {
                if let Some(p) = self.procs.get_mut(&tid) {
                    p.parked = Some((t, kind));
                }
            }
            Ok(Next::Hold(t, kind)) => {
                if let Some(p) = self.procs.get_mut(&tid) {
                    p.held = Some((t, kind));
                }
            }
            Err(Error::Ptrace(e)) if e.is_tracee_gone() => {}
            Err(e) => return Err(e),
        }
        if let Some(to) = transfer {
            self.hand_over(tid, to)?;
        }
        Ok(())
    }

    /// What the debugger, if any, sees at a stop of `tid` ([`crate::debugger::StopView`]).
    fn stop_view(&self, tid: i32) -> crate::debugger::StopView {
        let (rec_tid, rec_pid) = self.procs.get(&tid).map_or((-1, -1), |p| (p.rec, p.tgid));
        let mut threads: Vec<crate::debugger::ThreadView> = self
            .procs
            .iter()
            .filter(|(_, p)| p.tgid == self.root_rec)
            .map(|(real, p)| crate::debugger::ThreadView {
                rec: p.rec,
                real: *real,
                stopped: p.thread.is_none() || *real == tid,
            })
            .collect();
        threads.sort_by_key(|t| t.rec);
        let patches = self
            .procs
            .values()
            .filter(|p| p.tgid == self.root_rec)
            .filter_map(|p| p.seeking.as_ref()?.check.as_ref())
            .map(|c| (c.point, c.orig.clone()))
            .collect();
        crate::debugger::StopView {
            rec_tid,
            rec_pid,
            first: rec_pid == self.root_rec,
            first_pid: (self.root_rec, self.root),
            threads,
            patches,
            events: self.events,
            thread_events: self.streams.get(&rec_tid).map_or(0, |s| s.index),
        }
    }

    /// Offers a stop to the debugger: `Some(how)` when it was the debugger's.
    fn debugger_stop(&mut self, t: &mut Stopped, kind: WaitKind) -> Result<Option<Resume>, Error> {
        if self.debugger.is_none() {
            return Ok(None);
        }
        let view = self.stop_view(t.tid());
        let d = self.debugger.as_mut().expect("checked");
        match d.on_stop(t, kind, &view) {
            Ok(crate::debugger::Verdict::Replay) => Ok(None),
            Ok(crate::debugger::Verdict::Resume(how)) => Ok(Some(how)),
            Err(Error::Ptrace(e)) if e.is_tracee_gone() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Lets the debugger see a resumption replay chose; returns the one to use.
    fn debugger_resume(
        &mut self,
        t: &mut Stopped,
        kind: WaitKind,
        how: Resume,
        sig: i32,
    ) -> Result<Resume, Error> {
        if self.debugger.is_none() {
            return Ok(how);
        }
        let view = self.stop_view(t.tid());
        let d = self.debugger.as_mut().expect("checked");
        match d.on_resume(t, kind, how, sig, &view) {
            Err(Error::Ptrace(e)) if e.is_tracee_gone() => Ok(how),
            other => other,
        }
    }

    /// At a seccomp stop whose recorded call is a writable `MAP_SHARED` `mmap` of a file: as
    /// recorded, the process joins the group that had the file mapped, or its own group is
    /// scheduled from here on.
    fn join_by_file(&mut self, tid: i32) {
        let Some(p) = self.procs.get(&tid) else {
            return;
        };
        let (rec, own) = (p.rec, p.group);
        // Buffered calls recorded before it are made on the way (from the handler's buffer).
        let next = self
            .streams
            .get(&rec)
            .and_then(|s| s.events.iter().find(|e| !matches!(e, Event::Buffered(_))));
        let m = match next {
            Some(Event::Syscall(e)) if e.nr == libc::SYS_mmap => {
                crate::files::SharedMapping::decode(&e.extra)
            }
            _ => None,
        };
        let Some(m) = m else { return };
        if m.join != 0 && m.join != own {
            if self.debug {
                eprintln!(
                    "[replay] process {rec} joins group {} (a shared file)",
                    m.join
                );
            }
            if let Some(p) = self.procs.get_mut(&tid) {
                p.group = m.join;
            }
            if !self.procs.values().any(|p| p.group == own) {
                self.groups.remove(&own);
            }
            self.groups.entry(m.join).or_default().threaded = true;
        } else if let Some(g) = self.groups.get_mut(&own) {
            g.threaded = true;
        }
    }

    /// If the next recorded event of the thread `tid` (recorded `rec`) is a switch, replays it:
    /// the target is to run next. Called at the points where the recorder may switch.
    fn take_switch(&mut self, rec: i32, at: SwitchPoint) -> Option<i32> {
        match self.front(rec) {
            Some(Event::Switch { to, why }) if *why == at => {
                let to = *to;
                self.complete(rec);
                Some(to)
            }
            _ => None,
        }
    }

    /// After a system call's record was replayed: as recorded, the thread yields to another one
    /// (it stays stopped until its turn), or runs on, with its next recorded signal raised.
    fn after_syscall(&mut self, t: Stopped) -> Result<Next, Error> {
        let tid = t.tid();
        let rec = self.rec_of(tid);
        if self.threaded(tid)
            && let Some(to) = self.take_switch(rec, SwitchPoint::AfterSyscall)
        {
            self.transfer = Some(to);
            let again = WaitKind::Event(replay_ptrace::PtraceEvent::Stop(libc::SIGTRAP));
            return Ok(Next::Hold(t, again));
        }
        self.raise_next_signal(tid)?;
        Ok(Next::Resume(t, Resume::Cont, 0))
    }

    /// Gives the right to run in the process of `from` (a real tid) to recorded thread `to`, and
    /// processes its held stop, if it has one yet.
    fn hand_over(&mut self, from: i32, to: i32) -> Result<(), Error> {
        let group = match self.procs.get(&from) {
            Some(p) => p.group,
            None => self
                .real_of
                .get(&to)
                .and_then(|t| self.procs.get(t))
                .map_or(to, |p| p.group),
        };
        if let Some(g) = self.groups.get_mut(&group) {
            g.holder = to;
        }
        if self.debug {
            eprintln!("[replay] switch to thread {to}");
        }
        let held = self
            .real_of
            .get(&to)
            .and_then(|t| self.procs.get_mut(t))
            .and_then(|p| p.held.take());
        if let Some((t, kind)) = held {
            self.dispatch(t, kind)?;
        }
        Ok(())
    }

    /// Before resuming a thread into user code whose next recorded event is a forced sync point,
    /// arms the hardware breakpoint at its instruction.
    fn arm_sync_point(&mut self, t: &mut Stopped) -> Result<(), Error> {
        let tid = t.tid();
        let rec = self.rec_of(tid);
        let Some(Event::SyncPoint { sig, .. }) = self.front(rec) else {
            return Ok(());
        };
        let rip = sig.rip();
        let Some(p) = self.procs.get_mut(&tid) else {
            return Ok(());
        };
        // Every pass is checked, from the first: running ahead unarmed for a share of the
        // recorded CPU time ran past the point (CPU time to a point is not reproducible: page
        // faults and the tracer's kernel work count in it), and the in-tracee check makes
        // passes cheap at every point the recorder could make patchable.
        if p.seeking.is_none() {
            t.set_breakpoint(Some(rip))?;
            p.seeking = Some(Seek {
                ticks: 0,
                hits: 0,
                idle_ticks: 0,
                nearest: None,
                check: None,
                no_check: false,
            });
        }
        Ok(())
    }

    /// A tick: a thread that has been running to a forced sync point for too long without a
    /// breakpoint hit cannot reach it: a divergence.
    fn watchdog(&mut self) -> Result<(), Error> {
        let mut stuck = None;
        for p in self.procs.values_mut() {
            let Some(s) = &mut p.seeking else { continue };
            if p.thread.is_none() {
                continue;
            }
            s.idle_ticks += 1;
            s.ticks += 1;
            if s.idle_ticks > SEEK_IDLE_TICKS || s.ticks > SEEK_TICKS {
                stuck = Some(p.rec);
            }
        }
        let Some(rec) = stuck else { return Ok(()) };
        let real = self.real_of.get(&rec).copied().unwrap_or(0);
        let nearest = self
            .procs
            .get(&real)
            .and_then(|p| p.seeking.as_ref())
            .map_or("no breakpoint hit".into(), |s| match &s.nearest {
                Some((n, d)) => format!(
                    "{} breakpoint hit(s); nearest state: {} (differs in {d} of 20 parts)",
                    s.hits,
                    describe(&Event::SyncPoint { sig: *n, cpu_ns: 0 })
                ),
                None => "no breakpoint hit".into(),
            });
        Err(self.divergence(
            rec,
            self.expected_text(rec),
            format!("thread {rec} did not reach it: {nearest}"),
        ))
    }

    /// Reports a replay that cannot go on: no tracee has reported for [`stall_limit`] and none is
    /// running on a CPU (each is stopped by us, parked at a rendezvous point, held for its
    /// turn, or asleep in the kernel in a call that nothing left can complete). Without it such
    /// a replay waited for ever; the error names what each thread waits for. Not used under a
    /// debugger, whose user may keep the replay stopped. Threads the kernel is killing report
    /// within milliseconds, well inside the limit.
    ///
    /// Errors: [`Error::Divergence`] of the first waiting thread, its `found` listing all of
    /// them.
    fn stall_check(&mut self) -> Result<(), Error> {
        let now = std::time::Instant::now();
        if self.debugger.is_some()
            || self.procs.is_empty()
            || now.duration_since(self.last_report) < self.stall
            || now < self.next_stall_check
        {
            return Ok(());
        }
        self.next_stall_check = now + std::time::Duration::from_secs(1);
        let tids = self.tracee_tids();
        let states: Vec<(i32, char)> = tids.iter().map(|t| (*t, task_state(*t))).collect();
        // Running, or gone from /proc without our knowing yet: not stuck.
        if states.iter().any(|(_, st)| matches!(st, 'R' | '?')) {
            return Ok(());
        }
        let mut waits = Vec::new();
        for (tid, st) in &states {
            let Some(p) = self.procs.get(tid) else {
                waits.push(format!(
                    "tid {tid}: a new child before its parent's fork event"
                ));
                continue;
            };
            let what = if p.parked.is_some() {
                let unmet = match self.front(p.rec) {
                    Some(Event::Syscall(e)) => self.progress.first_unmet(&e.rendezvous),
                    Some(Event::Exit { rendezvous, .. }) => self.progress.first_unmet(rendezvous),
                    _ => None,
                };
                match unmet {
                    Some((r, done)) => format!(
                        "parked at a rendezvous point (object {:#x}: event {} of it, {done} replayed)",
                        r.obj, r.seq
                    ),
                    None => "parked".to_string(),
                }
            } else if p.held.is_some() {
                let holder = self.groups.get(&p.group).map_or(0, |g| g.holder);
                format!("held for its turn (thread {holder} has the right to run)")
            } else if self.live.as_ref().is_some_and(|l| l.frontier.contains(tid)) {
                "at its go-live frontier".to_string()
            } else if p.thread.is_some() {
                format!(
                    "asleep in the kernel (state {st}, {})",
                    std::fs::read_to_string(format!("/proc/{tid}/syscall"))
                        .map_or("call unknown".into(), |s| format!("syscall {}", s.trim()))
                )
            } else {
                format!("stopped (state {st})")
            };
            waits.push(format!(
                "thread {} (tid {tid}), next {}: {what}",
                p.rec,
                self.front(p.rec).map_or("nothing".into(), describe)
            ));
        }
        let first = tids
            .iter()
            .find_map(|t| self.procs.get(t))
            .map_or(0, |p| p.rec);
        Err(self.divergence(
            first,
            self.expected_text(first),
            format!(
                "no replayed thread has moved for {} s: {}",
                self.stall.as_secs(),
                waits.join("; ")
            ),
        ))
    }

    fn on_stop(&mut self, mut t: Stopped, kind: WaitKind) -> Result<Next, Error> {
        use replay_ptrace::PtraceEvent as E;
        if self.live.is_some() {
            self.live_child_first_stop(&mut t)?;
        }
        match kind {
            WaitKind::Event(E::Seccomp) => self.syscall_entry(t),
            WaitKind::SyscallStop if self.live.is_some() => self.live_syscall_stop(t),
            WaitKind::SyscallStop => self.syscall_exit(t),
            WaitKind::Event(E::Fork | E::Vfork | E::Clone) => self.on_new_child(t),
            WaitKind::Event(E::Exit) => self.on_exit(t),
            WaitKind::Signal(sig) => self.on_signal(t, sig),
            WaitKind::Event(E::Exec | E::VforkDone | E::Stop(_)) => {
                // A thread resumed at its turn may have a recorded signal due right here.
                self.raise_next_signal(t.tid())?;
                let how = self.resume_how(t.tid());
                Ok(Next::Resume(t, how, 0))
            }
            WaitKind::Exited(_) | WaitKind::Signaled(_) => {
                unreachable!("deaths are handled by run")
            }
        }
    }

    /// Before resuming a tracee whose next recorded event is a batch of buffered calls, puts the batch
    /// in its buffer (if the previous one is used up), saving the handler a trapped call to ask for it.
    ///
    /// Not while the tracee is stopped inside the handler (a real signal of the replay's own, such
    /// as a child's SIGCHLD, can stop it anywhere): having found the buffer used up, it may be on
    /// its way to its trapped call, which would then find a full buffer and report a divergence.
    /// That trapped call fetches the batch instead.
    fn prefill(&mut self, t: &mut Stopped) -> Result<(), Error> {
        let rec = self.rec_of(t.tid());
        let Some(Event::Buffered(_)) = self.front(rec) else {
            return Ok(());
        };
        match crate::syscallbuf::header(t) {
            Some(h) if h.used == h.pos => {}
            _ => return Ok(()),
        }
        if crate::syscallbuf::inside_handler(t.regs()?.rip) {
            return Ok(());
        }
        self.load_batch(t, rec)
    }

    /// Puts the batch of buffered calls at the front of `rec`'s stream into the tracee's buffer and
    /// marks it replayed (the handler checks each call as the program makes it).
    fn load_batch(&mut self, t: &Stopped, rec: i32) -> Result<(), Error> {
        if let Some(Event::Buffered(recs)) = self.front(rec) {
            crate::syscallbuf::fill(t, recs)?;
            self.complete(rec);
        }
        Ok(())
    }

    /// Retries parked tracees until none can move.
    fn unpark(&mut self) -> Result<(), Error> {
        loop {
            self.complete_dead_exits();
            let ready: Vec<i32> = self
                .procs
                .iter()
                .filter(|(_, p)| p.parked.is_some())
                .filter(|(_, p)| {
                    self.streams
                        .get(&p.rec)
                        .is_some_and(|s| self.front_ready(s))
                })
                .map(|(t, _)| *t)
                .collect();
            if ready.is_empty() {
                break;
            }
            for tid in ready {
                if let Some((t, kind)) = self.procs.get_mut(&tid).and_then(|p| p.parked.take()) {
                    self.dispatch(t, kind)?;
                }
            }
        }
        // Everyone parked and nobody able to move: the recorded order cannot be met.
        let live = self.procs.len();
        if live > 0 && self.procs.values().all(|p| p.parked.is_some()) {
            let (tid, p) = self.procs.iter().next().expect("nonempty");
            let s = &self.streams[&p.rec];
            let unmet = match s.events.front() {
                Some(Event::Syscall(e)) => self.progress.first_unmet(&e.rendezvous),
                Some(Event::Exit { rendezvous, .. }) => self.progress.first_unmet(rendezvous),
                _ => None,
            };
            let _ = tid;
            return Err(self.divergence(
                p.rec,
                format!(
                    "{} after {} earlier event(s) on its shared object",
                    s.events.front().map(describe).unwrap_or_default(),
                    unmet.map_or(0, |(r, _)| r.seq)
                ),
                format!(
                    "every replayed process is waiting (object has {} of them replayed): rendezvous deadlock",
                    unmet.map_or(0, |(_, d)| d)
                ),
            ));
        }
        Ok(())
    }

    fn front_ready(&self, s: &Stream) -> bool {
        match s.events.front() {
            Some(Event::Syscall(e)) => self.progress.ready(&e.rendezvous),
            Some(Event::Exit { rendezvous, .. }) => self.progress.ready(rendezvous),
            _ => true,
        }
    }

    /// True when the process of `tid` has started a thread (its schedule is replayed).
    fn threaded(&self, tid: i32) -> bool {
        self.procs
            .get(&tid)
            .and_then(|p| self.groups.get(&p.group))
            .is_some_and(|g| g.threaded)
    }

    fn resume_how(&self, tid: i32) -> Resume {
        match self.procs.get(&tid) {
            Some(p) if p.pending.as_ref().is_some_and(|p| !p.restarting) => Resume::Syscall,
            _ => Resume::Cont,
        }
    }

    fn rec_of(&self, tid: i32) -> i32 {
        self.procs.get(&tid).map_or(-1, |p| p.rec)
    }

    /// The next recorded event of recorded process `rec`.
    fn front(&self, rec: i32) -> Option<&Event> {
        self.streams.get(&rec).and_then(|s| s.events.front())
    }

    /// Marks the front event of `rec` replayed.
    /// Accounts for the last events of `rec`, a thread that another thread's exit_group killed,
    /// when replay saw it die before them; true when it did (or nothing was left).
    ///
    /// Recorders before the *dying* rule (`recorder::Recorder::on_exit`) could hand the right to
    /// run, at an exit_group, to a thread whose blocking call had just completed: the call was
    /// recorded, and the kernel killed the thread before its return to user code. Replay emulates
    /// the call and the thread waits for its turn, where the exit_group kills it first. Today's
    /// recorder records nothing of such threads; this allowance stays for recordings made before.
    /// Only events that the thread's user code never saw are accounted for this way (system-call
    /// results, switches, an exit); anything else stays a divergence.
    fn forgive_killed(&mut self, rec: i32) -> bool {
        let Some(s) = self.streams.get(&rec) else {
            return true;
        };
        if !self.killed.contains(&rec)
            || !s.events.iter().all(|e| {
                matches!(
                    e,
                    Event::Syscall(_) | Event::Switch { .. } | Event::Exit { .. }
                )
            })
        {
            return s.events.is_empty();
        }
        while self.front(rec).is_some() {
            self.complete(rec);
        }
        true
    }

    fn complete(&mut self, rec: i32) {
        let Some(s) = self.streams.get_mut(&rec) else {
            return;
        };
        if let Some(ev) = s.events.pop_front() {
            match &ev {
                Event::Syscall(e) => {
                    if let Some(l) = &mut self.live {
                        l.on_recorded(rec, self.real_of.get(&rec).copied(), e);
                    }
                    self.progress.complete(&e.rendezvous);
                    s.syscalls.push(e.nr);
                }
                Event::Exit { rendezvous, .. } => self.progress.complete(rendezvous),
                Event::Buffered(recs) => s.syscalls.extend(recs.iter().map(|r| r.nr)),
                _ => {}
            }
            s.recent.push_back(describe(&ev));
            if s.recent.len() > RECENT {
                s.recent.pop_front();
            }
            s.index += 1;
            self.events += 1;
        }
    }

    /// Builds a divergence report for recorded process `rec` at its current event.
    fn divergence(&self, rec: i32, expected: String, found: String) -> Error {
        let (index, last_matching) = self
            .streams
            .get(&rec)
            .map(|s| (s.index, s.recent.iter().cloned().collect()))
            .unwrap_or_default();
        Error::Divergence(Box::new(Divergence {
            pid: rec,
            index,
            expected,
            found,
            last_matching,
        }))
    }

    /// The expected-event text for `rec` when its stream is exhausted.
    fn expected_text(&self, rec: i32) -> String {
        match self.front(rec) {
            Some(e) => describe(e),
            None if self.truncated => "nothing: the recording ends here (it is incomplete)".into(),
            None => "nothing: the recorded process had no further events".into(),
        }
    }

    /// The tids of every tracee of the replay, in ascending order: those with replay state and
    /// those whose first stop came before their parent's fork or clone event.
    fn tracee_tids(&self) -> Vec<i32> {
        let mut tids: Vec<i32> = self
            .procs
            .keys()
            .chain(self.unmapped.keys())
            .copied()
            .collect();
        tids.sort_unstable();
        tids
    }

    /// Kills the replay's own tracees (after a divergence) and reaps them. A SIGKILLed tracee still
    /// reports `PTRACE_EVENT_EXIT`, so stops are resumed until every tracee is gone.
    fn kill_all(&mut self) {
        let tids = self.tracee_tids();
        for tid in &tids {
            let _ = replay_ptrace::tkill(*tid, libc::SIGKILL);
            // A tracee held in a stop whose report we already consumed (its PTRACE_EVENT_EXIT stop
            // when the exit diverged, a parked one) is not woken by SIGKILL and would never report
            // again: resume it so it dies. On a running tracee this fails with ESRCH, ignored.
            let held = replay_ptrace::WaitEvent {
                tid: *tid,
                kind: WaitKind::SyscallStop,
            };
            let _ = Running::attached(*tid)
                .into_stopped(&held)
                .resume(Resume::Cont, 0);
        }
        self.procs.clear();
        self.unmapped.clear();
        // Until each has died (reaped here), or no child is left. Not until ECHILD alone: going
        // live, the init of the replay's pid namespace is a child that never reports, and the
        // loop blocked for ever. A tid that never reports (reaped already) ends it at the deadline.
        let mut left: std::collections::HashSet<i32> = tids.into_iter().collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !left.is_empty() && std::time::Instant::now() < deadline {
            match replay_ptrace::try_wait_any() {
                Ok(Some(ev)) if !ev.is_death() => {
                    let _ = replay_ptrace::tkill(ev.tid, libc::SIGKILL);
                    let _ = Running::attached(ev.tid)
                        .into_stopped(&ev)
                        .resume(Resume::Cont, 0);
                }
                Ok(Some(ev)) => {
                    left.remove(&ev.tid);
                }
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(1)),
                Err(_) => break,
            }
        }
    }
}
