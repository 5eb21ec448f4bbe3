//! `sightline show --recording DIR` (issue #13): a recording drawn as a causal task.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::sightline;

/// Records `sh -c CMD` into a temporary directory and returns `show --recording --format json`.
fn show_recording(cmd: &str, tmp: &std::path::Path) -> Value {
    let dir = tmp.join("rec");
    let out = sightline()
        .args(["record", "-o"])
        .arg(&dir)
        .args(["sh", "-c", cmd])
        .output()
        .expect("run sightline record");
    assert!(
        out.status.success(),
        "record: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "5\n4\n");
    let shown = sightline()
        .args(["show", "--format", "json", "--recording"])
        .arg(&dir)
        .output()
        .expect("run sightline show");
    assert!(
        shown.status.success(),
        "show: {}",
        String::from_utf8_lossy(&shown.stderr)
    );
    serde_json::from_slice(&shown.stdout).expect("show prints JSON")
}

/// `seq 5 | sort -r | head -2` under `sh`: four processes (sh and one lane per command), each
/// command forked by sh, seq's write feeding sort's read and sort's write feeding head's read
/// (the pipes' rendezvous), and sh's waits joined by each child's exit.
#[test]
fn a_recorded_pipeline_shows_its_processes_as_lanes_and_its_pipes_as_edges() {
    if !test_support::privileged("records with ptrace") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let doc = show_recording("seq 5 | sort -r | head -2", tmp.path());
    let events: HashMap<&str, &Value> = doc["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["id"].as_str().unwrap(), e))
        .collect();
    let pids: BTreeSet<u64> = events
        .values()
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids.len(), 4, "sh, seq, sort, head: {pids:?}");
    let label = |e: &Value| e["labels"][0].as_str().unwrap().to_string();
    let mut forks = 0;
    let mut pipes = Vec::new();
    let mut waits = 0;
    for edge in doc["edges"].as_array().unwrap() {
        let a = events[edge["from"].as_str().unwrap()];
        let b = events[edge["to"].as_str().unwrap()];
        if a["pid"] == b["pid"] {
            continue;
        }
        let (la, lb) = (label(a), label(b));
        if la.starts_with("clone(") {
            forks += 1;
        } else if la.starts_with("write(1,") && lb.starts_with("read(0,") {
            pipes.push((a["pid"].as_u64().unwrap(), b["pid"].as_u64().unwrap()));
        } else if la.starts_with("exit") && lb.starts_with("wait4(") {
            waits += 1;
        } else {
            panic!("unexpected edge between processes: {la} -> {lb}");
        }
    }
    assert_eq!(forks, 3, "sh forks each command");
    assert_eq!(waits, 3, "sh waits for each command");
    // seq -> sort -> head: two pipes, the second from the first's reader (a pipe may have more
    // than one edge: the write that fed a read, then the end-of-file read after it).
    pipes.sort_unstable();
    pipes.dedup();
    assert_eq!(pipes.len(), 2, "{pipes:?}");
    let (first, second) = if pipes[0].1 == pipes[1].0 {
        (pipes[0], pipes[1])
    } else {
        (pipes[1], pipes[0])
    };
    assert_eq!(
        first.1, second.0,
        "sort reads seq and feeds head: {pipes:?}"
    );
    assert_ne!(first.0, second.1);
    // The stream order is the time axis: each edge goes forward in time.
    for edge in doc["edges"].as_array().unwrap() {
        let t = |id: &str| events[id]["timestamp_ns"].as_i64().unwrap();
        assert!(t(edge["from"].as_str().unwrap()) < t(edge["to"].as_str().unwrap()));
    }
}

/// A directory that is not a recording is an error naming it, with exit status 2.
#[test]
fn show_recording_of_a_missing_directory_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nothing-here");
    let out = sightline()
        .args(["show", "--recording"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot open the recording") && err.contains("nothing-here"),
        "{err}"
    );
}

/// `sightline ui --recording DIR`: the recording's graph served as a task of the web UI, its
/// URL printed; the task payload has the graph's events and one lane per process of the
/// pipeline, as `show --recording` draws it.
#[test]
fn ui_serves_a_recording_as_a_task() {
    use std::io::{BufRead, BufReader, Read, Write};
    if !test_support::privileged("records with ptrace") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let doc = show_recording("seq 5 | sort -r | head -2", tmp.path());
    let dir = tmp.path().join("rec");
    let mut ui = crate::Collecting::start(
        sightline()
            .args(["ui", "--listen", "127.0.0.1:0", "--recording"])
            .arg(&dir),
    );
    let mut second = String::new();
    ui.stdout.read_line(&mut second).unwrap();
    let url = second
        .trim()
        .strip_prefix(&format!("recording {}: ", dir.display()))
        .unwrap_or_else(|| panic!("second line: {second:?} (first {:?})", ui.first))
        .to_string();
    let rest = url.strip_prefix("http://").unwrap();
    let (addr, path) = rest.split_once('/').unwrap();
    let task = path.strip_prefix("trace/").unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET /api/ui/task/{task} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut resp = Vec::new();
    BufReader::new(&mut s).read_to_end(&mut resp).unwrap();
    let resp = String::from_utf8(resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.0 200"), "{head}");
    let p: Value = serde_json::from_str(body).unwrap();
    assert_eq!(p["task"], task);
    assert_eq!(
        p["events"].as_u64().unwrap() as usize,
        doc["events"].as_array().unwrap().len()
    );
    let strings = p["strings"].as_array().unwrap();
    let processes: BTreeSet<&str> = p["lanes"]["process"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| strings[i.as_u64().unwrap() as usize].as_str().unwrap())
        .collect();
    assert_eq!(processes.len(), 4, "sh, seq, sort, head: {processes:?}");
    let store_dir = ui
        .first
        .split("(store ")
        .nth(1)
        .and_then(|s| s.strip_suffix(")\n"))
        .map(|db| std::path::PathBuf::from(db).parent().unwrap().to_path_buf())
        .unwrap_or_else(|| panic!("first line: {:?}", ui.first));
    assert!(store_dir.exists());
    assert!(ui.sigterm().success());
    assert!(
        !store_dir.exists(),
        "the temporary store is removed at exit"
    );
}
