//! `inet_ntoa`, `inet_ntoa6` and `inet_ntop` (DTrace guide, "Actions and Subroutines" →
//! "Subroutines"): an IPv4 or IPv6 address in memory as a string (the semantics are
//! `probe_sema::checked::Subr::InetNtoa6`'s).
//!
//! The address's bytes are read into scratch memory, then formatted into a 72-byte scratch
//! buffer at a cursor (`R5`, masked to 0..=63 before every store, so the verifier bounds each
//! store). The formatting has no data-dependent branch: digit counts, the `::` run and whether
//! a separator is written are 0/1 values computed with subtractions and shifts (`(k - v) >> 63`
//! is 1 when `v > k`), and a character that should not appear is stored without advancing the
//! cursor, so a later store or the final NUL covers it. A branch per byte would multiply the
//! paths the verifier walks (3^4 for an IPv4 address, far more for IPv6).

use super::*;

/// Which of the three subroutines.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Inet {
    /// `inet_ntoa(addr)`.
    V4,
    /// `inet_ntoa6(addr [, strict])`.
    V6,
    /// `inet_ntop(af, addr)`.
    Ntop,
}

/// `AF_INET` and Linux's `AF_INET6`.
const AF_INET: i32 = 2;
const AF_INET6: i32 = 10;

/// Bytes of the formatting buffer: the longest result (39 characters) plus a NUL, with room for
/// the stores past the cursor (at most 4) at the cursor's largest value, 63.
const TMP: u32 = 72;

impl ProgGen<'_, '_> {
    /// The string of `kind` applied to `args` at scratch offset `off` (`strsize` bytes).
    pub(super) fn inet(&mut self, kind: Inet, args: &[TExpr], off: u32, span: Span) -> Res<()> {
        let ss = self.strsize();
        let addr = self.slot(span)?;
        let af = self.slot(span)?;
        match kind {
            Inet::Ntop => {
                self.int(&args[0])?;
                self.asm.stx(Size::DW, R10, af, R0);
                self.int(&args[1])?;
            }
            _ => self.int(&args[0])?,
        }
        self.asm.stx(Size::DW, R10, addr, R0);
        let raw = self.scratch(16, span)?;
        let tmp = self.scratch(TMP, span)?;
        self.zero(raw, 16);
        self.zero(tmp, TMP);
        self.zero(off, ss);
        let done = self.asm.label();
        match kind {
            Inet::V4 => self.inet_v4(raw, tmp, addr, span)?,
            Inet::V6 => {
                let strict =
                    matches!(args.get(1).map(|a| &a.kind), Some(TExprKind::Int(k)) if *k != 0);
                self.inet_v6(raw, tmp, addr, done, strict, span)?
            }
            Inet::Ntop => {
                let (v4, v6) = (self.asm.label(), self.asm.label());
                self.asm.ldx(Size::DW, R0, R10, af);
                self.asm.jmp_imm(Cond::Eq, R0, AF_INET, v4);
                self.asm.jmp_imm(Cond::Eq, R0, AF_INET6, v6);
                self.fault(Fault::IllOp, Some(af), span)?;
                self.asm.bind(v4);
                self.inet_v4(raw, tmp, addr, span)?;
                self.asm.ja(done);
                self.asm.bind(v6);
                // inet_ntop() keeps the IPv6 prefix of an embedded IPv4 address (Oracle's
                // tst.inet_ntop: `::127.0.0.1`, `::ffff:127.0.0.1`).
                self.inet_v6(raw, tmp, addr, done, true, span)?;
            }
        }
        self.asm.bind(done);
        // The NUL at the cursor, then the result copied out (cut to strsize - 1 characters).
        let a = &mut self.asm;
        put_at_cursor(a, tmp);
        a.st_imm(Size::B, R1, 0, 0);
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, off as i32);
        a.mov_imm(R2, TMP.min(ss) as i64);
        a.mov(R3, R7);
        a.alu_imm(Alu::Add, R3, tmp as i32);
        a.call(helper::PROBE_READ_KERNEL_STR);
        Ok(())
    }

    /// Reads `len` bytes at the address in stack slot `addr` into scratch `raw`.
    fn inet_read(&mut self, raw: u32, len: u32, addr: i16, span: Span) -> Res<()> {
        let a = &mut self.asm;
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, raw as i32);
        a.mov_imm(R2, len as i64);
        a.ldx(Size::DW, R3, R10, addr);
        self.call_or_fault(helper::PROBE_READ_KERNEL, addr, span)
    }

    /// An IPv4 address: 4 bytes read, the dotted quad at the cursor (R5 = 0).
    fn inet_v4(&mut self, raw: u32, tmp: u32, addr: i16, span: Span) -> Res<()> {
        self.inet_read(raw, 4, addr, span)?;
        self.asm.mov_imm(R5, 0);
        dotted_quad(&mut self.asm, raw, tmp);
        Ok(())
    }

    /// An IPv6 address: 16 bytes read; an IPv4-mapped or -compatible one as its dotted quad
    /// (then a jump to `done`), after `::ffff:` or `::` when `strict`; any other in RFC 5952
    /// notation.
    fn inet_v6(
        &mut self,
        raw: u32,
        tmp: u32,
        addr: i16,
        done: Label,
        strict: bool,
        span: Span,
    ) -> Res<()> {
        self.inet_read(raw, 16, addr, span)?;
        // `start` holds the run's first group once it is known (the stack slots survive the
        // helper-free formatting; R5 is the cursor throughout).
        let start = self.slot(span)?;
        let cur = self.slot(span)?;
        let best = self.slot(span)?;
        let best_end = self.slot(span)?;
        let a = &mut self.asm;
        a.mov_imm(R5, 0);
        // IPv4-mapped: 10 zero bytes, then 0xffff; IPv4-compatible: 12 zero bytes and a last
        // word that is neither 0 (`::`) nor 1 (`::1`).
        let (not_v4, quad, mapped) = (a.label(), a.label(), a.label());
        a.ldx(Size::DW, R0, R7, raw as i16);
        a.jmp_imm(Cond::Ne, R0, 0, not_v4);
        a.ldx(Size::H, R0, R7, (raw + 8) as i16);
        a.jmp_imm(Cond::Ne, R0, 0, not_v4);
        a.ldx(Size::H, R0, R7, (raw + 10) as i16);
        a.jmp_imm(Cond::Eq, R0, 0xffff, mapped);
        a.jmp_imm(Cond::Ne, R0, 0, not_v4);
        a.ldx(Size::W, R0, R7, (raw + 12) as i16);
        a.jmp_imm(Cond::Eq, R0, 0, not_v4);
        // Bytes 00 00 00 01 read as a little-endian word.
        a.jmp_imm(Cond::Eq, R0, 0x0100_0000, not_v4);
        if strict {
            put_text(a, tmp, b"::");
            a.ja(quad);
        }
        a.bind(mapped);
        if strict {
            put_text(a, tmp, b"::ffff:");
        }
        a.bind(quad);
        dotted_quad(a, raw + 12, tmp);
        a.ja(done);
        a.bind(not_v4);
        // The longest run of zero groups: cur = length of the run ending at group i,
        // best / best_end = the longest so far (the first of equal ones) and its last group.
        a.st_imm(Size::DW, R10, cur, 0);
        a.st_imm(Size::DW, R10, best, 0);
        a.st_imm(Size::DW, R10, best_end, 0);
        for i in 0..8 {
            group(a, raw, i);
            // R1 = (g == 0)
            a.mov(R1, R0);
            a.alu_imm(Alu::Sub, R1, 1);
            a.alu_imm(Alu::Rsh, R1, 63);
            a.ldx(Size::DW, R2, R10, cur);
            a.alu_imm(Alu::Add, R2, 1);
            a.alu(Alu::Mul, R2, R1);
            a.stx(Size::DW, R10, cur, R2);
            // R3 = (cur > best)
            a.ldx(Size::DW, R4, R10, best);
            a.mov(R3, R4);
            a.alu(Alu::Sub, R3, R2);
            a.alu_imm(Alu::Rsh, R3, 63);
            // best += better * (cur - best)
            a.alu(Alu::Sub, R2, R4);
            a.alu(Alu::Mul, R2, R3);
            a.alu(Alu::Add, R4, R2);
            a.stx(Size::DW, R10, best, R4);
            // best_end += better * (i - best_end)
            a.ldx(Size::DW, R4, R10, best_end);
            a.mov_imm(R2, i as i64);
            a.alu(Alu::Sub, R2, R4);
            a.alu(Alu::Mul, R2, R3);
            a.alu(Alu::Add, R4, R2);
            a.stx(Size::DW, R10, best_end, R4);
        }
        // The run's first group in `start` and its length in `best`; a run shorter than 2
        // groups is not compressed: its start moves to 100 (no group) and its length to 0.
        a.ldx(Size::DW, R2, R10, best);
        a.mov(R3, R2);
        a.alu_imm(Alu::Sub, R3, 2);
        a.alu_imm(Alu::Rsh, R3, 63); // R3 = (best < 2)
        a.ldx(Size::DW, R4, R10, best_end);
        a.alu_imm(Alu::Add, R4, 1);
        a.alu(Alu::Sub, R4, R2); // start = best_end + 1 - best
        a.mov_imm(R1, 100);
        a.alu(Alu::Sub, R1, R4);
        a.alu(Alu::Mul, R1, R3);
        a.alu(Alu::Add, R4, R1);
        a.stx(Size::DW, R10, start, R4);
        a.mov(R1, R2);
        a.alu(Alu::Mul, R1, R3);
        a.alu(Alu::Sub, R2, R1);
        a.stx(Size::DW, R10, best, R2);
        for i in 0..8i64 {
            // R3 = in the run: start <= i < start + len.
            a.ldx(Size::DW, R4, R10, start);
            a.mov_imm(R3, i);
            a.alu(Alu::Sub, R3, R4);
            a.alu_imm(Alu::Rsh, R3, 63);
            a.alu_imm(Alu::Xor, R3, 1); // i >= start
            a.ldx(Size::DW, R2, R10, best);
            a.alu(Alu::Add, R2, R4);
            a.mov_imm(R1, i);
            a.alu(Alu::Sub, R1, R2);
            a.alu_imm(Alu::Rsh, R1, 63); // i < start + len
            a.alu(Alu::And, R3, R1);
            // R2 = a ':' here: at the run's first group (i == start), or before a group
            // outside the run that is not the first.
            a.mov_imm(R2, i);
            a.alu(Alu::Sub, R2, R4);
            a.mov(R1, R2);
            a.alu_imm(Alu::Neg, R1, 0);
            a.alu(Alu::Or, R2, R1);
            a.alu_imm(Alu::Rsh, R2, 63);
            a.alu_imm(Alu::Xor, R2, 1); // i == start
            if i > 0 {
                a.mov(R1, R3);
                a.alu_imm(Alu::Xor, R1, 1);
                a.alu(Alu::Or, R2, R1);
            }
            put_at_cursor(a, tmp);
            a.st_imm(Size::B, R1, 0, b':' as i32);
            a.alu(Alu::Add, R5, R2);
            // The group's hex digits, unless it is in the run.
            a.alu_imm(Alu::Xor, R3, 1);
            a.stx(Size::DW, R10, cur, R3);
            group(a, raw, i as u32);
            hex_group(a, tmp, cur);
        }
        // A run reaching the last group ends with a second ':'.
        a.ldx(Size::DW, R2, R10, start);
        a.ldx(Size::DW, R1, R10, best);
        a.alu(Alu::Add, R2, R1);
        a.alu_imm(Alu::Sub, R2, 8);
        a.mov(R1, R2);
        a.alu_imm(Alu::Neg, R1, 0);
        a.alu(Alu::Or, R2, R1);
        a.alu_imm(Alu::Rsh, R2, 63);
        a.alu_imm(Alu::Xor, R2, 1);
        put_at_cursor(a, tmp);
        a.st_imm(Size::B, R1, 0, b':' as i32);
        a.alu(Alu::Add, R5, R2);
        Ok(())
    }
}

/// R1 = the address of the cursor in scratch `tmp` (R5 masked to 0..=63 first).
fn put_at_cursor(a: &mut Asm, tmp: u32) {
    a.alu_imm(Alu::And, R5, 63);
    a.mov(R1, R7);
    a.alu_imm(Alu::Add, R1, tmp as i32);
    a.alu(Alu::Add, R1, R5);
}

/// `text` at the cursor, which moves past it.
fn put_text(a: &mut Asm, tmp: u32, text: &[u8]) {
    for &c in text {
        put_at_cursor(a, tmp);
        a.st_imm(Size::B, R1, 0, i32::from(c));
        a.alu_imm(Alu::Add, R5, 1);
    }
}

/// R0 = group `i` of the IPv6 address in scratch `raw` (bytes 2i, 2i + 1, network order).
fn group(a: &mut Asm, raw: u32, i: u32) {
    a.ldx(Size::B, R0, R7, (raw + 2 * i) as i16);
    a.alu_imm(Alu::Lsh, R0, 8);
    a.ldx(Size::B, R1, R7, (raw + 2 * i + 1) as i16);
    a.alu(Alu::Or, R0, R1);
}

/// The 4 bytes at scratch `raw` as `a.b.c.d` at the cursor (decimal, no leading zeros).
fn dotted_quad(a: &mut Asm, raw: u32, tmp: u32) {
    for k in 0..4 {
        a.ldx(Size::B, R0, R7, (raw + k) as i16);
        // R2 = digits: 1 + (b > 9) + (b > 99).
        a.mov_imm(R2, 9);
        a.alu(Alu::Sub, R2, R0);
        a.alu_imm(Alu::Rsh, R2, 63);
        a.mov_imm(R3, 99);
        a.alu(Alu::Sub, R3, R0);
        a.alu_imm(Alu::Rsh, R3, 63);
        a.alu(Alu::Add, R2, R3);
        a.alu_imm(Alu::Add, R2, 1);
        // R3 = the three decimal digits in byte lanes 2, 1, 0, shifted so the first digit
        // written is in lane 2.
        a.mov(R3, R0);
        a.alu_imm(Alu::Div, R3, 100);
        a.alu_imm(Alu::Lsh, R3, 16);
        a.mov(R4, R0);
        a.alu_imm(Alu::Div, R4, 10);
        a.alu_imm(Alu::Mod, R4, 10);
        a.alu_imm(Alu::Lsh, R4, 8);
        a.alu(Alu::Or, R3, R4);
        a.mov(R4, R0);
        a.alu_imm(Alu::Mod, R4, 10);
        a.alu(Alu::Or, R3, R4);
        a.mov_imm(R4, 3);
        a.alu(Alu::Sub, R4, R2);
        a.alu_imm(Alu::Lsh, R4, 3);
        a.alu(Alu::Lsh, R3, R4);
        put_at_cursor(a, tmp);
        for (j, shift) in [16, 8, 0].into_iter().enumerate() {
            a.mov(R4, R3);
            a.alu_imm(Alu::Rsh, R4, shift);
            a.alu_imm(Alu::And, R4, 0xff);
            a.alu_imm(Alu::Add, R4, b'0' as i32);
            a.stx(Size::B, R1, j as i16, R4);
        }
        a.alu(Alu::Add, R5, R2);
        if k < 3 {
            put_at_cursor(a, tmp);
            a.st_imm(Size::B, R1, 0, b'.' as i32);
            a.alu_imm(Alu::Add, R5, 1);
        }
    }
}

/// The 16-bit group in R0 as lower-case hex without leading zeros at the cursor; the cursor
/// advances only when the stack slot `emit` holds 1.
fn hex_group(a: &mut Asm, tmp: u32, emit: i16) {
    // R2 = digits: 1 + (g > 0xf) + (g > 0xff) + (g > 0xfff).
    a.mov_imm(R2, 1);
    for k in [0xf, 0xff, 0xfff] {
        a.mov_imm(R3, k);
        a.alu(Alu::Sub, R3, R0);
        a.alu_imm(Alu::Rsh, R3, 63);
        a.alu(Alu::Add, R2, R3);
    }
    // R3 = the group shifted so its first digit is the top nibble of 16 bits.
    a.mov(R3, R0);
    a.mov_imm(R4, 4);
    a.alu(Alu::Sub, R4, R2);
    a.alu_imm(Alu::Lsh, R4, 2);
    a.alu(Alu::Lsh, R3, R4);
    put_at_cursor(a, tmp);
    for (j, shift) in [12, 8, 4, 0].into_iter().enumerate() {
        a.mov(R4, R3);
        a.alu_imm(Alu::Rsh, R4, shift);
        a.alu_imm(Alu::And, R4, 0xf);
        // '0' + nibble, + 39 more ('a' - '0' - 10) above 9.
        a.mov_imm(R0, 9);
        a.alu(Alu::Sub, R0, R4);
        a.alu_imm(Alu::Rsh, R0, 63);
        a.alu_imm(Alu::Mul, R0, 39);
        a.alu(Alu::Add, R4, R0);
        a.alu_imm(Alu::Add, R4, b'0' as i32);
        a.stx(Size::B, R1, j as i16, R4);
    }
    a.ldx(Size::DW, R0, R10, emit);
    a.alu(Alu::Mul, R2, R0);
    a.alu(Alu::Add, R5, R2);
}
