//! Hostile use: thread-local destructors, fork without exec, oversized reports, out-of-range
//! configuration, corrupted payloads. Tests that need a fresh reporter (one per process) run a
//! scenario of the `causal-test-child` binary (`src/bin/causal-test-child.rs`) as a child process.

use std::path::Path;

use causal::Context;
use causal::metadata::{Metadata, OpId, TaskId};
use causal::report::Report;
use causal::w3c::TraceParent;

mod common;
use common::run_child;

fn file_reports(path: &Path) -> Vec<Report> {
    let mut f = std::fs::File::open(path).unwrap();
    let mut scratch = Vec::new();
    let mut out = Vec::new();
    while let Some(r) = causal::wire::read_report(&mut f, &mut scratch).unwrap() {
        out.push(r);
    }
    out
}

#[test]
fn report_in_thread_local_destructor_returns_none_instead_of_panicking() {
    let stdout = run_child("report-in-tls-destructor", &[]);
    assert!(
        stdout.contains("DESTRUCTOR report=None current=false prev=false"),
        "{stdout}"
    );
}

#[test]
fn forked_child_reports_through_its_own_reporter_with_fresh_ids() {
    let dir = std::env::temp_dir().join(format!("causal-hostile-fork-{}", std::process::id()));
    let path = dir.join("reports.frames");
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::fs::remove_file(&path);
    run_child("fork", &[("HOSTILE_FILE", path.to_str().unwrap())]);
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
    let dir = std::env::temp_dir().join(format!("causal-hostile-big-{}", std::process::id()));
    let path = dir.join("reports.frames");
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::fs::remove_file(&path);
    let stdout = run_child(
        "oversized-report",
        &[("HOSTILE_FILE", path.to_str().unwrap())],
    );
    let labels: Vec<String> = file_reports(&path)
        .into_iter()
        .filter_map(|r| r.label)
        .collect();
    assert_eq!(labels, ["small before", "small after"]);
    assert!(stdout.contains("STATS sent=2 dropped_sink=1"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn queue_capacity_out_of_range_is_a_typed_error() {
    let stdout = run_child(
        "queue-out-of-range",
        &[("SIGHTLINE_CAUSAL_QUEUE", "18446744073709551615")],
    );
    assert!(stdout.contains("QUEUE OK"));
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
    let stdout = run_child("panicking-callback", &[]);
    assert!(
        stdout.contains(r#"FLUSHED true SEEN ["first", "after"] SENT 2 DROPPED_SINK 1"#),
        "{stdout}"
    );
}

#[test]
fn collector_that_never_reads_costs_counted_drops_not_a_blocked_program() {
    let stdout = run_child("collector-never-reads", &[]);
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
    let stdout = run_child("context-calls-in-kv-iterator", &[]);
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
