//! `sightline collect --store clickhouse://…` killed while exporters post to it (issue 20): what
//! it acknowledged is stored, and exporters retrying everything against a new collector
//! duplicate nothing in query results. Needs a ClickHouse server (`.ci/run` starts one).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::Collecting;

/// Spans in the test, one export each.
const SPANS: usize = 300;

/// One statement to ClickHouse's HTTP interface at `host_port`: the answer's body.
fn clickhouse_sql(host_port: &str, sql: &str) -> String {
    let mut s = TcpStream::connect(host_port).expect("connect to ClickHouse");
    write!(
        s,
        "POST / HTTP/1.0\r\nHost: x\r\nContent-Length: {}\r\n\r\n{sql}",
        sql.len()
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{sql}: {resp}"
    );
    body.to_string()
}

/// The OTLP/JSON export of span `i` (trace id ending in `i`, a task of its own, 2 events).
fn export(i: usize) -> String {
    format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"5e1f0000000000000000000000{i:06x}","spanId":"a0000000{i:08x}","name":"op{i}","startTimeUnixNano":"1000","endTimeUnixNano":"2000"}}]}}]}}]}}"#
    )
}

/// POSTs `body` to the OTLP/HTTP listener `http`: the status, `None` when the collector went
/// away before answering.
fn post(http: &str, body: &str) -> Option<u16> {
    let mut h = TcpStream::connect(http).ok()?;
    h.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    write!(
        h,
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut resp = String::new();
    h.read_to_string(&mut resp).ok()?;
    resp.get(9..12)?.parse().ok()
}

fn collect(store: &str) -> Collecting {
    Collecting::start(
        crate::sightline()
            .args(crate::COLLECT_OTLP_HTTP_ONLY)
            .args(["--store", store]),
    )
}

/// `sightline tasks --store STORE`: (task id, events) per row.
fn tasks(store: &str) -> Vec<(String, u64)> {
    let out = crate::sightline()
        .args(["tasks", "--limit", "100000", "--store", store])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // TASK, FIRST SEEN (date and time), EVENTS, ...
            (f[0].to_string(), f[3].parse().unwrap())
        })
        .collect()
}

#[test]
fn a_killed_collector_loses_nothing_acknowledged_and_retries_duplicate_nothing() {
    let Some(base) = test_support::clickhouse_server() else {
        return;
    };
    let host_port = base
        .strip_prefix("clickhouse://")
        .and_then(|r| r.split('/').next())
        .map(|a| a.rsplit_once('@').map_or(a, |(_, h)| h).to_string())
        .expect("a clickhouse:// URL");
    let db = "sightline_test_kill";
    let store = format!("{}/{db}", base.rsplit_once('/').unwrap().0);
    clickhouse_sql(&host_port, &format!("DROP DATABASE IF EXISTS {db}"));

    // Three exporters post their share of the spans; after a third are acknowledged the
    // collector is killed with SIGKILL, mid-stream.
    let mut c = collect(&store);
    let http = c.otlp_http();
    let acked = Mutex::new(Vec::new());
    let sent = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..3 {
            let (http, acked, sent) = (&http, &acked, &sent);
            s.spawn(move || {
                for i in (t..SPANS).step_by(3) {
                    sent.fetch_add(1, Ordering::Relaxed);
                    match post(http, &export(i)) {
                        Some(200) => acked.lock().unwrap().push(i),
                        Some(other) => panic!("span {i}: status {other}"),
                        None => break,
                    }
                }
            });
        }
        while acked.lock().unwrap().len() < SPANS / 3 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        c.child.kill().unwrap();
        c.child.wait().unwrap();
    });
    let acked = acked.into_inner().unwrap();
    assert!(
        acked.len() >= SPANS / 3 && acked.len() < SPANS,
        "{} acknowledged",
        acked.len()
    );
    eprintln!(
        "{} of {} sent acknowledged before the kill",
        acked.len(),
        sent.load(Ordering::Relaxed)
    );
    let after_kill: std::collections::BTreeMap<String, u64> = tasks(&store).into_iter().collect();
    for i in &acked {
        let id = format!("5E1F0000000000000000000000{i:06X}");
        assert_eq!(
            after_kill.get(&id),
            Some(&2),
            "acknowledged span {i} (task {id})"
        );
    }

    // The exporters retry every span against a new collector: each event is stored once.
    let mut c = collect(&store);
    let http = c.otlp_http();
    for i in 0..SPANS {
        assert_eq!(post(&http, &export(i)), Some(200), "span {i}");
    }
    assert!(c.sigterm().success());
    let rows = tasks(&store);
    assert_eq!(rows.len(), SPANS);
    assert!(rows.iter().all(|(_, n)| *n == 2), "{rows:?}");
    let stored = clickhouse_sql(
        &host_port,
        &format!("SELECT count() FROM {db}.events FINAL"),
    );
    assert_eq!(stored.trim(), (2 * SPANS).to_string());
    let shown = crate::sightline()
        .args([
            "show",
            "--store",
            &store,
            "5E1F0000000000000000000000000007",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    // One span, its two events once each, after two collectors received it.
    assert!(
        text.starts_with("task 5E1F0000000000000000000000000007: 2 events, 1 edges, 0 joins"),
        "{text}"
    );
    assert_eq!(text.matches("op7").count(), 1, "{text}");
    clickhouse_sql(&host_port, &format!("DROP DATABASE {db}"));
}
