//! GDB remote serial protocol framing: `$data#checksum` packets, `+`/`-` acknowledgements,
//! `}`-escaping of binary data, and the `0x03` interrupt byte (GDB manual, appendix E, "Overview"
//! and "Binary data").

use std::io::{self, BufRead, Write};

/// The largest packet accepted from gdb (we advertise `PacketSize` of this much), bytes.
pub const MAX_PACKET: usize = 0x4000;

/// What the connection delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// A packet's data (checksum verified, escapes undone).
    Packet(Vec<u8>),
    /// The interrupt byte (`^C` in gdb).
    Interrupt,
}

/// A packet connection over a byte stream.
#[derive(Debug)]
pub struct Conn<S: io::Read + Write> {
    reader: io::BufReader<S>,
    /// True until gdb turns acknowledgements off (`QStartNoAckMode`).
    pub acks: bool,
}

impl<S: io::Read + Write> Conn<S> {
    /// Wraps a connected stream.
    pub fn new(stream: S) -> Conn<S> {
        Conn {
            reader: io::BufReader::new(stream),
            acks: true,
        }
    }

    /// Reads the next packet or interrupt, skipping acknowledgements. A packet with a bad
    /// checksum is refused with `-` (gdb sends it again). `Ok(None)` at end of stream.
    ///
    /// Errors: the stream fails, or a packet is longer than [`MAX_PACKET`].
    pub fn read(&mut self) -> io::Result<Option<Incoming>> {
        loop {
            let mut b = [0u8; 1];
            if read_retrying(&mut self.reader, &mut b)? == 0 {
                return Ok(None);
            }
            match b[0] {
                0x03 => return Ok(Some(Incoming::Interrupt)),
                b'$' => {}
                _ => continue, // '+', '-', noise
            }
            let mut raw = Vec::new();
            loop {
                if read_retrying(&mut self.reader, &mut b)? == 0 {
                    return Ok(None);
                }
                if b[0] == b'#' {
                    break;
                }
                raw.push(b[0]);
                if raw.len() > MAX_PACKET * 2 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "gdb packet too long",
                    ));
                }
            }
            let mut cs = [0u8; 2];
            for c in &mut cs {
                if read_retrying(&mut self.reader, std::slice::from_mut(c))? == 0 {
                    return Ok(None);
                }
            }
            let want = std::str::from_utf8(&cs)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok());
            let sum = raw.iter().fold(0u8, |a, b| a.wrapping_add(*b));
            if want != Some(sum) {
                if self.acks {
                    self.send_raw(b"-")?;
                }
                continue;
            }
            if self.acks {
                self.send_raw(b"+")?;
            }
            return Ok(Some(Incoming::Packet(unescape(&raw))));
        }
    }

    /// Sends `data` as one packet (escaping `$`, `#`, `}` and `*`), then, with acknowledgements
    /// on, waits for gdb's `+` (resending on `-`).
    ///
    /// Errors: the stream fails.
    pub fn send(&mut self, data: &[u8]) -> io::Result<()> {
        let mut out = Vec::with_capacity(data.len() + 4);
        out.push(b'$');
        let mut sum = 0u8;
        for &c in data {
            if matches!(c, b'$' | b'#' | b'}' | b'*') {
                out.push(b'}');
                out.push(c ^ 0x20);
                sum = sum.wrapping_add(b'}').wrapping_add(c ^ 0x20);
            } else {
                out.push(c);
                sum = sum.wrapping_add(c);
            }
        }
        out.extend_from_slice(format!("#{sum:02x}").as_bytes());
        loop {
            self.send_raw(&out)?;
            if !self.acks {
                return Ok(());
            }
            let mut b = [0u8; 1];
            loop {
                if read_retrying(&mut self.reader, &mut b)? == 0 {
                    return Ok(());
                }
                match b[0] {
                    b'+' => return Ok(()),
                    b'-' => break,
                    _ => {}
                }
            }
        }
    }

    fn send_raw(&mut self, data: &[u8]) -> io::Result<()> {
        let s = self.reader.get_mut();
        s.write_all(data)?;
        s.flush()
    }

    /// True when bytes from gdb are waiting in the buffer (an interrupt may be among them).
    pub fn buffered(&self) -> bool {
        !self.reader.buffer().is_empty()
    }

    /// The underlying stream.
    pub fn stream(&self) -> &S {
        self.reader.get_ref()
    }
}

/// A read that retries when a signal (the replay's tick timer) interrupts it.
fn read_retrying(r: &mut impl BufRead, b: &mut [u8]) -> io::Result<usize> {
    loop {
        match io::Read::read(r, b) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Undoes `}` escapes (`}` then the byte XOR 0x20) and run-length encoding is not expected
/// from gdb (it never sends it).
pub fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut it = raw.iter();
    while let Some(&c) = it.next() {
        if c == b'}' {
            if let Some(&n) = it.next() {
                out.push(n ^ 0x20);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Lower-case hex of `data`.
pub fn hex(data: &[u8]) -> String {
    let mut s = String::with_capacity(data.len() * 2);
    for b in data {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Bytes from hex text; `None` for odd length or a non-hex digit.
pub fn unhex(text: &[u8]) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks(2)
        .map(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
        })
        .collect()
}

/// A hex number (no prefix); `None` when empty or not hex.
pub fn num(text: &[u8]) -> Option<u64> {
    std::str::from_utf8(text)
        .ok()
        .filter(|s| !s.is_empty())
        .and_then(|s| u64::from_str_radix(s, 16).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream reading from a fixed input and keeping what was written.
    struct Pipe {
        input: io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }
    impl io::Read for Pipe {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            self.input.read(b)
        }
    }
    impl Write for Pipe {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.output.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn conn(input: &[u8]) -> Conn<Pipe> {
        Conn::new(Pipe {
            input: io::Cursor::new(input.to_vec()),
            output: Vec::new(),
        })
    }

    #[test]
    fn a_packet_is_acknowledged_and_a_bad_checksum_refused() {
        // "g" sums to 0x67; the first copy has a wrong checksum.
        let mut c = conn(b"+$g#00$g#67\x03");
        assert_eq!(c.read().unwrap(), Some(Incoming::Packet(b"g".to_vec())));
        assert_eq!(c.read().unwrap(), Some(Incoming::Interrupt));
        assert_eq!(c.read().unwrap(), None);
        assert_eq!(c.stream().output, b"-+");
    }

    #[test]
    fn sent_packets_are_escaped_and_summed() {
        let mut c = conn(b"+");
        c.send(b"a#b").unwrap();
        // '#' (0x23) goes as "}\x03"; sum = 'a' + '}' + 0x03 + 'b' = 0x61+0x7d+0x03+0x62 = 0x143.
        assert_eq!(c.stream().output, b"$a}\x03b#43");
    }

    #[test]
    fn escapes_hex_and_numbers_decode() {
        assert_eq!(unescape(b"x}\x03y"), b"x#y");
        assert_eq!(unhex(b"00ff7A"), Some(vec![0, 0xff, 0x7a]));
        assert_eq!(unhex(b"0"), None);
        assert_eq!(hex(&[1, 0xab]), "01ab");
        assert_eq!(num(b"7ffff7dd"), Some(0x7fff_f7dd));
        assert_eq!(num(b""), None);
    }
}
