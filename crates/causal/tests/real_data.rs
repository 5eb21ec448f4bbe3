//! Metadata and report round trips on the real X-Trace reports in `shared/data/xtrace`.

use causal::{Metadata, Report};
use serde_json::Value;

/// Every report of every file, as (key, value) pairs in file order, one pair per value.
type Pairs = Vec<(String, String)>;

fn all_reports() -> Option<Vec<(String, Pairs)>> {
    let dir = test_support::shared_data("xtrace")?;
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for path in names
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let tasks: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for task in tasks.as_array().unwrap() {
            for rep in task["reports"].as_array().unwrap() {
                let mut pairs = Vec::new();
                for (k, v) in rep.as_object().unwrap() {
                    if k == "version" {
                        continue;
                    }
                    for item in v.as_array().unwrap() {
                        pairs.push((k.clone(), item.as_str().unwrap().to_string()));
                    }
                }
                out.push((task["id"].as_str().unwrap().to_string(), pairs));
            }
        }
    }
    Some(out)
}

#[test]
fn every_xtrace_value_round_trips() {
    let Some(reports) = all_reports() else { return };
    let mut n = 0;
    let mut task_of_export: std::collections::HashMap<&str, causal::TaskId> = Default::default();
    for (task, pairs) in &reports {
        for (k, v) in pairs.iter().filter(|(k, _)| k == "X-Trace") {
            let md = Metadata::parse_text(v).unwrap_or_else(|e| panic!("{k}: {v}: {e}"));
            assert_eq!(md.to_text(), v.to_uppercase());
            assert_eq!(Metadata::parse_text(&v.to_lowercase()).unwrap(), md);
            assert_eq!(Metadata::parse_binary(&md.to_binary()).unwrap(), md);
            // Each export entry is one task; its `id` is the TaskId where it is hex (HDFS, GC) and
            // a file name otherwise (the MapReduce exports).
            let first = *task_of_export.entry(task.as_str()).or_insert(md.task_id());
            assert_eq!(md.task_id(), first, "one TaskId per exported task {task}");
            if causal::TaskId::parse_hex(task).is_ok() {
                assert_eq!(&md.task_id().to_hex(), task);
            }
            n += 1;
        }
    }
    assert_eq!(n, 1885, "all X-Trace values in the four files");
}

#[test]
fn every_report_round_trips_through_both_codecs() {
    let Some(reports) = all_reports() else { return };
    let mut edges = 0;
    for (_, pairs) in &reports {
        let r = Report::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
        edges += r.edges.len();
        assert_eq!(Report::decode_binary(&r.to_binary()).unwrap(), r);
        let text = r.to_xtrace_text();
        assert!(text.starts_with("X-Trace Report ver 1.0\nX-Trace: 19"));
        assert_eq!(Report::parse_xtrace_text(&text).unwrap(), r);
        // Nothing dropped: every input value is in the text.
        for (k, v) in pairs {
            if k != "Timestamp" {
                assert!(
                    text.contains(&format!("{k}: {v}\n")),
                    "{k}: {v} missing from\n{text}"
                );
            }
        }
    }
    assert_eq!(reports.len(), 1885);
    assert_eq!(edges, 2146, "Edge values in the four files");
}
