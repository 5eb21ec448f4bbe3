//! The child processes of causal's own tests (`crates/causal/tests`).
//!
//! The reporter is global per process and starts with the process's first event, so a test of
//! how it starts, flushes at exit, overflows or forks needs a fresh process; so does a test of
//! propagation to a child process. Each such test runs this program with the name of a scenario
//! (`causal-test-child SCENARIO`) and the environment the scenario reads (`SIGHTLINE_CAUSAL_*`,
//! `HOSTILE_FILE`), and checks what it prints on stdout and what it reports. A scenario that
//! fails an assertion exits non-zero. Cargo builds it for the integration tests, which find it
//! through `CARGO_BIN_EXE_causal-test-child` (`tests/common/mod.rs`). Not installed anywhere: `publish = false`.

use std::path::PathBuf;
use std::time::Duration;

use causal::reporter::{Config, ConfigError, Sink};
use causal::{Report, WireFormat};

const WAIT: Duration = Duration::from_secs(10);

const SCENARIOS: &[(&str, fn())] = &[
    ("exit-without-flush", exit_without_flush),
    ("overflow", overflow),
    ("udp-and-file", udp_and_file),
    ("sampling", sampling),
    ("sink-down", sink_down),
    ("bad-env", bad_env),
    ("propagated", propagated),
    ("report-in-tls-destructor", report_in_tls_destructor),
    ("fork", fork),
    ("oversized-report", oversized_report),
    ("queue-out-of-range", queue_out_of_range),
    ("panicking-callback", panicking_callback),
    ("collector-never-reads", collector_never_reads),
    ("context-calls-in-kv-iterator", context_calls_in_kv_iterator),
];

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    match SCENARIOS.iter().find(|(n, _)| *n == name) {
        Some((_, run)) => run(),
        None => {
            let names: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
            eprintln!("causal-test-child: unknown scenario {name:?}; one of {names:?}");
            std::process::exit(2);
        }
    }
}

/// 101 events and a normal exit without a flush: the reporter's atexit hook must send them.
fn exit_without_flush() {
    let ctx = causal::start_task("before exit", []);
    for i in 0..100u32 {
        causal::report("work", [("i", i.into())]);
    }
    println!("task {}", ctx.task_id());
    std::process::exit(0);
}

/// A burst of 20,001 events into whatever queue `SIGHTLINE_CAUSAL_QUEUE` sets.
fn overflow() {
    let _ctx = causal::start_task("flood", []);
    for _ in 0..20_000 {
        causal::report("x", []);
    }
    let s = causal::stats();
    println!("queued {}", s.queued);
    println!("dropped_queue_full {}", s.dropped_queue_full);
}

/// Two events of one task, flushed, to the sink `SIGHTLINE_CAUSAL_SINK` names.
fn udp_and_file() {
    let ctx = causal::start_task("datagram", [("k", "v".into())]);
    causal::report("second", []);
    println!("task {}", ctx.task_id());
    assert!(causal::flush(WAIT));
    println!("sent {}", causal::stats().sent);
}

/// 1,000 tasks under the sampling rate `SIGHTLINE_CAUSAL_SAMPLE` sets: how many were sampled,
/// how many told downstream they were not, and the events queued.
fn sampling() {
    let mut sampled = 0;
    let mut flags_clear = 0;
    for _ in 0..1000 {
        let ctx = causal::start_task("maybe", []);
        causal::report("inside", [("n", 1u8.into())]);
        let mut h = http::HeaderMap::new();
        causal::propagation::inject_current(&mut h);
        if ctx.is_sampled() {
            sampled += 1;
        } else {
            assert!(h.get("X-Trace").is_none());
        }
        // The decision travels: an unsampled task sends a traceparent with the flag clear.
        if h.get("traceparent")
            .is_some_and(|v| v.to_str().unwrap().ends_with("-00"))
        {
            flags_clear += 1;
        }
    }
    assert!(causal::flush(WAIT));
    println!("sampled {sampled}");
    println!("flags_clear {flags_clear}");
    println!("queued {}", causal::stats().queued);
}

/// Six events to a sink nobody listens on.
fn sink_down() {
    let _ctx = causal::start_task("nobody listens", []);
    for _ in 0..5 {
        causal::report("lost", []);
    }
    assert!(causal::flush(WAIT));
    let s = causal::stats();
    println!("sent {}", s.sent);
    println!("dropped_sink {}", s.dropped_sink);
    println!("dropped {}", causal::dropped());
}

/// The configuration the environment gives, or its error.
fn bad_env() {
    match Config::from_env() {
        Ok(_) => println!("config ok"),
        Err(e) => println!("config error: {e}"),
    }
}

/// A child process that continues its parent's task (`propagation::command_with_current`).
fn propagated() {
    assert!(
        causal::propagation::attach_from_env(),
        "the parent passed a context"
    );
    causal::report("child work", [("role", "child".into())]);
    assert!(causal::flush(WAIT));
}

struct ReportsOnDrop;

impl Drop for ReportsOnDrop {
    fn drop(&mut self) {
        // Runs after CURRENT's destructor (see below): the thread's context is gone.
        let r = causal::report("in destructor", []);
        let c = causal::current();
        let prev = causal::set_current(None);
        println!(
            "DESTRUCTOR report={r:?} current={} prev={}",
            c.is_some(),
            prev.is_some()
        );
    }
}

thread_local! {
    static REPORTS_ON_DROP: ReportsOnDrop = const { ReportsOnDrop };
}

/// Reporting from a thread-local destructor that runs after the context's own.
fn report_in_tls_destructor() {
    std::thread::spawn(|| {
        // Thread-local destructors run in reverse order of first use: touching this one before
        // the context makes it run after the context's.
        REPORTS_ON_DROP.with(|_| {});
        causal::start_task("task", []);
        assert!(causal::report("alive", []).is_some());
    })
    .join()
    .unwrap();
}

/// The file sink at `HOSTILE_FILE`, binary frames.
fn file_config() -> Config {
    let path = PathBuf::from(std::env::var("HOSTILE_FILE").expect("HOSTILE_FILE set"));
    Config {
        sink: Sink::File(path),
        format: WireFormat::Binary,
        ..Config::default()
    }
}

/// fork(2) without exec: the child reports through its own reporter, with fresh ids.
fn fork() {
    causal::reporter::init(file_config()).unwrap();
    causal::start_task("before fork", []);
    assert!(causal::reporter::flush(WAIT));
    // SAFETY: fork(2) in this single-purpose program; the child only reports an event and exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        causal::report("in child", []);
        // A normal exit: the atexit flush must send the child's event.
        std::process::exit(0);
    }
    causal::report("parent after fork", []);
    let mut status = 0;
    // SAFETY: waiting for the child forked above; `status` is a valid out pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status}"
    );
    assert!(causal::reporter::flush(WAIT));
}

/// A report larger than a frame may be, between two small ones.
fn oversized_report() {
    causal::reporter::init(file_config()).unwrap();
    causal::start_task("small before", []);
    let big = "x".repeat(causal::wire::MAX_FRAME_LEN + 1);
    causal::report("huge", [("body", big.into())]);
    causal::report("small after", []);
    assert!(causal::reporter::flush(WAIT));
    let s = causal::stats();
    println!("STATS sent={} dropped_sink={}", s.sent, s.dropped_sink);
}

/// `SIGHTLINE_CAUSAL_QUEUE` out of range: a typed error, and the first event runs with the
/// defaults instead of allocating the huge queue.
fn queue_out_of_range() {
    let e = Config::from_env().unwrap_err();
    assert!(
        matches!(
            e,
            ConfigError::BadValue {
                var: "SIGHTLINE_CAUSAL_QUEUE",
                ..
            }
        ),
        "{e}"
    );
    causal::start_task("task", []);
    println!("QUEUE OK");
}

/// A callback sink that panics on one report.
fn panicking_callback() {
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let sink = Sink::Callback(std::sync::Arc::new(|r: &Report| {
        assert_ne!(
            r.label.as_deref(),
            Some("boom"),
            "callback refuses this report"
        );
        SEEN.lock()
            .unwrap()
            .push(r.label.clone().unwrap_or_default());
    }));
    causal::reporter::init(Config {
        sink,
        ..Config::default()
    })
    .unwrap();
    causal::start_task("first", []);
    assert!(causal::reporter::flush(WAIT));
    causal::report("boom", []);
    assert!(causal::reporter::flush(WAIT));
    causal::report("after", []);
    let flushed = causal::reporter::flush(WAIT);
    let s = causal::stats();
    println!(
        "FLUSHED {flushed} SEEN {:?} SENT {} DROPPED_SINK {}",
        SEEN.lock().unwrap(),
        s.sent,
        s.dropped_sink
    );
}

/// 20 MB of events to a collector that accepts and never reads.
fn collector_never_reads() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepts connections and never reads from them (a stuck collector).
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            held.push(s);
        }
    });
    let config = Config {
        sink: Sink::Tcp(addr),
        queue_capacity: 256,
        flush_interval: Duration::from_millis(1),
        ..Config::default()
    };
    causal::reporter::init(config).unwrap();
    causal::start_task("task", []);
    let body = "b".repeat(4096);
    for _ in 0..5000 {
        causal::report("event", [("body", body.clone().into())]);
    }
    // The loop ended: the program was never blocked. The reporter may still be stuck in a write
    // (2 s timeout) for a while; its counters must add up once it is done.
    let flushed = causal::reporter::flush(Duration::from_secs(20));
    let s = causal::stats();
    println!(
        "FLUSHED {flushed} QUEUED {} DROPPED_QUEUE {} SENT {} DROPPED_SINK {}",
        s.queued, s.dropped_queue_full, s.sent, s.dropped_sink
    );
}

/// Context calls from inside the lazy key/value iterator of a report, which holds the context.
fn context_calls_in_kv_iterator() {
    causal::start_task("task", []);
    let fields = (0..2u64).map(|i| {
        let inner = causal::report("inner", []);
        let cur = causal::current();
        let prev = causal::set_current(None);
        let joined = {
            causal::join_current(std::iter::empty());
            "joined"
        };
        println!(
            "INNER report={inner:?} current={} prev={} {joined}",
            cur.is_some(),
            prev.is_some()
        );
        ("i", causal::Value::U64(i))
    });
    let outer = causal::report("outer", fields);
    let builder = causal::event("builder").kv("k", 1u8).report();
    println!("OUTER {} BUILDER {}", outer.is_some(), builder.is_some());
}
