//! Parses real tracefs format files of the running kernel.

use probe_sema::{Type, parse_tracepoint_format_full};
use std::path::Path;

/// Mounts tracefs at /sys/kernel/tracing if it is not mounted (needs root).
fn tracefs() -> Option<&'static Path> {
    let root = Path::new("/sys/kernel/tracing");
    if !root.join("events").exists() {
        let st = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status();
        // The other test may have mounted it meanwhile (then this mount fails with EBUSY).
        if !matches!(st, Ok(s) if s.success()) && !root.join("events").exists() {
            return None;
        }
    }
    Some(root)
}

#[test]
fn sched_switch_format_of_running_kernel() {
    if !test_support::privileged("reads tracefs event formats") {
        return;
    }
    let root = tracefs().expect("tracefs mountable as root");
    let text = std::fs::read_to_string(root.join("events/sched/sched_switch/format")).unwrap();
    let f = parse_tracepoint_format_full(&text).unwrap();
    assert_eq!(f.name, "sched_switch");
    assert!(f.id.is_some());
    assert!(f.common_fields.iter().any(|c| c.name == "common_pid"));
    let names: Vec<&str> = f.fields.iter().map(|f| f.name.as_str()).collect();
    for want in [
        "prev_comm",
        "prev_pid",
        "prev_prio",
        "prev_state",
        "next_comm",
        "next_pid",
        "next_prio",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let comm = f.fields.iter().find(|f| f.name == "prev_comm").unwrap();
    assert_eq!(comm.array, Some(16));
    assert_eq!(comm.d_type(), Type::String);
    let pid = f.fields.iter().find(|f| f.name == "next_pid").unwrap();
    assert_eq!((pid.size, pid.signed), (4, true));
    assert_eq!(pid.d_type(), Type::INT);
}

#[test]
fn every_sched_and_syscalls_format_parses() {
    if !test_support::privileged("reads tracefs event formats") {
        return;
    }
    let root = tracefs().expect("tracefs mountable as root");
    let mut parsed = 0;
    for cat in ["sched", "syscalls", "signal", "block"] {
        let Ok(dir) = std::fs::read_dir(root.join("events").join(cat)) else {
            continue;
        };
        for ev in dir.flatten() {
            let p = ev.path().join("format");
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            let f = parse_tracepoint_format_full(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert_eq!(f.common_fields.len(), 4, "{}", p.display());
            parsed += 1;
        }
    }
    assert!(parsed > 100, "only {parsed} format files parsed");
}
