//! The recording format (version 3), documented in `docs/recording-format.md`.
//!
//! A recording is a directory holding `meta.json` (what was run, how it ended) and `events.slr`
//! (the event stream). The stream is a file header followed by independent zstd-compressed chunks,
//! each a run of encoded [`Record`]s; the recorder writes a chunk every 512 events, 1 MiB of encoded
//! data or 200 ms, and at exit, so a crash of the program or of Sightline leaves every completed chunk
//! readable (the reader reports a torn last chunk as [`Recording::truncated`]).
//!
//! This module is pure (no ptrace): it is the shared vocabulary of recorder and replayer.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use serde::{Deserialize, Serialize};

use crate::Error;
pub use replay_ptrace::syscallbuf::Buffered;

/// Version of the recording format written by this build. Readers refuse other versions.
pub const FORMAT_VERSION: u32 = 6;
/// The oldest format version this build reads (version 1 lacks the syscall-buffer events, versions
/// 1 and 2 the thread-schedule events, versions before 5 the paths of system calls; all decode with
/// this build).
pub const OLDEST_VERSION: u32 = 1;
/// The eight bytes that open `events.slr`.
pub const STREAM_MAGIC: &[u8; 8] = b"SLREPLAY";
/// The four bytes that open every chunk.
pub const CHUNK_MAGIC: &[u8; 4] = b"SLCK";
/// Name of the metadata file inside a recording directory.
pub const META_FILE: &str = "meta.json";
/// Name of the event stream inside a recording directory.
pub const EVENTS_FILE: &str = "events.slr";

/// The largest decoded chunk a reader accepts: 3 GiB. The writer's chunks hold at most 1 MiB of
/// records plus the record that crossed it, whose data is at most the kernel's `MAX_RW_COUNT`
/// (2 GiB − 4 KiB) per system call; a larger `raw_len` is corruption, refused before anything is
/// allocated for it.
pub const MAX_CHUNK_RAW: u64 = 3 << 30;
const CHUNK_EVENTS: usize = 512;
const CHUNK_BYTES: usize = 1 << 20;
const CHUNK_AGE_NS: u64 = 200_000_000;
const ZSTD_LEVEL: i32 = -1;

/// `meta.json`: what was recorded and how the recording ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    /// Format version ([`FORMAT_VERSION`]).
    pub version: u32,
    /// Resolved path of the executable.
    pub path: String,
    /// `argv`, including `argv[0]`.
    pub argv: Vec<String>,
    /// The complete environment, `NAME=value`, in order.
    pub env: Vec<String>,
    /// Working directory at start.
    pub cwd: String,
    /// Recorded pid of the first process.
    pub root_pid: i32,
    /// Seconds since the Unix epoch when recording started.
    pub started_unix: u64,
    /// Whether CPUID faulting (`ARCH_SET_CPUID`) was in effect; without it CPUID runs natively.
    pub cpuid_faulting: bool,
    /// `"recording"` while the program runs, `"complete"` after it exited, or `"unsupported: …"`
    /// when recording stopped early (the reason follows).
    pub status: String,
    /// Exit code of the first process (128 + signal when killed), once complete.
    pub exit_code: Option<i32>,
    /// Signals ignored (`SIG_IGN`) when the recording started, which the program inherited (SIGHUP
    /// under `nohup`); replay starts the program with the same. Absent in older recordings: none.
    #[serde(default)]
    pub ignored_signals: Vec<i32>,
}

impl Meta {
    /// The metadata of a complete recording of `/bin/true` (argv `true`, cwd `/`, no environment,
    /// exit code 0) whose first process is `root_pid`: for tests that write recordings with
    /// [`Writer`] without tracing anything.
    pub fn for_test(root_pid: i32) -> Meta {
        Meta {
            version: FORMAT_VERSION,
            path: "/bin/true".into(),
            argv: vec!["true".into()],
            env: vec![],
            cwd: "/".into(),
            root_pid,
            started_unix: 0,
            cpuid_faulting: true,
            status: "complete".into(),
            exit_code: Some(0),
            ignored_signals: vec![],
        }
    }
}

/// One memory write the kernel made during a system call: `data` at tracee address `addr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemWrite {
    /// Tracee address.
    pub addr: u64,
    /// The bytes found there after the system call.
    pub data: Vec<u8>,
}

/// A position in the partial order of one shared kernel object: the event is the `seq`-th (from 0)
/// recorded interaction with object `obj` (see [`crate::rendezvous`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rendezvous {
    /// Object id.
    pub obj: u64,
    /// Position of this event among the object's events.
    pub seq: u64,
}

/// A system call as recorded at its exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallEvent {
    /// x86-64 system call number.
    pub nr: i64,
    /// The six argument registers at entry (rdi, rsi, rdx, r10, r8, r9).
    pub args: [u64; 6],
    /// Return value (rax at exit; `-errno` on failure, `-ERESTART*` when a signal interrupted it).
    pub result: i64,
    /// Memory the kernel wrote, to be written again on replay.
    pub writes: Vec<MemWrite>,
    /// Rendezvous points this event takes part in.
    pub rendezvous: Vec<Rendezvous>,
    /// 1 when the data went to Sightline's stdout, 2 for stderr, 0 otherwise.
    pub output: u8,
    /// Hash of the data the program handed to the kernel (write family), 0 when none.
    pub data_hash: u64,
    /// Extra data: for a successful `execve`, the 16 AT_RANDOM bytes of the new image.
    pub extra: Vec<u8>,
    /// The path argument as the program passed it (`crate::syscalls::path_arg`), read at the
    /// call's entry, without its NUL (at most 4,096 bytes); empty for calls without one and in
    /// recordings before format version 5. For reports and `--dump`: replay does not need it.
    pub path: Vec<u8>,
}

/// One recorded event of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A system call and its effects.
    Syscall(SyscallEvent),
    /// A signal delivered to the process at this point (after the previous event).
    Signal {
        /// Signal number.
        signo: i32,
        /// The `siginfo_t` delivered (128 bytes).
        info: Box<[u8; 128]>,
        /// True for a synchronous signal (a fault of the program's own instruction), which replays
        /// by itself; false for an asynchronous one, which the replayer delivers here.
        sync: bool,
    },
    /// A trapped RDTSC (or RDTSCP when `aux` is present) and the value it returned.
    Rdtsc {
        /// Time-stamp counter value.
        value: u64,
        /// TSC_AUX for RDTSCP.
        aux: Option<u32>,
    },
    /// A faulting CPUID and the (masked) answer given.
    Cpuid {
        /// EAX in.
        leaf: u32,
        /// ECX in.
        subleaf: u32,
        /// EAX, EBX, ECX, EDX out.
        out: [u32; 4],
    },
    /// The tracer patched the libc system-call site at `site` (whose 8 bytes were `orig`) to go
    /// through the syscall-buffering handler, mapping the handler's region first if needed
    /// (`replay_ptrace::syscallbuf`). Happens at the seccomp stop of the site's first bufferable call,
    /// which then restarts through the handler.
    SyscallbufPatch {
        /// Address of the `syscall` instruction.
        site: u64,
        /// The 8 bytes found there before patching.
        orig: [u8; 8],
    },
    /// System calls the handler made and buffered since the previous event, in order.
    Buffered(Vec<Buffered>),
    /// The scheduler gave the right to run user code to thread `to` (a thread of the same process):
    /// recorded in the stream of the thread that had it, at the point it gave it up (a system call
    /// that may block, a forced sync point, its exit). See `crate::sched`.
    Switch {
        /// Recorded tid of the thread that runs next.
        to: i32,
        /// Where the right was given up.
        why: SwitchPoint,
    },
    /// A forced sync point: the recorder interrupted the thread here (`PTRACE_INTERRUPT` after a
    /// time slice without a stop); replay runs it to the same point (`crate::sched`).
    SyncPoint {
        /// Where the thread stood.
        sig: Signature,
        /// CPU time its process used from the thread's previous resume to this point, in ns
        /// (information for `--dump`: replay does not use it, CPU time is not reproducible).
        cpu_ns: u64,
    },
    /// The process is exiting (`PTRACE_EVENT_EXIT`) with this wait status.
    Exit {
        /// Wait status (as `waitpid` reports it).
        status: i32,
        /// Rendezvous with the parent's wait.
        rendezvous: Vec<Rendezvous>,
    },
}

/// Where a thread gave up the right to run (the point a [`Event::Switch`] is replayed at).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SwitchPoint {
    /// At the seccomp stop of a system call that may block (`crate::sched::may_block`), before
    /// the call's own record.
    #[default]
    BlockingCall = 0,
    /// Right after its previous record, a system call, having held the right a whole time slice
    /// while other threads waited.
    AfterSyscall = 1,
    /// At the forced sync point recorded just before.
    SyncPoint = 2,
    /// At its exit (the leader) or death (other threads).
    Exit = 3,
}

impl SwitchPoint {
    fn from_u8(v: u8) -> Option<SwitchPoint> {
        Some(match v {
            0 => SwitchPoint::BlockingCall,
            1 => SwitchPoint::AfterSyscall,
            2 => SwitchPoint::SyncPoint,
            3 => SwitchPoint::Exit,
            _ => return None,
        })
    }
}

/// Where a thread stood at a forced sync point: its general registers and a checksum of the top of
/// its stack (`crate::sched::signature` computes it; `docs/recording-format.md` says why these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    /// r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8, rax, rcx, rdx, rsi, rdi, rip, eflags (RF and
    /// TF cleared), rsp, fs_base.
    pub regs: [u64; 19],
    /// 64-bit FNV-1a of the 256 bytes from rsp up (0 when they cannot be read).
    pub stack_hash: u64,
}

impl Signature {
    /// The instruction pointer.
    pub fn rip(&self) -> u64 {
        self.regs[15]
    }
}

/// An event and the recorded pid of the process it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Pid of the process at record time.
    pub pid: i32,
    /// The event.
    pub event: Event,
}

const K_SYSCALL: u8 = 1;
const K_SIGNAL: u8 = 2;
const K_RDTSC: u8 = 3;
const K_CPUID: u8 = 4;
const K_EXIT: u8 = 5;
const K_PATCH: u8 = 6;
const K_BUFFERED: u8 = 7;
const K_SWITCH: u8 = 8;
const K_SYNC: u8 = 9;
/// A system call with its path argument (format version 5): kind 1's fields, then the path.
const K_SYSCALL_PATH: u8 = 10;

fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_rdv(b: &mut Vec<u8>, r: &[Rendezvous]) {
    put_u32(b, r.len() as u32);
    for x in r {
        put_u64(b, x.obj);
        put_u64(b, x.seq);
    }
}

impl Record {
    /// Appends the encoding of this record to `b` (layout in `docs/recording-format.md`).
    pub fn encode(&self, b: &mut Vec<u8>) {
        put_u32(b, self.pid as u32);
        match &self.event {
            Event::Syscall(s) => {
                b.push(if s.path.is_empty() {
                    K_SYSCALL
                } else {
                    K_SYSCALL_PATH
                });
                put_u32(b, s.nr as u32);
                for a in s.args {
                    put_u64(b, a);
                }
                put_u64(b, s.result as u64);
                b.push(s.output);
                put_u64(b, s.data_hash);
                put_rdv(b, &s.rendezvous);
                put_u32(b, s.writes.len() as u32);
                for w in &s.writes {
                    put_u64(b, w.addr);
                    put_u32(b, w.data.len() as u32);
                    b.extend_from_slice(&w.data);
                }
                put_u32(b, s.extra.len() as u32);
                b.extend_from_slice(&s.extra);
                if !s.path.is_empty() {
                    put_u32(b, s.path.len() as u32);
                    b.extend_from_slice(&s.path);
                }
            }
            Event::Signal { signo, info, sync } => {
                b.push(K_SIGNAL);
                put_u32(b, *signo as u32);
                b.push(u8::from(*sync));
                b.extend_from_slice(&info[..]);
            }
            Event::Rdtsc { value, aux } => {
                b.push(K_RDTSC);
                put_u64(b, *value);
                b.push(u8::from(aux.is_some()));
                put_u32(b, aux.unwrap_or(0));
            }
            Event::Cpuid { leaf, subleaf, out } => {
                b.push(K_CPUID);
                put_u32(b, *leaf);
                put_u32(b, *subleaf);
                for o in out {
                    put_u32(b, *o);
                }
            }
            Event::Exit { status, rendezvous } => {
                b.push(K_EXIT);
                put_u32(b, *status as u32);
                put_rdv(b, rendezvous);
            }
            Event::SyscallbufPatch { site, orig } => {
                b.push(K_PATCH);
                put_u64(b, *site);
                b.extend_from_slice(orig);
            }
            Event::Switch { to, why } => {
                b.push(K_SWITCH);
                put_u32(b, *to as u32);
                b.push(*why as u8);
            }
            Event::SyncPoint { sig, cpu_ns } => {
                b.push(K_SYNC);
                for r in sig.regs {
                    put_u64(b, r);
                }
                put_u64(b, sig.stack_hash);
                put_u64(b, *cpu_ns);
            }
            Event::Buffered(recs) => {
                b.push(K_BUFFERED);
                put_u32(b, recs.len() as u32);
                for r in recs {
                    put_u32(b, r.nr as u32);
                    for a in r.args {
                        put_u64(b, a);
                    }
                    put_u64(b, r.result as u64);
                    put_u32(b, r.data.len() as u32);
                    b.extend_from_slice(&r.data);
                }
            }
        }
    }

    /// Decodes one record from the front of `c`.
    ///
    /// Errors: [`Error::Format`] on a truncated or unknown record.
    pub fn decode(c: &mut Cursor<'_>) -> Result<Record, Error> {
        let pid = c.u32()? as i32;
        let kind = c.u8()?;
        let event = match kind {
            K_SYSCALL | K_SYSCALL_PATH => {
                let nr = i64::from(c.u32()?);
                let mut args = [0u64; 6];
                for a in &mut args {
                    *a = c.u64()?;
                }
                let result = c.u64()? as i64;
                let output = c.u8()?;
                let data_hash = c.u64()?;
                let rendezvous = c.rdv()?;
                let n = c.u32()? as usize;
                let mut writes = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    let addr = c.u64()?;
                    let len = c.u32()? as usize;
                    writes.push(MemWrite {
                        addr,
                        data: c.bytes(len)?.to_vec(),
                    });
                }
                let len = c.u32()? as usize;
                let extra = c.bytes(len)?.to_vec();
                let path = if kind == K_SYSCALL_PATH {
                    let len = c.u32()? as usize;
                    c.bytes(len)?.to_vec()
                } else {
                    Vec::new()
                };
                Event::Syscall(SyscallEvent {
                    nr,
                    args,
                    result,
                    writes,
                    rendezvous,
                    output,
                    data_hash,
                    extra,
                    path,
                })
            }
            K_SIGNAL => {
                let signo = c.u32()? as i32;
                let sync = c.u8()? != 0;
                let mut info = Box::new([0u8; 128]);
                info.copy_from_slice(c.bytes(128)?);
                Event::Signal { signo, info, sync }
            }
            K_RDTSC => {
                let value = c.u64()?;
                let has = c.u8()? != 0;
                let aux = c.u32()?;
                Event::Rdtsc {
                    value,
                    aux: has.then_some(aux),
                }
            }
            K_CPUID => {
                let leaf = c.u32()?;
                let subleaf = c.u32()?;
                let mut out = [0u32; 4];
                for o in &mut out {
                    *o = c.u32()?;
                }
                Event::Cpuid { leaf, subleaf, out }
            }
            K_EXIT => {
                let status = c.u32()? as i32;
                Event::Exit {
                    status,
                    rendezvous: c.rdv()?,
                }
            }
            K_PATCH => {
                let site = c.u64()?;
                let orig: [u8; 8] = c.bytes(8)?.try_into().expect("8 bytes");
                Event::SyscallbufPatch { site, orig }
            }
            K_BUFFERED => {
                let n = c.u32()? as usize;
                let mut recs = Vec::with_capacity(n.min(4096));
                for _ in 0..n {
                    let nr = i64::from(c.u32()?);
                    let mut args = [0u64; 6];
                    for a in &mut args {
                        *a = c.u64()?;
                    }
                    let result = c.u64()? as i64;
                    let len = c.u32()? as usize;
                    recs.push(Buffered {
                        nr,
                        args,
                        result,
                        data: c.bytes(len)?.to_vec(),
                    });
                }
                Event::Buffered(recs)
            }
            K_SWITCH => {
                let to = c.u32()? as i32;
                let at = c.pos;
                let why = SwitchPoint::from_u8(c.u8()?)
                    .ok_or_else(|| Error::Format(format!("unknown switch point at byte {at}")))?;
                Event::Switch { to, why }
            }
            K_SYNC => {
                let mut regs = [0u64; 19];
                for r in &mut regs {
                    *r = c.u64()?;
                }
                let stack_hash = c.u64()?;
                Event::SyncPoint {
                    sig: Signature { regs, stack_hash },
                    cpu_ns: c.u64()?,
                }
            }
            k => {
                return Err(Error::Format(format!(
                    "unknown record kind {k} at byte {}",
                    c.pos
                )));
            }
        };
        Ok(Record { pid, event })
    }
}

/// A read position in a decoded chunk.
#[derive(Debug)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }
    /// True when every byte was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end =
            end.ok_or_else(|| Error::Format(format!("record truncated at byte {}", self.pos)))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.bytes(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(
            self.bytes(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(
            self.bytes(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn rdv(&mut self) -> Result<Vec<Rendezvous>, Error> {
        let n = self.u32()? as usize;
        (0..n)
            .map(|_| {
                Ok(Rendezvous {
                    obj: self.u64()?,
                    seq: self.u64()?,
                })
            })
            .collect()
    }
}

/// Writes a recording as the program runs: records are encoded on the tracer thread and handed in
/// chunks to a writer thread that compresses and appends them (so compression runs on another CPU
/// than the pinned tracer and tracees).
///
/// Memory is bounded: at most 4 chunks wait for the writer; beyond that the tracer blocks (a
/// recording never drops events).
#[derive(Debug)]
pub struct Writer {
    dir: PathBuf,
    meta: Meta,
    buf: Vec<u8>,
    count: usize,
    /// When the pending chunk was started ([`replay_ptrace::coarse_monotonic_ns`]: the tracer thread
    /// runs with RDTSC faulting, so no clock that reads the time-stamp counter).
    since_ns: u64,
    tx: Option<mpsc::SyncSender<(Vec<u8>, u32)>>,
    thread: Option<std::thread::JoinHandle<Result<WriterStats, Error>>>,
    /// Events pushed so far.
    pub events: u64,
}

/// Sizes written by a [`Writer`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Encoded (uncompressed) bytes.
    pub raw_bytes: u64,
    /// Bytes in `events.slr`.
    pub file_bytes: u64,
    /// Chunks written.
    pub chunks: u64,
}

impl Writer {
    /// Creates `dir` (it must not exist or be empty), writes `meta.json` and the stream header.
    ///
    /// Errors: [`Error::Io`] naming the path.
    pub fn create(dir: &Path, meta: Meta) -> Result<Writer, Error> {
        let io = |path: &Path| {
            let p = path.display().to_string();
            move |source| Error::Io { path: p, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        write_meta(dir, &meta)?;
        let events_path = dir.join(EVENTS_FILE);
        let mut file = File::create(&events_path).map_err(io(&events_path))?;
        let mut header = STREAM_MAGIC.to_vec();
        put_u32(&mut header, FORMAT_VERSION);
        put_u32(&mut header, 0);
        file.write_all(&header).map_err(io(&events_path))?;
        let (tx, rx) = mpsc::sync_channel::<(Vec<u8>, u32)>(4);
        let thread = std::thread::Builder::new()
            .name("sightline-rec-writer".into())
            .spawn(move || {
                let mut stats = WriterStats {
                    file_bytes: header.len() as u64,
                    ..Default::default()
                };
                let zerr = |source| Error::Io {
                    path: "zstd compress".into(),
                    source,
                };
                let mut zc = zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(zerr)?;
                // Each frame carries its content checksum, so a corrupt byte is an error on read
                // rather than other input bytes replayed.
                zc.include_checksum(true).map_err(zerr)?;
                for (raw, n) in rx {
                    let comp = zc.compress(&raw).map_err(zerr)?;
                    let mut frame = Vec::with_capacity(comp.len() + 16);
                    frame.extend_from_slice(CHUNK_MAGIC);
                    put_u32(&mut frame, raw.len() as u32);
                    put_u32(&mut frame, comp.len() as u32);
                    put_u32(&mut frame, n);
                    frame.extend_from_slice(&comp);
                    file.write_all(&frame).map_err(io(&events_path))?;
                    stats.raw_bytes += raw.len() as u64;
                    stats.file_bytes += frame.len() as u64;
                    stats.chunks += 1;
                }
                file.sync_data().map_err(io(&events_path))?;
                Ok(stats)
            })
            .map_err(|source| Error::Io {
                path: "writer thread".into(),
                source,
            })?;
        // The writer thread may run on any CPU: the tracer pins only itself.
        Ok(Writer {
            dir: dir.to_path_buf(),
            meta,
            buf: Vec::with_capacity(CHUNK_BYTES + 4096),
            count: 0,
            since_ns: replay_ptrace::coarse_monotonic_ns(),
            tx: Some(tx),
            thread: Some(thread),
            events: 0,
        })
    }

    /// Appends one record; hands a chunk to the writer when it is full or old.
    ///
    /// Errors: [`Error::Format`] for a record whose encoding alone exceeds [`MAX_CHUNK_RAW`] (a
    /// chunk the reader would refuse; nothing is written for it); [`Error::Io`] from the writer
    /// thread.
    pub fn push(&mut self, rec: &Record) -> Result<(), Error> {
        self.push_within(rec, MAX_CHUNK_RAW)
    }

    /// [`Writer::push`] with chunks of at most `limit` decoded bytes: the pending records are
    /// handed over first when `rec` would take the chunk over it.
    fn push_within(&mut self, rec: &Record, limit: u64) -> Result<(), Error> {
        let before = self.buf.len();
        rec.encode(&mut self.buf);
        let len = (self.buf.len() - before) as u64;
        if len > limit {
            self.buf.truncate(before);
            return Err(Error::Format(format!(
                "a record of {len} bytes (pid {}) exceeds the chunk limit of {limit} bytes",
                rec.pid
            )));
        }
        if self.buf.len() as u64 > limit {
            let tail = self.buf.split_off(before);
            self.flush()?;
            self.buf.extend_from_slice(&tail);
        }
        self.count += 1;
        self.events += 1;
        if self.count >= CHUNK_EVENTS
            || self.buf.len() >= CHUNK_BYTES
            || replay_ptrace::coarse_monotonic_ns().saturating_sub(self.since_ns) >= CHUNK_AGE_NS
        {
            self.flush()?;
        }
        Ok(())
    }

    /// Hands the pending records to the writer when the oldest has waited 200 ms: called
    /// from the recorder's timer, so records reach the file while no further event comes (a
    /// program that hangs or computes).
    pub fn flush_if_old(&mut self) -> Result<(), Error> {
        if self.count > 0
            && replay_ptrace::coarse_monotonic_ns().saturating_sub(self.since_ns) >= CHUNK_AGE_NS
        {
            self.flush()?;
        }
        Ok(())
    }

    /// Hands the pending records to the writer thread as one chunk.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.since_ns = replay_ptrace::coarse_monotonic_ns();
        if self.count == 0 {
            return Ok(());
        }
        let raw = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK_BYTES + 4096));
        let n = std::mem::take(&mut self.count) as u32;
        if let Some(tx) = &self.tx
            && tx.send((raw, n)).is_err()
        {
            return self.join().map(|_| ());
        }
        Ok(())
    }

    fn join(&mut self) -> Result<WriterStats, Error> {
        self.tx = None;
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| Error::Format("recording writer thread panicked".into()))?,
            None => Ok(WriterStats::default()),
        }
    }

    /// The metadata, for updates before [`Self::finish`].
    pub fn meta_mut(&mut self) -> &mut Meta {
        &mut self.meta
    }

    /// Rewrites `meta.json` now (the recorder does so once the first process runs, so a recording
    /// cut short by a crash of Sightline still names its first process).
    ///
    /// Errors: [`Error::Io`] naming `meta.json`.
    pub fn save_meta(&self) -> Result<(), Error> {
        write_meta(&self.dir, &self.meta)
    }

    /// Writes the last chunk, waits for the writer, and rewrites `meta.json` with the final status.
    pub fn finish(mut self) -> Result<WriterStats, Error> {
        self.flush()?;
        let stats = self.join()?;
        write_meta(&self.dir, &self.meta)?;
        Ok(stats)
    }
}

fn write_meta(dir: &Path, meta: &Meta) -> Result<(), Error> {
    let path = dir.join(META_FILE);
    let text = serde_json::to_string_pretty(meta).map_err(|e| Error::Format(e.to_string()))?;
    std::fs::write(&path, text + "\n").map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })
}

/// The threads of each recorded process, from a recording's `clone` records: process (its first
/// thread's recorded tid) to its threads' recorded tids, in order of creation, the first included.
/// A thread is a child of a `clone` with `CLONE_THREAD`; every other new pid is a process.
pub fn thread_groups(records: &[Record]) -> std::collections::BTreeMap<i32, Vec<i32>> {
    let mut group_of: std::collections::HashMap<i32, i32> = Default::default();
    let mut groups: std::collections::BTreeMap<i32, Vec<i32>> = Default::default();
    for r in records {
        let g = *group_of.entry(r.pid).or_insert_with(|| {
            groups.entry(r.pid).or_default().push(r.pid);
            r.pid
        });
        if let Event::Syscall(s) = &r.event
            && s.nr == libc::SYS_clone
            && s.result > 0
            && s.args[0] & crate::sched::CLONE_THREAD != 0
        {
            let t = s.result as i32;
            group_of.insert(t, g);
            groups.entry(g).or_default().push(t);
        }
    }
    groups
}

/// A recording read back into memory.
#[derive(Debug)]
pub struct Recording {
    /// The recording's directory (absolute when it could be resolved): kept files are in
    /// `dir/files/` (`crate::files`).
    pub dir: std::path::PathBuf,
    /// `meta.json`.
    pub meta: Meta,
    /// All records in recording order (a linearization of the per-object partial orders).
    pub records: Vec<Record>,
    /// True when the stream ends in a torn chunk (the recorder died mid-write); `records` holds the
    /// readable prefix.
    pub truncated: bool,
    /// Size of `events.slr` in bytes.
    pub file_bytes: u64,
    /// Total decoded size of the chunks in bytes.
    pub raw_bytes: u64,
    /// Number of chunks read.
    pub chunks: u64,
}

impl Recording {
    /// Reads `dir/meta.json` and `dir/events.slr`.
    ///
    /// Errors: [`Error::Io`] for unreadable files; [`Error::Format`] for a bad header, an unsupported
    /// version or a corrupt chunk (a torn last chunk is not an error: see [`Self::truncated`]).
    pub fn open(dir: &Path) -> Result<Recording, Error> {
        let meta_path = dir.join(META_FILE);
        let text = std::fs::read_to_string(&meta_path).map_err(|source| Error::Io {
            path: meta_path.display().to_string(),
            source,
        })?;
        let meta: Meta = serde_json::from_str(&text)
            .map_err(|e| Error::Format(format!("{}: {e}", meta_path.display())))?;
        if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&meta.version) {
            return Err(Error::Format(format!(
                "recording format version {} (this build reads {FORMAT_VERSION})",
                meta.version
            )));
        }
        let ev_path = dir.join(EVENTS_FILE);
        let mut data = Vec::new();
        File::open(&ev_path)
            .and_then(|mut f| f.read_to_end(&mut data))
            .map_err(|source| Error::Io {
                path: ev_path.display().to_string(),
                source,
            })?;
        if data.len() < 16 || &data[..8] != STREAM_MAGIC {
            return Err(Error::Format(format!(
                "{}: not a Sightline event stream",
                ev_path.display()
            )));
        }
        let version = u32::from_le_bytes(data[8..12].try_into().expect("4 bytes"));
        if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(Error::Format(format!(
                "{}: stream version {version}",
                ev_path.display()
            )));
        }
        let reserved = u32::from_le_bytes(data[12..16].try_into().expect("4 bytes"));
        if reserved != 0 {
            return Err(Error::Format(format!(
                "{}: header's reserved field is {reserved:#x}, not 0",
                ev_path.display()
            )));
        }
        let mut rec = Recording {
            dir: dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()),
            meta,
            records: Vec::new(),
            truncated: false,
            file_bytes: data.len() as u64,
            raw_bytes: 0,
            chunks: 0,
        };
        let mut pos = 16;
        while pos < data.len() {
            match read_chunk(&data, pos, rec.chunks, &mut rec.records)? {
                Some((next, raw_len)) => {
                    rec.raw_bytes += raw_len;
                    rec.chunks += 1;
                    pos = next;
                }
                None => {
                    rec.truncated = true;
                    break;
                }
            }
        }
        Ok(rec)
    }
}

/// Reads the chunk at byte `pos` of the event stream `data` (chunk number `index`), appending its
/// records to `out`; returns the next chunk's position and the chunk's decoded size, or `None`
/// for a torn last chunk (what a crash mid-write leaves: a prefix of a chunk up to the end of the
/// file).
///
/// Every field is checked before it is used (issue 22: an unchecked `raw_len` of 4294967295 was
/// printed by `replay --info` and sized an allocation): the magic, `comp_len` against the file
/// and against the zstd frame's own length, `raw_len` against [`MAX_CHUNK_RAW`], the frame's
/// declared content size and the decoded length, and `count` against the decoded bytes.
///
/// Errors: [`Error::Format`] naming the chunk and its byte offset.
fn read_chunk(
    data: &[u8],
    pos: usize,
    index: u64,
    out: &mut Vec<Record>,
) -> Result<Option<(usize, u64)>, Error> {
    let bad = |what: String| Error::Format(format!("chunk {index} at byte {pos}: {what}"));
    let rest = &data[pos..];
    let magic_len = rest.len().min(CHUNK_MAGIC.len());
    if rest[..magic_len] != CHUNK_MAGIC[..magic_len] {
        return Err(bad("no chunk magic".into()));
    }
    if rest.len() < 16 {
        return Ok(None);
    }
    let word = |at: usize| u32::from_le_bytes(rest[at..at + 4].try_into().expect("4 bytes"));
    let (raw_len, comp_len, count) = (word(4) as u64, word(8) as usize, word(12) as u64);
    let frame = &rest[16..];
    // zstd's own account of the frame (RFC 8878 section 3.1.1): an incomplete frame is either
    // torn (it runs to the end of the file) or corrupt.
    match zstd::zstd_safe::find_frame_compressed_size(frame) {
        Ok(size) if size == comp_len => {}
        Ok(size) => {
            return Err(bad(format!(
                "compressed length {comp_len} but its zstd frame is {size} bytes"
            )));
        }
        Err(_) if comp_len > frame.len() => return Ok(None),
        Err(code) => {
            return Err(bad(format!(
                "no complete zstd frame in its {comp_len} bytes ({})",
                zstd::zstd_safe::get_error_name(code)
            )));
        }
    }
    if raw_len > MAX_CHUNK_RAW {
        return Err(bad(format!(
            "decoded length {raw_len} is above the limit of {MAX_CHUNK_RAW} bytes"
        )));
    }
    let frame = &frame[..comp_len];
    match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(n)) if n == raw_len => {}
        Ok(None) => {}
        Ok(Some(n)) => {
            return Err(bad(format!(
                "decoded length {raw_len} but its zstd frame holds {n} bytes"
            )));
        }
        Err(_) => return Err(bad("unreadable zstd frame header".into())),
    }
    if count > raw_len {
        return Err(bad(format!(
            "{count} records cannot fit its {raw_len} decoded bytes"
        )));
    }
    let raw = zstd::bulk::decompress(frame, raw_len as usize).map_err(|e| bad(e.to_string()))?;
    if raw.len() as u64 != raw_len {
        return Err(bad(format!(
            "decoded length {raw_len} but it decodes to {} bytes",
            raw.len()
        )));
    }
    let mut c = Cursor::new(&raw);
    for i in 0..count {
        out.push(Record::decode(&mut c).map_err(|e| match e {
            Error::Format(m) => bad(format!("record {i}: {m}")),
            e => e,
        })?);
    }
    if !c.is_empty() {
        return Err(bad("trailing bytes after its records".into()));
    }
    Ok(Some((pos + 16 + comp_len, raw_len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Record> {
        vec![
            Record {
                pid: 42,
                event: Event::Syscall(SyscallEvent {
                    nr: 0,
                    args: [3, 0x7fff_0000, 4096, 0, 0, 0],
                    result: 5,
                    writes: vec![MemWrite {
                        addr: 0x7fff_0000,
                        data: b"hello".to_vec(),
                    }],
                    rendezvous: vec![Rendezvous { obj: 7, seq: 2 }],
                    output: 0,
                    data_hash: 0,
                    extra: vec![],
                    path: vec![],
                }),
            },
            Record {
                pid: 42,
                event: Event::Syscall(SyscallEvent {
                    nr: libc::SYS_openat,
                    args: [(-100i64) as u64, 0x7fff_1000, 0x80000, 0, 0, 0],
                    result: -2,
                    writes: vec![],
                    rendezvous: vec![],
                    output: 0,
                    data_hash: 0,
                    extra: vec![1, 2],
                    path: b"/etc/passwd".to_vec(),
                }),
            },
            Record {
                pid: 42,
                event: Event::Signal {
                    signo: 14,
                    info: Box::new([9; 128]),
                    sync: false,
                },
            },
            Record {
                pid: 43,
                event: Event::Rdtsc {
                    value: 123_456,
                    aux: Some(1),
                },
            },
            Record {
                pid: 43,
                event: Event::Cpuid {
                    leaf: 1,
                    subleaf: 0,
                    out: [1, 2, 3, 4],
                },
            },
            Record {
                pid: 43,
                event: Event::Switch {
                    to: 44,
                    why: SwitchPoint::AfterSyscall,
                },
            },
            Record {
                pid: 44,
                event: Event::SyncPoint {
                    sig: Signature {
                        regs: std::array::from_fn(|i| i as u64 * 3 + 1),
                        stack_hash: 0xfeed,
                    },
                    cpu_ns: 4_000_000,
                },
            },
            Record {
                pid: 43,
                event: Event::Exit {
                    status: 256,
                    rendezvous: vec![],
                },
            },
        ]
    }

    fn meta() -> Meta {
        Meta::for_test(42)
    }

    /// Issue 22: the writer did not enforce the reader's chunk limit. With a small limit: a
    /// record that would take the chunk over it starts a new chunk, one larger than the limit
    /// alone is refused (and not written), and what was written reads back.
    #[test]
    fn the_writer_keeps_chunks_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::create(dir.path(), meta()).unwrap();
        let recs = sample();
        let mut one = Vec::new();
        recs[0].encode(&mut one);
        let limit = one.len() as u64 + 8;
        w.push_within(&recs[0], limit).unwrap();
        w.push_within(&recs[0], limit).unwrap();
        let mut big = recs[0].clone();
        if let Event::Syscall(s) = &mut big.event {
            s.writes[0].data = vec![7; 64];
        }
        let e = w.push_within(&big, limit).unwrap_err().to_string();
        assert!(e.contains("exceeds the chunk limit of"), "{e}");
        let stats = w.finish().unwrap();
        assert_eq!(stats.chunks, 2);
        assert_eq!(stats.raw_bytes, 2 * one.len() as u64);
        let rec = Recording::open(dir.path()).unwrap();
        assert_eq!(rec.records, vec![recs[0].clone(), recs[0].clone()]);
    }

    #[test]
    fn records_round_trip_through_a_recording_directory() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::create(dir.path(), meta()).unwrap();
        for r in sample() {
            w.push(&r).unwrap();
        }
        let stats = w.finish().unwrap();
        assert_eq!(stats.chunks, 1);
        let rec = Recording::open(dir.path()).unwrap();
        assert_eq!(rec.records, sample());
        assert!(!rec.truncated);
        assert_eq!(rec.meta, meta());
    }

    #[test]
    fn a_corrupt_byte_inside_a_chunk_is_reported_not_decoded() {
        // Incompressible data is stored literally in the zstd frame, so a flipped byte there
        // decodes to other bytes unless the frame carries a checksum.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let data: Vec<u8> = (0..8192)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut rec = sample()[0].clone();
        if let Event::Syscall(s) = &mut rec.event {
            s.writes[0].data = data;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::create(dir.path(), meta()).unwrap();
        w.push(&rec).unwrap();
        w.finish().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = 16 + 16 + 4096;
        bytes[mid] ^= 0x55;
        std::fs::write(&path, &bytes).unwrap();
        match Recording::open(dir.path()) {
            Err(Error::Format(msg)) => assert!(msg.contains("chunk 0"), "{msg}"),
            Err(e) => panic!("expected a format error, got {e}"),
            Ok(r) => panic!(
                "corruption went unnoticed: {} records decoded",
                r.records.len()
            ),
        }
    }

    #[test]
    fn threads_are_grouped_by_their_clone_records() {
        let clone = |pid: i32, flags: u64, result: i64| Record {
            pid,
            event: Event::Syscall(SyscallEvent {
                nr: libc::SYS_clone,
                args: [flags, 0, 0, 0, 0, 0],
                result,
                writes: vec![],
                rendezvous: vec![],
                output: 0,
                data_hash: 0,
                extra: vec![],
                path: vec![],
            }),
        };
        let recs = vec![
            clone(10, 0x3d0f00, 11),                         // a thread of 10
            clone(11, 0x3d0f00, 12),                         // its thread starts one too
            clone(10, libc::SIGCHLD as u64 | 0x1200000, 20), // fork: a process
            Record {
                pid: 20,
                event: Event::Switch {
                    to: 20,
                    why: SwitchPoint::Exit,
                },
            },
        ];
        let g = thread_groups(&recs);
        assert_eq!(g[&10], vec![10, 11, 12]);
        assert_eq!(g[&20], vec![20]);
        assert_eq!(g.len(), 2);
    }

    #[test]
    fn a_version_2_recording_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = meta();
        m.version = 2;
        let mut w = Writer::create(dir.path(), m).unwrap();
        w.push(&sample()[0]).unwrap();
        w.finish().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let rec = Recording::open(dir.path()).unwrap();
        assert_eq!(rec.meta.version, 2);
        assert_eq!(rec.records, vec![sample()[0].clone()]);
    }

    #[test]
    fn a_torn_last_chunk_leaves_the_prefix_readable() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::create(dir.path(), meta()).unwrap();
        for r in sample() {
            w.push(&r).unwrap();
        }
        w.flush().unwrap();
        w.push(&sample()[0]).unwrap();
        w.finish().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        let full = std::fs::read(&path).unwrap();
        std::fs::write(&path, &full[..full.len() - 3]).unwrap();
        let rec = Recording::open(dir.path()).unwrap();
        assert!(rec.truncated);
        assert_eq!(rec.records, sample());
    }

    /// A two-chunk recording of [`sample`] (its first chunk at byte 16) and its stream's bytes.
    fn two_chunks() -> (tempfile::TempDir, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::create(dir.path(), meta()).unwrap();
        for r in sample() {
            w.push(&r).unwrap();
        }
        w.flush().unwrap();
        w.push(&sample()[0]).unwrap();
        w.finish().unwrap();
        let bytes = std::fs::read(dir.path().join(EVENTS_FILE)).unwrap();
        (dir, bytes)
    }

    /// Writes `bytes` as the stream of `dir` and returns the reader's one format error.
    fn open_corrupt(dir: &Path, bytes: &[u8]) -> String {
        std::fs::write(dir.join(EVENTS_FILE), bytes).unwrap();
        match Recording::open(dir) {
            Err(Error::Format(msg)) => msg,
            Err(e) => panic!("expected a format error, got {e}"),
            Ok(r) => panic!(
                "corruption went unnoticed: {} records, {} bytes decoded, truncated {}",
                r.records.len(),
                r.raw_bytes,
                r.truncated
            ),
        }
    }

    fn put(bytes: &mut [u8], at: usize, v: u32) {
        bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// Issue 22: the header's reserved field was not checked.
    #[test]
    fn issue_22_a_nonzero_reserved_header_field_is_an_error() {
        let (dir, mut bytes) = two_chunks();
        put(&mut bytes, 12, 7);
        let msg = open_corrupt(dir.path(), &bytes);
        assert!(
            msg.ends_with("events.slr: header's reserved field is 0x7, not 0"),
            "{msg}"
        );
    }

    /// Issue 22: `replay --info` printed "4294967295 bytes decoded", the unchecked `raw_len`.
    #[test]
    fn issue_22_chunk_fields_are_checked_against_the_frame() {
        let (dir, good) = two_chunks();
        let comp0 = u32::from_le_bytes(good[24..28].try_into().unwrap()) as usize;
        let raw0 = u32::from_le_bytes(good[20..24].try_into().unwrap());
        let second = 16 + 16 + comp0;

        let mut b = good.clone();
        put(&mut b, 20, u32::MAX);
        assert_eq!(
            open_corrupt(dir.path(), &b),
            "chunk 0 at byte 16: decoded length 4294967295 is above the limit of 3221225472 bytes"
        );
        let mut b = good.clone();
        put(&mut b, 20, raw0 + 1);
        assert_eq!(
            open_corrupt(dir.path(), &b),
            format!(
                "chunk 0 at byte 16: decoded length {} but its zstd frame holds {raw0} bytes",
                raw0 + 1
            )
        );

        // A compressed length past the first frame (but inside the file) is corruption, not a
        // torn chunk; one past the end of the file after a complete frame too.
        for bad_len in [comp0 as u32 + 5, u32::MAX] {
            let mut b = good.clone();
            put(&mut b, 24, bad_len);
            assert_eq!(
                open_corrupt(dir.path(), &b),
                format!(
                    "chunk 0 at byte 16: compressed length {bad_len} but its zstd frame is {comp0} bytes"
                )
            );
        }
        // Shorter than the frame: the frame is incomplete in its bytes.
        let mut b = good.clone();
        put(&mut b, 24, comp0 as u32 - 1);
        let msg = open_corrupt(dir.path(), &b);
        assert!(
            msg.starts_with(&format!(
                "chunk 0 at byte 16: compressed length {} but its zstd frame is {comp0} bytes",
                comp0 - 1
            )),
            "{msg}"
        );

        let mut b = good.clone();
        put(&mut b, 28, raw0 + 1);
        assert_eq!(
            open_corrupt(dir.path(), &b),
            format!(
                "chunk 0 at byte 16: {} records cannot fit its {raw0} decoded bytes",
                raw0 + 1
            )
        );
        let n = sample().len() as u32;
        let mut b = good.clone();
        put(&mut b, 28, n + 1);
        let msg = open_corrupt(dir.path(), &b);
        assert!(
            msg.starts_with(&format!("chunk 0 at byte 16: record {n}: ")),
            "{msg}"
        );
        let mut b = good.clone();
        put(&mut b, 28, n - 1);
        assert_eq!(
            open_corrupt(dir.path(), &b),
            "chunk 0 at byte 16: trailing bytes after its records"
        );

        // A flipped magic in the middle of the stream is corruption, not the end of the stream.
        let mut b = good.clone();
        b[second] ^= 0x20;
        assert_eq!(
            open_corrupt(dir.path(), &b),
            format!("chunk 1 at byte {second}: no chunk magic")
        );
        // Trailing garbage after the last chunk too.
        let mut b = good.clone();
        b.extend_from_slice(b"junk");
        assert_eq!(
            open_corrupt(dir.path(), &b),
            format!("chunk 2 at byte {}: no chunk magic", good.len())
        );

        // What a crash leaves is still a torn chunk: any prefix of the second chunk.
        for cut in [second + 2, second + 10, second + 20, good.len() - 1] {
            std::fs::write(dir.path().join(EVENTS_FILE), &good[..cut]).unwrap();
            let rec = Recording::open(dir.path()).unwrap();
            assert!(rec.truncated, "cut at {cut}");
            assert_eq!(rec.records, sample());
            assert_eq!(rec.chunks, 1);
            assert_eq!(rec.raw_bytes, raw0 as u64);
        }
    }
}
