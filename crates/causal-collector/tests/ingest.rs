//! A running collector on 127.0.0.1 (ephemeral ports): the captured OTLP/HTTP requests of
//! `shared/data/otlp` replayed byte for byte with their captured headers (the Node one chunked),
//! X-Trace reports over TCP and UDP, malformed input, and a shutdown that loses nothing.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use causal::Report;
use causal::wire::{WireFormat, encode_frame, write_frame};
use causal_analysis::{CriticalPath, EdgeKind, TaskGraph};
use causal_collector::{Collector, Config, Store, TaskFilter};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn config(db: &Path) -> Config {
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    Config {
        xtrace_tcp: Some(any),
        xtrace_udp: Some(any),
        otlp_http: Some(any),
        otlp_grpc: Some(any),
        zipkin: Some(any),
        ..Config::loopback(db)
    }
}

/// The captured request line and headers (`*.headers.txt`), as lines.
fn captured_headers(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// Sends one HTTP/1.1 request made of `head` lines and `body` (chunked in pieces of `chunk` bytes
/// when `chunk` is set), returns (status, body). Reads until the response is complete.
async fn http(
    addr: SocketAddr,
    head: &[String],
    body: &[u8],
    chunk: Option<usize>,
) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = Vec::new();
    for (i, l) in head.iter().enumerate() {
        // The captured request line says `POST /v1/traces`; HTTP/1.1 is implied by the headers.
        if i == 0 && !l.contains("HTTP/") {
            req.extend_from_slice(format!("{l} HTTP/1.1\r\n").as_bytes());
        } else {
            req.extend_from_slice(format!("{l}\r\n").as_bytes());
        }
    }
    req.extend_from_slice(b"\r\n");
    s.write_all(&req).await.unwrap();
    match chunk {
        None => s.write_all(body).await.unwrap(),
        Some(n) => {
            for c in body.chunks(n) {
                s.write_all(format!("{:x}\r\n", c.len()).as_bytes())
                    .await
                    .unwrap();
                s.write_all(c).await.unwrap();
                s.write_all(b"\r\n").await.unwrap();
                s.flush().await.unwrap();
            }
            s.write_all(b"0\r\n\r\n").await.unwrap();
        }
    }
    // Read the response head, then Content-Length bytes.
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let (status, body_start, len) = loop {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut tmp))
            .await
            .unwrap()
            .unwrap();
        assert!(
            n > 0,
            "connection closed before a response: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&tmp[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..p]).to_string();
            let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            break (status, p + 4, len);
        }
    };
    while buf.len() < body_start + len {
        let n = s.read(&mut tmp).await.unwrap();
        assert!(n > 0);
        buf.extend_from_slice(&tmp[..n]);
    }
    (status, buf[body_start..body_start + len].to_vec())
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A span of the demo: (span id, name, parent span id, linked span ids, span events).
type DemoSpan = (String, String, Option<String>, Vec<String>, usize);

/// Checks the task built from a captured request: span names, parents and links as edges.
fn check_demo_task(store: &Store, task: &str, spans: &[DemoSpan], nested: usize) {
    let mut events = store.load_task(task).unwrap();
    let stored_edges: usize = events.iter().map(|e| e.parents.len()).sum();
    assert_eq!(causal_analysis::infer_span_nesting(&mut events), nested);
    let g = TaskGraph::build(task, events);
    let span_events: usize = spans.iter().map(|s| s.4).sum();
    assert_eq!(g.len(), 2 * spans.len() + span_events, "{:?}", g.events);
    let parents = spans.iter().filter(|s| s.2.is_some()).count();
    let links: usize = spans.iter().map(|s| s.3.len()).sum();
    // Each span: a chain start -> (its span events) -> end; plus parent edges and link edges.
    assert_eq!(stored_edges, spans.len() + span_events + parents + links);
    assert_eq!(g.edges.len(), stored_edges + nested);
    assert_eq!(
        g.edges
            .iter()
            .filter(|e| e.kind == EdgeKind::Nested)
            .count(),
        nested
    );
    assert_eq!(
        g.edges.iter().filter(|e| e.kind == EdgeKind::Link).count(),
        links
    );
    assert!(g.problems.is_empty(), "{:?}", g.problems);
    for (id, name, parent, link_ids, _) in spans {
        let start = g
            .index_of(&format!("{}:start", id.to_ascii_uppercase()))
            .unwrap();
        assert_eq!(
            g.events[start].label(),
            Some(format!("{name} start").as_str())
        );
        let ps: HashSet<String> = g
            .parents_of(start)
            .iter()
            .map(|&p| g.events[p].id.clone())
            .collect();
        let mut want: HashSet<String> = link_ids
            .iter()
            .map(|l| format!("{}:end", l.to_ascii_uppercase()))
            .collect();
        if let Some(p) = parent {
            want.insert(format!("{}:start", p.to_ascii_uppercase()));
        }
        assert_eq!(ps, want, "parents of {name}");
    }
    // The span with two links is a join; with nesting edges the parent's end is one too.
    assert_eq!(g.joins().len(), 1 + usize::from(nested >= 2));
    // The critical path (span-tree rule, docs/critical-path.md): from the root span's start to
    // its end (children that outlive it are clipped: the Node demo's root ended before its
    // children), never going back in time, every step between spans of the trace, and its
    // shares adding up to its length.
    let cp = CriticalPath::compute(&g).unwrap();
    assert!(cp.reached_root);
    assert_eq!(cp.rules, [causal_analysis::Rule::SpanTree]);
    let root = spans.iter().find(|s| s.2.is_none()).unwrap();
    let root_start = g
        .index_of(&format!("{}:start", root.0.to_ascii_uppercase()))
        .unwrap();
    let root_end = g
        .index_of(&format!("{}:end", root.0.to_ascii_uppercase()))
        .unwrap();
    assert_eq!(cp.steps[0].index, root_start);
    assert_eq!(cp.steps.last().unwrap().index, root_end);
    let root_ns =
        g.events[root_end].timestamp_ns.unwrap() - g.events[root_start].timestamp_ns.unwrap();
    assert_eq!(cp.total_ns, root_ns);
    assert_eq!(cp.by_agent.iter().map(|s| s.ns).sum::<i64>(), root_ns);
    for w in cp.steps.windows(2) {
        assert!(w[1].offset_ns >= w[0].offset_ns, "{:?}", cp.steps);
    }
    // The `join` span links both fan-outs and started after them: as the last child before the
    // root's end (Python demo) it is on the path; the links themselves never are steps.
    if nested >= 2 {
        assert!(
            cp.steps.iter().any(
                |s| s.id.ends_with(":start") && g.events[s.index].label() == Some("join start")
            ),
            "{:?}",
            cp.steps
        );
    }
}

/// (span id, name, parent span id, link span ids, span events) from an OTLP/JSON body, read
/// here with serde_json independently of the collector.
fn spans_of_json(v: &Value) -> Vec<DemoSpan> {
    let mut out = Vec::new();
    for rs in v["resourceSpans"].as_array().unwrap() {
        for ss in rs["scopeSpans"].as_array().unwrap() {
            for s in ss["spans"].as_array().unwrap() {
                let parent = s
                    .get("parentSpanId")
                    .and_then(Value::as_str)
                    .filter(|p| !p.is_empty())
                    .map(str::to_string);
                let links = s["links"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l["spanId"].as_str().unwrap().to_string())
                    .collect();
                let events = s["events"].as_array().map_or(0, Vec::len);
                out.push((
                    s["spanId"].as_str().unwrap().to_string(),
                    s["name"].as_str().unwrap().to_string(),
                    parent,
                    links,
                    events,
                ));
            }
        }
    }
    out
}

#[test]
fn captured_otlp_requests_arrive_as_events_and_edges() {
    let Some(node_body) = test_support::shared_data("otlp/node_sdk_traces.json") else {
        return;
    };
    let Some(node_head) = test_support::shared_data("otlp/node_sdk_traces.json.headers.txt") else {
        return;
    };
    let Some(py_body) = test_support::shared_data("otlp/python_sdk_traces.pb") else {
        return;
    };
    let Some(py_head) = test_support::shared_data("otlp/python_sdk_traces.pb.headers.txt") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("otlp.db");
    let node_bytes = std::fs::read(&node_body).unwrap();
    let py_bytes = std::fs::read(&py_body).unwrap();
    let node_head = captured_headers(&node_head);
    let py_head = captured_headers(&py_head);
    assert!(
        node_head
            .iter()
            .any(|h| h.eq_ignore_ascii_case("Transfer-Encoding: chunked"))
    );
    assert!(
        py_head
            .iter()
            .any(|h| h == &format!("Content-Length: {}", py_bytes.len()))
    );

    let stats = rt().block_on(async {
        let c = Collector::start(config(&db)).await.unwrap();
        let addr = c.addrs().otlp_http.unwrap();
        // Node: JSON, chunked (in 500-byte chunks, so the body spans several).
        let (status, body) = http(addr, &node_head, &node_bytes, Some(500)).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        assert_eq!(body, b"{}");
        // Python: protobuf with Content-Length, as captured.
        let (status, body) = http(addr, &py_head, &py_bytes, None).await;
        assert_eq!(status, 200);
        assert!(
            body.is_empty(),
            "an empty ExportTraceServiceResponse encodes to no bytes: {body:?}"
        );
        c.shutdown().await.unwrap()
    });
    assert_eq!(stats.otlp_requests, 2);
    assert_eq!(stats.otlp_rejected_spans, 0);
    assert_eq!(stats.otlp_spans, 8);

    let store = Store::open(&db).unwrap();
    let tasks = store.tasks(&TaskFilter::default()).unwrap();
    assert_eq!(tasks.len(), 2);
    // Node: expectations from the JSON itself.
    let v: Value = serde_json::from_slice(&node_bytes).unwrap();
    let spans = spans_of_json(&v);
    let trace = v["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
        .as_str()
        .unwrap();
    let node_task = store.resolve_task(trace).unwrap();
    // Tasks of OTLP traces are named by the 32-digit W3C trace id (as Jaeger shows it), not the
    // stored 40-digit TaskId; both forms resolve and load.
    assert_eq!(node_task, trace.to_ascii_uppercase());
    assert_eq!(
        store.resolve_task(&format!("{trace}00000000")).unwrap(),
        node_task
    );
    let py_req = causal_collector::otlp::decode_protobuf(&py_bytes).unwrap();
    let py_trace: String = py_req.resource_spans[0].scope_spans[0].spans[0]
        .trace_id
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    let mut shown: Vec<&str> = tasks.iter().map(|t| t.task_id.as_str()).collect();
    shown.sort();
    let mut want = vec![node_task.as_str(), py_trace.as_str()];
    want.sort();
    assert_eq!(shown, want);
    for form in [py_trace.to_ascii_lowercase(), format!("{py_trace}00000000")] {
        let evs = store.load_task(&form).unwrap();
        assert_eq!(evs.len(), 9, "{form}");
        assert!(evs.iter().all(|e| e.task == py_trace), "{form}");
    }
    // The Node demo's handle_request ended before its children: no nesting edge.
    check_demo_task(&store, &node_task, &spans, 0);
    // Python: the same demo (fanout_a, fanout_b, join linking both, under handle_request); ids
    // are read back from the stored start events by name.
    let py_task = tasks
        .iter()
        .map(|t| t.task_id.clone())
        .find(|t| *t != node_task)
        .unwrap();
    let g = TaskGraph::build(py_task.clone(), store.load_task(&py_task).unwrap());
    let id_of = |name: &str| {
        g.events
            .iter()
            .find(|e| e.label() == Some(&format!("{name} start")))
            .unwrap()
            .id
            .trim_end_matches(":start")
            .to_string()
    };
    let (a, b, j, h) = (
        id_of("fanout_a"),
        id_of("fanout_b"),
        id_of("join"),
        id_of("handle_request"),
    );
    let py_spans = vec![
        (
            a.clone(),
            "fanout_a".to_string(),
            Some(h.clone()),
            vec![],
            1,
        ),
        (
            b.clone(),
            "fanout_b".to_string(),
            Some(h.clone()),
            vec![],
            0,
        ),
        (j, "join".to_string(), Some(h.clone()), vec![a, b], 0),
        (h, "handle_request".to_string(), None, vec![], 0),
    ];
    // The Python demo's handle_request ended after all three children: three nesting edges.
    check_demo_task(&store, &py_task, &py_spans, 3);
    let cache_miss = g
        .events
        .iter()
        .find(|e| e.label() == Some("cache.miss"))
        .unwrap();
    assert_eq!(cache_miss.field("key"), Some("k1"));
    assert_eq!(cache_miss.agent.as_deref(), Some("research-py-demo"));
}

#[test]
fn gzip_partial_success_and_bad_requests() {
    let Some(node_body) = test_support::shared_data("otlp/node_sdk_traces.json") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("g.db");
    let body = std::fs::read(&node_body).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &body).unwrap();
    let gz = gz.finish().unwrap();
    let head = |ct: &str, extra: &str, len: usize| -> Vec<String> {
        let mut h = vec![
            "POST /v1/traces".to_string(),
            "Host: 127.0.0.1".into(),
            format!("Content-Type: {ct}"),
        ];
        if !extra.is_empty() {
            h.push(extra.to_string());
        }
        h.push(format!("Content-Length: {len}"));
        h
    };
    // One good span and one with an all-zero trace id; span ids in uppercase, times as numbers.
    let partial = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[
        {"traceId":"0AF7651916CD43DD8448EB211C80319C","spanId":"B7AD6B7169203331","name":"ok","startTimeUnixNano":1,"endTimeUnixNano":2},
        {"traceId":"00000000000000000000000000000000","spanId":"B7AD6B7169203332","name":"bad"}]}]}]}"#;
    let stats = rt().block_on(async {
        let c = Collector::start(config(&db)).await.unwrap();
        let addr = c.addrs().otlp_http.unwrap();
        let (s, _) = http(
            addr,
            &head("application/json", "Content-Encoding: gzip", gz.len()),
            &gz,
            None,
        )
        .await;
        assert_eq!(s, 200);
        let (s, b) = http(
            addr,
            &head("application/json", "", partial.len()),
            partial,
            None,
        )
        .await;
        assert_eq!(s, 200);
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["partialSuccess"]["rejectedSpans"], "1");
        assert!(
            v["partialSuccess"]["errorMessage"]
                .as_str()
                .unwrap()
                .contains("trace id")
        );
        let (s, _) = http(addr, &head("application/json", "", 5), b"{oops", None).await;
        assert_eq!(s, 400);
        let (s, _) = http(
            addr,
            &head("application/x-protobuf", "", 3),
            &[0xff, 0xff, 0xff],
            None,
        )
        .await;
        assert_eq!(s, 400);
        let (s, _) = http(addr, &head("text/plain", "", 2), b"hi", None).await;
        assert_eq!(s, 415);
        let (s, _) = http(
            addr,
            &head("application/json", "Content-Encoding: gzip", 4),
            b"nope",
            None,
        )
        .await;
        assert_eq!(s, 400);
        c.shutdown().await.unwrap()
    });
    assert_eq!(stats.otlp_requests, 6);
    assert_eq!(stats.otlp_bad_requests, 4);
    assert_eq!(stats.otlp_rejected_spans, 1);
    assert_eq!(stats.otlp_spans, 4 + 1);
    let store = Store::open(&db).unwrap();
    assert_eq!(store.event_count().unwrap(), 9 + 2);
    let task = store
        .resolve_task("0AF7651916CD43DD8448EB211C80319C")
        .unwrap();
    // Shown as the 32-digit trace id; the stored 40-digit form resolves to it too.
    assert_eq!(task, "0AF7651916CD43DD8448EB211C80319C");
    assert_eq!(
        store
            .resolve_task("0af7651916cd43dd8448eb211c80319c00000000")
            .unwrap(),
        task
    );
    assert_eq!(store.load_task(&task).unwrap().len(), 2);
}

/// Reports of the real HDFS trace, as `causal::Report`s (built from the JSON pairs).
fn hdfs_reports() -> Option<Vec<Report>> {
    hdfs_reports_in_task(None)
}

/// The reports of `hdfs_download.json`, moved to the 16-digit task `task` when given (the same
/// reports under another task are other events: the store keeps identical ones once).
fn hdfs_reports_in_task(task: Option<&str>) -> Option<Vec<Report>> {
    let f = test_support::shared_data("xtrace/hdfs_download.json")?;
    let v: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
    let reports = v[0]["reports"].as_array().unwrap();
    Some(
        reports
            .iter()
            .map(|r| {
                let mut pairs: Vec<(String, String)> = Vec::new();
                for (k, vals) in r.as_object().unwrap() {
                    if k == "version" {
                        continue;
                    }
                    for x in vals.as_array().unwrap() {
                        let mut x = x.as_str().unwrap().to_string();
                        if let Some(t) = task
                            && k == "X-Trace"
                        {
                            x.replace_range(2..18, t);
                        }
                        pairs.push((k.clone(), x));
                    }
                }
                pairs.sort_by_key(|(k, _)| k != "X-Trace");
                Report::from_pairs(pairs).unwrap()
            })
            .collect(),
    )
}

#[test]
fn xtrace_over_tcp_and_udp_in_both_formats_with_malformed_input() {
    let Some(reports) = hdfs_reports() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("x.db");
    let n = reports.len();
    let stats = rt().block_on(async {
        let c = Collector::start(config(&db)).await.unwrap();
        let tcp = c.addrs().xtrace_tcp.unwrap();
        let udp = c.addrs().xtrace_udp.unwrap();
        // First half over TCP: text and binary alternating, a malformed frame in the middle.
        let mut bytes = Vec::new();
        for (i, r) in reports[..n / 2].iter().enumerate() {
            encode_frame(
                &mut bytes,
                r,
                if i % 2 == 0 {
                    WireFormat::Text
                } else {
                    WireFormat::Binary
                },
            );
            if i == 10 {
                write_frame(&mut bytes, b"X-Trace Report ver 1.0\nAgent: no metadata\n");
            }
        }
        let mut s = TcpStream::connect(tcp).await.unwrap();
        // Written in odd-sized pieces so frames straddle reads.
        for piece in bytes.chunks(777) {
            s.write_all(piece).await.unwrap();
        }
        drop(s);
        // Second half over UDP, one report per datagram (some with the length prefix).
        let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        for (i, r) in reports[n / 2..].iter().enumerate() {
            let mut d = Vec::new();
            if i % 3 == 0 {
                encode_frame(&mut d, r, WireFormat::Binary);
            } else {
                WireFormat::Text.encode(r, &mut d);
            }
            sock.send_to(&d, udp).await.unwrap();
            // Paced: UDP has no flow control, and a full socket buffer drops in the kernel.
            if i % 8 == 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        sock.send_to(b"\x00garbage", udp).await.unwrap();
        // Wait until everything has been received (UDP on loopback is not lossy at this rate).
        for _ in 0..500 {
            let st = c.stats();
            if st.xtrace_reports as usize == n && st.xtrace_malformed == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        c.shutdown().await.unwrap()
    });
    assert_eq!(stats.xtrace_malformed, 2);
    assert_eq!(stats.udp_dropped_events, 0);
    assert_eq!(stats.xtrace_reports as usize, n);
    assert_eq!(stats.events_stored as usize, n);
    let store = Store::open(&db).unwrap();
    let g = TaskGraph::build(
        "57C1C4A67A6A88FD",
        store.load_task("57C1C4A67A6A88FD").unwrap(),
    );
    assert_eq!(g.len(), n);
    let edges: usize = reports.iter().map(|r| r.parents().count()).sum();
    assert_eq!(g.edges.len(), edges);
}

#[test]
fn shutdown_commits_everything_already_sent() {
    let Some(reports) = hdfs_reports() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("s.db");
    // Many reports, small queue: the writer is behind when shutdown starts.
    let rounds = 20;
    let cfg = Config {
        queue_batches: 2,
        batch_events: 64,
        ..config(&db)
    };
    // Each round in a task of its own: the same report sent twice would be stored once.
    let rounds_reports: Vec<Vec<Report>> = (0..rounds)
        .map(|i| {
            hdfs_reports_in_task(Some(&format!(
                "{:016X}",
                0x5700_0000_0000_0000u64 + i as u64
            )))
            .unwrap()
        })
        .collect();
    assert_eq!(rounds_reports[1].len(), reports.len());
    let stats = rt().block_on(async {
        let c = Collector::start(cfg).await.unwrap();
        let tcp = c.addrs().xtrace_tcp.unwrap();
        let mut bytes = Vec::new();
        for round in &rounds_reports {
            for r in round {
                encode_frame(&mut bytes, r, WireFormat::Binary);
            }
        }
        let mut s = TcpStream::connect(tcp).await.unwrap();
        s.write_all(&bytes).await.unwrap();
        s.shutdown().await.unwrap();
        // Accepted, then stop at once.
        while c.stats().tcp_connections == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        c.shutdown().await.unwrap()
    });
    let want = rounds * reports.len();
    assert_eq!(stats.events_stored as usize, want);
    assert_eq!(
        Store::open(&db).unwrap().event_count().unwrap() as usize,
        want
    );
}

/// Regression: clients that send OTLP/HTTP headers and part of a body, then nothing, held every
/// decode slot (`MAX_HTTP_IN_FLIGHT`) forever, so no later request was ever answered and a clean
/// shutdown waited for them. Now a body not complete within `http_body_timeout` gets `408`.
#[test]
fn stalled_otlp_bodies_time_out_and_free_their_slots() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("stall.db");
    let good = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[
        {"traceId":"0AF7651916CD43DD8448EB211C80319C","spanId":"B7AD6B7169203331","name":"ok","startTimeUnixNano":1,"endTimeUnixNano":2}]}]}]}"#;
    let stats = rt().block_on(async {
        let cfg = Config { http_body_timeout: Duration::from_millis(1500), ..config(&db) };
        let c = Collector::start(cfg).await.unwrap();
        let addr = c.addrs().otlp_http.unwrap();
        let mut stalled = Vec::new();
        for _ in 0..causal_collector::server::MAX_HTTP_IN_FLIGHT + 2 {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"resourceSpans\":")
                .await
                .unwrap();
            stalled.push(s);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let head = vec![
            "POST /v1/traces".to_string(),
            "Host: 127.0.0.1".into(),
            "Content-Type: application/json".into(),
            format!("Content-Length: {}", good.len()),
        ];
        // `http` gives up after 10 s without a response (before the fix: forever).
        let (s, _) = http(addr, &head, good, None).await;
        assert_eq!(s, 200);
        // The stalled clients were told why.
        let mut resp = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(10), stalled[0].read_to_end(&mut resp)).await.unwrap().unwrap();
        assert!(n > 0 && resp.starts_with(b"HTTP/1.1 408"), "{:?}", String::from_utf8_lossy(&resp));
        tokio::time::timeout(Duration::from_secs(10), c.shutdown()).await.expect("shutdown waits for no stalled body").unwrap()
    });
    assert_eq!(stats.otlp_requests, 1);
    assert_eq!(
        stats.otlp_bad_requests as usize,
        causal_collector::server::MAX_HTTP_IN_FLIGHT + 2
    );
    assert_eq!(stats.events_stored, 2);
}

/// Regression: a 64 KiB gzip body that expands to 64 MiB of `{},` was accepted and decoded into
/// ~1.2 GB of JSON values (three at once took the collector to 3.5 GB RSS). Bodies now may expand
/// to `MAX_GZIP_EXPANSION` (= `MAX_HTTP_BODY`, 16 MiB) only.
#[test]
fn gzip_bomb_beyond_the_body_limit_is_rejected() {
    use causal_collector::server::{MAX_GZIP_EXPANSION, MAX_HTTP_BODY};
    assert_eq!(MAX_GZIP_EXPANSION, MAX_HTTP_BODY as u64);
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("bomb.db");
    let gz = |n: usize| {
        let mut body = b"{\"resourceSpans\":[".to_vec();
        body.extend(std::iter::repeat_n(*b"{},", n).flatten());
        body.extend_from_slice(b"{}]}");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut e, &body).unwrap();
        (body.len(), e.finish().unwrap())
    };
    let (big_len, big) = gz(MAX_HTTP_BODY / 3 + 1000);
    let (small_len, small) = gz(1000);
    assert!(big_len > MAX_HTTP_BODY && big.len() < 100_000 && small_len < 4000);
    let head = |len: usize| -> Vec<String> {
        vec![
            "POST /v1/traces".into(),
            "Host: 127.0.0.1".into(),
            "Content-Type: application/json".into(),
            "Content-Encoding: gzip".into(),
            format!("Content-Length: {len}"),
        ]
    };
    let stats = rt().block_on(async {
        let c = Collector::start(config(&db)).await.unwrap();
        let addr = c.addrs().otlp_http.unwrap();
        let (s, b) = http(addr, &head(big.len()), &big, None).await;
        assert_eq!(s, 400, "{}", String::from_utf8_lossy(&b));
        assert!(
            String::from_utf8_lossy(&b).contains("decompresses beyond"),
            "{}",
            String::from_utf8_lossy(&b)
        );
        let (s, _) = http(addr, &head(small.len()), &small, None).await;
        assert_eq!(s, 200);
        c.shutdown().await.unwrap()
    });
    assert_eq!((stats.otlp_requests, stats.otlp_bad_requests), (2, 1));
}

/// Regression: a TCP sender that closed in the middle of a frame lost that report silently (not
/// counted as malformed, not logged); the complete frames before it are still stored.
#[test]
fn tcp_frame_cut_by_the_sender_is_counted_as_malformed() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("cut.db");
    let text = |op: u32| {
        format!(
            "X-Trace Report ver 1.0\nX-Trace: 19AAAABBBBCCCCDDDD{op:016X}\nHost: h\nLabel: l{op}\n"
        )
    };
    let stats = rt().block_on(async {
        let c = Collector::start(config(&db)).await.unwrap();
        let tcp = c.addrs().xtrace_tcp.unwrap();
        let mut bytes = Vec::new();
        write_frame(&mut bytes, text(1).as_bytes());
        write_frame(&mut bytes, text(2).as_bytes());
        let mut cut = Vec::new();
        write_frame(&mut cut, text(3).as_bytes());
        bytes.extend_from_slice(&cut[..cut.len() / 2]);
        let mut s = TcpStream::connect(tcp).await.unwrap();
        s.write_all(&bytes).await.unwrap();
        drop(s);
        // Only a length prefix of 4 bytes, then close: also a cut frame.
        let mut s = TcpStream::connect(tcp).await.unwrap();
        s.write_all(&1000u32.to_be_bytes()).await.unwrap();
        drop(s);
        for _ in 0..500 {
            if c.stats().xtrace_malformed == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        c.shutdown().await.unwrap()
    });
    assert_eq!(stats.xtrace_malformed, 2);
    assert_eq!((stats.xtrace_reports, stats.events_stored), (2, 2));
}

/// Regression: a TCP sender that sent part of a frame and then nothing kept its connection slot
/// forever (`MAX_TCP_CONNECTIONS` of them stop all X-Trace ingest). Now the connection is closed
/// after `tcp_frame_timeout` without progress and the partial frame counted as malformed, while
/// an idle connection between frames stays open and usable.
#[test]
fn tcp_connection_stalled_inside_a_frame_is_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("stallframe.db");
    let report =
        b"X-Trace Report ver 1.0\nX-Trace: 19AAAABBBBCCCCDDDD0000000000000001\nHost: h\nLabel: l\n";
    let stats = rt().block_on(async {
        let cfg = Config {
            tcp_frame_timeout: Duration::from_millis(500),
            ..config(&db)
        };
        let c = Collector::start(cfg).await.unwrap();
        let tcp = c.addrs().xtrace_tcp.unwrap();
        let mut stalled = TcpStream::connect(tcp).await.unwrap();
        stalled.write_all(&1000u32.to_be_bytes()).await.unwrap();
        stalled.write_all(b"X-Trace Report").await.unwrap();
        let mut idle = TcpStream::connect(tcp).await.unwrap();
        let mut b = [0u8; 16];
        // The collector closes the stalled connection (read sees EOF), well within 10 s.
        let n = tokio::time::timeout(Duration::from_secs(10), stalled.read(&mut b))
            .await
            .expect("closed")
            .unwrap();
        assert_eq!(n, 0);
        // The idle one was not closed: a frame sent now is stored.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let mut f = Vec::new();
        write_frame(&mut f, report);
        idle.write_all(&f).await.unwrap();
        for _ in 0..500 {
            if c.stats().xtrace_reports == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        c.shutdown().await.unwrap()
    });
    assert_eq!(
        (
            stats.xtrace_malformed,
            stats.xtrace_reports,
            stats.events_stored
        ),
        (1, 1, 1)
    );
}

/// The kernel's UDP drops are counted: the real HDFS reports sent as one burst of text datagrams
/// at a socket with the smallest receive buffer. The burst is sent from the collector's only
/// runtime thread without yielding, so the collector reads nothing until it ends and most
/// datagrams overflow the buffer; a last datagram sent after the collector has drained the socket
/// carries the final drop counter (SO_RXQ_OVFL). Every datagram is either received or counted.
/// Then a second burst right before shutdown: its last drops reach no received datagram and are
/// read from /proc/net/udp when the socket closes.
#[test]
fn udp_burst_beyond_the_receive_buffer_counts_the_kernel_drops() {
    let Some(reports) = hdfs_reports() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("u.db");
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    // 16 KiB (32 KiB once the kernel doubles it): room for a few dozen small datagrams, each
    // charged its whole buffer (truesize), not its length.
    let cfg = Config {
        xtrace_tcp: None,
        otlp_http: None,
        xtrace_udp: Some(any),
        otlp_grpc: None,
        zipkin: None,
        udp_recv_buffer: 16 << 10,
        ..Config::loopback(&db)
    };
    let datagrams: Vec<Vec<u8>> = reports
        .iter()
        .map(|r| {
            let mut d = Vec::new();
            WireFormat::Text.encode(r, &mut d);
            d
        })
        .collect();
    let sent = datagrams.len() as u64;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (stats, during, first) = rt.block_on(async {
        let c = Collector::start(cfg).await.unwrap();
        let udp = c.addrs().xtrace_udp.unwrap();
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        // Blocking sends, no await: the collector's task cannot run during the burst.
        for d in &datagrams[..datagrams.len() - 1] {
            sock.send_to(d, udp).unwrap();
        }
        // Let the collector drain what the socket kept.
        let mut last = u64::MAX;
        for _ in 0..200 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let now = c.stats().udp_datagrams;
            if now == last && now > 0 {
                break;
            }
            last = now;
        }
        let during = c.stats();
        // The last report: the buffer is empty now, so it arrives, with the drop counter.
        sock.send_to(datagrams.last().unwrap(), udp).unwrap();
        for _ in 0..250 {
            if c.stats().udp_datagrams == during.udp_datagrams + 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let first = c.stats();
        for d in &datagrams {
            sock.send_to(d, udp).unwrap();
        }
        (c.shutdown().await.unwrap(), during, first)
    });
    eprintln!(
        "UDP burst 1: sent {sent}, received {}, kernel-dropped {}",
        first.udp_datagrams, first.udp_kernel_dropped
    );
    eprintln!(
        "UDP bursts 1+2: sent {}, received {}, kernel-dropped {}",
        2 * sent,
        stats.udp_datagrams,
        stats.udp_kernel_dropped
    );
    // Burst 1, counted from the control messages alone.
    assert!(first.udp_kernel_dropped > 0, "nothing dropped: {first:?}");
    assert!(
        during.udp_datagrams < sent / 10,
        "the buffer held {} datagrams",
        during.udp_datagrams
    );
    assert_eq!(first.udp_datagrams, during.udp_datagrams + 1, "{first:?}");
    assert_eq!(
        first.udp_datagrams + first.udp_kernel_dropped,
        sent,
        "{first:?}"
    );
    // Both bursts, with the count settled at shutdown.
    assert!(
        stats.udp_kernel_dropped > first.udp_kernel_dropped,
        "{stats:?}"
    );
    assert_eq!(
        stats.udp_datagrams + stats.udp_kernel_dropped,
        2 * sent,
        "{stats:?}"
    );
    assert_eq!(
        (
            stats.xtrace_reports,
            stats.xtrace_malformed,
            stats.udp_dropped_events
        ),
        (stats.udp_datagrams, 0, 0)
    );
    // Every report received is stored once or counted once as already stored.
    assert_eq!(
        stats.events_stored + stats.events_duplicate,
        stats.udp_datagrams,
        "{stats:?}"
    );
    // What was stored of burst 1 is what was received: its first reports and the last one.
    let store = Store::open(&db).unwrap();
    let events = store.load_task("57C1C4A67A6A88FD").unwrap();
    assert_eq!(stats.events_stored, events.len() as u64, "{stats:?}");
    // Burst 2 repeats burst 1: a report received in both is stored once (idempotent ingest).
    let distinct: HashSet<&str> = events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(distinct.len(), events.len());
    assert!(events.len() as u64 >= first.udp_datagrams);
    assert!(events.len() as u64 <= stats.udp_datagrams);
    let ids: HashSet<String> = events[..first.udp_datagrams as usize]
        .iter()
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(ids.len() as u64, first.udp_datagrams);
    assert!(ids.contains(&reports.last().unwrap().metadata.op_id().to_hex()));
    assert!(ids.contains(&reports[0].metadata.op_id().to_hex()));
}

/// Zipkin v2 JSON on `/api/v2/spans`: plain and gzip bodies answered `202` after the commit, the
/// spans stored as OTLP spans are; a body that is not a span list is `400`, another type `415`.
#[test]
fn zipkin_v2_json_spans_are_stored() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("z.db");
    let spans = br#"[{"traceId":"463ac35c9f6413ad48485a3953bb6124","id":"a2fb4a1d1a96d312","name":"get","kind":"SERVER",
        "timestamp":1700000000000000,"duration":2000,"localEndpoint":{"serviceName":"zsvc"},"tags":{"http.path":"/a"}},
      {"traceId":"463ac35c9f6413ad48485a3953bb6124","parentId":"a2fb4a1d1a96d312","id":"0f1e2d3c4b5a6978","name":"query",
        "timestamp":1700000000000500,"duration":1000,"localEndpoint":{"serviceName":"zsvc"}}]"#;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, spans).unwrap();
    let gz = gz.finish().unwrap();
    let stats = rt().block_on(async {
        let c = Collector::start(config(&db)).await.unwrap();
        let addr = c.addrs().zipkin.unwrap();
        let head = |len: usize, extra: &str| {
            let mut h = vec![
                "POST /api/v2/spans".to_string(),
                "Host: 127.0.0.1".into(),
                "Content-Type: application/json".into(),
                format!("Content-Length: {len}"),
            ];
            if !extra.is_empty() {
                h.push(extra.into());
            }
            h
        };
        let (s, _) = http(addr, &head(spans.len(), ""), spans, None).await;
        assert_eq!(s, 202);
        // The same spans again, gzip-compressed: accepted, stored once.
        let (s, _) = http(addr, &head(gz.len(), "Content-Encoding: gzip"), &gz, None).await;
        assert_eq!(s, 202);
        let (s, body) = http(addr, &head(2, ""), b"{}", None).await;
        assert_eq!(s, 400, "{}", String::from_utf8_lossy(&body));
        let mut proto = head(1, "");
        proto[2] = "Content-Type: application/x-protobuf".into();
        let (s, _) = http(addr, &proto, b"x", None).await;
        assert_eq!(s, 415);
        c.shutdown().await.unwrap()
    });
    assert_eq!(
        (
            stats.zipkin_requests,
            stats.zipkin_bad_requests,
            stats.otlp_spans
        ),
        (4, 2, 4),
        "{stats:?}"
    );
    assert_eq!(
        (stats.events_stored, stats.events_duplicate),
        (4, 4),
        "{stats:?}"
    );
    let store = Store::open(&db).unwrap();
    let t = &store.tasks(&TaskFilter::default()).unwrap()[0];
    assert_eq!(t.task_id, "463AC35C9F6413AD48485A3953BB6124");
    assert_eq!(t.duration_ns(), Some(2_000_000));
    let events = store.load_task(&t.task_id).unwrap();
    assert_eq!(events[0].field("http.path"), Some("/a"));
    assert_eq!(events[0].agent.as_deref(), Some("zsvc"));
    let g = TaskGraph::build(t.task_id.clone(), events);
    assert_eq!(g.len(), 4);
    assert!(g.problems.is_empty(), "{:?}", g.problems);
}

/// Retention (`--retention`, `--max-store-size`): the oldest tasks are deleted in steps while the
/// collector keeps taking reports.
#[test]
fn retention_deletes_the_oldest_tasks_while_ingest_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("ret.db");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let hour = 3_600_000_000_000i64;
    let ev = |task: String, ts: i64| causal_analysis::Event {
        task,
        id: "01".into(),
        timestamp_ns: Some(ts),
        labels: vec!["x".into()],
        fields: vec![("pad".into(), "p".repeat(200))],
        ..Default::default()
    };
    {
        // 1,000 tasks two days old and 10 from the last minute.
        let mut s = Store::open(&db).unwrap();
        let mut evs: Vec<_> = (0..1000)
            .map(|i| ev(format!("{:08X}", i + 1), now - 48 * hour + i))
            .collect();
        evs.extend((0..10).map(|i| ev(format!("F{:07X}", i + 1), now - 60_000_000_000 + i)));
        s.insert(&evs, 1).unwrap();
    }
    // X-Trace timestamps are in ms.
    let report = |op: u32| {
        format!(
            "X-Trace Report ver 1.0\nX-Trace: 19ABCDABCDABCDABCD{op:016X}\nHost: h\nLabel: live\nTimestamp: {now}\n",
            now = now / 1_000_000
        )
    };
    let stats = rt().block_on(async {
        let cfg = Config {
            retention: Some(Duration::from_secs(24 * 3600)),
            retention_interval: Duration::from_millis(20),
            ..config(&db)
        };
        let c = Collector::start(cfg).await.unwrap();
        let mut s = TcpStream::connect(c.addrs().xtrace_tcp.unwrap())
            .await
            .unwrap();
        // Reports keep arriving while the old tasks are deleted.
        for op in 1..=50u32 {
            let r = report(op);
            let mut frame = (r.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(r.as_bytes());
            s.write_all(&frame).await.unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        for _ in 0..250 {
            if c.stats().retention_deleted_tasks == 1000 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(s);
        tokio::time::sleep(Duration::from_millis(100)).await;
        c.shutdown().await.unwrap()
    });
    assert_eq!(stats.retention_deleted_tasks, 1000, "{stats:?}");
    assert_eq!(stats.events_stored, 50, "{stats:?}");
    let store = Store::open(&db).unwrap();
    let tasks = store.tasks(&TaskFilter::default()).unwrap();
    assert_eq!(tasks.len(), 11);
    assert_eq!(store.event_count().unwrap(), 60);

    // By size: a limit below what the 11 tasks use deletes the oldest until it holds (here all
    // but the newest few pages' worth), and never touches a store already under it.
    let used = store.used_bytes().unwrap();
    drop(store);
    let stats = rt().block_on(async {
        let cfg = Config {
            max_store_bytes: Some(1),
            retention_interval: Duration::from_millis(20),
            ..config(&db)
        };
        let c = Collector::start(cfg).await.unwrap();
        for _ in 0..250 {
            if c.stats().retention_deleted_tasks == 11 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        c.shutdown().await.unwrap()
    });
    assert_eq!(stats.retention_deleted_tasks, 11, "{stats:?}");
    let store = Store::open(&db).unwrap();
    assert!(store.tasks(&TaskFilter::default()).unwrap().is_empty());
    assert!(store.used_bytes().unwrap() < used);
}

/// With `Config::bearer_token`, OTLP/HTTP and Zipkin requests without `Authorization: Bearer
/// TOKEN` (or with another token) are refused with `401` and counted; with it they are stored.
#[test]
fn http_requests_without_the_bearer_token_are_refused_and_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("auth.db");
    let otlp = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0AF7651916CD43DD8448EB211C80319C","spanId":"B7AD6B7169203331","name":"ok","startTimeUnixNano":1,"endTimeUnixNano":2}]}]}]}"#;
    let zipkin = br#"[{"traceId":"463ac35c9f6413ad","id":"a2fb4a1d1a96d312","name":"z","timestamp":1,"duration":1}]"#;
    let stats = rt().block_on(async {
        let cfg = Config {
            bearer_token: Some("tok-123".into()),
            ..config(&db)
        };
        let c = Collector::start(cfg).await.unwrap();
        let (h, z) = (c.addrs().otlp_http.unwrap(), c.addrs().zipkin.unwrap());
        let head = |path: &str, len: usize, auth: Option<&str>| {
            let mut v = vec![
                format!("POST {path}"),
                "Host: 127.0.0.1".to_string(),
                "Content-Type: application/json".into(),
                format!("Content-Length: {len}"),
            ];
            if let Some(a) = auth {
                v.push(format!("Authorization: {a}"));
            }
            v
        };
        for auth in [
            None,
            Some("Bearer nope"),
            Some("Basic dG9rLTEyMw=="),
            Some("Bearer tok-12"),
        ] {
            let (s, body) = http(h, &head("/v1/traces", otlp.len(), auth), otlp, None).await;
            assert_eq!(s, 401, "{auth:?}: {}", String::from_utf8_lossy(&body));
            let (s, _) = http(z, &head("/api/v2/spans", zipkin.len(), auth), zipkin, None).await;
            assert_eq!(s, 401, "{auth:?}");
        }
        let (s, _) = http(
            h,
            &head("/v1/traces", otlp.len(), Some("Bearer tok-123")),
            otlp,
            None,
        )
        .await;
        assert_eq!(s, 200);
        let (s, _) = http(
            z,
            &head("/api/v2/spans", zipkin.len(), Some("bearer tok-123")),
            zipkin,
            None,
        )
        .await;
        assert_eq!(s, 202);
        c.shutdown().await.unwrap()
    });
    assert_eq!(stats.unauthenticated_requests, 8, "{stats:?}");
    assert_eq!(
        (
            stats.otlp_requests,
            stats.zipkin_requests,
            stats.events_stored
        ),
        (1, 1, 4),
        "{stats:?}"
    );
}
