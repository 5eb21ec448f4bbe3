//! End to end: the causal library's example system (a client, a front end and two back ends as
//! four processes, fan-out and fan-in over HTTP) reports to a running `sightline collect`, which
//! is stopped with SIGTERM; then `sightline show` rebuilds its task and its critical path.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// Builds `crates/causal-example` (same profile and target directory as this test) and returns
/// its binary, as `test_support::sightline_bin` does for `sightline`.
fn example_bin() -> PathBuf {
    test_support::cargo_build(&["-p", "causal-example"]).join("causal-example")
}

fn sightline(args: &[&str], db: &Path) -> String {
    let out = Command::new(test_support::sightline_bin())
        .args(args)
        .arg("--db")
        .arg(db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sightline {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn run_demo_into_collector(format: &str, db: &Path) -> String {
    let mut collector = Command::new(test_support::sightline_bin())
        .args(["collect", "--xtrace-port", "0", "--otlp-port", "0", "--db"])
        .arg(db)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(collector.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let words: Vec<&str> = first.split_whitespace().collect();
    let tcp = words[words.iter().position(|w| *w == "TCP").unwrap() + 1].to_string();

    let demo = Command::new(example_bin())
        .arg("demo")
        .env("SIGHTLINE_CAUSAL_SINK", format!("tcp://{tcp}"))
        .env("SIGHTLINE_CAUSAL_FORMAT", format)
        .output()
        .unwrap();
    let demo_out = String::from_utf8_lossy(&demo.stdout).to_string();
    assert!(
        demo.status.success(),
        "demo: {demo_out}\n{}",
        String::from_utf8_lossy(&demo.stderr)
    );
    let task = demo_out
        .lines()
        .find_map(|l| l.strip_prefix("task "))
        .expect("the demo prints its task")
        .trim()
        .to_string();

    // Every process of the demo has exited (and flushed its reporter); give the collector's
    // connections a moment to be read, then stop it the way an operator would.
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        Command::new("kill")
            .args(["-TERM", &collector.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(collector.wait().unwrap().success(), "{rest}");
    assert!(rest.contains("stopped; 12 events stored"), "{rest}");
    task
}

#[test]
fn example_system_reports_to_the_collector_and_shows_as_a_dag() {
    for format in ["text", "binary"] {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("e2e.db");
        let task = run_demo_into_collector(format, &db);

        let text = sightline(&["show", &task, "--critical-path"], &db);
        // 12 events; joins: both "backend answered", "join answers", "client done".
        let head = text.lines().next().unwrap();
        assert!(
            head.contains(": 12 events,") && head.contains(" 4 joins, 1 roots"),
            "{head}"
        );
        assert!(!text.contains("problem:"), "{text}");
        assert!(text.contains("join of 3 parents"), "{text}");

        let v: Value = serde_json::from_str(&sightline(
            &["show", &task, "--format", "json", "--critical-path"],
            &db,
        ))
        .unwrap();
        let events = v["events"].as_array().unwrap();
        let label = |id: &str| {
            let e = events.iter().find(|e| e["id"] == id).unwrap();
            format!(
                "{}: {}",
                e["agent"].as_str().unwrap_or("?"),
                e["labels"][0].as_str().unwrap_or("")
            )
        };
        let mut procs: Vec<&str> = events
            .iter()
            .filter_map(|e| e["process"].as_str())
            .collect();
        procs.sort();
        procs.dedup();
        assert_eq!(procs.len(), 4, "client, front end, two back ends");
        // The critical path runs from the client's request, through the slower back end (b
        // answers after 60 ms, a after 30 ms), to the client's answer.
        let steps: Vec<String> = v["critical_path"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| label(s["id"].as_str().unwrap()))
            .collect();
        assert_eq!(
            steps.first().unwrap(),
            "client: client request",
            "{steps:?}"
        );
        assert_eq!(steps.last().unwrap(), "client: client done", "{steps:?}");
        assert!(
            steps.contains(&"backend-b: backend done".to_string()),
            "{steps:?}"
        );
        assert!(
            !steps.iter().any(|s| s.starts_with("backend-a")),
            "{steps:?}"
        );
        let by_agent = v["critical_path"]["by_agent"].as_array().unwrap();
        let b_ns = by_agent.iter().find(|s| s["name"] == "backend-b").unwrap()["ns"]
            .as_i64()
            .unwrap();
        assert!(
            b_ns >= 60_000_000,
            "backend-b's 60 ms delay is on the critical path: {b_ns} ns"
        );

        let tasks = sightline(&["tasks"], &db);
        let row = tasks.lines().find(|l| l.starts_with(&task)).unwrap();
        assert!(row.ends_with("client request"), "{row}");
    }
}
