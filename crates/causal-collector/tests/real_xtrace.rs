//! The real X-Trace traces of `shared/data/xtrace` (Hadoop HDFS and MapReduce, recorded by the
//! X-Trace authors): imported, rebuilt exactly, critical path computed and checked.
//!
//! Expected counts are computed here from the JSON itself with serde_json, independently of the
//! collector's reading of it: one event per report, one edge per `Edge` entry that is not the
//! zero OpId (X-Trace's "no parent").

use std::collections::{BTreeMap, HashMap, HashSet};

use causal_analysis::{CriticalPath, Problem, TaskGraph};
use causal_collector::import::{FileFormat, import_file};
use causal_collector::{Store, TaskFilter};
use serde_json::Value;

struct Expected {
    events: usize,
    edges: usize,
    unknown_parents: usize,
    max_ts_ms: f64,
}

/// Per TaskId: what the file holds. The TaskId is read from the `X-Trace` hex as its layout says:
/// flags byte 0x19 = version 1, 8-byte TaskId, 8-byte OpId (checked).
fn expected(v: &Value) -> BTreeMap<String, Expected> {
    let mut reports: Vec<&Value> = Vec::new();
    for t in v.as_array().unwrap() {
        reports.extend(t["reports"].as_array().unwrap());
    }
    let md = |r: &Value| r["X-Trace"][0].as_str().unwrap().to_ascii_uppercase();
    let ops: HashSet<(String, String)> = reports
        .iter()
        .map(|r| {
            let m = md(r);
            assert_eq!(&m[..2], "19", "flags byte of {m}");
            assert_eq!(m.len(), 34);
            (m[2..18].to_string(), m[18..].to_string())
        })
        .collect();
    let mut out: BTreeMap<String, Expected> = BTreeMap::new();
    for r in reports {
        let m = md(r);
        let task = m[2..18].to_string();
        let e = out.entry(task.clone()).or_insert(Expected {
            events: 0,
            edges: 0,
            unknown_parents: 0,
            max_ts_ms: 0.0,
        });
        e.events += 1;
        for edge in r["Edge"].as_array().unwrap() {
            let edge = edge.as_str().unwrap().to_ascii_uppercase();
            if edge.chars().all(|c| c == '0') {
                continue;
            }
            e.edges += 1;
            if !ops.contains(&(task.clone(), edge)) {
                e.unknown_parents += 1;
            }
        }
        // Timestamps are ms (integers) or s with a fraction; compare in ms.
        let ts = r["Timestamp"][0].as_str().unwrap();
        let ms = if ts.contains('.') {
            ts.parse::<f64>().unwrap() * 1000.0
        } else {
            ts.parse::<f64>().unwrap()
        };
        e.max_ts_ms = e.max_ts_ms.max(ms);
    }
    out
}

/// The properties a critical path must have (X-Trace's rule).
fn check_critical_path(g: &TaskGraph, cp: &CriticalPath, max_ts_ms: f64) {
    let first = cp.steps.first().unwrap().index;
    let last = cp.steps.last().unwrap().index;
    assert!(cp.reached_root, "task {}", g.task);
    assert!(
        g.parents_of(first).is_empty(),
        "the path must start at a root"
    );
    let last_ms = g.events[last].timestamp_ns.unwrap() as f64 / 1e6;
    assert!(
        (last_ms - max_ts_ms).abs() < 0.5,
        "ends at the last event: {last_ms} vs {max_ts_ms}"
    );
    for w in cp.steps.windows(2) {
        let (p, c) = (w[0].index, w[1].index);
        assert!(
            g.parents_of(c).contains(&p),
            "step {} -> {} is not an edge",
            w[0].id,
            w[1].id
        );
        let pt = g.events[p].timestamp_ns.unwrap();
        for &other in g.parents_of(c) {
            assert!(
                g.events[other].timestamp_ns.unwrap() <= pt,
                "at join {} the path took {} but {} finished later",
                w[1].id,
                w[0].id,
                g.events[other].id
            );
        }
    }
    // Time charged adds up to the path's duration (no step goes back in time in these traces).
    let sum: i64 = cp.by_agent.iter().map(|s| s.ns).sum();
    assert_eq!(sum, cp.total_ns);
    let sum: i64 = cp.by_process.iter().map(|s| s.ns).sum();
    assert_eq!(sum, cp.total_ns);
}

#[test]
fn every_real_xtrace_file_is_rebuilt_exactly() {
    let Some(dir) = test_support::shared_data("xtrace") else {
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(&tmp.path().join("x.db")).unwrap();
    let mut all_tasks = 0;
    let mut joins_seen = 0;
    for f in &files {
        let v: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        let want = expected(&v);
        let sum = import_file(&mut store, f, 1).unwrap();
        assert_eq!(sum.format, FileFormat::XTraceJson);
        assert_eq!(sum.skipped, 0, "{f:?}: {:?}", sum.first_problem);
        assert_eq!(
            sum.events,
            want.values().map(|e| e.events).sum::<usize>(),
            "{f:?}"
        );
        assert_eq!(sum.tasks, want.len());
        all_tasks += want.len();
        for (task, exp) in &want {
            let events = store.load_task(task).unwrap();
            let g = TaskGraph::build(task.clone(), events);
            assert_eq!(g.len(), exp.events, "{f:?} task {task}: events");
            assert_eq!(g.edges.len(), exp.edges, "{f:?} task {task}: edges");
            let unknown = g
                .problems
                .iter()
                .filter(|p| matches!(p, Problem::UnknownParent { .. }))
                .count();
            assert_eq!(
                unknown, exp.unknown_parents,
                "{f:?} task {task}: {:?}",
                g.problems
            );
            assert!(
                !g.problems
                    .iter()
                    .any(|p| matches!(p, Problem::DuplicateEvents { .. } | Problem::Cycle { .. }))
            );
            joins_seen += g.joins().len();
            let cp = CriticalPath::compute(&g).unwrap();
            check_critical_path(&g, &cp, exp.max_ts_ms);
        }
    }
    let listed = store.tasks(&TaskFilter::default()).unwrap();
    assert_eq!(listed.len(), all_tasks);
    assert!(
        joins_seen > 100,
        "the Hadoop traces have many joins, saw {joins_seen}"
    );
}

#[test]
fn hdfs_download_details() {
    let Some(f) = test_support::shared_data("xtrace/hdfs_download.json") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(&tmp.path().join("x.db")).unwrap();
    import_file(&mut store, &f, 1).unwrap();
    let task = store.resolve_task("57c1").unwrap();
    assert_eq!(task, "57C1C4A67A6A88FD");
    let t = &store.tasks(&TaskFilter::default()).unwrap()[0];
    // The only task; three processes on one host; titled by its first label.
    assert_eq!(t.hosts, ["manny"]);
    assert_eq!(t.title.as_deref(), Some("Start Trace: Executing Command"));
    let g = TaskGraph::build(task, store.load_task(&t.task_id).unwrap());
    // Joins: reports with two distinct parents that both exist.
    let v: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    let reports = v[0]["reports"].as_array().unwrap();
    let ops: HashSet<String> = reports
        .iter()
        .map(|r| r["X-Trace"][0].as_str().unwrap()[18..].to_string())
        .collect();
    let joins = reports
        .iter()
        .filter(|r| {
            let ps: HashSet<&str> = r["Edge"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().unwrap())
                .filter(|e| ops.contains(*e))
                .collect();
            ps.len() >= 2
        })
        .count();
    assert_eq!(g.joins().len(), joins);
    let cp = CriticalPath::compute(&g).unwrap();
    let procs: HashMap<&str, i64> = cp
        .by_process
        .iter()
        .map(|s| (s.name.as_str(), s.ns))
        .collect();
    assert!(
        procs
            .keys()
            .all(|p| ["8201@manny", "7780@manny", "7646@manny"].contains(p)),
        "{procs:?}"
    );
    let text = causal_analysis::render::text(&g, Some(&cp));
    assert!(text.contains("join of 2 parents"));
    assert!(text.contains("time by process:"));
}
