//! End to end: the example system (a client, a front end and two back ends as four processes,
//! fan-out and fan-in over HTTP) reports to the real collector, which is then shut down; the stored
//! task rebuilds as a DAG whose critical path runs through the slower back end.
//!
//! The collector runs in this test's process (the `causal-collector` library, on ephemeral loopback
//! ports) and the task is read back through the same calls `sightline show` makes
//! (`Store::load_task`, `infer_span_nesting`, `TaskGraph`, `CriticalPath`, `render`): no nested
//! cargo build of the `sightline` binary is needed, and Cargo builds the example's binary for this
//! test (`CARGO_BIN_EXE_causal-example`). The binary's own `collect`/`show` commands are tested in
//! `crates/sightline/tests/cli/causal.rs`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;

use causal_analysis::{CriticalPath, TaskGraph, render};
use causal_collector::{Collector, Config, Store, TaskFilter};

/// Runs the demo against a collector on ephemeral ports; returns the demo's task id once the
/// collector has stored its 12 events and shut down.
fn run_demo_into_collector(format: &str, db: &Path) -> String {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let config = Config {
        xtrace_tcp: Some(any),
        xtrace_udp: None,
        otlp_http: None,
        otlp_grpc: None,
        zipkin: None,
        ..Config::loopback(db)
    };
    let collector = rt.block_on(Collector::start(config)).unwrap();
    let tcp = collector.addrs().xtrace_tcp.unwrap();
    let demo = Command::new(env!("CARGO_BIN_EXE_causal-example"))
        .arg("demo")
        .env("SIGHTLINE_CAUSAL_SINK", format!("tcp://{tcp}"))
        .env("SIGHTLINE_CAUSAL_FORMAT", format)
        .output()
        .unwrap();
    let demo_out = String::from_utf8_lossy(&demo.stdout).to_string();
    assert!(
        demo.status.success(),
        "demo: {demo_out}\n{}",
        String::from_utf8_lossy(&demo.stderr)
    );
    let task = demo_out
        .lines()
        .find_map(|l| l.strip_prefix("task "))
        .expect("the demo prints its task")
        .trim()
        .to_string();
    // Every process of the demo has exited (and flushed its reporter); give the collector's
    // connections a moment to be read, then stop it cleanly.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let stats = rt.block_on(collector.shutdown()).unwrap();
    assert_eq!(stats.events_stored, 12, "{stats:?}");
    assert_eq!(stats.events_lost, 0, "{stats:?}");
    task
}

#[test]
fn example_system_reports_to_the_collector_and_shows_as_a_dag() {
    for format in ["text", "binary"] {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("e2e.db");
        let task = run_demo_into_collector(format, &db);

        let store = Store::open(&db).unwrap();
        let id = store.resolve_task(&task).unwrap();
        let mut events = store.load_task(&id).unwrap();
        causal_analysis::infer_span_nesting(&mut events);
        let g = TaskGraph::build(id.clone(), events);
        let cp = CriticalPath::compute(&g);

        let text = render::text(&g, cp.as_ref());
        // 12 events; joins: both "backend answered", "join answers", "client done".
        let head = text.lines().next().unwrap();
        assert!(
            head.contains(": 12 events,") && head.contains(" 4 joins, 1 roots"),
            "{head}"
        );
        assert!(!text.contains("problem:"), "{text}");
        assert!(text.contains("join of 3 parents"), "{text}");

        let v = render::json(&g, cp.as_ref());
        let events = v["events"].as_array().unwrap();
        let label = |id: &str| {
            let e = events.iter().find(|e| e["id"] == id).unwrap();
            format!(
                "{}: {}",
                e["agent"].as_str().unwrap_or("?"),
                e["labels"][0].as_str().unwrap_or("")
            )
        };
        let mut procs: Vec<&str> = events
            .iter()
            .filter_map(|e| e["process"].as_str())
            .collect();
        procs.sort();
        procs.dedup();
        assert_eq!(procs.len(), 4, "client, front end, two back ends");
        // The critical path runs from the client's request, through the slower back end (b
        // answers after 60 ms, a after 30 ms), to the client's answer.
        let steps: Vec<String> = v["critical_path"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| label(s["id"].as_str().unwrap()))
            .collect();
        assert_eq!(
            steps.first().unwrap(),
            "client: client request",
            "{steps:?}"
        );
        assert_eq!(steps.last().unwrap(), "client: client done", "{steps:?}");
        assert!(
            steps.contains(&"backend-b: backend done".to_string()),
            "{steps:?}"
        );
        assert!(
            !steps.iter().any(|s| s.starts_with("backend-a")),
            "{steps:?}"
        );
        let by_agent = v["critical_path"]["by_agent"].as_array().unwrap();
        let b_ns = by_agent.iter().find(|s| s["name"] == "backend-b").unwrap()["ns"]
            .as_i64()
            .unwrap();
        assert!(
            b_ns >= 60_000_000,
            "backend-b's 60 ms delay is on the critical path: {b_ns} ns"
        );

        let tasks = store.tasks(&TaskFilter::default()).unwrap();
        let row = tasks.iter().find(|t| t.task_id == id).unwrap();
        assert_eq!(row.title.as_deref(), Some("client request"), "{row:?}");
    }
}
