//! Every reported event fires the USDT probe `causal:event(task, op, label)`; bpftrace attached to
//! the example's client process sees its events with the right TaskId.

use std::process::Command;

#[test]
fn bpftrace_sees_causal_event_probes_with_the_task_id() {
    if !test_support::privileged("attaches bpftrace to the causal:event USDT probe") {
        return;
    }
    if !test_support::require_tool("bpftrace") {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_causal-example");
    let script = format!(
        r#"usdt:{bin}:causal:event {{ printf("EV %llx %llx %s\n", arg0, arg1, str(arg2)); }}"#
    );
    let out = Command::new("bpftrace")
        .args(["-e", &script, "-c", &format!("{bin} demo")])
        // Reports go nowhere; the probe fires regardless of the sink.
        .env("SIGHTLINE_CAUSAL_SINK", "off")
        .output()
        .expect("bpftrace is installed (scripts/install-deps.sh)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bpftrace: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let task = stdout
        .lines()
        .find_map(|l| l.strip_prefix("task "))
        .expect("demo printed its task");
    let task = u64::from_str_radix(task, 16).unwrap();
    let events: Vec<Vec<&str>> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("EV "))
        .map(|l| l.splitn(3, ' ').collect())
        .collect();
    // The client process (the one bpftrace started) reports two events of the task.
    let labels: Vec<&str> = events.iter().map(|e| e[2]).collect();
    assert_eq!(labels, ["client request", "client done"], "{stdout}");
    for e in &events {
        assert_eq!(
            u64::from_str_radix(e[0], 16).unwrap(),
            task,
            "arg0 is the 8-byte TaskId"
        );
        assert!(
            u64::from_str_radix(e[1], 16).unwrap() != 0,
            "arg1 is the event's OpId"
        );
    }
    assert_ne!(events[0][1], events[1][1]);
}
