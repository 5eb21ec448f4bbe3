//! OTLP traces: the protobuf messages, the OTLP/JSON decoding, and the span → event mapping.
//!
//! Messages follow `opentelemetry/proto/collector/trace/v1/trace_service.proto`,
//! `opentelemetry/proto/trace/v1/trace.proto` and `opentelemetry/proto/common/v1/common.proto`
//! (opentelemetry-proto 1.x; field numbers as there), written by hand with `prost` derives so no
//! `protoc` runs at build time. Only the fields the collector uses are declared: prost skips the
//! others, as protobuf requires.
//!
//! OTLP/JSON follows the OTLP specification's "JSON Protobuf Encoding": lowerCamelCase field
//! names (snake_case accepted too), trace and span ids as hex strings (either case), 64-bit
//! integers as decimal strings or numbers, enums as integers or their names.
//!
//! The mapping of spans to events (each span a start and an end event, span events in between,
//! the parent span an edge, each link an extra edge) is specified in `docs/otlp-mapping.md`.

use causal_analysis::{AttrValue, Event, Parent};
use serde_json::Value;

use crate::error::OtlpError;

/// `ExportTraceServiceRequest` (trace_service.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportTraceServiceRequest {
    /// `resource_spans = 1`.
    #[prost(message, repeated, tag = "1")]
    pub resource_spans: Vec<ResourceSpans>,
}

/// `ExportTraceServiceResponse` (trace_service.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportTraceServiceResponse {
    /// `partial_success = 1`: set when some spans were rejected.
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportTracePartialSuccess>,
}

/// `ExportTracePartialSuccess` (trace_service.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportTracePartialSuccess {
    /// `rejected_spans = 1`: how many spans were not accepted.
    #[prost(int64, tag = "1")]
    pub rejected_spans: i64,
    /// `error_message = 2`: why.
    #[prost(string, tag = "2")]
    pub error_message: String,
}

/// `google.rpc.Status`, the body of an OTLP/HTTP error response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    /// `code = 1`: a `google.rpc.Code` (3 = INVALID_ARGUMENT, 14 = UNAVAILABLE).
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// `message = 2`.
    #[prost(string, tag = "2")]
    pub message: String,
}

/// `ResourceSpans` (trace.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResourceSpans {
    /// `resource = 1`.
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    /// `scope_spans = 2`.
    #[prost(message, repeated, tag = "2")]
    pub scope_spans: Vec<ScopeSpans>,
}

/// `Resource` (resource.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    /// `attributes = 1`.
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// `ScopeSpans` (trace.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ScopeSpans {
    /// `scope = 1`.
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    /// `spans = 2`.
    #[prost(message, repeated, tag = "2")]
    pub spans: Vec<Span>,
}

/// `InstrumentationScope` (common.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InstrumentationScope {
    /// `name = 1`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `version = 2`.
    #[prost(string, tag = "2")]
    pub version: String,
    /// `attributes = 3`.
    #[prost(message, repeated, tag = "3")]
    pub attributes: Vec<KeyValue>,
}

/// `Span` (trace.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Span {
    /// `trace_id = 1`: 16 bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    /// `span_id = 2`: 8 bytes.
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
    /// `parent_span_id = 4`: 8 bytes, empty for a root span.
    #[prost(bytes = "vec", tag = "4")]
    pub parent_span_id: Vec<u8>,
    /// `name = 5`.
    #[prost(string, tag = "5")]
    pub name: String,
    /// `kind = 6` (`SpanKind`: 1 internal, 2 server, 3 client, 4 producer, 5 consumer).
    #[prost(int32, tag = "6")]
    pub kind: i32,
    /// `start_time_unix_nano = 7`, ns.
    #[prost(fixed64, tag = "7")]
    pub start_time_unix_nano: u64,
    /// `end_time_unix_nano = 8`, ns.
    #[prost(fixed64, tag = "8")]
    pub end_time_unix_nano: u64,
    /// `attributes = 9`.
    #[prost(message, repeated, tag = "9")]
    pub attributes: Vec<KeyValue>,
    /// `events = 11`.
    #[prost(message, repeated, tag = "11")]
    pub events: Vec<SpanEvent>,
    /// `links = 13`.
    #[prost(message, repeated, tag = "13")]
    pub links: Vec<SpanLink>,
    /// `status = 15`.
    #[prost(message, optional, tag = "15")]
    pub status: Option<Status>,
}

/// `Span.Event` (trace.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SpanEvent {
    /// `time_unix_nano = 1`, ns.
    #[prost(fixed64, tag = "1")]
    pub time_unix_nano: u64,
    /// `name = 2`.
    #[prost(string, tag = "2")]
    pub name: String,
    /// `attributes = 3`.
    #[prost(message, repeated, tag = "3")]
    pub attributes: Vec<KeyValue>,
}

/// `Span.Link` (trace.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SpanLink {
    /// `trace_id = 1`.
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    /// `span_id = 2`.
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
    /// `attributes = 4`.
    #[prost(message, repeated, tag = "4")]
    pub attributes: Vec<KeyValue>,
}

/// `Status` (trace.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Status {
    /// `message = 2`.
    #[prost(string, tag = "2")]
    pub message: String,
    /// `code = 3` (0 unset, 1 ok, 2 error).
    #[prost(int32, tag = "3")]
    pub code: i32,
}

/// `KeyValue` (common.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    /// `key = 1`.
    #[prost(string, tag = "1")]
    pub key: String,
    /// `value = 2`.
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `AnyValue` (common.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    /// The `value` oneof.
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5, 6, 7")]
    pub value: Option<any_value::Value>,
}

/// The `AnyValue.value` oneof.
pub mod any_value {
    /// One of `AnyValue`'s alternatives.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        /// `string_value = 1`.
        #[prost(string, tag = "1")]
        StringValue(String),
        /// `bool_value = 2`.
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        /// `int_value = 3`.
        #[prost(int64, tag = "3")]
        IntValue(i64),
        /// `double_value = 4`.
        #[prost(double, tag = "4")]
        DoubleValue(f64),
        /// `array_value = 5`.
        #[prost(message, tag = "5")]
        ArrayValue(super::ArrayValue),
        /// `kvlist_value = 6`.
        #[prost(message, tag = "6")]
        KvlistValue(super::KeyValueList),
        /// `bytes_value = 7`.
        #[prost(bytes = "vec", tag = "7")]
        BytesValue(Vec<u8>),
    }
}

/// `ArrayValue` (common.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ArrayValue {
    /// `values = 1`.
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

/// `KeyValueList` (common.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValueList {
    /// `values = 1`.
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KeyValue>,
}

/// An attribute value with its OTLP type (`AnyValue`); an unset value is the empty string.
pub fn attr_value(v: &AnyValue) -> AttrValue {
    use any_value::Value as V;
    match &v.value {
        None => AttrValue::String(String::new()),
        Some(V::StringValue(s)) => AttrValue::String(s.clone()),
        Some(V::BoolValue(b)) => AttrValue::Bool(*b),
        Some(V::IntValue(i)) => AttrValue::Int(*i),
        Some(V::DoubleValue(d)) => AttrValue::Double(*d),
        Some(V::BytesValue(b)) => AttrValue::Bytes(b.clone()),
        Some(V::ArrayValue(a)) => AttrValue::Array(a.values.iter().map(attr_value).collect()),
        Some(V::KvlistValue(kv)) => AttrValue::Kvlist(
            kv.values
                .iter()
                .map(|k| {
                    (
                        k.key.clone(),
                        k.value
                            .as_ref()
                            .map_or(AttrValue::String(String::new()), attr_value),
                    )
                })
                .collect(),
        ),
    }
}

/// An attribute value as text ([`AttrValue::text`]): strings as they are, numbers and booleans in
/// decimal, bytes as lowercase hex, arrays and key/value lists as JSON keeping their elements'
/// types.
pub fn any_value_text(v: &AnyValue) -> String {
    attr_value(v).text()
}

/// Adds attribute `key` = `value` to `e`: its text to [`Event::fields`], and its typed value to
/// [`Event::typed`] unless it is a string (`docs/otlp-mapping.md`, "Attribute values").
pub fn push_attribute(e: &mut Event, key: String, value: Option<&AnyValue>) {
    let v = value.map_or(AttrValue::String(String::new()), attr_value);
    match v {
        AttrValue::String(s) => e.fields.push((key, s)),
        typed => {
            e.fields.push((key.clone(), typed.text()));
            e.typed.push((key, typed));
        }
    }
}

fn hex_upper(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

/// Decodes an `ExportTraceServiceRequest` in protobuf.
///
/// # Errors
/// [`OtlpError::Protobuf`] when the bytes are not that message.
pub fn decode_protobuf(body: &[u8]) -> Result<ExportTraceServiceRequest, OtlpError> {
    <ExportTraceServiceRequest as prost::Message>::decode(body).map_err(OtlpError::Protobuf)
}

// ---- OTLP/JSON ----

fn get<'a>(o: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    o.get(camel)
        .or_else(|| o.get(snake))
        .filter(|v| !v.is_null())
}

fn arr<'a>(o: &'a Value, camel: &str, snake: &str) -> &'a [Value] {
    get(o, camel, snake)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn string(o: &Value, camel: &str, snake: &str) -> String {
    get(o, camel, snake)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A 64-bit integer given as a JSON number or a decimal string.
fn u64_of(v: Option<&Value>, field: &'static str) -> Result<u64, OtlpError> {
    int_of(v, field, "a u64", Value::as_u64)
}

/// A 64-bit signed integer given as a JSON number or a decimal string.
fn i64_of(v: Option<&Value>, field: &'static str) -> Result<i64, OtlpError> {
    int_of(v, field, "an i64", Value::as_i64)
}

/// `u64_of` and `i64_of`: absent is 0; a number is read by `of_number`, a string parsed.
fn int_of<T: std::str::FromStr + Default>(
    v: Option<&Value>,
    field: &'static str,
    expected: &'static str,
    of_number: fn(&Value) -> Option<T>,
) -> Result<T, OtlpError> {
    let parsed = match v {
        None => return Ok(T::default()),
        Some(n @ Value::Number(_)) => of_number(n),
        Some(Value::String(s)) => s.trim().parse().ok(),
        Some(_) => None,
    };
    parsed.ok_or_else(|| OtlpError::Integer {
        field,
        value: v.map(Value::to_string).unwrap_or_default(),
        expected,
    })
}

/// An id given as hex (either case). Text that is not hex decodes to no bytes, which makes the
/// span invalid (rejected) rather than the whole request.
fn hex_id(v: Option<&Value>) -> Vec<u8> {
    let Some(s) = v.and_then(Value::as_str) else {
        return Vec::new();
    };
    let s = s.trim();
    if s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return vec![0xFF]; // a length no id has: rejected with "not hex"
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("checked hex"))
        .collect()
}

fn enum_of(v: Option<&Value>, names: &[&str]) -> i32 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0) as i32,
        Some(Value::String(s)) => names
            .iter()
            .position(|n| n == s)
            .map(|p| p as i32)
            .unwrap_or(0),
        _ => 0,
    }
}

fn any_from_json(v: &Value) -> Result<AnyValue, OtlpError> {
    use any_value::Value as V;
    let value = if let Some(s) = get(v, "stringValue", "string_value") {
        Some(V::StringValue(s.as_str().unwrap_or_default().to_string()))
    } else if let Some(b) = get(v, "boolValue", "bool_value") {
        Some(V::BoolValue(b.as_bool().unwrap_or(false)))
    } else if let Some(i) = get(v, "intValue", "int_value") {
        Some(V::IntValue(i64_of(Some(i), "intValue")?))
    } else if let Some(d) = get(v, "doubleValue", "double_value") {
        let d = match d {
            Value::Number(n) => n.as_f64().unwrap_or(0.0),
            Value::String(s) => s.parse().unwrap_or(f64::NAN),
            _ => 0.0,
        };
        Some(V::DoubleValue(d))
    } else if let Some(a) = get(v, "arrayValue", "array_value") {
        let values = arr(a, "values", "values")
            .iter()
            .map(any_from_json)
            .collect::<Result<_, _>>()?;
        Some(V::ArrayValue(ArrayValue { values }))
    } else if let Some(kv) = get(v, "kvlistValue", "kvlist_value") {
        Some(V::KvlistValue(KeyValueList {
            values: kvs_from_json(arr(kv, "values", "values"))?,
        }))
    } else {
        // JSON bytes are base64 (proto3 JSON: standard or URL-safe alphabet, padding optional);
        // text that is not base64 is kept as a string rather than failing the request.
        get(v, "bytesValue", "bytes_value").map(|b| {
            let text = b.as_str().unwrap_or_default();
            match base64_decode(text) {
                Some(bytes) => V::BytesValue(bytes),
                None => V::StringValue(text.to_string()),
            }
        })
    };
    Ok(AnyValue { value })
}

/// Decodes proto3 JSON's base64 for `bytes` (RFC 4648 §4 or §5 alphabet, padding optional).
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let cfg = GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let t = text.trim().trim_end_matches('=');
    if t.contains(['-', '_']) {
        GeneralPurpose::new(&base64::alphabet::URL_SAFE, cfg)
            .decode(t)
            .ok()
    } else {
        GeneralPurpose::new(&base64::alphabet::STANDARD, cfg)
            .decode(t)
            .ok()
    }
}

fn kvs_from_json(a: &[Value]) -> Result<Vec<KeyValue>, OtlpError> {
    a.iter()
        .map(|kv| {
            Ok(KeyValue {
                key: string(kv, "key", "key"),
                value: get(kv, "value", "value").map(any_from_json).transpose()?,
            })
        })
        .collect()
}

const SPAN_KINDS: &[&str] = &[
    "SPAN_KIND_UNSPECIFIED",
    "SPAN_KIND_INTERNAL",
    "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",
    "SPAN_KIND_PRODUCER",
    "SPAN_KIND_CONSUMER",
];
const STATUS_CODES: &[&str] = &["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"];

/// Decodes an `ExportTraceServiceRequest` in OTLP/JSON.
///
/// # Errors
/// [`OtlpError::Json`] when the text is not JSON, [`OtlpError::NotAnObject`],
/// [`OtlpError::Integer`] when a 64-bit field is neither a number nor a decimal string in range. Ids that are not hex do not fail the request: their spans are rejected by
/// [`to_events`].
pub fn decode_json(body: &[u8]) -> Result<ExportTraceServiceRequest, OtlpError> {
    let v: Value = serde_json::from_slice(body).map_err(OtlpError::Json)?;
    if !v.is_object() {
        return Err(OtlpError::NotAnObject);
    }
    let mut req = ExportTraceServiceRequest::default();
    for rs in arr(&v, "resourceSpans", "resource_spans") {
        let resource = get(rs, "resource", "resource")
            .map(|r| {
                Ok::<_, OtlpError>(Resource {
                    attributes: kvs_from_json(arr(r, "attributes", "attributes"))?,
                })
            })
            .transpose()?;
        let mut scope_spans = Vec::new();
        for ss in arr(rs, "scopeSpans", "scope_spans") {
            let scope = get(ss, "scope", "scope")
                .map(|s| {
                    Ok::<_, OtlpError>(InstrumentationScope {
                        name: string(s, "name", "name"),
                        version: string(s, "version", "version"),
                        attributes: kvs_from_json(arr(s, "attributes", "attributes"))?,
                    })
                })
                .transpose()?;
            let mut spans = Vec::new();
            for s in arr(ss, "spans", "spans") {
                let mut events = Vec::new();
                for e in arr(s, "events", "events") {
                    events.push(SpanEvent {
                        time_unix_nano: u64_of(
                            get(e, "timeUnixNano", "time_unix_nano"),
                            "timeUnixNano",
                        )?,
                        name: string(e, "name", "name"),
                        attributes: kvs_from_json(arr(e, "attributes", "attributes"))?,
                    });
                }
                let mut links = Vec::new();
                for l in arr(s, "links", "links") {
                    links.push(SpanLink {
                        trace_id: hex_id(get(l, "traceId", "trace_id")),
                        span_id: hex_id(get(l, "spanId", "span_id")),
                        attributes: kvs_from_json(arr(l, "attributes", "attributes"))?,
                    });
                }
                let status = get(s, "status", "status").map(|st| Status {
                    message: string(st, "message", "message"),
                    code: enum_of(get(st, "code", "code"), STATUS_CODES),
                });
                spans.push(Span {
                    trace_id: hex_id(get(s, "traceId", "trace_id")),
                    span_id: hex_id(get(s, "spanId", "span_id")),
                    parent_span_id: hex_id(get(s, "parentSpanId", "parent_span_id")),
                    name: string(s, "name", "name"),
                    kind: enum_of(get(s, "kind", "kind"), SPAN_KINDS),
                    start_time_unix_nano: u64_of(
                        get(s, "startTimeUnixNano", "start_time_unix_nano"),
                        "startTimeUnixNano",
                    )?,
                    end_time_unix_nano: u64_of(
                        get(s, "endTimeUnixNano", "end_time_unix_nano"),
                        "endTimeUnixNano",
                    )?,
                    attributes: kvs_from_json(arr(s, "attributes", "attributes"))?,
                    events,
                    links,
                    status,
                });
            }
            scope_spans.push(ScopeSpans { scope, spans });
        }
        req.resource_spans.push(ResourceSpans {
            resource,
            scope_spans,
        });
    }
    Ok(req)
}

// ---- span -> events ----

/// The events of one request, and the spans that could not be accepted.
#[derive(Debug, Default)]
pub struct Converted {
    /// Events in span order (each span: start, its span events, end).
    pub events: Vec<Event>,
    /// Spans accepted.
    pub spans: u64,
    /// Spans rejected (bad trace or span id).
    pub rejected: u64,
    /// Why the first rejected span was rejected.
    pub first_error: Option<String>,
}

/// Event id of a span's start event: `<SPANID>:start` (span id in uppercase hex).
pub fn start_id(span_id: &[u8]) -> String {
    format!("{}:start", hex_upper(span_id))
}

/// Event id of a span's end event: `<SPANID>:end`.
pub fn end_id(span_id: &[u8]) -> String {
    format!("{}:end", hex_upper(span_id))
}

/// The task of a trace: the TaskId that `causal::w3c::task_from_trace_id` maps the trace id to
/// (so spans and X-Trace reports of a request that crossed a `traceparent` boundary land in the
/// same task), in uppercase hex. `trace_id` must be 16 non-zero bytes.
pub fn task_of_trace_id(trace_id: &[u8]) -> String {
    let t: [u8; 16] = trace_id.try_into().expect("checked: 16 bytes");
    causal::w3c::task_from_trace_id(&t)
        .map(|t| t.to_hex())
        .unwrap_or_else(|| hex_upper(trace_id))
}

fn valid_id(id: &[u8], len: usize) -> bool {
    id.len() == len && id.iter().any(|&b| b != 0)
}

fn ns(t: u64) -> Option<i64> {
    (t != 0).then(|| i64::try_from(t).unwrap_or(i64::MAX))
}

/// The `process` of a resource's events: what tells its process apart from others, from the
/// resource attributes available (`docs/otlp-mapping.md`, "Processes"): `service.name`, then
/// `[service.instance.id]`, then `pid N` (`process.pid`); `None` when none is present. The host
/// (`host.name`) is the event's own field and is added by `Event::process_key`.
fn process_identity(
    service: Option<&str>,
    instance: Option<&str>,
    pid: Option<&str>,
) -> Option<String> {
    let mut s = service.unwrap_or_default().to_string();
    if let Some(i) = instance {
        s.push_str(&format!("[{i}]"));
    }
    if let Some(p) = pid {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(&format!("pid {p}"));
    }
    (!s.is_empty()).then_some(s)
}

/// Maps the spans of `req` to events as `docs/otlp-mapping.md` specifies. A span whose trace id is
/// not 16 bytes or is all zero, or whose span id is not 8 bytes or is all zero, is rejected (OTLP
/// requires valid ids), counted in [`Converted::rejected`], and the others are kept.
pub fn to_events(req: &ExportTraceServiceRequest) -> Converted {
    let mut out = Converted::default();
    for rs in &req.resource_spans {
        let attrs = rs
            .resource
            .as_ref()
            .map(|r| r.attributes.as_slice())
            .unwrap_or(&[]);
        let rattr = |k: &str| {
            attrs
                .iter()
                .find(|a| a.key == k)
                .and_then(|a| a.value.as_ref())
                .map(any_value_text)
        };
        let agent = rattr("service.name");
        let host = rattr("host.name");
        let pid_text = rattr("process.pid");
        let pid = pid_text.as_deref().and_then(causal_analysis::parse_pid);
        let process = process_identity(
            agent.as_deref(),
            rattr("service.instance.id").as_deref(),
            pid_text.as_deref(),
        );
        // Every resource attribute, as `resource.<key>` on each span's start event.
        let mut resource = Event::default();
        for a in attrs {
            push_attribute(
                &mut resource,
                format!("resource.{}", a.key),
                a.value.as_ref(),
            );
        }
        for ss in &rs.scope_spans {
            // The instrumentation scope (`otel.scope.name`, `otel.scope.version`, as
            // OpenTelemetry's non-OTLP exporters name them; its attributes as
            // `otel.scope.attributes.<key>`), then the resource.
            let mut context = Event::default();
            if let Some(sc) = &ss.scope {
                if !sc.name.is_empty() {
                    context
                        .fields
                        .push(("otel.scope.name".into(), sc.name.clone()));
                }
                if !sc.version.is_empty() {
                    context
                        .fields
                        .push(("otel.scope.version".into(), sc.version.clone()));
                }
                for a in &sc.attributes {
                    push_attribute(
                        &mut context,
                        format!("otel.scope.attributes.{}", a.key),
                        a.value.as_ref(),
                    );
                }
            }
            context.fields.extend(resource.fields.iter().cloned());
            context.typed.extend(resource.typed.iter().cloned());
            for span in &ss.spans {
                let problem = if !valid_id(&span.trace_id, 16) {
                    Some(format!(
                        "span {:?}: trace id must be 16 non-zero bytes, got {} bytes",
                        span.name,
                        span.trace_id.len()
                    ))
                } else if !valid_id(&span.span_id, 8) {
                    Some(format!(
                        "span {:?}: span id must be 8 non-zero bytes, got {} bytes",
                        span.name,
                        span.span_id.len()
                    ))
                } else if !span.parent_span_id.is_empty() && span.parent_span_id.len() != 8 {
                    Some(format!(
                        "span {:?}: parent span id must be 8 bytes, got {}",
                        span.name,
                        span.parent_span_id.len()
                    ))
                } else {
                    None
                };
                if let Some(p) = problem {
                    out.rejected += 1;
                    out.first_error.get_or_insert(p);
                    continue;
                }
                out.spans += 1;
                let task = task_of_trace_id(&span.trace_id);
                let base = Event {
                    task: task.clone(),
                    agent: agent.clone(),
                    host: host.clone(),
                    process: process.clone(),
                    pid,
                    ..Event::default()
                };
                // Start event.
                let mut start = Event {
                    id: start_id(&span.span_id),
                    timestamp_ns: ns(span.start_time_unix_nano),
                    labels: vec![format!("{} start", span.name)],
                    ..base.clone()
                };
                start.fields.push(("span.name".into(), span.name.clone()));
                if span.kind != 0 {
                    let k = SPAN_KINDS
                        .get(span.kind as usize)
                        .map(|s| s.trim_start_matches("SPAN_KIND_").to_ascii_lowercase());
                    start.fields.push((
                        "span.kind".into(),
                        k.unwrap_or_else(|| span.kind.to_string()),
                    ));
                }
                for a in &span.attributes {
                    push_attribute(&mut start, a.key.clone(), a.value.as_ref());
                }
                start.fields.extend(context.fields.iter().cloned());
                start.typed.extend(context.typed.iter().cloned());
                if valid_id(&span.parent_span_id, 8) {
                    start
                        .parents
                        .push(Parent::causal(start_id(&span.parent_span_id)));
                }
                for l in &span.links {
                    if !valid_id(&l.span_id, 8) {
                        continue;
                    }
                    if l.trace_id == span.trace_id || l.trace_id.is_empty() {
                        start.parents.push(Parent::link(end_id(&l.span_id)));
                    } else {
                        start.fields.push((
                            "link".into(),
                            format!("{}/{}", hex_upper(&l.trace_id), hex_upper(&l.span_id)),
                        ));
                    }
                    for a in &l.attributes {
                        push_attribute(
                            &mut start,
                            format!("link.{}.{}", hex_upper(&l.span_id), a.key),
                            a.value.as_ref(),
                        );
                    }
                }
                let mut prev = start.id.clone();
                out.events.push(start);
                // Span events, chained in time order.
                let mut evs: Vec<&SpanEvent> = span.events.iter().collect();
                evs.sort_by_key(|e| e.time_unix_nano);
                for (n, se) in evs.into_iter().enumerate() {
                    let mut e = Event {
                        id: format!("{}:event{}", hex_upper(&span.span_id), n + 1),
                        timestamp_ns: ns(se.time_unix_nano),
                        labels: vec![se.name.clone()],
                        parents: vec![Parent::causal(prev.clone())],
                        ..base.clone()
                    };
                    for a in &se.attributes {
                        push_attribute(&mut e, a.key.clone(), a.value.as_ref());
                    }
                    prev = e.id.clone();
                    out.events.push(e);
                }
                // End event.
                let mut end = Event {
                    id: end_id(&span.span_id),
                    timestamp_ns: ns(span.end_time_unix_nano),
                    labels: vec![format!("{} end", span.name)],
                    parents: vec![Parent::causal(prev)],
                    ..base
                };
                if let Some(st) = &span.status {
                    if st.code != 0 {
                        let c = STATUS_CODES
                            .get(st.code as usize)
                            .map(|s| s.trim_start_matches("STATUS_CODE_").to_ascii_lowercase());
                        end.fields.push((
                            "status.code".into(),
                            c.unwrap_or_else(|| st.code.to_string()),
                        ));
                    }
                    if !st.message.is_empty() {
                        end.fields
                            .push(("status.message".into(), st.message.clone()));
                    }
                }
                out.events.push(end);
            }
        }
    }
    out
}

/// The OTLP/JSON form of an `ExportTraceServiceResponse`: `{}` or
/// `{"partialSuccess":{"rejectedSpans":"N","errorMessage":"…"}}` (int64 as a string, as the proto3
/// JSON mapping writes it).
pub fn response_json(resp: &ExportTraceServiceResponse) -> String {
    match &resp.partial_success {
        None => "{}".to_string(),
        Some(p) => serde_json::json!({
            "partialSuccess": {"rejectedSpans": p.rejected_spans.to_string(), "errorMessage": p.error_message}
        })
        .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_ids_in_either_case_and_ints_as_strings_or_numbers() {
        let body = br#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},
            "scopeSpans":[{"spans":[
              {"traceId":"8591D7138ADDD9177ACBFCEBE886FE31","spanId":"1ee2f319f50a7406","name":"a","kind":"SPAN_KIND_SERVER",
               "startTimeUnixNano":1000,"endTimeUnixNano":"2000"},
              {"traceId":"8591d7138addd9177acbfcebe886fe31","spanId":"75A3333C86293E0D","parentSpanId":"1EE2F319F50A7406","name":"b",
               "startTimeUnixNano":"1500","endTimeUnixNano":1900,
               "links":[{"traceId":"8591d7138addd9177acbfcebe886fe31","spanId":"1ee2f319f50a7406"}]},
              {"traceId":"00000000000000000000000000000000","spanId":"75A3333C86293E0D","name":"bad"},
              {"traceId":"8591d7138addd9177acbfcebe886fe31","spanId":"xyz","name":"bad2"}
            ]}]}]}"#;
        let req = decode_json(body).unwrap();
        let c = to_events(&req);
        assert_eq!((c.spans, c.rejected), (2, 2));
        assert!(c.first_error.unwrap().contains("trace id"));
        assert_eq!(c.events.len(), 4);
        let ids: Vec<&str> = c.events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "1EE2F319F50A7406:start",
                "1EE2F319F50A7406:end",
                "75A3333C86293E0D:start",
                "75A3333C86293E0D:end"
            ]
        );
        // The 20-byte TaskId of causal's trace-id mapping: trace id, then four zero bytes.
        assert!(
            c.events
                .iter()
                .all(|e| e.task == "8591D7138ADDD9177ACBFCEBE886FE3100000000")
        );
        assert_eq!(c.events[0].timestamp_ns, Some(1000));
        assert_eq!(c.events[1].timestamp_ns, Some(2000));
        assert_eq!(c.events[0].field("span.kind"), Some("server"));
        assert_eq!(c.events[0].agent.as_deref(), Some("svc"));
        assert_eq!(
            c.events[2].parents,
            vec![
                Parent::causal("1EE2F319F50A7406:start"),
                Parent::link("1EE2F319F50A7406:end")
            ]
        );
    }

    #[test]
    fn bad_64_bit_integer_fails_the_request() {
        let body = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01","startTimeUnixNano":"12x"}]}]}]}"#;
        match decode_json(body) {
            Err(OtlpError::Integer {
                field: "startTimeUnixNano",
                value,
                expected: "a u64",
            }) => assert_eq!(value, r#""12x""#),
            other => panic!("{other:?}"),
        }
        let negative =
            br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"endTimeUnixNano":-5}]}]}]}"#;
        assert!(matches!(
            decode_json(negative),
            Err(OtlpError::Integer { field: "endTimeUnixNano", value, .. }) if value == "-5"
        ));
        assert!(matches!(decode_json(b"[1]"), Err(OtlpError::NotAnObject)));
        let e = decode_json(b"{").unwrap_err();
        assert!(matches!(e, OtlpError::Json(_)));
        // The cause is the source, not repeated in the message.
        assert_eq!(e.to_string(), "decoding the OTLP/JSON body");
        assert_eq!(
            crate::error::error_chain(&e),
            "decoding the OTLP/JSON body: EOF while parsing an object at line 1 column 1"
        );
    }

    #[test]
    fn protobuf_round_trip_of_the_hand_written_messages() {
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: None,
                scope_spans: vec![ScopeSpans {
                    scope: None,
                    spans: vec![Span {
                        trace_id: [[0; 8], [1; 8]].concat(),
                        span_id: vec![2; 8],
                        name: "x".into(),
                        start_time_unix_nano: 5,
                        end_time_unix_nano: 9,
                        events: vec![SpanEvent {
                            time_unix_nano: 7,
                            name: "mid".into(),
                            attributes: vec![],
                        }],
                        ..Span::default()
                    }],
                }],
            }],
        };
        let bytes = prost::Message::encode_to_vec(&req);
        let back = decode_protobuf(&bytes).unwrap();
        assert_eq!(back, req);
        let c = to_events(&back);
        // A trace id whose first 8 bytes are zero maps to the 8-byte TaskId of its last 8.
        assert!(c.events.iter().all(|e| e.task == "0101010101010101"));
        let ids: Vec<&str> = c.events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "0202020202020202:start",
                "0202020202020202:event1",
                "0202020202020202:end"
            ]
        );
        assert_eq!(
            c.events[2].parents,
            vec![Parent::causal("0202020202020202:event1")]
        );
        assert!(decode_protobuf(&[0xff, 0xff, 0xff]).is_err());
    }

    fn kv(key: &str, v: any_value::Value) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(v) }),
        }
    }

    /// Issue 17: int arrays came back as string arrays; resource attributes other than three and
    /// the scope's version and attributes were dropped.
    #[test]
    fn attribute_types_resource_and_scope_are_kept() {
        use any_value::Value as V;
        let ints = V::ArrayValue(ArrayValue {
            values: [3, -4]
                .map(|i| AnyValue {
                    value: Some(V::IntValue(i)),
                })
                .to_vec(),
        });
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![
                        kv("service.name", V::StringValue("svc".into())),
                        kv("deployment.environment", V::StringValue("prod".into())),
                        kv("process.runtime.pid_max", V::IntValue(4_194_304)),
                    ],
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "lib".into(),
                        version: "1.2.3".into(),
                        attributes: vec![kv("lib.flag", V::BoolValue(true))],
                    }),
                    spans: vec![Span {
                        trace_id: vec![1; 16],
                        span_id: vec![2; 8],
                        name: "op".into(),
                        attributes: vec![
                            kv("http.status_code", V::IntValue(200)),
                            kv("ratio", V::DoubleValue(0.25)),
                            kv("ok", V::BoolValue(false)),
                            kv("raw", V::BytesValue(vec![0x0a, 0xff])),
                            kv("ids", ints.clone()),
                            kv(
                                "map",
                                V::KvlistValue(KeyValueList {
                                    values: vec![
                                        kv("n", V::IntValue(1)),
                                        kv("s", V::StringValue("x".into())),
                                    ],
                                }),
                            ),
                            kv("name", V::StringValue("plain".into())),
                        ],
                        ..Span::default()
                    }],
                }],
            }],
        };
        let c = to_events(&decode_protobuf(&prost::Message::encode_to_vec(&req)).unwrap());
        let start = &c.events[0];
        let text = |k: &str| start.field(k).unwrap_or_else(|| panic!("no {k}"));
        assert_eq!(text("http.status_code"), "200");
        assert_eq!(text("ids"), "[3,-4]");
        assert_eq!(text("map"), r#"{"n":1,"s":"x"}"#);
        assert_eq!(text("raw"), "0aff");
        assert_eq!(text("otel.scope.name"), "lib");
        assert_eq!(text("otel.scope.version"), "1.2.3");
        assert_eq!(text("otel.scope.attributes.lib.flag"), "true");
        assert_eq!(text("resource.deployment.environment"), "prod");
        assert_eq!(text("resource.service.name"), "svc");
        assert_eq!(
            start.typed("resource.process.runtime.pid_max"),
            Some(&AttrValue::Int(4_194_304))
        );
        assert_eq!(start.typed("http.status_code"), Some(&AttrValue::Int(200)));
        assert_eq!(start.typed("ratio"), Some(&AttrValue::Double(0.25)));
        assert_eq!(start.typed("ok"), Some(&AttrValue::Bool(false)));
        assert_eq!(
            start.typed("raw"),
            Some(&AttrValue::Bytes(vec![0x0a, 0xff]))
        );
        assert_eq!(
            start.typed("ids"),
            Some(&AttrValue::Array(vec![
                AttrValue::Int(3),
                AttrValue::Int(-4)
            ]))
        );
        assert_eq!(
            start.typed("map"),
            Some(&AttrValue::Kvlist(vec![
                ("n".into(), AttrValue::Int(1)),
                ("s".into(), AttrValue::String("x".into()))
            ]))
        );
        // Strings are text only.
        assert_eq!(start.typed("name"), None);
        assert_eq!(text("name"), "plain");
        // In JSON each typed value names its type.
        let j = serde_json::to_value(start).unwrap();
        let typed = j["typed"].as_array().unwrap();
        assert!(
            typed.contains(&serde_json::json!(["http.status_code", {"int": 200}])),
            "{typed:?}"
        );
        assert!(typed.contains(&serde_json::json!(["ids", {"array": [{"int": 3}, {"int": -4}]}])));
        assert!(typed.contains(&serde_json::json!(["raw", {"bytes": "0aff"}])));
        let back: Event = serde_json::from_value(j).unwrap();
        assert_eq!(&back, start);
    }

    #[test]
    fn json_attribute_types_and_base64_bytes() {
        let body = br#"{"resourceSpans":[{"resource":{"attributes":[{"key":"k8s.pod.uid","value":{"stringValue":"p"}}]},
            "scopeSpans":[{"scope":{"name":"s","version":"9","attributes":[{"key":"a","value":{"intValue":"7"}}]},
            "spans":[{"traceId":"8591D7138ADDD9177ACBFCEBE886FE31","spanId":"1ee2f319f50a7406","name":"a",
              "attributes":[{"key":"ids","value":{"arrayValue":{"values":[{"intValue":"1"},{"intValue":2}]}}},
                            {"key":"b","value":{"bytesValue":"Cv8="}},
                            {"key":"nb","value":{"bytesValue":"not base64!"}}]}]}]}]}"#;
        let c = to_events(&decode_json(body).unwrap());
        let s = &c.events[0];
        assert_eq!(s.field("ids"), Some("[1,2]"));
        assert_eq!(
            s.typed("ids"),
            Some(&AttrValue::Array(vec![
                AttrValue::Int(1),
                AttrValue::Int(2)
            ]))
        );
        assert_eq!(s.typed("b"), Some(&AttrValue::Bytes(vec![0x0a, 0xff])));
        assert_eq!(s.field("nb"), Some("not base64!"));
        assert_eq!(s.typed("otel.scope.attributes.a"), Some(&AttrValue::Int(7)));
        assert_eq!(s.field("otel.scope.version"), Some("9"));
        assert_eq!(s.field("resource.k8s.pod.uid"), Some("p"));
    }
}
