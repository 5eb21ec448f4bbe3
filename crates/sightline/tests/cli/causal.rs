//! The `sightline` binary: `import`, `tasks`, `show` on the real HDFS trace, and `collect` on
//! ephemeral loopback ports stopped by SIGTERM with nothing lost.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::{COLLECT_ANY_PORTS, Collecting, run};

#[test]
fn import_tasks_and_show_the_hdfs_trace() {
    let Some(f) = test_support::shared_data("xtrace/hdfs_download.json") else {
        return;
    };
    let Some(gc) = test_support::shared_data("xtrace/jvm_gc.json") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("cli.db");
    let out = run(&["import", f.to_str().unwrap(), gc.to_str().unwrap()], &db);
    assert!(
        out.contains("hdfs_download.json: 839 events in 1 tasks"),
        "{out}"
    );
    assert!(out.contains("jvm_gc.json: 31 events in 8 tasks"), "{out}");

    let tasks = run(&["tasks"], &db);
    let line = tasks
        .lines()
        .find(|l| l.starts_with("57C1C4A67A6A88FD"))
        .unwrap();
    assert!(
        line.contains("2013-11-20 23:23:20.278")
            && line.contains(" 839 ")
            && line.contains("1.638s"),
        "{line}"
    );
    assert!(
        line.contains("manny") && line.ends_with("Start Trace: Executing Command"),
        "{line}"
    );
    assert_eq!(tasks.lines().count(), 1 + 9);
    // Filters: by tag, by title, by time.
    assert_eq!(run(&["tasks", "--tag", "GC"], &db).lines().count(), 1 + 8);
    assert_eq!(
        run(&["tasks", "--title", "executing"], &db).lines().count(),
        1 + 1
    );
    assert_eq!(
        run(&["tasks", "--since", "2013-11-20T23:23:20"], &db)
            .lines()
            .count(),
        1 + 3
    );
    let json: Value = serde_json::from_str(&run(
        &["tasks", "--json", "--until", "2013-11-20T23:23:00"],
        &db,
    ))
    .unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2);

    let text = run(&["show", "57c1", "--critical-path"], &db);
    assert!(
        text.starts_with("task 57C1C4A67A6A88FD: 839 events, 887 edges"),
        "{}",
        &text[..200]
    );
    assert_eq!(text.matches("has an edge from unknown event").count(), 3);
    assert!(text.contains("join of 2 parents"));
    assert!(text.contains("\ncritical path: "));
    assert!(text.contains("time by process:"));
    // Every event is printed once.
    let ids = text
        .lines()
        .filter(|l| l.trim_end().len() > 16 && !l.contains("->") && !l.contains("join of"));
    assert!(ids.count() >= 839);

    let dot = run(
        &[
            "show",
            "57C1C4A67A6A88FD",
            "--format",
            "dot",
            "--critical-path",
        ],
        &db,
    );
    assert!(dot.starts_with("digraph \"57C1C4A67A6A88FD\" {"));
    assert_eq!(dot.lines().filter(|l| l.contains("\" -> \"")).count(), 887);
    assert!(dot.contains("color=red"));

    let json: Value =
        serde_json::from_str(&run(&["show", "57C1C4A67A6A88FD", "--format", "json"], &db)).unwrap();
    assert_eq!(json["events"].as_array().unwrap().len(), 839);
    assert_eq!(json["edges"].as_array().unwrap().len(), 887);
    assert!(json["critical_path"].is_null());

    // Resource accounting: the Bytes and Cycles reported in the file, summed per process.
    let file: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    let sum = |key: &str| -> f64 {
        file[0]["reports"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r.get(key))
            .map(|v| v[0].as_str().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    let json: Value = serde_json::from_str(&run(
        &[
            "show",
            "57C1C4A67A6A88FD",
            "--format",
            "json",
            "--resources",
        ],
        &db,
    ))
    .unwrap();
    let procs = json["resources"]["by_process"].as_array().unwrap();
    assert_eq!(procs.len(), 3);
    for key in ["Bytes", "Cycles"] {
        let got: f64 = procs
            .iter()
            .filter_map(|p| p["resources"][key].as_f64())
            .sum();
        assert_eq!(got, sum(key), "{key}");
    }
    let events: u64 = procs.iter().map(|p| p["events"].as_u64().unwrap()).sum();
    assert_eq!(events, 839);
    assert!(run(&["show", "57C1", "--resources"], &db).contains("resources by process"));

    // Comparison of two GC tasks: 5 and 3 events.
    let cmp = run(&["show", "438A", "--compare", "39DF"], &db);
    let events_row = cmp.lines().find(|l| l.starts_with("events")).unwrap();
    assert_eq!(
        events_row.split_whitespace().collect::<Vec<_>>(),
        ["events", "5", "3"],
        "{cmp}"
    );
    assert!(cmp.contains("GarbageCollection"), "{cmp}");

    let bad = crate::sightline()
        .args(["show", "ZZ", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no task matches"));
}

#[test]
fn collect_over_loopback_then_sigterm_loses_nothing() {
    let Some(py) = test_support::shared_data("otlp/python_sdk_traces.pb") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("collect.db");
    let mut c = Collecting::start(
        crate::sightline()
            .args(COLLECT_ANY_PORTS)
            .arg("--db")
            .arg(&db)
            .stderr(Stdio::null()),
    );
    // "sightline collect: X-Trace TCP 127.0.0.1:P UDP 127.0.0.1:P; OTLP/HTTP http://127.0.0.1:P/v1/traces; …"
    let grpc = c.after("OTLP/gRPC");
    assert!(
        grpc.starts_with("127.0.0.1:") && grpc != "127.0.0.1:0",
        "{}",
        c.first
    );
    let tcp = c.after("TCP");
    let http = c.otlp_http();

    // X-Trace: a three-event diamond-free chain plus a join, in text reports.
    let mut frames = Vec::new();
    let reports = [
        "X-Trace: 19AAAABBBBCCCCDDDD0000000000000001\nAgent: front\nLabel: request\nHost: h1\nTimestamp: 1000000000000000000\n",
        "X-Trace: 19AAAABBBBCCCCDDDD0000000000000002\nAgent: back\nLabel: a\nHost: h1\nTimestamp: 1000000000001000000\nEdge: 0000000000000001\n",
        "X-Trace: 19AAAABBBBCCCCDDDD0000000000000003\nAgent: back\nLabel: b\nHost: h1\nTimestamp: 1000000000005000000\nEdge: 0000000000000001\n",
        "X-Trace: 19AAAABBBBCCCCDDDD0000000000000004\nAgent: front\nLabel: joined\nHost: h1\nTimestamp: 1000000000006000000\nEdge: 0000000000000002\nEdge: 0000000000000003\n",
    ];
    for r in reports {
        let payload = format!("X-Trace Report ver 1.0\n{r}");
        frames.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        frames.extend_from_slice(payload.as_bytes());
    }
    let mut s = TcpStream::connect(&tcp).unwrap();
    s.write_all(&frames).unwrap();
    drop(s);

    // OTLP: the captured Python request, twice (an exporter's retry); a 200 means committed.
    let body = std::fs::read(&py).unwrap();
    for _ in 0..2 {
        let mut h = TcpStream::connect(&http).unwrap();
        write!(h, "POST /v1/traces HTTP/1.1\r\nHost: {http}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).unwrap();
        h.write_all(&body).unwrap();
        let mut resp = String::new();
        h.read_to_string(&mut resp).unwrap();
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    }

    // Give the TCP connection a moment to be accepted, then SIGTERM.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let status = c.sigterm();
    let mut rest = String::new();
    c.stdout.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{rest}");
    // The retry's 9 events are reported once as already stored, not counted as stored.
    assert!(rest.contains("stopped; 13 events stored in "), "{rest}");
    assert!(
        rest.contains(" transactions; 9 already stored (not stored again); X-Trace"),
        "{rest}"
    );
    assert!(
        rest.contains("UDP dropped 0 with the store queue full, 0 by the kernel"),
        "{rest}"
    );

    let text = run(&["show", "AAAABBBBCCCCDDDD", "--critical-path"], &db);
    assert!(
        text.starts_with("task AAAABBBBCCCCDDDD: 4 events, 4 edges, 1 joins, 1 roots"),
        "{text}"
    );
    let cp: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("critical path"))
        .skip(1)
        .take(3)
        .collect();
    assert!(
        cp[0].contains("front: request")
            && cp[1].contains("back: b")
            && cp[2].contains("(join) front: joined"),
        "{cp:?}"
    );
    let tasks = run(&["tasks"], &db);
    assert_eq!(tasks.lines().count(), 1 + 2, "{tasks}");
}

/// Regression: `sightline tasks`/`show` with a mistyped `--db` created an empty store file there
/// and answered as if the store were empty.
#[test]
fn show_into_a_closed_pipe_is_not_an_error_in_any_format() {
    let Some(f) = test_support::shared_data("xtrace/hdfs_download.json") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("pipe.db");
    run(&["import", f.to_str().unwrap()], &db);
    for format in ["text", "dot", "json"] {
        // `| head -1`: the reader takes one line and closes the pipe; the 839-event task's
        // output is far larger than the pipe's buffer, so the writer meets the closed end.
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sightline"))
            .args(["show", "57C1", "--format", format, "--db"])
            .arg(&db)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut first,
        )
        .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(!first.is_empty(), "{format}: no first line");
        assert_eq!(
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).into_owned()
            ),
            (Some(0), String::new()),
            "{format}"
        );
    }
}

#[test]
fn reading_commands_do_not_create_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("typo.db");
    for args in [&["tasks"][..], &["show", "ABCD"][..]] {
        let out = crate::sightline()
            .args(args)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no store at"), "{args:?}: {err}");
        assert!(!db.exists(), "{args:?} created {}", db.display());
    }
}

/// The captured OTLP requests imported: `tasks` lists each by its 32-digit W3C trace id (not the
/// stored 40-digit TaskId), and `show` takes that id in either case, the 40-digit form, or a
/// prefix, and names the task by the trace id.
#[test]
fn otlp_tasks_are_listed_and_shown_by_their_trace_id() {
    let Some(node) = test_support::shared_data("otlp/node_sdk_traces.json") else {
        return;
    };
    let Some(py) = test_support::shared_data("otlp/python_sdk_traces.pb") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("otlp.db");
    let out = run(
        &["import", node.to_str().unwrap(), py.to_str().unwrap()],
        &db,
    );
    assert_eq!(out.matches("9 events in 1 tasks").count(), 2, "{out}");
    let v: Value = serde_json::from_slice(&std::fs::read(&node).unwrap()).unwrap();
    let trace = v["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(trace.len(), 32);
    let upper = trace.to_ascii_uppercase();

    let tasks = run(&["tasks"], &db);
    let line = tasks
        .lines()
        .find(|l| l.starts_with(&upper))
        .unwrap_or_else(|| panic!("{tasks}"));
    assert_eq!(
        line.split_whitespace().next(),
        Some(upper.as_str()),
        "{line}"
    );
    assert!(!tasks.contains(&format!("{upper}00000000")), "{tasks}");
    // Every id in the table is a 32-digit trace id, and the header is as wide as the ids.
    for l in tasks.lines().skip(1) {
        assert_eq!(l.split_whitespace().next().unwrap().len(), 32, "{l}");
    }
    assert_eq!(
        tasks.lines().next().unwrap().find("FIRST SEEN"),
        Some(33),
        "{tasks}"
    );
    let json: Value = serde_json::from_str(&run(&["tasks", "--json"], &db)).unwrap();
    assert!(
        json.as_array()
            .unwrap()
            .iter()
            .any(|t| t["task_id"] == upper.as_str()),
        "{json}"
    );

    for given in [
        trace.clone(),
        upper.clone(),
        format!("{trace}00000000"),
        trace[..12].to_string(),
    ] {
        let text = run(&["show", &given], &db);
        assert!(
            text.starts_with(&format!("task {upper}: 9 events, 10 edges")),
            "{given}: {text}"
        );
    }
    let json: Value =
        serde_json::from_str(&run(&["show", &trace, "--format", "json"], &db)).unwrap();
    assert_eq!(json["task"], upper.as_str());
    assert!(
        json["events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["task"] == upper.as_str())
    );
    let dot = run(&["show", &trace, "--format", "dot"], &db);
    assert!(dot.starts_with(&format!("digraph \"{upper}\" {{")), "{dot}");
    // The comparison names both tasks by their whole trace ids.
    let other = tasks
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap())
        .find(|t| *t != upper)
        .unwrap();
    let cmp = run(
        &["show", &trace, "--compare", &other.to_ascii_lowercase()],
        &db,
    );
    assert!(
        cmp.starts_with(&format!("A = task {upper}\nB = task {other}\n")),
        "{cmp}"
    );
}

#[test]
fn importing_only_unreadable_files_fails_without_creating_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("typo.db");
    let missing = tmp.path().join("no-such-trace.json");
    let out = crate::sightline()
        .arg("import")
        .arg(&missing)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-trace.json") && err.contains("No such file"),
        "{err}"
    );
    assert!(!db.exists(), "no empty store left behind");
}

/// The soft and hard `RLIMIT_NOFILE` of this process, from `/proc/self/limits`.
fn nofile() -> (u64, u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let v: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (v[0], v[1])
}

/// Starts `sightline collect` under a descriptor limit of `fds` (prlimit(1)) with `extra` flags;
/// gives the collector and its stderr.
fn collect_limited(db: &Path, fds: u64, extra: &[&str]) -> (Collecting, std::process::ChildStderr) {
    let mut c = Collecting::start(
        Command::new("prlimit")
            .arg(format!("--nofile={fds}:{fds}"))
            .arg(crate::bin())
            .args(crate::COLLECT_OTLP_HTTP_ONLY)
            .arg("--db")
            .arg(db)
            .args(extra)
            .stderr(Stdio::piped()),
    );
    let stderr = c.child.stderr.take().unwrap();
    (c, stderr)
}

/// One OTLP/JSON request to `http`, with `Connection: close`: the status, or `None` when the
/// connection failed before an answer.
fn post_one(http: &str) -> Option<u16> {
    let body = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"6af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"ok","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}"#;
    let mut h = TcpStream::connect(http).ok()?;
    h.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let _ = write!(
        h,
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = h.write_all(body);
    let mut resp = String::new();
    let _ = h.read_to_string(&mut resp);
    resp.get(9..12)?.parse().ok()
}

/// Issue 22 as found: a collector with 1,024 descriptors, 1,100 connections that send part of a
/// header and stop; valid requests then timed out and `accept error: Too many open files` was
/// logged every second. Here under a limit of 256 descriptors: by default the collector holds
/// 128 connections (256 less 128 reserved) and answers the rest `503` at once; with
/// `--max-connections` above the descriptor limit, accept fails with EMFILE and is logged a
/// bounded number of times. In both, once the 2 s header timeout has closed the stalled
/// connections, a valid request is stored.
#[test]
fn collect_under_a_descriptor_limit_refuses_politely_then_serves() {
    let (soft, hard) = nofile();
    if hard < 2400 {
        eprintln!("skipped: RLIMIT_NOFILE hard limit {hard} < 2400");
        return;
    }
    if soft < 2400 {
        let ok = Command::new("prlimit")
            .args([
                "--pid",
                &std::process::id().to_string(),
                &format!("--nofile={hard}:{hard}"),
            ])
            .status()
            .unwrap();
        assert!(ok.success());
    }
    let tmp = tempfile::tempdir().unwrap();
    for (run, extra) in [
        ("default limit", &["--header-timeout", "2s"][..]),
        (
            "limit above the descriptors",
            &["--header-timeout", "2s", "--max-connections", "1000"][..],
        ),
    ] {
        let db = tmp.path().join(format!("{}.db", run.len()));
        let (mut c, mut stderr) = collect_limited(&db, 256, extra);
        let http = c.otlp_http();
        let mut stalled = Vec::new();
        for _ in 0..1100 {
            let mut s = TcpStream::connect(&http).unwrap();
            s.write_all(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Ty")
                .unwrap();
            stalled.push(s);
        }
        // Served once the header timeout has freed the descriptors (an exporter retries).
        let t0 = std::time::Instant::now();
        let mut answers = Vec::new();
        loop {
            let a = post_one(&http);
            answers.push(a);
            if a == Some(200) {
                break;
            }
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(40),
                "{run}: never served: {answers:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        drop(stalled);
        let status = c.sigterm();
        let (mut log, mut out) = (String::new(), String::new());
        c.stdout.read_to_string(&mut out).unwrap();
        stderr.read_to_string(&mut log).unwrap();
        assert!(out.contains("stopped; 2 events stored"), "{run}: {out}");
        assert!(status.success(), "{run}: {log}");
        let warnings = log.lines().filter(|l| l.contains("WARN")).count();
        // The first ten, then powers of two.
        assert!(warnings <= 25, "{run}: {warnings} warnings:\n{log}");
        if run == "default limit" {
            assert!(
                log.contains("refused: 128 connections open, the limit"),
                "{log}"
            );
            let count = |label: &str| -> u64 {
                out.split(label)
                    .nth(1)
                    .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("{label}: {out}"))
            };
            let (refused, timed_out) = (
                count("connections refused at the limit "),
                count("header timeouts "),
            );
            // At most 128 held at a time, each slot freed by a header timeout admitting one
            // more: of the 1,100, all but 128 + timeouts were refused.
            assert!(refused > 0 && refused + timed_out >= 1100 - 128, "{out}");
            assert!(timed_out > 0, "{out}");
            assert_eq!(count("accept errors "), 0, "{out}");
            assert!(!log.contains("accept failed"), "{log}");
        } else {
            assert!(log.contains("accept failed"), "{log}");
            assert!(log.contains("Too many open files"), "{log}");
        }
    }
}
