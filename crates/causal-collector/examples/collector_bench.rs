//! Load generator and analysis timer for `bench/collector-bench.sh`.
//!
//! ```text
//! collector_bench load ADDR EVENTS CONNS FORMAT BIG [FIRST]
//!     Sends EVENTS X-Trace reports over CONNS TCP connections to ADDR (length-prefixed frames,
//!     FORMAT text or binary) as fast as the collector takes them. Connection 0 first sends one
//!     task of BIG events; then every connection sends tasks of 1,000 events. In a task, event i
//!     has parent i-1, and every tenth event also has parent i-5 (a join). FIRST (default 0)
//!     numbers the connections from FIRST, so that several generators loading several
//!     collectors of one store send distinct tasks.
//! collector_bench baseline DB EVENTS
//!     The store alone: the same events (already decoded) inserted straight into a new store DB
//!     in transactions of 16,384, timing only the inserts. The ceiling the collector approaches.
//! collector_bench analyze DB
//!     Loads the largest task of store DB and times loading, rebuilding and its critical path.
//! collector_bench fill DB EVENTS
//!     Fills a new store DB (a SQLite file, or a `clickhouse://` URL: its database is dropped
//!     first) with EVENTS events of OTLP-shaped tasks (10 spans, 20 events each;
//!     three of 50 services per task; span names op0..op9 per service; http.status_code 200, or
//!     500 in 1% of tasks, with an error status; a user.id attribute unique per task), first-seen
//!     times spread evenly over 7 days from T0 = 1,700,000,000 s. Prints the fill rate. Task ids
//!     follow the task's number (and so its time), or with $FILL_IDS=random are a hash of it
//!     (as trace ids are: a day's tasks spread over the whole key range).
//! collector_bench search DB SERVICE SINCE_S UNTIL_S LIMIT
//!     Times `TraceStore::tasks` (DB: a SQLite file or a `clickhouse://` URL) with a service
//!     and a time range (unix seconds) three times and prints each answer's time and size (the
//!     first on a freshly opened store).
//! collector_bench bigtask DB EVENTS
//!     Stores one OTLP-shaped task of EVENTS events (EVENTS / 2 spans in a tree of fan-out 10, on
//!     4 hosts and 8 services, each span with 3 attributes) in a new store DB, under trace id
//!     B16B16B16B16B16B16B16B16B16B16B1; for `bench/show-json-bench.sh`.
//! collector_bench decode EVENTS
//!     Decodes EVENTS reports (the load's reports, X-Trace 1.0 text) into events with the
//!     collector's `decode_payload` (`causal::Report::decode`, then `report_to_event`), and with
//!     `Report::decode` alone, alternately five times each, and prints the best ns per event of
//!     each (CPU time of this thread): the whole decode and the share of it that is parsing.
//! collector_bench otlp http|grpc ADDR REQUESTS SPANS
//!     Sends REQUESTS OTLP export requests of SPANS spans each (protobuf, uncompressed, one trace
//!     per request, 3 attributes per span) one after another over one connection: OTLP/HTTP
//!     (`POST /v1/traces`, HTTP/1.1 kept alive) or OTLP/gRPC (the traces Export service over
//!     HTTP/2). The same requests for both protocols; they are encoded before the clock starts.
//!     Prints the time until every request was acknowledged and spans/s.
//! ```

use std::io::Write;
use std::net::TcpStream;
use std::time::Instant;

use causal::Report;
use causal::metadata::{Metadata, OpId, TaskId};
use causal::wire::{WireFormat, encode_frame};

fn report(task: u64, i: u64, conn: usize, t0: u64) -> Report {
    let op = |i: u64| OpId::new((task << 24) ^ i ^ 0x5A5A_0000_0000_0000);
    let mut r = Report::new(Metadata::new(
        TaskId::from_u64(task).expect("non-zero task"),
        op(i),
    ));
    if i > 1 {
        r.edges.push(op(i - 1));
    }
    if i > 5 && i.is_multiple_of(10) {
        r.edges.push(op(i - 5));
    }
    r.agent = Some(format!("agent{}", i % 7));
    r.label = Some(format!("step {i}"));
    r.host = Some(format!("host{}", conn % 3));
    r.process_id = Some(format!("{}", 1000 + conn));
    r.thread_id = Some(1 + i % 4);
    r.timestamp_ns = Some(t0 + i * 1000);
    r.hrt_ns = Some(i * 1000);
    r.fields.push(("Bytes".into(), (i * 37 % 4096).to_string()));
    r
}

fn load(addr: &str, events: u64, conns: usize, format: WireFormat, big: u64, first: usize) {
    let t0 = 1_700_000_000_000_000_000u64;
    let start = Instant::now();
    let per = events / conns as u64;
    let handles: Vec<_> = (0..conns)
        .map(|k| {
            let addr = addr.to_string();
            let c = first + k;
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).expect("connect to the collector");
                let mut buf = Vec::with_capacity(1 << 20);
                let mut sent = 0u64;
                let mut task = (c as u64 + 1) << 40;
                let mut emit = |task: u64, size: u64, sent: &mut u64, buf: &mut Vec<u8>| {
                    for i in 1..=size {
                        encode_frame(buf, &report(task, i, c, t0), format);
                        *sent += 1;
                        if buf.len() >= 1 << 20 {
                            s.write_all(buf).expect("write");
                            buf.clear();
                        }
                    }
                };
                if k == 0 && big > 0 {
                    emit(task, big, &mut sent, &mut buf);
                    task += 1;
                }
                while sent < per {
                    let size = 1000.min(per - sent);
                    emit(task, size, &mut sent, &mut buf);
                    task += 1;
                }
                s.write_all(&buf).expect("write");
                sent
            })
        })
        .collect();
    let sent: u64 = handles
        .into_iter()
        .map(|h| h.join().expect("sender thread"))
        .sum();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "load: sent {sent} events over {conns} connections in {secs:.2}s ({:.0} events/s accepted by the socket)",
        sent as f64 / secs
    );
}

/// CPU time of this thread, s (`/proc/thread-self/schedstat`, first field in ns).
fn thread_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1e9
}

fn baseline(db: &str, events: u64) {
    let mut store = causal_collector::Store::open(std::path::Path::new(db)).expect("open store");
    // As the collector's writer does.
    let _ckpt = store.start_checkpointer().expect("checkpointer");
    let t0 = 1_700_000_000_000_000_000u64;
    let mut spent = 0f64;
    let mut cpu = 0f64;
    let mut chunk = Vec::with_capacity(16_384);
    let mut task = 1u64 << 40;
    let mut done = 0u64;
    while done < events {
        let size = 1000.min(events - done);
        for i in 1..=size {
            chunk.push(causal_collector::xtrace::report_to_event(report(
                task, i, 0, t0,
            )));
            if chunk.len() == 16_384 {
                let (t, c) = (Instant::now(), thread_cpu_s());
                store.insert(&chunk, 0).expect("insert");
                spent += t.elapsed().as_secs_f64();
                cpu += thread_cpu_s() - c;
                chunk.clear();
            }
        }
        done += size;
        task += 1;
    }
    let (t, c0) = (Instant::now(), thread_cpu_s());
    store.insert(&chunk, 0).expect("insert");
    spent += t.elapsed().as_secs_f64();
    cpu += thread_cpu_s() - c0;
    println!(
        "baseline: {events} events inserted directly in {spent:.2}s wall ({:.0} events/s), {cpu:.2}s CPU ({:.0} events per CPU-second)",
        events as f64 / spent,
        events as f64 / cpu
    );
}

fn analyze(db: &str) {
    let store = causal_collector::Store::open(std::path::Path::new(db)).expect("open store");
    let tasks = store
        .tasks(&causal_collector::TaskFilter::default())
        .expect("list tasks");
    let largest = tasks.iter().max_by_key(|t| t.events).expect("a task");
    let t = Instant::now();
    let events = store.load_task(&largest.task_id).expect("load");
    let load_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let g = causal_analysis::TaskGraph::build(largest.task_id.clone(), events);
    let build_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let cp = causal_analysis::CriticalPath::compute(&g).expect("non-empty");
    let cp_s = t.elapsed().as_secs_f64();
    println!(
        "analyze: largest task {} of {} tasks: {} events, {} edges, {} joins; load {:.3}s, rebuild {:.3}s, critical path {:.4}s ({} steps)",
        largest.task_id,
        tasks.len(),
        g.len(),
        g.edges.len(),
        g.joins().len(),
        load_s,
        build_s,
        cp_s,
        cp.steps.len()
    );
}

fn decode(events: u64) {
    let t0 = 1_700_000_000_000_000_000u64;
    let payloads: Vec<Vec<u8>> = (1..=events)
        .map(|i| {
            let mut p = Vec::new();
            WireFormat::Text.encode(&report(1 + i / 1000, 1 + i % 1000, 0, t0), &mut p);
            p
        })
        .collect();
    let time = |f: &dyn Fn(&[u8]) -> usize| {
        let c = thread_cpu_s();
        let mut n = 0usize;
        for p in &payloads {
            n += f(p);
        }
        assert_eq!(n as u64, events, "one label per report");
        (thread_cpu_s() - c) * 1e9 / events as f64
    };
    let to_event = |p: &[u8]| {
        causal_collector::xtrace::decode_payload(p)
            .expect("decodes")
            .labels
            .len()
    };
    let parse = |p: &[u8]| usize::from(Report::decode(p).expect("decodes").label.is_some());
    let (mut a, mut b) = (f64::MAX, f64::MAX);
    for _ in 0..5 {
        a = a.min(time(&to_event));
        b = b.min(time(&parse));
    }
    println!(
        "decode (text): decode_payload {a:.0} ns/event, of which Report::decode {b:.0} ns/event"
    );
}

/// T0 of `fill`, ns.
const FILL_T0: i64 = 1_700_000_000_000_000_000;

fn fill(db: &str, events: u64) {
    use causal_analysis::{AttrValue, Event, Parent};
    use causal_collector::TraceStore as _;
    let spec = causal_collector::StoreSpec::parse(db).expect("store");
    match &spec {
        causal_collector::StoreSpec::Sqlite(p) => {
            let _ = std::fs::remove_file(p);
        }
        causal_collector::StoreSpec::ClickHouse(u) => {
            causal_collector::clickhouse::ClickHouseStore::open(u)
                .and_then(|s| s.drop_database())
                .expect("drop the ClickHouse database")
        }
    }
    let path = std::path::Path::new(db);
    let mut store = causal_collector::AnyStore::open(&spec).expect("open store");
    let tasks = (events / 20).max(1);
    let week_ns: i64 = 7 * 86_400 * 1_000_000_000;
    let step = week_ns / tasks as i64;
    let start = Instant::now();
    let mut batch: Vec<Event> = Vec::with_capacity(16_384);
    let mut written = 0u64;
    let random_ids = std::env::var("FILL_IDS").is_ok_and(|v| v == "random");
    for t in 0..tasks {
        let high = if random_ids {
            // splitmix64 of the task number: distinct, and spread over the key range.
            let mut z = t.wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        } else {
            0x5EA2_C400_0000_0000u64 | t
        };
        let task = format!("{high:016X}{:016X}00000000", t + 1);
        let t0 = FILL_T0 + t as i64 * step;
        let error = t % 100 == 7;
        let services = [t % 50, (t * 7 + 3) % 50, (t * 13 + 11) % 50];
        for s in 0..10u64 {
            let svc = format!("svc{:02}", services[(s % 3) as usize]);
            let span = format!("{:08X}{:08X}", t as u32, s as u32 + 1);
            let name = format!("op{s}");
            let code = if error && s == 0 { 500 } else { 200 };
            let (a, b) = (
                t0 + s as i64 * 1_000_000,
                t0 + 20_000_000 - s as i64 * 1_000_000,
            );
            let mut st = Event {
                task: task.clone(),
                id: format!("{span}:start"),
                agent: Some(svc.clone()),
                host: Some(format!("host{}", s % 4)),
                process: Some(svc.clone()),
                timestamp_ns: Some(a),
                labels: vec![format!("{name} start")],
                fields: vec![
                    ("span.name".into(), name.clone()),
                    ("span.kind".into(), "server".into()),
                    ("http.status_code".into(), code.to_string()),
                    ("user.id".into(), format!("u{t}")),
                ],
                typed: vec![("http.status_code".into(), AttrValue::Int(code))],
                ..Event::default()
            };
            if s > 0 {
                st.parents
                    .push(Parent::causal(format!("{:08X}{:08X}:start", t as u32, 1)));
            }
            let mut en = Event {
                task: task.clone(),
                id: format!("{span}:end"),
                agent: Some(svc),
                host: Some(format!("host{}", s % 4)),
                timestamp_ns: Some(b),
                labels: vec![format!("{name} end")],
                parents: vec![Parent::causal(format!("{span}:start"))],
                ..Event::default()
            };
            if code == 500 {
                en.fields.push(("status.code".into(), "error".into()));
            }
            batch.push(st);
            batch.push(en);
        }
        if batch.len() >= 16_000 {
            store.insert(&batch, 0).expect("insert");
            written += batch.len() as u64;
            batch.clear();
        }
    }
    store.insert(&batch, 0).expect("insert");
    written += batch.len() as u64;
    let spent = start.elapsed().as_secs_f64();
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    println!(
        "fill: {written} events in {tasks} tasks in {spent:.1}s ({:.0} events/s); store {:.2} GB",
        written as f64 / spent,
        size as f64 / 1e9
    );
}

fn bigtask(db: &str, events: u64) {
    use causal_analysis::{AttrValue, Event, Parent};
    let path = std::path::Path::new(db);
    let _ = std::fs::remove_file(path);
    let mut store = causal_collector::Store::open(path).expect("open store");
    let task = "B16B16B16B16B16B16B16B16B16B16B100000000".to_string();
    let spans = (events / 2).max(1);
    let id = |i: u64| format!("{:016X}", i + 1);
    // Span i's parent is (i - 1) / 10; a child starts after its parent and ends before it.
    let depth = |mut i: u64| {
        let mut d = 0i64;
        while i > 0 {
            i = (i - 1) / 10;
            d += 1;
        }
        d
    };
    let mut batch = Vec::with_capacity(16_384);
    for i in 0..spans {
        let d = depth(i);
        let (a, b) = (
            FILL_T0 + d * 1_000 + i as i64,
            FILL_T0 + 10_000_000_000 - d * 1_000 - i as i64,
        );
        let svc = format!("svc{}", i % 8);
        let mut st = Event {
            task: task.clone(),
            id: format!("{}:start", id(i)),
            agent: Some(svc.clone()),
            host: Some(format!("host{}", i % 4)),
            process: Some(svc.clone()),
            timestamp_ns: Some(a),
            labels: vec![format!("op{} start", i % 16)],
            fields: vec![
                ("span.name".into(), format!("op{}", i % 16)),
                ("span.kind".into(), "internal".into()),
                ("db.rows".into(), (i % 1000).to_string()),
                ("note".into(), format!("span number {i}")),
            ],
            typed: vec![("db.rows".into(), AttrValue::Int((i % 1000) as i64))],
            ..Event::default()
        };
        if i > 0 {
            st.parents
                .push(Parent::causal(format!("{}:start", id((i - 1) / 10))));
        }
        let en = Event {
            task: task.clone(),
            id: format!("{}:end", id(i)),
            agent: Some(svc.clone()),
            host: Some(format!("host{}", i % 4)),
            process: Some(svc),
            timestamp_ns: Some(b),
            labels: vec![format!("op{} end", i % 16)],
            parents: vec![Parent::causal(format!("{}:start", id(i)))],
            ..Event::default()
        };
        batch.push(st);
        batch.push(en);
        if batch.len() >= 16_000 {
            store.insert(&batch, 0).expect("insert");
            batch.clear();
        }
    }
    store.insert(&batch, 0).expect("insert");
    println!(
        "bigtask: {} events in task B16B16B16B16B16B16B16B16B16B16B1",
        spans * 2
    );
}

fn search(db: &str, service: &str, since_s: i64, until_s: i64, limit: usize) {
    use causal_collector::TraceStore as _;
    let spec = causal_collector::StoreSpec::parse(db).expect("store");
    let store = causal_collector::AnyStore::open(&spec).expect("open store");
    let filter = causal_collector::TaskFilter {
        service: Some(service.into()),
        since_ns: Some(since_s * 1_000_000_000),
        until_ns: Some(until_s * 1_000_000_000),
        limit: Some(limit),
        ..Default::default()
    };
    for run in 1..=3 {
        let t = Instant::now();
        let found = store.tasks(&filter).expect("query");
        let ms = t.elapsed().as_secs_f64() * 1e3;
        assert!(
            found
                .iter()
                .all(|f| f.services.iter().any(|s| s == service))
        );
        println!(
            "search {run}: service {service} in [{since_s}, {until_s}) limit {limit}: {} tasks in {ms:.2} ms",
            found.len()
        );
    }
}

/// The OTLP export requests of `collector_bench otlp`, protobuf-encoded: request `r` is trace
/// `r + 1` with `spans` spans (a chain: span i's parent is span i-1), 3 attributes each.
fn otlp_requests(requests: u64, spans: u64) -> Vec<Vec<u8>> {
    (0..requests)
        .map(|r| {
            let trace = format!("{:032x}", 0xA000_0000_0000_0000_0000_0000u128 + u128::from(r) + 1);
            let spans: Vec<String> = (1..=spans)
                .map(|i| {
                    let parent = if i > 1 {
                        format!(r#","parentSpanId":"{:016x}""#, i - 1)
                    } else {
                        String::new()
                    };
                    let start = 1_700_000_000_000_000_000u64 + i * 1_000;
                    format!(
                        r#"{{"traceId":"{trace}","spanId":"{i:016x}"{parent},"name":"op{}","kind":2,"startTimeUnixNano":"{start}","endTimeUnixNano":"{}","attributes":[{{"key":"http.method","value":{{"stringValue":"GET"}}}},{{"key":"http.status_code","value":{{"intValue":"200"}}}},{{"key":"user.id","value":{{"stringValue":"u{r}"}}}}]}}"#,
                        i % 10,
                        start + 500
                    )
                })
                .collect();
            let json = format!(
                r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"svc{}"}}}}]}},"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
                r % 8,
                spans.join(",")
            );
            let req = causal_collector::otlp::decode_json(json.as_bytes()).expect("OTLP/JSON");
            prost::Message::encode_to_vec(&req)
        })
        .collect()
}

/// Reads one HTTP/1.1 answer from `s` into `buf` (status line, headers, Content-Length body);
/// returns its status.
async fn read_http_answer(s: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> u16 {
    use tokio::io::AsyncReadExt;
    buf.clear();
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let status = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = s.read(&mut tmp).await.expect("read the answer");
                assert!(n > 0, "the collector closed the connection");
                buf.extend_from_slice(&tmp[..n]);
            }
            return status;
        }
        let n = s.read(&mut tmp).await.expect("read the answer");
        assert!(n > 0, "the collector closed the connection");
        buf.extend_from_slice(&tmp[..n]);
    }
}

fn otlp(protocol: &str, addr: &str, requests: u64, spans: u64) {
    let bodies = otlp_requests(requests, spans);
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let secs = rt.block_on(async {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connect to the collector");
        s.set_nodelay(true).expect("nodelay");
        let start = Instant::now();
        match protocol {
            "http" => {
                let mut buf = Vec::new();
                for b in &bodies {
                    let head = format!(
                        "POST /v1/traces HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\r\n",
                        b.len()
                    );
                    s.write_all(head.as_bytes()).await.expect("write");
                    s.write_all(b).await.expect("write");
                    let status = read_http_answer(&mut s, &mut buf).await;
                    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&buf));
                }
            }
            "grpc" => {
                let (client, conn) = h2::client::handshake(s).await.expect("HTTP/2 handshake");
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                for b in &bodies {
                    let req = http::Request::builder()
                        .method("POST")
                        .uri(format!(
                            "http://{addr}/opentelemetry.proto.collector.trace.v1.TraceService/Export"
                        ))
                        .header("content-type", "application/grpc")
                        .header("te", "trailers")
                        .body(())
                        .expect("request");
                    let mut client = client.clone().ready().await.expect("HTTP/2 ready");
                    let (resp, mut send) = client.send_request(req, false).expect("send");
                    let mut framed = Vec::with_capacity(b.len() + 5);
                    framed.push(0u8);
                    framed.extend_from_slice(&(b.len() as u32).to_be_bytes());
                    framed.extend_from_slice(b);
                    send.send_data(framed.into(), true).expect("send body");
                    let resp = resp.await.expect("answer");
                    let mut status = resp
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    let mut body = resp.into_body();
                    while let Some(d) = body.data().await {
                        let d = d.expect("answer body");
                        let _ = body.flow_control().release_capacity(d.len());
                    }
                    if let Ok(Some(t)) = body.trailers().await
                        && let Some(v) = t.get("grpc-status")
                    {
                        status = v.to_str().ok().map(str::to_string);
                    }
                    assert_eq!(status.as_deref(), Some("0"), "gRPC status");
                }
            }
            other => panic!("protocol {other:?}: http or grpc"),
        }
        start.elapsed().as_secs_f64()
    });
    let n = requests * spans;
    println!(
        "otlp {protocol}: {requests} requests of {spans} spans ({n} spans, {:.1} MB protobuf) acknowledged in {secs:.2}s = {:.0} spans/s",
        bytes as f64 / 1e6,
        n as f64 / secs
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("load") if args.len() == 7 || args.len() == 8 => {
            let format = WireFormat::parse(&args[5]).expect("format: text or binary");
            load(
                &args[2],
                args[3].parse().expect("EVENTS"),
                args[4].parse().expect("CONNS"),
                format,
                args[6].parse().expect("BIG"),
                args.get(7).map_or(0, |f| f.parse().expect("FIRST")),
            );
        }
        Some("analyze") if args.len() == 3 => analyze(&args[2]),
        Some("baseline") if args.len() == 4 => baseline(&args[2], args[3].parse().expect("EVENTS")),
        Some("decode") if args.len() == 3 => decode(args[2].parse().expect("EVENTS")),
        Some("bigtask") if args.len() == 4 => bigtask(&args[2], args[3].parse().expect("EVENTS")),
        Some("otlp") if args.len() == 6 => otlp(
            &args[2],
            &args[3],
            args[4].parse().expect("REQUESTS"),
            args[5].parse().expect("SPANS"),
        ),
        Some("fill") if args.len() == 4 => fill(&args[2], args[3].parse().expect("EVENTS")),
        Some("search") if args.len() == 7 => search(
            &args[2],
            &args[3],
            args[4].parse().expect("SINCE_S"),
            args[5].parse().expect("UNTIL_S"),
            args[6].parse().expect("LIMIT"),
        ),
        _ => {
            eprintln!(
                "usage: collector_bench load ADDR EVENTS CONNS text|binary BIG [FIRST] | baseline DB EVENTS | analyze DB | decode EVENTS | fill DB EVENTS | bigtask DB EVENTS | search DB SERVICE SINCE_S UNTIL_S LIMIT | otlp http|grpc ADDR REQUESTS SPANS"
            );
            std::process::exit(2);
        }
    }
}
