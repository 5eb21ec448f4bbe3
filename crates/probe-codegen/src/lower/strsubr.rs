//! DTrace's string subroutines over Sightline's NUL-padded scratch strings: `basename`, `dirname`,
//! `substr`, `strchr`, `strrchr`, `strstr`, `index`, `rindex` (DTrace guide, "Actions and
//! Subroutines" → "Subroutines"; edge cases as illumos `dtrace_dif_subr` computes them: an empty
//! string's basename and dirname are ".", a path of slashes gives "/", trailing slashes are
//! ignored, a negative `substr` index counts from the end, `index`/`rindex` clamp their start as
//! Perl does).
//!
//! # Why the loops look like this
//!
//! Strings are `strsize`-byte buffers in the per-CPU scratch map (`R7`), NUL-padded: every byte
//! after the terminator is 0. Copies of a computed span and string lengths use helpers
//! (`bpf_probe_read_kernel[_str]` from our own scratch memory), so they need no loop. Scanning
//! for a character or a substring does: a bounded loop (Linux 5.3+) whose counter runs from the
//! constant 0 to `strsize`, so the verifier walks each iteration with the counter known. Three
//! rules keep that walk linear in `strsize` and within the verifier's limits:
//!
//! - the loop body has no data-dependent branch. The verifier pushes the other side of every
//!   branch on an unknown value onto a stack of pending states (at most 8192 per program,
//!   "the sequence of 8193 jumps is too complex"); a loop with one such branch per byte would
//!   run out after a few calls. Conditions are computed as 0/1 values instead
//!   (`(x | -x) >> 63` is `x != 0`) and updates are `w += cond * (new - w)`. The loops need not
//!   stop at the terminator: the padding bytes after it are 0 and change nothing;
//! - every result a loop finds (a position, "not found") lives in a scratch-map word, which the
//!   verifier does not track, never in a register across iterations;
//! - values read back from those words are unknown to the verifier, so each is clamped to the
//!   buffer before it becomes an offset or a helper size, and a searched position is masked to a
//!   power of two the haystack's buffer covers.
//!
//! A substring comparison at one position is straight-line code over 8-byte words:
//! `((s[p..] & mask) ^ t) == 0`, where `mask` has `0xff` in the first `strlen(t)` bytes (built by
//! copying `strlen(t)` bytes of `0xff` with a helper) and `t` is zero past its end; the needle's
//! buffer is only as wide as its longest possible value (`str_cap`), so `strstr(s, "lib")` compares
//! one word per position.
//!
//! `strtok` keeps state between calls (DTrace's per-CPU `dtms_strtok`, Oracle's `DMEM_STRTOK`):
//! a scratch region the program's prologue reserves when one of its clauses calls it, holding
//! the position reached (-1: no string yet) and a copy of the string being split. A call
//! marks its delimiters in a 256-bit table (four scratch words, one bit per byte value, NUL
//! always set), then finds the token's start and end in one branch-free pass over the copy.

use super::*;

/// Which substring search (they differ in direction, start and result).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Search {
    /// `strstr(s, t)`: forward from 0; the suffix at the match.
    Strstr,
    /// `index(s, t [, start])`: forward from `start`; the position.
    Index,
    /// `rindex(s, t [, start])`: backward from `start` (default: the length); the position.
    Rindex,
}

/// The verifier's per-program budget of processed instructions (`BPF_COMPLEXITY_LIMIT_INSNS`,
/// kernel/bpf/verifier.c); the string loops may use most of it, the rest of the program needs some.
const LOOP_BUDGET: u64 = 900_000;

impl ProgGen<'_, '_> {
    /// Accounts for a loop of `iterations` iterations of `body` instructions each, which the
    /// verifier walks one by one; a program whose loops would exceed [`LOOP_BUDGET`] is an error
    /// that says what to change instead of the verifier's "program is too large".
    fn loop_cost(&mut self, what: &str, iterations: u32, body: u32, span: Span) -> Res<()> {
        self.loop_cost += iterations as u64 * body as u64;
        if self.loop_cost > LOOP_BUDGET {
            return self.err(
                span,
                format!(
                    "{what} at strsize {} makes the verifier walk about {} instructions in this probe's program (its limit is 1000000): use a constant needle, fewer string searches per probe, or a smaller strsize",
                    self.strsize(),
                    self.loop_cost
                ),
            );
        }
        Ok(())
    }

    /// `strsize` rounded up to whole 8-byte words: the bytes a string value occupies in scratch.
    pub(super) fn ss8(&self) -> u32 {
        (self.strsize() + 7) & !7
    }

    /// Evaluates the string `e` into a fresh scratch buffer laid out as `before` zero bytes, the
    /// string's `strsize` bytes (rounded to 8), `after` zero bytes; returns the string's offset.
    fn string_buf(&mut self, e: &TExpr, before: u32, after: u32, span: Span) -> Res<u32> {
        let ss8 = self.ss8();
        let base = self.scratch(before + ss8 + after, span)?;
        self.string(e, base + before)?;
        self.zero(base, before);
        self.zero(base + before + ss8, after);
        Ok(base + before)
    }

    /// R0 = the length of the string at scratch `off`, in `[0, strsize - 1]`. Loop-free:
    /// `bpf_probe_read_kernel_str` from our own scratch memory returns length + 1. Clobbers R1..R5.
    pub(super) fn strlen_at(&mut self, off: u32, span: Span) -> Res<()> {
        let ss = self.strsize();
        let tmp = self.scratch(ss, span)?;
        let a = &mut self.asm;
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, tmp as i32);
        a.mov_imm(R2, ss as i64);
        a.mov(R3, R7);
        a.alu_imm(Alu::Add, R3, off as i32);
        a.call(helper::PROBE_READ_KERNEL_STR);
        a.alu_imm(Alu::Sub, R0, 1);
        self.clamp(R0, 0, ss as i32 - 1);
        Ok(())
    }

    /// Bounds `r` to `[lo, hi]` where the verifier can see it (`lo >= 0`): below `lo` (signed)
    /// becomes `lo`, above `hi` becomes `hi`.
    fn clamp(&mut self, r: Reg, lo: i32, hi: i32) {
        let a = &mut self.asm;
        let (ok_lo, ok_hi) = (a.label(), a.label());
        a.jmp_imm(Cond::SGe, r, lo, ok_lo);
        a.mov_imm(r, lo as i64);
        a.bind(ok_lo);
        a.jmp_imm(Cond::Le, r, hi, ok_hi);
        a.mov_imm(r, hi as i64);
        a.bind(ok_hi);
    }

    /// `r = (r != 0)` as 0 or 1, without a branch (`t` is clobbered).
    fn ne0(&mut self, r: Reg, t: Reg) {
        let a = &mut self.asm;
        a.mov(t, r);
        a.alu_imm(Alu::Neg, t, 0);
        a.alu(Alu::Or, r, t);
        a.alu_imm(Alu::Rsh, r, 63);
    }

    /// Scratch word `w` becomes `val` when `cond` (0 or 1) is 1, else stays: `w += cond * (val -
    /// w)`, without a branch (clobbers R0 and `t`).
    fn set_if(&mut self, w: u32, cond: Reg, val: Reg, t: Reg) {
        let a = &mut self.asm;
        a.ldx(Size::DW, R0, R7, w as i16);
        a.mov(t, val);
        a.alu(Alu::Sub, t, R0);
        a.alu(Alu::Mul, t, cond);
        a.alu(Alu::Add, R0, t);
        a.stx(Size::DW, R7, w as i16, R0);
    }

    /// `*(R7 + dst)[0..R2] = *(R7 + src + R1)[0..R2]`: copies `R2` bytes (already in `[0,
    /// strsize - 1]`) starting at position `R1` (clamped here) of the string at `src`.
    fn copy_span(&mut self, dst: u32, src: u32) {
        let ss = self.strsize();
        self.clamp(R1, 0, ss as i32 - 1);
        let a = &mut self.asm;
        a.mov(R3, R7);
        a.alu_imm(Alu::Add, R3, src as i32);
        a.alu(Alu::Add, R3, R1);
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, dst as i32);
        a.call(helper::PROBE_READ_KERNEL);
    }

    /// Writes to `off` the suffix of the string at `src` that starts at the position held in the
    /// scratch word `w`; a negative position gives "" (DTrace's NULL result).
    pub(super) fn suffix_at(&mut self, src: u32, w: u32, off: u32) {
        let ss = self.strsize();
        self.zero(off, ss);
        let a = &mut self.asm;
        let out = a.label();
        a.ldx(Size::DW, R0, R7, w as i16);
        a.jmp_imm(Cond::SLt, R0, 0, out);
        a.jmp_imm(Cond::Gt, R0, ss as i32 - 1, out);
        a.mov(R3, R7);
        a.alu_imm(Alu::Add, R3, src as i32);
        a.alu(Alu::Add, R3, R0);
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, off as i32);
        a.mov_imm(R2, ss as i64);
        a.call(helper::PROBE_READ_KERNEL_STR);
        a.bind(out);
    }

    /// `strchr(s, c)` / `strrchr(s, c)` into `off`: the suffix of `s` from the first (last)
    /// byte equal to `(char)c`, the terminating NUL included in the search as in
    /// dtrace_dif_subr; "" when there is none.
    pub(super) fn strchr(&mut self, args: &[TExpr], last: bool, off: u32, span: Span) -> Res<()> {
        let ss = self.strsize();
        self.loop_cost(if last { "strrchr()" } else { "strchr()" }, ss, 12, span)?;
        let s = self.string_buf(&args[0], 0, 0, span)?;
        let cslot = self.slot(span)?;
        self.int(&args[1])?;
        let w = self.scratch(8, span)?;
        let a = &mut self.asm;
        a.alu_imm(Alu::And, R0, 0xff);
        a.stx(Size::DW, R10, cslot, R0);
        a.st_imm(Size::DW, R7, w as i16, -1);
        a.ldx(Size::DW, R4, R10, cslot);
        let head = a.label();
        a.mov_imm(R1, 0);
        a.bind(head);
        a.mov(R2, R7);
        a.alu_imm(Alu::Add, R2, s as i32);
        a.alu(Alu::Add, R2, R1);
        a.ldx(Size::B, R3, R2, 0);
        a.alu(Alu::Xor, R3, R4);
        self.ne0(R3, R5);
        let a = &mut self.asm;
        a.alu_imm(Alu::Xor, R3, 1); // byte == c
        if !last {
            // Only the first match: while w is still -1.
            a.ldx(Size::DW, R5, R7, w as i16);
            a.alu_imm(Alu::Rsh, R5, 63);
            a.alu(Alu::And, R3, R5);
        }
        self.set_if(w, R3, R1, R5);
        let a = &mut self.asm;
        a.alu_imm(Alu::Add, R1, 1);
        a.jmp_imm(Cond::Lt, R1, ss as i32, head);
        self.suffix_at(s, w, off);
        Ok(())
    }
}

impl ProgGen<'_, '_> {
    /// `lltostr(v, base)` for a base other than 10 into `off`, as dtrace_dif_subr: the digits of
    /// `v` as an unsigned number (letters for digits above 9), after `0x` in base 16 and `0` in
    /// base 8; 0 is "0" (base 16: "0x0").
    pub(super) fn lltostr_base(&mut self, v: &TExpr, base: u32, off: u32, span: Span) -> Res<()> {
        let ss = self.strsize();
        let mut digits = 0i32;
        let mut x = u64::MAX;
        while x > 0 {
            x /= base as u64;
            digits += 1;
        }
        // Digits end at tmp[70], NUL at tmp[71]; up to three prefix bytes before them.
        let vslot = self.slot(span)?;
        self.int(v)?;
        self.asm.stx(Size::DW, R10, vslot, R0);
        let tmp = self.scratch(72, span)?;
        self.zero(tmp, 72);
        self.zero(off, ss);
        let a = &mut self.asm;
        let done = a.label();
        a.ldx(Size::DW, R0, R10, vslot);
        a.mov_imm(R5, 71);
        for k in 0..digits {
            a.jmp_imm(Cond::Eq, R0, 0, done);
            let low = a.label();
            a.mov(R1, R0);
            a.alu_imm(Alu::Mod, R1, base as i32);
            a.jmp_imm(Cond::Lt, R1, 10, low);
            a.alu_imm(Alu::Add, R1, (b'a' - b'0' - 10) as i32);
            a.bind(low);
            a.alu_imm(Alu::Add, R1, b'0' as i32);
            a.stx(Size::B, R7, (tmp as i32 + 70 - k) as i16, R1);
            a.alu_imm(Alu::Div, R0, base as i32);
            a.mov_imm(R5, (70 - k) as i64);
        }
        a.bind(done);
        // Prefixes, each one byte before R5.
        let put = |a: &mut crate::insn::Asm, c: u8| {
            a.alu_imm(Alu::Sub, R5, 1);
            a.mov(R1, R7);
            a.alu_imm(Alu::Add, R1, tmp as i32);
            a.alu(Alu::Add, R1, R5);
            a.st_imm(Size::B, R1, 0, c as i32);
        };
        let nonzero = a.label();
        a.ldx(Size::DW, R0, R10, vslot);
        a.jmp_imm(Cond::Ne, R0, 0, nonzero);
        if base != 8 {
            put(a, b'0');
        }
        a.bind(nonzero);
        if base == 16 {
            put(a, b'x');
        }
        if base == 8 || base == 16 {
            put(a, b'0');
        }
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, off as i32);
        a.mov_imm(R2, 72.min(ss as i64));
        a.mov(R3, R7);
        a.alu_imm(Alu::Add, R3, tmp as i32);
        a.alu(Alu::Add, R3, R5);
        a.call(helper::PROBE_READ_KERNEL_STR);
        Ok(())
    }
}

/// Characters of its string that `strtoll()` reads (white space, sign and digits).
pub const STRTOLL_SPAN: u32 = 64;

impl ProgGen<'_, '_> {
    /// `strtoll(s, base)` into R0 (see `Subr::Strtoll`): one pass with the state in scratch
    /// words: the value, the sign, the phase (0 before the number, 1 in it, 2 after it) and
    /// the digits seen (a `0x` after a single `0` is skipped in base 16). Only the first
    /// [`STRTOLL_SPAN`] characters are looked at, so that several calls in a program stay
    /// within the verifier's limit on the branches of one path.
    pub(super) fn strtoll(&mut self, arg: &TExpr, base: u32, span: Span) -> Res<()> {
        let ss = self.strsize();
        let n = ss.min(STRTOLL_SPAN);
        self.loop_cost("strtoll()", n, 40, span)?;
        let s = self.string_buf(arg, 0, 0, span)?;
        let w = self.scratch(32, span)?;
        let (acc, neg, phase, ndig) = (w as i16, w as i16 + 8, w as i16 + 16, w as i16 + 24);
        let a = &mut self.asm;
        for x in [acc, neg, phase, ndig] {
            a.st_imm(Size::DW, R7, x, 0);
        }
        let head = a.label();
        a.mov_imm(R1, 0);
        a.bind(head);
        let next = a.label();
        let digit = a.label();
        let stop = a.label();
        a.mov(R2, R7);
        a.alu_imm(Alu::Add, R2, s as i32);
        a.alu(Alu::Add, R2, R1);
        a.ldx(Size::B, R3, R2, 0);
        a.ldx(Size::DW, R4, R7, phase);
        a.jmp_imm(Cond::Eq, R4, 2, next);
        a.jmp_imm(Cond::Ne, R4, 0, digit);
        // Before the number: white space (' ', '\t' to '\r'), then one sign.
        a.jmp_imm(Cond::Eq, R3, b' ' as i32, next);
        a.mov(R4, R3);
        a.alu_imm(Alu::Sub, R4, b'\t' as i32);
        a.jmp_imm(Cond::Lt, R4, 5, next);
        a.st_imm(Size::DW, R7, phase, 1);
        let not_minus = a.label();
        a.jmp_imm(Cond::Ne, R3, b'-' as i32, not_minus);
        a.st_imm(Size::DW, R7, neg, 1);
        a.ja(next);
        a.bind(not_minus);
        a.jmp_imm(Cond::Eq, R3, b'+' as i32, next);
        a.bind(digit);
        if base == 16 {
            let not_x = a.label();
            a.mov(R4, R3);
            a.alu_imm(Alu::Or, R4, 0x20);
            a.jmp_imm(Cond::Ne, R4, b'x' as i32, not_x);
            a.ldx(Size::DW, R4, R7, ndig);
            a.jmp_imm(Cond::Ne, R4, 1, not_x);
            a.ldx(Size::DW, R4, R7, acc);
            a.jmp_imm(Cond::Ne, R4, 0, not_x);
            a.st_imm(Size::DW, R7, ndig, 2);
            a.ja(next);
            a.bind(not_x);
        }
        let have = a.label();
        a.mov(R4, R3);
        a.alu_imm(Alu::Sub, R4, b'0' as i32);
        a.jmp_imm(Cond::Lt, R4, 10, have);
        // A letter of either case: 10 and up.
        a.mov(R4, R3);
        a.alu_imm(Alu::Or, R4, 0x20);
        a.alu_imm(Alu::Sub, R4, b'a' as i32);
        a.jmp_imm(Cond::Ge, R4, 26, stop);
        a.alu_imm(Alu::Add, R4, 10);
        a.bind(have);
        a.jmp_imm(Cond::Ge, R4, base as i32, stop);
        a.ldx(Size::DW, R5, R7, acc);
        a.alu_imm(Alu::Mul, R5, base as i32);
        a.alu(Alu::Add, R5, R4);
        a.stx(Size::DW, R7, acc, R5);
        a.ldx(Size::DW, R5, R7, ndig);
        a.alu_imm(Alu::Add, R5, 1);
        a.stx(Size::DW, R7, ndig, R5);
        a.ja(next);
        a.bind(stop);
        a.st_imm(Size::DW, R7, phase, 2);
        a.bind(next);
        a.alu_imm(Alu::Add, R1, 1);
        a.jmp_imm(Cond::Lt, R1, n as i32, head);
        let pos = a.label();
        a.ldx(Size::DW, R0, R7, acc);
        a.ldx(Size::DW, R1, R7, neg);
        a.jmp_imm(Cond::Eq, R1, 0, pos);
        a.alu_imm(Alu::Neg, R0, 0);
        a.bind(pos);
        Ok(())
    }

    /// `toupper(s)` (`upper`) or `tolower(s)` into `off`, as dtrace_dif_subr: only the ASCII
    /// letters change.
    pub(super) fn change_case(
        &mut self,
        arg: &TExpr,
        upper: bool,
        off: u32,
        span: Span,
    ) -> Res<()> {
        let ss = self.strsize();
        self.loop_cost(if upper { "toupper()" } else { "tolower()" }, ss, 9, span)?;
        self.string(arg, off)?;
        let (from, delta) = if upper { (b'a', -32) } else { (b'A', 32) };
        let a = &mut self.asm;
        let head = a.label();
        a.mov_imm(R1, 0);
        a.bind(head);
        let skip = a.label();
        a.mov(R2, R7);
        a.alu_imm(Alu::Add, R2, off as i32);
        a.alu(Alu::Add, R2, R1);
        a.ldx(Size::B, R3, R2, 0);
        a.mov(R4, R3);
        a.alu_imm(Alu::Sub, R4, from as i32);
        // Unsigned: bytes below `from` wrap around and are skipped too.
        a.jmp_imm(Cond::Ge, R4, 26, skip);
        a.alu_imm(Alu::Add, R3, delta);
        a.stx(Size::B, R2, 0, R3);
        a.bind(skip);
        a.alu_imm(Alu::Add, R1, 1);
        a.jmp_imm(Cond::Lt, R1, ss as i32, head);
        Ok(())
    }

    /// `basename(s)` / `dirname(s)` into `off`, as dtrace_dif_subr: trailing slashes are not
    /// part of the last component; "" gives "."; only slashes give "/"; no slash before the last
    /// component gives dirname "."; a last component right after leading slashes gives dirname
    /// "/".
    ///
    /// One forward pass records, in scratch words, the last non-slash position `L`, the start of
    /// the last component `FB` (a non-slash right after a slash) and the last non-slash before
    /// that component's slashes `LD` (the end of the dirname); -1 while there is none.
    pub(super) fn basename_dirname(
        &mut self,
        arg: &TExpr,
        dir: bool,
        off: u32,
        span: Span,
    ) -> Res<()> {
        let ss = self.strsize();
        self.loop_cost(if dir { "dirname()" } else { "basename()" }, ss, 18, span)?;
        // 8 zero bytes before the string: the "previous byte" of position 0 is NUL, not '/'.
        let s = self.string_buf(arg, 8, 0, span)?;
        let words = self.scratch(24, span)?;
        let (l, fb, ld) = (words as i16, words as i16 + 8, words as i16 + 16);
        let a = &mut self.asm;
        for w in [l, fb, ld] {
            a.st_imm(Size::DW, R7, w, -1);
        }
        let head = a.label();
        a.mov_imm(R1, 0);
        a.bind(head);
        a.mov(R2, R7);
        a.alu_imm(Alu::Add, R2, s as i32);
        a.alu(Alu::Add, R2, R1);
        a.ldx(Size::B, R3, R2, 0);
        a.ldx(Size::B, R4, R2, -1);
        a.mov(R5, R3);
        self.ne0(R5, R0); // byte != NUL
        self.asm.alu_imm(Alu::Xor, R3, b'/' as i32);
        self.ne0(R3, R0); // byte != '/'
        let a = &mut self.asm;
        a.alu(Alu::And, R3, R5); // R3: a component byte at k
        a.alu_imm(Alu::Xor, R4, b'/' as i32);
        self.ne0(R4, R0);
        let a = &mut self.asm;
        a.alu_imm(Alu::Xor, R4, 1);
        a.alu(Alu::And, R4, R3); // R4: a component starts at k
        self.set_if(fb as u32, R4, R1, R5);
        // LD = L (before L moves to k) where a component starts.
        self.asm.ldx(Size::DW, R9, R7, l);
        self.set_if(ld as u32, R4, R9, R5);
        self.set_if(l as u32, R3, R1, R5);
        let a = &mut self.asm;
        a.alu_imm(Alu::Add, R1, 1);
        a.jmp_imm(Cond::Lt, R1, ss as i32, head);

        self.zero(off, ss);
        let a = &mut self.asm;
        let (dot, slash, out) = (a.label(), a.label(), a.label());
        a.ldx(Size::B, R0, R7, s as i16);
        a.jmp_imm(Cond::Eq, R0, 0, dot);
        a.ldx(Size::DW, R0, R7, l);
        a.jmp_imm(Cond::SLt, R0, 0, slash);
        if dir {
            a.ldx(Size::DW, R1, R7, fb);
            a.jmp_imm(Cond::SLt, R1, 0, dot);
            a.ldx(Size::DW, R2, R7, ld);
            a.jmp_imm(Cond::SLt, R2, 0, slash);
            // s[0..=LD]
            a.alu_imm(Alu::Add, R2, 1);
            self.clamp(R2, 1, ss as i32 - 1);
            self.asm.mov_imm(R1, 0);
        } else {
            // s[FB..=L], FB = 0 when the last component starts the string.
            let have = a.label();
            a.ldx(Size::DW, R1, R7, fb);
            a.jmp_imm(Cond::SGe, R1, 0, have);
            a.mov_imm(R1, 0);
            a.bind(have);
            a.mov(R2, R0);
            a.alu(Alu::Sub, R2, R1);
            a.alu_imm(Alu::Add, R2, 1);
            self.clamp(R2, 1, ss as i32 - 1);
        }
        self.copy_span(off, s);
        let a = &mut self.asm;
        a.ja(out);
        a.bind(dot);
        a.st_imm(Size::B, R7, off as i16, b'.' as i32);
        a.ja(out);
        a.bind(slash);
        a.st_imm(Size::B, R7, off as i16, b'/' as i32);
        a.bind(out);
        Ok(())
    }

    /// `substr(s, index [, length])` into `off`, with dtrace_dif_subr's arithmetic: a negative
    /// index counts from the end (a start before the string shortens `length` by the overhang), a
    /// negative length leaves that many bytes off the end, an index at or past the end gives "".
    /// Loop-free: the result is one helper copy of a computed span.
    pub(super) fn substr(&mut self, args: &[TExpr], off: u32, span: Span) -> Res<()> {
        let ss = self.strsize() as i32;
        let s = self.string_buf(&args[0], 0, 0, span)?;
        let islot = self.slot(span)?;
        self.int(&args[1])?;
        self.asm.stx(Size::DW, R10, islot, R0);
        let rslot = self.slot(span)?;
        match args.get(2) {
            Some(n) => self.int(n)?,
            None => self.asm.mov_imm(R0, ss as i64),
        }
        self.asm.stx(Size::DW, R10, rslot, R0);
        self.zero(off, ss as u32);
        self.strlen_at(s, span)?;
        let a = &mut self.asm;
        let (nonneg, posrem, have, out) = (a.label(), a.label(), a.label(), a.label());
        a.mov(R3, R0); // len
        a.ldx(Size::DW, R1, R10, islot); // index
        a.ldx(Size::DW, R2, R10, rslot); // remaining
        a.jmp_imm(Cond::SGe, R1, 0, nonneg);
        a.alu(Alu::Add, R1, R3);
        a.jmp_imm(Cond::SGe, R1, 0, nonneg);
        a.mov(R4, R1);
        a.alu(Alu::Add, R4, R2);
        a.jmp_imm(Cond::SLe, R4, 0, nonneg);
        a.alu(Alu::Add, R2, R1);
        a.mov_imm(R1, 0);
        a.bind(nonneg);
        a.jmp_imm(Cond::SLt, R1, 0, out);
        a.jmp(Cond::SGe, R1, R3, out);
        a.jmp_imm(Cond::SGe, R2, 0, posrem);
        a.alu(Alu::Add, R2, R3);
        a.alu(Alu::Sub, R2, R1);
        a.ja(have);
        a.bind(posrem);
        // (uint64_t)index + (uint64_t)remaining > strsize: remaining = strsize - index.
        a.mov(R4, R1);
        a.alu(Alu::Add, R4, R2);
        a.jmp_imm(Cond::Le, R4, ss, have);
        a.mov_imm(R2, ss as i64);
        a.alu(Alu::Sub, R2, R1);
        a.bind(have);
        // The copy stops at the string's end: count = min(remaining, len - index).
        let fits = a.label();
        a.alu(Alu::Sub, R3, R1);
        a.jmp(Cond::SLe, R2, R3, fits);
        a.mov(R2, R3);
        a.bind(fits);
        a.jmp_imm(Cond::SLt, R2, 1, out);
        self.clamp(R2, 1, ss - 1);
        self.copy_span(off, s);
        self.asm.bind(out);
        Ok(())
    }

    /// The substring searches of dtrace_dif_subr (`strstr`, `index`, `rindex`). Leaves the
    /// match position, or -1, in a scratch word and returns (the haystack's offset, the word's
    /// offset).
    ///
    /// Rules (illumos): both strings empty → position 0; `index` with a start: negative → 0, at
    /// or past the length → the length if the needle is empty, else -1; `rindex` with a start:
    /// negative → 0 if the needle is empty, else -1; past the length → the length. Without a start
    /// `rindex` begins at the length (so an empty needle is found at the end). Positions are
    /// tried one by one (`index`, `strstr` up to length − 1; `rindex` down to 0).
    pub(super) fn search(&mut self, kind: Search, args: &[TExpr], span: Span) -> Res<(u32, u32)> {
        let ss = self.strsize();
        let tcap = ((str_cap(&args[1], ss) + 7) & !7).min(self.ss8());
        let nw = tcap / 8;
        let what = match kind {
            Search::Strstr => "strstr()",
            Search::Index => "index()",
            Search::Rindex => "rindex()",
        };
        self.loop_cost(what, ss, 6 * nw + 32, span)?;
        // Positions are masked to `span_mask` for addressing, so the haystack's buffer covers
        // `span_mask + 1` bytes plus the widest comparison, zero past the string.
        let span_mask = ss.next_power_of_two() - 1;
        let s = self.string_buf(&args[0], 0, span_mask + 1 - self.ss8() + tcap, span)?;
        let t = self.string_buf(&args[1], 0, 0, span)?;
        let pos = self.slot(span)?;
        if let Some(p) = args.get(2) {
            self.int(p)?;
            self.asm.stx(Size::DW, R10, pos, R0);
        }
        let mask = self.scratch(tcap, span)?;
        let ones = self.scratch(tcap, span)?;
        let w = self.scratch(8, span)?;
        self.zero(mask, tcap);
        for i in (0..tcap).step_by(8) {
            self.asm.st_imm(Size::DW, R7, (ones + i) as i16, -1);
        }
        let len = self.slot(span)?;
        let sublen = self.slot(span)?;
        self.strlen_at(s, span)?;
        self.asm.stx(Size::DW, R10, len, R0);
        self.strlen_at(t, span)?;
        self.clamp(R0, 0, tcap as i32 - 1);
        let a = &mut self.asm;
        a.stx(Size::DW, R10, sublen, R0);
        // mask[0..sublen] = 0xff
        a.mov(R2, R0);
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, mask as i32);
        a.mov(R3, R7);
        a.alu_imm(Alu::Add, R3, ones as i32);
        a.call(helper::PROBE_READ_KERNEL);

        let (nonempty, after) = (a.label(), a.label());
        a.st_imm(Size::DW, R7, w as i16, -1);
        a.ldx(Size::DW, R1, R10, len);
        a.ldx(Size::DW, R2, R10, sublen);
        a.jmp_imm(Cond::Ne, R1, 0, nonempty);
        a.jmp_imm(Cond::Ne, R2, 0, nonempty);
        a.st_imm(Size::DW, R7, w as i16, 0);
        a.ja(after);
        a.bind(nonempty);
        // R0 = the first position to try.
        let explicit = args.len() == 3;
        match (kind, explicit) {
            (Search::Strstr, _) | (Search::Index, false) => a.mov_imm(R0, 0),
            (Search::Index, true) => {
                let (ok, inside) = (a.label(), a.label());
                a.ldx(Size::DW, R0, R10, pos);
                a.jmp_imm(Cond::SGe, R0, 0, ok);
                a.mov_imm(R0, 0);
                a.bind(ok);
                a.jmp(Cond::SLt, R0, R1, inside);
                a.jmp_imm(Cond::Ne, R2, 0, after);
                a.stx(Size::DW, R7, w as i16, R1);
                a.ja(after);
                a.bind(inside);
            }
            (Search::Rindex, false) => a.mov(R0, R1),
            (Search::Rindex, true) => {
                let (ok, inside) = (a.label(), a.label());
                a.ldx(Size::DW, R0, R10, pos);
                a.jmp_imm(Cond::SGe, R0, 0, ok);
                a.jmp_imm(Cond::Ne, R2, 0, after);
                a.st_imm(Size::DW, R7, w as i16, 0);
                a.ja(after);
                a.bind(ok);
                a.jmp(Cond::SLe, R0, R1, inside);
                a.mov(R0, R1);
                a.bind(inside);
            }
        }
        self.clamp(R0, 0, ss as i32 - 1);
        let start = self.slot(span)?;
        let a = &mut self.asm;
        a.stx(Size::DW, R10, start, R0);
        let head = a.label();
        a.mov_imm(R1, 0);
        a.bind(head);
        // R5 = the position tried in this iteration; R9 = it masked into the buffer.
        a.ldx(Size::DW, R5, R10, start);
        if kind == Search::Rindex {
            a.alu(Alu::Sub, R5, R1);
        } else {
            a.alu(Alu::Add, R5, R1);
        }
        a.mov(R9, R5);
        a.alu_imm(Alu::And, R9, span_mask as i32);
        a.mov(R2, R7);
        a.alu_imm(Alu::Add, R2, s as i32);
        a.alu(Alu::Add, R2, R9);
        a.mov_imm(R0, 0);
        for i in 0..nw {
            let o = (i * 8) as i16;
            a.ldx(Size::DW, R3, R2, o);
            a.ldx(Size::DW, R4, R7, mask as i16 + o);
            a.alu(Alu::And, R3, R4);
            a.ldx(Size::DW, R4, R7, t as i16 + o);
            a.alu(Alu::Xor, R3, R4);
            a.alu(Alu::Or, R0, R3);
        }
        self.ne0(R0, R3);
        let a = &mut self.asm;
        a.alu_imm(Alu::Xor, R0, 1); // the needle is at R5
        a.mov(R3, R5);
        if kind == Search::Rindex {
            // valid while R5 >= 0
            a.alu_imm(Alu::Rsh, R3, 63);
            a.alu_imm(Alu::Xor, R3, 1);
        } else {
            // valid while R5 < len
            a.ldx(Size::DW, R4, R10, len);
            a.alu(Alu::Sub, R3, R4);
            a.alu_imm(Alu::Rsh, R3, 63);
        }
        a.alu(Alu::And, R0, R3);
        // Only the first match in search order: while w is still -1.
        a.ldx(Size::DW, R3, R7, w as i16);
        a.alu_imm(Alu::Rsh, R3, 63);
        a.alu(Alu::And, R0, R3);
        a.mov(R9, R0);
        self.set_if(w, R9, R5, R3);
        let a = &mut self.asm;
        a.alu_imm(Alu::Add, R1, 1);
        a.jmp_imm(Cond::Lt, R1, ss as i32, head);
        a.bind(after);
        Ok((s, w))
    }
}

impl ProgGen<'_, '_> {
    /// `strtok(str, delims)` into `off` (Oracle's `dt_cg_subr_strtok` and `bpf/strtok.S`, the
    /// semantics of illumos `dtrace_dif_subr`): a string first argument is copied into the
    /// program's strtok state at position 0; the constant NULL continues from the position
    /// reached, and faults with "invalid address" when no string was given in this firing. The
    /// token starts at the first byte at or after the position that is not a delimiter and ends
    /// before the next delimiter or the end of the string; the position moves to that end. When
    /// only delimiters remain, the result is "" (DTrace's NULL) and the position stays at the
    /// end of the string.
    pub(super) fn strtok(&mut self, args: &[TExpr], off: u32, span: Span) -> Res<()> {
        let ss = self.strsize();
        let Some(st) = self.strtok_state else {
            return self.err(span, "internal: strtok() without its state");
        };
        let buf = st + 8;
        // Delimiter bytes before the terminator the loop looks at (the last byte of a string
        // buffer is always its NUL).
        let dlen = str_cap(&args[1], ss).saturating_sub(1);
        self.loop_cost("strtok()", ss - 1, 34, span)?;
        self.loop_cost("strtok()", dlen, 14, span)?;
        if matches!(args[0].kind, TExprKind::Int(0)) {
            let ok = self.asm.label();
            self.asm.ldx(Size::DW, R0, R7, st as i16);
            self.asm.jmp_imm(Cond::SGe, R0, 0, ok);
            self.fault(Fault::BadAddr, None, span)?;
            self.asm.bind(ok);
        } else {
            // Through a buffer of its own: the string may itself be a strtok() result.
            let s = self.string_buf(&args[0], 0, 0, span)?;
            let n = self.ss8();
            self.copy(R7, buf as i32, R7, s as i32, n);
            self.asm.st_imm(Size::DW, R7, st as i16, 0);
        }
        let d = self.string_buf(&args[1], 0, 0, span)?;
        let table = self.scratch(32, span)?;
        self.zero(table, 32);
        self.asm.st_imm(Size::DW, R7, table as i16, 1);
        if dlen > 0 {
            // table[c >> 6] |= 1 << (c & 63) for each delimiter byte c (NUL padding sets bit 0,
            // which is set anyway).
            let a = &mut self.asm;
            let head = a.label();
            a.mov_imm(R1, 0);
            a.bind(head);
            a.mov(R2, R7);
            a.alu_imm(Alu::Add, R2, d as i32);
            a.alu(Alu::Add, R2, R1);
            a.ldx(Size::B, R3, R2, 0);
            a.mov(R4, R3);
            a.alu_imm(Alu::Rsh, R4, 6);
            a.alu_imm(Alu::Lsh, R4, 3);
            a.mov(R2, R7);
            a.alu_imm(Alu::Add, R2, table as i32);
            a.alu(Alu::Add, R2, R4);
            a.alu_imm(Alu::And, R3, 63);
            a.mov_imm(R5, 1);
            a.alu(Alu::Lsh, R5, R3);
            a.ldx(Size::DW, R4, R2, 0);
            a.alu(Alu::Or, R4, R5);
            a.stx(Size::DW, R2, 0, R4);
            a.alu_imm(Alu::Add, R1, 1);
            a.jmp_imm(Cond::Lt, R1, dlen as i32, head);
        }
        // One pass over the copy: `first` = the first non-delimiter at or after the position,
        // `end` = the first delimiter (NUL included) after `first`.
        let first = self.scratch(8, span)?;
        let end = self.scratch(8, span)?;
        let a = &mut self.asm;
        a.st_imm(Size::DW, R7, first as i16, -1);
        a.st_imm(Size::DW, R7, end as i16, -1);
        let head = a.label();
        a.mov_imm(R1, 0);
        a.bind(head);
        a.mov(R2, R7);
        a.alu_imm(Alu::Add, R2, buf as i32);
        a.alu(Alu::Add, R2, R1);
        a.ldx(Size::B, R3, R2, 0);
        a.mov(R4, R3);
        a.alu_imm(Alu::Rsh, R4, 6);
        a.alu_imm(Alu::Lsh, R4, 3);
        a.mov(R2, R7);
        a.alu_imm(Alu::Add, R2, table as i32);
        a.alu(Alu::Add, R2, R4);
        a.ldx(Size::DW, R4, R2, 0);
        a.alu_imm(Alu::And, R3, 63);
        a.alu(Alu::Rsh, R4, R3);
        a.alu_imm(Alu::And, R4, 1); // R4 = the byte is a delimiter
        // R5 = (i >= position): the sign of position - i - 1.
        a.ldx(Size::DW, R5, R7, st as i16);
        a.alu(Alu::Sub, R5, R1);
        a.alu_imm(Alu::Sub, R5, 1);
        a.alu_imm(Alu::Rsh, R5, 63);
        a.mov(R9, R4);
        a.alu_imm(Alu::Xor, R9, 1);
        a.alu(Alu::And, R9, R5);
        a.ldx(Size::DW, R0, R7, first as i16);
        a.alu_imm(Alu::Rsh, R0, 63);
        a.alu(Alu::And, R9, R0); // a non-delimiter in range, no start yet
        self.set_if(first, R9, R1, R5);
        let a = &mut self.asm;
        a.ldx(Size::DW, R0, R7, first as i16);
        a.alu_imm(Alu::Rsh, R0, 63);
        a.alu_imm(Alu::Xor, R0, 1);
        a.alu(Alu::And, R4, R0);
        a.ldx(Size::DW, R0, R7, end as i16);
        a.alu_imm(Alu::Rsh, R0, 63);
        a.alu(Alu::And, R4, R0); // a delimiter after the start, no end yet
        self.set_if(end, R4, R1, R5);
        let a = &mut self.asm;
        a.alu_imm(Alu::Add, R1, 1);
        a.jmp_imm(Cond::Lt, R1, ss as i32 - 1, head);

        self.zero(off, ss);
        let a = &mut self.asm;
        let (found, ended, done) = (a.label(), a.label(), a.label());
        a.ldx(Size::DW, R0, R7, first as i16);
        a.jmp_imm(Cond::SGe, R0, 0, found);
        a.st_imm(Size::DW, R7, st as i16, ss as i32 - 1);
        a.ja(done);
        a.bind(found);
        a.ldx(Size::DW, R2, R7, end as i16);
        a.jmp_imm(Cond::SGe, R2, 0, ended);
        a.mov_imm(R2, ss as i64 - 1);
        a.bind(ended);
        a.stx(Size::DW, R7, st as i16, R2);
        a.alu(Alu::Sub, R2, R0);
        a.mov(R1, R0);
        self.clamp(R2, 0, ss as i32 - 1);
        self.copy_span(off, buf);
        self.asm.bind(done);
        Ok(())
    }
}
