//! USDT argument specifications: the `SIZE@OPERAND` strings of SystemTap v3 notes, typed.
//!
//! Each argument of a `<sys/sdt.h>` probe is recorded as text: the argument's size in bytes,
//! negative when the C type is signed, `@`, and a GNU assembler operand (AT&T syntax) that says
//! where the value is at the probe site (SystemTap wiki, "UserSpaceProbeImplementation"; the
//! operand forms are those of `<sys/sdt.h>`'s `"nor"` constraint). Forms handled:
//!
//! | text | [`ArgLocation`] |
//! |---|---|
//! | `-4@%edi`, `8@%rax`, `1@%ah` | [`ArgLocation::Register`] |
//! | `8@-8(%rbp)`, `4@(%rsi)` | [`ArgLocation::Memory`] with base and displacement |
//! | `8@16(%rax,%rdx,8)`, `4@(,%rcx,4)` | [`ArgLocation::Memory`] with index and scale |
//! | `8@counter(%rip)`, `4@tbl+8(%rip)`, `8@counter` | [`ArgLocation::Static`] (resolved by symbol) |
//! | `-4@$5`, `8@$0x10` | [`ArgLocation::Immediate`] |
//!
//! A missing `SIZE@` (SystemTap v1 notes) means an unsigned 8-byte value. Registers are named by
//! their pt_regs slot (the layout of `struct pt_regs` in `arch/x86/include/asm/ptrace.h`) and DWARF
//! number (System V AMD64 psABI, table "DWARF Register Number Mapping"), so code generators can load
//! them either way.
//!
//! The typed [`ArgSpec`] is the one form every stage uses: probe-user parses it from the note and
//! resolves its symbols, the catalog carries it ([`crate::ProbeKind::Usdt`]) made relative to the
//! probe site ([`ArgSpec::at_site`]), sema types `argN` by its size and signedness, and probe-codegen
//! reads it from the uprobe's `struct pt_regs`. It lives here, the lowest crate that needs it, so
//! that nothing has to print it back to text.

use std::fmt;

/// A link-time virtual address, as in ELF symbol tables, program headers and stapsdt notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VirtAddr(pub u64);

impl fmt::Display for VirtAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Errors in an argument string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgSpecError {
    /// The size before `@` is not one of ±1, ±2, ±4, ±8.
    #[error("argument {spec:?}: bad size {size:?} (expected ±1, ±2, ±4 or ±8)")]
    BadSize {
        /// The whole argument text.
        spec: String,
        /// The size text.
        size: String,
    },
    /// The operand names a register this parser does not know (or one BPF cannot read, such as
    /// `%xmm0` or a segment register).
    #[error("argument {spec:?}: unknown or unsupported register {reg:?}")]
    BadRegister {
        /// The whole argument text.
        spec: String,
        /// The register text.
        reg: String,
    },
    /// The operand has a shape this parser does not accept.
    #[error("argument {spec:?}: cannot parse operand: {reason}")]
    BadOperand {
        /// The whole argument text.
        spec: String,
        /// What was wrong.
        reason: &'static str,
    },
    /// A RIP-relative or absolute operand names a symbol the ELF file does not define.
    #[error("argument {spec:?}: symbol {symbol:?} is not defined in the file")]
    UnknownSymbol {
        /// The whole argument text.
        spec: String,
        /// The symbol.
        symbol: String,
    },
}

/// An x86-64 general-purpose register (or `rip`), the 64-bit register that an operand's name
/// (`%eax`, `%ax`, `%al`, `%ah`, ...) is part of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Reg {
    Rax,
    Rbx,
    Rcx,
    Rdx,
    Rsi,
    Rdi,
    Rbp,
    Rsp,
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    R14,
    R15,
    Rip,
}

impl Reg {
    /// Byte offset of the register in the kernel's x86-64 `struct pt_regs`
    /// (`arch/x86/include/asm/ptrace.h`), the context of a uprobe BPF program.
    pub const fn pt_regs_offset(self) -> u16 {
        match self {
            Reg::R15 => 0,
            Reg::R14 => 8,
            Reg::R13 => 16,
            Reg::R12 => 24,
            Reg::Rbp => 32,
            Reg::Rbx => 40,
            Reg::R11 => 48,
            Reg::R10 => 56,
            Reg::R9 => 64,
            Reg::R8 => 72,
            Reg::Rax => 80,
            Reg::Rcx => 88,
            Reg::Rdx => 96,
            Reg::Rsi => 104,
            Reg::Rdi => 112,
            Reg::Rip => 128,
            Reg::Rsp => 152,
        }
    }

    /// DWARF register number (System V AMD64 psABI).
    pub fn dwarf(self) -> u16 {
        match self {
            Reg::Rax => 0,
            Reg::Rdx => 1,
            Reg::Rcx => 2,
            Reg::Rbx => 3,
            Reg::Rsi => 4,
            Reg::Rdi => 5,
            Reg::Rbp => 6,
            Reg::Rsp => 7,
            Reg::R8 => 8,
            Reg::R9 => 9,
            Reg::R10 => 10,
            Reg::R11 => 11,
            Reg::R12 => 12,
            Reg::R13 => 13,
            Reg::R14 => 14,
            Reg::R15 => 15,
            Reg::Rip => 16,
        }
    }

    /// The 64-bit name (`rax`).
    pub fn name(self) -> &'static str {
        match self {
            Reg::Rax => "rax",
            Reg::Rbx => "rbx",
            Reg::Rcx => "rcx",
            Reg::Rdx => "rdx",
            Reg::Rsi => "rsi",
            Reg::Rdi => "rdi",
            Reg::Rbp => "rbp",
            Reg::Rsp => "rsp",
            Reg::R8 => "r8",
            Reg::R9 => "r9",
            Reg::R10 => "r10",
            Reg::R11 => "r11",
            Reg::R12 => "r12",
            Reg::R13 => "r13",
            Reg::R14 => "r14",
            Reg::R15 => "r15",
            Reg::Rip => "rip",
        }
    }

    /// The argument registers of the System V AMD64 calling convention, in order: the pid
    /// provider's `arg0..arg5` at a function's entry.
    pub const ARGS: [Reg; 6] = [Reg::Rdi, Reg::Rsi, Reg::Rdx, Reg::Rcx, Reg::R8, Reg::R9];

    /// The register holding an integer return value (`arg1` of a pid `return` probe).
    pub const RETURN: Reg = Reg::Rax;
}

/// Parses a register name without `%`: returns the 64-bit register and the byte position of the
/// named part within it (1 only for `ah`, `bh`, `ch`, `dh`).
fn parse_reg(name: &str) -> Option<(Reg, u8)> {
    use Reg::*;
    let legacy = [
        (Rax, ["rax", "eax", "ax", "al"], Some("ah")),
        (Rbx, ["rbx", "ebx", "bx", "bl"], Some("bh")),
        (Rcx, ["rcx", "ecx", "cx", "cl"], Some("ch")),
        (Rdx, ["rdx", "edx", "dx", "dl"], Some("dh")),
        (Rsi, ["rsi", "esi", "si", "sil"], None),
        (Rdi, ["rdi", "edi", "di", "dil"], None),
        (Rbp, ["rbp", "ebp", "bp", "bpl"], None),
        (Rsp, ["rsp", "esp", "sp", "spl"], None),
    ];
    for (reg, names, high) in legacy {
        if names.contains(&name) {
            return Some((reg, 0));
        }
        if high == Some(name) {
            return Some((reg, 1));
        }
    }
    if name == "rip" {
        return Some((Rip, 0));
    }
    let rest = name.strip_prefix('r')?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let suffix = &rest[digits.len()..];
    if !["", "d", "w", "b"].contains(&suffix) {
        return None;
    }
    let reg = match digits.as_str() {
        "8" => R8,
        "9" => R9,
        "10" => R10,
        "11" => R11,
        "12" => R12,
        "13" => R13,
        "14" => R14,
        "15" => R15,
        _ => return None,
    };
    Some((reg, 0))
}

/// Where an argument's value is at the probe site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgLocation {
    /// In a register; `byte` is the byte position of the value within it (1 for `%ah`-style
    /// high-byte registers, else 0).
    Register {
        /// The register.
        reg: Reg,
        /// Byte position within the 64-bit register.
        byte: u8,
    },
    /// In memory at `base + index * scale + disp`. The parser never produces a `%rip` base (those
    /// operands are [`ArgLocation::Static`]); [`ArgSpec::at_site`] does.
    Memory {
        /// Base register (`None` for `(,%rcx,4)`).
        base: Option<Reg>,
        /// Index register and scale (1, 2, 4 or 8).
        index: Option<(Reg, u8)>,
        /// Displacement in bytes.
        disp: i64,
    },
    /// In memory at a link-time address of the file: RIP-relative `sym+off(%rip)` or absolute
    /// `sym`. At run time the address is `module bias + addr`.
    Static {
        /// The symbol as written, when the operand named one.
        symbol: Option<String>,
        /// The displacement added to the symbol.
        disp: i64,
        /// The resolved link-time address (`None` until [`ArgSpec::resolve`] ran).
        addr: Option<VirtAddr>,
    },
    /// A constant.
    Immediate(i64),
}

/// One argument of a USDT probe: its size, signedness and location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgSpec {
    /// Size in bytes: 1, 2, 4 or 8.
    pub size: u8,
    /// True when the C type is signed (negative size in the note): the value is sign-extended.
    pub signed: bool,
    /// Where the value is.
    pub loc: ArgLocation,
    /// The original text (`-4@%edi`).
    pub text: String,
}

impl fmt::Display for ArgSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Parses a whole argument string (space-separated specs) as stored in a note.
///
/// # Errors
/// The first [`ArgSpecError`] met.
pub fn parse_args(text: &str) -> Result<Vec<ArgSpec>, ArgSpecError> {
    text.split_whitespace().map(ArgSpec::parse).collect()
}

impl ArgSpec {
    /// Parses one argument (`-4@%edi`, `8@-8(%rbp)`, ...).
    ///
    /// # Errors
    /// [`ArgSpecError`] for a bad size, an unknown register, or an operand of another shape.
    pub fn parse(text: &str) -> Result<ArgSpec, ArgSpecError> {
        // The size is digits with an optional minus before `@`; `@` cannot appear in operands
        // except as part of a symbol version (`sym@GLIBC`), which never follows only digits.
        let (size, signed, operand) = match text.split_once('@') {
            Some((sz, op))
                if !sz.is_empty()
                    && sz
                        .trim_start_matches('-')
                        .chars()
                        .all(|c| c.is_ascii_digit()) =>
            {
                let n: i32 = sz.parse().map_err(|_| ArgSpecError::BadSize {
                    spec: text.into(),
                    size: sz.into(),
                })?;
                if ![1, 2, 4, 8].contains(&n.abs()) {
                    return Err(ArgSpecError::BadSize {
                        spec: text.into(),
                        size: sz.into(),
                    });
                }
                (n.unsigned_abs() as u8, n < 0, op)
            }
            _ => (8, false, text),
        };
        let loc = parse_operand(text, operand)?;
        Ok(ArgSpec {
            size,
            signed,
            loc,
            text: text.to_string(),
        })
    }

    /// Resolves a [`ArgLocation::Static`] operand's symbol through `lookup` (usually probe-user's
    /// `ElfFile::symbol_addr`); other locations are unchanged.
    ///
    /// # Errors
    /// [`ArgSpecError::UnknownSymbol`] when the symbol is not found, [`ArgSpecError::BadOperand`]
    /// for a RIP-relative operand with no symbol (its address depends on the instruction it came
    /// from, which the note does not record).
    pub fn resolve(
        &mut self,
        lookup: impl Fn(&str) -> Option<VirtAddr>,
    ) -> Result<(), ArgSpecError> {
        if let ArgLocation::Static { symbol, disp, addr } = &mut self.loc {
            let Some(sym) = symbol else {
                return Err(ArgSpecError::BadOperand {
                    spec: self.text.clone(),
                    reason: "RIP-relative operand without a symbol",
                });
            };
            let base = lookup(sym).ok_or_else(|| ArgSpecError::UnknownSymbol {
                spec: self.text.clone(),
                symbol: sym.clone(),
            })?;
            *addr = Some(VirtAddr(base.0.wrapping_add(*disp as u64)));
        }
        Ok(())
    }

    /// The spec as seen at the probe site `pc`: a resolved [`ArgLocation::Static`] operand becomes
    /// [`ArgLocation::Memory`] relative to `%rip` (displacement = its address − `pc`), because at a
    /// uprobe `%rip` holds the probe's address, so the code generator needs no load bias. Other
    /// locations (and an unresolved static operand, which a code generator rejects) are unchanged;
    /// [`ArgSpec::text`] stays the note's text.
    pub fn at_site(&self, pc: VirtAddr) -> ArgSpec {
        let mut out = self.clone();
        if let ArgLocation::Static { addr: Some(a), .. } = &self.loc {
            out.loc = ArgLocation::Memory {
                base: Some(Reg::Rip),
                index: None,
                disp: a.0.wrapping_sub(pc.0) as i64,
            };
        }
        out
    }

    /// Computes the argument's value the way generated code must: `reg(r)` reads a 64-bit register,
    /// `mem(addr, size)` reads `size` bytes (little-endian, zero-extended; `None` on a fault) and
    /// `bias` is the module's load bias. The result is truncated to `size` bytes, then sign- or
    /// zero-extended to 64 bits. `None` when memory cannot be read or a static operand is
    /// unresolved.
    ///
    /// This is the executable specification of argument access that code generators mirror.
    pub fn eval(
        &self,
        reg: impl Fn(Reg) -> u64,
        mem: impl Fn(u64, u8) -> Option<u64>,
        bias: u64,
    ) -> Option<i64> {
        let raw = match &self.loc {
            ArgLocation::Register { reg: r, byte } => reg(*r) >> (8 * u32::from(*byte)),
            ArgLocation::Memory { base, index, disp } => {
                let mut a = base.map_or(0, &reg).wrapping_add(*disp as u64);
                if let Some((i, s)) = index {
                    a = a.wrapping_add(reg(*i).wrapping_mul(u64::from(*s)));
                }
                mem(a, self.size)?
            }
            ArgLocation::Static { addr, .. } => {
                mem(bias.wrapping_add(addr.as_ref()?.0), self.size)?
            }
            ArgLocation::Immediate(v) => *v as u64,
        };
        Some(extend(raw, self.size, self.signed))
    }
}

/// Truncates `raw` to `size` bytes and sign- or zero-extends it.
pub fn extend(raw: u64, size: u8, signed: bool) -> i64 {
    let bits = u32::from(size) * 8;
    if bits >= 64 {
        return raw as i64;
    }
    let shift = 64 - bits;
    if signed {
        ((raw << shift) as i64) >> shift
    } else {
        ((raw << shift) >> shift) as i64
    }
}

/// Parses an integer in C syntax: decimal or `0x` hex, with an optional sign.
fn parse_int(t: &str) -> Option<i64> {
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let v = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok()?,
        None => body.parse::<u64>().ok()?,
    } as i64;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Splits a displacement like `-8`, `0x10`, `sym`, `sym+8`, `sym-0x4` into symbol and number.
fn parse_disp(spec: &str, t: &str) -> Result<(Option<String>, i64), ArgSpecError> {
    if t.is_empty() {
        return Ok((None, 0));
    }
    if let Some(v) = parse_int(t) {
        return Ok((None, v));
    }
    let bad = || ArgSpecError::BadOperand {
        spec: spec.into(),
        reason: "bad displacement",
    };
    let first = t.chars().next().ok_or_else(bad)?;
    if !(first.is_ascii_alphabetic() || first == '_' || first == '.') {
        return Err(bad());
    }
    let end = t[1..].find(['+', '-']).map_or(t.len(), |i| i + 1);
    let (sym, rest) = t.split_at(end);
    let off = if rest.is_empty() {
        0
    } else {
        parse_int(rest).ok_or_else(bad)?
    };
    Ok((Some(sym.to_string()), off))
}

fn parse_operand(spec: &str, op: &str) -> Result<ArgLocation, ArgSpecError> {
    let bad = |reason| ArgSpecError::BadOperand {
        spec: spec.into(),
        reason,
    };
    let reg = |r: &str| -> Result<(Reg, u8), ArgSpecError> {
        let name = r
            .strip_prefix('%')
            .ok_or_else(|| bad("register without %"))?;
        parse_reg(name).ok_or_else(|| ArgSpecError::BadRegister {
            spec: spec.into(),
            reg: r.into(),
        })
    };
    if op.is_empty() {
        return Err(bad("empty operand"));
    }
    if op.starts_with('%') {
        if op.contains(':') {
            return Err(bad("segment-prefixed operands are not supported"));
        }
        let (r, byte) = reg(op)?;
        if r == Reg::Rip {
            return Err(bad("%rip as a value"));
        }
        return Ok(ArgLocation::Register { reg: r, byte });
    }
    if let Some(imm) = op.strip_prefix('$') {
        return parse_int(imm)
            .map(ArgLocation::Immediate)
            .ok_or_else(|| bad("bad immediate"));
    }
    if op.contains(':') {
        return Err(bad("segment-prefixed operands are not supported"));
    }
    let (disp_text, inner) = match op.find('(') {
        Some(i) => {
            let inner = op[i + 1..]
                .strip_suffix(')')
                .ok_or_else(|| bad("unbalanced parenthesis"))?;
            (&op[..i], Some(inner))
        }
        None => (op, None),
    };
    let (symbol, disp) = parse_disp(spec, disp_text)?;
    let Some(inner) = inner else {
        // No parentheses: an absolute address, by symbol or number.
        return Ok(match symbol {
            Some(s) => ArgLocation::Static {
                symbol: Some(s),
                disp,
                addr: None,
            },
            None => ArgLocation::Static {
                symbol: None,
                disp: 0,
                addr: Some(VirtAddr(disp as u64)),
            },
        });
    };
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    let base = match parts.first().copied() {
        Some("") | None => None,
        Some(b) => Some(reg(b)?.0),
    };
    if base == Some(Reg::Rip) {
        if parts.len() != 1 {
            return Err(bad("RIP-relative operand with an index"));
        }
        return Ok(ArgLocation::Static {
            symbol,
            disp,
            addr: None,
        });
    }
    if symbol.is_some() {
        return Err(bad("symbolic displacement with a register base"));
    }
    let index = match parts.get(1) {
        None => None,
        Some(i) => {
            let (r, _) = reg(i)?;
            let scale = match parts.get(2) {
                None => 1,
                Some(s) => match s.parse::<u8>() {
                    Ok(v @ (1 | 2 | 4 | 8)) => v,
                    _ => return Err(bad("scale must be 1, 2, 4 or 8")),
                },
            };
            Some((r, scale))
        }
    };
    if parts.len() > 3 || (base.is_none() && index.is_none()) {
        return Err(bad("bad memory operand"));
    }
    Ok(ArgLocation::Memory { base, index, disp })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(t: &str) -> ArgSpec {
        ArgSpec::parse(t).unwrap_or_else(|e| panic!("{t}: {e}"))
    }

    #[test]
    fn registers() {
        let a = p("-4@%edi");
        assert_eq!((a.size, a.signed), (4, true));
        assert_eq!(
            a.loc,
            ArgLocation::Register {
                reg: Reg::Rdi,
                byte: 0
            }
        );
        assert_eq!(
            p("8@%rbx").loc,
            ArgLocation::Register {
                reg: Reg::Rbx,
                byte: 0
            }
        );
        assert_eq!(
            p("1@%ah").loc,
            ArgLocation::Register {
                reg: Reg::Rax,
                byte: 1
            }
        );
        assert_eq!(
            p("2@%r10w").loc,
            ArgLocation::Register {
                reg: Reg::R10,
                byte: 0
            }
        );
        assert_eq!(
            p("-1@%r9b").loc,
            ArgLocation::Register {
                reg: Reg::R9,
                byte: 0
            }
        );
        assert_eq!(
            p("1@%sil").loc,
            ArgLocation::Register {
                reg: Reg::Rsi,
                byte: 0
            }
        );
        assert_eq!(Reg::Rdi.pt_regs_offset(), 112);
        assert_eq!(Reg::Rsp.pt_regs_offset(), 152);
        assert_eq!(Reg::Rdi.dwarf(), 5);
        assert!(matches!(
            ArgSpec::parse("8@%xmm0"),
            Err(ArgSpecError::BadRegister { .. })
        ));
        assert!(matches!(
            ArgSpec::parse("8@%r16"),
            Err(ArgSpecError::BadRegister { .. })
        ));
    }

    #[test]
    fn memory_forms() {
        assert_eq!(
            p("8@-8(%rbp)").loc,
            ArgLocation::Memory {
                base: Some(Reg::Rbp),
                index: None,
                disp: -8
            }
        );
        assert_eq!(
            p("-4@112(%rsp)").loc,
            ArgLocation::Memory {
                base: Some(Reg::Rsp),
                index: None,
                disp: 112
            }
        );
        assert_eq!(
            p("4@(%rsi)").loc,
            ArgLocation::Memory {
                base: Some(Reg::Rsi),
                index: None,
                disp: 0
            }
        );
        assert_eq!(
            p("8@(%rax,%rdx,8)").loc,
            ArgLocation::Memory {
                base: Some(Reg::Rax),
                index: Some((Reg::Rdx, 8)),
                disp: 0
            }
        );
        assert_eq!(
            p("2@0x10(%rax,%r12)").loc,
            ArgLocation::Memory {
                base: Some(Reg::Rax),
                index: Some((Reg::R12, 1)),
                disp: 16
            }
        );
        assert_eq!(
            p("4@(,%rcx,4)").loc,
            ArgLocation::Memory {
                base: None,
                index: Some((Reg::Rcx, 4)),
                disp: 0
            }
        );
        assert!(ArgSpec::parse("8@(%rax,%rdx,3)").is_err());
        assert!(ArgSpec::parse("8@-8(%rbp").is_err());
        assert!(ArgSpec::parse("8@%fs:0x28").is_err());
    }

    #[test]
    fn static_and_immediate() {
        assert_eq!(
            p("8@counter(%rip)").loc,
            ArgLocation::Static {
                symbol: Some("counter".into()),
                disp: 0,
                addr: None
            }
        );
        assert_eq!(
            p("4@tbl+8(%rip)").loc,
            ArgLocation::Static {
                symbol: Some("tbl".into()),
                disp: 8,
                addr: None
            }
        );
        assert_eq!(
            p("4@tbl-0x4(%rip)").loc,
            ArgLocation::Static {
                symbol: Some("tbl".into()),
                disp: -4,
                addr: None
            }
        );
        assert_eq!(p("-4@$5").loc, ArgLocation::Immediate(5));
        assert_eq!(p("-4@$-5").loc, ArgLocation::Immediate(-5));
        assert_eq!(p("8@$0x10").loc, ArgLocation::Immediate(16));
        let mut s = p("8@counter+4(%rip)");
        s.resolve(|n| (n == "counter").then_some(VirtAddr(0x4010)))
            .unwrap();
        assert_eq!(
            s.loc,
            ArgLocation::Static {
                symbol: Some("counter".into()),
                disp: 4,
                addr: Some(VirtAddr(0x4014))
            }
        );
        let mut u = p("8@nothere(%rip)");
        assert!(matches!(
            u.resolve(|_| None),
            Err(ArgSpecError::UnknownSymbol { .. })
        ));
    }

    #[test]
    fn sizes() {
        for (t, size, signed) in [
            ("1@%al", 1, false),
            ("-1@%al", 1, true),
            ("2@%ax", 2, false),
            ("-8@%rax", 8, true),
        ] {
            let a = p(t);
            assert_eq!((a.size, a.signed), (size, signed), "{t}");
        }
        assert!(matches!(
            ArgSpec::parse("3@%eax"),
            Err(ArgSpecError::BadSize { .. })
        ));
        assert!(matches!(
            ArgSpec::parse("16@%eax"),
            Err(ArgSpecError::BadSize { .. })
        ));
        // Version 1 notes carry no size.
        let v1 = p("%rdi");
        assert_eq!((v1.size, v1.signed), (8, false));
        let all = parse_args("8@%rbp 8@%r12 -4@%eax").unwrap();
        assert_eq!(all.len(), 3);
        assert!(parse_args("").unwrap().is_empty());
    }

    #[test]
    fn evaluation_truncates_and_extends() {
        let regs = |r: Reg| match r {
            Reg::Rax => 0xffff_ffff_ffff_fff6, // -10
            Reg::Rbp => 0x1000,
            Reg::Rdx => 3,
            _ => 0x1234,
        };
        let mem = |a: u64, size: u8| match (a, size) {
            (0xff8, 8) => Some(42),
            (0x1018, 4) => Some(0xffff_fffe),
            (0x5010, 2) => Some(7),
            _ => None,
        };
        assert_eq!(p("-4@%eax").eval(regs, mem, 0), Some(-10));
        assert_eq!(p("4@%eax").eval(regs, mem, 0), Some(0xffff_fff6));
        assert_eq!(p("1@%ah").eval(regs, mem, 0), Some(0xff));
        assert_eq!(p("8@-8(%rbp)").eval(regs, mem, 0), Some(42));
        assert_eq!(p("-4@(%rbp,%rdx,8)").eval(regs, mem, 0), Some(-2));
        assert_eq!(p("4@(%rbp,%rdx,8)").eval(regs, mem, 0), Some(0xffff_fffe));
        assert_eq!(p("-4@$-5").eval(regs, mem, 0), Some(-5));
        let mut s = p("2@g(%rip)");
        s.resolve(|_| Some(VirtAddr(0x10))).unwrap();
        assert_eq!(s.eval(regs, mem, 0x5000), Some(7));
        assert_eq!(p("8@0(%rdx)").eval(regs, mem, 0), None);
        // At the site: a static operand relative to the probe address, read through %rip.
        let rip = |disp| ArgLocation::Memory {
            base: Some(Reg::Rip),
            index: None,
            disp,
        };
        let here = s.at_site(VirtAddr(0x30));
        assert_eq!(here.loc, rip(-32));
        assert_eq!(here.text, "2@g(%rip)");
        let at_rip = |r: Reg| if r == Reg::Rip { 0x5030 } else { regs(r) };
        assert_eq!(here.eval(at_rip, mem, 0), Some(7));
        let mut g = p("-8@counter(%rip)");
        g.resolve(|_| Some(VirtAddr(0x4028))).unwrap();
        assert_eq!(g.at_site(VirtAddr(0x11ca)).loc, rip(11870));
        for t in [
            "-4@%edi",
            "8@0x10(%rbp)",
            "8@(%rax,%rdx,8)",
            "-4@$0x10",
            "1@%ah",
        ] {
            assert_eq!(p(t).at_site(VirtAddr(1)), p(t), "{t}");
        }
        // Unresolved: left for the code generator to reject.
        assert_eq!(p("8@x(%rip)").at_site(VirtAddr(1)), p("8@x(%rip)"));
    }

    /// Issue 21: the high-byte registers decode to their register and byte 1.
    #[test]
    fn high_byte_registers() {
        for (t, reg) in [
            ("1@%ah", Reg::Rax),
            ("1@%bh", Reg::Rbx),
            ("-1@%ch", Reg::Rcx),
            ("1@%dh", Reg::Rdx),
        ] {
            assert_eq!(p(t).loc, ArgLocation::Register { reg, byte: 1 }, "{t}");
        }
        let regs = |r: Reg| if r == Reg::Rcx { 0x80ff } else { 0x1234 };
        assert_eq!(p("-1@%ch").eval(regs, |_, _| None, 0), Some(-128));
        assert_eq!(p("1@%bh").eval(regs, |_, _| None, 0), Some(0x12));
    }
}
