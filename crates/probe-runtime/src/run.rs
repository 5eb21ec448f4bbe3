//! The consumer: compiles a checked program, loads and attaches it, prints records as they arrive
//! and the aggregations at the end, the way the `dtrace` command does (dtrace(1M); libdtrace
//! `dt_consume.c`), through probe-format's text and JSON layouts.
//!
//! Order of events: BEGIN runs (by `BPF_PROG_TEST_RUN`) before anything is attached; then every
//! probe is attached, BEGIN's records print and the `-c` command is released; records print as
//! they arrive; tracing stops on
//! `exit()`, SIGINT/SIGTERM, or the target's exit; everything is detached; END runs; the remaining
//! records print; aggregations not yet printed by `printa()` print; drops are reported.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::time::{Duration, Instant};

use probe_codegen::layout::{
    Attach, Fault, Field, FieldKind, Layout, RecordAction, Stat, action_bit,
};
use probe_format::agg::{AggData, AggEntry as FEntry, Aggregation, SortOptions};
use probe_format::event::{AggregationSnapshot, Drops, Event, ProbeError, Record};
use probe_format::json::{DropKind, ProbeRef, RecordItem};
use probe_format::value::{Int, Stack, Symbol, Value};
use probe_sema::CheckedProgram;
use probe_sema::types::SymKind;

use crate::catalog;
use crate::session::{RawRecord, RuntimeError, Session};
use crate::spec::{HeldRecord, SPECSIZE_DEFAULT, SpecStore};
use probe_sys::os as sys;

/// How the consumer prints and when it stops.
#[derive(Debug, Clone, Default)]
pub struct RunConfig {
    /// `-q` / `quiet`: only explicit output.
    pub quiet: bool,
    /// `--json`: JSON Lines on stdout.
    pub json: bool,
    /// `-v`: full verifier logs.
    pub verbose: bool,
    /// `$target` when given by `-p` (stop when it exits).
    pub watch_pid: Option<u32>,
    /// `$target` from `-c` or `-p`: the process whose mappings symbolize user addresses
    /// (`ustack()`, `usym()`, ...).
    pub target_pid: Option<u32>,
    /// Requests from another thread: stop tracing, snapshot the aggregations
    /// ([`RunControl`]).
    pub control: Option<std::sync::Arc<RunControl>>,
    /// Clauses (program positions) whose kernel-ring records print after every CPU's ring
    /// rather than in their CPU's turn: the flight recorder's crash report (the `-c`/`-p`
    /// target died of a core-dumping signal) comes after the records that led to it.
    pub ring_last_clauses: Vec<usize>,
    /// Postmortem (`--recover`): under `bufpolicy=ring`, pin the kernel ring, the stats and the
    /// aggregation maps under [`crate::pin::run_dir`] of this process once attached, with a
    /// manifest of these compile inputs, and remove them at the end of the run. `None`: no pins.
    pub postmortem: Option<crate::pin::ScriptInputs>,
    /// Oracle dtrace's testing mode (its `_DTRACE_TESTING` environment variable, cmd/dtrace.c):
    /// probe lines and their heading leave out the CPU and ID columns, which vary between runs.
    pub testing: bool,
}

/// Requests another thread makes to a running [`Consumer`], seen at its next wake-up (at most
/// `switchrate`, 50 ms by default, later).
#[derive(Debug, Default)]
pub struct RunControl {
    stop: std::sync::atomic::AtomicBool,
    snapshots: std::sync::atomic::AtomicU64,
}

impl RunControl {
    /// Asks the consumer to stop tracing, as SIGINT does (END runs, the aggregations print).
    pub fn stop(&self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether [`RunControl::stop`] was called.
    pub fn stop_requested(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Asks the consumer for a snapshot of every aggregation: one aggregation event each, in
    /// program order, at its next wake-up.
    pub fn snapshot(&self) {
        self.snapshots
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Takes the pending snapshot requests (true when there was at least one).
    fn take_snapshot(&self) -> bool {
        self.snapshots.swap(0, std::sync::atomic::Ordering::SeqCst) > 0
    }
}

impl From<StopReason> for probe_format::event::Exit {
    fn from(r: StopReason) -> Self {
        use probe_format::event::{Exit, ExitReason};
        match r {
            StopReason::Exit(status) => Exit {
                reason: ExitReason::Exit,
                status: Some(status),
            },
            StopReason::Interrupted => Exit {
                reason: ExitReason::Interrupted,
                status: None,
            },
            StopReason::TargetExited => Exit {
                reason: ExitReason::TargetExited,
                status: None,
            },
            StopReason::BufferFull => Exit {
                reason: ExitReason::BufferFull,
                status: None,
            },
        }
    }
}

/// Where a [`Consumer`] in event mode sends its events ([`Consumer::set_event_sink`]); returns
/// false when nobody listens any more (tracing then stops).
pub type EventSink<'a> = Box<dyn FnMut(Event) -> bool + 'a>;

/// Why tracing stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// `exit(status)` ran.
    Exit(i32),
    /// SIGINT or SIGTERM.
    Interrupted,
    /// The `-c`/`-p` target exited.
    TargetExited,
    /// `bufpolicy=fill` and the buffer filled up (DTrace stops tracing then).
    BufferFull,
}

/// DTrace's principal buffer policies (`-x bufpolicy=`; the DTrace guide, "Buffers and
/// Buffering"); `switch`, the default, prints records as they arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufPolicy {
    /// A flight recorder: keep the most recent `bufsize` bytes of records, print them at exit.
    Ring,
    /// Keep the first `bufsize` bytes of records; when full, drop the rest (counted as drops)
    /// and stop tracing; print them at exit.
    Fill,
}

impl BufPolicy {
    /// The program's policy (`None` for `switch`; the analysis checked the value).
    pub fn of(prog: &CheckedProgram) -> Option<BufPolicy> {
        match prog
            .options
            .other
            .iter()
            .rev()
            .find(|(k, _)| k == "bufpolicy")
            .map(|(_, v)| v.as_str())
        {
            Some("ring") => Some(BufPolicy::Ring),
            Some("fill") => Some(BufPolicy::Fill),
            _ => None,
        }
    }
}

/// DTrace's default `bufsize` (4 MiB), the held buffer's size when none is given.
pub const BUFSIZE_DEFAULT: u64 = 4 << 20;

/// Bytes a held record counts for beyond its data: its header in the kernel's ring buffer
/// (the record, CPU, probe, mask and timestamp words).
pub const HELD_HEADER: usize = 32;

/// The records of a `ring` or `fill` buffer, held in the consumer until exit: at most `limit`
/// bytes (data plus [`HELD_HEADER`] each), as DTrace's per-CPU buffers of `bufsize` bytes are
/// bounded (here one bound for all CPUs together).
#[derive(Debug)]
pub struct HeldBuffer {
    policy: BufPolicy,
    limit: usize,
    bytes: usize,
    recs: std::collections::VecDeque<HeldRecord>,
    /// `fill`: records dropped because the buffer was full, by CPU.
    drops: BTreeMap<u32, u64>,
}

impl HeldBuffer {
    /// An empty buffer of `limit` bytes under `policy`.
    pub fn new(policy: BufPolicy, limit: u64) -> HeldBuffer {
        HeldBuffer {
            policy,
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
            bytes: 0,
            recs: std::collections::VecDeque::new(),
            drops: BTreeMap::new(),
        }
    }

    /// Keeps `rec`: `ring` evicts the oldest records to make room; `fill` drops `rec` when it
    /// does not fit and returns false (the buffer is full).
    fn push(&mut self, rec: HeldRecord) -> bool {
        let size = rec.5.len() + HELD_HEADER;
        match self.policy {
            BufPolicy::Ring => {
                self.bytes += size;
                self.recs.push_back(rec);
                while self.bytes > self.limit {
                    match self.recs.pop_front() {
                        Some(old) => self.bytes -= old.5.len() + HELD_HEADER,
                        None => break,
                    }
                }
                true
            }
            BufPolicy::Fill => {
                if self.bytes + size > self.limit {
                    *self.drops.entry(rec.1).or_default() += 1;
                    return false;
                }
                self.bytes += size;
                self.recs.push_back(rec);
                true
            }
        }
    }

    /// The records, each CPU's oldest to youngest, CPU after CPU; and the drops by CPU.
    fn into_records(self) -> (Vec<HeldRecord>, BTreeMap<u32, u64>) {
        let mut recs: Vec<HeldRecord> = self.recs.into();
        // Stable: each CPU's records keep their order.
        recs.sort_by_key(|r| r.1);
        (recs, self.drops)
    }
}

/// Errors of a run: the kernel, or the output.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Loading, attaching or reading failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Writing the output failed.
    #[error("writing output")]
    Io(#[from] std::io::Error),
}

/// A target the consumer released after attaching and watches for exit (`-c`).
pub trait Target {
    /// Called once every probe is attached.
    fn release(&mut self) -> Result<(), RuntimeError>;
    /// `Some(status)` once the target exited.
    fn exited(&mut self) -> Option<i32>;
}

/// Kernel symbols from `/proc/kallsyms`, sorted by address, for `stack()` and `sym()`.
#[derive(Debug, Default)]
pub struct Kallsyms {
    syms: Vec<(u64, String, Option<String>)>,
}

impl Kallsyms {
    /// Reads `/proc/kallsyms` (addresses are zero without root/kptr_restrict: then nothing
    /// symbolizes).
    pub fn load() -> Kallsyms {
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        Kallsyms::parse(&text)
    }

    /// Parses kallsyms text: `addr type name [module]` per line; only text symbols are kept.
    pub fn parse(text: &str) -> Kallsyms {
        let mut syms = Vec::new();
        for line in text.lines() {
            let mut it = line.split_whitespace();
            let (Some(a), Some(t), Some(n)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if !matches!(t, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(a, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let module = it
                .next()
                .map(|m| m.trim_matches(|c| c == '[' || c == ']').to_string());
            syms.push((addr, n.to_string(), module));
        }
        syms.sort_by_key(|s| s.0);
        Kallsyms { syms }
    }

    /// The symbol containing `addr` (the nearest one at or below it).
    pub fn resolve(&self, addr: u64) -> Symbol {
        let i = self.syms.partition_point(|s| s.0 <= addr);
        if i == 0 {
            return Symbol::unknown(addr);
        }
        let (start, name, module) = &self.syms[i - 1];
        Symbol {
            addr,
            module: Some(module.clone().unwrap_or_else(|| "vmlinux".into())),
            name: Some(name.clone()),
            offset: addr - start,
        }
    }
}

/// An error and its causes joined with ": " (as anyhow's `{:#}`), for warnings.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cur = c.source();
    }
    out
}

/// Runs a `system()` command with `/bin/sh -c` (stdin closed, stderr inherited) and returns what
/// it printed on stdout.
fn run_system(cmd: &str) -> std::io::Result<String> {
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The warning for matched probes whose uprobe site the kernel refused
/// ([`crate::session::Session::refused_probes`]): how many, why, and the first one; `None` for none.
pub fn refused_warning(refused: &[String]) -> Option<String> {
    let first = refused.first()?;
    let n = refused.len();
    let (are, their, s, which) = if n == 1 {
        (" is", "its", "", format!(": {first}"))
    } else {
        ("s are", "their", "s", format!(" (the first: {first})"))
    };
    Some(format!(
        "sightline: warning: {n} matched probe{are} not attached: the kernel refused {their} uprobe site{s} (ENOTSUPP: an instruction its uprobe code can neither single-step nor emulate){which}"
    ))
}

/// Display id of a probe (`-l`'s ID column and the non-quiet probe lines).
pub fn probe_display_id(full_name: &str) -> u32 {
    let mut parts = full_name.splitn(4, ':');
    let (p, m, f, n) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    catalog::user_probe_id_of(full_name).unwrap_or_else(|| catalog::probe_id(p, m, f, n))
}

/// Whether `flowindent` is on (`-F`, `-x flowindent`, `#pragma D option flowindent`): the last
/// setting wins, as for every option.
fn flowindent(prog: &CheckedProgram) -> bool {
    prog.options
        .other
        .iter()
        .rev()
        .find(|(k, _)| k == "flowindent")
        .is_some_and(|(_, v)| v != "0")
}

/// Whether `rawbytes` is on (`-x rawbytes`, `#pragma D option rawbytes`): `trace()` then prints
/// every value as a hex dump of its bytes (Oracle's `dt_print_trace` calls `dt_print_rawbytes`).
fn rawbytes(prog: &CheckedProgram) -> bool {
    prog.options
        .other
        .iter()
        .rev()
        .find(|(k, _)| k == "rawbytes")
        .is_some_and(|(_, v)| v != "0")
}

/// The bytes of a traced value as its record holds them, for `rawbytes`: an integer's
/// little-endian bytes of its C width, a string's bytes padded with NULs to `strsize`; other
/// values as they print otherwise (`None`).
fn raw_record_bytes(v: &Value, strsize: usize) -> Option<Vec<u8>> {
    match v {
        Value::Int(i) => Some(i.bits.to_le_bytes()[..usize::from(i.bytes.clamp(1, 8))].to_vec()),
        Value::Str(s) => {
            let mut b = s.as_bytes().to_vec();
            b.resize(strsize.max(b.len() + 1), 0);
            Some(b)
        }
        Value::Bytes(b) => Some(b.clone()),
        _ => None,
    }
}

/// The consumer state of one run.
pub struct Consumer<'a> {
    prog: &'a CheckedProgram,
    session: Session,
    cfg: RunConfig,
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
    aggs: Vec<Aggregation>,
    normals: Vec<u64>,
    printed: HashSet<usize>,
    header_done: bool,
    /// `flowindent` (`-F`): the per-CPU indentation of probe lines; `None` when off.
    flow: Option<probe_format::output::FlowIndent>,
    stopped: Option<StopReason>,
    ksyms: Option<Kallsyms>,
    usyms: crate::user::UserSymbols,
    reported: BTreeMap<(u32, usize), u64>,
    /// ERROR records read from the ring buffer, by CPU (compared with [`Stat::Errors`] at the
    /// end of the run: the difference is errors whose record was dropped).
    errors_seen: BTreeMap<usize, u64>,
    sort: SortOptions,
    /// Option `printsize` as it stands (`setopt()` changes it): bytes `print()` shows.
    printsize: usize,
    /// Speculative records waiting for their commit or discard.
    specs: SpecStore,
    /// Processes `stop()` stopped, resumed (SIGCONT) when the consumer is dropped.
    stopped_pids: std::collections::BTreeSet<u32>,
    /// The records kept until exit under `bufpolicy=ring` or `fill` (`None`: `switch`).
    held: Option<HeldBuffer>,
    /// Records of [`RunConfig::ring_last_clauses`] that came through the ring buffer, printed
    /// after the kernel ring at exit.
    late: Vec<HeldRecord>,
    /// The record just handled was a fault that ran the ERROR clauses (see `drain`).
    error_ran: bool,
    /// The status of an `exit()` of an END clause, which sets the run's exit status.
    end_exit: Option<i32>,
    /// Told `(done, total)` while the probes attach ([`Consumer::set_attach_progress`]).
    attach_progress: Option<Box<dyn FnMut(usize, usize) + 'a>>,
    /// Event mode: every event goes here instead of a JSON line ([`Consumer::set_event_sink`]).
    events: Option<EventSink<'a>>,
    /// The clause of the record being printed (for [`Record::clause`]).
    cur_clause: Option<usize>,
}

impl std::fmt::Debug for Consumer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Drop for Consumer<'_> {
    fn drop(&mut self) {
        // Never leave a process stopped: DTrace leaves a stop()ped process for `prun`, Sightline
        // resumes every process its stop() stopped once tracing ends (also after an error).
        for &pid in &self.stopped_pids {
            let _ = sys::kill(pid, libc::SIGCONT);
        }
    }
}

impl<'a> Consumer<'a> {
    /// Loads `layout`, the code generated for `prog` ([`crate::compile::compile`]); nothing is
    /// attached yet.
    ///
    /// # Errors
    /// [`RunError::Runtime`] when a map cannot be created or the verifier rejects a program.
    pub fn new(
        prog: &'a CheckedProgram,
        layout: Layout,
        cfg: RunConfig,
        out: &'a mut dyn Write,
        err: &'a mut dyn Write,
    ) -> Result<Consumer<'a>, RunError> {
        let session = Session::load(layout, cfg.verbose)?;
        Ok(Consumer::from_session(prog, session, cfg, out, err))
    }

    /// A consumer of `session`, loaded or opened from pins
    /// ([`Session::open_pinned`]), for `prog`, the checked program of its layout.
    pub fn from_session(
        prog: &'a CheckedProgram,
        session: Session,
        cfg: RunConfig,
        out: &'a mut dyn Write,
        err: &'a mut dyn Write,
    ) -> Consumer<'a> {
        let aggs = session
            .layout
            .aggs
            .iter()
            .enumerate()
            .map(|(i, a)| Aggregation::new(a.name.clone(), i as u32, a.func))
            .collect::<Vec<_>>();
        let o = &prog.options;
        let opt = |name: &str| {
            (o.other.iter().rev())
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let flag = |name: &str| opt(name).is_some_and(|v| v != "0");
        // illumos dt_print_packed: UTF-8 bars unless `encoding=ascii` or a terminal known not
        // to show them (TERM dumb, sun, sun-color; here also no TERM at all).
        let utf8 = match opt("encoding") {
            Some(e) => e == "utf8",
            None => std::env::var("TERM")
                .is_ok_and(|t| !matches!(t.as_str(), "dumb" | "sun" | "sun-color")),
        };
        let sort = SortOptions {
            key: o.aggsortkey,
            rev: o.aggsortrev,
            keypos: o.aggsortkeypos.unwrap_or(0) as usize,
            pos: o.aggsortpos.unwrap_or(0) as usize,
            zoom: flag("aggzoom"),
            hist: flag("agghist"),
            pack: flag("aggpack"),
            utf8,
        };
        let n = aggs.len();
        let usyms = crate::user::UserSymbols::new(cfg.target_pid);
        Consumer {
            prog,
            session,
            cfg,
            out,
            err,
            aggs,
            normals: vec![1; n],
            printed: HashSet::new(),
            header_done: false,
            flow: flowindent(prog).then(probe_format::output::FlowIndent::new),
            stopped: None,
            ksyms: None,
            usyms,
            reported: BTreeMap::new(),
            errors_seen: BTreeMap::new(),
            sort,
            printsize: prog.options.printsize as usize,
            specs: SpecStore::new(prog.options.specsize.unwrap_or(SPECSIZE_DEFAULT)),
            attach_progress: None,
            events: None,
            cur_clause: None,
            stopped_pids: std::collections::BTreeSet::new(),
            late: Vec::new(),
            error_ran: false,
            end_exit: None,
            held: BufPolicy::of(prog)
                .map(|p| HeldBuffer::new(p, prog.options.bufsize.unwrap_or(BUFSIZE_DEFAULT))),
        }
    }

    /// Installs the program as an anonymous enabling in `dir` (DTrace's `-A`; created by
    /// [`crate::pin::create_dir`]): runs BEGIN (its records stay in the ring buffer for the
    /// claim), attaches every probe through BPF links, pins every map, program and link in
    /// `dir` and writes the manifest of `script`, the compile inputs. Once this consumer is
    /// dropped the probes keep firing until the claim ([`Consumer::claim`]) removes the pins.
    ///
    /// # Errors
    /// [`RuntimeError::Unpinnable`] for an attachment without a BPF link; the errors of
    /// attaching and pinning. The caller removes `dir` on error.
    pub fn install_anonymous(
        &mut self,
        dir: &std::path::Path,
        script: crate::pin::ScriptInputs,
    ) -> Result<crate::pin::Manifest, RunError> {
        self.session.run_dtrace(Attach::Begin)?;
        self.session.set_pinnable_attachments(true);
        self.session.attach()?;
        self.report_refused()?;
        let pinned = self
            .session
            .pin(dir, crate::session::PinScope::Everything)?;
        let m = crate::pin::Manifest::new(
            crate::pin::PinKind::Anonymous,
            script,
            &self.session.layout,
            &pinned,
        );
        m.write(dir)?;
        Ok(m)
    }

    /// Prints what a pinned program buffered, as a run prints at its end (DTrace's `-a`
    /// claiming an anonymous state; `--recover` of a dead run): the ring buffer's records
    /// (BEGIN's), the kernel ring's, each CPU's oldest first; with `run_end`, END runs (its
    /// program is pinned); then the aggregations not yet printed, and the drops. The caller
    /// removes the pins (which detaches an anonymous enabling's probes) before `run_end`
    /// matters: END runs after the probes stop, as in a run.
    ///
    /// # Errors
    /// [`RunError`] when reading a map or writing fails.
    pub fn claim(&mut self, run_end: bool) -> Result<(), RunError> {
        self.drain()?;
        self.print_buffers()?;
        if run_end {
            // END's records print at once: the held buffer is gone.
            self.session.run_dtrace(Attach::End)?;
            self.drain()?;
        }
        self.stopped = Some(StopReason::Interrupted);
        self.print_aggregations_at_exit()?;
        self.report_drops()?;
        self.report_lost_errors()?;
        self.out.flush()?;
        Ok(())
    }

    /// Pins this run's buffers for a postmortem ([`RunConfig::postmortem`]); a failure is a
    /// warning (the run goes on without).
    fn pin_postmortem(&mut self) -> Result<Option<std::path::PathBuf>, RunError> {
        let Some(script) = self.cfg.postmortem.clone() else {
            return Ok(None);
        };
        if self.session.layout.kernel_ring.is_none() {
            return Ok(None);
        }
        let dir = crate::pin::run_dir(std::process::id());
        let r = crate::pin::create_dir(&dir).and_then(|()| {
            let pinned = self.session.pin(&dir, crate::session::PinScope::Buffers)?;
            crate::pin::Manifest::new(
                crate::pin::PinKind::Run,
                script,
                &self.session.layout,
                &pinned,
            )
            .write(&dir)
        });
        match r {
            Ok(()) => Ok(Some(dir)),
            Err(e) => {
                let _ = crate::pin::remove_dir(&dir);
                writeln!(
                    self.err,
                    "sightline: warning: the ring's buffers are not pinned for --recover: {}",
                    chain(&e)
                )?;
                Ok(None)
            }
        }
    }

    /// The held (`ring`/`fill`) buffer's records, then the kernel ring's, then the late ones
    /// (the flight recorder's report).
    fn print_buffers(&mut self) -> Result<(), RunError> {
        if let Some(h) = self.held.take() {
            let (recs, drops) = h.into_records();
            for rec in recs {
                self.record(rec)?;
            }
            for (cpu, n) in drops {
                self.drop_line(DropKind::Principal, Some(cpu), n)?;
            }
        }
        // bufpolicy=ring kept in the kernel: the probes' records, read from its maps.
        let mut ring: Vec<HeldRecord> = Vec::new();
        self.session.consume_kernel_ring(|r| {
            ring.push((
                r.record,
                r.cpu,
                r.probe_key,
                r.mask,
                r.timestamp,
                r.bytes.to_vec(),
            ))
        })?;
        let last = &self.cfg.ring_last_clauses;
        let layout = &self.session.layout;
        // The flight recorder's clauses and (under fill) END's records come after the probes'.
        let (late, early): (Vec<HeldRecord>, Vec<HeldRecord>) = ring.into_iter().partition(|r| {
            layout.records.get(r.0 as usize).is_some_and(|d| {
                last.contains(&d.clause) || layout.programs[d.program].attach == Attach::End
            })
        });
        let held_late = std::mem::take(&mut self.late);
        for rec in early.into_iter().chain(late).chain(held_late) {
            self.record(rec)?;
        }
        Ok(())
    }

    /// Has [`Consumer::run`] call `f(done, total)` as the probes attach (units of
    /// [`crate::session::Session::attach_steps`]: one per uprobe site of a merged program), e.g. for a progress
    /// bar while a million instruction probes attach.
    pub fn set_attach_progress(&mut self, f: impl FnMut(usize, usize) + 'a) {
        self.attach_progress = Some(Box::new(f));
    }

    /// Event mode: every record, aggregation, drop report, error and the final exit go to `sink`
    /// as typed [`Event`]s (the values `--json` writes, unserialized), and nothing is written
    /// to the output. When `sink` returns false (its receiver is gone) tracing stops as on
    /// SIGINT. The sink may block (a bounded queue that is full): the kernel side never waits,
    /// its ring buffer fills and the records it cannot hold are counted as drops.
    pub fn set_event_sink(&mut self, sink: impl FnMut(Event) -> bool + 'a) {
        self.cfg.json = true;
        self.cfg.quiet = true;
        self.events = Some(Box::new(sink));
    }

    /// Sends `e` to the event sink, or writes it as one JSON line (`--json`).
    fn event(&mut self, e: Event) -> Result<(), RunError> {
        match self.events.as_mut() {
            Some(sink) => {
                if !sink(e) {
                    self.stopped.get_or_insert(StopReason::Interrupted);
                }
            }
            None => {
                let line = serde_json::to_string(&e).expect("events serialize");
                writeln!(self.out, "{line}")?;
            }
        }
        Ok(())
    }

    /// The loaded session (for tests: attachment counts, aggregation reads).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Runs the whole life cycle and returns why it stopped. `target` is released once attached.
    pub fn run(&mut self, mut target: Option<&mut dyn Target>) -> Result<StopReason, RunError> {
        let mut pinned = None;
        let r = self.run_pinned(target.take(), &mut pinned);
        // A failed run removes its postmortem pins too: only a dead one leaves them.
        if let Some(dir) = pinned {
            let _ = crate::pin::remove_dir(&dir);
        }
        r
    }

    /// [`Consumer::run`], with `pinned` set to the postmortem directory while it exists.
    fn run_pinned(
        &mut self,
        mut target: Option<&mut dyn Target>,
        pinned: &mut Option<std::path::PathBuf>,
    ) -> Result<StopReason, RunError> {
        self.session.run_dtrace(Attach::Begin)?;
        self.check_exit_flag()?;
        if self.stopped.is_none() {
            match self.attach_progress.as_mut() {
                Some(f) => self.session.attach_with_progress(&mut **f)?,
                None => self.session.attach()?,
            }
            self.report_refused()?;
            *pinned = self.pin_postmortem()?;
            // BEGIN's output is consumed once every probe is enabled, as in DTrace (the BEGIN
            // probe fires in dtrace_state_go after the enablings): whoever reads it knows that
            // tracing has started.
            self.drain()?;
            if let Some(t) = target.as_deref_mut() {
                t.release()?;
            }
        }
        let switch_ms = self
            .prog
            .options
            .switchrate
            .map(|ns| (ns / 1_000_000).clamp(1, 1000) as i32)
            .unwrap_or(50);
        let mut last_status = Instant::now();
        while self.stopped.is_none() {
            if let Some(c) = self.cfg.control.clone() {
                if c.stop_requested() {
                    self.stopped = Some(StopReason::Interrupted);
                    break;
                }
                if c.take_snapshot() {
                    let ids: Vec<usize> = (0..self.aggs.len()).collect();
                    self.refresh_aggs(&ids)?;
                    self.json_aggregations(&ids)?;
                }
            }
            if sys::interrupted() {
                self.stopped = Some(StopReason::Interrupted);
                // dtrace(1M) prints a newline when the first SIGINT arrives (intr() sets
                // g_newline), before END's output and the aggregations.
                if !self.cfg.json {
                    self.out.write_all(b"\n")?;
                }
                break;
            }
            self.session.wait(switch_ms)?;
            self.drain()?;
            self.check_exit_flag()?;
            if self.stopped.is_some() {
                break;
            }
            if let Some(t) = target.as_deref_mut()
                && t.exited().is_some()
            {
                self.drain()?;
                self.stopped.get_or_insert(StopReason::TargetExited);
            }
            if let Some(pid) = self.cfg.watch_pid
                && !sys::process_alive(pid)
            {
                self.drain()?;
                self.stopped.get_or_insert(StopReason::TargetExited);
            }
            if last_status.elapsed() > Duration::from_secs(1) {
                self.report_drops()?;
                last_status = Instant::now();
            }
        }
        let reason = self.stopped.expect("loop ends stopped");
        self.session.detach();
        if matches!(reason, StopReason::Exit(_)) {
            // Records after exit() are not printed (DTrace stops consuming at exit); their
            // errors were not lost, so they count as seen.
            let errors = self.error_records();
            let seen = &mut self.errors_seen;
            self.session.consume(|r: RawRecord<'_>| {
                if errors.get(r.record as usize).copied().unwrap_or(false) {
                    *seen.entry(r.cpu as usize).or_default() += 1;
                }
                true
            });
        } else {
            self.drain()?;
        }
        if self.session.layout.kernel_ring.is_some_and(|r| r.fill) {
            // bufpolicy=fill: END's records go into the fill buffer (into the room kept for
            // them), so END runs first; the buffers print after, END's records last.
            self.session.run_dtrace(Attach::End)?;
            self.drain()?;
            self.print_buffers()?;
        } else {
            // A ring or fill buffer prints now, each CPU's records oldest to youngest (DTrace's
            // consumer reads one CPU's buffer after the other).
            self.print_buffers()?;
            // The buffers are printed: nothing is left to recover.
            if let Some(dir) = pinned.take() {
                let _ = crate::pin::remove_dir(&dir);
            }
            // END runs after everything is detached; its records print normally.
            self.session.run_dtrace(Attach::End)?;
            self.drain()?;
        }
        if let Some(dir) = pinned.take() {
            let _ = crate::pin::remove_dir(&dir);
        }
        // dtrace(1M) takes the status of the last exit() it reads: an END clause's, which runs
        // last, decides (Oracle's actions/exit/tst.end-exit).
        let reason = self.end_exit.map_or(reason, StopReason::Exit);
        self.stopped = Some(reason);
        self.print_aggregations_at_exit()?;
        self.report_drops()?;
        self.report_lost_errors()?;
        if self.cfg.json {
            self.event(Event::Exit(reason.into()))?;
        }
        self.out.flush()?;
        Ok(reason)
    }

    /// Which record ids are ERROR records.
    fn error_records(&self) -> Vec<bool> {
        self.session
            .layout
            .records
            .iter()
            .map(|d| {
                d.actions
                    .first()
                    .is_some_and(|a| a.action == RecordAction::Error)
            })
            .collect()
    }

    /// Reports the run-time errors whose ERROR record the ring buffer had no room for, per CPU:
    /// the kernel's count ([`Stat::Errors`], which cannot drop) minus the ERROR records read
    /// (issue 22: "control never drops"). Called once at the end, when everything is detached
    /// and drained, so the difference is exact.
    fn report_lost_errors(&mut self) -> Result<(), RunError> {
        let stats = self.session.stats()?;
        for (cpu, s) in stats.iter().enumerate() {
            let seen = self.errors_seen.get(&cpu).copied().unwrap_or(0);
            let lost = s[Stat::Errors as usize].saturating_sub(seen);
            if lost > 0 {
                self.drop_line(DropKind::Errors, Some(cpu as u32), lost)?;
            }
        }
        Ok(())
    }

    /// Stops the run when an `exit()` ran whose record this consumer has not seen: under drops
    /// the ring buffer may have had no room for it (issue 22: `exit()` from a tick was lost in 2
    /// of 17 runs), but the generated code also sets [`Session::exit_status`], which cannot drop.
    /// Called after each drain (every wake-up and poll timeout); the records before the exit
    /// record still print when it arrived after the drain.
    fn check_exit_flag(&mut self) -> Result<(), RunError> {
        if self.stopped.is_some() {
            return Ok(());
        }
        if let Some(status) = self.session.exit_status()? {
            // The exit record may have been output since the last drain: print what precedes it.
            self.drain()?;
            self.stopped.get_or_insert(StopReason::Exit(status));
        } else if !self.session.full_buffers()?.is_empty() {
            // bufpolicy=fill: a CPU's buffer filled; DTrace stops tracing (END still runs).
            self.stopped.get_or_insert(StopReason::BufferFull);
        }
        Ok(())
    }

    /// Consumes every pending record.
    fn drain(&mut self) -> Result<(), RunError> {
        // Keep the target's mappings while it runs, for user symbols printed after it exits.
        self.usyms.refresh();
        let recs = self.take_pending();
        if let Some(h) = self.held.as_mut() {
            for rec in recs {
                let layout = &self.session.layout;
                if layout
                    .records
                    .get(rec.0 as usize)
                    .is_some_and(|d| self.cfg.ring_last_clauses.contains(&d.clause))
                {
                    self.late.push(rec);
                    continue;
                }
                if !h.push(rec) && self.stopped.is_none() {
                    // bufpolicy=fill: tracing stops when the buffer is full (END still runs).
                    self.stopped = Some(StopReason::BufferFull);
                }
            }
            return Ok(());
        }
        // DTrace's ERROR probe fires inside the faulting probe, so its clauses' records come
        // right after the fault's and before the rest of that firing's (an `exit()` there is
        // the first). Here ERROR runs when the consumer reads the fault: its records, found
        // behind those already read, are moved up to follow the fault.
        // An `exit()` of those ERROR clauses stops the clauses that would have run after it on
        // that CPU (DTrace's activity check), so that CPU's records behind the fault go.
        let mut queue: std::collections::VecDeque<HeldRecord> = recs.into();
        while let Some(rec) = queue.pop_front() {
            let cpu = rec.1;
            self.record(rec)?;
            if std::mem::take(&mut self.error_ran) {
                let pending = self.take_pending();
                let layout = &self.session.layout;
                let attach = |r: &HeldRecord| {
                    layout
                        .records
                        .get(r.0 as usize)
                        .map(|d| &layout.programs[d.program].attach)
                };
                let (errors, rest): (Vec<HeldRecord>, Vec<HeldRecord>) = pending
                    .into_iter()
                    .partition(|r| matches!(attach(r), Some(Attach::Error)));
                let exits = errors.iter().any(|r| {
                    layout.records.get(r.0 as usize).is_some_and(|d| {
                        d.actions.iter().enumerate().any(|(i, a)| {
                            a.action == RecordAction::Exit && r.3 & action_bit(i) != 0
                        })
                    })
                });
                if exits {
                    queue.retain(|r| {
                        r.1 != cpu || matches!(attach(r), Some(Attach::End | Attach::Error))
                    });
                }
                for e in errors.into_iter().rev() {
                    queue.push_front(e);
                }
                queue.extend(rest);
            }
        }
        Ok(())
    }

    /// Copies out the ring buffer's pending records, up to and including the first whose
    /// `exit()` ran (the rest stays queued).
    fn take_pending(&mut self) -> Vec<HeldRecord> {
        let mut recs: Vec<HeldRecord> = Vec::new();
        // Copy out first: printing needs &mut self (aggregation reads happen while printing).
        let exits: Vec<u64> = self
            .session
            .layout
            .records
            .iter()
            .map(|d| {
                d.actions
                    .iter()
                    .enumerate()
                    .filter(|(_, a)| a.action == RecordAction::Exit)
                    .fold(0u64, |m, (i, _)| m | action_bit(i))
            })
            .collect();
        self.session.consume(|r: RawRecord<'_>| {
            recs.push((
                r.record,
                r.cpu,
                r.probe_key,
                r.mask,
                r.timestamp,
                r.bytes.to_vec(),
            ));
            // Stop consuming after a record whose exit() ran.
            exits.get(r.record as usize).is_none_or(|m| r.mask & m == 0)
        });
        recs
    }

    /// Warns about matched probes left unattached because the kernel refused their uprobe site
    /// (a warning, printed with `-q` too: the probes the user asked for do not all fire).
    fn report_refused(&mut self) -> Result<(), RunError> {
        if let Some(w) = refused_warning(self.session.refused_probes()) {
            writeln!(self.err, "{w}")?;
        }
        Ok(())
    }

    /// `setopt(name, value)` as the consumer reads it (Oracle's `dtrace_setopt` at run time):
    /// the options the consumer applies while printing change from here on; options fixed when
    /// the program loaded are refused. `Err` holds DTrace's reason.
    fn setopt(&mut self, name: &str, value: Option<&str>) -> Result<(), &'static str> {
        const INVALID: &str = "Invalid value for specified option";
        let flag = |v: Option<&str>| match v {
            None | Some("1" | "yes" | "set" | "true" | "on") => Ok(true),
            Some("0" | "no" | "unset" | "false" | "off") => Ok(false),
            Some(_) => Err(INVALID),
        };
        let count = |v: Option<&str>| {
            v.and_then(probe_sema::analyze::parse_size)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(INVALID)
        };
        match name {
            "quiet" => self.cfg.quiet = flag(value)? || self.events.is_some(),
            "aggsortkey" => self.sort.key = flag(value)?,
            "aggsortrev" => self.sort.rev = flag(value)?,
            "aggzoom" => self.sort.zoom = flag(value)?,
            "agghist" => self.sort.hist = flag(value)?,
            "aggpack" => self.sort.pack = flag(value)?,
            "aggsortpos" => self.sort.pos = count(value)?,
            "aggsortkeypos" => self.sort.keypos = count(value)?,
            "printsize" => {
                // Oracle's dt_opt_printsize: out of 1..=65536 means the default; a multiple of 8.
                let default = u64::from(probe_format::print::DEFAULT_PRINTSIZE);
                let v = match (value, value.and_then(probe_sema::analyze::parse_size)) {
                    (None, _) => default,
                    (Some(_), Some(n @ 1..=65536)) => n.div_ceil(8) * 8,
                    (Some(_), Some(_)) => default,
                    (Some(_), None) => return Err(INVALID),
                };
                self.printsize = v as usize;
            }
            // Rates the consumer polls at: checked, kept as loaded.
            "switchrate" | "aggrate" | "statusrate" | "cleanrate" => {
                value
                    .and_then(probe_sema::analyze::parse_rate)
                    .ok_or(INVALID)?;
            }
            "bufsize" | "aggsize" | "dynvarsize" | "specsize" | "strsize" | "nspec"
            | "stackframes" | "ustackframes" | "bufpolicy" | "bufresize" | "dynvarpolicy"
            | "destructive" | "flowindent" | "rawbytes" | "defaultargs" | "argref" | "zdefs"
            | "cpu" | "jstackframes" | "jstackstrsize" | "amin" | "encoding" | "stackindent"
            | "temporal" | "grabanon" | "nolibs" | "verbose" | "empty" => {
                return Err("Operation illegal when tracing is active");
            }
            _ => return Err("Invalid option name"),
        }
        Ok(())
    }

    fn probe_of(&self, rec: usize, key: u64) -> ProbeRef {
        let d = &self.session.layout.records[rec];
        let prog = &self.session.layout.programs[d.program];
        let name = match prog.attach {
            Attach::SysEnter | Attach::SysExit => {
                let func = catalog::syscall_name(key as u32).unwrap_or("unknown");
                let n = if prog.attach == Attach::SysEnter {
                    "entry"
                } else {
                    "return"
                };
                format!("syscall::{func}:{n}")
            }
            // The site's attach cookie: its probe id.
            Attach::UprobeMulti { .. } => self
                .session
                .layout
                .probes
                .get(key as usize)
                .map(|p| p.name.clone())
                .unwrap_or_default(),
            _ => {
                // The first probe of this clause in this program.
                let clause = &self.prog.clauses[d.clause];
                let pname = prog
                    .probes
                    .iter()
                    .map(|&i| self.session.layout.probes[i].name.clone())
                    .find(|n| clause.probes.iter().any(|p| p.full_name() == *n));
                pname.unwrap_or_default()
            }
        };
        let mut parts = name.splitn(4, ':');
        let provider = parts.next().unwrap_or("").to_string();
        let module = parts.next().unwrap_or("").to_string();
        let function = parts.next().unwrap_or("").to_string();
        let pname = parts.next().unwrap_or("").to_string();
        ProbeRef {
            id: catalog::user_probe_id_of(&name)
                .unwrap_or_else(|| catalog::probe_id(&provider, &module, &function, &pname)),
            provider,
            module,
            function,
            name: pname,
        }
    }

    fn decode(&mut self, f: &Field, bytes: &[u8]) -> Value {
        let o = f.offset as usize;
        let u64at = |o: usize| {
            bytes
                .get(o..o + 8)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        match &f.kind {
            FieldKind::Int { bytes: w, signed } => Value::Int(Int {
                bits: u64at(o),
                bytes: *w,
                signed: *signed,
            }),
            FieldKind::Str { len } => {
                let s = bytes.get(o..o + *len as usize).unwrap_or(&[]);
                let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
                Value::Str(String::from_utf8_lossy(&s[..end]).into_owned())
            }
            FieldKind::Bytes { len } => {
                Value::Bytes(bytes.get(o..o + *len as usize).unwrap_or(&[]).to_vec())
            }
            FieldKind::Stack { user, frames } => {
                let ks = self.ksyms.get_or_insert_with(Kallsyms::load);
                let mut st = Stack {
                    user: *user,
                    frames: Vec::new(),
                };
                // A user stack: the process id it was taken in, then its frames.
                let (pid, first) = if *user {
                    (u64at(o) as u32, o + 8)
                } else {
                    (0, o)
                };
                for i in 0..*frames as usize {
                    let a = u64at(first + 8 * i);
                    if a == 0 {
                        break;
                    }
                    st.frames.push(if *user {
                        self.usyms.resolve(pid, a)
                    } else {
                        ks.resolve(a)
                    });
                }
                Value::Stack(st)
            }
            FieldKind::Sym(SymKind::Usym | SymKind::Umod | SymKind::Uaddr) => {
                // The address, then the process id it was taken in.
                Value::Sym(self.usyms.resolve(u64at(o + 8) as u32, u64at(o)))
            }
            FieldKind::Sym(_) => {
                let a = u64at(o);
                let ks = self.ksyms.get_or_insert_with(Kallsyms::load);
                Value::Sym(ks.resolve(a))
            }
        }
    }

    /// The (id, token) of a record's executed `speculate()`, if it has one.
    fn speculated(&self, id: u32, mask: u64, bytes: &[u8]) -> Option<(u64, u64)> {
        let desc = self.session.layout.records.get(id as usize)?;
        let (i, a) = desc
            .actions
            .iter()
            .enumerate()
            .find(|(_, a)| a.action == RecordAction::Speculate)?;
        if mask & action_bit(i) == 0 {
            return None;
        }
        let word = |f: &Field| {
            let o = f.offset as usize;
            bytes
                .get(o..o + 8)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        Some((word(&a.fields[0]), word(&a.fields[1])))
    }

    /// A record from the ring buffer: held in its speculation's buffer when its clause
    /// speculated (DTrace guide, "Speculative Tracing"), else printed now.
    fn record(&mut self, rec: HeldRecord) -> Result<(), RunError> {
        // (record id, CPU, probe key, actions mask, timestamp, bytes): see `HeldRecord`.
        // An ERROR record counts as read even when its speculation is discarded.
        if self
            .session
            .layout
            .records
            .get(rec.0 as usize)
            .and_then(|d| d.actions.first())
            .is_some_and(|a| a.action == RecordAction::Error)
        {
            *self.errors_seen.entry(rec.1 as usize).or_default() += 1;
        }
        match self.speculated(rec.0, rec.3, &rec.5) {
            None => self.record_now(&rec),
            Some((spec, token)) => {
                self.specs.hold(spec, token, rec);
                Ok(())
            }
        }
    }

    /// `commit()` (print the held records, in order) or `discard()` of speculation `spec` with
    /// `token`; token 0 is a commit that silently failed.
    fn retire(&mut self, spec: u64, token: u64, commit: bool) -> Result<(), RunError> {
        let held = self.specs.retire(spec, token);
        if commit {
            for rec in &held {
                self.record_now(rec)?;
            }
        }
        Ok(())
    }

    /// Prints (or, for `exit()`, `printa()`, ..., acts on) one record now.
    fn record_now(&mut self, rec: &HeldRecord) -> Result<(), RunError> {
        let &(id, cpu, key, mask, ts, ref bytes) = rec;
        let Some(desc) = self.session.layout.records.get(id as usize).cloned() else {
            return Ok(());
        };
        let probe = self.probe_of(id as usize, key);
        self.cur_clause = Some(desc.clause);
        // A run-time error: report it, fire ERROR clauses.
        if let Some(a) = desc.actions.first()
            && a.action == RecordAction::Error
        {
            let fault = self.decode(&a.fields[0], bytes);
            let addr = self.decode(&a.fields[1], bytes);
            let (Value::Int(fault), Value::Int(addr)) = (fault, addr) else {
                return Ok(());
            };
            let what =
                Fault::from_u64(fault.bits).map_or("fault".to_string(), |f| f.describe(addr.bits));
            let msg = format!(
                "error on enabled probe ID {} ({}:{}:{}:{}): {}",
                desc.clause + 1,
                probe.provider,
                probe.module,
                probe.function,
                probe.name,
                what
            );
            if self.cfg.json {
                self.event(Event::Error(ProbeError {
                    probe: probe.clone(),
                    message: what.clone(),
                }))?;
            } else {
                writeln!(self.err, "sightline: {msg}")?;
            }
            if self.session.has_error_clauses() {
                // DTrace's ERROR arguments: arg1 the faulting probe's id, arg2 the clause (its
                // position in the program), arg4 the DTRACEFLT_* number, arg5 the address.
                let code = Fault::from_u64(fault.bits).map_or(0, Fault::dtrace_code);
                self.session.run_error([
                    0,
                    u64::from(probe.id),
                    desc.clause as u64,
                    0,
                    code,
                    addr.bits,
                ])?;
                self.error_ran = true;
            }
            return Ok(());
        }
        let mut text = String::new();
        let mut items = Vec::new();
        if let Some(flow) = self.flow.as_mut().filter(|_| !self.cfg.json) {
            // dtrace(1M)'s `chew` prints the flow heading and line start even under `quiet`;
            // only the newline ending the record follows `quiet`.
            if !self.header_done {
                text.push_str(if self.cfg.testing {
                    probe_format::output::FLOW_HEADER_TESTING
                } else {
                    probe_format::output::FLOW_HEADER
                });
                self.header_done = true;
            }
            let parts = [
                probe.provider.as_str(),
                &probe.module,
                &probe.function,
                &probe.name,
            ];
            text.push_str(&if self.cfg.testing {
                flow.prefix_testing(cpu, desc.clause as u32, parts)
            } else {
                flow.prefix(cpu, desc.clause as u32, parts)
            });
        } else if !self.cfg.quiet && !self.cfg.json {
            if !self.header_done {
                text.push_str(if self.cfg.testing {
                    probe_format::output::TRACE_HEADER_TESTING
                } else {
                    probe_format::output::TRACE_HEADER
                });
                self.header_done = true;
            }
            text.push_str(&if self.cfg.testing {
                probe_format::output::probe_prefix_testing(&probe.function, &probe.name)
            } else {
                probe_format::output::probe_prefix(cpu, probe.id, &probe.function, &probe.name)
            });
        }
        for (i, a) in desc.actions.iter().enumerate() {
            if mask & action_bit(i) == 0 {
                continue;
            }
            match &a.action {
                RecordAction::Trace | RecordAction::Stack => {
                    // `trace(sym(x))` prints the symbol, `trace(mod(x))` the module, as keys.
                    let v = agg_key(&a.fields[0].kind, self.decode(&a.fields[0], bytes));
                    let raw = rawbytes(self.prog)
                        .then(|| raw_record_bytes(&v, self.prog.options.strsize as usize))
                        .flatten();
                    match raw {
                        Some(b) => text.push_str(&probe_format::output::format_bytes_dump(&b)),
                        None => {
                            text.push_str(&probe_format::output::format_trace(&v, self.cfg.quiet))
                        }
                    }
                    items.push(RecordItem::Trace(v));
                }
                RecordAction::Printf { format } => {
                    let args: Vec<Value> = a.fields.iter().map(|f| self.decode(f, bytes)).collect();
                    let s = match probe_format::printf::parse(format) {
                        Ok(pieces) => probe_format::printf::format(&pieces, &args)
                            .unwrap_or_else(|e| format!("<{e}>")),
                        Err(e) => format!("<{e}>"),
                    };
                    text.push_str(&s);
                    items.push(RecordItem::Printf {
                        format: format.clone(),
                        text: s,
                        args,
                    });
                }
                RecordAction::System { format } => {
                    let args: Vec<Value> = a.fields.iter().map(|f| self.decode(f, bytes)).collect();
                    let cmd = match probe_format::printf::parse(format) {
                        Ok(pieces) => probe_format::printf::format(&pieces, &args).ok(),
                        Err(_) => None,
                    };
                    // DTrace's consumer runs the command and waits for it; its output goes
                    // where the trace output goes, in order.
                    let output = match cmd.as_deref().map(run_system) {
                        Some(Ok(o)) => o,
                        Some(Err(e)) => {
                            writeln!(self.err, "sightline: system(): {e}")?;
                            String::new()
                        }
                        None => String::new(),
                    };
                    text.push_str(&output);
                    items.push(RecordItem::Printf {
                        format: format.clone(),
                        text: output,
                        args,
                    });
                }
                RecordAction::Stop => {
                    if let Value::Int(i) = self.decode(&a.fields[0], bytes) {
                        self.stopped_pids.insert(i.as_i64() as u32);
                    }
                }
                RecordAction::Print { ty } => {
                    let address = match self.decode(&a.fields[0], bytes) {
                        Value::Int(i) => i.bits,
                        _ => 0,
                    };
                    let data = match self.decode(&a.fields[1], bytes) {
                        Value::Bytes(b) => b,
                        _ => Vec::new(),
                    };
                    let shown = &data[..data.len().min(self.printsize)];
                    let s = probe_format::print::format_print(address, ty, shown);
                    text.push_str(&s);
                    items.push(RecordItem::Print {
                        type_name: ty.name.clone(),
                        address,
                        text: s,
                    });
                }
                RecordAction::Setopt => {
                    let text = |v: Value| match v {
                        Value::Str(s) => s,
                        _ => String::new(),
                    };
                    let name = text(self.decode(&a.fields[0], bytes));
                    let given =
                        matches!(self.decode(&a.fields[2], bytes), Value::Int(i) if i.bits != 0);
                    let value = given.then(|| text(self.decode(&a.fields[1], bytes)));
                    if let Err(why) = self.setopt(&name, value.as_deref()) {
                        let msg = format!(
                            "error in clause {} for probe ID {} ({}:{}:{}:{}): couldn't set option \"{name}\" to \"{}\": {why}",
                            desc.clause + 1,
                            probe.id,
                            probe.provider,
                            probe.module,
                            probe.function,
                            probe.name,
                            value.as_deref().unwrap_or("1"),
                        );
                        if self.cfg.json {
                            self.event(Event::Error(ProbeError {
                                probe: probe.clone(),
                                message: msg,
                            }))?;
                        } else {
                            writeln!(self.err, "sightline: {msg}")?;
                        }
                    }
                }
                RecordAction::Exit => {
                    let v = self.decode(&a.fields[0], bytes);
                    let status = if let Value::Int(i) = v {
                        i.as_i64() as i32
                    } else {
                        0
                    };
                    items.push(RecordItem::Exit(status));
                    self.stopped.get_or_insert(StopReason::Exit(status));
                    if matches!(
                        self.session.layout.programs[desc.program].attach,
                        Attach::End
                    ) {
                        self.end_exit = Some(status);
                    }
                }
                RecordAction::Printa { format, aggs } => {
                    for &ag in aggs {
                        self.refresh_agg(ag)?;
                        self.printed.insert(ag);
                    }
                    if self.cfg.json {
                        // The record's data so far, then one line per aggregation.
                        self.emit(&mut text, &mut items, cpu, &probe, ts)?;
                        self.json_aggregations(aggs)?;
                    } else {
                        // printa's text joins the record's line (dt_consume.c prints it in place).
                        let list: Vec<&Aggregation> = aggs.iter().map(|&a| &self.aggs[a]).collect();
                        let pieces = match format {
                            None => Ok(None),
                            Some(f) => probe_format::printf::parse(f).map(Some),
                        };
                        let s = match pieces {
                            Ok(p) => {
                                probe_format::output::printa_joined(&list, p.as_deref(), &self.sort)
                                    .unwrap_or_else(|e| format!("<{e}>"))
                            }
                            Err(e) => format!("<{e}>"),
                        };
                        text.push_str(&s);
                    }
                }
                RecordAction::Clear { agg } => self.session.clear_agg(*agg, false)?,
                RecordAction::Trunc { agg, keep } => match keep {
                    None | Some(0) => self.session.clear_agg(*agg, true)?,
                    Some(n) => {
                        self.refresh_agg(*agg)?;
                        let mut model = self.aggs[*agg].clone();
                        let before: Vec<Vec<Value>> =
                            model.entries.iter().map(|e| e.keys.clone()).collect();
                        model.trunc(Some(*n));
                        let kept: Vec<Vec<Value>> =
                            model.entries.iter().map(|e| e.keys.clone()).collect();
                        let raw = self.session.read_agg(*agg)?;
                        for (k, r) in before.iter().zip(raw.iter()) {
                            if !kept.contains(k) {
                                self.session.delete_agg_key(*agg, &r.key)?;
                            }
                        }
                    }
                },
                RecordAction::Normalize { agg, factor } => {
                    self.normals[*agg] = factor.map_or(1, |f| f.max(1) as u64);
                }
                RecordAction::Error | RecordAction::Speculate => {}
                RecordAction::Commit | RecordAction::Discard => {
                    let (Value::Int(spec), Value::Int(token)) = (
                        self.decode(&a.fields[0], bytes),
                        self.decode(&a.fields[1], bytes),
                    ) else {
                        continue;
                    };
                    // What the committing clause printed so far goes first.
                    self.emit(&mut text, &mut items, cpu, &probe, ts)?;
                    self.retire(spec.bits, token.bits, a.action == RecordAction::Commit)?;
                }
            }
        }
        self.emit(&mut text, &mut items, cpu, &probe, ts)?;
        Ok(())
    }

    /// Writes the text (or JSON record) gathered for a record.
    fn emit(
        &mut self,
        text: &mut String,
        items: &mut Vec<RecordItem>,
        cpu: u32,
        probe: &ProbeRef,
        ts: u64,
    ) -> Result<(), RunError> {
        if self.cfg.json {
            if !items.is_empty() {
                let data = std::mem::take(items);
                self.event(Event::Record(Record {
                    cpu,
                    probe: probe.clone(),
                    clause: self.cur_clause,
                    timestamp_ns: Some(ts),
                    data,
                }))?;
            }
            return Ok(());
        }
        if !text.is_empty() {
            if !self.cfg.quiet {
                text.push_str(probe_format::output::end_of_record(false));
            }
            self.out.write_all(text.as_bytes())?;
            text.clear();
        }
        items.clear();
        Ok(())
    }

    /// Reads aggregation `id` from the kernel into the printing model.
    fn refresh_agg(&mut self, id: usize) -> Result<(), RunError> {
        let raw = self.session.read_agg(id)?;
        self.set_agg(id, raw);
        Ok(())
    }

    /// Reads aggregations `ids` from the kernel into the printing model, each shared map once.
    fn refresh_aggs(&mut self, ids: &[usize]) -> Result<(), RunError> {
        let raw = self.session.read_aggs(ids)?;
        for (&id, raw) in ids.iter().zip(raw) {
            self.set_agg(id, raw);
        }
        Ok(())
    }

    /// Puts the kernel's entries of aggregation `id` into the printing model.
    fn set_agg(&mut self, id: usize, raw: Vec<crate::session::AggEntry>) {
        let desc = self.session.layout.aggs[id].clone();
        let func = desc.func;
        let mut entries = Vec::new();
        for e in raw {
            let keys: Vec<Value> = desc
                .keys
                .iter()
                .map(|f| agg_key(&f.kind, self.decode(f, &e.key)))
                .collect();
            let mut data = AggData::zero(&func);
            for w in &e.words {
                if let Ok(d) = AggData::from_words(&func, w) {
                    data.merge(&d);
                }
            }
            entries.push(FEntry { keys, data });
        }
        let agg = &mut self.aggs[id];
        agg.entries = Aggregation::merge_equal_keys(entries);
        agg.normal = self.normals[id];
    }

    fn print_aggregations_at_exit(&mut self) -> Result<(), RunError> {
        // DTrace ends its output with a newline, then the aggregations printa() did not print.
        let ids: Vec<usize> = (0..self.aggs.len())
            .filter(|i| !self.printed.contains(i))
            .collect();
        self.refresh_aggs(&ids)?;
        if self.cfg.json {
            self.json_aggregations(&ids)?;
        } else {
            let list: Vec<&Aggregation> = ids.iter().map(|&i| &self.aggs[i]).collect();
            let s = probe_format::output::print_at_exit(&list, &self.sort);
            self.out.write_all(s.as_bytes())?;
        }
        Ok(())
    }

    /// Sends aggregations `ids` as events (JSON Lines: one line each).
    fn json_aggregations(&mut self, ids: &[usize]) -> Result<(), RunError> {
        for &i in ids {
            let snap = AggregationSnapshot::of(&self.aggs[i], &self.sort);
            self.event(Event::Aggregation(snap))?;
        }
        Ok(())
    }

    /// Reports drops counted since the last report, DTrace's way.
    fn report_drops(&mut self) -> Result<(), RunError> {
        let stats = self.session.stats()?;
        let mut dynamic = 0u64;
        for (cpu, s) in stats.iter().enumerate() {
            for (stat, kind) in [
                (Stat::RecordDrops, Some(DropKind::Principal)),
                (Stat::AggDrops, Some(DropKind::Aggregation)),
                (Stat::DynvarDrops, None),
            ] {
                let now = s[stat as usize];
                let prev = self.reported.insert((stat as u32, cpu), now).unwrap_or(0);
                let n = now.saturating_sub(prev);
                if n == 0 {
                    continue;
                }
                match kind {
                    Some(k) => self.drop_line(k, Some(cpu as u32), n)?,
                    None => dynamic += n,
                }
            }
        }
        if dynamic > 0 {
            self.drop_line(DropKind::Dynamic, None, dynamic)?;
        }
        let unavail: u64 = stats.iter().map(|s| s[Stat::SpecUnavail as usize]).sum();
        let prev = self
            .reported
            .insert((Stat::SpecUnavail as u32, usize::MAX), unavail)
            .unwrap_or(0);
        if unavail > prev {
            self.drop_line(DropKind::SpecUnavailable, None, unavail - prev)?;
        }
        let n = self.specs.take_drops();
        if n > 0 {
            self.drop_line(DropKind::Speculative, None, n)?;
        }
        Ok(())
    }

    fn drop_line(&mut self, kind: DropKind, cpu: Option<u32>, n: u64) -> Result<(), RunError> {
        if self.cfg.json {
            self.event(Event::Drops(Drops::new(kind, cpu, n)))?;
        } else {
            writeln!(
                self.err,
                "sightline: {}",
                probe_format::json::drop_message(kind, cpu, n)
            )?;
        }
        Ok(())
    }
}

/// What an aggregation key field (or a `trace()` value) stands for: `func()`/`sym()`/`ufunc()`/
/// `usym()` their symbol (offset 0), `mod()`/`umod()` their module (DTrace merges the kernel's
/// per-address keys in user space, libdtrace `dt_aggregate.c`); other values (`uaddr()` too, which
/// prints ``object`symbol+0xoff``) as decoded. Keys that become equal are merged by
/// [`Aggregation::merge_equal_keys`].
fn agg_key(kind: &FieldKind, v: Value) -> Value {
    match (kind, v) {
        (FieldKind::Sym(SymKind::Sym | SymKind::Usym), Value::Sym(s)) => {
            Value::Sym(s.function_key())
        }
        (FieldKind::Sym(SymKind::Mod | SymKind::Umod), Value::Sym(s)) => Value::Sym(s.module_key()),
        (_, v) => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(cpu: u32, n: u8, len: usize) -> HeldRecord {
        (0, cpu, 0, 0, u64::from(n), vec![n; len])
    }

    #[test]
    fn a_ring_keeps_the_newest_records_and_prints_them_cpu_by_cpu() {
        // Room for three 68-byte records (36 bytes of data + the 32-byte header).
        let mut h = HeldBuffer::new(BufPolicy::Ring, 3 * 68);
        for (i, cpu) in [1u32, 0, 1, 0, 1].into_iter().enumerate() {
            assert!(h.push(rec(cpu, i as u8, 36)));
        }
        let (recs, drops) = h.into_records();
        let kept: Vec<(u32, u64)> = recs.iter().map(|r| (r.1, r.4)).collect();
        // Records 0 and 1 were evicted; CPU 0's record comes first, CPU 1's keep their order.
        assert_eq!(kept, vec![(0, 3), (1, 2), (1, 4)]);
        assert!(drops.is_empty());
    }

    #[test]
    fn a_fill_buffer_keeps_the_first_records_and_counts_the_rest_as_drops() {
        let mut h = HeldBuffer::new(BufPolicy::Fill, 2 * 68 + 10);
        assert!(h.push(rec(0, 0, 36)));
        assert!(h.push(rec(2, 1, 36)));
        assert!(!h.push(rec(2, 2, 36)), "full");
        assert!(!h.push(rec(0, 3, 36)), "still full");
        // A smaller record still fits in what is left? No: 10 bytes are less than a header.
        assert!(!h.push(rec(2, 4, 0)));
        let (recs, drops) = h.into_records();
        assert_eq!(recs.iter().map(|r| r.4).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(drops.into_iter().collect::<Vec<_>>(), vec![(0, 1), (2, 2)]);
    }

    #[test]
    fn refused_sites_are_counted_and_the_first_named() {
        assert_eq!(refused_warning(&[]), None);
        let one = refused_warning(&["pid7:a.out:main:1c".into()]).unwrap();
        assert!(
            one.starts_with("sightline: warning: 1 matched probe is not attached: the kernel refused its uprobe site (ENOTSUPP"),
            "{one}"
        );
        assert!(one.ends_with("): pid7:a.out:main:1c"), "{one}");
        let three = refused_warning(&[
            "pid7:a.out:main:1c".into(),
            "pid7:a.out:main:2a".into(),
            "pid7:a.out:f:3".into(),
        ])
        .unwrap();
        assert!(
            three.contains(
                "3 matched probes are not attached: the kernel refused their uprobe sites"
            ),
            "{three}"
        );
        assert!(
            three.ends_with("(the first: pid7:a.out:main:1c)"),
            "{three}"
        );
    }
}
