//! Parsing a format string into [`Piece`]s (libdtrace `dt_printf_create`): conversion names,
//! flags, width, precision and size prefixes.

use super::*;

pub(super) fn lookup(name: &str) -> Option<ConvKind> {
    use ConvKind::*;
    Some(match name {
        "a" => KernelAddr,
        "A" => UserAddr,
        "c" => Char,
        "C" => EscapedChar,
        "d" | "hd" | "hhd" | "ld" | "lld" => Decimal,
        "i" | "hi" | "hhi" | "li" | "lli" => SignedDecimal,
        "u" | "hu" | "hhu" | "lu" | "llu" => Unsigned,
        "o" | "ho" | "hho" | "lo" | "llo" => Octal,
        "x" | "hx" | "hhx" | "lx" | "llx" => HexLower,
        "X" | "hX" | "hhX" | "lX" | "llX" => HexUpper,
        "e" | "Le" => FloatExp { upper: false },
        "E" | "LE" => FloatExp { upper: true },
        "f" | "Lf" => FloatFixed,
        "g" | "Lg" => FloatShortest { upper: false },
        "G" | "LG" => FloatShortest { upper: true },
        "I" => InetAddr,
        "k" => Stack,
        "lc" | "wc" => WideChar,
        "ls" | "ws" => WideStr,
        "p" => Pointer,
        "P" => Port,
        "s" => Str,
        "S" => EscapedStr,
        "T" => Time822,
        "Y" => Time,
        "%" => Percent,
        _ => return None,
    })
}

fn size_of_name(name: &str) -> SizePrefix {
    let prefix: String = name
        .chars()
        .take_while(|c| matches!(c, 'h' | 'l' | 'L' | 'w'))
        .collect();
    match prefix.as_str() {
        "hh" => SizePrefix::Hh,
        "h" => SizePrefix::H,
        "l" => SizePrefix::L,
        "ll" => SizePrefix::Ll,
        "L" => SizePrefix::BigL,
        "w" => SizePrefix::W,
        _ => SizePrefix::None,
    }
}

/// Parses a D format string (its decoded value) into literal and conversion pieces.
///
/// Errors as DTrace's `dt_printf_create`: empty format, `%` at the end, an undefined conversion
/// name, two `*` for one field, two `.`, positional `%n$`, `%%` with flags; and, Sightline's
/// own, a width or precision above [`MAX_COUNT`] ([`FormatError::CountTooLarge`]). Adjacent literal text
/// is one [`Piece::Literal`]; `%%` is a [`ConvKind::Percent`] conversion.
pub fn parse(fmt: &str) -> Result<Vec<Piece>, FormatError> {
    if fmt.is_empty() {
        return Err(FormatError::Empty);
    }
    let b = fmt.as_bytes();
    let mut pieces = Vec::new();
    let mut lit_start = 0;
    let mut i = 0;
    let mut index = 0;
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        if i > lit_start {
            pieces.push(Piece::Literal(fmt[lit_start..i].to_string()));
        }
        index += 1;
        let start = i;
        let mut flags = Flags::default();
        let mut width = Count::None;
        let mut precision = Count::None;
        let mut aggregation = false;
        let mut dot = false;
        let mut digits = 0;
        let mut name = String::new();
        i += 1;
        let kind = loop {
            let Some(&c) = b.get(i) else {
                return Err(FormatError::MissingName {
                    index,
                    span: start..i,
                });
            };
            match c {
                b'0'..=b'9' => {
                    if !dot && digits == 0 && c == b'0' {
                        flags.zero = true;
                        flags.left = false;
                        i += 1;
                        continue;
                    }
                    let digits_start = i;
                    let mut n: u32 = 0;
                    while let Some(d @ b'0'..=b'9') = b.get(i).copied() {
                        n = n.saturating_mul(10).saturating_add(u32::from(d - b'0'));
                        i += 1;
                    }
                    if n > MAX_COUNT {
                        return Err(FormatError::CountTooLarge {
                            index,
                            what: if dot { "precision" } else { "width" },
                            limit: MAX_COUNT,
                            span: digits_start..i,
                        });
                    }
                    if dot {
                        precision = Count::Fixed(n)
                    } else {
                        width = Count::Fixed(n)
                    }
                    digits += 1;
                    continue;
                }
                b'#' => flags.alt = true,
                b'*' => {
                    let slot = if dot { &mut precision } else { &mut width };
                    if *slot == Count::Star {
                        return Err(FormatError::TwoStars {
                            index,
                            what: if dot { "precision" } else { "width" },
                            span: start..i + 1,
                        });
                    }
                    *slot = Count::Star;
                }
                b'+' => flags.plus = true,
                b'-' => {
                    flags.left = true;
                    flags.zero = false;
                }
                b'.' => {
                    if dot {
                        return Err(FormatError::TwoDots {
                            index,
                            span: start..i + 1,
                        });
                    }
                    dot = true;
                    digits = 0;
                }
                b'?' => width = Count::Fixed(16),
                b'@' => aggregation = true,
                b'\'' => flags.group = true,
                b' ' => flags.space = true,
                b'$' => {
                    return Err(FormatError::Positional {
                        index,
                        span: start..i + 1,
                    });
                }
                b'%' if i == start + 1 => {
                    i += 1;
                    break ConvKind::Percent;
                }
                b'%' => {
                    return Err(FormatError::PercentWithFlags {
                        index,
                        span: start..i + 1,
                    });
                }
                b'h' | b'l' | b'L' | b'w' => {
                    if name.len() < 6 {
                        name.push(c as char);
                    }
                }
                _ => {
                    // The conversion letter (any character, possibly multi-byte).
                    let ch = fmt[i..].chars().next().expect("in bounds");
                    name.push(ch);
                    i += ch.len_utf8();
                    match lookup(&name) {
                        Some(k) => break k,
                        None => {
                            return Err(FormatError::Undefined {
                                index,
                                name,
                                span: start..i,
                            });
                        }
                    }
                }
            }
            i += 1;
        };
        if kind == ConvKind::Percent {
            name = "%".into();
        }
        pieces.push(Piece::Conversion(Conversion {
            flags,
            width,
            precision,
            size: size_of_name(&name),
            kind,
            aggregation,
            name,
            span: start..i,
        }));
        lit_start = i;
    }
    if lit_start < b.len() {
        pieces.push(Piece::Literal(fmt[lit_start..].to_string()));
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_splits_literals_and_conversions() {
        let p = parse("a %-8.3ld b %%").unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(p[0], Piece::Literal("a ".into()));
        let Piece::Conversion(c) = &p[1] else {
            panic!()
        };
        assert!(c.flags.left);
        assert_eq!(c.width, Count::Fixed(8));
        assert_eq!(c.precision, Count::Fixed(3));
        assert_eq!(c.size, SizePrefix::L);
        assert_eq!(c.kind, ConvKind::Decimal);
        assert_eq!(c.name, "ld");
        assert_eq!(c.span, 2..9);
        assert_eq!(p[2], Piece::Literal(" b ".into()));
        let Piece::Conversion(pc) = &p[3] else {
            panic!()
        };
        assert_eq!(pc.kind, ConvKind::Percent);
    }

    #[test]
    fn parse_errors_match_dtrace() {
        assert_eq!(parse(""), Err(FormatError::Empty));
        assert!(matches!(
            parse("x %"),
            Err(FormatError::MissingName { index: 1, .. })
        ));
        assert!(
            matches!(parse("%d %q"), Err(FormatError::Undefined { index: 2, ref name, .. }) if name == "q")
        );
        assert!(matches!(parse("%lf"), Err(FormatError::Undefined { .. })));
        assert!(matches!(parse("%**d"), Err(FormatError::TwoStars { .. })));
        assert!(matches!(parse("%1.2.3d"), Err(FormatError::TwoDots { .. })));
        assert!(matches!(parse("%1$d"), Err(FormatError::Positional { .. })));
        assert!(matches!(
            parse("%-%"),
            Err(FormatError::PercentWithFlags { .. })
        ));
    }

    #[test]
    fn issue_22_width_and_precision_have_a_limit() {
        // The width that wrote a 4 GiB line (and one that overflows a C int): an error naming the
        // limit, spanning the digits.
        let e = parse("%99999999999d\n").unwrap_err();
        assert_eq!(
            e,
            FormatError::CountTooLarge {
                index: 1,
                what: "width",
                limit: MAX_COUNT,
                span: 1..12,
            }
        );
        assert_eq!(
            e.to_string(),
            "format conversion #1 has a width above the limit of 65535"
        );
        assert_eq!(e.span(), Some(1..12));
        let e = parse("x=%d %-8.999999999s").unwrap_err();
        assert!(
            matches!(e, FormatError::CountTooLarge { index: 2, what: "precision", span: ref s, .. } if *s == (9..18)),
            "{e:?}"
        );
        // The limit itself is accepted.
        let p = parse("%65535d").unwrap();
        let Piece::Conversion(c) = &p[0] else {
            panic!()
        };
        assert_eq!(c.width, Count::Fixed(65_535));
        assert!(matches!(
            parse("%65536d"),
            Err(FormatError::CountTooLarge { .. })
        ));
    }
}
