//! The example system (two back ends, a front end, a client: four processes on loopback) reports
//! to a mock collector over TCP; its task must be a DAG with a fan-out and a fan-in join.

use std::process::Command;
use std::time::Duration;

use causal::{Report, TaskId};
use causal_mock::{TcpCollector, expect, expect_task};

fn run_demo(format: &str) -> (TaskId, Vec<Report>, String) {
    let collector = TcpCollector::start().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_causal-example"))
        .arg("demo")
        .env(
            "SIGHTLINE_CAUSAL_SINK",
            format!("tcp://{}", collector.addr()),
        )
        .env("SIGHTLINE_CAUSAL_FORMAT", format)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "demo failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let task = stdout
        .lines()
        .find_map(|l| l.strip_prefix("task "))
        .expect("task line");
    let task = TaskId::parse_hex(task).unwrap();
    let reports = collector
        .received()
        .wait_for(task, 12, Duration::from_secs(10));
    assert!(
        collector.bad_frames().is_empty(),
        "{:?}",
        collector.bad_frames()
    );
    (task, reports, stdout)
}

fn check_dag(reports: &[Report]) {
    expect_task()
        .event(
            expect::event()
                .label("client request")
                .agent("client")
                .no_parents(),
        )
        .event(
            expect::event()
                .label("frontend recv")
                .agent("frontend")
                .parents(["client request"]),
        )
        // Fan-out: two calls on two threads, both after "frontend recv".
        .event(
            expect::event()
                .label("call backend")
                .field("backend", "a")
                .parents(["frontend recv"]),
        )
        .event(
            expect::event()
                .label("call backend")
                .field("backend", "b")
                .parents(["frontend recv"]),
        )
        .event(
            expect::event()
                .label("backend recv")
                .agent("backend-a")
                .parents(["call backend"]),
        )
        .event(
            expect::event()
                .label("backend recv")
                .agent("backend-b")
                .parents(["call backend"]),
        )
        .event(
            expect::event()
                .label("backend done")
                .agent("backend-a")
                .field("answer", "a:30")
                .parents(["backend recv"]),
        )
        .event(
            expect::event()
                .label("backend done")
                .agent("backend-b")
                .field("answer", "b:60")
                .parents(["backend recv"]),
        )
        // Each call thread continues after its back end's last event (carried in the response).
        .event(
            expect::event()
                .label("backend answered")
                .field("backend", "a")
                .parents(["call backend", "backend done"]),
        )
        .event(
            expect::event()
                .label("backend answered")
                .field("backend", "b")
                .parents(["call backend", "backend done"]),
        )
        // Fan-in: the join follows both call threads (and the front end's own path).
        .event(
            expect::event()
                .label("join answers")
                .agent("frontend")
                .field("answers", "2")
                .parents(["frontend recv", "backend answered", "backend answered"]),
        )
        .event(
            expect::event()
                .label("client done")
                .agent("client")
                .field("answer", "a:30,b:60")
                .parents(["client request", "join answers"]),
        )
        .only()
        .check(reports);
    // Four processes took part.
    let mut pids: Vec<_> = reports
        .iter()
        .filter_map(|r| r.process_id.clone())
        .collect();
    pids.sort();
    pids.dedup();
    assert_eq!(pids.len(), 4, "client, front end, two back ends");
    // The join's edges point at events of the two different call threads.
    let join = reports
        .iter()
        .find(|r| r.label.as_deref() == Some("join answers"))
        .unwrap();
    let answered: Vec<_> = reports
        .iter()
        .filter(|r| r.label.as_deref() == Some("backend answered"))
        .collect();
    for a in &answered {
        assert!(join.edges.contains(&a.metadata.op_id()));
    }
    assert_ne!(answered[0].thread_id, answered[1].thread_id);
}

#[test]
fn example_system_forms_a_dag_with_fan_out_and_fan_in_text_format() {
    let (task, reports, stdout) = run_demo("text");
    check_dag(&reports);
    assert!(reports.iter().all(|r| r.metadata.task_id() == task));
    // W3C: the trace-id that went out comes back.
    let sent = stdout
        .lines()
        .find_map(|l| l.strip_prefix("traceparent sent "))
        .unwrap();
    let back = stdout
        .lines()
        .find_map(|l| l.strip_prefix("traceparent back "))
        .unwrap();
    assert_eq!(sent.len(), 55);
    assert_eq!(
        sent[..36],
        back[..36],
        "same version and trace-id: {sent} vs {back}"
    );
    assert_ne!(
        sent[36..52],
        back[36..52],
        "the parent-id is the front end's latest event"
    );
}

#[test]
fn example_system_native_binary_format() {
    let (_, reports, _) = run_demo("binary");
    check_dag(&reports);
}
