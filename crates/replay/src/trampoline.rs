//! Conditional breakpoints for forced sync points, evaluated in the tracee.
//!
//! A hardware breakpoint at a forced sync point's rip stops the thread at every pass (10–90 µs a
//! stop); in a loop whose registers change at every iteration, the point may be millions of passes
//! away (a Go goroutine's 3·10⁶-iteration loop took hours). Instead:
//!
//! - The **recorder** moves a forced sync point to where a check fits: preferably an instruction
//!   of 5 bytes or more that is not rip-relative, does not branch and does not move rsp
//!   ([`patchable`]), else the first instruction that starts a [`Region`] of short ones (a loop
//!   such as `imul; add; sub; jne` has no 5-byte instruction). From where `PTRACE_INTERRUPT`
//!   stopped the thread it follows straight-line code without system calls or trapped
//!   instructions ([`plan`]) to such an instruction (a hardware breakpoint there, one stop),
//!   stepping over direct branches, for at most [`ADVANCE_ROUNDS`] rounds; a signal on the way
//!   (a fault) is handled as any signal and no point is taken at that stop. If none is found the
//!   recorder retries at later ticks ([`crate::sched::UNPATCHABLE_TRIES`]) before it takes a
//!   point replay watches with the hardware breakpoint at every pass.
//! - The **replayer**, at the first pass whose signature differs, maps one page near the point
//!   (two pages, `mmap` injected, within ±2 GiB so a `jmp rel32` reaches it) and writes there a
//!   check ([`build`]) that compares the recorded general registers, rsp and the arithmetic flags
//!   with the live ones — those that differed at that first pass first, so a pass that is not
//!   the point leaves after about ten instructions; it overwrites the point's region with a `jmp`
//!   to it ([`patch_region`]). A pass that differs runs the region's instructions (copied; a final
//!   direct branch re-encoded) and jumps back; a pass that matches executes `int3`, where the
//!   replayer checks the whole signature (stack checksum, fs_base, all flags). When the point is
//!   reached the region is restored and the page unmapped before the thread runs on.
//!
//! The check stores rax and the flags in a second page after its code (rip-relative; in the
//! code's own page every store would be self-modifying code), so it never touches the
//! program's stack: Go goroutine stacks and the x86-64 red zone stay as they are. Flags are saved
//! with `lahf`/`seto` and restored with `add al, 0x7f`/`sahf` (the overflow flag from `al`), the
//! sequence rr uses in its syscall-buffer stubs. Only one thread runs user code at a time, so no
//! other thread passes through the patched region while the check is installed.

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpKind,
};

use crate::format::Signature;

/// Rounds of [`plan`] the recorder follows before keeping the point where it is.
pub const ADVANCE_ROUNDS: usize = 16;

/// Bytes of code the recorder reads at a time for [`plan`].
pub const PLAN_BYTES: usize = 64;

/// Size of a page.
pub const PAGE: u64 = 4096;

/// Bytes mapped for a check: a page of code, then a page for its saved rax and flags. Data
/// stored into the page being executed would be self-modifying code to the CPU (a pipeline flush
/// at every store).
pub const MAP_LEN: u64 = 2 * PAGE;

/// What the recorder does next to move a forced sync point to a patchable instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// The instruction at rip is patchable: the point stays here.
    Here,
    /// Run to this address (breakpoint): straight-line, fault-free code leads there.
    RunTo(u64),
    /// The instruction at rip is a direct branch: execute it (single step).
    Step,
    /// No safe way forward (memory access, trap, system call, indirect branch): keep the point.
    GiveUp,
}

/// True when the recorder may run through `i` with a breakpoint beyond it: it falls through, makes
/// no system call and is not an instruction the recorder traps (RDTSC, RDTSCP, CPUID) or whose
/// result replay could not reproduce (RDRAND, RDSEED, RDPID). It may access memory: a fault on the
/// way is handled as the signal it is.
fn harmless(i: &Instruction) -> bool {
    !i.is_invalid()
        && i.flow_control() == FlowControl::Next
        && !matches!(
            i.mnemonic(),
            Mnemonic::Rdtsc
                | Mnemonic::Rdtscp
                | Mnemonic::Cpuid
                | Mnemonic::Rdpid
                | Mnemonic::Rdrand
                | Mnemonic::Rdseed
        )
}

/// True when the instruction at the start of `code` (at address `ip`) can carry a check: 5 bytes or
/// more (room for a `jmp rel32`), harmless (see [`plan`]) and without a rip-relative operand, so a
/// verbatim copy elsewhere does the same.
pub fn patchable(code: &[u8], ip: u64) -> bool {
    let mut d = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let i = d.decode();
    i.len() >= 5
        && harmless(&i)
        && !i.is_ip_rel_memory_operand()
        && !i.has_rep_prefix()
        && !i.has_repne_prefix()
        && !implicit_stack(&i)
}

/// True for instructions that use rsp implicitly (push, pop, enter, leave…): a copy would run the
/// same, but the point must be where the signature's rsp is unchanged by the check.
fn implicit_stack(i: &Instruction) -> bool {
    let mut info = InstructionInfoFactory::new();
    info.info(i)
        .used_registers()
        .iter()
        .any(|r| r.register() == iced_x86::Register::RSP && r.access() != iced_x86::OpAccess::Read)
}

/// Length of the instruction at the start of `code` (at `ip`).
pub fn insn_len(code: &[u8], ip: u64) -> usize {
    Decoder::with_ip(64, code, ip, DecoderOptions::NONE)
        .decode()
        .len()
}

/// The recorder's next move from `rip`, given the code bytes there: the first instruction of 5
/// bytes or more that can carry a check ([`patchable`]) in the straight-line code ahead, else the
/// first one where a [`Region`] of short instructions can, else a step over the direct branch
/// that ends the straight-line code.
pub fn plan(code: &[u8], rip: u64) -> Plan {
    let mut d = Decoder::with_ip(64, code, rip, DecoderOptions::NONE);
    let mut first_region = None;
    let to = |at: u64| {
        if at == rip {
            Plan::Here
        } else {
            Plan::RunTo(at)
        }
    };
    while d.can_decode() {
        let i = d.decode();
        if i.is_invalid() || (i.next_ip() - rip) as usize > code.len() {
            break;
        }
        let at = i.ip();
        let here = &code[(at - rip) as usize..];
        if patchable(here, at) {
            return to(at);
        }
        if first_region.is_none() && region(here, at).is_some() {
            first_region = Some(at);
        }
        if harmless(&i) {
            continue;
        }
        if let Some(at) = first_region {
            return to(at);
        }
        let direct = matches!(
            i.flow_control(),
            FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch
        ) && i.op0_kind() == OpKind::NearBranch64
            && !i.has_rep_prefix();
        return match (direct, at == rip) {
            (true, true) => Plan::Step,
            (true, false) => Plan::RunTo(at),
            (false, _) => Plan::GiveUp,
        };
    }
    first_region.map_or(Plan::GiveUp, to)
}

/// Bytes a check's code takes at most (it is about 350): the check starts at most this far
/// before the end of its page.
pub const CHECK_MAX: u64 = 512;

/// Pages tried at most for a check's page.
pub const PAGE_TRIES: usize = 200;

/// The instructions a check replaces at a forced sync point: the point's own instruction and, when
/// it is shorter than the 5 bytes of a `jmp rel32`, the instructions after it, up to 5 bytes or
/// more. All but the last are copied verbatim (harmless, not rip-relative, no `rep`); the last may
/// be a direct branch, re-encoded as a `jcc rel32`/`jmp rel32` to the same target.
///
/// Code elsewhere may jump to an instruction inside the region (a loop head). The patch fills
/// every byte after its `jmp rel32` with `int3`, and the check's page is placed so that each
/// byte of the `jmp`'s displacement where an instruction of the region starts is `0xcc` too
/// ([`targets`]): any entry into the region stops at an `int3`, where the replayer moves the
/// thread to the same instruction's copy in the check (one ptrace stop, never a wrong
/// instruction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    /// The point: address of the first instruction.
    pub point: u64,
    /// The original bytes of the region's instructions.
    pub bytes: Vec<u8>,
    /// Offsets (from the point) of the instructions after the first.
    pub starts: Vec<usize>,
    /// The last instruction is a direct branch: its target and, for a conditional one, its
    /// condition code (0–15, the low nibble of `0f 8x`).
    branch: Option<(u64, Option<u8>)>,
}

/// True when `i` can be copied verbatim elsewhere and run the same there.
fn relocatable(i: &Instruction) -> bool {
    harmless(i) && !i.is_ip_rel_memory_operand() && !i.has_rep_prefix() && !i.has_repne_prefix()
}

/// A direct near `jmp`/`jcc` with a 32-bit form (not `loop`/`jrcxz`): its target and condition.
fn direct_branch(i: &Instruction) -> Option<(u64, Option<u8>)> {
    if i.op0_kind() != OpKind::NearBranch64
        || matches!(
            i.mnemonic(),
            Mnemonic::Loop
                | Mnemonic::Loope
                | Mnemonic::Loopne
                | Mnemonic::Jrcxz
                | Mnemonic::Jecxz
                | Mnemonic::Jcxz
        )
    {
        return None;
    }
    match i.flow_control() {
        FlowControl::UnconditionalBranch => Some((i.near_branch_target(), None)),
        FlowControl::ConditionalBranch => {
            let cc = i.condition_code() as u8;
            (cc != 0).then(|| (i.near_branch_target(), Some(cc - 1)))
        }
        _ => None,
    }
}

/// The region a check can replace at `ip` (the start of `code`), if any: the instruction there is
/// relocatable and does not use rsp implicitly ([`patchable`] but for its length), the ones after
/// it up to 5 bytes are relocatable or end in a direct branch, and a page for the check can lie
/// where the patch's displacement bytes satisfy [`Region`]'s rule (some address in reach exists;
/// whether it is free is known only in the tracee).
pub fn region(code: &[u8], ip: u64) -> Option<Region> {
    let mut d = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let first = d.decode();
    if first.is_invalid()
        || first.len() > code.len()
        || !relocatable(&first)
        || implicit_stack(&first)
    {
        return None;
    }
    let mut len = first.len();
    let mut starts = Vec::new();
    let mut branch = None;
    while len < 5 {
        let i = d.decode();
        if i.is_invalid() || len + i.len() > code.len() {
            return None;
        }
        starts.push(len);
        len += i.len();
        if relocatable(&i) {
            continue;
        }
        branch = Some(direct_branch(&i)?);
        if len < 5 {
            return None;
        }
    }
    let r = Region {
        point: ip,
        bytes: code[..len].to_vec(),
        starts,
        branch,
    };
    r.feasible().then_some(r)
}

impl Region {
    /// The displacement bytes of the patch's `jmp rel32` that must be `0xcc`, by index 0–3.
    fn fixed(&self) -> [bool; 4] {
        let mut f = [false; 4];
        for &s in &self.starts {
            if s < 5 {
                f[s - 1] = true;
            }
        }
        f
    }

    /// True when the patch's displacement is constrained (an instruction starts inside it).
    pub fn constrained(&self) -> bool {
        self.fixed().contains(&true)
    }

    /// The lowest value of the displacement's low 16 bits that meets the rule for bytes 0 and 1
    /// and puts the check at most [`CHECK_MAX`] before the end of its page.
    fn low_bits(&self) -> Option<i64> {
        let f = self.fixed();
        let base = self.point + 5;
        (0..=0xffffu64)
            .filter(|lo| (!f[0] || lo & 0xff == 0xcc) && (!f[1] || (lo >> 8) & 0xff == 0xcc))
            .find(|lo| (base + lo) % PAGE <= PAGE - CHECK_MAX)
            .map(|lo| lo as i64)
    }

    /// The displacement's high 16 bits (as a signed multiple of 65536) that meet the rule for
    /// bytes 2 and 3.
    fn high_bits(&self) -> impl Iterator<Item = i64> + use<> {
        let f = self.fixed();
        (0..=0xffffu32)
            .filter(move |v| (!f[2] || v & 0xff == 0xcc) && (!f[3] || v >> 8 == 0xcc))
            .map(|v| i64::from((v << 16) as i32))
    }

    fn feasible(&self) -> bool {
        if !self.constrained() {
            return true;
        }
        let Some(lo) = self.low_bits() else {
            return false;
        };
        self.high_bits()
            .any(|h| in_user_range(self.point as i64 + 5 + h + lo))
    }

    /// The region's instructions relocated to `at`, then a `jmp` back to the instruction after
    /// the region (unless it ends in an unconditional `jmp`). `None` when out of reach.
    pub fn relocated(&self, at: u64) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let end = self.point + self.bytes.len() as u64;
        let jmp = |out: &mut Vec<u8>, op: &[u8], to: u64| -> Option<()> {
            out.extend_from_slice(op);
            let next = at + out.len() as u64 + 4;
            out.extend_from_slice(&rel32(next, to)?);
            Some(())
        };
        match self.branch {
            None => {
                out.extend_from_slice(&self.bytes);
                jmp(&mut out, &[0xe9], end)?;
            }
            Some((target, cc)) => {
                let last = *self.starts.last()?;
                out.extend_from_slice(&self.bytes[..last]);
                match cc {
                    Some(cc) => {
                        jmp(&mut out, &[0x0f, 0x80 | cc], target)?;
                        jmp(&mut out, &[0xe9], end)?;
                    }
                    None => jmp(&mut out, &[0xe9], target)?,
                }
            }
        }
        Some(out)
    }
}

/// True when a check starting at `a` and its data page lie in the user address space (not below
/// 64 KiB).
fn in_user_range(a: i64) -> bool {
    (0x1_0000..0x7fff_f000_0000 - MAP_LEN as i64).contains(&a)
}

/// Addresses for the start of a check for a constrained region ([`Region::constrained`]), nearest
/// first, 1 MiB apart or more first: each meets [`Region`]'s rule for the patch's displacement
/// and lies at most [`CHECK_MAX`] before the end of its page.
pub fn targets(r: &Region) -> impl Iterator<Item = u64> + use<> {
    let base = r.point as i64 + 5;
    let lo = r.low_bits();
    let mut hs: Vec<i64> = lo.map_or_else(Vec::new, |_| r.high_bits().collect());
    hs.sort_by_key(|h| (((h >> 16) & 0xf) != 0, h.unsigned_abs()));
    let lo = lo.unwrap_or(0);
    hs.into_iter()
        .map(move |h| base + h + lo)
        .filter(|&a| in_user_range(a))
        .map(|a| a as u64)
        .take(PAGE_TRIES)
}

/// The bytes written over a region for a check starting at `check_at`: a `jmp rel32` to it, then
/// `int3` to the region's end. `None` when out of reach or when the displacement breaks
/// [`Region`]'s rule.
pub fn patch_region(r: &Region, check_at: u64) -> Option<Vec<u8>> {
    let mut p = vec![0xe9];
    p.extend_from_slice(&rel32(r.point + 5, check_at)?);
    p.resize(r.bytes.len(), 0xcc);
    r.starts.iter().all(|&s| p[s] == 0xcc).then_some(p)
}

/// The arithmetic flags `lahf`/`seto` save and the check compares: CF, PF, AF, ZF, SF (the low
/// byte) and OF (bit 11).
const ARITH_FLAGS: u64 = 0xd5 | (1 << 11);

/// Register numbers (ModRM encoding) of the signature's general registers, in
/// [`Signature::regs`] order, for those the check compares with `cmp rax, reg` (rax itself and
/// rip, flags, fs_base are handled apart).
const REG_CODES: [(usize, u8); 15] = [
    (0, 15), // r15
    (1, 14), // r14
    (2, 13), // r13
    (3, 12), // r12
    (4, 5),  // rbp
    (5, 3),  // rbx
    (6, 11), // r11
    (7, 10), // r10
    (8, 9),  // r9
    (9, 8),  // r8
    (11, 1), // rcx
    (12, 2), // rdx
    (13, 6), // rsi
    (14, 7), // rdi
    (17, 4), // rsp
];

/// A check written into a page: its bytes, where its `int3` is and where the region's copy is.
#[derive(Debug, Clone)]
pub struct Check {
    /// The check's code, to be written at its start address.
    pub code: Vec<u8>,
    /// Offset (from the start) of the `int3` executed when registers and flags match.
    pub int3_off: u64,
    /// Offset of the region's relocated instructions ([`Region::relocated`]).
    pub reloc_off: u64,
}

fn rel32(from_next: u64, to: u64) -> Option<[u8; 4]> {
    let d = to.wrapping_sub(from_next) as i64;
    i32::try_from(d).ok().map(i32::to_le_bytes)
}

/// The check for point `want`, its code at `at` and its saved rax and flags at `slots` (the page
/// after the code's; 16 bytes): `region` is what the patch replaces ([`region`]). `seen` is the
/// state of a pass that was not the point (the first breakpoint hit): the registers that
/// differed there (in a loop, those the loop changes) are compared first, so a pass that is not
/// the point leaves the check after a few instructions. `None` when `at`, `slots` and the region
/// are more than ±2 GiB apart or the code would cross its page.
pub fn build(
    at: u64,
    slots: u64,
    want: &Signature,
    seen: Option<&Signature>,
    region: &Region,
) -> Option<Check> {
    let (slot_rax, slot_flags) = (slots, slots + 8);
    let mut c: Vec<u8> = Vec::new();
    let mut misses: Vec<usize> = Vec::new();
    // Instructions with a rip-relative operand: opcode bytes, then disp32 to `slot`.
    let riprel = |c: &mut Vec<u8>, op: &[u8], slot: u64| -> Option<()> {
        c.extend_from_slice(op);
        let next = at + c.len() as u64 + 4;
        c.extend_from_slice(&rel32(next, slot)?);
        Some(())
    };
    let jne_miss = |c: &mut Vec<u8>, misses: &mut Vec<usize>| {
        c.extend_from_slice(&[0x0f, 0x85, 0, 0, 0, 0]);
        misses.push(c.len());
    };
    riprel(&mut c, &[0x48, 0x89, 0x05], slot_rax)?; // mov [rip+slot_rax], rax
    c.extend_from_slice(&[0x9f, 0x0f, 0x90, 0xc0]); // lahf; seto al
    riprel(&mut c, &[0x48, 0x89, 0x05], slot_flags)?; // mov [rip+slot_flags], rax
    // Compared parts by signature index: the general registers, rax (10) and the flags (16);
    // those that differed at `seen` first.
    let mut parts: Vec<usize> = REG_CODES.iter().map(|(i, _)| *i).collect();
    parts.extend([10, 16]);
    if let Some(seen) = seen {
        parts.sort_by_key(|&i| {
            let differs = if i == 16 {
                (seen.regs[16] ^ want.regs[16]) & ARITH_FLAGS != 0
            } else {
                seen.regs[i] != want.regs[i]
            };
            !differs
        });
    }
    let mut rax_is_flags = true;
    for idx in parts {
        match idx {
            16 => {
                if !rax_is_flags {
                    riprel(&mut c, &[0x48, 0x8b, 0x05], slot_flags)?; // mov rax, [rip+slot_flags]
                }
                let flags = want.regs[16];
                let ax = ((flags & 0xff) << 8) as u16 | ((flags >> 11) & 1) as u16;
                c.extend_from_slice(&[0x66, 0x3d]); // cmp ax, imm16
                c.extend_from_slice(&ax.to_le_bytes());
            }
            10 => {
                c.extend_from_slice(&[0x48, 0xb8]); // movabs rax, want.rax
                c.extend_from_slice(&want.regs[10].to_le_bytes());
                riprel(&mut c, &[0x48, 0x3b, 0x05], slot_rax)?; // cmp rax, [rip+slot_rax]
            }
            _ => {
                let reg = REG_CODES.iter().find(|(i, _)| *i == idx)?.1;
                c.extend_from_slice(&[0x48, 0xb8]); // movabs rax, imm64
                c.extend_from_slice(&want.regs[idx].to_le_bytes());
                // cmp rax, reg: REX.W (+REX.R for r8–r15), 39 /r with ModRM reg = reg, rm = rax.
                c.extend_from_slice(&[
                    0x48 | if reg >= 8 { 4 } else { 0 },
                    0x39,
                    0xc0 | ((reg & 7) << 3),
                ]);
            }
        }
        rax_is_flags = idx == 16;
        jne_miss(&mut c, &mut misses);
    }
    let restore = |c: &mut Vec<u8>| -> Option<()> {
        riprel(c, &[0x48, 0x8b, 0x05], slot_flags)?; // mov rax, [rip+slot_flags]
        c.extend_from_slice(&[0x04, 0x7f, 0x9e]); // add al, 0x7f; sahf
        riprel(c, &[0x48, 0x8b, 0x05], slot_rax) // mov rax, [rip+slot_rax]
    };
    restore(&mut c)?;
    let int3_off = c.len() as u64;
    c.push(0xcc);
    let reloc_off = c.len() as u64;
    let copy = region.relocated(at + reloc_off)?;
    c.extend_from_slice(&copy);
    let miss = c.len();
    restore(&mut c)?;
    c.push(0xe9); // jmp reloc
    let next = at + c.len() as u64 + 4;
    c.extend_from_slice(&rel32(next, at + reloc_off)?);
    for m in misses {
        let d = (miss as i64 - m as i64) as i32;
        c[m - 4..m].copy_from_slice(&d.to_le_bytes());
    }
    if at % PAGE + c.len() as u64 > PAGE {
        return None;
    }
    Some(Check {
        code: c,
        int3_off,
        reloc_off,
    })
}

/// Addresses to try for the check's page near `point`: 16 MiB steps alternately below and above,
/// within ±1 GiB, never below 64 KiB nor in the top of the user address space.
pub fn candidates(point: u64) -> impl Iterator<Item = u64> {
    let base = point & !(PAGE - 1);
    (1..=64u64)
        .flat_map(move |k| [base.checked_sub(k << 24), base.checked_add(k << 24)])
        .flatten()
        .filter(|&a| (0x1_0000..0x7fff_f000_0000).contains(&a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_follow_straight_line_code_to_a_long_register_instruction() {
        // The Go loop of the issue: mov rdx,rdi (3 bytes); cmp rdx,0x2dc6c0 (7 bytes); jl.
        let code = [
            0x48, 0x89, 0xfa, 0x48, 0x81, 0xfa, 0xc0, 0xc6, 0x2d, 0x00, 0x7c, 0xdf,
        ];
        assert_eq!(plan(&code, 0x481541), Plan::RunTo(0x481544));
        assert_eq!(plan(&code[3..], 0x481544), Plan::Here);
        // Short instructions only, then the end of the bytes read: no point found.
        assert_eq!(plan(&[0x48, 0x8b, 0x07, 0x90], 0x1000), Plan::GiveUp);
        // RDTSC is trapped by the recorder: never run through.
        assert_eq!(
            plan(&[0x0f, 0x31, 0x48, 0x81, 0xfa, 0, 0, 0, 0], 0x1000),
            Plan::GiveUp
        );
        // A system call: never run through.
        assert_eq!(plan(&[0x0f, 0x05, 0x90], 0x1000), Plan::GiveUp);
        // A rip-relative load (no copy runs the same) and a conditional branch: run to the
        // branch, then step it.
        let riprel_jne = [0x48, 0x8b, 0x05, 1, 0, 0, 0, 0x75, 0xf0];
        assert_eq!(plan(&riprel_jne, 0x1000), Plan::RunTo(0x1007));
        assert_eq!(plan(&riprel_jne[7..], 0x1007), Plan::Step);
    }

    /// The loop of `threads_lcg.c` at -O2: imul rax,rsi (4); add rax,rcx (3); sub rdx,1 (4);
    /// jne -13 (2). No instruction of 5 bytes.
    const LCG: [u8; 13] = [
        0x48, 0x0f, 0xaf, 0xc6, 0x48, 0x01, 0xc8, 0x48, 0x83, 0xea, 0x01, 0x75, 0xf3,
    ];
    const LCG_AT: u64 = 0x5555_5555_5200;

    #[test]
    fn a_loop_of_short_instructions_gets_a_region() {
        assert!(!patchable(&LCG, LCG_AT));
        assert_eq!(plan(&LCG, LCG_AT), Plan::Here);
        let r = region(&LCG, LCG_AT).expect("imul + add");
        assert_eq!(r.bytes, LCG[..7]);
        assert_eq!(r.starts, [4]);
        assert!(r.constrained());
        // From the add: add + sub.
        let r = region(&LCG[4..], LCG_AT + 4).expect("add + sub");
        assert_eq!(r.starts, [3]);
        // From the sub: sub + jne, the branch re-encoded.
        let r = region(&LCG[7..], LCG_AT + 7).expect("sub + jne");
        assert_eq!(r.starts, [4]);
        let at = LCG_AT + 0x100_0000;
        let copy = r.relocated(at).unwrap();
        let mut d = Decoder::with_ip(64, &copy, at, DecoderOptions::NONE);
        let sub = d.decode();
        assert_eq!(sub.mnemonic(), Mnemonic::Sub);
        let jne = d.decode();
        assert_eq!(jne.mnemonic(), Mnemonic::Jne);
        assert_eq!(jne.near_branch_target(), LCG_AT, "the loop head");
        let jmp = d.decode();
        assert_eq!(jmp.mnemonic(), Mnemonic::Jmp);
        assert_eq!(jmp.near_branch_target(), LCG_AT + 13, "after the loop");
        // The jne alone is a branch: it cannot start a region.
        assert!(region(&LCG[11..], LCG_AT + 11).is_none());
        // Near the bottom of the address space, a displacement ending in 0xcc (860 MB down) is
        // out of reach.
        assert!(region(&LCG, 0x40_1200).is_none());
        assert!(region(&LCG[4..], 0x40_1204).is_some());
        let two_byte_movs = [0x89, 0xd0, 0x89, 0xf1, 0x01, 0xc8];
        assert!(
            region(&two_byte_movs, LCG_AT).is_none(),
            "no room in the page"
        );
        assert!(region(&two_byte_movs, LCG_AT + 0x400).is_some());
    }

    #[test]
    fn every_entry_into_a_patched_region_lands_on_an_int3() {
        for (code, at) in [
            (&LCG[..], LCG_AT),
            (&LCG[4..], LCG_AT + 4),
            (&LCG[7..], LCG_AT + 7),
            (&LCG[4..], 0x40_1204),
            // mov eax,edx (2); mov ecx,esi (2); add eax,ecx (2): two starts inside the rel32.
            // (Its byte 1 is fixed too: at LCG_AT the check would not fit before its page's end.)
            (&[0x89, 0xd0, 0x89, 0xf1, 0x01, 0xc8][..], LCG_AT + 0x400),
        ] {
            let r = region(code, at).expect("region");
            let mut n = 0;
            for t in targets(&r) {
                n += 1;
                assert!(t % PAGE <= PAGE - CHECK_MAX);
                let p = patch_region(&r, t).expect("rule met");
                assert_eq!(p.len(), r.bytes.len());
                for &s in &r.starts {
                    assert_eq!(
                        p[s], 0xcc,
                        "start {s} of {:x?} for check at {t:#x}",
                        r.bytes
                    );
                }
                let d = i32::from_le_bytes([p[1], p[2], p[3], p[4]]) as i64;
                assert_eq!((at as i64 + 5 + d) as u64, t);
            }
            assert!(n > 10, "{n} candidate places for {:x?}", r.bytes);
        }
    }

    #[test]
    fn patchable_needs_five_bytes_no_memory_and_no_rip() {
        assert!(patchable(
            &[0x48, 0x81, 0xfa, 0xc0, 0xc6, 0x2d, 0x00],
            0x1000
        )); // cmp rdx, imm32
        assert!(patchable(&[0x49, 0xb8, 1, 0, 0, 0, 1, 0, 0, 0], 0x1000)); // movabs r8, imm64
        assert!(!patchable(&[0x48, 0x89, 0xfa], 0x1000)); // mov rdx, rdi: 3 bytes
        assert!(patchable(&[0x48, 0x8b, 0x54, 0x24, 0x28], 0x1000)); // mov rdx,[rsp+0x28]
        assert!(!patchable(&[0x48, 0x81, 0xec, 0, 1, 0, 0], 0x1000)); // sub rsp, 0x100
        assert!(!patchable(&[0x48, 0x8d, 0x05, 1, 0, 0, 0], 0x1000)); // lea rax,[rip+1]
    }

    #[test]
    fn the_check_decodes_and_its_branches_land_on_instructions() {
        for (orig, point) in [
            (&[0x48, 0x81, 0xfa, 0xc0, 0xc6, 0x2d, 0x00][..], 0x48_1544),
            (&LCG[7..], LCG_AT + 7),
        ] {
            let mut want = Signature {
                regs: [7; 19],
                stack_hash: 0,
            };
            want.regs[15] = point;
            let r = region(orig, point).expect("region");
            let page = (point & !(PAGE - 1)) + 0x40_0000;
            let at = page + 0x123;
            let mut seen = want;
            seen.regs[10] = 8;
            seen.regs[12] = 9;
            let c = build(at, page + PAGE, &want, Some(&seen), &r).expect("in reach");
            let d = build(at, page + PAGE, &want, None, &r).expect("in reach");
            assert_eq!(c.code.len(), d.code.len());
            // The registers that differed (rax, rdx) are compared first.
            let mut d0 = Decoder::with_ip(64, &c.code, at, DecoderOptions::NONE);
            let firsts: Vec<Mnemonic> = (0..7).map(|_| d0.decode().mnemonic()).collect();
            assert_eq!(
                firsts,
                [
                    Mnemonic::Mov,
                    Mnemonic::Lahf,
                    Mnemonic::Seto,
                    Mnemonic::Mov,
                    Mnemonic::Mov,
                    Mnemonic::Cmp,
                    Mnemonic::Jne
                ]
            );
            assert!(c.code.len() as u64 <= CHECK_MAX);
            assert_eq!(c.code[c.int3_off as usize], 0xcc);
            let mut d = Decoder::with_ip(64, &c.code, at, DecoderOptions::NONE);
            let mut starts = std::collections::HashSet::new();
            let mut targets = Vec::new();
            while d.can_decode() {
                let i = d.decode();
                assert!(!i.is_invalid(), "invalid instruction at {:#x}", i.ip());
                starts.insert(i.ip());
                if i.op0_kind() == OpKind::NearBranch64 {
                    targets.push(i.near_branch_target());
                }
                if i.is_ip_rel_memory_operand() {
                    let slot = i.ip_rel_memory_address();
                    assert!(
                        slot == page + PAGE || slot == page + PAGE + 8,
                        "slot {slot:#x}"
                    );
                }
            }
            // Every jne goes to the miss path, whose jmp goes back to the copied region; the
            // copy's jmp goes to the instruction after the region, its branch where it went.
            let reloc = at + c.reloc_off;
            assert_eq!(c.reloc_off, c.int3_off + 1);
            let point_next = point + r.bytes.len() as u64;
            for t in &targets {
                assert!(
                    starts.contains(t) || *t == point_next || *t == LCG_AT,
                    "branch to {t:#x}"
                );
            }
            assert!(targets.contains(&reloc));
            assert!(targets.contains(&point_next));
            assert!(
                build(0x7000_0000_0000, 0x7000_0000_1000, &want, None, &r).is_none(),
                "out of reach"
            );
            assert!(
                build(page + PAGE - 16, page + PAGE, &want, None, &r).is_none(),
                "crosses its page"
            );
        }
    }
}
