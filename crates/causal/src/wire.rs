//! Framing of reports on a byte stream: a 4-byte big-endian length, then the report.
//!
//! This is how X-Trace's TCP report sources read reports (`edu.berkeley.xtrace.server.TcpReportSource`:
//! `readInt()` length, then that many bytes), and how `sightline collect` reads them on port 7831.
//! The payload is either an X-Trace 1.0 text report or a native binary report; [`Report::decode`]
//! tells them apart by their first bytes. Over UDP each datagram is one report without the length
//! prefix, as X-Trace's `UdpReportSource` reads them. See `docs/causal-wire.md`.

use std::io::{self, Read};

use crate::report::{Report, ReportError};

/// The TCP and UDP port X-Trace collectors listen on.
pub const DEFAULT_PORT: u16 = 7831;

/// Largest payload a reader accepts (1 MiB); a larger length prefix is a framing error, so a
/// corrupt stream cannot make a reader allocate without bound.
pub const MAX_FRAME_LEN: usize = 1 << 20;

/// Which payload format a reporter writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WireFormat {
    /// X-Trace Report ver 1.0 text (readable by X-Trace's own collectors).
    #[default]
    Text,
    /// The native binary format (lossless, smaller, faster to decode).
    Binary,
}

impl WireFormat {
    /// Parses `text`/`xtrace` or `binary`/`native` (case-insensitive).
    pub fn parse(s: &str) -> Option<WireFormat> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" | "xtrace" | "x-trace" => Some(WireFormat::Text),
            "binary" | "native" => Some(WireFormat::Binary),
            _ => None,
        }
    }

    /// Appends `report`'s payload in this format to `out` (no length prefix).
    pub fn encode(self, report: &Report, out: &mut Vec<u8>) {
        match self {
            WireFormat::Text => {
                let mut s = String::with_capacity(256);
                report.write_xtrace_text(&mut s);
                out.extend_from_slice(s.as_bytes());
            }
            WireFormat::Binary => report.encode_binary(out),
        }
    }
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The length prefix exceeds [`MAX_FRAME_LEN`].
    #[error("frame length {len} exceeds the maximum of {MAX_FRAME_LEN} bytes")]
    FrameTooLong {
        /// The length announced.
        len: usize,
    },
    /// The stream ended inside a frame.
    #[error("stream ended inside a frame ({got} of {needed} bytes)")]
    Truncated {
        /// Bytes needed for the frame (prefix included).
        needed: usize,
        /// Bytes read.
        got: usize,
    },
    /// Reading failed.
    #[error("reading a report frame")]
    Io(#[from] io::Error),
    /// The frame's payload is not a report.
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// Appends one frame (length prefix, then `payload`) to `out`.
///
/// # Panics
/// When `payload` is longer than `u32::MAX` bytes.
pub fn write_frame(out: &mut Vec<u8>, payload: &[u8]) {
    let len = u32::try_from(payload.len()).expect("frame payload fits u32");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
}

/// Appends `report` as one frame in `format` to `out`, writing the payload in place.
pub fn encode_frame(out: &mut Vec<u8>, report: &Report, format: WireFormat) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    format.encode(report, out);
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

/// Finds the first complete frame in `buf` (for readers that buffer bytes themselves).
///
/// Returns `Ok(None)` when more bytes are needed, or the payload's range in `buf` and the number
/// of bytes the frame used.
///
/// # Errors
/// [`WireError::FrameTooLong`].
pub fn split_frame(buf: &[u8]) -> Result<Option<(std::ops::Range<usize>, usize)>, WireError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_be_bytes(buf[..4].try_into().expect("4 bytes")) as usize;
    if len > MAX_FRAME_LEN {
        return Err(WireError::FrameTooLong { len });
    }
    if buf.len() < 4 + len {
        return Ok(None);
    }
    Ok(Some((4..4 + len, 4 + len)))
}

/// Reads one frame's payload from `r` into `payload` (replacing its contents).
///
/// Returns `Ok(false)` at a clean end of stream (before any byte of a frame).
///
/// # Errors
/// [`WireError::FrameTooLong`], [`WireError::Truncated`], [`WireError::Io`].
pub fn read_frame<R: Read + ?Sized>(r: &mut R, payload: &mut Vec<u8>) -> Result<bool, WireError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(WireError::Truncated { needed: 4, got }),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME_LEN {
        return Err(WireError::FrameTooLong { len });
    }
    payload.clear();
    payload.resize(len, 0);
    let mut off = 0;
    while off < len {
        match r.read(&mut payload[off..]) {
            Ok(0) => {
                return Err(WireError::Truncated {
                    needed: 4 + len,
                    got: 4 + off,
                });
            }
            Ok(n) => off += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

/// Reads and decodes one framed report; `Ok(None)` at a clean end of stream.
///
/// # Errors
/// As [`read_frame`], and [`WireError::Report`] when the payload does not decode.
pub fn read_report<R: Read + ?Sized>(
    r: &mut R,
    scratch: &mut Vec<u8>,
) -> Result<Option<Report>, WireError> {
    if !read_frame(r, scratch)? {
        return Ok(None);
    }
    Ok(Some(Report::decode(scratch)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{Metadata, OpId, TaskId};

    #[test]
    fn frames_both_formats_on_one_stream() {
        let mut r = Report::new(Metadata::new(TaskId::from_u64(7).unwrap(), OpId::new(9)));
        r.label = Some("x".into());
        let mut buf = Vec::new();
        encode_frame(&mut buf, &r, WireFormat::Text);
        encode_frame(&mut buf, &r, WireFormat::Binary);
        let text_len = r.to_xtrace_text().len();
        assert_eq!(&buf[..4], &(text_len as u32).to_be_bytes());
        let (range, used) = split_frame(&buf).unwrap().unwrap();
        assert_eq!(range, 4..4 + text_len);
        assert_eq!(split_frame(&buf[..used - 1]).unwrap(), None);
        let mut cur = io::Cursor::new(buf);
        let mut scratch = Vec::new();
        assert_eq!(
            read_report(&mut cur, &mut scratch).unwrap(),
            Some(r.clone())
        );
        assert_eq!(read_report(&mut cur, &mut scratch).unwrap(), Some(r));
        assert!(read_report(&mut cur, &mut scratch).unwrap().is_none());
    }

    #[test]
    fn oversized_and_truncated_frames_rejected() {
        let big = ((MAX_FRAME_LEN + 1) as u32).to_be_bytes();
        assert!(matches!(
            split_frame(&big),
            Err(WireError::FrameTooLong { .. })
        ));
        let mut cur = io::Cursor::new(vec![0, 0, 0, 10, b'X']);
        let mut scratch = Vec::new();
        assert!(matches!(
            read_frame(&mut cur, &mut scratch),
            Err(WireError::Truncated { needed: 14, got: 5 })
        ));
    }
}
