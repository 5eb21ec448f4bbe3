//! Jaeger's query API in Jaeger's JSON shape (`docs/ui-api.md`, "Jaeger's query API"), so that
//! Grafana's Jaeger data source and Jaeger's own tools can read Sightline.
//!
//! The shape follows Jaeger's `model/json` (`Trace`, `Span`, `Reference`, `KeyValue`, `Log`,
//! `Process`) and the query service's `structuredResponse` (`data`, `total`, `limit`, `offset`,
//! `errors`); the parameters follow its HTTP query parser (`service`, `operation`, `tags` as a
//! JSON object or repeated `tag=key:value`, `minDuration`/`maxDuration` as Go durations,
//! `start`/`end` in µs since the epoch, `limit`).

use std::collections::HashMap;

use causal_analysis::{EdgeKind, TaskGraph};
use serde_json::{Value, json};

use crate::view::TaskView;

/// Jaeger's `structuredResponse` around `data`.
pub fn response(data: Value, total: usize) -> Value {
    json!({"data": data, "total": total, "limit": 0, "offset": 0, "errors": null})
}

/// Jaeger's error response: `data` null and one error with `code` (the HTTP status) and `msg`.
pub fn error(code: u16, msg: &str) -> Value {
    json!({"data": null, "total": 0, "limit": 0, "offset": 0, "errors": [{"code": code, "msg": msg}]})
}

/// A Jaeger `KeyValue` of type `string`.
fn tag(key: &str, value: &str) -> Value {
    json!({"key": key, "type": "string", "value": value})
}

fn micros(ns: i64) -> i64 {
    ns.div_euclid(1000)
}

/// Whether item `k` of `v` is a span event (`S:eventN`), shown as a log of its span.
fn span_event_of<'v>(v: &'v TaskView, g: &'v TaskGraph, k: usize) -> Option<&'v str> {
    let it = &v.items[k];
    if it.span || it.events.len() != 1 {
        return None;
    }
    let (span, n) = g.events[it.events[0]].id.split_once(':')?;
    n.starts_with("event").then_some(span)
}

/// Task `v` (of graph `g`) as one Jaeger `Trace`.
///
/// Every item is a span except span events, which become `logs` of their span (Jaeger's model
/// for OpenTelemetry span events). A span's references: the items with a causal edge into it,
/// the first (earliest) as `CHILD_OF` and the others as `FOLLOWS_FROM` (X-Trace joins: Jaeger
/// has no other way to say "several parents"), and its span links as `FOLLOWS_FROM`. Inferred
/// nesting edges (child end → parent end) are not references. X-Trace point events are spans of
/// duration 0. Tags are every field of the span's events, as strings, and `error` = `true` (a
/// `bool`) on error spans, as Jaeger's UI expects.
pub fn trace(v: &TaskView, g: &TaskGraph) -> Value {
    let trace_id = v.task.to_ascii_lowercase();
    let mut processes: Vec<(String, String, String)> = Vec::new();
    let mut process_ids: HashMap<(String, String, String), usize> = HashMap::new();
    let mut logs: HashMap<&str, Vec<Value>> = HashMap::new();
    for k in 0..v.items.len() {
        if let Some(span) = span_event_of(v, g, k) {
            let it = &v.items[k];
            let e = &g.events[it.events[0]];
            let mut fields = vec![tag("event", &it.label)];
            fields.extend(e.fields.iter().map(|(k, v)| tag(k, v)));
            logs.entry(span).or_default().push(json!({
                "timestamp": micros(it.start_ns.unwrap_or(v.t0_ns)),
                "fields": fields,
            }));
        }
    }
    let mut spans = Vec::new();
    for (k, it) in v.items.iter().enumerate() {
        if span_event_of(v, g, k).is_some() {
            continue;
        }
        let lane = &v.lanes[it.lane];
        let pkey = (it.agent.clone(), lane.host.clone(), lane.process.clone());
        let pid = *process_ids.entry(pkey.clone()).or_insert_with(|| {
            processes.push(pkey);
            processes.len()
        });
        let mut refs = Vec::new();
        for &(from, to, kind) in &v.edges {
            if to != k || kind == EdgeKind::Nested {
                continue;
            }
            let mut from_id = v.items[from].id.to_ascii_lowercase();
            if let Some(span) = span_event_of(v, g, from) {
                from_id = span.to_ascii_lowercase();
            }
            let causal = kind == EdgeKind::Causal;
            refs.push((causal, v.items[from].start_ns, from_id));
        }
        refs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let references: Vec<Value> = refs
            .iter()
            .enumerate()
            .map(|(n, (causal, _, id))| {
                let ty = if n == 0 && *causal {
                    "CHILD_OF"
                } else {
                    "FOLLOWS_FROM"
                };
                json!({"refType": ty, "traceID": trace_id, "spanID": id})
            })
            .collect();
        let mut tags: Vec<Value> = it
            .events
            .iter()
            .flat_map(|&i| g.events[i].fields.iter())
            .filter(|(k, _)| k != "span.name")
            .map(|(k, v)| tag(k, v))
            .collect();
        if it.error {
            tags.push(json!({"key": "error", "type": "bool", "value": true}));
        }
        let start = it.start_ns.unwrap_or(v.t0_ns);
        spans.push(json!({
            "traceID": trace_id,
            "spanID": it.id.to_ascii_lowercase(),
            "flags": 1,
            "operationName": it.label,
            "references": references,
            "startTime": micros(start),
            "duration": micros(it.end_ns.unwrap_or(start)) - micros(start),
            "tags": tags,
            "logs": logs.remove(it.id.as_str()).unwrap_or_default(),
            "processID": format!("p{pid}"),
            "warnings": null,
        }));
    }
    let processes: serde_json::Map<String, Value> = processes
        .into_iter()
        .enumerate()
        .map(|(n, (service, host, process))| {
            (
                format!("p{}", n + 1),
                json!({"serviceName": service, "tags": [tag("hostname", &host), tag("process", &process)]}),
            )
        })
        .collect();
    json!({"traceID": trace_id, "spans": spans, "processes": processes, "warnings": null})
}

/// Parses a Go duration (`time.ParseDuration`: `300ms`, `1.5h`, `2h45m`, `10us`, `10µs`, `7ns`;
/// a bare `0`) into ns. Returns `None` for anything else.
pub fn parse_duration(s: &str) -> Option<i64> {
    let s = s.trim();
    if s == "0" {
        return Some(0);
    }
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += num * mult;
    }
    let ns = total.round();
    (ns <= i64::MAX as f64).then_some(if neg { -(ns as i64) } else { ns as i64 })
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("300ms"), Some(300_000_000));
        assert_eq!(parse_duration("1.5s"), Some(1_500_000_000));
        assert_eq!(parse_duration("2h45m"), Some(9_900_000_000_000));
        assert_eq!(parse_duration("10us"), Some(10_000));
        assert_eq!(parse_duration("10µs"), Some(10_000));
        assert_eq!(parse_duration("0"), Some(0));
        assert_eq!(parse_duration("-7ns"), Some(-7));
        for bad in ["", "5", "ms", "1x", "1..2s"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
