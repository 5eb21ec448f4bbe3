//! Rendering parsed formats with values (libdtrace `dt_printf_format`): integers, floats, strings,
//! symbols, stacks, and the `%Y`/`%T` times.

use super::*;

/// Formats `args` with a parsed format, as `printf()` prints them.
///
/// `args` are consumed in [`arg_slots`] order. Errors: [`FormatError::MissingArgument`] when
/// `args` runs out, [`FormatError::WrongArgument`] when a value cannot be printed by its
/// conversion (e.g. a string for `%d`), [`FormatError::AggWithoutAggregation`] for `%@`. Extra
/// arguments are ignored (sema rejects them before).
pub fn format(pieces: &[Piece], args: &[Value]) -> Result<String, FormatError> {
    format_inner(pieces, args, None)
}

/// Formats one `printa()` line: the keys are the arguments, each `%@` prints `agg_value` (already
/// reduced to the integer the aggregating function reports, e.g. the average), and
/// `agg_text` (when `Some`) replaces it for quantize-family aggregations, whose `%@` prints the
/// whole distribution table (dt_printf.c `pfprint_quantize`).
///
/// Keys beyond those the format consumes are not printed (as DTrace).
pub fn format_printa(
    pieces: &[Piece],
    keys: &[Value],
    agg_value: &AggArg,
) -> Result<String, FormatError> {
    format_inner(pieces, keys, Some(agg_value))
}

/// Formats one `printa()` line of several aggregations: the `%@` conversions take `aggs` in
/// order; one beyond the last repeats the last (dt_printf.c `dt_printf_format`). With one
/// aggregation this is [`format_printa`].
pub fn format_printa_multi(
    pieces: &[Piece],
    keys: &[Value],
    aggs: &[AggArg],
) -> Result<String, FormatError> {
    if aggs.is_empty() {
        return Err(FormatError::AggWithoutAggregation);
    }
    // Split the format at each %@ so that each part sees "its" aggregation.
    let mut out = String::new();
    let mut keys_left = keys;
    let mut agg_index = 0;
    let mut part: Vec<Piece> = Vec::new();
    let flush = |part: &mut Vec<Piece>,
                 keys_left: &mut &[Value],
                 agg: &AggArg,
                 out: &mut String|
     -> Result<(), FormatError> {
        let used = arg_slots(part).len();
        let (now, rest) = keys_left.split_at(used.min(keys_left.len()));
        out.push_str(&format_inner(part, now, Some(agg))?);
        *keys_left = rest;
        part.clear();
        Ok(())
    };
    for p in pieces {
        let is_agg = matches!(p, Piece::Conversion(c) if c.aggregation);
        part.push(p.clone());
        if is_agg {
            let agg = &aggs[agg_index.min(aggs.len() - 1)];
            flush(&mut part, &mut keys_left, agg, &mut out)?;
            agg_index += 1;
        }
    }
    if !part.is_empty() {
        let agg = &aggs[agg_index.min(aggs.len() - 1)];
        flush(&mut part, &mut keys_left, agg, &mut out)?;
    }
    Ok(out)
}

/// The aggregation value a `%@` conversion prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AggArg {
    /// An integer result (count, sum, min, max, avg, stddev), printed with the conversion.
    Int(Int),
    /// A pre-rendered distribution table (quantize, lquantize, llquantize): printed verbatim.
    Text(String),
}

fn found_name(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "an integer",
        Value::Str(_) => "a string",
        Value::Bytes(_) => "raw bytes",
        Value::Sym(_) => "a kernel symbol",
        Value::Usym { .. } => "a user symbol",
        Value::Stack(_) => "a stack",
    }
}

fn take_int(
    args: &mut std::slice::Iter<'_, Value>,
    index: usize,
    name: &str,
) -> Result<i64, FormatError> {
    match args.next() {
        None => Err(FormatError::MissingArgument {
            index,
            name: name.to_string(),
        }),
        Some(Value::Int(i)) => Ok(i.as_i64()),
        Some(v) => Err(FormatError::WrongArgument {
            index,
            name: name.to_string(),
            expected: "an integer",
            found: found_name(v),
        }),
    }
}

fn format_inner(
    pieces: &[Piece],
    args: &[Value],
    agg: Option<&AggArg>,
) -> Result<String, FormatError> {
    let mut out = String::new();
    let mut args = args.iter();
    let mut index = 0;
    for piece in pieces {
        let c = match piece {
            Piece::Literal(s) => {
                out.push_str(s);
                continue;
            }
            Piece::Conversion(c) => c,
        };
        index += 1;
        if c.kind == ConvKind::Percent {
            out.push('%');
            continue;
        }
        let mut flags = c.flags;
        let mut width: u32 = match c.width {
            Count::None => 0,
            Count::Fixed(n) => n,
            Count::Star => {
                let w = take_int(&mut args, index, &c.name)?;
                if w < 0 {
                    flags.left = true;
                }
                // Clamped, not an error: the value is only known per record (docs/probe-output.md).
                u32::try_from(w.unsigned_abs()).map_or(MAX_COUNT, |w| w.min(MAX_COUNT))
            }
        };
        let precision: Option<u32> = match c.precision {
            Count::None => None,
            Count::Fixed(n) => Some(n),
            Count::Star => {
                let p = take_int(&mut args, index, &c.name)?;
                // Negative: no precision (C's rule); above the limit: clamped.
                (p >= 0).then(|| u32::try_from(p).map_or(MAX_COUNT, |p| p.min(MAX_COUNT)))
            }
        }
        // dt_printf_format passes a precision on only when it is > 0.
        .filter(|&p| p > 0);
        if c.kind == ConvKind::Stack && flags.left {
            // A left-justified %k uses the width as the stack's indent (pfprint_stack).
            width = 0;
        }
        let spec = Spec {
            flags,
            width: width as usize,
            precision: precision.map(|p| p as usize),
        };
        if c.aggregation {
            match agg {
                None => return Err(FormatError::AggWithoutAggregation),
                Some(AggArg::Text(t)) => out.push_str(t),
                Some(AggArg::Int(i)) => format_value(&mut out, c, &spec, &Value::Int(*i), index)?,
            }
            continue;
        }
        let Some(v) = args.next() else {
            return Err(FormatError::MissingArgument {
                index,
                name: c.name.clone(),
            });
        };
        format_value(&mut out, c, &spec, v, index)?;
    }
    Ok(out)
}

/// Flags, width and precision after `*` resolution.
#[derive(Debug, Clone, Copy)]
struct Spec {
    flags: Flags,
    width: usize,
    precision: Option<usize>,
}

fn wrong(c: &Conversion, index: usize, expected: &'static str, v: &Value) -> FormatError {
    FormatError::WrongArgument {
        index,
        name: c.name.clone(),
        expected,
        found: found_name(v),
    }
}

fn format_value(
    out: &mut String,
    c: &Conversion,
    spec: &Spec,
    v: &Value,
    index: usize,
) -> Result<(), FormatError> {
    use ConvKind::*;
    match c.kind {
        Decimal | SignedDecimal | Unsigned | Octal | HexLower | HexUpper | Pointer => {
            let Value::Int(i) = v else {
                // %p of a symbolized address prints the address.
                if let (Pointer, Value::Sym(s)) = (c.kind, v) {
                    let s = format_int(s.addr as i128, 16, false, c.kind, spec);
                    out.push_str(&s);
                    return Ok(());
                }
                return Err(wrong(c, index, "an integer", v));
            };
            let i = truncate(*i, c.size);
            let (mag, radix, upper) = match c.kind {
                Decimal if i.signed => (i.as_i64() as i128, 10, false),
                Decimal | Unsigned => (i.as_u64() as i128, 10, false),
                SignedDecimal => (i.as_i64() as i128, 10, false),
                Octal => (i.as_u64() as i128, 8, false),
                HexLower | Pointer => (i.as_u64() as i128, 16, false),
                _ => (i.as_u64() as i128, 16, true),
            };
            out.push_str(&format_int(mag, radix, upper, c.kind, spec));
        }
        Char | WideChar => {
            let Value::Int(i) = v else {
                return Err(wrong(c, index, "an integer", v));
            };
            let ch = if c.kind == Char {
                char::from(i.as_u64() as u8)
            } else {
                char::from_u32(i.as_u64() as u32).unwrap_or('\u{fffd}')
            };
            pad_str(out, &ch.to_string(), spec, false);
        }
        EscapedChar => {
            let Value::Int(i) = v else {
                return Err(wrong(c, index, "an integer", v));
            };
            pad_str(out, &escape_bytes(&[i.as_u64() as u8]), spec, true);
        }
        Str | WideStr | InetAddr => {
            let s = match v {
                Value::Str(s) => s.clone(),
                Value::Sym(s) => s.without_offset(),
                Value::Usym { sym, .. } => sym.without_offset(),
                Value::Int(i) if c.kind == InetAddr => i.as_u64().to_string(),
                _ => return Err(wrong(c, index, "a string", v)),
            };
            pad_str(out, &s, spec, true);
        }
        EscapedStr => {
            let Value::Str(s) = v else {
                return Err(wrong(c, index, "a string", v));
            };
            pad_str(out, &escape_bytes(s.as_bytes()), spec, true);
        }
        KernelAddr | UserAddr => {
            let s = match v {
                Value::Sym(s) => s.with_offset(),
                Value::Usym { sym, .. } => sym.with_offset(),
                Value::Int(i) => format!("0x{:x}", i.as_u64()),
                _ => return Err(wrong(c, index, "an address", v)),
            };
            pad_str(out, &s, spec, true);
        }
        Port => {
            let Value::Int(i) = v else {
                return Err(wrong(c, index, "an integer", v));
            };
            pad_str(out, &(i.as_u64() as u16).to_string(), spec, true);
        }
        Time | Time822 => {
            let Value::Int(i) = v else {
                return Err(wrong(c, index, "an integer", v));
            };
            let secs = i.as_i64().div_euclid(1_000_000_000);
            let s = if c.kind == Time {
                format_time_y(secs)
            } else {
                format_time_822(secs)
            };
            pad_str(out, &s, spec, true);
        }
        FloatExp { upper } | FloatShortest { upper } => {
            let Value::Int(i) = v else {
                return Err(wrong(c, index, "a number", v));
            };
            let f = i.as_i128() as f64;
            let s = if matches!(c.kind, FloatExp { .. }) {
                fmt_exp(f, spec.precision.unwrap_or(6), upper, spec.flags.alt)
            } else {
                fmt_general(f, spec.precision.unwrap_or(6), upper, spec.flags.alt)
            };
            out.push_str(&pad_number(s, spec));
        }
        FloatFixed => {
            let Value::Int(i) = v else {
                return Err(wrong(c, index, "a number", v));
            };
            let f = i.as_i128() as f64;
            let mut s = format!("{:.*}", spec.precision.unwrap_or(6), f);
            if spec.flags.alt && !s.contains('.') {
                s.push('.');
            }
            out.push_str(&pad_number(s, spec));
        }
        Stack => {
            let Value::Stack(st) = v else {
                return Err(wrong(c, index, "a stack", v));
            };
            let indent = if c.flags.left {
                spec_width_for_stack(c)
            } else {
                0
            };
            out.push_str(&format_stack(st, indent));
        }
        Percent => out.push('%'),
    }
    Ok(())
}

fn spec_width_for_stack(c: &Conversion) -> usize {
    match c.width {
        Count::Fixed(n) => n as usize,
        _ => 0,
    }
}

/// Renders a stack as DTrace's `stack()` does: a newline, then one frame per line, each indented
/// by `indent` spaces (DTrace's `stackindent` option, default 14) and printed with its offset
/// (dt_consume.c `dt_print_stack`).
pub fn format_stack(stack: &Stack, indent: usize) -> String {
    let mut s = String::from("\n");
    for f in &stack.frames {
        let _ = writeln!(s, "{:indent$}{}", "", f.with_offset());
    }
    s
}

/// C's `%hh`/`%h` truncation of the argument.
pub(super) fn truncate(i: Int, size: SizePrefix) -> Int {
    match size {
        SizePrefix::Hh if i.bytes > 1 => Int {
            bits: i.bits & 0xff,
            bytes: 1,
            signed: i.signed,
        },
        SizePrefix::H if i.bytes > 2 => Int {
            bits: i.bits & 0xffff,
            bytes: 2,
            signed: i.signed,
        },
        _ => i,
    }
}

/// C printf integer formatting of `v` (sign included) in `radix`.
fn format_int(v: i128, radix: u32, upper: bool, kind: ConvKind, spec: &Spec) -> String {
    let neg = v < 0;
    let mag = v.unsigned_abs();
    let mut digits = match radix {
        8 => format!("{mag:o}"),
        16 if upper => format!("{mag:X}"),
        16 => format!("{mag:x}"),
        _ => mag.to_string(),
    };
    if let Some(p) = spec.precision
        && digits.len() < p
    {
        digits = format!("{}{digits}", "0".repeat(p - digits.len()));
    }
    let signed_conv = matches!(kind, ConvKind::Decimal | ConvKind::SignedDecimal);
    let mut prefix = String::new();
    if neg {
        prefix.push('-');
    } else if signed_conv && spec.flags.plus {
        prefix.push('+');
    } else if signed_conv && spec.flags.space {
        prefix.push(' ');
    }
    if spec.flags.alt {
        match radix {
            8 if !digits.starts_with('0') => digits.insert(0, '0'),
            16 if mag != 0 => prefix.push_str(if upper { "0X" } else { "0x" }),
            _ => {}
        }
    }
    let len = prefix.len() + digits.len();
    if len >= spec.width {
        return prefix + &digits;
    }
    let pad = spec.width - len;
    if spec.flags.left {
        format!("{prefix}{digits}{}", " ".repeat(pad))
    } else if spec.flags.zero && spec.precision.is_none() {
        format!("{prefix}{}{digits}", "0".repeat(pad))
    } else {
        format!("{}{prefix}{digits}", " ".repeat(pad))
    }
}

/// Pads an already-formatted number (floats) to the width, honouring `-` and `0`.
fn pad_number(s: String, spec: &Spec) -> String {
    let mut s = s;
    if !s.starts_with('-') {
        if spec.flags.plus {
            s.insert(0, '+');
        } else if spec.flags.space {
            s.insert(0, ' ');
        }
    }
    let n = s.chars().count();
    if n >= spec.width {
        return s;
    }
    let pad = spec.width - n;
    if spec.flags.left {
        s + &" ".repeat(pad)
    } else if spec.flags.zero && !s.contains("inf") && !s.contains("nan") {
        let sign_len = usize::from(s.starts_with(['-', '+', ' ']));
        format!("{}{}{}", &s[..sign_len], "0".repeat(pad), &s[sign_len..])
    } else {
        " ".repeat(pad) + &s
    }
}

/// `%s`-style padding; `use_precision` truncates to the precision (characters).
fn pad_str(out: &mut String, s: &str, spec: &Spec, use_precision: bool) {
    let s: String = match spec.precision {
        Some(p) if use_precision => s.chars().take(p).collect(),
        _ => s.to_string(),
    };
    let n = s.chars().count();
    if n >= spec.width {
        out.push_str(&s);
    } else if spec.flags.left {
        out.push_str(&s);
        out.push_str(&" ".repeat(spec.width - n));
    } else {
        out.push_str(&" ".repeat(spec.width - n));
        out.push_str(&s);
    }
}

/// C escapes for `%S`/`%C`: `\0 \a \b \f \n \r \t \v \" \\` and `\ooo` (3 octal digits) for other
/// bytes outside `!`..=`~`; a space is kept (libdtrace `strchr2esc`).
pub fn escape_bytes(b: &[u8]) -> String {
    let mut s = String::new();
    for &c in b {
        match c {
            0 => s.push_str("\\0"),
            7 => s.push_str("\\a"),
            8 => s.push_str("\\b"),
            12 => s.push_str("\\f"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            11 => s.push_str("\\v"),
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b' ' => s.push(' '),
            b'!'..=b'~' => s.push(c as char),
            _ => {
                let _ = write!(s, "\\{c:03o}");
            }
        }
    }
    s
}

/// C's `%e`: `d.ddde±XX` with at least two exponent digits.
fn fmt_exp(f: f64, prec: usize, upper: bool, alt: bool) -> String {
    if !f.is_finite() {
        return nonfinite(f, upper);
    }
    let s = format!("{f:.prec$e}");
    let (mant, exp) = s.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("exponent is an integer");
    let mut mant = mant.to_string();
    if alt && prec == 0 {
        mant.push('.');
    }
    let sign = if exp < 0 { '-' } else { '+' };
    let e = if upper { 'E' } else { 'e' };
    format!("{mant}{e}{sign}{:02}", exp.abs())
}

/// C's `%g`: `%e` if the exponent is < -4 or >= the precision, else `%f`; trailing zeros removed
/// unless `#`.
fn fmt_general(f: f64, prec: usize, upper: bool, alt: bool) -> String {
    if !f.is_finite() {
        return nonfinite(f, upper);
    }
    let p = prec.max(1);
    let probe = format!("{f:.*e}", p - 1);
    let exp: i64 = probe
        .split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0);
    let mut s = if exp < -4 || exp >= p as i64 {
        fmt_exp(f, p - 1, upper, alt)
    } else {
        format!("{f:.*}", (p as i64 - 1 - exp).max(0) as usize)
    };
    if !alt {
        let (mant, rest) = match s.find(['e', 'E']) {
            Some(i) => (s[..i].to_string(), s[i..].to_string()),
            None => (s.clone(), String::new()),
        };
        if mant.contains('.') {
            let m = mant.trim_end_matches('0').trim_end_matches('.');
            s = format!("{m}{rest}");
        }
    }
    s
}

fn nonfinite(f: f64, upper: bool) -> String {
    let s = if f.is_nan() {
        "nan"
    } else if f < 0.0 {
        "-inf"
    } else {
        "inf"
    };
    if upper {
        s.to_uppercase()
    } else {
        s.to_string()
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];

/// `%Y`: `YYYY Mon DD HH:MM:SS` with the day space-padded, as ctime(3) fields rearranged
/// (dt_printf.c `pfprint_time`), in UTC.
pub fn format_time_y(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = crate::civil::civil_from_days(days);
    format!(
        "{y} {} {d:>2} {:02}:{:02}:{:02}",
        MONTHS[(m - 1) as usize],
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// `%T`: RFC 822 `Day, DD Mon YYYY HH:MM:SS UTC` (dt_printf.c `pfprint_time822`), in UTC.
pub fn format_time_822(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = crate::civil::civil_from_days(days);
    format!(
        "{}, {d:02} {} {y} {:02}:{:02}:{:02} UTC",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(m - 1) as usize],
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(fmt: &str, args: &[Value]) -> String {
        format(&parse(fmt).unwrap(), args).unwrap()
    }

    #[test]
    fn integer_conversions() {
        assert_eq!(
            f(
                "%d|%i|%u",
                &[Value::i64(-5), Value::i64(-5), Value::i64(-5)]
            ),
            "-5|-5|18446744073709551611"
        );
        // %d of an unsigned type prints unsigned (pfcheck_dint).
        assert_eq!(f("%d", &[Value::u64(u64::MAX)]), "18446744073709551615");
        // The argument's own width decides: a 32-bit -1 in hex is 8 digits.
        assert_eq!(f("%x", &[Value::Int(Int::i32(-1))]), "ffffffff");
        assert_eq!(
            f(
                "%x %X %o",
                &[Value::i64(255), Value::i64(255), Value::i64(8)]
            ),
            "ff FF 10"
        );
        assert_eq!(
            f(
                "%#x %#o %#x",
                &[Value::i64(255), Value::i64(8), Value::i64(0)]
            ),
            "0xff 010 0"
        );
        assert_eq!(
            f(
                "[%5d][%-5d][%05d]",
                &[Value::i64(42), Value::i64(42), Value::i64(-42)]
            ),
            "[   42][42   ][-0042]"
        );
        assert_eq!(
            f(
                "[%+d][% d][%+d]",
                &[Value::i64(3), Value::i64(3), Value::i64(-3)]
            ),
            "[+3][ 3][-3]"
        );
        assert_eq!(
            f("[%.4d][%8.4d]", &[Value::i64(7), Value::i64(-7)]),
            "[0007][   -0007]"
        );
        // %.0d is treated as no precision (dt_printf_format emits only prec > 0).
        assert_eq!(f("[%.0d]", &[Value::i64(0)]), "[0]");
        assert_eq!(
            f(
                "%lld %ld %hd %hhd",
                &[
                    Value::i64(1),
                    Value::i64(2),
                    Value::i64(65537),
                    Value::i64(257)
                ]
            ),
            "1 2 1 1"
        );
        assert_eq!(f("%'d", &[Value::i64(1234567)]), "1234567");
        assert_eq!(f("%p", &[Value::u64(0xffff_8000_1234)]), "ffff80001234");
        assert_eq!(f("%?p|", &[Value::u64(0x10)]), "              10|");
    }

    #[test]
    fn star_width_and_precision() {
        assert_eq!(f("[%*d]", &[Value::i64(6), Value::i64(12)]), "[    12]");
        assert_eq!(f("[%*d]", &[Value::i64(-6), Value::i64(12)]), "[12    ]");
        assert_eq!(f("[%.*s]", &[Value::i64(3), Value::str("abcdef")]), "[abc]");
        assert_eq!(
            f(
                "[%-*.*s]",
                &[Value::i64(5), Value::i64(2), Value::str("xyz")]
            ),
            "[xy   ]"
        );
    }

    #[test]
    fn issue_22_star_width_is_clamped() {
        // `%*d` with INT_MAX (and beyond, and INT_MIN) pads to MAX_COUNT, not to 2 GiB.
        for w in [2_147_483_647, i64::MAX, -2_147_483_648, i64::MIN] {
            let s = f("%*d", &[Value::i64(w), Value::i64(7)]);
            assert_eq!(s.len(), MAX_COUNT as usize, "width {w}");
            assert_eq!(s.trim(), "7");
            assert_eq!(s.starts_with('7'), w < 0, "a negative width left-justifies");
        }
        let s = f("%.*d", &[Value::i64(i64::MAX), Value::i64(7)]);
        assert_eq!(s.len(), MAX_COUNT as usize);
        assert!(s.ends_with("07"));
        assert_eq!(f("%.*s|", &[Value::i64(-1), Value::str("abc")]), "abc|");
    }

    #[test]
    fn strings_and_chars() {
        assert_eq!(
            f(
                "[%s][%10s][%-10s][%.2s]",
                &[
                    Value::str("bash"),
                    Value::str("bash"),
                    Value::str("bash"),
                    Value::str("bash")
                ]
            ),
            "[bash][      bash][bash      ][ba]"
        );
        assert_eq!(
            f("%c%c", &[Value::i64(104), Value::Int(Int::i32(105))]),
            "hi"
        );
        assert_eq!(
            f("%S", &[Value::str("a\tb\n\"q\" \x01")]),
            "a\\tb\\n\\\"q\\\" \\001"
        );
        assert_eq!(f("%C", &[Value::i64(10)]), "\\n");
    }

    #[test]
    fn floats_follow_c() {
        assert_eq!(
            f(
                "%f %e %g",
                &[Value::i64(3), Value::i64(1500), Value::i64(100000)]
            ),
            "3.000000 1.500000e+03 100000"
        );
        assert_eq!(
            f(
                "%g %G %E",
                &[Value::i64(1000000), Value::i64(1234567), Value::i64(-2)]
            ),
            "1e+06 1.23457E+06 -2.000000E+00"
        );
        assert_eq!(f("[%8.2f]", &[Value::i64(5)]), "[    5.00]");
    }

    #[test]
    fn addresses_and_times() {
        let sym = crate::value::Symbol {
            addr: 0x1010,
            module: Some("vmlinux".into()),
            name: Some("do_sys_open".into()),
            offset: 0x10,
        };
        assert_eq!(
            f("%a", &[Value::Sym(sym.clone())]),
            "vmlinux`do_sys_open+0x10"
        );
        assert_eq!(f("%a", &[Value::i64(0x1234)]), "0x1234");
        // 2026-11-30 10:00:00 UTC = 1796032800 s.
        assert_eq!(
            f("%Y", &[Value::i64(1_796_032_800_000_000_000)]),
            "2026 Nov 30 10:00:00"
        );
        assert_eq!(f("%T", &[Value::i64(0)]), "Thu, 01 Jan 1970 00:00:00 UTC");
        assert_eq!(
            f("%Y", &[Value::i64(86_400 * 4 * 1_000_000_000)]),
            "1970 Jan  5 00:00:00"
        );
    }

    #[test]
    fn argument_errors() {
        let p = parse("%d %d").unwrap();
        assert!(matches!(
            format(&p, &[Value::i64(1)]),
            Err(FormatError::MissingArgument { index: 2, .. })
        ));
        let p = parse("%d").unwrap();
        assert!(matches!(
            format(&p, &[Value::str("x")]),
            Err(FormatError::WrongArgument { index: 1, .. })
        ));
        let p = parse("%@d").unwrap();
        assert_eq!(format(&p, &[]), Err(FormatError::AggWithoutAggregation));
        assert_eq!(
            format_printa(&p, &[], &AggArg::Int(Int::i64(9))).unwrap(),
            "9"
        );
    }
}
