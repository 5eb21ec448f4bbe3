//! Idempotent ingest: the same report or span delivered twice (an exporter's retry, a second
//! import) leaves every count, edge and view identical; conflicting versions of one event are both
//! kept and reported once.

use std::net::SocketAddr;
use std::path::Path;

use causal_analysis::{
    CriticalPath, Event, Parent, Problem, TaskGraph, infer_span_nesting, render,
};
use causal_collector::import::import_file;
use causal_collector::{Collector, Config, Store, TaskFilter};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Everything a user sees of a store: the task list and, per task, the text view with its
/// critical path and the counts of the rebuilt graph (as `sightline show` builds it).
fn views(store: &Store) -> Vec<String> {
    let mut out = Vec::new();
    for t in store.tasks(&TaskFilter::default()).unwrap() {
        // When the task first arrived is the one thing a second delivery may not change, but
        // two stores filled at different times differ in it.
        let arrival_free = causal_collector::TaskSummary {
            received_ns: 0,
            ..t.clone()
        };
        out.push(format!("{arrival_free:?}"));
        let mut events = store.load_task(&t.task_id).unwrap();
        infer_span_nesting(&mut events);
        let g = TaskGraph::build(t.task_id.clone(), events);
        let cp = CriticalPath::compute(&g);
        out.push(format!(
            "{} events, {} edges, {} joins, problems {:?}",
            g.len(),
            g.edges.len(),
            g.joins().len(),
            g.problems
        ));
        out.push(render::text(&g, cp.as_ref()));
    }
    out
}

#[test]
fn importing_the_same_real_file_twice_changes_nothing() {
    let Some(f) = test_support::shared_data("xtrace/hdfs_download.json") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(&tmp.path().join("x.db")).unwrap();
    let first = import_file(&mut store, &f, 1).unwrap();
    assert_eq!(
        (first.events, first.duplicates, first.conflicts),
        (839, 0, 0)
    );
    let before = views(&store);
    let rows = store.event_count().unwrap();

    let second = import_file(&mut store, &f, 2).unwrap();
    assert_eq!(
        (second.events, second.duplicates, second.conflicts),
        (0, 839, 0)
    );
    assert_eq!(store.event_count().unwrap(), rows);
    let after = views(&store);
    assert_eq!(before, after);
    assert!(
        before[1].starts_with("839 events, 887 edges, "),
        "{}",
        before[1]
    );
    assert!(!after[2].contains("duplicate"), "{}", after[2]);
}

#[test]
fn importing_the_same_otlp_file_twice_keeps_its_edges_and_joins() {
    // The regression of issue 17: "7 edges, 1 join" became "5 edges, 0 joins" with a warning
    // line per event once the spans were stored twice.
    let Some(f) = test_support::shared_data("otlp/python_sdk_traces.pb") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(&tmp.path().join("o.db")).unwrap();
    import_file(&mut store, &f, 1).unwrap();
    let before = views(&store);
    let again = import_file(&mut store, &f, 2).unwrap();
    assert_eq!((again.events, again.duplicates), (0, 9));
    assert_eq!(views(&store), before);
    assert!(
        before[1].starts_with("9 events, 13 edges, 2 joins, problems []"),
        "{}",
        before[1]
    );
}

/// POSTs `body` to `/v1/traces` with `Connection: close`; returns the status code.
async fn post(addr: SocketAddr, content_type: &str, body: &[u8]) -> u16 {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/traces HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).await.unwrap();
    let line = String::from_utf8_lossy(&resp);
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn collector_config(db: &Path) -> Config {
    Config {
        xtrace_tcp: None,
        xtrace_udp: None,
        otlp_http: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        otlp_grpc: None,
        zipkin: None,
        ..Config::loopback(db)
    }
}

#[test]
fn posting_the_same_otlp_body_twice_stores_it_once() {
    let (Some(py), Some(node)) = (
        test_support::shared_data("otlp/python_sdk_traces.pb"),
        test_support::shared_data("otlp/node_sdk_traces.json"),
    ) else {
        return;
    };
    let (py, node) = (std::fs::read(py).unwrap(), std::fs::read(node).unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let once = tmp.path().join("once.db");
    let twice = tmp.path().join("twice.db");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for (db, times) in [(&once, 1), (&twice, 2)] {
        let stats = rt.block_on(async {
            let c = Collector::start(collector_config(db)).await.unwrap();
            let addr = c.addrs().otlp_http.unwrap();
            for _ in 0..times {
                assert_eq!(post(addr, "application/x-protobuf", &py).await, 200);
                assert_eq!(post(addr, "application/json", &node).await, 200);
            }
            c.shutdown().await.unwrap()
        });
        // Regression: the collector's summary added every batch to `events_stored`, so a
        // retried POST said "36 events stored" for 18 stored events.
        assert_eq!(
            (
                stats.events_stored,
                stats.events_duplicate,
                stats.events_conflicting
            ),
            (18, 18 * (times - 1), 0),
            "posted {times} times"
        );
    }
    let (a, b) = (Store::open(&once).unwrap(), Store::open(&twice).unwrap());
    assert_eq!(a.event_count().unwrap(), 18);
    assert_eq!(b.event_count().unwrap(), 18);
    assert_eq!(views(&a), views(&b));
}

fn ev(id: &str, ts: i64, label: &str, parents: &[&str]) -> Event {
    Event {
        task: "ABCD".into(),
        id: id.into(),
        timestamp_ns: Some(ts),
        labels: vec![label.into()],
        parents: parents.iter().map(|p| Parent::causal(*p)).collect(),
        ..Event::default()
    }
}

#[test]
fn conflicting_versions_are_both_kept_and_reported_once() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(&tmp.path().join("c.db")).unwrap();
    let s = store
        .insert(
            &[
                ev("01", 1, "a", &[]),
                ev("02", 2, "b", &["01"]),
                ev("02", 2, "b", &["01"]), // repeated within one batch
            ],
            1,
        )
        .unwrap();
    assert_eq!((s.events, s.duplicates, s.conflicts), (2, 1, 0));
    let s = store
        .insert(
            &[
                ev("02", 2, "b", &["01"]),         // identical: dropped
                ev("02", 3, "b retried", &["01"]), // same id, different content
                ev("03", 4, "c", &["02"]),
                ev("03", 5, "c again", &["02"]), // a conflict within the batch
            ],
            2,
        )
        .unwrap();
    assert_eq!((s.events, s.duplicates, s.conflicts), (3, 1, 2));
    let t = &store.tasks(&TaskFilter::default()).unwrap()[0];
    assert_eq!((t.events, t.last_ts_ns), (5, Some(5)));

    let events = store.load_task("ABCD").unwrap();
    let labels: Vec<&str> = events.iter().map(|e| e.label().unwrap()).collect();
    assert_eq!(labels, ["a", "b", "b retried", "c", "c again"]);
    let g = TaskGraph::build("ABCD", events);
    assert_eq!(g.len(), 3);
    assert_eq!(
        g.problems,
        [Problem::DuplicateEvents {
            identical: 0,
            conflicting: vec!["02".into(), "03".into()]
        }]
    );
    let text = render::text(&g, None);
    assert_eq!(text.matches("problem:").count(), 1, "{text}");
    assert!(
        text.contains(
            "problem: 2 events reported in different versions (the first is used): 02, 03"
        ),
        "{text}"
    );
}
