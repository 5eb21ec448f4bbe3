//! A GDB remote serial protocol server on a replay (`sightline replay --gdbserver ADDR`), as
//! `rr replay -s` serves one: gdb connects with `target remote ADDR` and debugs the recording's
//! first process while the replay goes on deterministically underneath.
//!
//! [`GdbServer`] is a [`crate::debugger::Debugger`]: the replayer calls it at the stops
//! of the replayed threads; it takes the stops that are its own and talks with gdb there. The
//! protocol is GDB's (GDB manual, appendix E "GDB Remote Serial Protocol"): packets and
//! acknowledgements ([`packet`]), registers and the target description ([`regs`]).
//!
//! How it coexists with replay's own use of the tracee (see also docs/replay-gdb.md):
//!
//! - Software breakpoints (`Z0`) are kept in a table and written as `int3` only while the first
//!   process runs: taken out at each of its stops before replay handles it (replay reads and
//!   patches the original code, forks copy it), put back when it is resumed, never inside replay's
//!   own patch at a forced sync point ([`crate::debugger::StopView::patches`]). A child process
//!   that inherited one (forked while they were in) has it removed when it reaches it.
//! - Hardware breakpoints and watchpoints (`Z1`–`Z4`) use debug registers DR1–DR3; DR0 is
//!   replay's.
//! - Memory reads (`m`) show the original bytes under replay's patches.
//! - Register and memory writes (`G`, `P`, `M`) are applied, with a warning: the replay will
//!   diverge from the recording (reported as any divergence).
//! - Signals: gdb is stopped at each signal the recording delivered, and the signal is delivered
//!   as recorded whatever gdb asks (`C` with another signal is refused with a warning).

pub mod packet;
pub mod regs;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Read, Write};
use std::net::TcpStream;

use replay_ptrace::{RemotePtr, Resume, Stopped, WaitKind};

use crate::Error;
use crate::debugger::{Debugger, StopView, Verdict};
use packet::{Conn, Incoming, hex, num, unhex};

/// `si_code` of a kernel-generated `SIGTRAP` (an `int3`).
const SI_KERNEL: i32 = 0x80;
/// `si_code` of a single-step trap and of a breakpoint trap (`TRAP_TRACE`, `TRAP_BRKPT`).
const TRAP_BRKPT: i32 = 1;
const TRAP_TRACE: i32 = 2;
/// DR6 bits: DR1–DR3 matched, single step.
const DR6_OURS: u64 = 0b1110;
const DR6_STEP: u64 = 1 << 14;
/// The largest `m` or `vFile:pread` reply's data, bytes (hex doubles `m`'s).
const MAX_READ: usize = packet::MAX_PACKET / 2 - 16;

/// What a debug register slot (DR1–DR3) watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// `Z1`: execution.
    Exec,
    /// `Z2`: writes.
    Write,
    /// `Z3`: reads (x86 has none: read or write, reported as `rwatch`).
    Read,
    /// `Z4`: reads or writes.
    Access,
}

/// One debug register's setting: address, length (1, 2, 4 or 8), what, and the gdb request
/// (type, address, length) it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    addr: u64,
    len: u64,
    what: Watch,
    req: (u8, u64, u64),
}

/// Why the thread is stopped, as a stop reply says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    /// A signal (Linux number; SIGTRAP for a step or the start).
    Signal(i32),
    /// A software breakpoint.
    SwBreak,
    /// A hardware breakpoint.
    HwBreak,
    /// A watchpoint hit at this data address.
    Watch(Watch, u64),
    /// The start of the recording, reached backwards.
    Begin,
}

/// A point of the replay: the recording's events replayed, the thread, and its registers there
/// (the replay is deterministic, so a second run meets the same state at the same point).
#[derive(Debug, Clone, Copy)]
struct Point {
    events: u64,
    rec_tid: i32,
    regs: replay_ptrace::Regs,
}

impl Point {
    /// True when thread `rec_tid` with `regs`, `events` replayed, is at this point (general
    /// registers, rip and fs_base; eflags differs in RF after a breakpoint).
    fn is(&self, events: u64, rec_tid: i32, r: &replay_ptrace::Regs) -> bool {
        let key = |r: &replay_ptrace::Regs| {
            [
                r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8, r.r9, r.r10, r.r11,
                r.r12, r.r13, r.r14, r.r15, r.rip, r.fs_base,
            ]
        };
        self.events == events && self.rec_tid == rec_tid && key(&self.regs) == key(r)
    }
}

/// Reverse-continue in progress: the replay runs again from the start without stopping for gdb.
#[derive(Debug, Clone)]
enum Reverse {
    /// First run: count the breakpoint and watchpoint stops before `now`.
    Count { now: Box<Point>, hits: u64 },
    /// Second run: stop at stop number `target` (0: at the start of the recording).
    Goto { target: u64, seen: u64 },
}

/// The session's answer to gdb's resume request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Go {
    Continue,
    Step,
}

/// The GDB remote-protocol server on one replay.
pub struct GdbServer {
    conn: Conn<TcpStream>,
    /// The recorded executable (`qXfer:exec-file:read`).
    exe: String,
    /// Software breakpoints: address → the byte under the `int3` while it is in.
    breakpoints: BTreeMap<u64, Option<u8>>,
    /// DR1–DR3.
    slots: [Option<Slot>; 3],
    /// Bumped at each change of `slots`; per real tid, the version it carries.
    slots_version: u64,
    applied: HashMap<i32, u64>,
    /// Real tids single-stepping for gdb.
    stepping: HashSet<i32>,
    /// The first process reached its first exec stop and gdb was told.
    started: bool,
    /// gdb detached or disconnected: the replay runs on undisturbed.
    detached: bool,
    /// gdb waits for a stop reply (it resumed the program).
    running: bool,
    /// Thread selected by `Hg` (recorded tid; `None`: the stopped one).
    g_thread: Option<i32>,
    /// Files opened with `vFile:open`.
    files: HashMap<u64, std::fs::File>,
    next_fd: u64,
    /// Signals gdb passes without stopping (`QPassSignals`, gdb's numbers).
    pass: HashSet<u8>,
    /// The memory/register write warning was given.
    warned_write: bool,
    /// The recorded signal about to be delivered at the current stop (Linux number; 0: none).
    delivering: i32,
    /// `monitor go-live` was asked for ([`Error::GoLive`] once answered).
    going_live: bool,
    /// A reverse-continue in progress.
    reverse: Option<Reverse>,
    /// A breakpoint the server planted for [`Reverse::Count`] (not gdb's).
    internal: Option<u64>,
    /// A breakpoint left out while a thread steps over it in a silent run: (real tid, address).
    step_over: Option<(i32, u64)>,
    /// The first process's recorded pid (for thread ids).
    pid: i32,
    /// Where messages to the user go (Sightline's stderr).
    log: Box<dyn Write>,
}

impl std::fmt::Debug for GdbServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GdbServer")
            .field("breakpoints", &self.breakpoints)
            .field("slots", &self.slots)
            .field("started", &self.started)
            .field("detached", &self.detached)
            .finish_non_exhaustive()
    }
}

/// GDB's signal number for Linux signal `sig` (gdb/include/gdb/signals.def; the remote protocol
/// uses GDB's numbering).
pub fn gdb_signal(sig: i32) -> u8 {
    match sig {
        1..=6 | 8 | 9 | 11 | 13..=15 | 24..=28 => sig as u8,
        7 => 10,                     // BUS
        10 => 30,                    // USR1
        12 => 31,                    // USR2
        16 => 143,                   // STKFLT: no GDB signal; "unknown"
        17 => 20,                    // CHLD
        18 => 19,                    // CONT
        19 => 17,                    // STOP
        20 => 18,                    // TSTP
        21 => 21,                    // TTIN
        22 => 22,                    // TTOU
        23 => 16,                    // URG
        29 => 23,                    // IO
        30 => 32,                    // PWR
        31 => 12,                    // SYS
        32 => 77,                    // REALTIME_32
        33 => 45,                    // REALTIME_33
        34..=63 => (sig + 12) as u8, // REALTIME_34.. = 46..
        64 => 78,                    // REALTIME_64
        _ => 143,
    }
}

impl GdbServer {
    /// A server on an accepted connection from gdb, for a recording of executable `exe`
    /// (messages to the user go to `log`).
    pub fn new(stream: TcpStream, exe: String, log: Box<dyn Write>) -> GdbServer {
        let _ = stream.set_nodelay(true);
        GdbServer {
            conn: Conn::new(stream),
            exe,
            breakpoints: BTreeMap::new(),
            slots: [None; 3],
            slots_version: 0,
            applied: HashMap::new(),
            stepping: HashSet::new(),
            started: false,
            detached: false,
            running: false,
            g_thread: None,
            files: HashMap::new(),
            next_fd: 3,
            pass: HashSet::new(),
            warned_write: false,
            going_live: false,
            delivering: 0,
            reverse: None,
            internal: None,
            step_over: None,
            pid: 0,
            log,
        }
    }

    fn io(e: io::Error) -> Error {
        Error::Debugger(format!("connection to gdb: {e}"))
    }

    fn send(&mut self, data: &str) -> Result<(), Error> {
        self.send_bytes(data.as_bytes())
    }

    fn send_bytes(&mut self, data: &[u8]) -> Result<(), Error> {
        self.conn.send(data).map_err(Self::io)
    }

    /// Takes every `int3` of ours out of the first process's memory.
    fn remove_breakpoints(&mut self, t: &Stopped) {
        for (addr, orig) in self.breakpoints.iter_mut() {
            if let Some(b) = orig.take()
                && t.read_bytes(RemotePtr::new(*addr), 1)
                    .is_ok_and(|c| c[0] == 0xcc)
            {
                let _ = t.write_bytes(RemotePtr::new(*addr), &[b]);
            }
        }
    }

    /// Puts the `int3`s in, except inside replay's own patches (and one being stepped over).
    fn insert_breakpoints(&mut self, t: &Stopped, view: &StopView) {
        let skip = self.step_over.map(|(_, a)| a);
        for (addr, orig) in self.breakpoints.iter_mut() {
            if orig.is_some()
                || skip == Some(*addr)
                || view
                    .patches
                    .iter()
                    .any(|(p, b)| *addr >= *p && *addr < *p + b.len() as u64)
            {
                continue;
            }
            if let Ok(c) = t.read_bytes(RemotePtr::new(*addr), 1)
                && c[0] != 0xcc
                && t.write_bytes(RemotePtr::new(*addr), &[0xcc]).is_ok()
            {
                *orig = Some(c[0]);
            }
        }
    }

    /// Writes DR1–DR3 and their DR7 bits into thread `t` if it does not carry the current ones.
    fn apply_slots(&mut self, t: &Stopped) -> Result<(), Error> {
        if self.applied.get(&t.tid()) == Some(&self.slots_version) {
            return Ok(());
        }
        // DR1–DR3's bits: L1–L3 (2, 4, 6), R/W and LEN at 16 + 4 i.
        let mut dr7 = t.debugreg(7)?;
        for i in 1..4 {
            dr7 &= !((0b11 << (2 * i)) | (0xf << (16 + 4 * i)));
        }
        t.set_debugreg(7, dr7)?;
        for (k, s) in self.slots.iter().enumerate() {
            let i = k + 1;
            let Some(s) = s else { continue };
            let rw = match s.what {
                Watch::Exec => 0b00,
                Watch::Write => 0b01,
                Watch::Read | Watch::Access => 0b11,
            };
            let len = match s.len {
                1 => 0b00,
                2 => 0b01,
                8 => 0b10,
                _ => 0b11,
            };
            t.set_debugreg(i, s.addr)?;
            dr7 |= (1 << (2 * i)) | ((rw | (len << 2)) << (16 + 4 * i));
        }
        t.set_debugreg(7, dr7)?;
        self.applied.insert(t.tid(), self.slots_version);
        Ok(())
    }

    fn thread_id(&self, rec: i32) -> String {
        format!("p{:x}.{:x}", self.pid, rec)
    }

    fn stop_reply(&self, why: Why, rec_tid: i32) -> String {
        let (sig, extra) = match why {
            Why::Signal(s) => (gdb_signal(s), String::new()),
            Why::SwBreak => (5, "swbreak:;".into()),
            Why::HwBreak => (5, "hwbreak:;".into()),
            Why::Begin => (5, "replaylog:begin;".into()),
            Why::Watch(w, a) => {
                let k = match w {
                    Watch::Read => "rwatch",
                    Watch::Access => "awatch",
                    _ => "watch",
                };
                (5, format!("{k}:{a:x};"))
            }
        };
        format!("T{sig:02x}{extra}thread:{};", self.thread_id(rec_tid))
    }

    /// True when gdb sent the interrupt byte (checked without blocking).
    fn interrupted(&mut self) -> bool {
        if self.conn.buffered() {
            return false;
        }
        let s = self.conn.stream();
        if s.set_nonblocking(true).is_err() {
            return false;
        }
        let mut b = [0u8; 1];
        let got = matches!(s.peek(&mut b), Ok(1) if b[0] == 0x03);
        if got {
            let _ = (&*s).read(&mut b);
        }
        let _ = s.set_nonblocking(false);
        got
    }

    /// Talks with gdb while thread `t` is stopped for `why`, until gdb resumes it. `reply`:
    /// send the stop reply first (false at the start, where gdb asks with `?`).
    fn serve(
        &mut self,
        t: &mut Stopped,
        view: &StopView,
        why: Why,
        reply: bool,
    ) -> Result<Go, Error> {
        self.pid = view.first_pid.0;
        self.g_thread = None;
        let stop = self.stop_reply(why, view.rec_tid);
        if reply {
            self.send(&stop.clone())?;
        }
        self.running = false;
        loop {
            let pkt = match self.conn.read().map_err(Self::io)? {
                None => {
                    let _ = writeln!(self.log, "sightline: gdb disconnected; the replay runs on");
                    self.detach(t);
                    return Ok(Go::Continue);
                }
                Some(Incoming::Interrupt) => continue,
                Some(Incoming::Packet(p)) => p,
            };
            match self.handle(&pkt, t, view, &stop)? {
                Some(go) => {
                    self.running = true;
                    return Ok(go);
                }
                None => continue,
            }
        }
    }

    /// Detaches from gdb: no breakpoints, no watchpoints, no more stops.
    fn detach(&mut self, t: &Stopped) {
        self.remove_breakpoints(t);
        self.breakpoints.clear();
        self.slots = [None; 3];
        self.slots_version += 1;
        self.stepping.clear();
        self.detached = true;
    }

    fn warn_write(&mut self, what: &str) -> Result<(), Error> {
        if !self.warned_write {
            self.warned_write = true;
            let msg = format!(
                "sightline: gdb wrote {what}: the replay will diverge from the recording from here on\n"
            );
            let _ = self.log.write_all(msg.as_bytes());
            // Also on gdb's console (an `O` packet).
            self.send(&format!("O{}", hex(msg.as_bytes())))?;
        }
        Ok(())
    }

    /// The registers of recorded thread `rec` (the stopped one, or another held stopped).
    fn thread_regs(
        &self,
        t: &mut Stopped,
        view: &StopView,
    ) -> Option<(replay_ptrace::Regs, replay_ptrace::FpRegs)> {
        let rec = self.g_thread.unwrap_or(view.rec_tid);
        if rec == view.rec_tid {
            let r = t.regs().ok()?;
            let f = replay_ptrace::get_fpregs(t.tid()).ok()?;
            return Some((r, f));
        }
        let th = view.threads.iter().find(|x| x.rec == rec && x.stopped)?;
        let r = replay_ptrace::regs_of(th.real).ok()?;
        let f = replay_ptrace::get_fpregs(th.real).ok()?;
        Some((r, f))
    }

    /// Reads up to `len` bytes at `addr` (fewer where memory ends), with replay's patches shown as
    /// the original code.
    fn read_memory(t: &Stopped, view: &StopView, addr: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let at = addr + out.len() as u64;
            let page_left = (0x1000 - (at & 0xfff)) as usize;
            let n = page_left.min(len - out.len());
            match t.read_bytes(RemotePtr::new(at), n) {
                Ok(b) => out.extend_from_slice(&b),
                Err(_) => break,
            }
        }
        for (p, orig) in &view.patches {
            for (i, b) in orig.iter().enumerate() {
                let a = p + i as u64;
                if a >= addr && a < addr + out.len() as u64 {
                    out[(a - addr) as usize] = *b;
                }
            }
        }
        out
    }

    /// A file path of the replayed process's view: `/proc/<recorded pid or tid>/…` is the
    /// replayed process's, other paths are looked up in its mount namespace.
    fn host_path(&self, path: &str, view: &StopView) -> String {
        if let Some(rest) = path.strip_prefix("/proc/") {
            let (id, tail) = rest.split_once('/').unwrap_or((rest, ""));
            if let Ok(n) = id.parse::<i32>() {
                let real = if n == view.first_pid.0 {
                    Some(view.first_pid.1)
                } else {
                    view.threads.iter().find(|x| x.rec == n).map(|x| x.real)
                };
                if let Some(real) = real {
                    // /proc/PID/task/TID/…: the thread's real id too.
                    let tail =
                        match tail.strip_prefix("task/").map(|t| t.split_once('/')) {
                            Some(Some((tid, rest))) => match tid.parse::<i32>().ok().and_then(|n| {
                                view.threads.iter().find(|x| x.rec == n).map(|x| x.real)
                            }) {
                                Some(rt) => format!("task/{rt}/{rest}"),
                                None => tail.to_owned(),
                            },
                            _ => tail.to_owned(),
                        };
                    return format!("/proc/{real}/{tail}");
                }
            }
        }
        format!("/proc/{}/root{path}", view.first_pid.1)
    }

    /// Handles one packet; `Some` when gdb resumed the program.
    fn handle(
        &mut self,
        pkt: &[u8],
        t: &mut Stopped,
        view: &StopView,
        stop: &str,
    ) -> Result<Option<Go>, Error> {
        let text = String::from_utf8_lossy(pkt).into_owned();
        let reply: String = match pkt.first() {
            Some(b'?') => stop.to_owned(),
            Some(b'c') => {
                self.check_signal("0", view)?;
                return Ok(Some(Go::Continue));
            }
            Some(b's') => {
                self.check_signal("0", view)?;
                return Ok(Some(Go::Step));
            }
            Some(b'C' | b'S') => {
                self.check_signal(&text[1..], view)?;
                return Ok(Some(if pkt[0] == b'S' {
                    Go::Step
                } else {
                    Go::Continue
                }));
            }
            Some(b'D') => {
                self.send("OK")?;
                let _ = writeln!(self.log, "sightline: gdb detached; the replay runs on");
                self.detach(t);
                return Ok(Some(Go::Continue));
            }
            Some(b'b') if text == "bc" => {
                return self.reverse_continue(t, view, stop).map(|()| None);
            }
            Some(b'k') => {
                return Err(Error::Debugger("gdb killed the replay".into()));
            }
            // A thread that runs (in a blocking call the replay runs for real) cannot be read
            // without stopping it, which would change the replay: its registers are
            // "unavailable" (`x` digits).
            Some(b'g') => match self.thread_regs(t, view) {
                Some((r, f)) => hex(&regs::all(&r, &f)),
                None => "xx".repeat((0..regs::COUNT).map(regs::size).sum()),
            },
            Some(b'p') => {
                let n = num(&pkt[1..]).unwrap_or(u64::MAX) as usize;
                match self.thread_regs(t, view) {
                    Some((r, f)) => regs::register(n, &r, &f).map_or("E01".into(), |b| hex(&b)),
                    None if n < regs::COUNT => "xx".repeat(regs::size(n)),
                    None => "E01".into(),
                }
            }
            Some(b'G') => self.write_all_regs(&pkt[1..], t, view)?,
            Some(b'P') => self.write_reg(&text[1..], t, view)?,
            Some(b'm') => {
                let (a, l) = text[1..].split_once(',').unwrap_or(("", ""));
                match (num(a.as_bytes()), num(l.as_bytes())) {
                    (Some(a), Some(l)) => {
                        let data = Self::read_memory(t, view, a, (l as usize).min(MAX_READ));
                        if data.is_empty() && l > 0 {
                            "E14".into()
                        } else {
                            hex(&data)
                        }
                    }
                    _ => "E01".into(),
                }
            }
            Some(b'M') => self.write_memory(&text[1..], t)?,
            Some(b'Z' | b'z') => self.breakpoint(&text, t)?,
            Some(b'H') => {
                if let Some(rest) = text.strip_prefix("Hg") {
                    self.g_thread = parse_tid(rest);
                    if self
                        .g_thread
                        .is_some_and(|r| !view.threads.iter().any(|x| x.rec == r))
                    {
                        self.g_thread = None;
                        "E01".into()
                    } else {
                        "OK".into()
                    }
                } else {
                    "OK".into()
                }
            }
            Some(b'T') => {
                let alive =
                    parse_tid(&text[1..]).is_none_or(|r| view.threads.iter().any(|x| x.rec == r));
                if alive { "OK".into() } else { "E01".into() }
            }
            Some(b'q' | b'Q' | b'v') => match self.query(&text, pkt, t, view)? {
                Query::Reply(r) => r,
                Query::Binary(b) => {
                    self.send_bytes(&b)?;
                    return Ok(None);
                }
                Query::Resume(go) => return Ok(Some(go)),
            },
            _ => String::new(),
        };
        self.send(&reply)?;
        if text == "QStartNoAckMode" {
            self.conn.acks = false;
        }
        if self.going_live {
            // `monitor go-live` was answered: the replay ends here, and the session with it
            // (the connection closes when the server is dropped).
            return Err(Error::GoLive {
                rec_tid: view.rec_tid,
                thread_events: view.thread_events,
            });
        }
        Ok(None)
    }

    /// The signal gdb resumes with (`C sig`, GDB's number; `0` for `c`/`s`): a replay delivers
    /// the recorded one, whatever gdb asks; a different request is answered with a warning.
    fn check_signal(&mut self, arg: &str, _view: &StopView) -> Result<(), Error> {
        let sig = arg
            .split(';')
            .next()
            .and_then(|s| num(s.as_bytes()))
            .unwrap_or(0);
        let recorded = if self.delivering == 0 {
            0
        } else {
            u64::from(gdb_signal(self.delivering))
        };
        if sig != recorded {
            let msg = if recorded == 0 {
                "sightline: gdb asked to deliver a signal; a replay delivers only the recorded ones\n"
                    .to_owned()
            } else {
                format!(
                    "sightline: the recording delivered signal {} here; the replay delivers it\n",
                    self.delivering
                )
            };
            let _ = self.log.write_all(msg.as_bytes());
        }
        Ok(())
    }

    fn write_all_regs(
        &mut self,
        hexdata: &[u8],
        t: &mut Stopped,
        view: &StopView,
    ) -> Result<String, Error> {
        if self.g_thread.is_some_and(|r| r != view.rec_tid) {
            return Ok("E01".into());
        }
        let Some(bytes) = unhex(hexdata) else {
            return Ok("E01".into());
        };
        let mut r = t.regs()?;
        let before = r;
        let mut off = 0;
        for n in 0..regs::COUNT {
            let sz = regs::size(n);
            if off + sz > bytes.len() {
                break;
            }
            regs::set_register(n, &bytes[off..off + sz], &mut r);
            off += sz;
        }
        if regs::all(&r, &replay_ptrace::get_fpregs(t.tid())?)
            != regs::all(&before, &replay_ptrace::get_fpregs(t.tid())?)
        {
            self.warn_write("registers")?;
            t.set_regs(&r)?;
        }
        Ok("OK".into())
    }

    fn write_reg(&mut self, arg: &str, t: &mut Stopped, view: &StopView) -> Result<String, Error> {
        if self.g_thread.is_some_and(|r| r != view.rec_tid) {
            return Ok("E01".into());
        }
        let Some((n, v)) = arg.split_once('=') else {
            return Ok("E01".into());
        };
        let (Some(n), Some(bytes)) = (num(n.as_bytes()), unhex(v.as_bytes())) else {
            return Ok("E01".into());
        };
        let mut r = t.regs()?;
        if !regs::set_register(n as usize, &bytes, &mut r) {
            return Ok("E01".into());
        }
        self.warn_write("a register")?;
        t.set_regs(&r)?;
        Ok("OK".into())
    }

    fn write_memory(&mut self, arg: &str, t: &mut Stopped) -> Result<String, Error> {
        let Some((loc, data)) = arg.split_once(':') else {
            return Ok("E01".into());
        };
        let (a, l) = loc.split_once(',').unwrap_or(("", ""));
        let (Some(a), Some(l), Some(bytes)) =
            (num(a.as_bytes()), num(l.as_bytes()), unhex(data.as_bytes()))
        else {
            return Ok("E01".into());
        };
        if bytes.len() as u64 != l {
            return Ok("E01".into());
        }
        if bytes.is_empty() {
            return Ok("OK".into());
        }
        self.warn_write("memory")?;
        Ok(match t.write_bytes(RemotePtr::new(a), &bytes) {
            Ok(()) => "OK".into(),
            Err(_) => "E14".into(),
        })
    }

    /// `Z`/`z` packets: `Ztype,addr,kind`.
    fn breakpoint(&mut self, text: &str, t: &Stopped) -> Result<String, Error> {
        let insert = text.starts_with('Z');
        let mut parts = text[1..].split(',');
        let (Some(ty), Some(addr), Some(kind)) = (
            parts.next().and_then(|s| s.parse::<u8>().ok()),
            parts.next().and_then(|s| num(s.as_bytes())),
            parts
                .next()
                .and_then(|s| num(s.split(';').next().unwrap_or("").as_bytes())),
        ) else {
            return Ok("E01".into());
        };
        if ty == 0 {
            if insert {
                if t.read_bytes(RemotePtr::new(addr), 1).is_err() {
                    return Ok("E14".into());
                }
                self.breakpoints.entry(addr).or_insert(None);
            } else {
                self.breakpoints.remove(&addr);
            }
            return Ok("OK".into());
        }
        let what = match ty {
            1 => Watch::Exec,
            2 => Watch::Write,
            3 => Watch::Read,
            4 => Watch::Access,
            _ => return Ok(String::new()),
        };
        let req = (ty, addr, kind);
        if !insert {
            for s in self.slots.iter_mut() {
                if s.is_some_and(|s| s.req == req) {
                    *s = None;
                }
            }
            self.slots_version += 1;
            return Ok("OK".into());
        }
        // Aligned pieces of 1, 2, 4 or 8 bytes (an execution breakpoint is one byte).
        let mut pieces = Vec::new();
        if what == Watch::Exec {
            pieces.push((addr, 1));
        } else {
            let (mut a, end) = (addr, addr + kind.max(1));
            while a < end {
                let len = [8u64, 4, 2, 1]
                    .into_iter()
                    .find(|l| a % l == 0 && a + l <= end)
                    .expect("1 fits");
                pieces.push((a, len));
                a += len;
            }
        }
        let free: Vec<usize> = (0..3).filter(|i| self.slots[*i].is_none()).collect();
        if pieces.len() > free.len() {
            return Ok("E01".into());
        }
        for ((a, len), i) in pieces.into_iter().zip(free) {
            self.slots[i] = Some(Slot {
                addr: a,
                len,
                what,
                req,
            });
        }
        self.slots_version += 1;
        Ok("OK".into())
    }

    fn query(
        &mut self,
        text: &str,
        pkt: &[u8],
        t: &mut Stopped,
        view: &StopView,
    ) -> Result<Query, Error> {
        let r = |s: &str| Ok(Query::Reply(s.to_owned()));
        if text.starts_with("qSupported") {
            return r(&format!(
                "PacketSize={:x};ReverseContinue+;QStartNoAckMode+;qXfer:features:read+;qXfer:auxv:read+;qXfer:exec-file:read+;multiprocess+;swbreak+;hwbreak+;vContSupported+;QPassSignals+",
                packet::MAX_PACKET
            ));
        }
        if text == "QStartNoAckMode" || text.starts_with("qSymbol") {
            return r("OK");
        }
        if let Some(list) = text.strip_prefix("QPassSignals:") {
            self.pass = list
                .split(';')
                .filter_map(|s| num(s.as_bytes()))
                .map(|n| n as u8)
                .collect();
            return r("OK");
        }
        if text.starts_with("QProgramSignals:") || text.starts_with("QNonStop:0") {
            return r("OK");
        }
        if text == "qAttached" || text.starts_with("qAttached:") {
            return r("1");
        }
        if text == "qC" {
            return r(&format!("QC{}", self.thread_id(view.rec_tid)));
        }
        if text == "qfThreadInfo" {
            let list: Vec<String> = view.threads.iter().map(|x| self.thread_id(x.rec)).collect();
            return r(&format!("m{}", list.join(",")));
        }
        if text == "qsThreadInfo" {
            return r("l");
        }
        if let Some(rest) = text.strip_prefix("qXfer:") {
            return self.xfer(rest, view);
        }
        if text == "vCont?" {
            return r("vCont;c;C;s;S");
        }
        if let Some(actions) = text.strip_prefix("vCont;") {
            // The stopped thread steps if any action steps it (or steps with no thread named);
            // otherwise everything continues. Only the thread with the right to run can move.
            let me = view.rec_tid;
            let mut go = Go::Continue;
            for a in actions.split(';') {
                let (act, tid) = a.split_once(':').unwrap_or((a, ""));
                let applies = tid.is_empty() || parse_tid(tid).is_none_or(|r| r == me);
                if applies && act.starts_with(['s', 'S']) {
                    go = Go::Step;
                    break;
                }
                if let Some(sig) = act.strip_prefix('C') {
                    self.check_signal(sig, view)?;
                }
                if applies {
                    break;
                }
            }
            return Ok(Query::Resume(go));
        }
        if let Some(rest) = text.strip_prefix("vFile:") {
            return self.vfile(rest, pkt, view);
        }
        if let Some(cmd) = text.strip_prefix("qRcmd,") {
            return self.monitor(cmd, view);
        }
        if text.starts_with("vKill") {
            return Err(Error::Debugger("gdb killed the replay".into()));
        }
        let _ = t;
        r("")
    }

    /// `monitor CMD` (`qRcmd`, the command hex-encoded): output as `O` packets, then `OK`.
    fn monitor(&mut self, cmd: &str, view: &StopView) -> Result<Query, Error> {
        let Some(cmd) = unhex(cmd.as_bytes()).and_then(|c| String::from_utf8(c).ok()) else {
            return Ok(Query::Reply("E01".into()));
        };
        let text = match cmd.trim() {
            "when" => format!(
                "Events replayed: {}; thread {} has replayed {} of its own.\n",
                view.events, view.rec_tid, view.thread_events
            ),
            "go-live" => {
                self.going_live = true;
                format!(
                    "Going live where thread {} is stopped (before its event {}): the replay ends, \
                     the program continues natively and this session closes.\n",
                    view.rec_tid, view.thread_events
                )
            }
            "help" | "" => {
                "monitor when: how far the replay is (events of the recording replayed)\n\
                            monitor go-live: end the replay here and let the program run on natively\n\
                            monitor help: this list\n"
                    .to_owned()
            }
            other => format!("unknown monitor command {other:?}; try `monitor help`\n"),
        };
        self.send(&format!("O{}", hex(text.as_bytes())))?;
        Ok(Query::Reply("OK".into()))
    }

    fn xfer(&mut self, rest: &str, view: &StopView) -> Result<Query, Error> {
        // object:read:annex:offset,length
        let mut it = rest.splitn(4, ':');
        let (Some(object), Some("read"), Some(annex), Some(range)) =
            (it.next(), it.next(), it.next(), it.next())
        else {
            return Ok(Query::Reply(String::new()));
        };
        let (o, l) = range.split_once(',').unwrap_or(("", ""));
        let (Some(off), Some(len)) = (num(o.as_bytes()), num(l.as_bytes())) else {
            return Ok(Query::Reply("E01".into()));
        };
        let data: Vec<u8> = match object {
            "features" if annex == "target.xml" => regs::target_xml().into_bytes(),
            "features" => return Ok(Query::Reply("E00".into())),
            "exec-file" => self.exe.clone().into_bytes(),
            "auxv" => match std::fs::read(format!("/proc/{}/auxv", view.first_pid.1)) {
                Ok(d) => d,
                Err(_) => return Ok(Query::Reply("E01".into())),
            },
            _ => return Ok(Query::Reply(String::new())),
        };
        let start = (off as usize).min(data.len());
        let end = (start + (len as usize).min(MAX_READ)).min(data.len());
        let mut out = vec![if end == data.len() { b'l' } else { b'm' }];
        out.extend_from_slice(&data[start..end]);
        Ok(Query::Binary(out))
    }

    /// Host I/O (`vFile:`), read-only, in the replayed process's view of the file system.
    fn vfile(&mut self, rest: &str, pkt: &[u8], view: &StopView) -> Result<Query, Error> {
        let reply = |s: String| Ok(Query::Reply(s));
        let (op, args) = rest.split_once(':').unwrap_or((rest, ""));
        let fio_errno = |e: &io::Error| match e.raw_os_error() {
            Some(libc::ENOENT) => 2,
            Some(libc::EACCES) => 13,
            Some(libc::EISDIR) => 21,
            Some(libc::EINVAL) => 22,
            Some(libc::EBADF) => 9,
            Some(libc::EPERM) => 1,
            _ => 9999,
        };
        match op {
            "setfs" => reply("F0".into()),
            "open" => {
                let mut it = args.split(',');
                let path = it.next().and_then(|p| unhex(p.as_bytes()));
                let flags = it.next().and_then(|f| num(f.as_bytes())).unwrap_or(0);
                let Some(path) = path.and_then(|p| String::from_utf8(p).ok()) else {
                    return reply("F-1,16".into());
                };
                if flags & 3 != 0 {
                    return reply("F-1,d".into()); // EACCES: read-only
                }
                match std::fs::File::open(self.host_path(&path, view)) {
                    Ok(f) => {
                        let fd = self.next_fd;
                        self.next_fd += 1;
                        self.files.insert(fd, f);
                        reply(format!("F{fd:x}"))
                    }
                    Err(e) => reply(format!("F-1,{:x}", fio_errno(&e))),
                }
            }
            "pread" => {
                let v: Vec<u64> = args.split(',').filter_map(|s| num(s.as_bytes())).collect();
                let [fd, count, off] = v[..] else {
                    return reply("F-1,16".into());
                };
                let Some(f) = self.files.get(&fd) else {
                    return reply("F-1,9".into());
                };
                let mut buf = vec![0u8; (count as usize).min(MAX_READ)];
                match std::os::unix::fs::FileExt::read_at(f, &mut buf, off) {
                    Ok(n) => {
                        let mut out = format!("F{n:x};").into_bytes();
                        out.extend_from_slice(&buf[..n]);
                        Ok(Query::Binary(out))
                    }
                    Err(e) => reply(format!("F-1,{:x}", fio_errno(&e))),
                }
            }
            "close" => {
                let fd = num(args.as_bytes()).unwrap_or(u64::MAX);
                reply(if self.files.remove(&fd).is_some() {
                    "F0".into()
                } else {
                    "F-1,9".into()
                })
            }
            "fstat" => {
                let fd = num(args.as_bytes()).unwrap_or(u64::MAX);
                let Some(f) = self.files.get(&fd) else {
                    return reply("F-1,9".into());
                };
                match f.metadata() {
                    Ok(m) => {
                        let st = fio_stat(&m);
                        let mut out = format!("F{:x};", st.len()).into_bytes();
                        out.extend_from_slice(&st);
                        Ok(Query::Binary(out))
                    }
                    Err(e) => reply(format!("F-1,{:x}", fio_errno(&e))),
                }
            }
            "readlink" => {
                let path = unhex(args.as_bytes()).and_then(|p| String::from_utf8(p).ok());
                let Some(path) = path else {
                    return reply("F-1,16".into());
                };
                match std::fs::read_link(self.host_path(&path, view)) {
                    Ok(target) => {
                        let b = target.as_os_str().as_encoded_bytes();
                        let mut out = format!("F{:x};", b.len()).into_bytes();
                        out.extend_from_slice(b);
                        Ok(Query::Binary(out))
                    }
                    Err(e) => reply(format!("F-1,{:x}", fio_errno(&e))),
                }
            }
            _ => {
                let _ = pkt;
                reply(String::new())
            }
        }
    }

    /// `bc`: replays from the start to the last breakpoint or watchpoint stop before this point
    /// (two runs: count them, then stop at the last). At the start already: says so.
    fn reverse_continue(
        &mut self,
        t: &mut Stopped,
        view: &StopView,
        stop: &str,
    ) -> Result<(), Error> {
        let regs = t.regs()?;
        if view.events == 0 {
            let thread = stop.find("thread:").map_or("", |i| &stop[i..]);
            let reply = format!("T05replaylog:begin;{thread}");
            return self.send(&reply);
        }
        self.reverse = Some(Reverse::Count {
            now: Box::new(Point {
                events: view.events,
                rec_tid: view.rec_tid,
                regs,
            }),
            hits: 0,
        });
        if let std::collections::btree_map::Entry::Vacant(e) = self.breakpoints.entry(regs.rip) {
            e.insert(None);
            self.internal = Some(regs.rip);
        }
        Err(Error::Restart)
    }

    /// A stop of ours while a reverse-continue replays from the start: counted (first run), or
    /// the one to stop at (second run), else passed over.
    fn silent(
        &mut self,
        t: &mut Stopped,
        view: &StopView,
        why: Why,
        rev: Reverse,
    ) -> Result<Resume, Error> {
        let at = t.regs()?.rip;
        let counts = match why {
            Why::SwBreak => self.internal != Some(at),
            Why::HwBreak | Why::Watch(..) => true,
            _ => false,
        };
        match rev {
            Reverse::Count { now, hits } => {
                if now.is(view.events, view.rec_tid, &t.regs()?) {
                    if let Some(a) = self.internal.take() {
                        self.breakpoints.remove(&a);
                    }
                    self.reverse = Some(Reverse::Goto {
                        target: hits,
                        seen: 0,
                    });
                    return Err(Error::Restart);
                }
                if counts {
                    self.reverse = Some(Reverse::Count {
                        now,
                        hits: hits + 1,
                    });
                }
            }
            Reverse::Goto { target, seen } if counts => {
                if seen + 1 == target {
                    self.reverse = None;
                    return self.session(t, view, why);
                }
                self.reverse = Some(Reverse::Goto {
                    target,
                    seen: seen + 1,
                });
            }
            Reverse::Goto { .. } => {}
        }
        if why == Why::SwBreak {
            // Over the breakpoint's instruction without its int3, then on.
            self.step_over = Some((t.tid(), at));
            self.stepping.insert(t.tid());
            return Ok(Resume::Step);
        }
        Ok(Resume::Cont)
    }

    /// Runs a session at a stop of ours and records how gdb resumes `t`.
    fn session(&mut self, t: &mut Stopped, view: &StopView, why: Why) -> Result<Resume, Error> {
        if let Some(rev) = self.reverse.clone() {
            return self.silent(t, view, why, rev);
        }
        let go = self.serve(t, view, why, true)?;
        Ok(self.go(t, go))
    }

    fn go(&mut self, t: &Stopped, go: Go) -> Resume {
        if go == Go::Step && !self.detached {
            self.stepping.insert(t.tid());
            Resume::Step
        } else {
            self.stepping.remove(&t.tid());
            Resume::Cont
        }
    }
}

/// A reply of [`GdbServer::query`].
enum Query {
    Reply(String),
    Binary(Vec<u8>),
    Resume(Go),
}

/// The recorded tid of a thread-id (`pPID.TID`, `TID`; `-1` and `0` mean "any": `None`).
fn parse_tid(s: &str) -> Option<i32> {
    let s = s.trim();
    let tid = match s.strip_prefix('p') {
        Some(rest) => rest.split_once('.').map_or("-1", |(_, t)| t),
        None => s,
    };
    if tid == "-1" || tid == "0" {
        return None;
    }
    i32::from_str_radix(tid, 16).ok()
}

/// The File-I/O `struct stat` (GDB manual, "struct stat"): big-endian, 64 bytes.
fn fio_stat(m: &std::fs::Metadata) -> Vec<u8> {
    use std::os::unix::fs::MetadataExt;
    let mut v = Vec::with_capacity(64);
    for x in [
        m.dev() as u32,
        m.ino() as u32,
        m.mode(),
        m.nlink() as u32,
        m.uid(),
        m.gid(),
        m.rdev() as u32,
    ] {
        v.extend_from_slice(&x.to_be_bytes());
    }
    for x in [m.size(), m.blksize(), m.blocks()] {
        v.extend_from_slice(&x.to_be_bytes());
    }
    for x in [m.atime() as u32, m.mtime() as u32, m.ctime() as u32] {
        v.extend_from_slice(&x.to_be_bytes());
    }
    v
}

impl Debugger for GdbServer {
    fn on_stop(
        &mut self,
        t: &mut Stopped,
        kind: WaitKind,
        view: &StopView,
    ) -> Result<Verdict, Error> {
        if self.detached {
            // A thread that still carried our watchpoints when gdb went away.
            if view.first
                && self.started
                && kind == WaitKind::Signal(libc::SIGTRAP)
                && t.debugreg(6)? & DR6_OURS != 0
            {
                t.set_debugreg(6, 0)?;
                self.apply_slots(t)?;
                return Ok(Verdict::Resume(Resume::Cont));
            }
            return Ok(Verdict::Replay);
        }
        if !view.first {
            // A child that inherited an int3 of ours (forked while they were in): put the
            // original byte back there and run it again.
            if kind == WaitKind::Signal(libc::SIGTRAP) {
                let mut regs = t.regs()?;
                let at = regs.rip.wrapping_sub(1);
                if self.breakpoints.contains_key(&at)
                    && t.read_bytes(RemotePtr::new(at), 1)
                        .is_ok_and(|b| b[0] == 0xcc)
                    && let Some(orig) = self.inherited_byte(at, view)
                {
                    t.write_bytes(RemotePtr::new(at), &[orig])?;
                    regs.rip = at;
                    t.set_regs(&regs)?;
                    return Ok(Verdict::Resume(Resume::Cont));
                }
            }
            return Ok(Verdict::Replay);
        }
        self.remove_breakpoints(t);
        if self.step_over.is_some_and(|(tid, _)| tid == t.tid()) {
            self.step_over = None;
        }
        if !self.started {
            if kind != WaitKind::Event(replay_ptrace::PtraceEvent::Exec) {
                return Ok(Verdict::Replay);
            }
            self.started = true;
            let go = match self.reverse {
                // Backwards past every stop: to the start of the recording.
                Some(Reverse::Goto { target: 0, .. }) => {
                    self.reverse = None;
                    self.serve(t, view, Why::Begin, true)?
                }
                Some(_) => Go::Continue,
                None => self.serve(t, view, Why::Signal(libc::SIGTRAP), false)?,
            };
            self.go(t, go);
            return Ok(Verdict::Replay);
        }
        if kind == WaitKind::Signal(libc::SIGTRAP) {
            let info = t.siginfo()?;
            let code = crate::machine::si_code(&info);
            let dr6 = t.debugreg(6)?;
            if dr6 & DR6_OURS != 0 {
                t.set_debugreg(6, 0)?;
                let i = (1..4).find(|i| dr6 & (1 << i) != 0).expect("a bit");
                let why = match self.slots[i - 1] {
                    Some(s) if s.what == Watch::Exec => Why::HwBreak,
                    Some(s) => Why::Watch(s.what, s.req.1),
                    None => Why::Signal(libc::SIGTRAP),
                };
                self.stepping.remove(&t.tid());
                return Ok(Verdict::Resume(self.session(t, view, why)?));
            }
            let mut regs = t.regs()?;
            let at = regs.rip.wrapping_sub(1);
            if code == SI_KERNEL && self.breakpoints.contains_key(&at) {
                regs.rip = at;
                t.set_regs(&regs)?;
                self.stepping.remove(&t.tid());
                return Ok(Verdict::Resume(self.session(t, view, Why::SwBreak)?));
            }
            if self.stepping.contains(&t.tid())
                && dr6 & 1 == 0
                && (code == TRAP_TRACE || code == TRAP_BRKPT || dr6 & DR6_STEP != 0)
            {
                t.set_debugreg(6, 0)?;
                self.stepping.remove(&t.tid());
                return Ok(Verdict::Resume(self.session(
                    t,
                    view,
                    Why::Signal(libc::SIGTRAP),
                )?));
            }
        }
        if self.reverse.is_none() && self.interrupted() {
            let resume = self.session(t, view, Why::Signal(libc::SIGINT))?;
            if resume == Resume::Step {
                // Stepping from a stop replay must handle first: it steps once replay resumes.
                self.stepping.insert(t.tid());
            }
        }
        Ok(Verdict::Replay)
    }

    fn on_resume(
        &mut self,
        t: &mut Stopped,
        kind: WaitKind,
        how: Resume,
        sig: i32,
        view: &StopView,
    ) -> Result<Resume, Error> {
        if !view.first || !self.started {
            return Ok(how);
        }
        if self.detached {
            // Clear DR1–DR3 of each thread as it is resumed (once: the version is then current).
            self.apply_slots(t)?;
            return Ok(how);
        }
        if sig != 0 && !self.pass.contains(&gdb_signal(sig)) {
            // A signal the recording delivered here: gdb sees it first.
            self.stepping.remove(&t.tid());
            self.delivering = sig;
            let r = self.session(t, view, Why::Signal(sig));
            self.delivering = 0;
            let r = r?;
            if r == Resume::Step {
                self.stepping.insert(t.tid());
            }
        } else if self.stepping.contains(&t.tid())
            && kind == WaitKind::SyscallStop
            && how == Resume::Cont
        {
            // A step over a system call ends as the call returns.
            self.stepping.remove(&t.tid());
            let r = self.session(t, view, Why::Signal(libc::SIGTRAP))?;
            if r == Resume::Step {
                self.stepping.insert(t.tid());
            }
        }
        self.apply_slots(t)?;
        if self.detached {
            return Ok(how);
        }
        self.insert_breakpoints(t, view);
        if how == Resume::Cont && self.stepping.contains(&t.tid()) {
            return Ok(Resume::Step);
        }
        Ok(how)
    }

    fn on_exit(&mut self, kind: WaitKind) {
        if self.detached || !self.started {
            return;
        }
        if self.reverse.take().is_some() {
            let _ = writeln!(
                self.log,
                "sightline: reverse-continue did not meet the point it started from again; the replay ran to its end"
            );
        }
        let reply = match kind {
            WaitKind::Exited(c) => format!("W{:02x};process:{:x}", c & 0xff, self.pid),
            WaitKind::Signaled(s) => format!("X{:02x};process:{:x}", gdb_signal(s), self.pid),
            _ => return,
        };
        let _ = self.send(&reply);
        self.detached = true;
    }

    fn on_restart(&mut self) {
        self.started = false;
        self.step_over = None;
        for orig in self.breakpoints.values_mut() {
            *orig = None;
        }
        self.applied.clear();
        self.stepping.clear();
        self.running = true;
    }

    fn on_end(&mut self, error: Option<&Error>) {
        let Some(e) = error else { return };
        if self.detached || !self.started {
            return;
        }
        if matches!(e, Error::GoLive { .. }) {
            // Said with the monitor command's answer; gdb sees the connection close.
            self.detached = true;
            return;
        }
        let msg = format!("sightline: the replay cannot go on: {e}\n");
        let _ = self.send(&format!("O{}", hex(msg.as_bytes())));
        let _ = self.send(&format!("X09;process:{:x}", self.pid));
        self.detached = true;
    }
}

impl GdbServer {
    /// The byte a child inherited under an `int3` of ours at `at`: the one the table keeps while
    /// the `int3` is in the first process, else the first process's memory there.
    fn inherited_byte(&self, at: u64, view: &StopView) -> Option<u8> {
        if let Some(Some(b)) = self.breakpoints.get(&at) {
            return Some(*b);
        }
        // Not in at the moment: the parent's memory holds the original byte.
        let f = std::fs::File::open(format!("/proc/{}/mem", view.first_pid.1)).ok()?;
        let mut b = [0u8; 1];
        std::os::unix::fs::FileExt::read_at(&f, &mut b, at).ok()?;
        Some(b[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_ids_parse_in_both_forms() {
        assert_eq!(parse_tid("p1f.2a"), Some(0x2a));
        assert_eq!(parse_tid("2a"), Some(0x2a));
        assert_eq!(parse_tid("p1f.-1"), None);
        assert_eq!(parse_tid("-1"), None);
        assert_eq!(parse_tid("0"), None);
    }

    #[test]
    fn linux_signals_map_to_gdb_numbers() {
        assert_eq!(gdb_signal(libc::SIGSEGV), 11);
        assert_eq!(gdb_signal(libc::SIGTRAP), 5);
        assert_eq!(gdb_signal(libc::SIGBUS), 10);
        assert_eq!(gdb_signal(libc::SIGUSR1), 30);
        assert_eq!(gdb_signal(libc::SIGCHLD), 20);
        assert_eq!(gdb_signal(libc::SIGSTOP), 17);
        assert_eq!(gdb_signal(34), 46);
    }

    #[test]
    fn the_file_io_stat_is_64_big_endian_bytes() {
        let m = std::fs::metadata("/").unwrap();
        let st = fio_stat(&m);
        assert_eq!(st.len(), 64);
        use std::os::unix::fs::MetadataExt;
        assert_eq!(u32::from_be_bytes(st[8..12].try_into().unwrap()), m.mode());
        assert_eq!(u64::from_be_bytes(st[28..36].try_into().unwrap()), m.size());
    }
}
