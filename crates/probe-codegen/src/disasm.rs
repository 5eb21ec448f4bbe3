//! A text listing of generated BPF programs (`sightline probe -S`, DTrace's "show the
//! intermediate code"), in the notation of the kernel's verifier log and `bpftool prog dump xlated`
//! (`r1 = r6`, `if r0 == 0 goto +3`, `*(u64 *)(r10 -8) = r1`).
//!
//! Encoding per the kernel's `Documentation/bpf/standardization/instruction-set.rst`.

use std::fmt::Write as _;

use crate::insn::Insn;
use crate::layout::{Layout, ProgSpec};

/// The whole layout's programs: for each, a header line (`name`, attach point, clauses, number
/// of instructions) then one line per instruction (`  index: text`).
pub fn layout(l: &Layout) -> String {
    let mut out = String::new();
    for p in &l.programs {
        out.push_str(&program(p, l));
    }
    out
}

/// One program's listing (see [`layout`]). Map references name the map (`map[sl_aggs]`).
pub fn program(p: &ProgSpec, l: &Layout) -> String {
    let mut out = String::new();
    let clauses: Vec<String> = p.clauses.iter().map(|c| (c + 1).to_string()).collect();
    let _ = writeln!(
        out,
        "{} ({:?}, {:?}): clause{} {}, {} instructions",
        p.name,
        p.kind,
        p.attach,
        if clauses.len() == 1 { "" } else { "s" },
        clauses.join(", "),
        p.insns.len()
    );
    let mut i = 0;
    while i < p.insns.len() {
        let ins = p.insns[i];
        let text = if ins.code == 0x18 {
            // lddw: two slots.
            let hi = p.insns.get(i + 1).map_or(0, |n| n.imm as u32 as u64);
            let imm = (ins.imm as u32 as u64) | (hi << 32);
            let map = p
                .map_refs
                .iter()
                .find(|r| r.insn == i)
                .and_then(|r| l.maps.get(r.map));
            let t = match map {
                Some(m) => format!("r{} = map[{}]", ins.dst, m.name),
                None => format!("r{} = {imm:#x} ll", ins.dst),
            };
            let _ = writeln!(out, "{i:5}: {t}");
            i += 2;
            continue;
        } else {
            insn(&ins)
        };
        let _ = writeln!(out, "{i:5}: {text}");
        i += 1;
    }
    out
}

fn size(code: u8) -> &'static str {
    match code & 0x18 {
        0x00 => "u32",
        0x08 => "u16",
        0x10 => "u8",
        _ => "u64",
    }
}

fn mem(reg: u8, off: i16) -> String {
    if off < 0 {
        format!("(r{reg} {off})")
    } else {
        format!("(r{reg} +{off})")
    }
}

/// One instruction (not `lddw`) as text.
pub fn insn(i: &Insn) -> String {
    let class = i.code & 7;
    let op = i.code & 0xf0;
    let by_reg = i.code & 0x08 != 0;
    match class {
        // ALU (32-bit, `w` registers) and ALU64.
        4 | 7 => {
            let r = if class == 7 { "r" } else { "w" };
            let src = if by_reg {
                format!("{r}{}", i.src)
            } else {
                i.imm.to_string()
            };
            let sym = match op {
                0x00 => "+=",
                0x10 => "-=",
                0x20 => "*=",
                0x30 => "/=",
                0x40 => "|=",
                0x50 => "&=",
                0x60 => "<<=",
                0x70 => ">>=",
                0x90 => "%=",
                0xa0 => "^=",
                0xc0 => "s>>=",
                0x80 => return format!("{r}{} = -{r}{}", i.dst, i.dst),
                0xb0 => return format!("{r}{} = {src}", i.dst),
                0xd0 => {
                    let order = if by_reg { "be" } else { "le" };
                    return format!("r{} = {order}{} r{}", i.dst, i.imm, i.dst);
                }
                _ => return format!("unknown alu {:#04x}", i.code),
            };
            format!("{r}{} {sym} {src}", i.dst)
        }
        // JMP and JMP32.
        5 | 6 => {
            let r = if class == 5 { "r" } else { "w" };
            let cmp = match op {
                0x00 => return format!("goto {:+}", i.off),
                0x80 if i.src == crate::insn::PSEUDO_KFUNC_CALL => {
                    return format!("call kfunc btf#{}", i.imm);
                }
                0x80 => return format!("call {}", i.imm),
                0x90 => return "exit".into(),
                0x10 => "==",
                0x20 => ">",
                0x30 => ">=",
                0x40 => "&",
                0x50 => "!=",
                0x60 => "s>",
                0x70 => "s>=",
                0xa0 => "<",
                0xb0 => "<=",
                0xc0 => "s<",
                0xd0 => "s<=",
                _ => return format!("unknown jump {:#04x}", i.code),
            };
            let src = if by_reg {
                format!("{r}{}", i.src)
            } else {
                i.imm.to_string()
            };
            format!("if {r}{} {cmp} {src} goto {:+}", i.dst, i.off)
        }
        // LDX
        1 => format!("r{} = *({} *){}", i.dst, size(i.code), mem(i.src, i.off)),
        // ST
        2 => format!("*({} *){} = {}", size(i.code), mem(i.dst, i.off), i.imm),
        // STX, plain or atomic.
        3 if i.code & 0xe0 == 0xc0 => format!(
            "lock *({} *){} op{:#x}= r{}",
            size(i.code),
            mem(i.dst, i.off),
            i.imm,
            i.src
        ),
        3 => format!("*({} *){} = r{}", size(i.code), mem(i.dst, i.off), i.src),
        _ => format!("unknown {:#04x}", i.code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            dst,
            src,
            off,
            imm,
        }
    }

    #[test]
    fn instructions_read_as_the_verifier_log_writes_them() {
        assert_eq!(insn(&i(0xbf, 6, 1, 0, 0)), "r6 = r1");
        assert_eq!(insn(&i(0xb7, 0, 0, 0, 0)), "r0 = 0");
        assert_eq!(insn(&i(0x07, 2, 0, 0, -8)), "r2 += -8");
        assert_eq!(insn(&i(0x15, 0, 0, 3, 0)), "if r0 == 0 goto +3");
        assert_eq!(insn(&i(0x7b, 10, 1, -8, 0)), "*(u64 *)(r10 -8) = r1");
        assert_eq!(insn(&i(0x61, 1, 7, 16, 0)), "r1 = *(u32 *)(r7 +16)");
        assert_eq!(insn(&i(0x85, 0, 0, 0, 14)), "call 14");
        assert_eq!(insn(&i(0x95, 0, 0, 0, 0)), "exit");
        assert_eq!(insn(&i(0x05, 0, 0, -4, 0)), "goto -4");
    }
}
