//! The event model: what one report (X-Trace) or one span boundary (OTLP) becomes.
//!
//! An [`Event`] is a point in time in one task, reported by one agent in one thread of one process
//! on one host, with edges to the events that caused it ([`Parent`]). This is the X-Trace report
//! model (Fonseca et al., "X-Trace: A Pervasive Network Tracing Framework", NSDI 2007, §3; the
//! field names are those of X-Trace Report ver 1.0: `X-Trace`, `Edge`, `Agent`, `Label`, `Host`,
//! `ProcessID`, `ThreadID`, `ThreadName`, `Timestamp`, `HRT`).

use serde::{Deserialize, Serialize};

/// The kind of an edge between two events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// A happens-before edge: an X-Trace `Edge` entry, an OTLP parent span, or the edge from a
    /// span's start event to its end event.
    Causal,
    /// An extra edge from an OTLP span link (or a `tracing` `follows_from`): the linked work
    /// contributed to this event.
    Link,
    /// From a child span's end event to its parent span's end event, inferred by
    /// [`infer_span_nesting`] when the child ended no later than the parent (the parent waited
    /// for it, as a synchronous call does). Never stored; added when a task is rebuilt.
    Nested,
}

impl EdgeKind {
    /// The name stored in the collector's database and printed in JSON: `causal` or `link`.
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Causal => "causal",
            EdgeKind::Link => "link",
            EdgeKind::Nested => "nested",
        }
    }

    /// Parses [`EdgeKind::as_str`]'s names; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "causal" => Some(EdgeKind::Causal),
            "link" => Some(EdgeKind::Link),
            "nested" => Some(EdgeKind::Nested),
            _ => None,
        }
    }
}

/// One incoming edge of an event: the id of the event that caused it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Parent {
    /// Event id of the parent (same id space as [`Event::id`]).
    pub id: String,
    /// What kind of edge this is.
    pub kind: EdgeKind,
}

impl Parent {
    /// A [`EdgeKind::Causal`] edge from `id`.
    pub fn causal(id: impl Into<String>) -> Self {
        Parent {
            id: id.into(),
            kind: EdgeKind::Causal,
        }
    }

    /// A [`EdgeKind::Link`] edge from `id`.
    pub fn link(id: impl Into<String>) -> Self {
        Parent {
            id: id.into(),
            kind: EdgeKind::Link,
        }
    }
}

/// One event of a task.
///
/// Ids are text: for X-Trace, the TaskId and OpId in uppercase hex (as in the `X-Trace` field);
/// for OTLP, see `docs/otlp-mapping.md` (trace id as the task, `<SPANID>:start` / `<SPANID>:end` as
/// the events).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Event {
    /// The task (X-Trace TaskId, uppercase hex).
    pub task: String,
    /// The event id, unique within the task (X-Trace OpId, uppercase hex).
    pub id: String,
    /// The reporting agent (X-Trace `Agent`; OTLP: the resource's `service.name`).
    pub agent: Option<String>,
    /// Host name (X-Trace `Host`; OTLP `host.name`).
    pub host: Option<String>,
    /// The process as reported (X-Trace `ProcessID`, e.g. `8201@manny`; OTLP `process.pid`).
    pub process: Option<String>,
    /// Process id (pid, the thread-group id), parsed from `process` when it starts with digits.
    pub pid: Option<u32>,
    /// Thread id (X-Trace `ThreadID`: a kernel tid or a language runtime's thread number).
    pub tid: Option<u64>,
    /// Thread name (X-Trace `ThreadName`).
    pub thread_name: Option<String>,
    /// Wall-clock time of the event in ns since the Unix epoch (X-Trace `Timestamp`, normalized
    /// to ns by `causal::report::parse_timestamp_ns`; OTLP `start`/`end_time_unix_nano`).
    pub timestamp_ns: Option<i64>,
    /// Monotonic high-resolution time in ns (X-Trace `HRT`); comparable only within one host.
    pub hrt_ns: Option<u64>,
    /// Labels (X-Trace `Label`, OTLP span name with ` start`/` end`), in report order.
    pub labels: Vec<String>,
    /// All other key/values in report order; a key may repeat (X-Trace fields are lists).
    /// Values are text; an OTLP attribute that is not a string also has its typed value in
    /// [`Event::typed`].
    pub fields: Vec<(String, String)>,
    /// The OTLP types of the fields whose value is not a string (an int, double, bool, bytes,
    /// array or key/value list: OTLP `AnyValue`), by key, in the order of [`Event::fields`].
    /// Empty for X-Trace events, whose fields are all text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub typed: Vec<(String, AttrValue)>,
    /// Incoming edges, in report order.
    pub parents: Vec<Parent>,
}

/// A typed attribute value: OpenTelemetry's `AnyValue` (opentelemetry-proto `common.proto`)
/// without its string case, which stays text in [`Event::fields`]; inside arrays and key/value
/// lists strings are [`AttrValue::String`].
///
/// In JSON (the store's `fields` column, `show --format json`) each value is an object with one
/// key naming its type: `{"int":200}`, `{"double":0.5}`, `{"bool":true}`, `{"bytes":"0aff"}` (hex),
/// `{"string":"x"}`, `{"array":[…values]}`, `{"kvlist":[["key", value]…]}`
/// (`docs/otlp-mapping.md`, "Attribute values").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttrValue {
    /// `string_value` (only inside arrays and key/value lists).
    String(String),
    /// `bool_value`.
    Bool(bool),
    /// `int_value`: a signed 64-bit integer.
    Int(i64),
    /// `double_value`: an IEEE 754 double.
    Double(f64),
    /// `bytes_value`, in JSON as lowercase hex.
    Bytes(#[serde(with = "hex_bytes")] Vec<u8>),
    /// `array_value`.
    Array(Vec<AttrValue>),
    /// `kvlist_value`: key/value pairs in their order.
    Kvlist(Vec<(String, AttrValue)>),
}

impl AttrValue {
    /// The value as text, as it is kept in [`Event::fields`]: strings as they are, numbers and
    /// booleans in decimal, bytes as lowercase hex, arrays and key/value lists as JSON whose
    /// elements keep their types (`[1,2]`, `["a","b"]`, `{"k":true}`; bytes inside them as hex
    /// strings).
    pub fn text(&self) -> String {
        match self {
            AttrValue::String(s) => s.clone(),
            AttrValue::Bool(b) => b.to_string(),
            AttrValue::Int(i) => i.to_string(),
            AttrValue::Double(d) => d.to_string(),
            AttrValue::Bytes(b) => hex_bytes::encode(b),
            AttrValue::Array(_) | AttrValue::Kvlist(_) => self.plain_json().to_string(),
        }
    }

    /// The value as plain JSON (no type tags): what [`AttrValue::text`] prints for arrays and
    /// key/value lists. A double that is not finite becomes `null`.
    pub fn plain_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            AttrValue::String(s) => J::String(s.clone()),
            AttrValue::Bool(b) => J::Bool(*b),
            AttrValue::Int(i) => J::from(*i),
            AttrValue::Double(d) => J::from(*d),
            AttrValue::Bytes(b) => J::String(hex_bytes::encode(b)),
            AttrValue::Array(a) => J::Array(a.iter().map(AttrValue::plain_json).collect()),
            AttrValue::Kvlist(kv) => J::Object(
                kv.iter()
                    .map(|(k, v)| (k.clone(), v.plain_json()))
                    .collect(),
            ),
        }
    }
}

/// Bytes as lowercase hex in serde (for [`AttrValue::Bytes`]).
mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn encode(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    pub(super) fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(b))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        if s.len() % 2 != 0 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(serde::de::Error::custom(
                "bytes: expected an even number of hex digits",
            ));
        }
        Ok((0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("checked hex"))
            .collect())
    }
}

impl Event {
    /// The typed value of field `key` when it is not a string (OTLP attributes only).
    pub fn typed(&self, key: &str) -> Option<&AttrValue> {
        self.typed.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The first label, if any.
    pub fn label(&self) -> Option<&str> {
        self.labels.first().map(String::as_str)
    }

    /// The first value of key `key` among [`Event::fields`].
    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A short name of the process for accounting: `process`, else `pid`, else `?`, prefixed by
    /// the host when the process string does not already end with it as Java's `pid@host` does
    /// (`manny/8201@manny` is avoided).
    pub fn process_key(&self) -> String {
        let proc = match (&self.process, self.pid) {
            (Some(p), _) => p.clone(),
            (None, Some(pid)) => pid.to_string(),
            (None, None) => "?".to_string(),
        };
        match &self.host {
            Some(h) if proc.rsplit_once('@').is_none_or(|(_, ph)| ph != h) => {
                format!("{h}/{proc}")
            }
            _ => proc,
        }
    }
}

/// Adds the [`EdgeKind::Nested`] edges of OTLP-derived events (ids `<SPANID>:start` and
/// `<SPANID>:end`, see `docs/otlp-mapping.md`): for every span whose start event has a causal
/// parent `<P>:start`, an edge from `<SPANID>:end` to `<P>:end` when both end events exist and the
/// child's end timestamp is not after the parent's.
///
/// # Why is this needed?
/// OTLP records a span's parent but not that the parent waited for it. Without these edges a
/// parent span's end has a single parent (its own start), so the critical path of a request that
/// fanned out and joined would skip the work it waited for. A child that ended after its parent
/// (fire-and-forget work) gets no such edge. Returns the number of edges added.
pub fn infer_span_nesting(events: &mut [Event]) -> usize {
    use std::collections::HashMap;
    // The first event with an id wins, as in `TaskGraph::build` (a duplicate delivered later
    // must not receive the edges: the graph drops it).
    let index: HashMap<&str, usize> = events
        .iter()
        .enumerate()
        .rev()
        .map(|(i, e)| (e.id.as_str(), i))
        .collect();
    let mut add: Vec<(usize, String)> = Vec::new();
    for e in events.iter() {
        let Some(span) = e.id.strip_suffix(":start") else {
            continue;
        };
        let Some(child_end) = index.get(format!("{span}:end").as_str()).copied() else {
            continue;
        };
        for p in e.parents.iter().filter(|p| p.kind == EdgeKind::Causal) {
            let Some(parent_span) = p.id.strip_suffix(":start") else {
                continue;
            };
            if parent_span == span {
                continue; // a span that names itself as parent: a cycle already, not nesting
            }
            let Some(parent_end) = index.get(format!("{parent_span}:end").as_str()).copied() else {
                continue;
            };
            let (Some(ct), Some(pt)) = (
                events[child_end].timestamp_ns,
                events[parent_end].timestamp_ns,
            ) else {
                continue;
            };
            if ct <= pt {
                add.push((parent_end, events[child_end].id.clone()));
            }
        }
    }
    let mut added = 0;
    // The parents each end event already has, built only for the ends that get edges (a set, so
    // a span with many children costs linear time).
    let mut existing: HashMap<usize, std::collections::HashSet<String>> = HashMap::new();
    for (pe, child) in add {
        let have = existing
            .entry(pe)
            .or_insert_with(|| events[pe].parents.iter().map(|p| p.id.clone()).collect());
        if have.insert(child.clone()) {
            events[pe].parents.push(Parent {
                id: child,
                kind: EdgeKind::Nested,
            });
            added += 1;
        }
    }
    added
}

/// The pid at the start of an X-Trace `ProcessID` (`8201@manny` → 8201; Java's
/// `ManagementFactory.getRuntimeMXBean().getName()` form), or of a plain number.
pub fn parse_pid(process: &str) -> Option<u32> {
    let digits: &str = process
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap_or("");
    if digits.is_empty() {
        None
    } else {
        digits.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_edges_only_for_children_that_ended_inside_their_parent() {
        let ev = |id: &str, ts: i64, parents: Vec<Parent>| Event {
            id: id.into(),
            timestamp_ns: Some(ts),
            parents,
            ..Event::default()
        };
        let mut evs = vec![
            ev("P:start", 0, vec![]),
            ev("A:start", 1, vec![Parent::causal("P:start")]),
            ev("A:end", 5, vec![Parent::causal("A:start")]),
            ev("B:start", 2, vec![Parent::causal("P:start")]),
            ev("B:end", 20, vec![Parent::causal("B:start")]), // outlives P
            ev("P:end", 10, vec![Parent::causal("P:start")]),
        ];
        assert_eq!(infer_span_nesting(&mut evs), 1);
        assert_eq!(
            evs[5].parents,
            vec![
                Parent::causal("P:start"),
                Parent {
                    id: "A:end".into(),
                    kind: EdgeKind::Nested
                }
            ]
        );
        // Idempotent.
        assert_eq!(infer_span_nesting(&mut evs), 0);
    }

    /// Regression: an OTLP span whose parent span id is its own span id got a `nested` edge from
    /// its end event to itself (a second, invented self-loop).
    #[test]
    fn a_span_that_is_its_own_parent_gets_no_nesting_edge() {
        let ev = |id: &str, ts: i64, parents: Vec<Parent>| Event {
            id: id.into(),
            timestamp_ns: Some(ts),
            parents,
            ..Event::default()
        };
        let mut evs = vec![
            ev("S:start", 0, vec![Parent::causal("S:start")]),
            ev("S:end", 5, vec![Parent::causal("S:start")]),
        ];
        assert_eq!(infer_span_nesting(&mut evs), 0);
        assert_eq!(evs[1].parents, vec![Parent::causal("S:start")]);
    }

    /// Regression: the host prefix was left out whenever the process string merely contained
    /// the host name, so service `backend` on host `b` was `backend`, like one on another host.
    #[test]
    fn the_host_is_left_out_only_when_the_process_names_it() {
        let e = |process: &str, host: &str| Event {
            process: Some(process.into()),
            host: Some(host.into()),
            ..Event::default()
        };
        assert_eq!(e("backend", "b").process_key(), "b/backend");
        assert_eq!(e("8201@manny", "manny").process_key(), "8201@manny");
        assert_eq!(e("8201@manny", "moe").process_key(), "moe/8201@manny");
    }

    #[test]
    fn pids_from_java_process_ids() {
        assert_eq!(parse_pid("8201@manny"), Some(8201));
        assert_eq!(parse_pid("77"), Some(77));
        assert_eq!(parse_pid("manny"), None);
    }
}
