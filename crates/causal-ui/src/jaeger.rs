//! Jaeger's query API in Jaeger's JSON shape (`docs/ui-api.md`, "Jaeger's query API"), so that
//! Grafana's Jaeger data source and Jaeger's own tools can read Sightline.
//!
//! The shape follows Jaeger's `model/json` (`Trace`, `Span`, `Reference`, `KeyValue`, `Log`,
//! `Process`) and the query service's `structuredResponse` (`data`, `total`, `limit`, `offset`,
//! `errors`); the parameters follow its HTTP query parser (`service`, `operation`, `tags` as a
//! JSON object or repeated `tag=key:value`, `minDuration`/`maxDuration` as Go durations,
//! `start`/`end` in µs since the epoch, `limit`).

use std::collections::HashMap;

use causal_analysis::{AttrValue, EdgeKind, TaskGraph};
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

/// A Jaeger `KeyValue` of field `key` with text `text`, typed by its stored OTLP type `typed`
/// as Jaeger's JSON model types them: `int64` (a JSON number), `float64` (a number; a NaN or
/// infinity, which JSON cannot carry, stays `string`), `bool`, `binary` (base64, as Go encodes
/// bytes); strings, arrays and key/value lists (Jaeger has no such types) are `string`, arrays
/// and lists as their JSON text.
fn typed_tag(key: &str, text: &str, typed: Option<&AttrValue>) -> Value {
    match typed {
        Some(AttrValue::Int(i)) => json!({"key": key, "type": "int64", "value": i}),
        Some(AttrValue::Double(d)) if d.is_finite() => {
            json!({"key": key, "type": "float64", "value": d})
        }
        Some(AttrValue::Bool(b)) => json!({"key": key, "type": "bool", "value": b}),
        Some(AttrValue::Bytes(b)) => {
            json!({"key": key, "type": "binary", "value": base64(b)})
        }
        _ => tag(key, text),
    }
}

/// `bytes` in standard base64 with padding (RFC 4648, section 4).
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                out.push(char::from(ABC[(n >> shift) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
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
            .flat_map(|&i| {
                let e = &g.events[i];
                e.fields.iter().map(move |(k, v)| {
                    let typed = e.typed.iter().find(|(t, _)| t == k).map(|(_, t)| t);
                    (k, v, typed)
                })
            })
            .filter(|(k, _, _)| *k != "span.name")
            .map(|(k, v, t)| typed_tag(k, v, t))
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
    use super::*;

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

    #[test]
    fn tags_keep_their_otlp_types_in_jaegers_shape() {
        assert_eq!(
            typed_tag("n", "42", Some(&AttrValue::Int(42))),
            json!({"key": "n", "type": "int64", "value": 42})
        );
        assert_eq!(
            typed_tag("r", "0.5", Some(&AttrValue::Double(0.5))),
            json!({"key": "r", "type": "float64", "value": 0.5})
        );
        assert_eq!(
            typed_tag("x", "NaN", Some(&AttrValue::Double(f64::NAN))),
            json!({"key": "x", "type": "string", "value": "NaN"})
        );
        assert_eq!(
            typed_tag("b", "true", Some(&AttrValue::Bool(true))),
            json!({"key": "b", "type": "bool", "value": true})
        );
        assert_eq!(
            typed_tag("id", "666f6f21", Some(&AttrValue::Bytes(b"foo!".to_vec()))),
            json!({"key": "id", "type": "binary", "value": "Zm9vIQ=="})
        );
        let arr = AttrValue::Array(vec![AttrValue::Int(1), AttrValue::Int(2)]);
        assert_eq!(
            typed_tag("a", "[1,2]", Some(&arr)),
            json!({"key": "a", "type": "string", "value": "[1,2]"})
        );
        assert_eq!(
            typed_tag("s", "GET", None),
            json!({"key": "s", "type": "string", "value": "GET"})
        );
        // RFC 4648's test vectors.
        let enc: Vec<String> = ["", "f", "fo", "foo", "foob", "fooba", "foobar"]
            .iter()
            .map(|s| base64(s.as_bytes()))
            .collect();
        assert_eq!(
            enc,
            [
                "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"
            ]
        );
    }
}
