//! Hostile use: thread-local destructors, fork without exec, oversized reports, out-of-range
//! configuration, corrupted payloads. Tests that need a fresh reporter (one per process) re-run
//! this test binary as a child process with `--exact <test>` and `CAUSAL_HOSTILE_CHILD=<test>`.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use causal::metadata::{Metadata, OpId, TaskId};
use causal::report::Report;
use causal::reporter::{Config, ConfigError, Sink};
use causal::w3c::TraceParent;
use causal::{Context, WireFormat};

const CHILD_VAR: &str = "CAUSAL_HOSTILE_CHILD";

fn in_child(test: &str) -> bool {
    std::env::var(CHILD_VAR).as_deref() == Ok(test)
}

fn run_child(test: &str, envs: &[(&str, &str)]) -> Output {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, test)
        .env("SIGHTLINE_CAUSAL_SINK", "off")
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    eprintln!(
        "child stdout:\n{}\nchild stderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn file_reports(path: &Path) -> Vec<Report> {
    let mut f = std::fs::File::open(path).unwrap();
    let mut scratch = Vec::new();
    let mut out = Vec::new();
    while let Some(r) = causal::wire::read_report(&mut f, &mut scratch).unwrap() {
        out.push(r);
    }
    out
}

fn file_config(path: &Path) -> Config {
    Config {
        sink: Sink::File(path.to_path_buf()),
        format: WireFormat::Binary,
        ..Config::default()
    }
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

#[test]
fn report_in_thread_local_destructor_returns_none_instead_of_panicking() {
    let name = "report_in_thread_local_destructor_returns_none_instead_of_panicking";
    if in_child(name) {
        std::thread::spawn(|| {
            // Thread-local destructors run in reverse order of first use: touching this one
            // before the context makes it run after the context's.
            REPORTS_ON_DROP.with(|_| {});
            causal::start_task("task", []);
            assert!(causal::report("alive", []).is_some());
        })
        .join()
        .unwrap();
        return;
    }
    let out = run_child(name, &[]);
    assert!(out.status.success(), "child failed: {:?}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("DESTRUCTOR report=None current=false prev=false"),
        "{stdout}"
    );
}

#[test]
fn forked_child_reports_through_its_own_reporter_with_fresh_ids() {
    let name = "forked_child_reports_through_its_own_reporter_with_fresh_ids";
    let dir = std::env::temp_dir().join(format!("causal-hostile-fork-{}", std::process::id()));
    let path = dir.join("reports.frames");
    if in_child(name) {
        let path = std::path::PathBuf::from(std::env::var("HOSTILE_FILE").unwrap());
        causal::reporter::init(file_config(&path)).unwrap();
        causal::start_task("before fork", []);
        assert!(causal::reporter::flush(Duration::from_secs(5)));
        // SAFETY: fork(2) in a test process; the child only reports an event and exits.
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
        assert!(causal::reporter::flush(Duration::from_secs(5)));
        return;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::fs::remove_file(&path);
    let out = run_child(name, &[("HOSTILE_FILE", path.to_str().unwrap())]);
    assert!(out.status.success(), "child failed: {:?}", out.status);
    let reports = file_reports(&path);
    let by_label = |l: &str| {
        reports
            .iter()
            .filter(|r| r.label.as_deref() == Some(l))
            .collect::<Vec<_>>()
    };
    let (before, child, parent) = (
        by_label("before fork"),
        by_label("in child"),
        by_label("parent after fork"),
    );
    assert_eq!(
        (before.len(), child.len(), parent.len()),
        (1, 1, 1),
        "{reports:#?}"
    );
    let (child, parent) = (child[0], parent[0]);
    assert_ne!(
        child.metadata.op_id(),
        parent.metadata.op_id(),
        "the child repeated the parent's ids"
    );
    assert_eq!(child.edges, [before[0].metadata.op_id()]);
    assert_ne!(child.process_id, parent.process_id);
    let child_pid: u64 = child.process_id.as_deref().unwrap().parse().unwrap();
    assert_eq!(
        child.thread_id,
        Some(child_pid),
        "the forked child's only thread has tid == pid"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn oversized_report_is_dropped_and_counted_not_framed() {
    let name = "oversized_report_is_dropped_and_counted_not_framed";
    let dir = std::env::temp_dir().join(format!("causal-hostile-big-{}", std::process::id()));
    let path = dir.join("reports.frames");
    if in_child(name) {
        let path = std::path::PathBuf::from(std::env::var("HOSTILE_FILE").unwrap());
        causal::reporter::init(file_config(&path)).unwrap();
        causal::start_task("small before", []);
        let big = "x".repeat(causal::wire::MAX_FRAME_LEN + 1);
        causal::report("huge", [("body", big.into())]);
        causal::report("small after", []);
        assert!(causal::reporter::flush(Duration::from_secs(5)));
        let s = causal::stats();
        println!("STATS sent={} dropped_sink={}", s.sent, s.dropped_sink);
        return;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::fs::remove_file(&path);
    let out = run_child(name, &[("HOSTILE_FILE", path.to_str().unwrap())]);
    assert!(out.status.success(), "child failed: {:?}", out.status);
    let labels: Vec<String> = file_reports(&path)
        .into_iter()
        .filter_map(|r| r.label)
        .collect();
    assert_eq!(labels, ["small before", "small after"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("STATS sent=2 dropped_sink=1"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn queue_capacity_out_of_range_is_a_typed_error() {
    let name = "queue_capacity_out_of_range_is_a_typed_error";
    if in_child(name) {
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
        // The first event then runs with the defaults instead of allocating the huge queue.
        causal::start_task("task", []);
        println!("QUEUE OK");
        return;
    }
    let out = run_child(name, &[("SIGHTLINE_CAUSAL_QUEUE", "18446744073709551615")]);
    assert!(out.status.success(), "child failed: {:?}", out.status);
    assert!(String::from_utf8_lossy(&out.stdout).contains("QUEUE OK"));
}

/// A small deterministic generator for mutations (xorshift64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            1 => v.truncate(rng.below(v.len() + 1)),
            2 => {
                let i = rng.below(v.len() + 1);
                v.insert(i, [0xFF, 0x80, b':', b'\n', b'-', 0][rng.below(6)]);
            }
            3 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            _ => v.extend_from_slice(&[0xFF; 9]),
        }
    }
    v
}

#[test]
fn decoders_return_typed_errors_on_mutated_input() {
    let md = Metadata::with_options(
        TaskId::from_u64(0x6944_B2AA_0D09_FE8A).unwrap(),
        OpId::new(7),
        &[1, 2, 0xAB, 0xCD],
    )
    .unwrap();
    let mut r = Report::new(md.clone());
    r.edges = vec![OpId::new(1), OpId::new4(2)];
    r.label = Some("label".into());
    r.thread_name = Some("t".into());
    // A realistic wall time: text Timestamps below 10^14 are read as ms (see parse_timestamp_ns).
    r.timestamp_ns = Some(1_764_500_000_000_000_000);
    r.fields = vec![("k".into(), "v".into())];
    let bin = r.to_binary();
    let text = r.to_xtrace_text();
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_eq!(Report::decode(&bin).unwrap(), r);
    assert_eq!(Report::decode(text.as_bytes()).unwrap(), r);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut errors = 0;
    for _ in 0..20_000 {
        errors += usize::from(Report::decode(&mutate(&mut rng, &bin)).is_err());
        errors += usize::from(Report::decode(&mutate(&mut rng, text.as_bytes())).is_err());
        errors += usize::from(Metadata::parse_binary(&mutate(&mut rng, &md.to_binary())).is_err());
        let s = String::from_utf8_lossy(&mutate(&mut rng, md.to_text().as_bytes())).into_owned();
        errors += usize::from(Metadata::parse_text(&s).is_err());
        let s = String::from_utf8_lossy(&mutate(&mut rng, tp.as_bytes())).into_owned();
        errors += usize::from(TraceParent::parse(&s).is_err());
        let mut frame = Vec::new();
        causal::wire::write_frame(&mut frame, &mutate(&mut rng, &bin));
        let frame = mutate(&mut rng, &frame);
        errors +=
            usize::from(causal::wire::read_report(&mut frame.as_slice(), &mut Vec::new()).is_err());
    }
    // Most mutations break the input; all of them came back as values, none panicked.
    assert!(
        errors > 50_000,
        "only {errors} errors: the mutations are not reaching the decoders"
    );
}

#[test]
fn traceparent_section_3_2_rules() {
    let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let tp = TraceParent::parse(ok).unwrap();
    // Unknown flag bits are accepted but never propagated (§3.2.2.5: vendors MUST set them to 0).
    let odd_flags =
        TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe").unwrap();
    assert!(!odd_flags.sampled());
    let c = Context::from_traceparent(&odd_flags, None, None);
    assert!(c.traceparent().unwrap().to_string().ends_with("-00"));
    assert_eq!(
        Context::from_traceparent(&tp, None, None)
            .traceparent()
            .unwrap()
            .to_string(),
        ok
    );
    for bad in [
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
        "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011",
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01",
        "",
    ] {
        assert!(TraceParent::parse(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn panicking_callback_sink_costs_one_report_not_the_reporter() {
    let name = "panicking_callback_sink_costs_one_report_not_the_reporter";
    if in_child(name) {
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
        assert!(causal::reporter::flush(Duration::from_secs(5)));
        causal::report("boom", []);
        assert!(causal::reporter::flush(Duration::from_secs(5)));
        causal::report("after", []);
        let flushed = causal::reporter::flush(Duration::from_secs(5));
        let s = causal::stats();
        println!(
            "FLUSHED {flushed} SEEN {:?} SENT {} DROPPED_SINK {}",
            SEEN.lock().unwrap(),
            s.sent,
            s.dropped_sink
        );
        return;
    }
    let out = run_child(name, &[]);
    assert!(out.status.success(), "child failed: {:?}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(r#"FLUSHED true SEEN ["first", "after"] SENT 2 DROPPED_SINK 1"#),
        "{stdout}"
    );
}

#[test]
fn collector_that_never_reads_costs_counted_drops_not_a_blocked_program() {
    let name = "collector_that_never_reads_costs_counted_drops_not_a_blocked_program";
    if in_child(name) {
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
        // The loop ended: the program was never blocked. The reporter may still be stuck in a
        // write (2 s timeout) for a while; its counters must add up once it is done.
        let flushed = causal::reporter::flush(Duration::from_secs(20));
        let s = causal::stats();
        println!(
            "FLUSHED {flushed} QUEUED {} DROPPED_QUEUE {} SENT {} DROPPED_SINK {}",
            s.queued, s.dropped_queue_full, s.sent, s.dropped_sink
        );
        return;
    }
    let out = run_child(name, &[]);
    assert!(out.status.success(), "child failed: {:?}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.find("FLUSHED").map(|i| &l[i..]))
        .unwrap();
    let n: Vec<u64> = line
        .split_whitespace()
        .skip(3)
        .step_by(2)
        .map(|v| v.parse().unwrap())
        .collect();
    let (queued, dropped_queue, sent, dropped_sink) = (n[0], n[1], n[2], n[3]);
    assert!(line.starts_with("FLUSHED true"), "{line}");
    assert_eq!(queued + dropped_queue, 5001, "{line}");
    assert_eq!(sent + dropped_sink, queued, "{line}");
    // 20 MB cannot fit in the loopback socket buffers of a connection nobody reads.
    assert!(dropped_queue + dropped_sink > 0, "{line}");
}

#[test]
fn context_calls_from_inside_a_key_value_iterator_do_not_panic() {
    let name = "context_calls_from_inside_a_key_value_iterator_do_not_panic";
    if in_child(name) {
        causal::start_task("task", []);
        // The key/values are produced lazily, while `report` holds the thread's context.
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
        return;
    }
    let out = run_child(name, &[]);
    assert!(out.status.success(), "child failed: {:?}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout
            .matches("INNER report=None current=false prev=false joined")
            .count(),
        2,
        "{stdout}"
    );
    assert!(stdout.contains("OUTER true BUILDER true"), "{stdout}");
}

#[test]
fn xtrace_metadata_with_zero_opid_never_yields_an_invalid_traceparent() {
    // Old agents sent a zero OpId for "no event yet"; W3C forbids an all-zero parent-id.
    let md = Metadata::parse_text("196944B2AA0D09FE8A0000000000000000").unwrap();
    let ctx = Context::from_metadata(&md);
    assert_eq!(ctx.traceparent(), None);
    let mut headers = http::HeaderMap::new();
    causal::propagation::inject(&ctx, &mut headers);
    assert_eq!(
        headers.get("x-trace").unwrap(),
        "196944B2AA0D09FE8A0000000000000000"
    );
    assert!(headers.get("traceparent").is_none());
    for (k, v) in causal::propagation::env_vars(&ctx) {
        assert_ne!(k, "TRACEPARENT", "{v}");
    }
    // After an event the latest parent is that event's id: both are sent, and the traceparent is valid.
    let mut ctx = ctx;
    let mut other = Context::with_task(md.task_id(), true);
    other = other.join(&Context::from_metadata(&md.with_op_id(OpId::new(0x42))));
    ctx.join_in(&other);
    let tp = ctx.traceparent().unwrap();
    assert_eq!(
        TraceParent::parse(&tp.to_string()).unwrap().parent_op(),
        OpId::new(0x42)
    );
}

#[test]
fn repeated_tracestate_and_baggage_fields_are_combined() {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    headers.append("tracestate", "rojo=00f067aa0ba902b7".parse().unwrap());
    headers.append("tracestate", "congo=t61rcWkgMzE".parse().unwrap());
    headers.append("baggage", "userId=alice".parse().unwrap());
    headers.append("baggage", "serverNode=DF%2028".parse().unwrap());
    let ctx = causal::propagation::extract(&headers).unwrap();
    assert_eq!(
        ctx.tracestate(),
        Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
    );
    assert_eq!(ctx.baggage(), Some("userId=alice,serverNode=DF%2028"));
    // Empty fields add nothing (W3C test suite, test_tracestate_empty_header).
    headers.append("tracestate", "".parse().unwrap());
    let ctx = causal::propagation::extract(&headers).unwrap();
    assert_eq!(
        ctx.tracestate(),
        Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
    );
    // One field: passed through as is.
    headers.remove("baggage");
    headers.insert("tracestate", "a=b".parse().unwrap());
    let ctx = causal::propagation::extract(&headers).unwrap();
    assert_eq!((ctx.tracestate(), ctx.baggage()), (Some("a=b"), None));
}

#[test]
fn duplicated_traceparent_fields_are_ignored() {
    let mut headers = http::HeaderMap::new();
    headers.append(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    assert!(causal::propagation::extract(&headers).is_some());
    headers.append(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    assert!(causal::propagation::extract(&headers).is_none());
}
