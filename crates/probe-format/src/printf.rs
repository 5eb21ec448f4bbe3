//! DTrace's `printf()`/`printa()` format strings: [`parse`] into [`Piece`]s, check argument kinds
//! with [`Conversion::arg_kind`] / [`arg_slots`], and render with [`format()`] / [`format_printa`].
//!
//! Follows the DTrace guide, chapter "Output Formatting" (printf: conversion specifications, flag
//! specifiers, width and precision specifiers, size prefixes, conversion formats) and the consumer
//! in libdtrace `dt_printf.c` for the details the guide leaves open:
//!
//! - Flags, width and precision may appear in any order before the size prefix; a `0` seen before
//!   any digit is the zero-pad flag; `-` and `0` cancel each other, the later one wins
//!   (`dt_printf_create`). `?` sets the width to 16 (a 64-bit pointer's hex digits).
//! - A size prefix (`h`, `hh`, `l`, `ll`, `L`, `w`) only selects the conversion for type checking;
//!   the printed width follows the argument's own type (`dt_printf_validate` re-derives the C size
//!   prefix from the argument's size). `%hh`/`%h` also truncate like C (`char`/`short`).
//! - `%d` prints an unsigned argument as unsigned (`pfcheck_dint` turns it into `%u`); `%i` is always
//!   signed.
//! - A precision of 0 (`%.0d`, `%.0f`) is not passed on: it behaves as if absent (`dt_printf_format`
//!   only emits a precision greater than 0).
//! - `%p` prints hexadecimal digits without `0x` (its C format is `%x`).
//! - `%'` (thousands grouping) is accepted and, as in the C locale, inserts nothing.
//! - `%Y` prints `YYYY Mon DD HH:MM:SS` and `%T` RFC 822 time; both in UTC (DTrace uses the local
//!   time zone: Sightline does not read the time-zone database).
//! - Backslash escapes (`\n`, `\t`, `\\`, octal) belong to the D string literal and are already
//!   decoded by the front end: the text given to [`parse`] is the string's value.

use crate::value::{Int, Stack, Value};
use std::fmt::Write as _;
use std::ops::Range;

mod parser;
mod render;

pub use self::{parser::*, render::*};

/// A parse or formatting error of a printf-style format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The format string is empty (`printf("")`; DTrace: "format string is empty").
    #[error("format string is empty")]
    Empty,
    /// A `%` at the end of the string with no conversion name.
    #[error("format conversion #{index} name expected before end of format string")]
    MissingName {
        /// 1-based number of the conversion.
        index: usize,
        /// Byte range of the conversion in the format string.
        span: Range<usize>,
    },
    /// A conversion name that DTrace does not define (e.g. `%q`, `%lf`).
    #[error("format conversion #{index} is undefined: %{name}")]
    Undefined {
        /// 1-based number of the conversion.
        index: usize,
        /// The name as written, size prefix included (`lq`).
        name: String,
        /// Byte range of the conversion in the format string.
        span: Range<usize>,
    },
    /// Two `*` for the width or for the precision.
    #[error("format conversion #{index} has more than one '*' specified for the output {what}")]
    TwoStars {
        /// 1-based number of the conversion.
        index: usize,
        /// `width` or `precision`.
        what: &'static str,
        /// Byte range of the conversion in the format string.
        span: Range<usize>,
    },
    /// Two `.` in one conversion.
    #[error("format conversion #{index} has more than one '.' specified")]
    TwoDots {
        /// 1-based number of the conversion.
        index: usize,
        /// Byte range of the conversion in the format string.
        span: Range<usize>,
    },
    /// A positional conversion (`%1$d`), which DTrace does not support.
    #[error("format conversion #{index} uses unsupported positional format (%n$)")]
    Positional {
        /// 1-based number of the conversion.
        index: usize,
        /// Byte range of the conversion in the format string.
        span: Range<usize>,
    },
    /// A width or precision written as a number above [`MAX_COUNT`] (`%99999999999d`).
    ///
    /// DTrace reads the digits into a C `int` without an overflow check, then lets `printf(3C)`
    /// pad to that width; Sightline bounds it so one record cannot print gigabytes.
    #[error("format conversion #{index} has a {what} above the limit of {limit}")]
    CountTooLarge {
        /// 1-based number of the conversion.
        index: usize,
        /// `width` or `precision`.
        what: &'static str,
        /// The limit ([`MAX_COUNT`]).
        limit: u32,
        /// Byte range of the number in the format string.
        span: Range<usize>,
    },
    /// `%%` written with flags (`%-%`).
    #[error("format conversion #{index} cannot be combined with other format flags: %%")]
    PercentWithFlags {
        /// 1-based number of the conversion.
        index: usize,
        /// Byte range of the conversion in the format string.
        span: Range<usize>,
    },
    /// Fewer arguments than the conversions consume (at format time).
    #[error("conversion #{index} (%{name}) is missing a corresponding value argument")]
    MissingArgument {
        /// 1-based number of the conversion.
        index: usize,
        /// The conversion name.
        name: String,
    },
    /// An argument of a kind the conversion cannot print (at format time).
    #[error("argument for conversion #{index} (%{name}) is {found}, expected {expected}")]
    WrongArgument {
        /// 1-based number of the conversion.
        index: usize,
        /// The conversion name.
        name: String,
        /// What the conversion expects.
        expected: &'static str,
        /// What was given.
        found: &'static str,
    },
    /// `%@` outside `printa()`, or `printa()` without an aggregation value.
    #[error("%@ conversion requires an aggregation")]
    AggWithoutAggregation,
}

/// The flags of one conversion (guide: "Flag Specifiers").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags {
    /// `-`: left-justify within the width.
    pub left: bool,
    /// `0`: pad with zeros instead of spaces (numeric conversions).
    pub zero: bool,
    /// `+`: always print a sign for signed conversions.
    pub plus: bool,
    /// ` `: a space before a non-negative signed value.
    pub space: bool,
    /// `#`: alternate form (`0` prefix for `%o`, `0x`/`0X` for nonzero `%x`/`%X`).
    pub alt: bool,
    /// `'`: thousands grouping (no effect in the C locale, which Sightline uses).
    pub group: bool,
}

/// The largest width or precision a conversion may have, in characters: written as a number it is a
/// [`FormatError::CountTooLarge`] above this; taken from a `*` argument it is clamped to this
/// (docs/probe-output.md, "Limits"). 65,535 pads any column a terminal shows while keeping one
/// conversion's output under 64 KiB.
pub const MAX_COUNT: u32 = 65_535;

impl FormatError {
    /// The byte range of the format string the error concerns, when it concerns one conversion.
    pub fn span(&self) -> Option<Range<usize>> {
        match self {
            FormatError::MissingName { span, .. }
            | FormatError::Undefined { span, .. }
            | FormatError::TwoStars { span, .. }
            | FormatError::TwoDots { span, .. }
            | FormatError::CountTooLarge { span, .. }
            | FormatError::Positional { span, .. }
            | FormatError::PercentWithFlags { span, .. } => Some(span.clone()),
            FormatError::Empty
            | FormatError::MissingArgument { .. }
            | FormatError::WrongArgument { .. }
            | FormatError::AggWithoutAggregation => None,
        }
    }
}

/// A width or precision: absent, a number, or `*` (taken from the next argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Count {
    /// Not given.
    #[default]
    None,
    /// A literal number, at most [`MAX_COUNT`].
    Fixed(u32),
    /// `*`: an `int` argument supplies it (a negative width means left-justify; a negative
    /// precision means none); values above [`MAX_COUNT`] are clamped to it.
    Star,
}

/// The size prefix written before the conversion letter (guide: "Size Prefixes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SizePrefix {
    /// None.
    #[default]
    None,
    /// `hh` (`char`; a Sightline extension, as in C99).
    Hh,
    /// `h` (`short`).
    H,
    /// `l` (`long`, or `wint_t`/wide string with `c`/`s`).
    L,
    /// `ll` (`long long`).
    Ll,
    /// `L` (`long double`).
    BigL,
    /// `w` (`wchar_t` with `c`, wide string with `s`).
    W,
}

impl SizePrefix {
    /// The prefix as written (`""`, `"hh"`, `"h"`, `"l"`, `"ll"`, `"L"`, `"w"`).
    pub fn as_str(self) -> &'static str {
        match self {
            SizePrefix::None => "",
            SizePrefix::Hh => "hh",
            SizePrefix::H => "h",
            SizePrefix::L => "l",
            SizePrefix::Ll => "ll",
            SizePrefix::BigL => "L",
            SizePrefix::W => "w",
        }
    }
}

/// What a conversion prints (guide: "Conversion Formats").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvKind {
    /// `%a`: kernel address as ``module`symbol+0xoffset``.
    KernelAddr,
    /// `%A`: user address as ``object`symbol+0xoffset``.
    UserAddr,
    /// `%c`: an integer as an ASCII character.
    Char,
    /// `%C`: an integer as an ASCII character, non-printables as C escapes.
    EscapedChar,
    /// `%d`: signed decimal for signed types, unsigned for unsigned types.
    Decimal,
    /// `%i`: signed decimal.
    SignedDecimal,
    /// `%u`: unsigned decimal.
    Unsigned,
    /// `%o`: unsigned octal.
    Octal,
    /// `%x`: unsigned hexadecimal, lowercase.
    HexLower,
    /// `%X`: unsigned hexadecimal, uppercase.
    HexUpper,
    /// `%p`: a pointer as hexadecimal (no `0x`; with `#`, `0x`).
    Pointer,
    /// `%e` / `%E`: floating point, exponent form.
    FloatExp {
        /// `%E`.
        upper: bool,
    },
    /// `%f`: floating point, fixed form.
    FloatFixed,
    /// `%g` / `%G`: shortest of `%e` and `%f`.
    FloatShortest {
        /// `%G`.
        upper: bool,
    },
    /// `%s`: a string.
    Str,
    /// `%S`: a string with non-printables as C escapes.
    EscapedStr,
    /// `%k`: a stack (`stack()`/`ustack()` result).
    Stack,
    /// `%I`: an IPv4/IPv6 address string (printed as given: no name lookup).
    InetAddr,
    /// `%P`: a port number (`uint16_t`; printed as a number: no service lookup).
    Port,
    /// `%Y`: a time in ns since the epoch as `YYYY Mon DD HH:MM:SS` (UTC).
    Time,
    /// `%T`: a time in ns since the epoch in RFC 822 form (UTC).
    Time822,
    /// `%lc` / `%wc`: a wide character (printed as the Unicode scalar).
    WideChar,
    /// `%ls` / `%ws`: a wide string (Sightline's strings are UTF-8: printed as `%s`).
    WideStr,
    /// `%%`: a literal percent sign; consumes no argument.
    Percent,
}

/// The kind of argument a conversion consumes, for semantic checks (DTrace's `pfc_check`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// Any integer type (`char, short, int, long, or long long`).
    Int,
    /// An integer of at most 4 bytes (`char, short, or int`): `%c`, `%C`.
    SmallInt,
    /// A pointer or integer address (`%a`, `%A`, `%p`).
    Addr,
    /// A floating-point value (D on BPF has none; sema rejects these).
    Float,
    /// A string (`char []` or `string`).
    Str,
    /// A stack (`stack()`, `ustack()`).
    Stack,
    /// A 64-bit time (`int64_t`) for `%Y`, `%T`.
    Time,
    /// A `uint16_t` port for `%P`.
    Port,
    /// Nothing (`%%`).
    None,
}

/// One `%...` conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversion {
    /// Flags.
    pub flags: Flags,
    /// Field width.
    pub width: Count,
    /// Precision.
    pub precision: Count,
    /// Size prefix as written.
    pub size: SizePrefix,
    /// What it prints.
    pub kind: ConvKind,
    /// `%@...`: prints the aggregation's value in `printa()`, consumes no argument.
    pub aggregation: bool,
    /// The conversion's name as DTrace looks it up (size prefix + letter, e.g. `lld`).
    pub name: String,
    /// Byte range of the whole conversion (from `%`) in the format string.
    pub span: Range<usize>,
}

impl Conversion {
    /// The kind of value argument this conversion consumes (ignoring `*` width/precision, which
    /// consume `int`s before it, and ignoring `%@`, which consumes the aggregation value).
    pub fn arg_kind(&self) -> ArgKind {
        match self.kind {
            ConvKind::KernelAddr | ConvKind::UserAddr | ConvKind::Pointer => ArgKind::Addr,
            ConvKind::Char | ConvKind::EscapedChar | ConvKind::WideChar => ArgKind::SmallInt,
            ConvKind::Decimal
            | ConvKind::SignedDecimal
            | ConvKind::Unsigned
            | ConvKind::Octal
            | ConvKind::HexLower
            | ConvKind::HexUpper => ArgKind::Int,
            ConvKind::FloatExp { .. } | ConvKind::FloatFixed | ConvKind::FloatShortest { .. } => {
                ArgKind::Float
            }
            ConvKind::Str | ConvKind::EscapedStr | ConvKind::InetAddr | ConvKind::WideStr => {
                ArgKind::Str
            }
            ConvKind::Stack => ArgKind::Stack,
            ConvKind::Time | ConvKind::Time822 => ArgKind::Time,
            ConvKind::Port => ArgKind::Port,
            ConvKind::Percent => ArgKind::None,
        }
    }
}

/// A piece of a parsed format: literal text or a conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text printed as is.
    Literal(String),
    /// A conversion.
    Conversion(Conversion),
}

/// What one argument position of a format consumes, in order (see [`arg_slots`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgSlot {
    /// A `*` width of conversion `conv` (0-based index among conversions): an integer.
    Width {
        /// 0-based conversion index.
        conv: usize,
    },
    /// A `*` precision of conversion `conv`: an integer.
    Precision {
        /// 0-based conversion index.
        conv: usize,
    },
    /// The value of conversion `conv`, of kind `kind`.
    Value {
        /// 0-based conversion index.
        conv: usize,
        /// The kind it must be.
        kind: ArgKind,
    },
}

/// The arguments a parsed format consumes, in order: for each conversion, its `*` width, then its
/// `*` precision (both `int`), then its value (except `%%` and `%@`, which take none). Sema compares
/// these with the call's arguments; `printf` must supply exactly this many (DTrace: "prototype
/// mismatch"), `printa` supplies the aggregation's keys (extra keys are not printed).
pub fn arg_slots(pieces: &[Piece]) -> Vec<ArgSlot> {
    let mut out = Vec::new();
    for (conv, c) in conversions(pieces).enumerate() {
        if c.kind == ConvKind::Percent {
            continue;
        }
        if c.width == Count::Star {
            out.push(ArgSlot::Width { conv });
        }
        if c.precision == Count::Star {
            out.push(ArgSlot::Precision { conv });
        }
        if !c.aggregation {
            out.push(ArgSlot::Value {
                conv,
                kind: c.arg_kind(),
            });
        }
    }
    out
}

/// The conversions of a parsed format, in order.
pub fn conversions(pieces: &[Piece]) -> impl Iterator<Item = &Conversion> {
    pieces.iter().filter_map(|p| match p {
        Piece::Conversion(c) => Some(c),
        Piece::Literal(_) => None,
    })
}

/// True when the format has a `%@` conversion (a `printa()` format that prints the value itself).
pub fn has_aggregation_conversion(pieces: &[Piece]) -> bool {
    conversions(pieces).any(|c| c.aggregation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arg_slots_count_stars_and_skip_agg() {
        let p = parse("%*.*d %s %@d %%").unwrap();
        assert_eq!(
            arg_slots(&p),
            vec![
                ArgSlot::Width { conv: 0 },
                ArgSlot::Precision { conv: 0 },
                ArgSlot::Value {
                    conv: 0,
                    kind: ArgKind::Int
                },
                ArgSlot::Value {
                    conv: 1,
                    kind: ArgKind::Str
                },
            ]
        );
    }

    // Guide, "Output Formatting" > printf > "Conversion Formats" and "Flag Specifiers".
}
