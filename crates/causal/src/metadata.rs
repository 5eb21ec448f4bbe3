//! X-Trace v1 metadata: the TaskId, the OpId of the latest event, and the options block.
//!
//! # Layout (X-Trace metadata version 1)
//!
//! Follows the X-Trace specification (Fonseca, Porter et al., "X-Trace: A Pervasive Network Tracing
//! Framework", NSDI 2007, and the X-Trace metadata specification rev. 2) as implemented by the
//! Berkeley reference library (`edu.berkeley.xtrace.XTraceMetadata`):
//!
//! ```text
//! byte 0       flags: bits 7..4 version (1), bit 3 OpId length (0: 4 bytes, 1: 8 bytes),
//!                     bit 2 options present, bits 1..0 TaskId length (00: 4, 01: 8, 10: 12, 11: 20)
//! 1..          TaskId (4, 8, 12 or 20 bytes)
//! ..           OpId (4 or 8 bytes)
//! ..           only when bit 2 is set: one byte, the total length L of the options that follow,
//!              then L bytes of options, each `type:u8 length:u8 payload[length]`
//! ```
//!
//! The text form (the value of an `X-Trace` report key or HTTP header) is the binary form in
//! hexadecimal: [`Metadata::to_text`] emits uppercase, [`Metadata::parse_text`] accepts either case.
//! An all-zero TaskId marks invalid metadata in X-Trace; it is rejected by every parser here
//! ([`MetadataError::ZeroTaskId`]) and so can never be propagated. Options are carried forward byte
//! for byte, including types this library does not know. See `docs/causal-metadata.md`.

use std::fmt;
use std::sync::Arc;

/// The version number this module reads and writes in the flags byte's high nibble.
pub const VERSION: u8 = 1;

/// Longest binary metadata: flags + 20-byte TaskId + 8-byte OpId + options length byte + 255 bytes.
pub const MAX_BINARY_LEN: usize = 1 + 20 + 8 + 1 + 255;

const FLAG_OPID_8: u8 = 0x08;
const FLAG_OPTIONS: u8 = 0x04;
const FLAG_TASKID_MASK: u8 = 0x03;

/// Why metadata (binary, text, or a part of it) could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// The input was empty.
    #[error("X-Trace metadata is empty")]
    Empty,
    /// The flags byte names a version other than 1.
    #[error(
        "X-Trace metadata version {version} is not supported (flags byte {flags:#04x}; only version 1)"
    )]
    UnsupportedVersion {
        /// The version nibble found.
        version: u8,
        /// The whole flags byte.
        flags: u8,
    },
    /// The input ends before the TaskId, OpId or options the flags byte announces.
    #[error(
        "X-Trace metadata truncated: flags {flags:#04x} need at least {needed} bytes, got {got}"
    )]
    Truncated {
        /// The flags byte.
        flags: u8,
        /// Bytes needed so far.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// Bytes follow the last field the flags byte announces.
    #[error("X-Trace metadata has {extra} trailing byte(s) after {expected} bytes")]
    TrailingBytes {
        /// Length the flags and option length imply.
        expected: usize,
        /// Extra bytes present.
        extra: usize,
    },
    /// The TaskId is all zeros, which X-Trace defines as invalid metadata.
    #[error("X-Trace TaskId is all zeros (invalid metadata)")]
    ZeroTaskId,
    /// A TaskId of a length other than 4, 8, 12 or 20 bytes.
    #[error("X-Trace TaskId must be 4, 8, 12 or 20 bytes, got {len}")]
    TaskIdLength {
        /// The length given.
        len: usize,
    },
    /// An OpId of a length other than 4 or 8 bytes.
    #[error("X-Trace OpId must be 4 or 8 bytes, got {len}")]
    OpIdLength {
        /// The length given.
        len: usize,
    },
    /// An option's length runs past the options block.
    #[error(
        "X-Trace option at offset {offset} of the options block (type {kind:#04x}, length {len}) overruns the block of {block_len} bytes"
    )]
    OptionOverrun {
        /// Offset of the option within the options block.
        offset: usize,
        /// The option type.
        kind: u8,
        /// The option's payload length.
        len: u8,
        /// Length of the options block.
        block_len: usize,
    },
    /// The options block is longer than 255 bytes (its length must fit one byte).
    #[error("X-Trace options block of {len} bytes is longer than 255")]
    OptionsTooLong {
        /// The length.
        len: usize,
    },
    /// The text form has an odd number of hex digits.
    #[error("X-Trace text metadata has an odd number of hex digits ({len})")]
    OddLength {
        /// Number of characters.
        len: usize,
    },
    /// The text form has a character that is not a hex digit.
    #[error("X-Trace text metadata has a non-hex character {ch:?} at position {pos}")]
    InvalidHex {
        /// Character position (0-based, in bytes).
        pos: usize,
        /// The character.
        ch: char,
    },
}

/// An X-Trace TaskId: 4, 8, 12 or 20 bytes identifying one task, never all zeros.
///
/// `Copy`, 21 bytes, no allocation: it travels in every context and report.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId {
    len: u8,
    bytes: [u8; 20],
}

impl TaskId {
    /// Builds a TaskId from its bytes.
    ///
    /// # Errors
    /// [`MetadataError::TaskIdLength`] unless `bytes` is 4, 8, 12 or 20 bytes long;
    /// [`MetadataError::ZeroTaskId`] when all bytes are zero.
    pub fn from_bytes(bytes: &[u8]) -> Result<TaskId, MetadataError> {
        if !matches!(bytes.len(), 4 | 8 | 12 | 20) {
            return Err(MetadataError::TaskIdLength { len: bytes.len() });
        }
        if bytes.iter().all(|&b| b == 0) {
            return Err(MetadataError::ZeroTaskId);
        }
        let mut out = [0u8; 20];
        out[..bytes.len()].copy_from_slice(bytes);
        Ok(TaskId {
            len: bytes.len() as u8,
            bytes: out,
        })
    }

    /// An 8-byte TaskId from a non-zero integer (big-endian bytes), the length X-Trace uses by default.
    ///
    /// # Errors
    /// [`MetadataError::ZeroTaskId`] when `id` is 0.
    pub fn from_u64(id: u64) -> Result<TaskId, MetadataError> {
        TaskId::from_bytes(&id.to_be_bytes())
    }

    /// A new random 8-byte TaskId (never zero).
    pub fn random() -> TaskId {
        loop {
            if let Ok(t) = TaskId::from_u64(crate::ids::random_u64()) {
                return t;
            }
        }
    }

    /// The TaskId's bytes (4, 8, 12 or 20 of them).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Length in bytes: 4, 8, 12 or 20.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// The value of an 8-byte TaskId (its bytes big-endian, as [`TaskId::from_u64`] takes it);
    /// `None` for the other lengths.
    #[inline]
    pub(crate) fn as_u64(&self) -> Option<u64> {
        (self.len == 8).then(|| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&self.bytes[..8]);
            u64::from_be_bytes(b)
        })
    }

    /// Always false: a TaskId has at least 4 bytes. Present for API symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The flags-byte code of this length (bits 1..0).
    fn length_code(&self) -> u8 {
        match self.len {
            4 => 0,
            8 => 1,
            12 => 2,
            _ => 3,
        }
    }

    /// Uppercase hex of the bytes (as in X-Trace's task views and the JSON exports' `id`).
    pub fn to_hex(&self) -> String {
        hex_upper(self.as_bytes())
    }

    /// Parses a TaskId from hex (either case).
    ///
    /// # Errors
    /// Hex errors as [`Metadata::parse_text`], then those of [`TaskId::from_bytes`].
    pub fn parse_hex(s: &str) -> Result<TaskId, MetadataError> {
        let mut buf = [0u8; 20];
        let n = decode_hex_into(crate::text::trim(s), &mut buf, 0)?;
        TaskId::from_bytes(&buf[..n])
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({self})")
    }
}

impl fmt::Display for TaskId {
    /// Uppercase hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.as_bytes() {
            write!(f, "{b:02X}")?;
        }
        Ok(())
    }
}

/// An X-Trace OpId: the id of one event within its task, 4 or 8 bytes (big-endian).
///
/// Stored as an integer plus its width; `Copy`, no allocation. This library creates 8-byte OpIds;
/// 4-byte ones from other agents are kept at 4 bytes when they are formatted again.
///
/// Packed (9 bytes, alignment 1, rather than 16): every context and every queued event holds up
/// to four inline parents, so the padding was 28 of each event's bytes copied into the
/// reporter's queue.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(C, packed)]
pub struct OpId {
    value: u64,
    len: u8,
}

impl OpId {
    /// An 8-byte OpId.
    pub const fn new(value: u64) -> OpId {
        OpId { value, len: 8 }
    }

    /// A 4-byte OpId.
    pub const fn new4(value: u32) -> OpId {
        OpId {
            value: value as u64,
            len: 4,
        }
    }

    /// Builds an OpId from 4 or 8 big-endian bytes.
    ///
    /// # Errors
    /// [`MetadataError::OpIdLength`] for any other length.
    pub fn from_bytes(bytes: &[u8]) -> Result<OpId, MetadataError> {
        match bytes.len() {
            4 => Ok(OpId::new4(u32::from_be_bytes(
                bytes.try_into().expect("4 bytes"),
            ))),
            8 => Ok(OpId::new(u64::from_be_bytes(
                bytes.try_into().expect("8 bytes"),
            ))),
            len => Err(MetadataError::OpIdLength { len }),
        }
    }

    /// Parses hex of 8 or 16 digits (either case), as in a report's `Edge` values.
    ///
    /// # Errors
    /// Hex errors as [`Metadata::parse_text`]; [`MetadataError::OpIdLength`] for other lengths.
    pub fn parse_hex(s: &str) -> Result<OpId, MetadataError> {
        let mut buf = [0u8; 8];
        let n = decode_hex_into(crate::text::trim(s), &mut buf, 0)?;
        OpId::from_bytes(&buf[..n])
    }

    /// The value as an integer (a 4-byte OpId is zero-extended).
    pub const fn value(&self) -> u64 {
        self.value
    }

    /// Width in bytes: 4 or 8.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Always false; present for API symmetry with `len`.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// True when the value is 0. The Berkeley library writes `Edge: 0000000000000000` on a task's
    /// first event to mean "no parent".
    pub const fn is_zero(&self) -> bool {
        self.value == 0
    }

    /// Writes the big-endian bytes into `out` and returns how many (4 or 8).
    pub fn write_bytes(&self, out: &mut Vec<u8>) -> usize {
        if self.len == 4 {
            out.extend_from_slice(&(self.value as u32).to_be_bytes());
            4
        } else {
            out.extend_from_slice(&self.value.to_be_bytes());
            8
        }
    }

    /// Uppercase hex, 8 or 16 digits.
    pub fn to_hex(&self) -> String {
        let (buf, n) = self.hex_digits();
        std::str::from_utf8(&buf[..n])
            .expect("hex digits are ASCII")
            .to_string()
    }

    /// The uppercase hex digits (the first 8 or 16 bytes of the buffer), written without the
    /// formatting machinery: the collector formats every event's OpId and edges.
    fn hex_digits(&self) -> ([u8; 16], usize) {
        let n = self.len() * 2;
        let mut buf = [0u8; 16];
        for (i, d) in buf[..n].iter_mut().enumerate() {
            *d = HEX_UPPER[((self.value >> (4 * (n - 1 - i))) & 15) as usize];
        }
        (buf, n)
    }
}

impl fmt::Debug for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpId({self})")
    }
}

impl fmt::Display for OpId {
    /// Uppercase hex, 8 or 16 digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (buf, n) = self.hex_digits();
        f.pad(std::str::from_utf8(&buf[..n]).expect("hex digits are ASCII"))
    }
}

/// One option of the options block, borrowed from the metadata it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XTraceOption<'a> {
    /// Option type. X-Trace assigns a few (e.g. 0xCE severity in the Berkeley library); all types,
    /// known or not, are carried forward unchanged.
    pub kind: u8,
    /// Option payload, 0 to 255 bytes.
    pub payload: &'a [u8],
}

/// X-Trace v1 metadata: TaskId, OpId and the options block.
///
/// Cloning costs at most one atomic increment (the options block is shared).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Metadata {
    task: TaskId,
    op: OpId,
    /// The options bytes after the total-length byte, exactly as received; `None` when the
    /// options bit is clear.
    options: Option<Arc<[u8]>>,
}

impl Metadata {
    /// Metadata with no options.
    pub const fn new(task: TaskId, op: OpId) -> Metadata {
        Metadata {
            task,
            op,
            options: None,
        }
    }

    /// Metadata with a raw options block (the bytes after the total-length byte).
    ///
    /// # Errors
    /// [`MetadataError::OptionsTooLong`] above 255 bytes; [`MetadataError::OptionOverrun`] when the
    /// block is not a sequence of `type length payload` options.
    pub fn with_options(task: TaskId, op: OpId, options: &[u8]) -> Result<Metadata, MetadataError> {
        if options.len() > 255 {
            return Err(MetadataError::OptionsTooLong { len: options.len() });
        }
        validate_options(options)?;
        Ok(Metadata {
            task,
            op,
            options: if options.is_empty() {
                None
            } else {
                Some(Arc::from(options))
            },
        })
    }

    /// The TaskId.
    pub const fn task_id(&self) -> TaskId {
        self.task
    }

    /// The OpId (the event this metadata points at).
    pub const fn op_id(&self) -> OpId {
        self.op
    }

    /// The same task and options, pointing at another event.
    pub fn with_op_id(&self, op: OpId) -> Metadata {
        Metadata {
            task: self.task,
            op,
            options: self.options.clone(),
        }
    }

    /// The raw options block (after the total-length byte), empty when there are no options.
    pub fn options_bytes(&self) -> &[u8] {
        self.options.as_deref().unwrap_or(&[])
    }

    /// The shared options block, for carrying forward without copying.
    pub(crate) fn options_arc(&self) -> Option<&Arc<[u8]>> {
        self.options.as_ref()
    }

    /// Rebuilds metadata from parts already validated (used by contexts).
    pub(crate) fn from_parts(task: TaskId, op: OpId, options: Option<Arc<[u8]>>) -> Metadata {
        Metadata { task, op, options }
    }

    /// Iterates over the options in order.
    pub fn options(&self) -> impl Iterator<Item = XTraceOption<'_>> {
        let mut rest = self.options_bytes();
        std::iter::from_fn(move || {
            if rest.len() < 2 {
                return None;
            }
            let kind = rest[0];
            let len = rest[1] as usize;
            // validate_options ran on construction, so the payload is in bounds.
            let payload = &rest[2..2 + len];
            rest = &rest[2 + len..];
            Some(XTraceOption { kind, payload })
        })
    }

    /// The collector of the administrative domain that reported the event this metadata points
    /// at (X-Trace's Destination option, [`DESTINATION_OPTION`]), when the metadata names one.
    pub fn destination(&self) -> Option<&str> {
        destination_in(self.options_bytes())
    }

    /// The flags byte this metadata encodes with.
    pub fn flags(&self) -> u8 {
        let mut f = (VERSION << 4) | self.task.length_code();
        if self.op.len == 8 {
            f |= FLAG_OPID_8;
        }
        if self.options.is_some() {
            f |= FLAG_OPTIONS;
        }
        f
    }

    /// Length of the binary form in bytes.
    pub fn binary_len(&self) -> usize {
        1 + self.task.len() + self.op.len() + self.options.as_ref().map_or(0, |o| 1 + o.len())
    }

    /// Appends the binary form to `out`.
    pub fn write_binary(&self, out: &mut Vec<u8>) {
        out.push(self.flags());
        out.extend_from_slice(self.task.as_bytes());
        self.op.write_bytes(out);
        if let Some(o) = &self.options {
            out.push(o.len() as u8);
            out.extend_from_slice(o);
        }
    }

    /// The binary form.
    pub fn to_binary(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.binary_len());
        self.write_binary(&mut v);
        v
    }

    /// The text form: the binary form as uppercase hex (e.g. `196944B2AA0D09FE8A24E44608F9C6A944`).
    pub fn to_text(&self) -> String {
        hex_upper(&self.to_binary())
    }

    /// Parses the binary form; the whole input must be one metadata.
    ///
    /// # Errors
    /// [`MetadataError::Empty`], [`MetadataError::UnsupportedVersion`], [`MetadataError::Truncated`],
    /// [`MetadataError::TrailingBytes`], [`MetadataError::ZeroTaskId`],
    /// [`MetadataError::OptionOverrun`].
    pub fn parse_binary(bytes: &[u8]) -> Result<Metadata, MetadataError> {
        let (md, used) = Metadata::parse_binary_prefix(bytes)?;
        if used != bytes.len() {
            return Err(MetadataError::TrailingBytes {
                expected: used,
                extra: bytes.len() - used,
            });
        }
        Ok(md)
    }

    /// Parses one binary metadata at the start of `bytes`; returns it and the bytes it used.
    ///
    /// # Errors
    /// As [`Metadata::parse_binary`], except that trailing bytes are allowed.
    pub fn parse_binary_prefix(bytes: &[u8]) -> Result<(Metadata, usize), MetadataError> {
        let &flags = bytes.first().ok_or(MetadataError::Empty)?;
        let version = flags >> 4;
        if version != VERSION {
            return Err(MetadataError::UnsupportedVersion { version, flags });
        }
        let tlen = match flags & FLAG_TASKID_MASK {
            0 => 4,
            1 => 8,
            2 => 12,
            _ => 20,
        };
        let olen = if flags & FLAG_OPID_8 != 0 { 8 } else { 4 };
        let mut needed = 1 + tlen + olen;
        if flags & FLAG_OPTIONS != 0 {
            needed += 1;
        }
        if bytes.len() < needed {
            return Err(MetadataError::Truncated {
                flags,
                needed,
                got: bytes.len(),
            });
        }
        let task = TaskId::from_bytes(&bytes[1..1 + tlen])?;
        let op = OpId::from_bytes(&bytes[1 + tlen..1 + tlen + olen])?;
        if flags & FLAG_OPTIONS == 0 {
            return Ok((Metadata::new(task, op), needed));
        }
        let optlen = bytes[1 + tlen + olen] as usize;
        let start = needed;
        needed += optlen;
        if bytes.len() < needed {
            return Err(MetadataError::Truncated {
                flags,
                needed,
                got: bytes.len(),
            });
        }
        let block = &bytes[start..needed];
        validate_options(block)?;
        // The options bit with a zero-length block is legal on the wire; it is kept so the metadata
        // re-encodes to the same bytes.
        Ok((
            Metadata {
                task,
                op,
                options: Some(Arc::from(block)),
            },
            needed,
        ))
    }

    /// Parses the text form (hex, either case, surrounding whitespace ignored).
    ///
    /// # Errors
    /// [`MetadataError::OddLength`], [`MetadataError::InvalidHex`], then those of
    /// [`Metadata::parse_binary`].
    pub fn parse_text(s: &str) -> Result<Metadata, MetadataError> {
        let s = crate::text::trim(s);
        if s.is_empty() {
            return Err(MetadataError::Empty);
        }
        let mut buf = [0u8; MAX_BINARY_LEN];
        let n = decode_hex_into(s, &mut buf, 0)?;
        Metadata::parse_binary(&buf[..n])
    }
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Metadata({})", self.to_text())
    }
}

impl fmt::Display for Metadata {
    /// The text form (uppercase hex).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

impl std::str::FromStr for Metadata {
    type Err = MetadataError;
    fn from_str(s: &str) -> Result<Metadata, MetadataError> {
        Metadata::parse_text(s)
    }
}

/// The option type of X-Trace's *Destination*: the collector of the administrative domain that
/// reported the event the metadata points at, as a sink URI in UTF-8 (`tcp://HOST:PORT`,
/// `tls://HOST:PORT`, `udp://HOST:PORT`), at most [`MAX_DESTINATION_LEN`] bytes.
///
/// The X-Trace papers name the option (NSDI 2007, section 2.3: "where reports should be sent")
/// but no specification we could read assigns it a type number (the Berkeley library's option
/// list leaves Destination to do), so this number is Sightline's choice, documented in
/// `docs/causal-metadata.md`. Libraries that do not know it carry it forward unchanged, as every
/// option.
pub const DESTINATION_OPTION: u8 = 0xDE;

/// The longest Destination payload: the options block (one length byte) must also hold the
/// option's type and length bytes.
pub const MAX_DESTINATION_LEN: usize = 253;

/// The Destination named in the options block `options` (the bytes after the total-length
/// byte): the payload of its first [`DESTINATION_OPTION`], when that is UTF-8.
pub fn destination_in(options: &[u8]) -> Option<&str> {
    let mut rest = options;
    while rest.len() >= 2 {
        let (kind, len) = (rest[0], rest[1] as usize);
        let payload = rest.get(2..2 + len)?;
        if kind == DESTINATION_OPTION {
            return std::str::from_utf8(payload).ok();
        }
        rest = &rest[2 + len..];
    }
    None
}

/// The options block `options` with its Destination set to `destination`: every other option
/// kept in order, any Destination option dropped, the new one appended.
///
/// # Errors
/// [`MetadataError::OptionsTooLong`] when the result would be longer than 255 bytes (a
/// destination longer than [`MAX_DESTINATION_LEN`] always is); [`MetadataError::OptionOverrun`]
/// when `options` is not a valid block.
pub fn options_with_destination(
    options: &[u8],
    destination: &str,
) -> Result<Vec<u8>, MetadataError> {
    validate_options(options)?;
    let mut out = Vec::with_capacity(options.len() + 2 + destination.len());
    let mut rest = options;
    while rest.len() >= 2 {
        let len = 2 + rest[1] as usize;
        if rest[0] != DESTINATION_OPTION {
            out.extend_from_slice(&rest[..len]);
        }
        rest = &rest[len..];
    }
    let total = out.len() + 2 + destination.len();
    if destination.len() > MAX_DESTINATION_LEN || total > 255 {
        return Err(MetadataError::OptionsTooLong { len: total });
    }
    out.push(DESTINATION_OPTION);
    out.push(destination.len() as u8);
    out.extend_from_slice(destination.as_bytes());
    Ok(out)
}

fn validate_options(block: &[u8]) -> Result<(), MetadataError> {
    let mut off = 0;
    while off < block.len() {
        if block.len() - off < 2 {
            return Err(MetadataError::OptionOverrun {
                offset: off,
                kind: block[off],
                len: 0,
                block_len: block.len(),
            });
        }
        let kind = block[off];
        let len = block[off + 1];
        if off + 2 + len as usize > block.len() {
            return Err(MetadataError::OptionOverrun {
                offset: off,
                kind,
                len,
                block_len: block.len(),
            });
        }
        off += 2 + len as usize;
    }
    Ok(())
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Uppercase hex of `bytes`.
pub(crate) fn hex_upper(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(HEX_UPPER[(b >> 4) as usize] as char);
        s.push(HEX_UPPER[(b & 15) as usize] as char);
    }
    s
}

/// Appends uppercase hex of `bytes` to `out`.
pub(crate) fn push_hex_upper(out: &mut String, bytes: &[u8]) {
    for &b in bytes {
        out.push(HEX_UPPER[(b >> 4) as usize] as char);
        out.push(HEX_UPPER[(b & 15) as usize] as char);
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Decodes hex `s` into `out`; `pos_base` offsets reported positions. Returns the byte count.
///
/// When `s` holds more bytes than `out`, the extra is reported as trailing bytes.
pub(crate) fn decode_hex_into(
    s: &str,
    out: &mut [u8],
    pos_base: usize,
) -> Result<usize, MetadataError> {
    let b = s.as_bytes();
    // The common case in one pass; anything wrong is found again below, in the errors' order.
    if b.len().is_multiple_of(2) && b.len() / 2 <= out.len() {
        let decoded = out.iter_mut().zip(b.chunks_exact(2)).all(|(o, d)| {
            match (hex_val(d[0]), hex_val(d[1])) {
                (Some(hi), Some(lo)) => {
                    *o = (hi << 4) | lo;
                    true
                }
                _ => false,
            }
        });
        if decoded {
            return Ok(b.len() / 2);
        }
    }
    if let Some(i) = b.iter().position(|c| !c.is_ascii_hexdigit()) {
        // Only ASCII precedes `i`, so it is a character boundary.
        let ch = s[i..].chars().next().expect("a byte at i");
        return Err(MetadataError::InvalidHex {
            pos: pos_base + i,
            ch,
        });
    }
    if !b.len().is_multiple_of(2) {
        return Err(MetadataError::OddLength { len: b.len() });
    }
    let n = b.len() / 2;
    if n > out.len() {
        return Err(MetadataError::TrailingBytes {
            expected: out.len(),
            extra: n - out.len(),
        });
    }
    unreachable!("valid hex of at most {} bytes decodes above", out.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destination_replaces_its_option_and_keeps_the_others_in_order() {
        // A severity option (0xCE, as the Berkeley library sends) and an old destination.
        let old = [0xCE, 1, 5, DESTINATION_OPTION, 3, b'a', b':', b'1'];
        assert_eq!(destination_in(&old), Some("a:1"));
        let new = options_with_destination(&old, "tcp://b:7831").unwrap();
        let mut want = vec![0xCE, 1, 5, DESTINATION_OPTION, 12];
        want.extend_from_slice(b"tcp://b:7831");
        assert_eq!(new, want);
        let md = Metadata::with_options(TaskId::from_u64(7).unwrap(), OpId::new(9), &new).unwrap();
        assert_eq!(md.destination(), Some("tcp://b:7831"));
        // Through the text form and back (what an HTTP header carries).
        let back = Metadata::parse_text(&md.to_text()).unwrap();
        assert_eq!(back.destination(), Some("tcp://b:7831"));
        assert_eq!(destination_in(&[0xCE, 1, 5]), None);
        let long = "x".repeat(MAX_DESTINATION_LEN + 1);
        assert!(matches!(
            options_with_destination(&[], &long),
            Err(MetadataError::OptionsTooLong { len: 256 })
        ));
        assert_eq!(
            options_with_destination(&[], &"y".repeat(MAX_DESTINATION_LEN))
                .unwrap()
                .len(),
            255
        );
    }

    #[test]
    fn parses_real_hadoop_metadata() {
        let md = Metadata::parse_text("196944B2AA0D09FE8A24E44608F9C6A944").unwrap();
        assert_eq!(md.flags(), 0x19);
        assert_eq!(md.task_id().to_hex(), "6944B2AA0D09FE8A");
        assert_eq!(md.op_id(), OpId::new(0x24E4_4608_F9C6_A944));
        assert_eq!(md.to_text(), "196944B2AA0D09FE8A24E44608F9C6A944");
    }

    #[test]
    fn lowercase_accepted_uppercase_emitted() {
        let md = Metadata::parse_text("196944b2aa0d09fe8a24e44608f9c6a944").unwrap();
        assert_eq!(md.to_text(), "196944B2AA0D09FE8A24E44608F9C6A944");
    }

    #[test]
    fn every_taskid_and_opid_length() {
        for tlen in [4usize, 8, 12, 20] {
            for olen in [4usize, 8] {
                let task: Vec<u8> = (1..=tlen as u8).collect();
                let op: Vec<u8> = (0xA0..0xA0 + olen as u8).collect();
                let md = Metadata::new(
                    TaskId::from_bytes(&task).unwrap(),
                    OpId::from_bytes(&op).unwrap(),
                );
                let bin = md.to_binary();
                assert_eq!(bin.len(), 1 + tlen + olen);
                assert_eq!(bin[0] >> 4, 1);
                assert_eq!(&bin[1..1 + tlen], &task[..]);
                assert_eq!(&bin[1 + tlen..], &op[..]);
                assert_eq!(Metadata::parse_binary(&bin).unwrap(), md);
                assert_eq!(Metadata::parse_text(&md.to_text()).unwrap(), md);
            }
        }
    }

    #[test]
    fn unknown_options_carried_unchanged() {
        // flags 0x1D: v1, options, 8-byte OpId, 8-byte TaskId; block of 8 bytes: an unknown
        // type 0x7E with 2 bytes, and 0xCE (severity) with 2 bytes.
        let text = "1D0102030405060708AABBCCDDEEFF0011087E02BEEFCE020506";
        let md = Metadata::parse_text(text).unwrap();
        let opts: Vec<_> = md.options().collect();
        assert_eq!(opts.len(), 2);
        assert_eq!(
            opts[0],
            XTraceOption {
                kind: 0x7E,
                payload: &[0xBE, 0xEF]
            }
        );
        assert_eq!(
            opts[1],
            XTraceOption {
                kind: 0xCE,
                payload: &[0x05, 0x06]
            }
        );
        assert_eq!(md.to_text(), text);
        // A new event in the same task keeps the options.
        let next = md.with_op_id(OpId::new(42));
        assert_eq!(next.options_bytes(), md.options_bytes());
        assert!(
            next.to_text()
                .starts_with("1D0102030405060708000000000000002A087E02")
        );
    }

    #[test]
    fn typed_errors() {
        assert_eq!(Metadata::parse_text(""), Err(MetadataError::Empty));
        assert_eq!(
            Metadata::parse_text("190"),
            Err(MetadataError::OddLength { len: 3 })
        );
        assert_eq!(
            Metadata::parse_text("19zz"),
            Err(MetadataError::InvalidHex { pos: 2, ch: 'z' })
        );
        assert_eq!(
            Metadata::parse_text("290102030405060708AABBCCDDEEFF0011"),
            Err(MetadataError::UnsupportedVersion {
                version: 2,
                flags: 0x29
            })
        );
        assert_eq!(
            Metadata::parse_text("190102030405060708AABB"),
            Err(MetadataError::Truncated {
                flags: 0x19,
                needed: 17,
                got: 11
            })
        );
        assert_eq!(
            Metadata::parse_text("190000000000000000AABBCCDDEEFF0011"),
            Err(MetadataError::ZeroTaskId)
        );
        assert_eq!(
            Metadata::parse_text("190102030405060708AABBCCDDEEFF001122"),
            Err(MetadataError::TrailingBytes {
                expected: 17,
                extra: 1
            })
        );
        assert!(matches!(
            Metadata::parse_text("1D0102030405060708AABBCCDDEEFF0011037E05BE"),
            Err(MetadataError::OptionOverrun {
                offset: 0,
                kind: 0x7E,
                len: 5,
                block_len: 3
            })
        ));
        assert_eq!(
            TaskId::from_bytes(&[1; 16]),
            Err(MetadataError::TaskIdLength { len: 16 })
        );
        assert_eq!(
            OpId::from_bytes(&[1; 5]),
            Err(MetadataError::OpIdLength { len: 5 })
        );
    }
}
