//! The `print()` action's output: a typed value laid out member by member.
//!
//! `print(ptr)` records the address and the bytes of `*ptr`; the consumer prints them as
//! Oracle's DTrace for Linux does (`dt_print_type` in libdtrace/dt_printf.c, the format of the
//! kernel's and libbpf's BTF data dumps):
//!
//! ```text
//! 0xffff9b7aca7e0000 = *
//!                                             (struct test_struct) {
//!                                              .a = (int)1,
//!                                              .b = (char [5]) [
//!                                               (char)'t',
//!                                              ],
//!                                              .s = (struct) {
//!                                               .e = (void *)0xffff9b7aca7e0000,
//!                                              },
//!                                              .h = (enum eh)SECONDVAL,
//!                                             }
//! ```
//!
//! - The first line is the address (`%p`: `0x…`, `(nil)` for 0) and ` = *`.
//! - The value starts 44 columns in; each level of nesting adds one column.
//! - Every value is written `(type)value,` with its C type name; members add `.name = `.
//! - Members, elements and nested values whose bytes are all zero are left out (the top value
//!   never is). An enum prints its enumerator's name; a `char` prints as `'c'`; a `char` array
//!   stops at its first NUL; pointers print in hex; other integers in decimal.
//! - Floating-point values and functions are not printed.
//! - A value past the recorded size (option `printsize`, default 8192 bytes) or nested 10
//!   levels deep is written `...`, and printing stops there; open braces are still closed.
//!
//! [`PrintType`] is the self-contained description of the type that the compiler builds from BTF
//! (kernel types and those the D program defines), so the consumer needs no type table.

use std::fmt::Write;

/// Column where `print()`'s value starts (Oracle's `DT_PRINT_STARTINDENT`).
pub const START_INDENT: usize = 44;

/// Nesting depth at which `print()` stops with `...` (Oracle's `DT_PRINT_DEPTH`).
pub const MAX_DEPTH: usize = 10;

/// Default for option `printsize`: the most bytes of a value `print()` records (Oracle's
/// `DT_PRINT_DEF_SIZE`).
pub const DEFAULT_PRINTSIZE: u32 = 8192;

/// A C type as `print()` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintType {
    /// Its C name as written in the output (`int`, `char [5]`, `struct page *`, `union`).
    pub name: String,
    /// Size in bytes (of the type the name resolves to).
    pub size: u32,
    /// What kind of value it is.
    pub kind: PrintKind,
}

/// The kinds of [`PrintType`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrintKind {
    /// An integer (`bool` included) of [`PrintType::size`] bytes; `char` is a `char` spelled so,
    /// printed as a character.
    Int {
        /// Signed?
        signed: bool,
        /// Printed as `'c'`.
        char_: bool,
    },
    /// An enum: its value printed as the enumerator's name when one has it.
    Enum {
        /// Signed?
        signed: bool,
        /// Enumerators: name and value.
        values: Vec<(String, i64)>,
    },
    /// A pointer, printed in hex.
    Pointer,
    /// An array of `len` elements.
    Array {
        /// Element type.
        elem: Box<PrintType>,
        /// Number of elements.
        len: u32,
    },
    /// A struct (or union, `union`), with its members in declaration order.
    Record {
        /// Union?
        union: bool,
        /// Members.
        members: Vec<PrintMember>,
    },
    /// A value `print()` does not show (floating point, a function).
    Opaque,
    /// A value nested past [`MAX_DEPTH`]: printed as `...`.
    Deep,
}

/// One member of a [`PrintKind::Record`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintMember {
    /// Name (empty for an anonymous struct or union member).
    pub name: String,
    /// Offset from the start of the record, in bits.
    pub bit_offset: u32,
    /// Width of a bit-field in bits (0: not a bit-field).
    pub bit_size: u32,
    /// Type.
    pub ty: PrintType,
}

/// Printing stopped at `...`.
struct Stop;

struct Printer<'a> {
    out: String,
    data: &'a [u8],
    /// Depths of the structs and unions whose `{` is printed and `}` not yet.
    open: Vec<usize>,
}

/// The text `print()` writes for the value at `addr` of type `ty`, whose first bytes are
/// `data` (as many as were recorded: `printsize` or the type's size, whichever is smaller).
/// Every line ends with a newline.
pub fn format_print(addr: u64, ty: &PrintType, data: &[u8]) -> String {
    let mut p = Printer {
        out: String::new(),
        data,
        open: Vec::new(),
    };
    if addr == 0 {
        p.out.push_str("(nil) = *\n");
    } else {
        let _ = writeln!(p.out, "{addr:#x} = *");
    }
    let _ = p.value(None, ty, 0, 0, 0);
    p.close_to(0);
    p.out
}

impl Printer<'_> {
    fn indent(&mut self, depth: usize) {
        let n = START_INDENT + depth;
        self.out.extend(std::iter::repeat_n(' ', n));
    }

    /// Closes the open structs at `depth` and deeper.
    fn close_to(&mut self, depth: usize) {
        while let Some(&d) = self.open.last() {
            if d < depth {
                break;
            }
            self.open.pop();
            self.indent(d);
            self.out.push_str(if d > 0 { "},\n" } else { "}\n" });
        }
    }

    fn bytes(&self, at: usize, len: usize) -> &[u8] {
        let end = at.saturating_add(len).min(self.data.len());
        self.data.get(at.min(end)..end).unwrap_or(&[])
    }

    /// The `bits` bits at bit offset `bit_off` (little endian), as an unsigned number.
    fn bits(&self, bit_off: usize, bits: u32) -> u64 {
        let mut v = 0u64;
        for i in 0..bits.min(64) as usize {
            let b = bit_off + i;
            let byte = self.data.get(b / 8).copied().unwrap_or(0);
            v |= u64::from((byte >> (b % 8)) & 1) << i;
        }
        v
    }

    /// Little-endian integer of `size` bytes at `at`, sign-extended when `signed`.
    fn int(&self, at: usize, size: u32, signed: bool) -> i128 {
        let b = self.bytes(at, size.min(8) as usize);
        let mut raw = [0u8; 8];
        raw[..b.len()].copy_from_slice(b);
        let u = u64::from_le_bytes(raw);
        let n = b.len() as u32 * 8;
        if signed && n > 0 && n < 64 {
            let shift = 64 - n;
            i128::from(((u << shift) as i64) >> shift)
        } else if signed {
            i128::from(u as i64)
        } else {
            i128::from(u)
        }
    }

    /// Prints one value (a member when `name` is given) at bit offset `bit_off`; `bit_size` is a
    /// bit-field's width (0 otherwise).
    fn value(
        &mut self,
        name: Option<&str>,
        ty: &PrintType,
        bit_off: usize,
        bit_size: u32,
        depth: usize,
    ) -> Result<(), Stop> {
        let at = bit_off / 8;
        if at >= self.data.len() || depth >= MAX_DEPTH || ty.kind == PrintKind::Deep {
            self.indent(depth);
            self.out.push_str("...\n");
            return Err(Stop);
        }
        if depth > 0 {
            let zero = if bit_size > 0 {
                self.bits(bit_off, bit_size) == 0
            } else {
                self.bytes(at, ty.size as usize).iter().all(|&b| b == 0)
            };
            if zero {
                return Ok(());
            }
        }
        self.close_to(depth);
        let head = |p: &mut Self| {
            p.indent(depth);
            if let Some(n) = name.filter(|n| !n.is_empty() && depth > 0) {
                p.out.push('.');
                p.out.push_str(n);
                p.out.push_str(" = ");
            }
        };
        match &ty.kind {
            PrintKind::Record { members, .. } => {
                head(self);
                let _ = writeln!(self.out, "({}) {{", ty.name);
                self.open.push(depth);
                for m in members {
                    self.value(
                        Some(&m.name),
                        &m.ty,
                        bit_off + m.bit_offset as usize,
                        m.bit_size,
                        depth + 1,
                    )?;
                }
            }
            PrintKind::Array { elem, len } => {
                head(self);
                let _ = writeln!(
                    self.out,
                    "({}) [{}",
                    ty.name,
                    if *len == 0 { "]," } else { "" }
                );
                let esize = elem.size as usize;
                if *len == 0 || self.bytes(at, ty.size as usize).iter().all(|&b| b == 0) {
                    return Ok(());
                }
                let chars = matches!(elem.kind, PrintKind::Int { .. }) && elem.size == 1;
                for i in 0..*len as usize {
                    let e_at = bit_off + i * esize * 8;
                    if chars && self.bytes(e_at / 8, 1).first().is_none_or(|&c| c == 0) {
                        break;
                    }
                    self.value(None, elem, e_at, 0, depth + 1)?;
                }
                self.close_to(depth + 1);
                self.indent(depth);
                self.out.push_str("],\n");
            }
            PrintKind::Int { signed, char_ } => {
                let v = if bit_size > 0 {
                    i128::from(self.bits(bit_off, bit_size))
                } else {
                    self.int(at, ty.size, *signed)
                };
                head(self);
                if *char_ {
                    let _ = writeln!(self.out, "({})'{}',", ty.name, (v as u8) as char);
                } else {
                    let _ = writeln!(self.out, "({}){v},", ty.name);
                }
            }
            PrintKind::Enum { signed, values } => {
                let v = self.int(at, ty.size, *signed);
                head(self);
                match values.iter().find(|(_, x)| i128::from(*x) == v) {
                    Some((n, _)) => {
                        let _ = writeln!(self.out, "({}){n},", ty.name);
                    }
                    None => {
                        let _ = writeln!(self.out, "({}){v},", ty.name);
                    }
                }
            }
            PrintKind::Pointer => {
                let v = self.int(at, 8, false);
                head(self);
                let _ = writeln!(self.out, "({}){v:#x},", ty.name);
            }
            PrintKind::Opaque | PrintKind::Deep => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(name: &str, size: u32, signed: bool) -> PrintType {
        PrintType {
            name: name.into(),
            size,
            kind: PrintKind::Int {
                signed,
                char_: name == "char",
            },
        }
    }

    fn member(name: &str, byte: u32, ty: PrintType) -> PrintMember {
        PrintMember {
            name: name.into(),
            bit_offset: byte * 8,
            bit_size: 0,
            ty,
        }
    }

    fn record(name: &str, size: u32, union: bool, members: Vec<PrintMember>) -> PrintType {
        PrintType {
            name: name.into(),
            size,
            kind: PrintKind::Record { union, members },
        }
    }

    /// `struct t { int a; char b[5]; union { __u8 c; __u64 d; } u; struct { void *e; uint64_t
    /// f; } s; bool g; enum eh h; }` laid out as C does (48 bytes).
    fn sample() -> PrintType {
        let chars = PrintType {
            name: "char [5]".into(),
            size: 5,
            kind: PrintKind::Array {
                elem: Box::new(int("char", 1, true)),
                len: 5,
            },
        };
        let u = record(
            "union",
            8,
            true,
            vec![
                member("c", 0, int("__u8", 1, false)),
                member("d", 0, int("__u64", 8, false)),
            ],
        );
        let ptr = PrintType {
            name: "void *".into(),
            size: 8,
            kind: PrintKind::Pointer,
        };
        let s = record(
            "struct",
            16,
            false,
            vec![
                member("e", 0, ptr),
                member("f", 8, int("uint64_t", 8, false)),
            ],
        );
        let e = PrintType {
            name: "enum eh".into(),
            size: 4,
            kind: PrintKind::Enum {
                signed: true,
                values: vec![("FIRSTVAL".into(), 0), ("SECONDVAL".into(), 1)],
            },
        };
        record(
            "struct t",
            48,
            false,
            vec![
                member("a", 0, int("int", 4, true)),
                member("b", 4, chars),
                member("u", 16, u),
                member("s", 24, s),
                member("g", 40, int("bool", 1, false)),
                member("h", 44, e),
            ],
        )
    }

    fn bytes(a: i32, b: &[u8], d: u64, e: u64, f: u64, g: u8, h: i32) -> Vec<u8> {
        let mut v = vec![0u8; 48];
        v[0..4].copy_from_slice(&a.to_le_bytes());
        v[4..4 + b.len()].copy_from_slice(b);
        v[16..24].copy_from_slice(&d.to_le_bytes());
        v[24..32].copy_from_slice(&e.to_le_bytes());
        v[32..40].copy_from_slice(&f.to_le_bytes());
        v[40] = g;
        v[44..48].copy_from_slice(&h.to_le_bytes());
        v
    }

    /// The text with the 44-column start removed from each line (so the test reads).
    fn dedent(s: &str) -> String {
        s.lines()
            .map(|l| l.strip_prefix(&" ".repeat(START_INDENT)).unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn members_print_with_types_and_nesting() {
        let data = bytes(1, b"test\0", 123456789, 0xffff9b7aca7e0000, 987654321, 1, 1);
        let out = format_print(0xffff_0000_1234_0000, &sample(), &data);
        assert!(out.starts_with("0xffff000012340000 = *\n"), "{out}");
        assert_eq!(
            dedent(&out),
            "0xffff000012340000 = *
(struct t) {
 .a = (int)1,
 .b = (char [5]) [
  (char)'t',
  (char)'e',
  (char)'s',
  (char)'t',
 ],
 .u = (union) {
  .c = (__u8)21,
  .d = (__u64)123456789,
 },
 .s = (struct) {
  .e = (void *)0xffff9b7aca7e0000,
  .f = (uint64_t)987654321,
 },
 .g = (bool)1,
 .h = (enum eh)SECONDVAL,
}"
        );
    }

    #[test]
    fn zero_members_are_left_out_and_a_leading_nul_ends_a_char_array() {
        let data = bytes(0, b"\0est\0", 0, 0, 0, 1, 0);
        let out = format_print(0, &sample(), &data);
        assert_eq!(
            dedent(&out),
            "(nil) = *
(struct t) {
 .b = (char [5]) [
 ],
 .g = (bool)1,
}"
        );
    }

    #[test]
    fn a_short_recording_stops_with_dots_and_closes_what_is_open() {
        let data = bytes(1, b"test\0", 12345678, 0xfeed, 100, 1, 1);
        // printsize 24: `.s` starts at 24, past the recorded bytes; `.u` is closed after `...`.
        let out = format_print(8, &sample(), &data[..24]);
        assert_eq!(
            dedent(&out),
            "0x8 = *
(struct t) {
 .a = (int)1,
 .b = (char [5]) [
  (char)'t',
  (char)'e',
  (char)'s',
  (char)'t',
 ],
 .u = (union) {
  .c = (__u8)78,
  .d = (__u64)12345678,
 ...
 },
}"
        );
        let out = format_print(8, &sample(), &data[..8]);
        assert!(dedent(&out).ends_with(" ],\n ...\n}"), "{out}");
    }

    #[test]
    fn bit_fields_and_negative_values() {
        let ty = record(
            "struct bits",
            8,
            false,
            vec![
                PrintMember {
                    name: "lo".into(),
                    bit_offset: 0,
                    bit_size: 3,
                    ty: int("unsigned int", 4, false),
                },
                PrintMember {
                    name: "hi".into(),
                    bit_offset: 3,
                    bit_size: 5,
                    ty: int("unsigned int", 4, false),
                },
                member("n", 4, int("short", 2, true)),
            ],
        );
        // lo = 5, hi = 0 (left out), n = -2.
        let data = [0b0000_0101, 0, 0, 0, 0xfe, 0xff, 0, 0];
        assert_eq!(
            dedent(&format_print(16, &ty, &data)),
            "0x10 = *\n(struct bits) {\n .lo = (unsigned int)5,\n .n = (short)-2,\n}"
        );
    }
}
