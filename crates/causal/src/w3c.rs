//! W3C Trace Context (`traceparent`, `tracestate`) and W3C Baggage, and the mapping between a
//! 16-byte trace-id and an X-Trace TaskId.
//!
//! Follows W3C Recommendation "Trace Context" (2021-11-23), §3.2 `traceparent` and §3.3
//! `tracestate`, and W3C "Baggage" (Candidate Recommendation). `tracestate` and `baggage` are
//! carried opaquely: this library checks them ([`check_tracestate`], [`check_baggage`]) but
//! neither edits nor interprets them; it only passes them on.
//!
//! # trace-id ↔ TaskId (documented in `docs/causal-metadata.md`)
//! - trace-id → TaskId: when the first 8 bytes are zero (a 64-bit id padded as §3.2.2.3 suggests),
//!   the TaskId is the last 8 bytes (8-byte TaskId, X-Trace's usual length); otherwise it is the
//!   20-byte TaskId `trace-id ‖ 00 00 00 00`.
//! - TaskId → trace-id: a 20-byte TaskId gives its first 16 bytes; a 4-, 8- or 12-byte TaskId is
//!   left-padded with zeros to 16 bytes.
//!
//! So trace-id → TaskId → trace-id is the identity for every valid trace-id: a request entering
//! with a `traceparent` leaves with the same trace-id. TaskId → trace-id → TaskId is the identity
//! for 8-byte TaskIds and for 20-byte TaskIds ending in four zero bytes.

use std::fmt;

use crate::metadata::{MetadataError, OpId, TaskId, decode_hex_into};

/// The `sampled` bit of trace-flags (§3.2.2.5).
pub const FLAG_SAMPLED: u8 = 0x01;

/// Why a `traceparent` value could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceParentError {
    /// Not `version-traceid-parentid-flags` with 2, 32, 16 and 2 hex digits.
    #[error("traceparent {value:?} is not version-trace_id-parent_id-flags (2-32-16-2 hex digits)")]
    Shape {
        /// The value (at most 64 characters of it).
        value: String,
    },
    /// A field holds a non-hex character.
    #[error("reading traceparent field {field}")]
    Hex {
        /// Which field.
        field: &'static str,
        /// The hex error.
        source: MetadataError,
    },
    /// Version `ff` is forbidden (§3.2.2.1).
    #[error("traceparent version ff is invalid")]
    VersionFF,
    /// The trace-id is all zeros (§3.2.2.3).
    #[error("traceparent trace-id is all zeros")]
    ZeroTraceId,
    /// The parent-id is all zeros (§3.2.2.4).
    #[error("traceparent parent-id is all zeros")]
    ZeroParentId,
}

/// A parsed `traceparent` header.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// Version (00 is the only one defined; higher versions are parsed by their 00 prefix, §3.2.4).
    pub version: u8,
    /// The 16-byte trace-id, never all zeros.
    pub trace_id: [u8; 16],
    /// The 8-byte parent-id (the caller's span or event), never all zeros.
    pub parent_id: [u8; 8],
    /// trace-flags; bit 0 is `sampled`.
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` value (lowercase is what the spec emits; uppercase is accepted).
    ///
    /// For version 00 the value must be exactly 55 characters; for a higher version, extra fields
    /// after the flags (separated by `-`) are ignored, as §3.2.4 requires.
    ///
    /// # Errors
    /// [`TraceParentError`] naming the problem.
    pub fn parse(value: &str) -> Result<TraceParent, TraceParentError> {
        let v = value.trim();
        let shape = || TraceParentError::Shape {
            value: v.chars().take(64).collect(),
        };
        let b = v.as_bytes();
        if b.len() < 55 || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return Err(shape());
        }
        let mut ver = [0u8; 1];
        hex(&v[0..2], &mut ver, "version")?;
        if ver[0] == 0xFF {
            return Err(TraceParentError::VersionFF);
        }
        if (ver[0] == 0 && b.len() != 55) || (b.len() > 55 && b[55] != b'-') {
            return Err(shape());
        }
        let mut trace_id = [0u8; 16];
        hex(&v[3..35], &mut trace_id, "trace-id")?;
        let mut parent_id = [0u8; 8];
        hex(&v[36..52], &mut parent_id, "parent-id")?;
        let mut flags = [0u8; 1];
        hex(&v[53..55], &mut flags, "trace-flags")?;
        if trace_id == [0; 16] {
            return Err(TraceParentError::ZeroTraceId);
        }
        if parent_id == [0; 8] {
            return Err(TraceParentError::ZeroParentId);
        }
        Ok(TraceParent {
            version: ver[0],
            trace_id,
            parent_id,
            flags: flags[0],
        })
    }

    /// True when the sampled flag is set.
    pub fn sampled(&self) -> bool {
        self.flags & FLAG_SAMPLED != 0
    }

    /// The TaskId this trace-id maps to (see the module docs).
    pub fn task_id(&self) -> TaskId {
        task_from_trace_id(&self.trace_id).expect("trace-id checked non-zero")
    }

    /// The parent-id as an 8-byte OpId.
    pub fn parent_op(&self) -> OpId {
        OpId::new(u64::from_be_bytes(self.parent_id))
    }

    /// A version-00 `traceparent` for `task`, pointing at event `op`.
    pub fn from_task(task: TaskId, op: OpId, sampled: bool) -> TraceParent {
        TraceParent {
            version: 0,
            trace_id: trace_id_from_task(task),
            parent_id: op.value().to_be_bytes(),
            flags: if sampled { FLAG_SAMPLED } else { 0 },
        }
    }
}

impl fmt::Display for TraceParent {
    /// The header value, lowercase, always written as version 00 (§3.2.4: a caller that does not
    /// know a higher version sends 00).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("00-")?;
        for b in self.trace_id {
            write!(f, "{b:02x}")?;
        }
        f.write_str("-")?;
        for b in self.parent_id {
            write!(f, "{b:02x}")?;
        }
        write!(f, "-{:02x}", self.flags)
    }
}

impl fmt::Debug for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceParent({self})")
    }
}

fn hex(s: &str, out: &mut [u8], field: &'static str) -> Result<(), TraceParentError> {
    let n = decode_hex_into(s, out, 0).map_err(|source| TraceParentError::Hex { field, source })?;
    debug_assert_eq!(n, out.len());
    Ok(())
}

/// The TaskId a trace-id maps to; `None` for the all-zero (invalid) trace-id.
pub fn task_from_trace_id(trace_id: &[u8; 16]) -> Option<TaskId> {
    if trace_id[..8] == [0; 8] {
        TaskId::from_bytes(&trace_id[8..]).ok()
    } else {
        let mut b = [0u8; 20];
        b[..16].copy_from_slice(trace_id);
        TaskId::from_bytes(&b).ok()
    }
}

/// The trace-id a TaskId maps to.
pub fn trace_id_from_task(task: TaskId) -> [u8; 16] {
    let t = task.as_bytes();
    let mut out = [0u8; 16];
    if t.len() == 20 {
        out.copy_from_slice(&t[..16]);
    } else {
        out[16 - t.len()..].copy_from_slice(t);
    }
    out
}

/// Checks a `tracestate` value against §3.3.1 and returns it trimmed of optional whitespace, or
/// `None` when it must be dropped whole (§3.3.1.1: a vendor that cannot parse tracestate discards
/// it rather than fail the request).
///
/// Valid: a comma-separated list (optional spaces and tabs around commas, empty members allowed)
/// of 1 to 32 non-empty members `key=value` with distinct keys, each key a simple key
/// (`lcalpha *255(lcalpha / DIGIT / _ - * /)`) or `tenant@system` (tenant at most 241 characters
/// starting with `lcalpha / DIGIT`, system at most 14 starting with `lcalpha`), each value 1 to 256
/// characters of `%x20-2B / %x2D-3C / %x3E-7E` not ending in a space; at most 512 bytes in all.
pub fn check_tracestate(value: &str) -> Option<&str> {
    let v = value.trim_matches([' ', '\t']);
    if v.is_empty() || v.len() > 512 {
        return None;
    }
    let mut keys: Vec<&str> = Vec::new();
    for member in v.split(',') {
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        let (key, val) = member.split_once('=')?;
        if !tracestate_key(key) || !tracestate_value(val) || keys.contains(&key) {
            return None;
        }
        keys.push(key);
    }
    (!keys.is_empty() && keys.len() <= 32).then_some(v)
}

fn key_char(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'*' | b'/')
}

/// §3.3.1.3.1: `simple-key` or `multi-tenant-key`.
fn tracestate_key(key: &str) -> bool {
    let all = |s: &str| s.bytes().all(key_char);
    match key.split_once('@') {
        None => {
            key.len() <= 256
                && key.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
                && all(key)
        }
        Some((tenant, system)) => {
            tenant.len() <= 241
                && tenant
                    .as_bytes()
                    .first()
                    .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && all(tenant)
                && system.len() <= 14
                && system
                    .as_bytes()
                    .first()
                    .is_some_and(u8::is_ascii_lowercase)
                && all(system)
        }
    }
}

/// §3.3.1.3.2: `0*255(chr) nblk-chr`.
fn tracestate_value(val: &str) -> bool {
    let b = val.as_bytes();
    let nblk = |c: u8| matches!(c, 0x21..=0x2B | 0x2D..=0x3C | 0x3E..=0x7E);
    !b.is_empty()
        && b.len() <= 256
        && b.iter().all(|&c| c == b' ' || nblk(c))
        && nblk(b[b.len() - 1])
}

/// Checks a `baggage` value loosely (W3C Baggage §3.3.1: at most 8192 bytes, printable ASCII) and
/// returns it trimmed, or `None` when it must be dropped.
pub fn check_baggage(value: &str) -> Option<&str> {
    let v = value.trim();
    if v.is_empty() || v.len() > 8192 {
        return None;
    }
    v.bytes().all(|b| (0x20..=0x7E).contains(&b)).then_some(v)
}

/// Bytes of the published form of baggage ([`published_baggage`]) at most: what a thread's slot
/// holds and `causal:context` passes whole (the USDT string bound, `sightline_usdt::STR_MAX`, and
/// D's default `strsize` of 256 with its NUL; docs/causal-accounting.md).
pub const PUBLISHED_BAGGAGE_MAX: usize = 255;

/// Why a baggage item cannot be set ([`with_baggage_item`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BaggageError {
    /// The key is empty or not an HTTP token (W3C Baggage §3.3.1.1: `key = token`).
    #[error("baggage key {0:?} is not a token (RFC 7230 tchar characters, not empty)")]
    BadKey(String),
    /// The list with the item would exceed 8192 bytes (W3C Baggage §3.3.1.1 limits).
    #[error("baggage would be {0} bytes (at most 8192)")]
    TooLong(usize),
}

/// An HTTP token character (RFC 7230 §3.2.6 `tchar`).
fn tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// A W3C Baggage `baggage-octet` (§3.3.1.1): printable ASCII except space, `"`, `,`, `;`, backslash.
fn baggage_octet(c: u8) -> bool {
    matches!(c, 0x21 | 0x23..=0x2B | 0x2D..=0x3A | 0x3C..=0x5B | 0x5D..=0x7E)
}

/// The members of a baggage list as (key, raw value) with optional whitespace trimmed and
/// properties (after `;`) dropped; members without `=` are skipped.
fn baggage_members(list: &str) -> impl Iterator<Item = (&str, &str)> {
    list.split(',').filter_map(|m| {
        let m = m.split(';').next().unwrap_or("");
        let (k, v) = m.split_once('=')?;
        let (k, v) = (k.trim(), v.trim());
        (!k.is_empty()).then_some((k, v))
    })
}

/// Percent-decodes a baggage value (W3C Baggage §3.3.1.1: values are percent-encoded UTF-8);
/// an invalid escape is kept as it is.
fn percent_decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes `v` for a baggage value: every byte that is not a `baggage-octet`, and `%`.
pub fn percent_encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for &c in v.as_bytes() {
        if baggage_octet(c) && c != b'%' {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

/// The value of the first member of baggage `list` whose key is `key`, percent-decoded; `None`
/// when there is none.
pub fn baggage_item(list: &str, key: &str) -> Option<String> {
    baggage_members(list)
        .find(|(k, _)| *k == key)
        .map(|(_, v)| percent_decode(v))
}

/// `list` (absent: empty) with the members of key `key` removed and `key=value` appended, the
/// value percent-encoded ([`percent_encode`]); other members are kept as they were.
///
/// # Errors
/// [`BaggageError::BadKey`] when `key` is not a token; [`BaggageError::TooLong`] when the result
/// exceeds 8192 bytes.
pub fn with_baggage_item(
    list: Option<&str>,
    key: &str,
    value: &str,
) -> Result<String, BaggageError> {
    if key.is_empty() || !key.bytes().all(tchar) {
        return Err(BaggageError::BadKey(key.to_string()));
    }
    let mut out = String::new();
    for m in list.unwrap_or("").split(',') {
        let k = m.split(['=', ';']).next().unwrap_or("").trim();
        if m.trim().is_empty() || k == key {
            continue;
        }
        out.push_str(m.trim());
        out.push(',');
    }
    out.push_str(key);
    out.push('=');
    out.push_str(&percent_encode(value));
    if out.len() > 8192 {
        return Err(BaggageError::TooLong(out.len()));
    }
    Ok(out)
}

/// The form of baggage `list` that the library publishes for tracers (docs/causal-accounting.md):
/// `,key=value,key=value,` with whitespace and properties dropped and values as carried
/// (percent-encoded), so that a BPF program finds key `K`'s value after `",K="` up to the next
/// `,`. Whole members only, at most [`PUBLISHED_BAGGAGE_MAX`] bytes (members that do not fit are
/// left out, in order). Empty when `list` has no member.
pub fn published_baggage(list: &str) -> String {
    let mut out = String::new();
    for (k, v) in baggage_members(list) {
        let need = usize::from(out.is_empty()) + k.len() + 1 + v.len() + 1;
        if out.len() + need > PUBLISHED_BAGGAGE_MAX {
            continue;
        }
        if out.is_empty() {
            out.push(',');
        }
        out.push_str(k);
        out.push('=');
        out.push_str(v);
        out.push(',');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_the_spec_example() {
        let s = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let tp = TraceParent::parse(s).unwrap();
        assert!(tp.sampled());
        assert_eq!(tp.parent_op(), OpId::new(0x00f0_67aa_0ba9_02b7));
        assert_eq!(tp.to_string(), s);
        assert_eq!(TraceParent::parse(&s.to_uppercase()).unwrap(), tp);
        // trace-id → TaskId (20 bytes) → trace-id is the identity.
        let task = tp.task_id();
        assert_eq!(task.len(), 20);
        assert_eq!(task.to_hex(), "4BF92F3577B34DA6A3CE929D0E0E473600000000");
        assert_eq!(
            TraceParent::from_task(task, tp.parent_op(), true).to_string(),
            s
        );
    }

    #[test]
    fn sixty_four_bit_ids_map_to_8_byte_taskids() {
        let task = TaskId::from_u64(0x6944_B2AA_0D09_FE8A).unwrap();
        let tid = trace_id_from_task(task);
        assert_eq!(tid[..8], [0; 8]);
        assert_eq!(task_from_trace_id(&tid), Some(task));
        let tp = TraceParent::from_task(task, OpId::new(5), false);
        assert_eq!(
            tp.to_string(),
            "00-00000000000000006944b2aa0d09fe8a-0000000000000005-00"
        );
        assert_eq!(TraceParent::parse(&tp.to_string()).unwrap().task_id(), task);
    }

    #[test]
    fn rejects_invalid_values() {
        let z = "00-00000000000000000000000000000000-00f067aa0ba902b7-01";
        assert_eq!(TraceParent::parse(z), Err(TraceParentError::ZeroTraceId));
        let z = "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01";
        assert_eq!(TraceParent::parse(z), Err(TraceParentError::ZeroParentId));
        let f = "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(TraceParent::parse(f), Err(TraceParentError::VersionFF));
        assert!(matches!(
            TraceParent::parse("00-abc"),
            Err(TraceParentError::Shape { .. })
        ));
        let x = "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01";
        assert!(matches!(
            TraceParent::parse(x),
            Err(TraceParentError::Hex {
                field: "trace-id",
                ..
            })
        ));
        // Version 00 with extra fields is invalid; a future version with extra fields is fine.
        let extra = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz";
        assert!(matches!(
            TraceParent::parse(extra),
            Err(TraceParentError::Shape { .. })
        ));
        let future = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz";
        assert_eq!(TraceParent::parse(future).unwrap().version, 1);
    }

    #[test]
    fn baggage_items() {
        // W3C Baggage §3.3.1.4's example (with properties and whitespace).
        let l = "key1 = value1;property1;property2, key2 = value2, key3=value3; propertyKey=propertyValue";
        assert_eq!(baggage_item(l, "key2").as_deref(), Some("value2"));
        assert_eq!(baggage_item(l, "key3").as_deref(), Some("value3"));
        assert_eq!(baggage_item(l, "key4"), None);
        assert_eq!(
            published_baggage(l),
            ",key1=value1,key2=value2,key3=value3,"
        );
        assert_eq!(
            baggage_item("serverNode=DF%2028", "serverNode").as_deref(),
            Some("DF 28")
        );
        assert_eq!(baggage_item("k=50%zz", "k").as_deref(), Some("50%zz"));
        let set = with_baggage_item(Some("a=1;p, client=bob ,b=2"), "client", "ali ce,%").unwrap();
        assert_eq!(set, "a=1;p,b=2,client=ali%20ce%2C%25");
        assert_eq!(baggage_item(&set, "client").as_deref(), Some("ali ce,%"));
        assert_eq!(
            with_baggage_item(None, "client", "alice").unwrap(),
            "client=alice"
        );
        assert_eq!(
            with_baggage_item(None, "a b", "x"),
            Err(BaggageError::BadKey("a b".into()))
        );
        assert!(matches!(
            with_baggage_item(None, "k", &"x".repeat(9000)),
            Err(BaggageError::TooLong(9002))
        ));
        // Whole members only within PUBLISHED_BAGGAGE_MAX: the one that does not fit is left out.
        let big = format!("a={},b=2", "x".repeat(300));
        assert_eq!(published_baggage(&big), ",b=2,");
        let fill = format!("a={},b=22", "x".repeat(PUBLISHED_BAGGAGE_MAX - 4));
        assert_eq!(published_baggage(&fill).len(), PUBLISHED_BAGGAGE_MAX);
        assert_eq!(published_baggage(""), "");
    }

    #[test]
    fn tracestate_and_baggage_checks() {
        assert_eq!(
            check_tracestate(" rojo=00f067aa0ba902b7,congo=t61rcWkgMzE "),
            Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
        );
        assert_eq!(check_tracestate(&vec!["a=b"; 33].join(",")), None);
        // W3C's test suite (test/test.py, TraceContextTest): OWS, empty members, key grammar and
        // lengths, duplicate keys, member count.
        assert_eq!(
            check_tracestate("foo=1 \t , \t bar=2, \t baz=3"),
            Some("foo=1 \t , \t bar=2, \t baz=3")
        );
        assert_eq!(check_tracestate("\t foo=1 \t"), Some("foo=1"));
        assert_eq!(check_tracestate("foo=1,"), Some("foo=1,"));
        assert_eq!(check_tracestate(""), None);
        for bad in [
            "foo=1,foo=1",
            "foo=1,foo=2",
            "foo =1",
            "FOO=1",
            "foo.bar=1",
            "foo@=1,bar=2",
            "@foo=1,bar=2",
            "foo@@bar=1,bar=2",
            "foo@bar@baz=1,bar=2",
            "foo=",
            "foo=a\u{7f}",
            "foo=é",
            "foo=a,b",
            "foo=x=y",
        ] {
            assert_eq!(check_tracestate(bad), None, "{bad:?}");
        }
        let ok_keys = [
            "z".repeat(256),
            format!("{}@{}", "t".repeat(241), "v".repeat(14)),
        ];
        for k in &ok_keys {
            assert!(check_tracestate(&format!("{k}=1")).is_some(), "{k}");
        }
        let bad_keys = [
            "z".repeat(257),
            format!("{}@v", "t".repeat(242)),
            format!("t@{}", "v".repeat(15)),
        ];
        for k in &bad_keys {
            assert_eq!(check_tracestate(&format!("{k}=1")), None, "{k}");
        }
        let members: Vec<String> = (1..=32).map(|i| format!("bar{i:02}={i:02}")).collect();
        assert!(check_tracestate(&members.join(",")).is_some());
        assert_eq!(
            check_tracestate(&format!("{},bar33=33", members.join(","))),
            None
        );
        assert_eq!(
            check_baggage("userId=alice,serverNode=DF%2028"),
            Some("userId=alice,serverNode=DF%2028")
        );
        assert_eq!(check_baggage("bad\u{7}"), None);
    }
}
