//! The reporter in child processes (it is global per process): flush at a normal exit, the drop
//! counter when the queue overflows, and the UDP and file sinks.

use std::net::{TcpListener, UdpSocket};
use std::process::Command;
use std::time::Duration;

use causal::mock::TcpCollector;
use causal::{Report, TaskId};

/// Runs this test binary's `helper` test in a child process with `env` set; returns its stdout.
fn run_helper(helper: &str, env: &[(&str, String)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", helper, "--nocapture", "--test-threads=1"]).env("CAUSAL_REPORTER_HELPER", helper);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{helper}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn is_helper(name: &str) -> bool {
    std::env::var("CAUSAL_REPORTER_HELPER").is_ok_and(|h| h == name)
}

fn line_value<'a>(stdout: &'a str, key: &str) -> &'a str {
    // The harness prints `test NAME ... ` before the helper's first line.
    stdout
        .lines()
        .find_map(|l| l.split_once(key).map(|(_, v)| v.trim()))
        .unwrap_or_else(|| panic!("no {key:?} in {stdout}"))
}

#[test]
fn helper_exit_without_flush() {
    if !is_helper("helper_exit_without_flush") {
        return;
    }
    let ctx = causal::start_task("before exit", []);
    for i in 0..100u32 {
        causal::report("work", [("i", i.into())]);
    }
    println!("task {}", ctx.task_id());
    // No flush: the reporter's atexit hook must send the 101 reports.
    std::process::exit(0);
}

#[test]
fn reports_are_flushed_at_a_normal_exit() {
    let collector = TcpCollector::start().unwrap();
    let out = run_helper("helper_exit_without_flush", &[("SIGHTLINE_CAUSAL_SINK", format!("tcp://{}", collector.addr())),
        // A long interval, so only the exit flush can have sent them in time.
        ("SIGHTLINE_CAUSAL_FLUSH_MS", "60000".into())]);
    let task = TaskId::parse_hex(line_value(&out, "task ")).unwrap();
    let got = collector.received().wait_for(task, 101, Duration::from_secs(10));
    assert_eq!(got.len(), 101);
    assert_eq!(got.iter().filter(|r| r.label.as_deref() == Some("work")).count(), 100);
}

#[test]
fn helper_overflow() {
    if !is_helper("helper_overflow") {
        return;
    }
    let _ctx = causal::start_task("flood", []);
    for _ in 0..20_000 {
        causal::report("x", []);
    }
    let s = causal::stats();
    println!("queued {}", s.queued);
    println!("dropped_queue_full {}", s.dropped_queue_full);
}

#[test]
fn a_full_queue_drops_and_counts_instead_of_blocking() {
    // A "collector" that accepts and never reads: the reporter's writes stall (until their 2 s
    // timeout) while the program keeps reporting into a 16-event queue.
    let stuck = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = stuck.local_addr().unwrap();
    let out = run_helper(
        "helper_overflow",
        &[("SIGHTLINE_CAUSAL_SINK", format!("tcp://{addr}")), ("SIGHTLINE_CAUSAL_QUEUE", "16".into())],
    );
    let queued: u64 = line_value(&out, "queued ").parse().unwrap();
    let dropped: u64 = line_value(&out, "dropped_queue_full ").parse().unwrap();
    assert_eq!(queued + dropped, 20_001, "every event either queued or counted as dropped");
    assert!(dropped > 0, "a 16-event queue cannot hold a 20,000-event burst");
    drop(stuck);
}

#[test]
fn helper_udp_and_file() {
    if !is_helper("helper_udp_and_file") {
        return;
    }
    let ctx = causal::start_task("datagram", [("k", "v".into())]);
    causal::report("second", []);
    println!("task {}", ctx.task_id());
    assert!(causal::flush(Duration::from_secs(10)));
    println!("sent {}", causal::stats().sent);
}

#[test]
fn udp_sink_sends_one_report_per_datagram() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let out = run_helper(
        "helper_udp_and_file",
        &[("SIGHTLINE_CAUSAL_SINK", format!("udp://{}", sock.local_addr().unwrap()))],
    );
    assert_eq!(line_value(&out, "sent "), "2");
    let task = TaskId::parse_hex(line_value(&out, "task ")).unwrap();
    let mut buf = vec![0u8; 65536];
    let mut labels = Vec::new();
    for _ in 0..2 {
        let n = sock.recv(&mut buf).unwrap();
        // No length prefix: the datagram is the X-Trace text report itself.
        assert!(buf[..n].starts_with(b"X-Trace Report ver 1.0\n"));
        let r = Report::decode(&buf[..n]).unwrap();
        assert_eq!(r.metadata.task_id(), task);
        labels.push(r.label.unwrap());
    }
    labels.sort();
    assert_eq!(labels, ["datagram", "second"]);
}

#[test]
fn file_sink_appends_frames() {
    let dir = std::env::temp_dir().join(format!("causal-file-sink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("reports.frames");
    let _ = std::fs::remove_file(&path);
    let out = run_helper(
        "helper_udp_and_file",
        &[("SIGHTLINE_CAUSAL_SINK", format!("file:{}", path.display())), ("SIGHTLINE_CAUSAL_FORMAT", "binary".into())],
    );
    let task = TaskId::parse_hex(line_value(&out, "task ")).unwrap();
    let mut f = std::fs::File::open(&path).unwrap();
    let mut scratch = Vec::new();
    let mut got = Vec::new();
    while let Some(r) = causal::wire::read_report(&mut f, &mut scratch).unwrap() {
        got.push(r);
    }
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|r| r.metadata.task_id() == task));
    assert_eq!(got[0].field("k"), Some("v"));
    assert_eq!(got[1].edges, vec![got[0].metadata.op_id()]);
    std::fs::remove_dir_all(&dir).unwrap();
}
