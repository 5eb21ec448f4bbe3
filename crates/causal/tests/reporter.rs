//! The reporter in child processes (it is global per process): flush at a normal exit, the drop
//! counter when the queue overflows, and the UDP and file sinks. The child processes are the
//! scenarios of the `causal-test-child` binary (`src/bin/causal-test-child.rs`).

use std::net::{TcpListener, UdpSocket};
use std::time::Duration;

use causal::{Report, TaskId};
use causal_mock::TcpCollector;

mod common;
use common::{line_value, run_child};

#[test]
fn reports_are_flushed_at_a_normal_exit() {
    let collector = TcpCollector::start().unwrap();
    let out = run_child(
        "exit-without-flush",
        &[
            (
                "SIGHTLINE_CAUSAL_SINK",
                &format!("tcp://{}", collector.addr()),
            ),
            // A long interval, so only the exit flush can have sent them in time.
            ("SIGHTLINE_CAUSAL_FLUSH_MS", "60000"),
        ],
    );
    let task = TaskId::parse_hex(line_value(&out, "task ")).unwrap();
    let got = collector
        .received()
        .wait_for(task, 101, Duration::from_secs(10));
    assert_eq!(got.len(), 101);
    assert_eq!(
        got.iter()
            .filter(|r| r.label.as_deref() == Some("work"))
            .count(),
        100
    );
}

#[test]
fn a_full_queue_drops_and_counts_instead_of_blocking() {
    // A "collector" that accepts and never reads: the reporter's writes stall (until their 2 s
    // timeout) while the program keeps reporting into a 16-event queue.
    let stuck = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = stuck.local_addr().unwrap();
    let out = run_child(
        "overflow",
        &[
            ("SIGHTLINE_CAUSAL_SINK", &format!("tcp://{addr}")),
            ("SIGHTLINE_CAUSAL_QUEUE", "16"),
        ],
    );
    let queued: u64 = line_value(&out, "queued ").parse().unwrap();
    let dropped: u64 = line_value(&out, "dropped_queue_full ").parse().unwrap();
    assert_eq!(
        queued + dropped,
        20_001,
        "every event either queued or counted as dropped"
    );
    assert!(
        dropped > 0,
        "a 16-event queue cannot hold a 20,000-event burst"
    );
    drop(stuck);
}

#[test]
fn udp_sink_sends_one_report_per_datagram() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let out = run_child(
        "udp-and-file",
        &[(
            "SIGHTLINE_CAUSAL_SINK",
            &format!("udp://{}", sock.local_addr().unwrap()),
        )],
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
    let out = run_child(
        "udp-and-file",
        &[
            ("SIGHTLINE_CAUSAL_SINK", &format!("file:{}", path.display())),
            ("SIGHTLINE_CAUSAL_FORMAT", "binary"),
        ],
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

#[test]
fn head_sampling_follows_the_configured_rate() {
    let none = run_child(
        "sampling",
        &[
            ("SIGHTLINE_CAUSAL_SINK", "off"),
            ("SIGHTLINE_CAUSAL_SAMPLE", "0"),
        ],
    );
    assert_eq!(line_value(&none, "sampled "), "0");
    assert_eq!(
        line_value(&none, "queued "),
        "0",
        "unsampled tasks queue nothing"
    );
    assert_eq!(
        line_value(&none, "flags_clear "),
        "1000",
        "every unsampled task says so downstream"
    );
    let all = run_child("sampling", &[("SIGHTLINE_CAUSAL_SINK", "off")]);
    assert_eq!(line_value(&all, "sampled "), "1000");
    assert_eq!(
        line_value(&all, "queued "),
        "2000",
        "two events per sampled task"
    );
    assert_eq!(line_value(&all, "flags_clear "), "0");
    let half = run_child(
        "sampling",
        &[
            ("SIGHTLINE_CAUSAL_SINK", "off"),
            ("SIGHTLINE_CAUSAL_SAMPLE", "0.5"),
        ],
    );
    let n: u64 = line_value(&half, "sampled ").parse().unwrap();
    // Binomial(1000, 0.5): sd ~16, so 400..600 is more than 6 sd either way.
    assert!((400..=600).contains(&n), "sampled {n} of 1000 at rate 0.5");
    assert_eq!(line_value(&half, "queued ").parse::<u64>().unwrap(), 2 * n);
    assert_eq!(
        line_value(&half, "flags_clear ").parse::<u64>().unwrap(),
        1000 - n
    );
}

#[test]
fn an_unreachable_collector_costs_counted_drops() {
    // A port with nothing listening: bind, note the port, close.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = run_child(
        "sink-down",
        &[("SIGHTLINE_CAUSAL_SINK", &format!("tcp://127.0.0.1:{port}"))],
    );
    assert_eq!(line_value(&out, "sent "), "0");
    assert_eq!(line_value(&out, "dropped_sink "), "6");
    assert_eq!(line_value(&out, "dropped "), "6");
}

#[test]
fn bad_environment_values_are_named() {
    let out = run_child("bad-env", &[("SIGHTLINE_CAUSAL_SAMPLE", "lots")]);
    assert_eq!(
        line_value(&out, "config error: "),
        r#"SIGHTLINE_CAUSAL_SAMPLE="lots": a number in [0, 1]"#
    );
    let out = run_child("bad-env", &[("SIGHTLINE_CAUSAL_SINK", "http://x")]);
    assert!(line_value(&out, "config error: ").starts_with(r#"SIGHTLINE_CAUSAL_SINK="http://x""#));
    let out = run_child(
        "bad-env",
        &[
            ("SIGHTLINE_CAUSAL_FORMAT", "binary"),
            ("SIGHTLINE_CAUSAL_QUEUE", "64"),
        ],
    );
    assert_eq!(line_value(&out, "config "), "ok");
}
