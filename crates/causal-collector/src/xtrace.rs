//! X-Trace reports → events: wire payloads (decoded by `causal::Report`) and JSON exports.
//!
//! A report's `X-Trace` metadata gives the task (TaskId) and the event (OpId); each non-zero
//! `Edge` is a parent (old agents wrote the zero OpId to mean "no parent": it is not an edge).
//!
//! The JSON export (the format of `shared/data/xtrace`, as X-Trace's web front end served it) is
//! a list of tasks, `[{"id": …, "reports": [report…]}…]`, each report an object from key to the
//! list of its values (`{"X-Trace": ["19…"], "Edge": ["…", "…"], "Label": ["…"], …}`) plus a
//! `"version"` string that is not a report key. A bare list of reports, or one
//! `{"reports": […]}` object, is accepted too.

use causal::Report;
use causal_analysis::{Event, Parent, parse_pid};
use serde_json::Value;

/// The event a report describes.
pub fn report_to_event(r: Report) -> Event {
    let mut labels: Vec<String> = r.label.into_iter().collect();
    let mut fields = r.fields;
    // A repeated Label is kept as a further label.
    if fields.iter().any(|(k, _)| k == "Label") {
        let (more, rest): (Vec<_>, Vec<_>) = fields.into_iter().partition(|(k, _)| k == "Label");
        labels.extend(more.into_iter().map(|(_, v)| v));
        fields = rest;
    }
    let parents = r
        .edges
        .iter()
        .filter(|e| !e.is_zero())
        .map(|e| Parent::causal(e.to_hex()))
        .collect();
    Event {
        task: r.metadata.task_id().to_hex(),
        id: r.metadata.op_id().to_hex(),
        pid: r.process_id.as_deref().and_then(parse_pid),
        process: r.process_id,
        agent: r.agent,
        host: r.host,
        tid: r.thread_id,
        thread_name: r.thread_name,
        timestamp_ns: r.timestamp_ns.map(|t| i64::try_from(t).unwrap_or(i64::MAX)),
        hrt_ns: r.hrt_ns,
        labels,
        fields,
        typed: Vec::new(),
        parents,
    }
}

/// Decodes one wire payload (X-Trace 1.0 text or the native binary format) into an event:
/// [`causal::Report::decode`], then [`report_to_event`].
///
/// # Errors
/// Those of [`causal::Report::decode`].
pub fn decode_payload(payload: &[u8]) -> Result<Event, causal::ReportError> {
    Report::decode(payload).map(report_to_event)
}

/// Result of reading an X-Trace JSON export.
#[derive(Debug, Default)]
pub struct JsonExport {
    /// The events, in file order.
    pub events: Vec<Event>,
    /// Reports that could not be read, with why (report index in the file, 0-based).
    pub malformed: Vec<(usize, String)>,
}

/// True when `v` looks like an X-Trace export (a task list, a report list, or one task).
pub fn is_export(v: &Value) -> bool {
    match v {
        Value::Array(a) => a
            .first()
            .is_none_or(|x| x.get("reports").is_some() || x.get("X-Trace").is_some()),
        Value::Object(o) => o.contains_key("reports"),
        _ => false,
    }
}

/// Reads the reports of an X-Trace JSON export (see the module docs). Reports that do not parse
/// are listed in [`JsonExport::malformed`] and skipped.
pub fn read_export(v: &Value) -> JsonExport {
    let mut out = JsonExport::default();
    let mut reports: Vec<&Value> = Vec::new();
    fn task_reports<'v>(t: &'v Value, reports: &mut Vec<&'v Value>) {
        match t.get("reports") {
            Some(Value::Array(rs)) => reports.extend(rs.iter()),
            // Not a list: read as one report, so it is counted (usually as malformed), not lost.
            Some(other) => reports.push(other),
            None => {}
        }
    }
    match v {
        Value::Array(items) => {
            for it in items {
                if it.get("reports").is_some() {
                    task_reports(it, &mut reports);
                } else {
                    reports.push(it);
                }
            }
        }
        Value::Object(_) => task_reports(v, &mut reports),
        _ => {}
    }
    for (i, r) in reports.into_iter().enumerate() {
        match report_from_json(r) {
            Ok(e) => out.events.push(e),
            Err(why) => out.malformed.push((i, why)),
        }
    }
    out
}

/// One report object (`{"Key": ["value", …], …}`) to an event.
fn report_from_json(r: &Value) -> Result<Event, String> {
    report_of_json(r).map(report_to_event)
}

/// One report object (`{"Key": ["value", …], …}`) to a `Report`.
fn report_of_json(r: &Value) -> Result<Report, String> {
    let obj = r
        .as_object()
        .ok_or_else(|| "report is not a JSON object".to_string())?;
    let mut pairs: Vec<(&str, String)> = Vec::with_capacity(obj.len() + 4);
    for (k, v) in obj {
        if k == "version" {
            continue;
        }
        match v {
            Value::Array(vals) => {
                for x in vals {
                    pairs.push((k, scalar(x)));
                }
            }
            other => pairs.push((k, scalar(other))),
        }
    }
    // X-Trace first so that a report's metadata is read before anything that depends on it.
    pairs.sort_by_key(|(k, _)| *k != "X-Trace");
    Report::from_pairs(pairs).map_err(|e| crate::error::error_chain(&e))
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_report_with_two_edges_and_ms_timestamp() {
        let v: Value = serde_json::from_str(
            r#"[{"id":"57C1C4A67A6A88FD","reports":[
              {"HRT":["791539301182319"],"Host":["manny"],"ThreadID":["1"],"Agent":["DFSClient"],
               "Edge":["47B4E72042F9B7FF","368E43613754F869"],"ProcessID":["8201@manny"],"Timestamp":["1384989801450"],
               "ThreadName":["main"],"version":"X-Trace Report ver 1.0","X-Trace":["1957C1C4A67A6A88FD1D95BCD3961B6234"],
               "Tag":["getFileInfo","/user/user/temp.txt"],"Label":["Start Trace: GetFileInfo"]},
              {"X-Trace":["1957C1C4A67A6A88FD47B4E72042F9B7FF"],"Edge":["0000000000000000"]},
              {"Edge":["00"]}
            ]}]"#,
        )
        .unwrap();
        assert!(is_export(&v));
        let x = read_export(&v);
        assert_eq!(x.events.len(), 2);
        assert_eq!(x.malformed.len(), 1);
        assert_eq!(x.malformed[0].0, 2);
        let e = &x.events[0];
        assert_eq!(e.task, "57C1C4A67A6A88FD");
        assert_eq!(e.id, "1D95BCD3961B6234");
        assert_eq!(
            e.parents,
            vec![
                Parent::causal("47B4E72042F9B7FF"),
                Parent::causal("368E43613754F869")
            ]
        );
        assert_eq!(e.timestamp_ns, Some(1_384_989_801_450_000_000));
        assert_eq!(e.hrt_ns, Some(791_539_301_182_319));
        assert_eq!((e.pid, e.tid), (Some(8201), Some(1)));
        assert_eq!(e.process.as_deref(), Some("8201@manny"));
        assert_eq!(e.label(), Some("Start Trace: GetFileInfo"));
        let tags: Vec<&str> = e
            .fields
            .iter()
            .filter(|(k, _)| k == "Tag")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(tags, ["getFileInfo", "/user/user/temp.txt"]);
        // The zero OpId is "no parent", not an edge.
        assert!(x.events[1].parents.is_empty());
    }

    #[test]
    fn wire_payloads_in_both_formats() {
        let text = "X-Trace Report ver 1.0\nX-Trace: 19438AE15464ED9BC37EF82CE98B84355D\nAgent: a\nEdge: 1111111111111111\nLabel: l1\nLabel: l2\n";
        let e = decode_payload(text.as_bytes()).unwrap();
        assert_eq!(
            (e.task.as_str(), e.id.as_str()),
            ("438AE15464ED9BC3", "7EF82CE98B84355D")
        );
        assert_eq!(e.labels, ["l1", "l2"]);
        let r = Report::decode(text.as_bytes()).unwrap();
        let bin = r.to_binary();
        assert_eq!(decode_payload(&bin).unwrap(), e);
        assert!(decode_payload(b"garbage").is_err());
    }

    /// Every report of the real X-Trace exports, sent as the library writes it and rewritten the
    /// ways other writers do (lowercase hex, CRLF, padding, blank lines, zero edges), decodes to
    /// the event the export itself gives.
    #[test]
    fn real_reports_sent_as_text_decode_to_the_exported_events() {
        let Some(dir) = test_support::shared_data("xtrace") else {
            return;
        };
        let (mut n, mut parents) = (0, 0);
        for f in std::fs::read_dir(dir).unwrap() {
            let v: Value =
                serde_json::from_slice(&std::fs::read(f.unwrap().path()).unwrap()).unwrap();
            let tasks = v.as_array().unwrap();
            for r in tasks.iter().flat_map(|t| t["reports"].as_array().unwrap()) {
                let report = report_of_json(r).unwrap();
                let text = report.to_xtrace_text();
                let want = report_to_event(report);
                parents += want.parents.len();
                assert_eq!(decode_payload(text.as_bytes()).unwrap(), want, "{text}");
                let other_writer: String = text
                    .lines()
                    .map(|l| match l.split_once(": ") {
                        Some((k @ ("X-Trace" | "Edge"), v)) => {
                            format!("{k}: {}\r\n", v.to_ascii_lowercase())
                        }
                        _ => format!("  {l}\t\r\n\n"),
                    })
                    .collect();
                assert_eq!(decode_payload(other_writer.as_bytes()).unwrap(), want);
                let zero_edges = format!("{text}Edge: 0000000000000000\nEdge:00000000\n");
                assert_eq!(decode_payload(zero_edges.as_bytes()).unwrap(), want);
                n += 1;
            }
        }
        assert_eq!(n, 1885, "reports in the four exports");
        // 2,146 Edge values, less the 9 zero OpIds the Hadoop agents wrote on first events.
        assert_eq!(parents, 2137, "non-zero edges in the four exports");
    }

    #[test]
    fn four_byte_op_ids_and_repeated_labels() {
        let h = "X-Trace Report ver 1.0\n";
        let e = decode_payload(
            format!("{h}X-Trace: 10438AE1547EF82CE9\nEdge: 0000abcd\nLabel: a\nTag: t\nLabel: b\n")
                .as_bytes(),
        )
        .unwrap();
        // 4-byte OpIds format as 8 digits, uppercase.
        assert_eq!((e.task.as_str(), e.id.as_str()), ("438AE154", "7EF82CE9"));
        assert_eq!(e.parents, vec![Parent::causal("0000ABCD")]);
        assert_eq!(e.labels, ["a", "b"]);
        assert_eq!(e.fields, [("Tag".to_string(), "t".to_string())]);
    }

    /// Regression: a task whose `reports` was not a list (`"reports": "x"`) was skipped silently,
    /// not counted among the malformed reports that `sightline import` prints.
    #[test]
    fn a_task_whose_reports_are_not_a_list_is_counted() {
        let v: Value = serde_json::from_str(r#"[{"id": "A", "reports": "not a list"},
            {"id": "B", "reports": [{"X-Trace": ["19AAAABBBBCCCCDDDD0000000000000001"], "Label": ["ok"]}]}]"#)
        .unwrap();
        let x = read_export(&v);
        assert_eq!(x.events.len(), 1);
        assert_eq!(
            x.malformed,
            vec![(0, "report is not a JSON object".to_string())]
        );
    }
}
