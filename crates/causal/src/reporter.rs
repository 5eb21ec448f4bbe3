//! The reporter: a bounded lock-free queue, a background thread that batches reports to a sink,
//! and counters the program can read.
//!
//! # Never block the program
//! Each reporting thread has its own fixed-size queue to the reporter thread: a single-producer
//! single-consumer ring (`rtrb`), made at the thread's first event with room for `queue_capacity`
//! events (virtual memory: a page is touched when the ring first reaches it), and a second ring
//! of as many slots for events that do not fit the compact form (`crate::context::CompactEvent`,
//! 128 bytes; the others leave a mark in the first ring, so the thread's order is kept). Queuing
//! an event copies it into the ring's next slot and publishes it with one release store: no atomic
//! read-modify-write and no cache line written by other reporting threads. When a thread's ring is
//! full the event is dropped and counted ([`Stats::dropped_queue_full`]). Events reported where the
//! thread's ring is gone (thread-local destructors at thread exit) go through one shared
//! multi-producer queue (`crossbeam_queue::ArrayQueue`) instead. The reporter thread wakes every
//! `flush_interval` (or when a queue is half full), takes the rings of new threads, drains every
//! ring (a ring whose thread has exited is drained and then freed), turns the events into
//! [`Report`]s, encodes a batch and writes it to the sink. Events of one thread keep their order;
//! events of different threads are sent ring by ring (readers order them by their edges and HRT). A sink that fails (collector down) costs
//! the batch, counted in [`Stats::dropped_sink`]; the thread retries the connection at most once a
//! second. Reports are flushed at a normal exit (an `atexit(3)` handler) and by [`flush`].
//!
//! # Configuration
//! By code ([`init`] with a [`Config`]) or, on first use, from the environment ([`Config::from_env`]):
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `SIGHTLINE_CAUSAL_SINK` | `tcp://HOST:PORT`, `tls://HOST:PORT`, `udp://HOST:PORT`, `file:PATH`, or `off` | the destination, else `tcp://127.0.0.1:7831` |
//! | `SIGHTLINE_CAUSAL_DESTINATION` | this administrative domain's collector (`tcp://`, `tls://` or `udp://` URI), named in the metadata of every event reported here | none |
//! | `SIGHTLINE_CAUSAL_FOLLOW_DESTINATION` | `1`: send a report whose metadata names another domain's collector there | `0` |
//! | `SIGHTLINE_CAUSAL_TLS_CA` | PEM file of the certificate authorities a `tls://` collector's certificate must chain to | `/etc/ssl/certs/ca-certificates.crt` |
//! | `SIGHTLINE_CAUSAL_FORMAT` | `text` (X-Trace Report 1.0) or `binary` (native) | `text` |
//! | `SIGHTLINE_CAUSAL_SAMPLE` | probability in [0, 1] that a new task is sampled | `1` |
//! | `SIGHTLINE_CAUSAL_AGENT` | `Agent` of events that name none | program name |
//! | `SIGHTLINE_CAUSAL_QUEUE` | each reporting thread's queue capacity, in events, 16 to 1048576 | `4096` |
//! | `SIGHTLINE_CAUSAL_FLUSH_MS` | batching interval, ms | `20` |
//!
//! # Administrative domains
//! X-Trace follows a task across administrative domains, each with its own collector. A process
//! given its domain's collector ([`Config::destination`]) names it in the metadata of every event
//! it reports (X-Trace's Destination option, [`crate::metadata::DESTINATION_OPTION`]), so the
//! metadata it propagates tells the next hop where this hop's reports are. Where an event follows
//! metadata that names another domain's collector (the task crossed into this domain), its
//! report carries that collector in the `EdgeDestination` key: where the store holding its parent
//! is, for `sightline show` to say where this domain's view ends. Reports go to the sink, which
//! defaults to the destination; with [`Config::follow_destination`] a report whose metadata names
//! another collector (a process with no destination of its own, working for a task from another
//! domain) goes to that collector instead, at most [`MAX_ROUTES`] of them (the rest go to the
//! sink). Off by default: metadata from outside would otherwise choose where this process
//! connects. See `docs/causal-metadata.md`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;

use crate::context::{CompactEvent, RawEvent};
use crate::metadata::{Metadata, destination_in};
use crate::report::Report;
use crate::wire::{DEFAULT_PORT, WireFormat, encode_frame};

/// A callback sink: receives every report on the reporter thread.
pub type Callback = Arc<dyn Fn(&Report) + Send + Sync>;

/// Where reports go.
#[derive(Clone)]
pub enum Sink {
    /// TCP to a collector, each report framed with a 4-byte big-endian length.
    Tcp(SocketAddr),
    /// TLS over TCP to a collector (`sightline collect --xtrace-tls`), framed as over TCP. The
    /// collector's certificate must be valid for `host` and chain to a certificate authority of
    /// [`Config::tls_ca`].
    Tls {
        /// The collector's address.
        addr: SocketAddr,
        /// The name its certificate must be valid for (the URI's host).
        host: String,
    },
    /// UDP, one report per datagram, no length prefix.
    Udp(SocketAddr),
    /// Frames (as over TCP) appended to a file.
    File(PathBuf),
    /// A function called on the reporter thread with each report (tests, custom exporters). A
    /// call that panics costs that report (counted in [`Stats::dropped_sink`]); the reporter goes
    /// on. The callback must not call [`flush`] (it would wait for itself until its timeout).
    Callback(Callback),
    /// Nowhere: events are still built and counted as sent (for measuring the library itself).
    Off,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sink::Tcp(a) => write!(f, "tcp://{a}"),
            Sink::Tls { addr, host } => write!(f, "tls://{host} ({addr})"),
            Sink::Udp(a) => write!(f, "udp://{a}"),
            Sink::File(p) => write!(f, "file:{}", p.display()),
            Sink::Callback(_) => f.write_str("callback"),
            Sink::Off => f.write_str("off"),
        }
    }
}

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A `SIGHTLINE_CAUSAL_*` variable (or a `Sink::parse` input) has a value that does not parse.
    #[error("{var}={value:?}: {why}")]
    BadValue {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What was expected.
        why: &'static str,
    },
    /// [`init`] was called after the reporter had started (explicitly or by a first event).
    #[error("the causal reporter is already running (init must come before the first event)")]
    AlreadyInitialized,
    /// The reporter thread could not be spawned.
    #[error("spawning the causal reporter thread")]
    Spawn(#[source] std::io::Error),
}

impl Sink {
    /// Parses `tcp://HOST:PORT`, `tls://HOST:PORT`, `udp://HOST:PORT`, `file:PATH` (or
    /// `file://PATH`) or `off`
    /// (`:PORT` defaults to 7831). A host name is resolved here, which may block on DNS: when the
    /// reporter starts from the environment, that happens on the thread of the first event unless
    /// [`init_from_env`] or [`init`] ran earlier.
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] naming `SIGHTLINE_CAUSAL_SINK`.
    pub fn parse(s: &str) -> Result<Sink, ConfigError> {
        let bad = |why| ConfigError::BadValue {
            var: "SIGHTLINE_CAUSAL_SINK",
            value: s.to_string(),
            why,
        };
        let s = s.trim();
        let addr = |rest: &str| -> Result<SocketAddr, ConfigError> {
            let with_port = if rest
                .rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
            {
                rest.to_string()
            } else {
                format!("{rest}:{DEFAULT_PORT}")
            };
            with_port
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .ok_or_else(|| bad("HOST:PORT that resolves"))
        };
        if s == "off" || s == "none" {
            Ok(Sink::Off)
        } else if let Some(rest) = s.strip_prefix("tcp://") {
            Ok(Sink::Tcp(addr(rest)?))
        } else if let Some(rest) = s.strip_prefix("tls://") {
            let host = match rest.rsplit_once(':') {
                Some((h, p)) if p.parse::<u16>().is_ok() => h,
                _ => rest,
            };
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            if rustls::pki_types::ServerName::try_from(host.as_str()).is_err() {
                return Err(bad("tls://HOST:PORT with a host name or address"));
            }
            Ok(Sink::Tls {
                addr: addr(rest)?,
                host,
            })
        } else if let Some(rest) = s.strip_prefix("udp://") {
            Ok(Sink::Udp(addr(rest)?))
        } else if let Some(rest) = s
            .strip_prefix("file://")
            .or_else(|| s.strip_prefix("file:"))
        {
            if rest.is_empty() {
                return Err(bad("a file path after file:"));
            }
            Ok(Sink::File(PathBuf::from(rest)))
        } else {
            Err(bad(
                "tcp://HOST:PORT, tls://HOST:PORT, udp://HOST:PORT, file:PATH or off",
            ))
        }
    }
}

/// Reporter configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where reports go.
    pub sink: Sink,
    /// Payload format for TCP, UDP and file sinks.
    pub format: WireFormat,
    /// Probability in [0, 1] that [`crate::start_task`] samples a new task (clamped; NaN is 0).
    pub sample_rate: f64,
    /// `Agent` of events that name none.
    pub agent: String,
    /// Each reporting thread's queue capacity in events, clamped to [16,
    /// [`MAX_QUEUE_CAPACITY`]] (the shared queue for events from thread-exit destructors holds
    /// at most [`FALLBACK_QUEUE_CAPACITY`]).
    pub queue_capacity: usize,
    /// How long the reporter thread sleeps between batches when the queue is not filling up;
    /// raised to [`MIN_FLUSH_INTERVAL`] when shorter.
    pub flush_interval: Duration,
    /// This administrative domain's collector, as a sink URI (`tcp://`, `tls://` or `udp://`,
    /// at most [`crate::metadata::MAX_DESTINATION_LEN`] bytes): named in the metadata of every
    /// event reported here (see the module docs, "Administrative domains"). `None`: events carry
    /// on whatever Destination their task's metadata brought.
    pub destination: Option<String>,
    /// Send each report whose metadata names another domain's collector to that collector
    /// rather than to the sink (X-Trace's "where reports should be sent").
    pub follow_destination: bool,
    /// PEM file of the certificate authorities that `tls://` collectors' certificates must chain
    /// to; `None`: `/etc/ssl/certs/ca-certificates.crt` (the system's bundle on Debian).
    pub tls_ca: Option<PathBuf>,
}

impl Default for Config {
    /// TCP to 127.0.0.1:7831, text format, every task sampled, agent = program name, 4096 events per thread,
    /// 20 ms.
    fn default() -> Config {
        Config {
            sink: Sink::Tcp(SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT))),
            format: WireFormat::Text,
            sample_rate: 1.0,
            agent: program_name(),
            queue_capacity: 4096,
            flush_interval: Duration::from_millis(20),
            destination: None,
            follow_destination: false,
            tls_ca: None,
        }
    }
}

fn program_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

impl Config {
    /// The default configuration with `SIGHTLINE_CAUSAL_*` variables applied (table in the module
    /// docs).
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] for a variable that does not parse.
    pub fn from_env() -> Result<Config, ConfigError> {
        let mut c = Config::default();
        let var = |name: &'static str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if let Some(v) = var("SIGHTLINE_CAUSAL_DESTINATION") {
            let bad = |why| ConfigError::BadValue {
                var: "SIGHTLINE_CAUSAL_DESTINATION",
                value: v.clone(),
                why,
            };
            let v = v.trim();
            if v.len() > crate::metadata::MAX_DESTINATION_LEN {
                return Err(bad("a URI of at most 253 bytes"));
            }
            match Sink::parse(v) {
                Ok(sink @ (Sink::Tcp(_) | Sink::Tls { .. } | Sink::Udp(_))) => c.sink = sink,
                _ => return Err(bad("tcp://HOST:PORT, tls://HOST:PORT or udp://HOST:PORT")),
            }
            c.destination = Some(v.to_string());
        }
        if let Some(v) = var("SIGHTLINE_CAUSAL_SINK") {
            c.sink = Sink::parse(&v)?;
        }
        if let Some(v) = var("SIGHTLINE_CAUSAL_FOLLOW_DESTINATION") {
            c.follow_destination = match v.trim() {
                "1" | "true" | "yes" => true,
                "0" | "false" | "no" => false,
                _ => {
                    return Err(ConfigError::BadValue {
                        var: "SIGHTLINE_CAUSAL_FOLLOW_DESTINATION",
                        value: v.clone(),
                        why: "1 or 0",
                    });
                }
            };
        }
        if let Some(v) = var("SIGHTLINE_CAUSAL_TLS_CA") {
            c.tls_ca = Some(PathBuf::from(v.trim()));
        }
        if let Some(v) = var("SIGHTLINE_CAUSAL_FORMAT") {
            c.format = WireFormat::parse(&v).ok_or(ConfigError::BadValue {
                var: "SIGHTLINE_CAUSAL_FORMAT",
                value: v.clone(),
                why: "text or binary",
            })?;
        }
        if let Some(v) = var("SIGHTLINE_CAUSAL_SAMPLE") {
            c.sample_rate = parse_env("SIGHTLINE_CAUSAL_SAMPLE", &v, "a number in [0, 1]", |r| {
                (0.0..=1.0).contains(r)
            })?;
        }
        if let Some(v) = var("SIGHTLINE_CAUSAL_AGENT") {
            c.agent = v;
        }
        if let Some(v) = var("SIGHTLINE_CAUSAL_QUEUE") {
            c.queue_capacity = parse_env(
                "SIGHTLINE_CAUSAL_QUEUE",
                &v,
                "an integer in [16, 1048576]",
                |n| (16..=MAX_QUEUE_CAPACITY).contains(n),
            )?;
        }
        if let Some(v) = var("SIGHTLINE_CAUSAL_FLUSH_MS") {
            let ms = parse_env(
                "SIGHTLINE_CAUSAL_FLUSH_MS",
                &v,
                "an integer >= 1",
                |&n: &u64| n >= 1,
            )?;
            c.flush_interval = Duration::from_millis(ms);
        }
        Ok(c)
    }
}

/// The value `v` of the variable `var`, trimmed and parsed, when `accept` takes it.
///
/// # Errors
/// [`ConfigError::BadValue`] with `why` (what the value must be) otherwise.
fn parse_env<T: std::str::FromStr>(
    var: &'static str,
    v: &str,
    why: &'static str,
    accept: impl Fn(&T) -> bool,
) -> Result<T, ConfigError> {
    v.trim()
        .parse::<T>()
        .ok()
        .filter(|x| accept(x))
        .ok_or_else(|| ConfigError::BadValue {
            var,
            value: v.to_string(),
            why,
        })
}

/// Counters of the reporter since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events accepted onto the queue.
    pub queued: u64,
    /// Events dropped because the queue was full (the program outran the reporter).
    pub dropped_queue_full: u64,
    /// Reports dropped because the sink failed (collector unreachable, disk full, report too
    /// large for a datagram, or above `wire::MAX_FRAME_LEN` for a frame).
    pub dropped_sink: u64,
    /// Reports written to the sink.
    pub sent: u64,
}

impl Stats {
    /// All drops.
    pub fn dropped(&self) -> u64 {
        self.dropped_queue_full + self.dropped_sink
    }
}

struct Shared {
    /// The shared queue for events of threads whose own queue is gone (thread exit).
    fallback: ArrayQueue<RawEvent>,
    /// Each thread's queue capacity.
    queue_capacity: usize,
    /// The consumer ends of thread queues made since the reporter thread last looked.
    new_queues: Mutex<Vec<QueueEnd>>,
    /// The counters of every live thread queue (those of freed queues are added to `queued` and
    /// `dropped_queue_full`).
    queue_counts: Mutex<Vec<Arc<QueueCounts>>>,
    /// `submit` checks a queue's length when the count of its queued events has these bits clear.
    len_check_mask: u64,
    sample_threshold: u64,
    /// Events queued on the shared queue and on thread queues since freed.
    queued: AtomicU64,
    /// Events dropped by a full shared queue and by thread queues since freed.
    dropped_queue_full: AtomicU64,
    dropped_sink: AtomicU64,
    sent: AtomicU64,
    /// The reporter thread; `None` when it could not be spawned.
    worker: Option<Thread>,
    flush_requested: AtomicU64,
    flush_done: Mutex<u64>,
    flush_cv: Condvar,
    stopping: AtomicBool,
    threads: Mutex<HashMap<u32, String>>,
    /// The configuration it started with (a forked child restarts with it).
    config: Config,
    /// The options block naming [`Config::destination`] (shared by every context of a task
    /// started here); `None` without a destination.
    domain_options: Option<Arc<[u8]>>,
}

/// The shortest batching interval: 1 ms, as `SIGHTLINE_CAUSAL_FLUSH_MS` requires.
pub const MIN_FLUSH_INTERVAL: Duration = Duration::from_millis(1);

/// The largest queue capacity accepted, in events: each reporting thread's queue is allocated
/// whole at its first event, so a larger value would be a large allocation per thread (or an
/// allocation failure).
pub const MAX_QUEUE_CAPACITY: usize = 1 << 20;

/// The capacity, in events, of the shared queue that takes events reported after a thread's own
/// queue is gone (in thread-local destructors at thread exit); at most `queue_capacity`.
pub const FALLBACK_QUEUE_CAPACITY: usize = 1024;

/// One thread queue's counters, each written only by its thread (plain stores, no
/// read-modify-write) and read by [`stats`].
#[derive(Default)]
struct QueueCounts {
    queued: AtomicU64,
    dropped_queue_full: AtomicU64,
}

/// One slot of a thread's ring: a compact event, or a mark that the thread's next event is the
/// next one of its ring of full events. Two cache lines (the mark takes a niche of the event).
pub(crate) enum Queued {
    Compact(CompactEvent),
    Full,
}

/// The reporter thread's end of one thread queue.
struct QueueEnd {
    consumer: rtrb::Consumer<Queued>,
    /// Events that do not fit the compact form, in the order of their marks in `consumer`.
    full: rtrb::Consumer<RawEvent>,
    /// The thread's kernel tid (compact events do not carry it).
    tid: u32,
    counts: Arc<QueueCounts>,
}

/// A reporting thread's end of its queue: a ring of compact events and marks, and a ring of the
/// full events the marks stand for. Every full event has a mark, pushed after it and popped
/// after it, so the full ring never holds more events than the other ring: both have
/// `queue_capacity` slots, and a full event finds room whenever its mark does.
struct ThreadQueue {
    /// The reporter it was made for (a forked child has another one).
    shared: &'static Shared,
    producer: rtrb::Producer<Queued>,
    full: rtrb::Producer<RawEvent>,
    counts: Arc<QueueCounts>,
    /// This thread's copies of `counts`.
    queued: u64,
    dropped_queue_full: u64,
}

thread_local! {
    /// This thread's queue to the reporter, made at its first event.
    static QUEUE: RefCell<Option<ThreadQueue>> = const { RefCell::new(None) };
}

/// This process's reporter (leaked on start: it lives as long as the process). Emptied in the
/// child of a `fork(2)` without `exec`, whose copy names a reporter thread that does not exist
/// there; the child then starts its own reporter on first use, with the parent's configuration.
static SHARED: crate::sys::PerProcess<Shared> = crate::sys::PerProcess::new();

/// Serialises starting the reporter. A spin flag rather than a `Mutex` so that the fork child
/// handler can release it if another thread of the parent held it at the fork.
static INIT_BUSY: AtomicBool = AtomicBool::new(false);

struct InitGuard;

fn init_lock() -> InitGuard {
    while INIT_BUSY
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
    InitGuard
}

impl Drop for InitGuard {
    fn drop(&mut self) {
        INIT_BUSY.store(false, Ordering::Release);
    }
}

/// Starts the reporter with `config`. Call it before the first event; otherwise the reporter
/// starts on first use with [`Config::from_env`].
///
/// # Errors
/// [`ConfigError::AlreadyInitialized`], [`ConfigError::Spawn`] (the reporter then exists without
/// a thread: events are counted as dropped when the queue fills, nothing is sent).
pub fn init(config: Config) -> Result<(), ConfigError> {
    let _g = init_lock();
    if SHARED.get().is_some() {
        return Err(ConfigError::AlreadyInitialized);
    }
    start(config)
}

/// Starts the reporter from the environment unless it runs already; returns the configuration
/// error, if any (the reporter then runs with the defaults).
///
/// In the child of a `fork(2)` without `exec`, the reporter restarts with the parent's
/// configuration rather than reading the environment again.
pub fn init_from_env() -> Result<(), ConfigError> {
    let _g = init_lock();
    if SHARED.get().is_some() {
        return Ok(());
    }
    if let Some(parent) = SHARED.before_fork() {
        return start(parent.config.clone());
    }
    match Config::from_env() {
        Ok(c) => start(c),
        Err(e) => {
            start(Config::default())?;
            Err(e)
        }
    }
}

/// `config` with every value in its documented range: queue capacity in [16,
/// [`MAX_QUEUE_CAPACITY`]], sample rate in [0, 1] (NaN samples nothing), flush interval at least
/// [`MIN_FLUSH_INTERVAL`] (zero would make the reporter thread wake continuously).
fn effective(mut config: Config) -> Config {
    config.queue_capacity = config.queue_capacity.clamp(16, MAX_QUEUE_CAPACITY);
    config.sample_rate = if config.sample_rate.is_nan() {
        0.0
    } else {
        config.sample_rate.clamp(0.0, 1.0)
    };
    config.flush_interval = config.flush_interval.max(MIN_FLUSH_INTERVAL);
    config
}

fn start(config: Config) -> Result<(), ConfigError> {
    let config = effective(config);
    let domain_options = match &config.destination {
        Some(d) => match crate::metadata::options_with_destination(&[], d) {
            Ok(block) => Some(Arc::from(block)),
            Err(_) => {
                return Err(ConfigError::BadValue {
                    var: "SIGHTLINE_CAUSAL_DESTINATION",
                    value: d.clone(),
                    why: "a URI of at most 253 bytes",
                });
            }
        },
        None => None,
    };
    let cap = config.queue_capacity;
    let rate = config.sample_rate;
    let sample_threshold = if rate >= 1.0 {
        u64::MAX
    } else {
        (rate * u64::MAX as f64) as u64
    };
    let (tx, rx) = std::sync::mpsc::channel::<&'static Shared>();
    let spawned = std::thread::Builder::new()
        .name("causal-reporter".into())
        .spawn(move || {
            let Ok(shared) = rx.recv() else { return };
            Worker::new(shared.config.clone(), shared).run();
        });
    let (worker, spawn_error) = match spawned {
        Ok(h) => (Some(h.thread().clone()), None),
        Err(e) => (None, Some(e)),
    };
    let shared: &'static Shared = Box::leak(Box::new(Shared {
        fallback: ArrayQueue::new(cap.min(FALLBACK_QUEUE_CAPACITY)),
        queue_capacity: cap,
        new_queues: Mutex::new(Vec::new()),
        queue_counts: Mutex::new(Vec::new()),
        len_check_mask: len_check_mask(cap),
        sample_threshold,
        queued: AtomicU64::new(0),
        dropped_queue_full: AtomicU64::new(0),
        dropped_sink: AtomicU64::new(0),
        sent: AtomicU64::new(0),
        worker,
        flush_requested: AtomicU64::new(0),
        flush_done: Mutex::new(0),
        flush_cv: Condvar::new(),
        stopping: AtomicBool::new(false),
        threads: Mutex::new(HashMap::new()),
        domain_options,
        config,
    }));
    let _ = tx.send(shared);
    SHARED.set(shared);
    static HOOKS: std::sync::Once = std::sync::Once::new();
    HOOKS.call_once(|| {
        // A failed registration only loses the exit-time flush; `flush()` still works.
        let _ = crate::sys::at_exit(flush_at_exit);
        // A failed registration leaves a forked child without a reporter of its own: its events
        // are then counted as dropped when the inherited queue fills.
        let _ = crate::sys::at_fork_child(after_fork_child);
    });
    match spawn_error {
        Some(e) => Err(ConfigError::Spawn(e)),
        None => Ok(()),
    }
}

/// One less than the interval, in events, between `submit`'s looks at the queue's length: the
/// largest power of two at most an eighth of `cap` (and at most 64), so that the queue cannot go
/// from half full to full between two looks.
fn len_check_mask(cap: usize) -> u64 {
    let every = (cap / 8).clamp(1, 64);
    (1u64 << every.ilog2()) - 1
}

/// Runs in the child of a `fork(2)`, on its only thread, before `fork` returns: only atomic stores
/// and thread-local `Cell` writes (no locks, no allocation), as `pthread_atfork(3)` asks.
extern "C" fn after_fork_child() {
    SHARED.forget_in_child();
    INIT_BUSY.store(false, Ordering::Release);
    crate::ids::reseed_after_fork();
    crate::context::forget_tid_after_fork();
}

extern "C" fn flush_at_exit() {
    shutdown(Duration::from_secs(2));
}

#[inline]
fn shared() -> &'static Shared {
    if let Some(s) = SHARED.get() {
        return s;
    }
    shared_slow()
}

#[cold]
fn shared_slow() -> &'static Shared {
    if let Err(e) = init_from_env() {
        eprintln!("causal: {e}; using the defaults");
    }
    // `start` always publishes a reporter (without a thread when spawning failed); another
    // thread's `init` may have published one first.
    loop {
        if let Some(s) = SHARED.get() {
            return s;
        }
        let _ = init_from_env();
    }
}

/// Head sampling for a new task: true with the configured probability.
/// The options block naming this process's administrative domain's collector
/// ([`Config::destination`]), `None` without one.
#[inline]
pub(crate) fn domain_options() -> Option<&'static Arc<[u8]>> {
    shared().domain_options.as_ref()
}

pub(crate) fn sample_new_task() -> bool {
    let t = shared().sample_threshold;
    t == u64::MAX || crate::ids::random_u64() < t
}

/// Queues one compact event on this thread's queue, or counts it dropped when that is full.
#[inline(always)]
pub(crate) fn submit_compact(ev: CompactEvent) {
    let s = shared();
    // `try_with`: in a thread-local destructor at thread exit the queue may be gone; the event
    // then takes the shared queue, as it does when the queue is busy (which nothing that runs
    // under the borrow can cause: it is only a guard against a panic).
    let done = QUEUE
        .try_with(|q| {
            let Ok(mut q) = q.try_borrow_mut() else {
                return false;
            };
            let q = local_queue(&mut q, s);
            let pushed = q.producer.push(Queued::Compact(ev)).is_ok();
            q.counted(s, pushed);
            true
        })
        .unwrap_or(false);
    if !done {
        submit_shared(s, ev.into_raw(crate::context::thread_tid()));
    }
}

/// Queues one event on this thread's queue, or counts it dropped when that is full.
#[inline(always)]
pub(crate) fn submit(ev: RawEvent) {
    let s = shared();
    let mut ev = Some(ev);
    // `try_with`: as in `submit_compact`.
    let _ = QUEUE.try_with(|q| {
        if let Ok(mut q) = q.try_borrow_mut() {
            let q = local_queue(&mut q, s);
            let Some(ev) = ev.take() else { return };
            // Room for the mark means room for the event (see `ThreadQueue`); the mark's push
            // then cannot fail, only this thread pushes.
            let pushed = q.producer.slots() > 0
                && q.full.push(ev).is_ok()
                && q.producer.push(Queued::Full).is_ok();
            q.counted(s, pushed);
        }
    });
    if let Some(ev) = ev {
        submit_shared(s, ev);
    }
}

/// The thread's queue `slot` for reporter `s`, made first when the thread has none for it.
#[inline(always)]
fn local_queue<'a>(slot: &'a mut Option<ThreadQueue>, s: &'static Shared) -> &'a mut ThreadQueue {
    if !slot.as_ref().is_some_and(|q| std::ptr::eq(q.shared, s)) {
        *slot = Some(new_thread_queue(s));
    }
    slot.get_or_insert_with(|| new_thread_queue(s))
}

impl ThreadQueue {
    /// Counts one event queued (`pushed`) or dropped on a full queue, waking the reporter when
    /// the queue is half full or full.
    #[inline(always)]
    fn counted(&mut self, s: &'static Shared, pushed: bool) {
        if pushed {
            self.queued += 1;
            self.counts.queued.store(self.queued, Ordering::Relaxed);
            // Reading the ring's fill level loads the reporter's end of it (a cross-core miss):
            // only every `len_check_mask + 1` events, at most an eighth of the capacity, so
            // half full cannot be missed before full.
            if self.queued & s.len_check_mask == 0 && self.producer.slots() < s.queue_capacity / 2 {
                s.wake();
            }
        } else {
            self.dropped_queue_full += 1;
            self.counts
                .dropped_queue_full
                .store(self.dropped_queue_full, Ordering::Relaxed);
            s.wake();
        }
    }
}

/// Makes this thread's queue to reporter `s` and hands its other end to the reporter thread.
#[cold]
fn new_thread_queue(s: &'static Shared) -> ThreadQueue {
    let (producer, consumer) = rtrb::RingBuffer::new(s.queue_capacity);
    let (full, full_consumer) = rtrb::RingBuffer::new(s.queue_capacity);
    let counts = Arc::new(QueueCounts::default());
    s.queue_counts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(counts.clone());
    s.new_queues
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(QueueEnd {
            consumer,
            full: full_consumer,
            tid: crate::context::thread_tid(),
            counts: counts.clone(),
        });
    ThreadQueue {
        shared: s,
        producer,
        full,
        counts,
        queued: 0,
        dropped_queue_full: 0,
    }
}

/// Queues one event on the shared queue, or counts it dropped when that is full.
#[cold]
fn submit_shared(s: &'static Shared, ev: RawEvent) {
    match s.fallback.push(ev) {
        Ok(()) => {
            s.queued.fetch_add(1, Ordering::Relaxed);
            if s.fallback.len() > s.fallback.capacity() / 2 {
                s.wake();
            }
        }
        Err(_) => {
            s.dropped_queue_full.fetch_add(1, Ordering::Relaxed);
            s.wake();
        }
    }
}

/// Records the name of thread `tid` for `ThreadName`, replacing (or, for an unnamed thread,
/// removing) the name of an exited thread that had the same tid: the kernel reuses tids.
pub(crate) fn register_thread(tid: u32, name: Option<&str>) {
    let mut threads = shared().threads.lock().unwrap_or_else(|e| e.into_inner());
    match name {
        Some(name) => threads.insert(tid, name.to_string()),
        None => threads.remove(&tid),
    };
}

/// The reporter's counters (zero before it starts; in the child of a `fork(2)` without `exec`,
/// the child's own, from zero).
pub fn stats() -> Stats {
    match SHARED.get() {
        None => Stats::default(),
        Some(s) => {
            // Under the lock, so that a queue being freed is counted once (its counts move to
            // the totals under the same lock).
            let counts = s.queue_counts.lock().unwrap_or_else(|e| e.into_inner());
            let mut st = Stats {
                queued: s.queued.load(Ordering::Relaxed),
                dropped_queue_full: s.dropped_queue_full.load(Ordering::Relaxed),
                dropped_sink: s.dropped_sink.load(Ordering::Relaxed),
                sent: s.sent.load(Ordering::Relaxed),
            };
            for c in counts.iter() {
                st.queued += c.queued.load(Ordering::Relaxed);
                st.dropped_queue_full += c.dropped_queue_full.load(Ordering::Relaxed);
            }
            st
        }
    }
}

/// Events and reports dropped so far (queue full plus sink failures).
pub fn dropped() -> u64 {
    stats().dropped()
}

/// Waits until every event queued before the call has been written to the sink, or `timeout`
/// passes. Returns true when flushed. Does nothing (true) before the reporter starts.
pub fn flush(timeout: Duration) -> bool {
    let Some(s) = SHARED.get() else { return true };
    if s.worker.is_none() {
        return s.fallback.is_empty()
            && s.new_queues
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .all(|q| q.consumer.is_empty());
    }
    let ticket = s.flush_requested.fetch_add(1, Ordering::AcqRel) + 1;
    s.wake();
    let deadline = Instant::now() + timeout;
    let mut done = s.flush_done.lock().unwrap_or_else(|e| e.into_inner());
    while *done < ticket {
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        done = s
            .flush_cv
            .wait_timeout(done, deadline - now)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    true
}

/// Flushes (see [`flush`]) and stops the reporter thread; later events are queued but not sent
/// until the process exits. Runs automatically at a normal exit.
pub fn shutdown(timeout: Duration) -> bool {
    let ok = flush(timeout);
    if let Some(s) = SHARED.get() {
        s.stopping.store(true, Ordering::Release);
        s.wake();
    }
    ok
}

/// Per-process values the reporter adds to every report.
struct ProcessInfo {
    host: String,
    pid: String,
    /// `CLOCK_REALTIME - CLOCK_MONOTONIC` in ns, to turn an event's HRT into wall time without a
    /// second clock read on the caller's path.
    wall_offset_ns: i128,
}

impl ProcessInfo {
    fn now() -> ProcessInfo {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        ProcessInfo {
            host,
            pid: std::process::id().to_string(),
            wall_offset_ns: wall_offset_ns(),
        }
    }
}

/// `CLOCK_REALTIME - CLOCK_MONOTONIC` now, in ns.
fn wall_offset_ns() -> i128 {
    let mono = crate::sys::monotonic_ns();
    let wall = crate::sys::realtime_ns();
    wall as i128 - mono as i128
}

/// A connection to one sink, opened on first use and reopened after a failure (TCP and TLS at
/// most once a second).
enum Conn {
    Tcp {
        addr: SocketAddr,
        stream: Option<TcpStream>,
        retry_at: Option<Instant>,
    },
    Tls {
        addr: SocketAddr,
        host: rustls::pki_types::ServerName<'static>,
        /// `Err`: why no TLS client could be configured (said once on stderr; every report to
        /// this sink is counted dropped).
        config: Result<Arc<rustls::ClientConfig>, String>,
        stream: Option<Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>>,
        retry_at: Option<Instant>,
    },
    Udp {
        addr: SocketAddr,
        socket: Option<UdpSocket>,
    },
    File {
        path: PathBuf,
        file: Option<File>,
    },
    Callback(Callback),
    Off,
}

/// The most collectors a reporter sends to besides its sink ([`Config::follow_destination`]);
/// reports naming further ones go to the sink.
pub const MAX_ROUTES: usize = 8;

/// The system's certificate authorities on Debian, for `tls://` sinks without
/// [`Config::tls_ca`].
const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A TLS client configuration trusting the certificate authorities in the PEM file `ca`.
fn tls_client_config(ca: &std::path::Path) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(ca).map_err(|e| format!("{}: {e}", ca.display()))?;
    for cert in certs {
        let cert = cert.map_err(|e| format!("{}: {e}", ca.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("{}: {e}", ca.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("{}: no certificates", ca.display()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

impl Conn {
    /// The (not yet opened) connection to `sink`; `tls_ca` as [`Config::tls_ca`].
    fn new(sink: &Sink, tls_ca: Option<&std::path::Path>) -> Conn {
        match sink {
            Sink::Tcp(addr) => Conn::Tcp {
                addr: *addr,
                stream: None,
                retry_at: None,
            },
            Sink::Tls { addr, host } => {
                let ca = tls_ca.unwrap_or(std::path::Path::new(SYSTEM_CA_BUNDLE));
                let config = tls_client_config(ca);
                if let Err(why) = &config {
                    eprintln!("causal: no TLS to {host}: {why}; its reports are dropped");
                }
                Conn::Tls {
                    addr: *addr,
                    host: rustls::pki_types::ServerName::try_from(host.clone())
                        .unwrap_or_else(|_| rustls::pki_types::ServerName::from(addr.ip())),
                    config,
                    stream: None,
                    retry_at: None,
                }
            }
            Sink::Udp(addr) => Conn::Udp {
                addr: *addr,
                socket: None,
            },
            Sink::File(path) => Conn::File {
                path: path.clone(),
                file: None,
            },
            Sink::Callback(f) => Conn::Callback(f.clone()),
            Sink::Off => Conn::Off,
        }
    }

    /// Writes `reports` (encoded with `format`, through `buf`); returns how many were written.
    fn send(&mut self, buf: &mut Vec<u8>, reports: &[Report], format: WireFormat) -> u64 {
        let n = reports.len() as u64;
        match self {
            Conn::Off => n,
            Conn::Callback(f) => {
                // A panicking callback costs its report, counted, not the reporter thread (which
                // would leave every later event to fill the queue and every flush to time out).
                let mut ok = 0;
                for r in reports {
                    let call = std::panic::AssertUnwindSafe(|| f(r));
                    if std::panic::catch_unwind(call).is_ok() {
                        ok += 1;
                    }
                }
                ok
            }
            Conn::Tcp {
                addr,
                stream,
                retry_at,
            } => {
                let framed = encode_frames(buf, reports, format);
                if stream.is_none() && retry_at.is_none_or(|t| Instant::now() >= t) {
                    match connect(addr) {
                        Ok(s) => {
                            *stream = Some(s);
                            *retry_at = None;
                        }
                        Err(_) => *retry_at = Some(Instant::now() + Duration::from_secs(1)),
                    }
                }
                match stream {
                    Some(s) => match s.write_all(buf) {
                        Ok(()) => framed,
                        Err(_) => {
                            *stream = None;
                            *retry_at = Some(Instant::now() + Duration::from_secs(1));
                            0
                        }
                    },
                    None => 0,
                }
            }
            Conn::Tls {
                addr,
                host,
                config,
                stream,
                retry_at,
            } => {
                let Ok(config) = config else { return 0 };
                let framed = encode_frames(buf, reports, format);
                if stream.is_none() && retry_at.is_none_or(|t| Instant::now() >= t) {
                    let opened = connect(addr).ok().and_then(|tcp| {
                        let tls =
                            rustls::ClientConnection::new(config.clone(), host.clone()).ok()?;
                        Some(Box::new(rustls::StreamOwned::new(tls, tcp)))
                    });
                    match opened {
                        Some(s) => {
                            *stream = Some(s);
                            *retry_at = None;
                        }
                        None => *retry_at = Some(Instant::now() + Duration::from_secs(1)),
                    }
                }
                match stream {
                    // The handshake runs in the first write; a certificate the authorities do
                    // not vouch for fails it, and the connection is retried a second later.
                    Some(s) => match s.write_all(buf).and_then(|()| s.flush()) {
                        Ok(()) => framed,
                        Err(_) => {
                            *stream = None;
                            *retry_at = Some(Instant::now() + Duration::from_secs(1));
                            0
                        }
                    },
                    None => 0,
                }
            }
            Conn::Udp { addr, socket } => {
                if socket.is_none() {
                    let bind: SocketAddr = if addr.is_ipv4() {
                        ([0, 0, 0, 0], 0).into()
                    } else {
                        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                    };
                    *socket = UdpSocket::bind(bind).ok();
                }
                let mut sent = 0;
                if let Some(sock) = socket {
                    for r in reports {
                        buf.clear();
                        format.encode(r, buf);
                        if buf.len() <= 65_507 && sock.send_to(buf, *addr).is_ok() {
                            sent += 1;
                        }
                    }
                }
                sent
            }
            Conn::File { path, file } => {
                if file.is_none() {
                    *file = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&*path)
                        .ok();
                }
                let framed = encode_frames(buf, reports, format);
                match file {
                    Some(f) => match f.write_all(buf) {
                        Ok(()) => framed,
                        Err(_) => {
                            *file = None;
                            0
                        }
                    },
                    None => 0,
                }
            }
        }
    }
}

/// A TCP connection to a collector, with the reporter's timeouts.
fn connect(addr: &SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(addr, Duration::from_secs(1))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

impl Shared {
    fn wake(&self) {
        if let Some(w) = &self.worker {
            w.unpark();
        }
    }
}

struct Worker {
    config: Config,
    shared: &'static Shared,
    info: ProcessInfo,
    /// Turns event stamps into `CLOCK_MONOTONIC` ns.
    clock: crate::clock::Converter,
    conn: Conn,
    buf: Vec<u8>,
    reports: Vec<Report>,
    /// The thread queues taken so far.
    queues: Vec<QueueEnd>,
    /// With [`Config::follow_destination`]: the other domains' collectors reports were sent
    /// to, by the Destination their metadata names (`None`: the URI does not parse as a sink;
    /// such reports go to the sink).
    routes: Vec<(Box<str>, Option<Conn>)>,
}

/// Most events turned into reports per batch.
const BATCH: usize = 1024;

impl Worker {
    fn new(config: Config, shared: &'static Shared) -> Worker {
        let conn = Conn::new(&config.sink, config.tls_ca.as_deref());
        Worker {
            config,
            shared,
            info: ProcessInfo::now(),
            clock: crate::clock::Converter::new(),
            conn,
            buf: Vec::with_capacity(64 << 10),
            reports: Vec::new(),
            queues: Vec::new(),
            routes: Vec::new(),
        }
    }

    fn run(mut self) {
        let mut clock_checked = Instant::now();
        loop {
            // Follow wall-clock steps (NTP, settimeofday) so Timestamp stays right in long runs.
            if clock_checked.elapsed() >= Duration::from_secs(1) {
                self.info.wall_offset_ns = wall_offset_ns();
                clock_checked = Instant::now();
            }
            let flush_ticket = self.shared.flush_requested.load(Ordering::Acquire);
            let drained = self.drain();
            if !self.reports.is_empty() {
                self.send_batch();
            }
            if let Conn::File { file: Some(f), .. } = &mut self.conn {
                let _ = f.flush();
            }
            {
                let mut done = self
                    .shared
                    .flush_done
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                if *done < flush_ticket {
                    *done = flush_ticket;
                    self.shared.flush_cv.notify_all();
                }
            }
            if self.shared.stopping.load(Ordering::Acquire) && self.all_empty() {
                return;
            }
            if drained == 0 && self.shared.flush_requested.load(Ordering::Acquire) == flush_ticket {
                std::thread::park_timeout(self.config.flush_interval);
            }
        }
    }

    /// Takes the queues of new threads, then turns every queued event into a report (sending
    /// full batches); frees the queues of exited threads once drained. Returns the count.
    fn drain(&mut self) -> usize {
        // A calibration pair later than (nearly) every stamp about to be converted.
        self.clock.refresh();
        {
            let mut new = self
                .shared
                .new_queues
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            self.queues.append(&mut new);
        }
        let mut drained = 0;
        let mut queues = std::mem::take(&mut self.queues);
        queues.retain_mut(|q| {
            // Whether the thread had exited before this drain: then nothing more can come.
            let exited = q.consumer.is_abandoned();
            loop {
                let ev = match q.consumer.peek() {
                    Err(_) => break,
                    // The full event first, then its mark (see `ThreadQueue`).
                    Ok(Queued::Full) => {
                        let ev = q.full.pop();
                        let _ = q.consumer.pop();
                        match ev {
                            Ok(ev) => ev,
                            // Never: a mark is pushed after its event.
                            Err(_) => continue,
                        }
                    }
                    Ok(Queued::Compact(_)) => match q.consumer.pop() {
                        Ok(Queued::Compact(c)) => c.into_raw(q.tid),
                        _ => continue,
                    },
                };
                self.push_report(ev);
                drained += 1;
            }
            if exited {
                self.free_queue(&q.counts);
            }
            !exited
        });
        self.queues = queues;
        while let Some(ev) = self.shared.fallback.pop() {
            self.push_report(ev);
            drained += 1;
        }
        drained
    }

    /// Adds the report of `ev` to the batch, sending it when full.
    fn push_report(&mut self, ev: RawEvent) {
        let r = self.to_report(ev);
        self.reports.push(r);
        if self.reports.len() >= BATCH {
            self.send_batch();
        }
    }

    /// Moves a freed queue's final counts into the totals.
    fn free_queue(&self, counts: &Arc<QueueCounts>) {
        let mut all = self
            .shared
            .queue_counts
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        all.retain(|c| !Arc::ptr_eq(c, counts));
        self.shared
            .queued
            .fetch_add(counts.queued.load(Ordering::Relaxed), Ordering::Relaxed);
        self.shared.dropped_queue_full.fetch_add(
            counts.dropped_queue_full.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
    }

    /// Whether every queue is empty (no new thread queue waiting either).
    fn all_empty(&self) -> bool {
        self.shared.fallback.is_empty()
            && self.queues.iter().all(|q| q.consumer.is_empty())
            && self
                .shared
                .new_queues
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .all(|q| q.consumer.is_empty())
    }

    fn to_report(&self, ev: RawEvent) -> Report {
        let mut r = Report::new(Metadata::from_parts(ev.task, ev.op, ev.options.clone()));
        r.edges = ev.parents().to_vec();
        r.agent = Some(
            ev.agent
                .map(str::to_string)
                .unwrap_or_else(|| self.config.agent.clone()),
        );
        r.label = Some(ev.label.into_owned());
        r.host = Some(self.info.host.clone());
        r.process_id = Some(self.info.pid.clone());
        r.thread_id = Some(u64::from(ev.tid));
        r.thread_name = self
            .shared
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&ev.tid)
            .cloned();
        let hrt_ns = self.clock.to_ns(ev.stamp);
        r.hrt_ns = Some(hrt_ns);
        r.timestamp_ns = u64::try_from(hrt_ns as i128 + self.info.wall_offset_ns).ok();
        r.fields = ev
            .fields
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.to_string()))
            .collect();
        r
    }

    fn send_batch(&mut self) {
        let n = self.reports.len() as u64;
        let format = self.config.format;
        let ok = if self.config.follow_destination {
            self.send_routed()
        } else {
            self.conn.send(&mut self.buf, &self.reports, format)
        };
        self.shared.sent.fetch_add(ok, Ordering::Relaxed);
        self.shared
            .dropped_sink
            .fetch_add(n - ok, Ordering::Relaxed);
        self.reports.clear();
    }

    /// Sends the batch with [`Config::follow_destination`]: each report to the collector its
    /// metadata's Destination names, when that is not this process's own destination and is
    /// one of the first [`MAX_ROUTES`] seen; the rest to the sink. Reports keep their order per
    /// collector. Returns how many were written.
    fn send_routed(&mut self) -> u64 {
        let format = self.config.format;
        let own = self.config.destination.as_deref();
        // The route of each report: `None` for the sink, else an index into `routes`.
        let mut route_of = Vec::with_capacity(self.reports.len());
        for r in &self.reports {
            let dest = destination_in(r.metadata.options_bytes()).filter(|d| Some(*d) != own);
            let route = dest.and_then(|d| {
                if let Some(i) = self.routes.iter().position(|(u, _)| &**u == d) {
                    return Some(i);
                }
                if self.routes.len() >= MAX_ROUTES {
                    return None;
                }
                let conn = Sink::parse(d)
                    .ok()
                    .filter(|s| matches!(s, Sink::Tcp(_) | Sink::Tls { .. } | Sink::Udp(_)))
                    .map(|s| Conn::new(&s, self.config.tls_ca.as_deref()));
                self.routes.push((d.into(), conn));
                Some(self.routes.len() - 1)
            });
            route_of.push(route.filter(|&i| self.routes[i].1.is_some()));
        }
        let mut ok = 0;
        let mut group = Vec::new();
        for target in std::iter::once(None).chain((0..self.routes.len()).map(Some)) {
            group.clear();
            group.extend(
                self.reports
                    .iter()
                    .zip(&route_of)
                    .filter(|(_, r)| **r == target)
                    .map(|(rep, _)| rep.clone()),
            );
            if group.is_empty() {
                continue;
            }
            let conn = match target {
                None => &mut self.conn,
                Some(i) => self.routes[i]
                    .1
                    .as_mut()
                    .expect("routes kept have a connection"),
            };
            ok += conn.send(&mut self.buf, &group, format);
        }
        ok
    }
}

/// Frames `reports` into `buf` (cleared first), leaving out any report whose payload exceeds
/// [`crate::wire::MAX_FRAME_LEN`]: readers reject such a frame and cannot resynchronise after it,
/// so one oversized report would cost every later report on the connection. Returns the number
/// of reports framed; the caller counts the rest as dropped by the sink.
fn encode_frames(buf: &mut Vec<u8>, reports: &[Report], format: WireFormat) -> u64 {
    buf.clear();
    let mut framed = 0;
    for r in reports {
        let at = buf.len();
        encode_frame(buf, r, format);
        if buf.len() - at - 4 > crate::wire::MAX_FRAME_LEN {
            buf.truncate(at);
        } else {
            framed += 1;
        }
    }
    framed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_set_by_code_is_brought_into_range() {
        let c = effective(Config {
            queue_capacity: usize::MAX,
            sample_rate: f64::NAN,
            flush_interval: Duration::ZERO,
            ..Config::default()
        });
        assert_eq!(
            (c.queue_capacity, c.sample_rate, c.flush_interval),
            (MAX_QUEUE_CAPACITY, 0.0, MIN_FLUSH_INTERVAL)
        );
        let c = effective(Config {
            queue_capacity: 0,
            sample_rate: 7.0,
            ..Config::default()
        });
        assert_eq!(
            (c.queue_capacity, c.sample_rate, c.flush_interval),
            (16, 1.0, Duration::from_millis(20))
        );
    }

    #[test]
    fn unnamed_thread_reusing_a_tid_gets_no_stale_thread_name() {
        let tid = u32::MAX - 7;
        register_thread(tid, Some("exited worker"));
        register_thread(tid, None);
        assert_eq!(shared().threads.lock().unwrap().get(&tid), None);
        register_thread(tid, Some("new worker"));
        assert_eq!(
            shared()
                .threads
                .lock()
                .unwrap()
                .get(&tid)
                .map(String::as_str),
            Some("new worker")
        );
    }

    #[test]
    fn queue_length_is_checked_at_most_every_eighth_of_the_capacity() {
        assert_eq!(len_check_mask(16), 1);
        assert_eq!(len_check_mask(100), 7);
        assert_eq!(len_check_mask(16384), 63);
        assert_eq!(len_check_mask(MAX_QUEUE_CAPACITY), 63);
    }

    #[test]
    fn a_tls_client_needs_a_readable_file_of_certificates() {
        let dir = std::env::temp_dir().join(format!("causal-tls-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.pem");
        let e = tls_client_config(&missing).unwrap_err();
        assert!(e.contains("missing.pem"), "{e}");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = tls_client_config(&empty).unwrap_err();
        assert!(e.contains("no certificates"), "{e}");
        // A TLS sink whose authorities cannot be read drops its reports, counted by the caller.
        let mut conn = Conn::new(
            &Sink::Tls {
                addr: ([127, 0, 0, 1], 9).into(),
                host: "localhost".into(),
            },
            Some(&missing),
        );
        let r = Report::new(Metadata::new(
            crate::TaskId::from_u64(1).unwrap(),
            crate::OpId::new(2),
        ));
        assert_eq!(conn.send(&mut Vec::new(), &[r], WireFormat::Text), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sink_parsing() {
        assert!(
            matches!(Sink::parse("tcp://127.0.0.1:9000").unwrap(), Sink::Tcp(a) if a.port() == 9000)
        );
        assert!(
            matches!(Sink::parse("udp://127.0.0.1").unwrap(), Sink::Udp(a) if a.port() == 7831)
        );
        assert!(
            matches!(Sink::parse("file:/tmp/x.frames").unwrap(), Sink::File(p) if p == std::path::Path::new("/tmp/x.frames"))
        );
        assert!(matches!(Sink::parse("off").unwrap(), Sink::Off));
        assert!(
            matches!(Sink::parse("tls://localhost:7832").unwrap(), Sink::Tls { addr, host } if addr.port() == 7832 && host == "localhost")
        );
        assert!(
            matches!(Sink::parse("tls://[::1]:7832").unwrap(), Sink::Tls { addr, host } if addr.is_ipv6() && host == "::1")
        );
        assert!(matches!(
            Sink::parse("http://x"),
            Err(ConfigError::BadValue {
                var: "SIGHTLINE_CAUSAL_SINK",
                ..
            })
        ));
    }
}
