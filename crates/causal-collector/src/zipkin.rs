//! Zipkin v2 JSON spans (`POST /api/v2/spans`, the `ListOfSpans` of Zipkin's
//! `zipkin2-api.yaml`), turned into an OTLP request so that they follow the one span → event
//! mapping of [`crate::otlp::to_events`] (`docs/otlp-mapping.md`, "Zipkin v2").
//!
//! Per span: `traceId` (16 or 32 hex digits; 16 are the low half of a 128-bit id), `id`,
//! `parentId`, `name`, `kind` (`CLIENT`, `SERVER`, `PRODUCER`, `CONSUMER`), `timestamp` and
//! `duration` (µs), `localEndpoint.serviceName` (the resource's `service.name`),
//! `remoteEndpoint.serviceName` (`peer.service`), `annotations` (span events), `tags` (string
//! attributes; an `error` tag makes the status an error with the tag as its message) and `shared`.
//! As Jaeger does for Zipkin's shared RPC spans, the server half of a span id that its client
//! also reported (`shared: true`) gets a new span id whose parent is the client half, so the two
//! halves are two spans, not a conflict.

use std::collections::HashSet;

use serde::Deserialize;

use crate::otlp::{
    AnyValue, ExportTraceServiceRequest, KeyValue, Resource, ResourceSpans, ScopeSpans, Span,
    SpanEvent, Status, any_value,
};

/// Errors decoding a Zipkin v2 JSON body.
#[derive(Debug, thiserror::Error)]
pub enum ZipkinError {
    /// The body is not a JSON list of Zipkin v2 spans.
    #[error("decoding the Zipkin v2 JSON body")]
    Json(#[source] serde_json::Error),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ZSpan {
    #[serde(default)]
    trace_id: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    parent_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    timestamp: Option<u64>,
    #[serde(default)]
    duration: Option<u64>,
    #[serde(default)]
    local_endpoint: Option<Endpoint>,
    #[serde(default)]
    remote_endpoint: Option<Endpoint>,
    #[serde(default)]
    annotations: Vec<Annotation>,
    #[serde(default)]
    tags: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    shared: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Endpoint {
    #[serde(default)]
    service_name: Option<String>,
}

#[derive(Deserialize)]
struct Annotation {
    timestamp: u64,
    value: String,
}

/// A hex id as bytes, left-padded with zeros to `len` bytes; `None` when not hex or too long.
fn id_bytes(hex: &str, len: usize) -> Option<Vec<u8>> {
    let h = hex.trim();
    if h.is_empty() || h.len() > 2 * len || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let padded = format!("{h:0>width$}", width = 2 * len);
    Some(
        (0..padded.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&padded[i..i + 2], 16).expect("checked hex"))
            .collect(),
    )
}

fn string_kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
    }
}

/// Decodes a Zipkin v2 JSON `ListOfSpans` into the OTLP request it means: one `ResourceSpans`
/// per local service name (in order of first appearance). Ids that are not hex (or too long)
/// become empty, so [`crate::otlp::to_events`] rejects those spans and keeps the others.
///
/// # Errors
/// [`ZipkinError::Json`] when the body is not a JSON list of span objects.
pub fn decode_json(body: &[u8]) -> Result<ExportTraceServiceRequest, ZipkinError> {
    let spans: Vec<ZSpan> = serde_json::from_slice(body).map_err(ZipkinError::Json)?;
    // Span ids taken, so a shared server half gets a fresh one (Jaeger's span-id deduper).
    let mut taken: HashSet<(Vec<u8>, Vec<u8>)> = HashSet::new();
    for s in &spans {
        if !s.shared
            && let (Some(t), Some(i)) = (id_bytes(&s.trace_id, 16), id_bytes(&s.id, 8))
        {
            taken.insert((t, i));
        }
    }
    let mut req = ExportTraceServiceRequest::default();
    let mut services: Vec<Option<String>> = Vec::new();
    for s in spans {
        let service = s
            .local_endpoint
            .as_ref()
            .and_then(|e| e.service_name.clone());
        let slot = match services.iter().position(|x| *x == service) {
            Some(p) => p,
            None => {
                services.push(service.clone());
                req.resource_spans.push(ResourceSpans {
                    resource: Some(Resource {
                        attributes: service
                            .iter()
                            .map(|n| string_kv("service.name", n))
                            .collect(),
                    }),
                    scope_spans: vec![ScopeSpans::default()],
                });
                services.len() - 1
            }
        };
        let trace_id = id_bytes(&s.trace_id, 16).unwrap_or_default();
        let mut span_id = id_bytes(&s.id, 8).unwrap_or_default();
        let mut parent = s
            .parent_id
            .as_deref()
            .map(|p| id_bytes(p, 8).unwrap_or_else(|| vec![0xFF]))
            .unwrap_or_default();
        if s.shared && span_id.len() == 8 {
            // The server half of a shared span: a new id, child of the client half.
            parent = span_id.clone();
            let mut n = u64::from_be_bytes(span_id.as_slice().try_into().expect("8 bytes"));
            loop {
                n = n.wrapping_add(1);
                let candidate = n.to_be_bytes().to_vec();
                if n != 0 && taken.insert((trace_id.clone(), candidate.clone())) {
                    span_id = candidate;
                    break;
                }
            }
        }
        let start = s.timestamp.unwrap_or(0).saturating_mul(1000);
        let end = s
            .timestamp
            .map(|t| {
                t.saturating_add(s.duration.unwrap_or(0))
                    .saturating_mul(1000)
            })
            .unwrap_or(0);
        let mut attributes: Vec<KeyValue> = s
            .tags
            .iter()
            .filter(|(k, _)| k.as_str() != "error")
            .map(|(k, v)| string_kv(k, v))
            .collect();
        if let Some(peer) = s.remote_endpoint.and_then(|e| e.service_name) {
            attributes.push(string_kv("peer.service", &peer));
        }
        let status = s.tags.get("error").map(|m| Status {
            message: m.clone(),
            code: 2,
        });
        let kind = match s.kind.as_deref() {
            Some("SERVER") => 2,
            Some("CLIENT") => 3,
            Some("PRODUCER") => 4,
            Some("CONSUMER") => 5,
            _ => 0,
        };
        req.resource_spans[slot].scope_spans[0].spans.push(Span {
            trace_id,
            span_id,
            parent_span_id: parent,
            name: s.name.unwrap_or_default(),
            kind,
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            attributes,
            events: s
                .annotations
                .into_iter()
                .map(|a| SpanEvent {
                    time_unix_nano: a.timestamp.saturating_mul(1000),
                    name: a.value,
                    attributes: Vec::new(),
                })
                .collect(),
            links: Vec::new(),
            status,
        });
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::to_events;
    use causal_analysis::Parent;

    #[test]
    fn zipkin_spans_become_the_events_of_their_otlp_meaning() {
        // The example of zipkin2-api.yaml's span, a child, a shared server half and a bad id.
        let body = br#"[
          {"traceId":"5af7183fb1d4cf5f","id":"352bff9a74ca9ad2","name":"get /api","kind":"CLIENT",
           "timestamp":1556604172355737,"duration":1431,
           "localEndpoint":{"serviceName":"frontend","ipv4":"192.168.99.1"},
           "remoteEndpoint":{"serviceName":"backend","ipv4":"172.19.0.2","port":9000},
           "annotations":[{"timestamp":1556604172355800,"value":"ws"}],
           "tags":{"http.method":"GET","error":"500 Internal"}},
          {"traceId":"5af7183fb1d4cf5f","id":"352bff9a74ca9ad2","name":"get /api","kind":"SERVER","shared":true,
           "timestamp":1556604172355900,"duration":1000,"localEndpoint":{"serviceName":"backend"}},
          {"traceId":"5af7183fb1d4cf5f","parentId":"352bff9a74ca9ad2","id":"6b221d5bc9e6496c","name":"db",
           "timestamp":1556604172356000,"duration":500,"localEndpoint":{"serviceName":"backend"}},
          {"traceId":"zz","id":"01","name":"bad"}
        ]"#;
        let req = decode_json(body).unwrap();
        // frontend, backend, and the bad span's endpoint-less resource.
        assert_eq!(req.resource_spans.len(), 3);
        let c = to_events(&req);
        assert_eq!((c.spans, c.rejected), (3, 1));
        let ids: Vec<&str> = c.events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "352BFF9A74CA9AD2:start",
                "352BFF9A74CA9AD2:event1",
                "352BFF9A74CA9AD2:end",
                "352BFF9A74CA9AD3:start",
                "352BFF9A74CA9AD3:end",
                "6B221D5BC9E6496C:start",
                "6B221D5BC9E6496C:end",
            ]
        );
        // A 64-bit trace id is the low half of a 128-bit one: the 8-byte TaskId.
        assert!(c.events.iter().all(|e| e.task == "5AF7183FB1D4CF5F"));
        let client = &c.events[0];
        assert_eq!(client.timestamp_ns, Some(1_556_604_172_355_737_000));
        assert_eq!(c.events[2].timestamp_ns, Some(1_556_604_172_357_168_000));
        assert_eq!(client.agent.as_deref(), Some("frontend"));
        assert_eq!(client.field("span.kind"), Some("client"));
        assert_eq!(client.field("http.method"), Some("GET"));
        assert_eq!(client.field("peer.service"), Some("backend"));
        assert_eq!(c.events[1].label(), Some("ws"));
        assert_eq!(c.events[2].field("status.code"), Some("error"));
        assert_eq!(c.events[2].field("status.message"), Some("500 Internal"));
        // The shared server half: a new id, a child of the client half.
        assert_eq!(c.events[3].agent.as_deref(), Some("backend"));
        assert_eq!(
            c.events[3].parents,
            [Parent::causal("352BFF9A74CA9AD2:start")]
        );
        assert_eq!(
            c.events[5].parents,
            [Parent::causal("352BFF9A74CA9AD2:start")]
        );
        assert!(matches!(decode_json(b"{}"), Err(ZipkinError::Json(_))));
    }
}
