//! Reports: one per event, as X-Trace reports them, with the 1.0 text codec and the native binary
//! codec.
//!
//! # The X-Trace Report 1.0 text format
//! As written and read by the Berkeley X-Trace library (`edu.berkeley.xtrace.reporting.Report`): a
//! header line `X-Trace Report ver 1.0`, then one `Key: value` line per value; a key may repeat
//! (one `Edge` line per parent). Readers split each line at its first `:` and trim both sides.
//! The format has no escaping, so [`Report::to_xtrace_text`] replaces CR and LF inside keys and
//! values by spaces and `:` inside keys by `_`, and writes a key/value whose key reads back as
//! `Edge` under the key `Edge_` (a reader would otherwise take its value for a parent, or reject
//! the whole report when it is not an OpId); the native binary format
//! ([`Report::encode_binary`]) is lossless. Both are specified in `docs/causal-wire.md`.
//!
//! # Units
//! [`Report::timestamp_ns`] is wall-clock time in ns since the Unix epoch; [`Report::hrt_ns`] is a
//! monotonic clock (`CLOCK_MONOTONIC`) in ns. Older agents wrote `Timestamp` in ms (the Hadoop data
//! in `shared/data/xtrace`) or as `seconds.millis` (the C++ library); [`parse_timestamp_ns`]
//! normalises all three to ns.

use std::fmt::Write as _;

use crate::metadata::{Metadata, MetadataError, OpId};
use crate::text::{trim, trim_start};

/// The first line of every X-Trace 1.0 text report.
pub const XTRACE_TEXT_HEADER: &str = "X-Trace Report ver 1.0";

/// The first four bytes of a native binary report (`\0SLR`; a text report starts with `X-Tr`).
pub const BINARY_MAGIC: [u8; 4] = [0x00, b'S', b'L', b'R'];

/// The native binary format version this crate writes and reads.
pub const BINARY_VERSION: u8 = 1;

/// Why a report could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// A text report whose first line is not `X-Trace Report ver 1.0`.
    #[error("X-Trace text report: first line is {found:?}, expected \"X-Trace Report ver 1.0\"")]
    MissingHeader {
        /// The first line (at most 64 characters of it).
        found: String,
    },
    /// A text report line without a `:`.
    #[error("X-Trace text report line {line}: no ':' separating key and value")]
    BadLine {
        /// 1-based line number.
        line: usize,
    },
    /// No `X-Trace` key.
    #[error("report has no X-Trace metadata")]
    MissingMetadata,
    /// The `X-Trace` value does not parse.
    #[error("reading report X-Trace metadata {value:?}")]
    BadMetadata {
        /// The value.
        value: String,
        /// The parse error.
        source: MetadataError,
    },
    /// An `Edge` value does not parse as an OpId.
    #[error("reading report Edge {value:?}")]
    BadEdge {
        /// The value.
        value: String,
        /// The parse error.
        source: MetadataError,
    },
    /// A report that is not UTF-8 text.
    #[error("report is not UTF-8 (byte {offset})")]
    NotUtf8 {
        /// Offset of the first invalid byte.
        offset: usize,
    },
    /// A payload that is neither a text report nor a native binary report.
    #[error(
        "payload starts with {prefix:02X?}: neither an X-Trace text report nor a native binary report"
    )]
    UnknownFormat {
        /// Up to the first four bytes.
        prefix: Vec<u8>,
    },
    /// A native binary report of another version.
    #[error("native binary report version {version} is not supported (only {BINARY_VERSION})")]
    BinaryVersion {
        /// The version byte found.
        version: u8,
    },
    /// A native binary report ending inside a field.
    #[error("native binary report truncated in {field} at byte {offset}")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Offset where more bytes were needed.
        offset: usize,
    },
    /// A native binary report with bytes after its last field.
    #[error("native binary report has {extra} trailing byte(s)")]
    TrailingBytes {
        /// Count of extra bytes.
        extra: usize,
    },
    /// A native binary string field that is not UTF-8.
    #[error("native binary report field {field} is not UTF-8")]
    FieldNotUtf8 {
        /// The field.
        field: &'static str,
    },
    /// A native binary edge whose width is not 4 or 8.
    #[error("native binary report edge {index} has width {width} (must be 4 or 8)")]
    EdgeWidth {
        /// Edge index.
        index: usize,
        /// Width found.
        width: u8,
    },
}

/// One event's report: X-Trace's fields plus any key/values.
///
/// Field names follow the X-Trace report keys: `X-Trace` ([`Report::metadata`]: TaskId and this
/// event's OpId), `Edge` (one per parent), `Agent`, `Label`, `Host`, `ProcessID`, `ThreadID`,
/// `ThreadName`, `Timestamp`, `HRT`.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// `X-Trace`: the task and this event's OpId.
    pub metadata: Metadata,
    /// `Edge`: the OpIds of this event's parents, in order (several for a join). Reports from the
    /// Berkeley library may hold a zero OpId meaning "no parent"; it is kept as given.
    pub edges: Vec<OpId>,
    /// `Agent`: the layer or component that reported (e.g. `frontend`, `DataNode`).
    pub agent: Option<String>,
    /// `Label`: what happened.
    pub label: Option<String>,
    /// `Host`: host name.
    pub host: Option<String>,
    /// `ProcessID`: this library writes the decimal pid; Java agents wrote `pid@host`.
    pub process_id: Option<String>,
    /// `ThreadID`: this library writes the kernel thread id (tid, `gettid(2)`).
    pub thread_id: Option<u64>,
    /// `ThreadName`.
    pub thread_name: Option<String>,
    /// `Timestamp`: wall-clock time, ns since the Unix epoch.
    pub timestamp_ns: Option<u64>,
    /// `HRT`: monotonic clock, ns (`CLOCK_MONOTONIC`; comparable within one host).
    pub hrt_ns: Option<u64>,
    /// Other key/values in order; keys may repeat.
    pub fields: Vec<(String, String)>,
}

impl Report {
    /// A report with only metadata.
    pub fn new(metadata: Metadata) -> Report {
        Report {
            metadata,
            edges: Vec::new(),
            agent: None,
            label: None,
            host: None,
            process_id: None,
            thread_id: None,
            thread_name: None,
            timestamp_ns: None,
            hrt_ns: None,
            fields: Vec::new(),
        }
    }

    /// The parents, skipping zero OpIds (which old agents wrote to mean "no parent").
    pub fn parents(&self) -> impl Iterator<Item = OpId> + '_ {
        self.edges.iter().copied().filter(|e| !e.is_zero())
    }

    /// The first value of a key among [`Report::fields`].
    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Builds a report from key/value pairs as found in a text report or an X-Trace JSON export
    /// (where each key maps to a list of values: pass one pair per value).
    ///
    /// Standard keys fill their fields; the first `X-Trace` value is the metadata. A standard key
    /// seen again, or a numeric key (`ThreadID`, `Timestamp`, `HRT`) whose value does not parse,
    /// goes to [`Report::fields`] so nothing is lost. `Timestamp` is normalised by
    /// [`parse_timestamp_ns`]. The JSON exports' `version` key is not a report key: skip it.
    ///
    /// # Errors
    /// [`ReportError::MissingMetadata`], [`ReportError::BadMetadata`], [`ReportError::BadEdge`].
    pub fn from_pairs<K, V, I>(pairs: I) -> Result<Report, ReportError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
        I: IntoIterator<Item = (K, V)>,
    {
        let mut b = PairReader::default();
        for (k, v) in pairs {
            b.pair(k.as_ref(), v.as_ref())?;
        }
        b.finish()
    }

    /// The X-Trace Report 1.0 text form: header, then `Key: value` lines, each ending in `\n`.
    ///
    /// Order: `X-Trace`, `Agent`, `Label`, `Host`, `ProcessID`, `ThreadID`, `ThreadName`,
    /// `Timestamp` (ns), `HRT` (ns), one `Edge` per parent, then [`Report::fields`].
    pub fn to_xtrace_text(&self) -> String {
        let mut s = String::with_capacity(256);
        self.write_xtrace_text(&mut s);
        s
    }

    /// Appends the text form to `out` (see [`Report::to_xtrace_text`]).
    pub fn write_xtrace_text(&self, out: &mut String) {
        out.push_str(XTRACE_TEXT_HEADER);
        out.push_str("\nX-Trace: ");
        crate::metadata::push_hex_upper(out, &self.metadata.to_binary());
        out.push('\n');
        let strs = [
            ("Agent", &self.agent),
            ("Label", &self.label),
            ("Host", &self.host),
            ("ProcessID", &self.process_id),
        ];
        for (k, v) in strs {
            if let Some(v) = v {
                push_line(out, k, v);
            }
        }
        if let Some(t) = self.thread_id {
            let _ = writeln!(out, "ThreadID: {t}");
        }
        if let Some(v) = &self.thread_name {
            push_line(out, "ThreadName", v);
        }
        if let Some(t) = self.timestamp_ns {
            let _ = writeln!(out, "Timestamp: {t}");
        }
        if let Some(t) = self.hrt_ns {
            let _ = writeln!(out, "HRT: {t}");
        }
        for e in &self.edges {
            let _ = writeln!(out, "Edge: {e}");
        }
        for (k, v) in &self.fields {
            if k.trim() == "Edge" {
                push_line(out, "Edge_", v);
            } else {
                push_line(out, k, v);
            }
        }
    }

    /// Parses an X-Trace Report 1.0 text report (`\n` or `\r\n` line ends; blank lines ignored).
    ///
    /// Each line is split at its first `:` and both sides are trimmed (whitespace as
    /// `char::is_whitespace`), then read as [`Report::from_pairs`] reads a pair. This is the one
    /// reader of the text format in the workspace (the collector decodes through it), so it reads
    /// in one pass without collecting the pairs, and trims ASCII without Unicode tables.
    ///
    /// # Errors
    /// [`ReportError::MissingHeader`], [`ReportError::BadLine`], then those of
    /// [`Report::from_pairs`].
    pub fn parse_xtrace_text(text: &str) -> Result<Report, ReportError> {
        let bytes = text.as_bytes();
        let header_end = bytes
            .iter()
            .position(|&c| c == b'\n')
            .unwrap_or(bytes.len());
        let first = trim(&text[..header_end]);
        if first != XTRACE_TEXT_HEADER {
            return Err(ReportError::MissingHeader {
                found: first.chars().take(64).collect(),
            });
        }
        let mut b = PairReader::default();
        // One scan per line finds both its end (`\n`; a `\r` before it is trimmed like any other
        // whitespace) and its first `:`. Both are ASCII, so every index is a character boundary.
        let (mut pos, mut line_no) = (header_end + 1, 1);
        while pos < bytes.len() {
            let start = pos;
            let mut colon = None;
            while pos < bytes.len() && bytes[pos] != b'\n' {
                if bytes[pos] == b':' && colon.is_none() {
                    colon = Some(pos);
                }
                pos += 1;
            }
            let end = pos;
            pos += 1;
            line_no += 1;
            match colon {
                Some(c) => b.pair(trim(&text[start..c]), trim(&text[c + 1..end]))?,
                None if trim(&text[start..end]).is_empty() => {}
                None => return Err(ReportError::BadLine { line: line_no }),
            }
        }
        b.finish()
    }

    /// Appends the native binary form to `out` (layout in `docs/causal-wire.md`).
    pub fn encode_binary(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&BINARY_MAGIC);
        out.push(BINARY_VERSION);
        let mut present = 0u8;
        let bits = [
            self.agent.is_some(),
            self.label.is_some(),
            self.host.is_some(),
            self.process_id.is_some(),
            self.thread_id.is_some(),
            self.thread_name.is_some(),
            self.timestamp_ns.is_some(),
            self.hrt_ns.is_some(),
        ];
        for (i, b) in bits.iter().enumerate() {
            if *b {
                present |= 1 << i;
            }
        }
        out.push(present);
        out.push(self.metadata.binary_len() as u8);
        self.metadata.write_binary(out);
        put_varint(out, self.edges.len() as u64);
        for e in &self.edges {
            out.push(e.len() as u8);
            e.write_bytes(out);
        }
        for v in [self.timestamp_ns, self.hrt_ns, self.thread_id]
            .into_iter()
            .flatten()
        {
            out.extend_from_slice(&v.to_be_bytes());
        }
        for s in [
            &self.agent,
            &self.label,
            &self.host,
            &self.process_id,
            &self.thread_name,
        ]
        .into_iter()
        .flatten()
        {
            put_str(out, s);
        }
        put_varint(out, self.fields.len() as u64);
        for (k, v) in &self.fields {
            put_str(out, k);
            put_str(out, v);
        }
    }

    /// The native binary form as a new buffer.
    pub fn to_binary(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(128);
        self.encode_binary(&mut v);
        v
    }

    /// Decodes one native binary report; the whole input must be that report.
    ///
    /// # Errors
    /// [`ReportError::UnknownFormat`] (bad magic), [`ReportError::BinaryVersion`],
    /// [`ReportError::Truncated`], [`ReportError::BadMetadata`], [`ReportError::EdgeWidth`],
    /// [`ReportError::FieldNotUtf8`], [`ReportError::TrailingBytes`].
    pub fn decode_binary(bytes: &[u8]) -> Result<Report, ReportError> {
        let mut c = Cursor { b: bytes, off: 0 };
        if c.take(4, "magic")? != BINARY_MAGIC {
            return Err(ReportError::UnknownFormat {
                prefix: bytes[..4].to_vec(),
            });
        }
        let version = c.u8("version")?;
        if version != BINARY_VERSION {
            return Err(ReportError::BinaryVersion { version });
        }
        let present = c.u8("presence")?;
        let has = |i: u8| present & (1 << i) != 0;
        let mlen = c.u8("metadata length")? as usize;
        let mbytes = c.take(mlen, "metadata")?;
        let metadata =
            Metadata::parse_binary(mbytes).map_err(|source| ReportError::BadMetadata {
                value: crate::metadata::hex_upper(mbytes),
                source,
            })?;
        let mut r = Report::new(metadata);
        let n = c.varint("edge count")?;
        for index in 0..n as usize {
            let width = c.u8("edge width")?;
            if width != 4 && width != 8 {
                return Err(ReportError::EdgeWidth { index, width });
            }
            let b = c.take(width as usize, "edge")?;
            r.edges.push(OpId::from_bytes(b).expect("width checked"));
        }
        // In the order of the layout (`docs/causal-wire.md`); the bit is each field's in `present`.
        r.timestamp_ns = has(6).then(|| c.u64("Timestamp")).transpose()?;
        r.hrt_ns = has(7).then(|| c.u64("HRT")).transpose()?;
        r.thread_id = has(4).then(|| c.u64("ThreadID")).transpose()?;
        r.agent = has(0).then(|| c.string("Agent")).transpose()?;
        r.label = has(1).then(|| c.string("Label")).transpose()?;
        r.host = has(2).then(|| c.string("Host")).transpose()?;
        r.process_id = has(3).then(|| c.string("ProcessID")).transpose()?;
        r.thread_name = has(5).then(|| c.string("ThreadName")).transpose()?;
        let n = c.varint("field count")?;
        for _ in 0..n {
            let k = c.string("field key")?;
            let v = c.string("field value")?;
            r.fields.push((k, v));
        }
        if c.off != bytes.len() {
            return Err(ReportError::TrailingBytes {
                extra: bytes.len() - c.off,
            });
        }
        Ok(r)
    }

    /// Decodes a payload in either format, told apart by its first bytes: [`BINARY_MAGIC`] for the
    /// native format, `X-Trace Report ver 1.0` (after optional whitespace) for text.
    ///
    /// # Errors
    /// [`ReportError::UnknownFormat`], [`ReportError::NotUtf8`], then those of the format's decoder.
    pub fn decode(payload: &[u8]) -> Result<Report, ReportError> {
        if payload.starts_with(&BINARY_MAGIC) {
            return Report::decode_binary(payload);
        }
        let trimmed = payload.trim_ascii_start();
        if trimmed.starts_with(b"X-Trace") {
            let text = std::str::from_utf8(payload).map_err(|e| ReportError::NotUtf8 {
                offset: e.valid_up_to(),
            })?;
            return Report::parse_xtrace_text(trim_start(text));
        }
        Err(ReportError::UnknownFormat {
            prefix: payload[..payload.len().min(4)].to_vec(),
        })
    }
}

/// Parses a `Timestamp` value into ns since the Unix epoch.
///
/// Accepts `seconds.fraction` (the C++ library's `%ld.%03d`), integer milliseconds (values below
/// 10^14, as in the Hadoop reports: 10^14 ms is the year 5138, 10^14 ns is 1970-01-02) and integer
/// nanoseconds (this library). Returns `None` for anything else.
pub fn parse_timestamp_ns(s: &str) -> Option<u64> {
    let s = trim(s);
    if let Some(dot) = s.bytes().position(|c| c == b'.') {
        let (sec, frac) = (&s[..dot], &s[dot + 1..]);
        let sec: u64 = sec.parse().ok()?;
        if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let scale = 10u64.pow(9 - frac.len() as u32);
        let frac: u64 = frac.parse().ok()?;
        return sec.checked_mul(1_000_000_000)?.checked_add(frac * scale);
    }
    let v: u64 = s.parse().ok()?;
    if v < 100_000_000_000_000 {
        v.checked_mul(1_000_000)
    } else {
        Some(v)
    }
}

/// Reads key/value pairs into a report, with the rules of [`Report::from_pairs`] (shared by it
/// and [`Report::parse_xtrace_text`]).
#[derive(Default)]
struct PairReader {
    metadata: Option<Metadata>,
    edges: Vec<OpId>,
    agent: Option<String>,
    label: Option<String>,
    host: Option<String>,
    process_id: Option<String>,
    thread_id: Option<u64>,
    thread_name: Option<String>,
    timestamp_ns: Option<u64>,
    hrt_ns: Option<u64>,
    fields: Vec<(String, String)>,
}

impl PairReader {
    /// Takes one key/value: a standard key fills its field the first time it has a usable
    /// value; anything else, or a standard key again, goes to the fields.
    fn pair(&mut self, k: &str, v: &str) -> Result<(), ReportError> {
        // By length first: most keys are then told apart without comparing any text.
        let taken = match (k.len(), k) {
            (7, "X-Trace") if self.metadata.is_none() => {
                let md = Metadata::parse_text(v).map_err(|source| ReportError::BadMetadata {
                    value: v.to_string(),
                    source,
                })?;
                self.metadata = Some(md);
                true
            }
            (4, "Edge") => {
                let e = OpId::parse_hex(v).map_err(|source| ReportError::BadEdge {
                    value: v.to_string(),
                    source,
                })?;
                self.edges.push(e);
                true
            }
            (5, "Agent") => set_once(&mut self.agent, || Some(v.to_string())),
            (5, "Label") => set_once(&mut self.label, || Some(v.to_string())),
            (4, "Host") => set_once(&mut self.host, || Some(v.to_string())),
            (9, "ProcessID") => set_once(&mut self.process_id, || Some(v.to_string())),
            (10, "ThreadName") => set_once(&mut self.thread_name, || Some(v.to_string())),
            (8, "ThreadID") => set_once(&mut self.thread_id, || trim(v).parse().ok()),
            (9, "Timestamp") => set_once(&mut self.timestamp_ns, || parse_timestamp_ns(v)),
            (3, "HRT") => set_once(&mut self.hrt_ns, || trim(v).parse().ok()),
            _ => false,
        };
        if !taken {
            self.fields.push((k.to_string(), v.to_string()));
        }
        Ok(())
    }

    /// The report read.
    ///
    /// # Errors
    /// [`ReportError::MissingMetadata`] when no `X-Trace` key was seen.
    fn finish(self) -> Result<Report, ReportError> {
        Ok(Report {
            metadata: self.metadata.ok_or(ReportError::MissingMetadata)?,
            edges: self.edges,
            agent: self.agent,
            label: self.label,
            host: self.host,
            process_id: self.process_id,
            thread_id: self.thread_id,
            thread_name: self.thread_name,
            timestamp_ns: self.timestamp_ns,
            hrt_ns: self.hrt_ns,
            fields: self.fields,
        })
    }
}

/// Fills an empty `slot` with `value()` when that is `Some`; true when it did.
fn set_once<T>(slot: &mut Option<T>, value: impl FnOnce() -> Option<T>) -> bool {
    if slot.is_some() {
        return false;
    }
    *slot = value();
    slot.is_some()
}

fn push_line(out: &mut String, k: &str, v: &str) {
    for c in k.chars() {
        out.push(match c {
            '\r' | '\n' => ' ',
            ':' => '_',
            c => c,
        });
    }
    out.push_str(": ");
    for c in v.trim().chars() {
        out.push(if c == '\r' || c == '\n' { ' ' } else { c });
    }
    out.push('\n');
}

/// Appends `v` as an unsigned LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

struct Cursor<'a> {
    b: &'a [u8],
    off: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], ReportError> {
        if self.b.len() - self.off < n {
            return Err(ReportError::Truncated {
                field,
                offset: self.b.len(),
            });
        }
        let s = &self.b[self.off..self.off + n];
        self.off += n;
        Ok(s)
    }
    fn u8(&mut self, field: &'static str) -> Result<u8, ReportError> {
        Ok(self.take(1, field)?[0])
    }
    fn u64(&mut self, field: &'static str) -> Result<u64, ReportError> {
        Ok(u64::from_be_bytes(
            self.take(8, field)?.try_into().expect("8 bytes"),
        ))
    }
    fn varint(&mut self, field: &'static str) -> Result<u64, ReportError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8(field)?;
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(ReportError::Truncated {
            field,
            offset: self.off,
        })
    }
    fn string(&mut self, field: &'static str) -> Result<String, ReportError> {
        let n = self.varint(field)?;
        let n = usize::try_from(n).map_err(|_| ReportError::Truncated {
            field,
            offset: self.off,
        })?;
        let b = self.take(n, field)?;
        String::from_utf8(b.to_vec()).map_err(|_| ReportError::FieldNotUtf8 { field })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::TaskId;

    fn sample() -> Report {
        let md = Metadata::new(
            TaskId::from_u64(0x6944_B2AA_0D09_FE8A).unwrap(),
            OpId::new(0xEDA1_05F6_B0ED_1BD9),
        );
        let mut r = Report::new(md);
        r.edges = vec![OpId::new(0x24E4_4608_F9C6_A944), OpId::new4(0xDEAD_BEEF)];
        r.agent = Some("frontend".into());
        r.label = Some("join".into());
        r.host = Some("manny".into());
        r.process_id = Some("8017".into());
        r.thread_id = Some(7);
        r.thread_name = Some("Service Thread".into());
        r.timestamp_ns = Some(1_384_989_789_057_000_123);
        r.hrt_ns = Some(791_526_908_438_914);
        r.fields = vec![
            ("GcName".into(), "PS Scavenge".into()),
            ("Tag".into(), "a".into()),
            ("Tag".into(), "b".into()),
        ];
        r
    }

    #[test]
    fn text_format_exact() {
        let text = sample().to_xtrace_text();
        assert_eq!(
            text,
            "X-Trace Report ver 1.0\nX-Trace: 196944B2AA0D09FE8AEDA105F6B0ED1BD9\nAgent: frontend\n\
             Label: join\nHost: manny\nProcessID: 8017\nThreadID: 7\nThreadName: Service Thread\n\
             Timestamp: 1384989789057000123\nHRT: 791526908438914\nEdge: 24E44608F9C6A944\n\
             Edge: DEADBEEF\nGcName: PS Scavenge\nTag: a\nTag: b\n"
        );
        assert_eq!(Report::parse_xtrace_text(&text).unwrap(), sample());
    }

    #[test]
    fn binary_round_trip_and_detection() {
        let r = sample();
        let bin = r.to_binary();
        assert_eq!(&bin[..4], &BINARY_MAGIC);
        assert_eq!(Report::decode_binary(&bin).unwrap(), r);
        assert_eq!(Report::decode(&bin).unwrap(), r);
        assert_eq!(Report::decode(r.to_xtrace_text().as_bytes()).unwrap(), r);
        for cut in 0..bin.len() {
            assert!(Report::decode_binary(&bin[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = bin.clone();
        long.push(0);
        assert_eq!(
            Report::decode_binary(&long),
            Err(ReportError::TrailingBytes { extra: 1 })
        );
    }

    #[test]
    fn text_newlines_are_flattened() {
        let mut r = sample();
        r.label = Some("two\nlines".into());
        let back = Report::parse_xtrace_text(&r.to_xtrace_text()).unwrap();
        assert_eq!(back.label.as_deref(), Some("two lines"));
    }

    #[test]
    fn field_named_edge_is_not_read_back_as_a_parent() {
        let mut r = sample();
        r.fields = vec![
            ("Edge".into(), "not an op id".into()),
            (" Edge".into(), "24E44608F9C6A945".into()),
        ];
        let back = Report::parse_xtrace_text(&r.to_xtrace_text()).unwrap();
        assert_eq!(back.edges, r.edges);
        assert_eq!(
            back.fields,
            [
                ("Edge_".into(), "not an op id".into()),
                ("Edge_".into(), "24E44608F9C6A945".into())
            ]
        );
        // The binary form keeps the key as it was.
        assert_eq!(Report::decode_binary(&r.to_binary()).unwrap(), r);
    }

    #[test]
    fn timestamps_normalised() {
        assert_eq!(
            parse_timestamp_ns("1384989788371"),
            Some(1_384_989_788_371_000_000)
        );
        assert_eq!(
            parse_timestamp_ns("1384989788.371"),
            Some(1_384_989_788_371_000_000)
        );
        assert_eq!(
            parse_timestamp_ns("1384989788371000123"),
            Some(1_384_989_788_371_000_123)
        );
        assert_eq!(parse_timestamp_ns("soon"), None);
    }

    const MD: &str = "X-Trace: 19438AE15464ED9BC37EF82CE98B84355D\n";

    fn parse(body: &str) -> Result<Report, ReportError> {
        Report::decode(format!("{XTRACE_TEXT_HEADER}\n{body}").as_bytes())
    }

    fn fields(r: &Report) -> Vec<(&str, &str)> {
        r.fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    #[test]
    fn text_lines_split_at_the_first_colon_and_trim_unicode_whitespace() {
        let r = parse(&format!(
            "{MD}\u{a0}Label\u{2003}: \u{85}spaced\u{a0}\n\u{3000}\n\x0bAgent\x0b:\x0cv\x0c\r\n\r\n\
             Key: a: b: c\n:empty key\nempty value:\nx-trace: lower key\nedge: 1\nLabel: é\n"
        ))
        .unwrap();
        assert_eq!(r.label.as_deref(), Some("spaced"));
        assert_eq!(r.agent.as_deref(), Some("v"));
        // Keys are case-sensitive: `x-trace` and `edge` are plain fields.
        assert_eq!(
            fields(&r),
            [
                ("Key", "a: b: c"),
                ("", "empty key"),
                ("empty value", ""),
                ("x-trace", "lower key"),
                ("edge", "1"),
                ("Label", "é"),
            ]
        );
    }

    #[test]
    fn text_standard_keys_take_their_first_usable_value() {
        let r = parse(&format!(
            "{MD}X-Trace: 19438AE15464ED9BC37EF82CE98B84355E\nAgent: x\nAgent: y\n\
             ThreadID: nope\nThreadID: 7\nThreadID: 8\nHRT: +5\nHRT: -1\n\
             Timestamp: 99999999999999999999\nTimestamp: 1.5\nTimestamp: 1384989801450\n"
        ))
        .unwrap();
        assert_eq!(r.metadata.op_id(), OpId::new(0x7EF8_2CE9_8B84_355D));
        assert_eq!(r.agent.as_deref(), Some("x"));
        assert_eq!(r.thread_id, Some(7));
        // `u64::from_str` takes a leading `+`.
        assert_eq!(r.hrt_ns, Some(5));
        assert_eq!(r.timestamp_ns, Some(1_500_000_000));
        assert_eq!(
            fields(&r),
            [
                ("X-Trace", "19438AE15464ED9BC37EF82CE98B84355E"),
                ("Agent", "y"),
                ("ThreadID", "nope"),
                ("ThreadID", "8"),
                ("HRT", "-1"),
                ("Timestamp", "99999999999999999999"),
                ("Timestamp", "1384989801450"),
            ]
        );
    }

    #[test]
    fn text_edges_keep_their_width_and_bad_ones_are_named() {
        let r = parse(&format!(
            "{MD}Edge: 7ef82ce9\nEdge: 00000000\nEdge:  7EF82CE98B84355D \n"
        ))
        .unwrap();
        assert_eq!(
            r.edges,
            [
                OpId::new4(0x7EF8_2CE9),
                OpId::new4(0),
                OpId::new(0x7EF8_2CE9_8B84_355D)
            ]
        );
        assert_eq!(r.parents().count(), 2);
        for bad in ["7EF82CE98B84355", "7EF82CE98B84355DAA", "xyz", ""] {
            match parse(&format!("{MD}Edge: {bad}\n")) {
                Err(ReportError::BadEdge { value, .. }) => assert_eq!(value, bad),
                other => panic!("Edge {bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn text_header_variants() {
        for ok in [
            format!("  \n{XTRACE_TEXT_HEADER}\n{MD}"),
            format!("{XTRACE_TEXT_HEADER}  \n{MD}"),
            format!("{XTRACE_TEXT_HEADER}\r\n{MD}"),
            format!("{XTRACE_TEXT_HEADER}\nX-Trace: 19438ae15464ed9bc37ef82ce98b84355d"),
        ] {
            let r = Report::decode(ok.as_bytes()).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
            assert_eq!(r.metadata.to_text(), "19438AE15464ED9BC37EF82CE98B84355D");
        }
        assert_eq!(
            Report::decode(format!("X-Trace Report ver 1.1\n{MD}").as_bytes()),
            Err(ReportError::MissingHeader {
                found: "X-Trace Report ver 1.1".into()
            })
        );
        assert_eq!(
            parse("Agent: no metadata\n"),
            Err(ReportError::MissingMetadata)
        );
        assert_eq!(parse(""), Err(ReportError::MissingMetadata));
        assert!(matches!(
            parse("X-Trace:\n"),
            Err(ReportError::BadMetadata { .. })
        ));
        assert_eq!(
            parse(&format!("{MD}\nno colon here\n")),
            Err(ReportError::BadLine { line: 4 })
        );
        let mut bad = format!("{XTRACE_TEXT_HEADER}\n{MD}Label: ").into_bytes();
        let offset = bad.len();
        bad.extend_from_slice(&[0xff, 0xfe, b'\n']);
        assert_eq!(Report::decode(&bad), Err(ReportError::NotUtf8 { offset }));
    }

    #[test]
    fn errors_are_typed() {
        assert!(matches!(
            Report::parse_xtrace_text("hello\n"),
            Err(ReportError::MissingHeader { .. })
        ));
        assert_eq!(
            Report::parse_xtrace_text("X-Trace Report ver 1.0\nLabel: x\n"),
            Err(ReportError::MissingMetadata)
        );
        assert_eq!(
            Report::parse_xtrace_text("X-Trace Report ver 1.0\nno colon\n"),
            Err(ReportError::BadLine { line: 2 })
        );
        assert!(matches!(
            Report::parse_xtrace_text("X-Trace Report ver 1.0\nX-Trace: 19\n"),
            Err(ReportError::BadMetadata { .. })
        ));
        assert!(matches!(
            Report::decode(b"GET / HTTP/1.1"),
            Err(ReportError::UnknownFormat { .. })
        ));
    }
}
