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
    let mut fields = Vec::with_capacity(r.fields.len());
    for (k, v) in r.fields {
        // A repeated Label is kept as a further label.
        if k == "Label" {
            labels.push(v);
        } else {
            fields.push((k, v));
        }
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
        parents,
    }
}

/// Decodes one wire payload (X-Trace 1.0 text or the native binary format) into an event.
///
/// The result is always that of [`decode_payload_via_report`] (`causal::Report::decode`, then
/// [`report_to_event`]); a text report that begins with the exact header line is read straight
/// into the event by [`decode_text_event`] instead, which skips the intermediate `Report` (its
/// pairs list, key matching against every standard key, re-formatting of each `Edge`), and any
/// report that path cannot take whole goes through `Report::decode`, which gives the error.
///
/// # Errors
/// Those of [`causal::Report::decode`].
pub fn decode_payload(payload: &[u8]) -> Result<Event, causal::ReportError> {
    if let Some(rest) = payload.strip_prefix(TEXT_HEADER_LINE)
        && let Ok(text) = std::str::from_utf8(rest)
        && let Some(e) = decode_text_event(text)
    {
        return Ok(e);
    }
    decode_payload_via_report(payload)
}

/// The reference decoder: `causal::Report::decode`, then [`report_to_event`]. What
/// [`decode_payload`] returns for every payload (tested on the real reports and on edge cases;
/// `bench/collector-bench.sh` times both).
///
/// # Errors
/// Those of [`causal::Report::decode`].
pub fn decode_payload_via_report(payload: &[u8]) -> Result<Event, causal::ReportError> {
    Report::decode(payload).map(report_to_event)
}

/// The header line of an X-Trace 1.0 text report as writers send it.
const TEXT_HEADER_LINE: &[u8] = b"X-Trace Report ver 1.0\n";

/// `char::is_whitespace` for an ASCII byte (includes VT, unlike `u8::is_ascii_whitespace`).
fn is_ascii_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// `str::trim`, without its Unicode tables when the ends are ASCII.
fn trim(s: &str) -> &str {
    trim_end(trim_start(s))
}

/// `str::trim_start`, without its Unicode tables when the start is ASCII.
fn trim_start(s: &str) -> &str {
    let b = s.as_bytes();
    let i = b.iter().position(|&c| !is_ascii_ws(c)).unwrap_or(b.len());
    // Only ASCII was skipped, so i is a character boundary.
    if i < b.len() && b[i] >= 0x80 {
        s[i..].trim_start()
    } else {
        &s[i..]
    }
}

/// `str::trim_end`, without its Unicode tables when the end is ASCII.
fn trim_end(s: &str) -> &str {
    let b = s.as_bytes();
    let j = b
        .iter()
        .rposition(|&c| !is_ascii_ws(c))
        .map_or(0, |j| j + 1);
    if j > 0 && b[j - 1] >= 0x80 {
        s[..j].trim_end()
    } else {
        &s[..j]
    }
}

/// An `Edge` value that `OpId::parse_hex` accepts and `OpId::to_hex` gives back unchanged:
/// 8 or 16 uppercase hex digits.
fn canonical_op_hex(v: &str) -> bool {
    (v.len() == 8 || v.len() == 16)
        && v.bytes()
            .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c))
}

/// `OpId::to_hex` (8 or 16 uppercase digits) without the formatting machinery.
fn op_hex(op: causal::OpId) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let digits = op.len() * 2;
    (0..digits)
        .rev()
        .map(|i| HEX[((op.value() >> (4 * i)) & 15) as usize] as char)
        .collect()
}

/// Reads the lines of an X-Trace 1.0 text report after its header line straight into an event,
/// with exactly the rules of `causal::Report::parse_xtrace_text`, `Report::from_pairs` and
/// [`report_to_event`] (`docs/causal-wire.md`): blank lines skipped, each line split at its first
/// `:` and both sides trimmed; the first `X-Trace` is the metadata; every `Edge` must be an OpId
/// and the non-zero ones are parents; each `Label` is a label; the first `Agent`, `Host`,
/// `ProcessID`, `ThreadName`, and the first `ThreadID`, `Timestamp`, `HRT` that parse fill their
/// fields; everything else is a field, in order. `None` where that reading fails (a line without
/// `:`, bad metadata or edge, no metadata): the caller then decodes through `Report` for the error.
pub fn decode_text_event(text: &str) -> Option<Event> {
    let mut e = Event::default();
    let mut have_md = false;
    for line in text.split('\n') {
        let line = trim(line);
        if line.is_empty() {
            continue;
        }
        let colon = line.as_bytes().iter().position(|&c| c == b':')?;
        // The line is trimmed: the key's start and the value's end already are.
        let (k, v) = (trim_end(&line[..colon]), trim_start(&line[colon + 1..]));
        let taken = match (k.len(), k.as_bytes().first()) {
            (7, Some(b'X')) if k == "X-Trace" && !have_md => {
                let md = causal::Metadata::parse_text(v).ok()?;
                e.task = md.task_id().to_hex();
                e.id = op_hex(md.op_id());
                have_md = true;
                true
            }
            (4, Some(b'E')) if k == "Edge" => {
                if canonical_op_hex(v) {
                    if v.bytes().any(|c| c != b'0') {
                        e.parents.push(Parent::causal(v));
                    }
                } else {
                    let op = causal::OpId::parse_hex(v).ok()?;
                    if !op.is_zero() {
                        e.parents.push(Parent::causal(op_hex(op)));
                    }
                }
                true
            }
            (5, Some(b'L')) if k == "Label" => {
                e.labels.push(v.to_string());
                true
            }
            (5, Some(b'A')) if k == "Agent" => set_str(&mut e.agent, v),
            (4, Some(b'H')) if k == "Host" => set_str(&mut e.host, v),
            (9, Some(b'P')) if k == "ProcessID" => set_str(&mut e.process, v),
            (10, Some(b'T')) if k == "ThreadName" => set_str(&mut e.thread_name, v),
            (8, Some(b'T')) if k == "ThreadID" => set_num(&mut e.tid, v.parse().ok()),
            (9, Some(b'T')) if k == "Timestamp" => {
                let t = causal::report::parse_timestamp_ns(v)
                    .map(|t| i64::try_from(t).unwrap_or(i64::MAX));
                match (e.timestamp_ns, t) {
                    (None, Some(t)) => {
                        e.timestamp_ns = Some(t);
                        true
                    }
                    _ => false,
                }
            }
            (3, Some(b'H')) if k == "HRT" => set_num(&mut e.hrt_ns, v.parse().ok()),
            _ => false,
        };
        if !taken {
            e.fields.push((k.to_string(), v.to_string()));
        }
    }
    if !have_md {
        return None;
    }
    e.pid = e.process.as_deref().and_then(parse_pid);
    Some(e)
}

fn set_str(slot: &mut Option<String>, v: &str) -> bool {
    if slot.is_some() {
        return false;
    }
    *slot = Some(v.to_string());
    true
}

fn set_num(slot: &mut Option<u64>, v: Option<u64>) -> bool {
    match (slot.is_some(), v) {
        (false, Some(v)) => {
            *slot = Some(v);
            true
        }
        _ => false,
    }
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
    Report::from_pairs(pairs).map_err(|e| e.to_string())
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

    /// The two decoders agree: the result of `decode_payload` (Ok event or error text) equals
    /// that of `Report::decode` + `report_to_event`.
    fn same(payload: &[u8]) {
        let fast = decode_payload(payload).map_err(|e| e.to_string());
        let reference = decode_payload_via_report(payload).map_err(|e| e.to_string());
        assert_eq!(fast, reference, "{:?}", String::from_utf8_lossy(payload));
    }

    /// Every report of the real X-Trace exports, as the library writes it and rewritten the ways
    /// other writers do (lowercase hex, CRLF, padding, blank lines, zero edges), decodes the same
    /// by both paths, and the fast path is the one taken.
    #[test]
    fn text_fast_path_equals_the_report_path_on_the_real_reports() {
        let Some(dir) = test_support::shared_data("xtrace") else {
            return;
        };
        let mut n = 0;
        for f in std::fs::read_dir(dir).unwrap() {
            let v: Value =
                serde_json::from_slice(&std::fs::read(f.unwrap().path()).unwrap()).unwrap();
            let tasks = v.as_array().unwrap();
            for r in tasks.iter().flat_map(|t| t["reports"].as_array().unwrap()) {
                let Ok(report) = report_of_json(r) else {
                    continue;
                };
                let text = report.to_xtrace_text();
                assert!(
                    decode_text_event(text.strip_prefix("X-Trace Report ver 1.0\n").unwrap())
                        .is_some()
                );
                same(text.as_bytes());
                let lower: String = text
                    .lines()
                    .map(|l| match l.split_once(": ") {
                        Some((k @ ("X-Trace" | "Edge"), v)) => {
                            format!("{k}: {}\r\n", v.to_ascii_lowercase())
                        }
                        _ => format!("  {l}\t\r\n\n"),
                    })
                    .collect();
                same(lower.as_bytes());
                same(format!("{text}Edge: 0000000000000000\nEdge:00000000\n").as_bytes());
                n += 1;
            }
        }
        assert_eq!(n, 1885, "reports in the four exports");
    }

    #[test]
    fn text_fast_path_equals_the_report_path_on_edge_cases() {
        let h = "X-Trace Report ver 1.0\n";
        let md = "X-Trace: 19438AE15464ED9BC37EF82CE98B84355D\n";
        let cases: Vec<String> = vec![
            format!("{h}{md}"),
            format!("{h}{md}Label: a\nLabel: b\nAgent: x\nAgent: y\nLabel: c\nTag: t\nTag: u\n"),
            format!("{h}{md}X-Trace: 19438AE15464ED9BC37EF82CE98B84355E\n"),
            format!("{h}X-Trace: 19438ae15464ed9bc37ef82ce98b84355d\n"),
            format!(
                "{h}{md}Edge: 7ef82ce9\nEdge: 7EF82CE9\nEdge: 00000000\nEdge:  7EF82CE98B84355D \n"
            ),
            format!("{h}{md}Edge: 7EF82CE98B84355\n"),
            format!("{h}{md}Edge: 7EF82CE98B84355DAA\n"),
            format!("{h}{md}Edge: xyz\n"),
            format!("{h}{md}Edge: \n"),
            format!("{h}{md}ThreadID: 12\nThreadID: 13\nThreadID: x\nHRT: +5\nHRT: -1\n"),
            format!("{h}{md}ThreadID: nope\nThreadID: 7\n"),
            format!("{h}{md}Timestamp: 1384989801450\nTimestamp: 1.5\n"),
            format!("{h}{md}Timestamp: 1.5\n"),
            format!("{h}{md}Timestamp: 99999999999999999999\nTimestamp: 18446744073709551615\n"),
            format!(
                "{h}{md}ProcessID: 8201@manny\nProcessID: 9\nHost: h\nHost: i\nThreadName: m\nThreadName: n\n"
            ),
            format!("{h}{md}Key: a: b: c\n:empty key\nempty value:\n"),
            format!("{h}{md}no colon here\n"),
            format!("{h}Agent: no metadata\n"),
            format!("{h}"),
            format!("{h}X-Trace: zz\n"),
            format!("{h}X-Trace:\n"),
            format!(
                "{h}{md}\u{a0}Label\u{2003}: \u{85}spaced\u{a0}\n\u{3000}\n\x0bAgent\x0b:\x0cv\x0c\n"
            ),
            format!("{h}{md}Label: é\nKey\r: v\r\n\r\n"),
            format!("{h}{md}x-trace: lower key\nedge: 1\nEDGE: 2\n"),
            format!("  \n{h}{md}"),
            format!("X-Trace Report ver 1.0  \n{md}"),
            format!("X-Trace Report ver 1.0\r\n{md}"),
            format!("X-Trace Report ver 1.1\n{md}"),
            "garbage".to_string(),
            String::new(),
        ];
        for c in &cases {
            same(c.as_bytes());
        }
        // Not UTF-8 after the header.
        let mut bad = format!("{h}{md}Label: ").into_bytes();
        bad.extend_from_slice(&[0xff, 0xfe, b'\n']);
        same(&bad);
        // The binary form goes through Report.
        same(&Report::decode(cases[1].as_bytes()).unwrap().to_binary());
        // 4-byte OpIds format as 8 digits.
        let e =
            decode_payload(format!("{h}X-Trace: 10438AE1547EF82CE9\nEdge: 0000abcd\n").as_bytes())
                .unwrap();
        assert_eq!((e.task.as_str(), e.id.as_str()), ("438AE154", "7EF82CE9"));
        assert_eq!(e.parents, vec![Parent::causal("0000ABCD")]);
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
