//! Conditional breakpoints for forced sync points, evaluated in the tracee.
//!
//! A hardware breakpoint at a forced sync point's rip stops the thread at every pass (10–90 µs a
//! stop); in a loop whose registers change at every iteration, the point may be millions of passes
//! away (a Go goroutine's 3·10⁶-iteration loop took hours). Instead:
//!
//! - The **recorder** moves a forced sync point to a *patchable* instruction: one of 5 bytes or more
//!   that is not rip-relative, does not branch and does not move rsp ([`patchable`]). From where
//!   `PTRACE_INTERRUPT` stopped the thread it follows straight-line code without system calls or
//!   trapped instructions ([`plan`]) to the next such instruction (a hardware breakpoint there, one
//!   stop), stepping over direct branches, for at most [`ADVANCE_ROUNDS`] rounds; a signal on the
//!   way (a fault) is handled as any signal and no point is taken at that stop. If no patchable
//!   instruction is found the point stays where the last round left it and replay uses the
//!   hardware breakpoint at every pass, as before.
//! - The **replayer**, at the first pass whose signature differs, maps one page near the point
//!   (two pages, `mmap` injected, within ±2 GiB so a `jmp rel32` reaches it) and
//!   writes there a check ([`build`]) that compares the recorded general registers, rsp and the
//!   arithmetic flags with the live ones; it overwrites the instruction at the point with a
//!   `jmp` to it. A pass that differs runs the original instruction (copied: it has no
//!   position-dependent operand) and jumps back, costing a few dozen instructions; a pass that
//!   matches executes `int3`, where the replayer checks the whole signature (stack checksum,
//!   fs_base, all flags). When the point is reached the instruction is restored and the page
//!   unmapped before the thread runs on.
//!
//! The check stores rax and the flags in a second page after its code (rip-relative; in the
//! code's own page every store would be self-modifying code), so it never touches the
//! program's stack: Go goroutine stacks and the x86-64 red zone stay as they are. Flags are saved
//! with `lahf`/`seto` and restored with `add al, 0x7f`/`sahf` (the overflow flag from `al`), the
//! sequence rr uses in its syscall-buffer stubs. Only one thread runs user code at a time, so no
//! other thread passes through the patched instruction.

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

/// The recorder's next move from `rip`, given the code bytes there.
pub fn plan(code: &[u8], rip: u64) -> Plan {
    let mut d = Decoder::with_ip(64, code, rip, DecoderOptions::NONE);
    while d.can_decode() {
        let i = d.decode();
        if i.is_invalid() || (i.next_ip() - rip) as usize > code.len() {
            return Plan::GiveUp;
        }
        let at = i.ip();
        if patchable(&code[(at - rip) as usize..], at) {
            return if at == rip {
                Plan::Here
            } else {
                Plan::RunTo(at)
            };
        }
        if harmless(&i) {
            continue;
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
    Plan::GiveUp
}

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

/// A check written into a page: its bytes, and where its `int3` is (offset in the page).
#[derive(Debug, Clone)]
pub struct Check {
    /// The page's contents from offset 0.
    pub code: Vec<u8>,
    /// Offset of the `int3` executed when registers and flags match.
    pub int3_off: u64,
}

fn rel32(from_next: u64, to: u64) -> Option<[u8; 4]> {
    let d = to.wrapping_sub(from_next) as i64;
    i32::try_from(d).ok().map(i32::to_le_bytes)
}

/// The check for point `want` in a page at `page`: `orig` is the instruction at the point (its
/// bytes, [`patchable`]). `None` when the point and the page are more than ±2 GiB apart.
pub fn build(page: u64, want: &Signature, orig: &[u8]) -> Option<Check> {
    let point = want.rip();
    let (slot_rax, slot_flags) = (page + PAGE, page + PAGE + 8);
    let mut c: Vec<u8> = Vec::new();
    let mut misses: Vec<usize> = Vec::new();
    // Instructions with a rip-relative operand: opcode bytes, then disp32 to `slot`.
    let riprel = |c: &mut Vec<u8>, op: &[u8], slot: u64| -> Option<()> {
        c.extend_from_slice(op);
        let next = page + c.len() as u64 + 4;
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
    let flags = want.regs[16];
    let ax = ((flags & 0xff) << 8) as u16 | ((flags >> 11) & 1) as u16;
    c.extend_from_slice(&[0x66, 0x3d]); // cmp ax, imm16
    c.extend_from_slice(&ax.to_le_bytes());
    jne_miss(&mut c, &mut misses);
    for (idx, reg) in REG_CODES {
        c.extend_from_slice(&[0x48, 0xb8]); // movabs rax, imm64
        c.extend_from_slice(&want.regs[idx].to_le_bytes());
        // cmp rax, reg: REX.W (+REX.R for r8–r15), 39 /r with ModRM reg = reg, rm = rax.
        c.extend_from_slice(&[
            0x48 | if reg >= 8 { 4 } else { 0 },
            0x39,
            0xc0 | ((reg & 7) << 3),
        ]);
        jne_miss(&mut c, &mut misses);
    }
    c.extend_from_slice(&[0x48, 0xb8]); // movabs rax, want.rax
    c.extend_from_slice(&want.regs[10].to_le_bytes());
    riprel(&mut c, &[0x48, 0x3b, 0x05], slot_rax)?; // cmp rax, [rip+slot_rax]
    jne_miss(&mut c, &mut misses);
    let restore = |c: &mut Vec<u8>| -> Option<()> {
        riprel(c, &[0x48, 0x8b, 0x05], slot_flags)?; // mov rax, [rip+slot_flags]
        c.extend_from_slice(&[0x04, 0x7f, 0x9e]); // add al, 0x7f; sahf
        riprel(c, &[0x48, 0x8b, 0x05], slot_rax) // mov rax, [rip+slot_rax]
    };
    restore(&mut c)?;
    let int3_off = c.len() as u64;
    c.push(0xcc);
    let reloc = page + c.len() as u64;
    c.extend_from_slice(orig);
    c.push(0xe9); // jmp point + len
    let next = page + c.len() as u64 + 4;
    c.extend_from_slice(&rel32(next, point + orig.len() as u64)?);
    let miss = c.len();
    restore(&mut c)?;
    c.push(0xe9); // jmp reloc
    let next = page + c.len() as u64 + 4;
    c.extend_from_slice(&rel32(next, reloc)?);
    for at in misses {
        let d = (miss as i64 - at as i64) as i32;
        c[at - 4..at].copy_from_slice(&d.to_le_bytes());
    }
    if c.len() as u64 > PAGE {
        return None;
    }
    Some(Check { code: c, int3_off })
}

/// The 5 bytes written over the point's instruction: `jmp` to the check at the start of `page`.
pub fn patch(point: u64, page: u64) -> Option<[u8; 5]> {
    let r = rel32(point + 5, page)?;
    Some([0xe9, r[0], r[1], r[2], r[3]])
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
        assert_eq!(plan(&code[10..], 0x48154b), Plan::Step);
        // Short instructions only, then the end of the bytes read: no point found.
        assert_eq!(plan(&[0x48, 0x8b, 0x07, 0x90], 0x1000), Plan::GiveUp);
        // RDTSC is trapped by the recorder: never run through.
        assert_eq!(
            plan(&[0x0f, 0x31, 0x48, 0x81, 0xfa, 0, 0, 0, 0], 0x1000),
            Plan::GiveUp
        );
        // A system call: never run through.
        assert_eq!(plan(&[0x0f, 0x05, 0x90], 0x1000), Plan::GiveUp);
        // A conditional branch after harmless code: run to the branch.
        assert_eq!(
            plan(&[0x48, 0x01, 0xc8, 0x75, 0xf0], 0x1000),
            Plan::RunTo(0x1003)
        );
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
        let mut want = Signature {
            regs: [7; 19],
            stack_hash: 0,
        };
        want.regs[15] = 0x48_1544;
        let page = 0x40_0000;
        let orig = [0x48, 0x81, 0xfa, 0xc0, 0xc6, 0x2d, 0x00];
        let c = build(page, &want, &orig).expect("in reach");
        assert_eq!(c.code[c.int3_off as usize], 0xcc);
        let mut d = Decoder::with_ip(64, &c.code, page, DecoderOptions::NONE);
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
        // Every jne goes to the miss path, whose jmp goes back to the copied instruction; the copy's
        // jmp goes to the instruction after the point.
        let reloc = page + c.int3_off + 1;
        let point_next = want.rip() + orig.len() as u64;
        for t in &targets {
            assert!(starts.contains(t) || *t == point_next, "branch to {t:#x}");
        }
        assert!(targets.contains(&reloc));
        assert!(targets.contains(&point_next));
        assert_eq!(
            &c.code[reloc as usize - page as usize..][..orig.len()],
            &orig
        );
        assert!(
            build(0x7000_0000_0000, &want, &orig).is_none(),
            "out of reach"
        );
        let p = patch(0x48_1544, page).unwrap();
        assert_eq!(p[0], 0xe9);
        let r = i32::from_le_bytes([p[1], p[2], p[3], p[4]]) as i64;
        assert_eq!((0x48_1549_i64 + r) as u64, page);
    }
}
