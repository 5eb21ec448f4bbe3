//! Trimming for the text parsers (metadata hex, X-Trace 1.0 reports): the result of `str::trim`,
//! `str::trim_start` and `str::trim_end` (whitespace as `char::is_whitespace`), without their
//! Unicode tables where the ends are ASCII, which they nearly always are. The collector reads
//! every text report through these.

/// Whitespace as `char::is_whitespace` sees it, for an ASCII byte (VT included, unlike
/// `u8::is_ascii_whitespace`).
fn is_ascii_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// `str::trim`.
#[inline]
pub(crate) fn trim(s: &str) -> &str {
    trim_end(trim_start(s))
}

/// `str::trim_start`.
#[inline]
pub(crate) fn trim_start(s: &str) -> &str {
    let b = s.as_bytes();
    let i = b.iter().position(|&c| !is_ascii_ws(c)).unwrap_or(b.len());
    // Only ASCII was skipped, so `i` is a character boundary; a non-ASCII byte there may start a
    // Unicode space, which `str::trim_start` handles.
    if b.get(i).is_some_and(|&c| c >= 0x80) {
        s[i..].trim_start()
    } else {
        &s[i..]
    }
}

/// `str::trim_end`.
#[inline]
pub(crate) fn trim_end(s: &str) -> &str {
    let b = s.as_bytes();
    let j = b
        .iter()
        .rposition(|&c| !is_ascii_ws(c))
        .map_or(0, |j| j + 1);
    if j > 0 && b[j - 1] >= 0x80 {
        s[..j].trim_end()
    } else {
        &s[..j]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_as_std_on_ascii_and_unicode_whitespace() {
        let cases = [
            "",
            "   ",
            "a",
            " \t a b \r\n",
            "\x0b\x0cv\x0c\x0b",
            "\u{a0}spaced\u{2003}",
            " \u{85}x\u{3000} ",
            "\u{3000}",
            "é",
            " é ",
            "\u{a0} \u{a0}",
        ];
        for c in cases {
            assert_eq!(trim(c), c.trim(), "{c:?}");
            assert_eq!(trim_start(c), c.trim_start(), "{c:?}");
            assert_eq!(trim_end(c), c.trim_end(), "{c:?}");
        }
    }
}
