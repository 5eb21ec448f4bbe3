//! Instruction boundaries of x86-64 functions, from a real disassembler (iced-x86).
//!
//! DTrace's pid provider offers a probe at every instruction of a function (an empty probe name, or
//! a hexadecimal offset as the name) and return probes at every return site (DTrace guide, "pid
//! Provider"). A uprobe placed anywhere but the first byte of an instruction corrupts the target, so
//! every offset handed to the kernel comes from here.
//!
//! The function body (`st_value .. st_value + st_size`) is decoded by a linear sweep, which is exact
//! for compiler output on x86-64 (GCC and Clang put jump tables in `.rodata`, not in `.text`). The
//! sweep is then *checked*: it must end exactly at the end of the function, decode no invalid
//! instruction, and every direct branch into the function must land on a decoded boundary. A
//! function that fails a check (hand-written assembly with data in code, overlapping instructions)
//! is refused with [`DisasmError`] rather than guessed at.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register};

use crate::VirtAddr;
use crate::elf::{ElfFile, Function};

/// Why a function's instructions cannot be listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DisasmError {
    /// The symbol has `st_size == 0`, so its extent is unknown.
    #[error("function {function} has no size in its symbol table; instruction probes need one")]
    NoSize {
        /// The function.
        function: String,
    },
    /// The function's bytes are not all in the file (should not happen for `.text`).
    #[error("function {function} at {addr} is not file-backed")]
    NotInFile {
        /// The function.
        function: String,
        /// Its address.
        addr: VirtAddr,
    },
    /// The bytes at an offset do not decode: data in code, or a wrong symbol size.
    #[error("function {function}: no valid instruction at offset {offset:#x} (data in code?)")]
    Invalid {
        /// The function.
        function: String,
        /// Offset from the function's start.
        offset: u64,
    },
    /// A branch inside the function targets the middle of a decoded instruction.
    #[error(
        "function {function}: branch at {from:#x} targets {to:#x}, inside an instruction (overlapping code)"
    )]
    Overlap {
        /// The function.
        function: String,
        /// Offset of the branch.
        from: u64,
        /// Offset of its target.
        to: u64,
    },
}

/// What an instruction does to control flow, as far as probes care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsnKind {
    /// A near `ret`: the function returns here.
    Return,
    /// A direct jump (or conditional jump) to outside the function, or an indirect jump through a
    /// RIP-relative memory slot (a GOT/PLT entry): a tail call, where DTrace fires the return probe.
    TailCall,
    /// An indirect jump through a register or non-RIP memory: a `switch` jump table or a tail call
    /// through a function pointer; not treated as a return site.
    IndirectJump,
    /// Anything else.
    Other,
}

/// One decoded instruction of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Offset in bytes from the function's first instruction.
    pub offset: u64,
    /// Length in bytes (1..=15).
    pub len: u8,
    /// Control-flow class.
    pub kind: InsnKind,
    /// False when the instruction gets no uprobe: `refusal` says why.
    pub probeable: bool,
    /// Why the instruction cannot be probed safely (`None` exactly when `probeable`).
    pub refusal: Option<Refusal>,
}

/// Why an instruction gets no uprobe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The kernel refuses a uprobe on it (`uprobe_init_insn` in `arch/x86/kernel/uprobes.c`: a
    /// LOCK or segment prefix, or an opcode outside its table; see [`kernel_can_probe`]).
    Kernel,
    /// A `syscall` or `sysenter`. The kernel accepts the uprobe, but the instruction is stepped
    /// out of line in the XOL page, and the system call's return does not come back to the
    /// single-step trap: the target runs on from the XOL slot and dies (measured on Linux 6.18:
    /// a uprobe on `getpid`'s `syscall` in libc makes Python segfault at a garbage address; one
    /// on `brk`'s takes a general protection fault in the XOL page). Probing it would kill the
    /// target, so it is never probed.
    SystemCall,
}

impl Refusal {
    /// A short phrase for messages ("the kernel refuses a uprobe there").
    pub fn describe(self) -> &'static str {
        match self {
            Refusal::Kernel => {
                "instructions the kernel refuses to probe (LOCK/segment prefix or a privileged opcode)"
            }
            Refusal::SystemCall => {
                "syscall instructions (the kernel's out-of-line single step of a system call kills the target)"
            }
        }
    }
}

/// The decoded instructions of one function.
#[derive(Debug, Clone)]
pub struct FunctionCode {
    /// The function's name.
    pub name: String,
    /// Its link-time address.
    pub addr: VirtAddr,
    /// Instructions in address order; their offsets are the function's instruction boundaries.
    pub insns: Vec<Insn>,
}

impl FunctionCode {
    /// True when `offset` (from the function's start) is the first byte of an instruction.
    pub fn is_boundary(&self, offset: u64) -> bool {
        self.insns
            .binary_search_by_key(&offset, |i| i.offset)
            .is_ok()
    }

    /// Offsets of all instructions.
    pub fn offsets(&self) -> impl Iterator<Item = u64> + '_ {
        self.insns.iter().map(|i| i.offset)
    }

    /// The return sites: `ret` instructions and tail calls, where DTrace's `return` probe fires.
    pub fn return_sites(&self) -> impl Iterator<Item = &Insn> + '_ {
        self.insns
            .iter()
            .filter(|i| matches!(i.kind, InsnKind::Return | InsnKind::TailCall))
    }

    /// True when the function has an indirect jump that is not a GOT tail call (a jump table or a
    /// call through a pointer): such paths do not fire offset-based return probes.
    pub fn has_indirect_jump(&self) -> bool {
        self.insns.iter().any(|i| i.kind == InsnKind::IndirectJump)
    }
}

/// Decodes `func` from `elf` and checks the sweep (see the module docs).
///
/// # Errors
/// [`DisasmError`] when the function has no size, is not file-backed, holds undecodable bytes, or a
/// branch lands inside an instruction.
pub fn decode_function(elf: &ElfFile, func: &Function) -> Result<FunctionCode, DisasmError> {
    if func.size == 0 {
        return Err(DisasmError::NoSize {
            function: func.name.clone(),
        });
    }
    let bytes = elf
        .bytes_at(func.addr, func.size)
        .ok_or_else(|| DisasmError::NotInFile {
            function: func.name.clone(),
            addr: func.addr,
        })?;
    decode_bytes(&func.name, func.addr, bytes)
}

/// Decodes a function body given as bytes loaded at `addr` (the pure core of [`decode_function`]).
///
/// # Errors
/// As [`decode_function`].
pub fn decode_bytes(name: &str, addr: VirtAddr, bytes: &[u8]) -> Result<FunctionCode, DisasmError> {
    let start = addr.0;
    let end = start + bytes.len() as u64;
    let mut decoder = Decoder::with_ip(64, bytes, start, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    let mut insns = Vec::new();
    let mut branch_targets: Vec<(u64, u64)> = Vec::new();
    while decoder.can_decode() {
        decoder.decode_out(&mut insn);
        let offset = insn.ip() - start;
        if insn.is_invalid() || insn.next_ip() > end {
            return Err(DisasmError::Invalid {
                function: name.to_string(),
                offset,
            });
        }
        let inside = |t: u64| start <= t && t < end;
        let kind = match insn.flow_control() {
            FlowControl::Return if insn.mnemonic() == Mnemonic::Ret => InsnKind::Return,
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch => {
                let target = insn.near_branch_target();
                if is_near_branch(&insn) && !inside(target) {
                    InsnKind::TailCall
                } else {
                    if is_near_branch(&insn) {
                        branch_targets.push((offset, target - start));
                    }
                    InsnKind::Other
                }
            }
            FlowControl::IndirectBranch => {
                if insn.op0_kind() == OpKind::Memory && insn.memory_base() == Register::RIP {
                    InsnKind::TailCall
                } else {
                    InsnKind::IndirectJump
                }
            }
            FlowControl::Call => {
                let target = insn.near_branch_target();
                if is_near_branch(&insn) && inside(target) {
                    branch_targets.push((offset, target - start));
                }
                InsnKind::Other
            }
            _ => InsnKind::Other,
        };
        let raw = &bytes[offset as usize..(offset as usize + insn.len())];
        let refusal = if !kernel_can_probe(raw) {
            Some(Refusal::Kernel)
        } else if matches!(insn.mnemonic(), Mnemonic::Syscall | Mnemonic::Sysenter) {
            Some(Refusal::SystemCall)
        } else {
            None
        };
        insns.push(Insn {
            offset,
            len: insn.len() as u8,
            kind,
            probeable: refusal.is_none(),
            refusal,
        });
    }
    let code = FunctionCode {
        name: name.to_string(),
        addr,
        insns,
    };
    for (from, to) in branch_targets {
        if !code.is_boundary(to) {
            return Err(DisasmError::Overlap {
                function: name.to_string(),
                from,
                to,
            });
        }
    }
    Ok(code)
}

/// Opcodes the kernel refuses to probe in 64-bit processes: a bitmap of the first opcode byte
/// after prefixes, transcribed from `good_insns_64` in `arch/x86/kernel/uprobes.c` (Linux 6.x):
/// 06 07 0e 16 17 1e 1f 27 2f 37 3f 60-62 6c-6f 82 9a cc-cf d4-d6 e4-e7 ea ec-ef f1 f4 fa fb.
const BAD_OPCODES: [u8; 40] = [
    0x06, 0x07, 0x0e, 0x16, 0x17, 0x1e, 0x1f, 0x27, 0x2f, 0x37, 0x3f, 0x60, 0x61, 0x62, 0x6c, 0x6d,
    0x6e, 0x6f, 0x82, 0x9a, 0xcc, 0xcd, 0xce, 0xcf, 0xd4, 0xd5, 0xd6, 0xe4, 0xe5, 0xe6, 0xe7, 0xea,
    0xec, 0xed, 0xee, 0xef, 0xf1, 0xf4, 0xfa, 0xfb,
];

/// True when the kernel's x86 uprobe code accepts an instruction (`uprobe_init_insn` in
/// `arch/x86/kernel/uprobes.c`): no ES/CS/SS/DS segment or LOCK prefix (so `lock cmpxchg` and
/// `notrack jmp` cannot be probed), and a first opcode byte (after legacy, REX and VEX/EVEX
/// prefixes, as the kernel's decoder counts it) outside `BAD_OPCODES`. Attaching to a refused
/// instruction fails with `ENOTSUPP` (524) and fails the whole uprobe_multi link, so sites are
/// filtered with this first.
pub fn kernel_can_probe(raw: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        match b {
            0x26 | 0x2e | 0x36 | 0x3e | 0xf0 => return false,
            0x64 | 0x65 | 0x66 | 0x67 | 0xf2 | 0xf3 => i += 1,
            _ => break,
        }
    }
    if raw.get(i).is_some_and(|b| (0x40..=0x4f).contains(b)) {
        i += 1;
    }
    // VEX2 (c5 xx), VEX3 (c4 xx xx), EVEX (62 xx xx xx): the kernel takes the byte after them as
    // the opcode.
    match raw.get(i) {
        Some(0xc5) => i += 2,
        Some(0xc4) => i += 3,
        Some(0x62) => i += 4,
        _ => {}
    }
    raw.get(i).is_some_and(|op| !BAD_OPCODES.contains(op))
}

/// True when the instruction's first operand is a near branch target (a direct branch).
fn is_near_branch(insn: &Instruction) -> bool {
    matches!(
        insn.op0_kind(),
        OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_boundaries_and_returns() {
        // push rbp; mov rbp,rsp; test edi,edi; je +3; pop rbp; ret; xor eax,eax; pop rbp; jmp 0x1000 (outside)
        let code = [
            0x55, // 0: push rbp
            0x48, 0x89, 0xe5, // 1: mov rbp,rsp
            0x85, 0xff, // 4: test edi,edi
            0x74, 0x02, // 6: je 0xa
            0x5d, // 8: pop rbp
            0xc3, // 9: ret
            0x31, 0xc0, // a: xor eax,eax
            0x5d, // c: pop rbp
            0xe9, 0x00, 0x00, 0x00, 0x00, // d: jmp rel32 -> 0x2012 (outside)
        ];
        let f = decode_bytes("f", VirtAddr(0x2000), &code).unwrap();
        let offs: Vec<u64> = f.offsets().collect();
        assert_eq!(offs, vec![0, 1, 4, 6, 8, 9, 0xa, 0xc, 0xd]);
        assert!(f.is_boundary(4));
        assert!(!f.is_boundary(2));
        let rets: Vec<(u64, InsnKind)> = f.return_sites().map(|i| (i.offset, i.kind)).collect();
        assert_eq!(rets, vec![(9, InsnKind::Return), (0xd, InsnKind::TailCall)]);
        assert!(!f.has_indirect_jump());
    }

    #[test]
    fn rejects_data_and_overlap() {
        // 0x06 (push es) is invalid in 64-bit mode.
        assert!(matches!(
            decode_bytes("g", VirtAddr(0x1000), &[0x90, 0x06, 0xc3]),
            Err(DisasmError::Invalid { offset: 1, .. })
        ));
        // jmp +1 lands in the middle of the 5-byte mov that follows.
        let code = [0xeb, 0x01, 0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3];
        assert!(matches!(
            decode_bytes("h", VirtAddr(0x1000), &code),
            Err(DisasmError::Overlap { from: 0, to: 3, .. })
        ));
        // An instruction cut off by the symbol's end.
        assert!(matches!(
            decode_bytes("i", VirtAddr(0x1000), &[0x90, 0xb8, 0x01]),
            Err(DisasmError::Invalid { offset: 1, .. })
        ));
    }

    #[test]
    fn classifies_indirect_jumps() {
        // jmp rax; jmp [rip+0]
        let code = [0xff, 0xe0, 0xff, 0x25, 0x00, 0x00, 0x00, 0x00];
        let f = decode_bytes("j", VirtAddr(0x1000), &code).unwrap();
        assert_eq!(f.insns[0].kind, InsnKind::IndirectJump);
        assert_eq!(f.insns[1].kind, InsnKind::TailCall);
        assert!(f.has_indirect_jump());
    }

    #[test]
    fn kernel_refusals() {
        assert!(kernel_can_probe(&[0x55])); // push rbp
        assert!(kernel_can_probe(&[0xf3, 0x0f, 0x1e, 0xfa])); // endbr64
        assert!(kernel_can_probe(&[
            0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0
        ])); // mov rax, fs:0x28
        assert!(!kernel_can_probe(&[0xf0, 0x48, 0x0f, 0xb1, 0x0a])); // lock cmpxchg
        assert!(!kernel_can_probe(&[0x3e, 0xff, 0xe0])); // notrack jmp rax
        assert!(!kernel_can_probe(&[0xf4])); // hlt
        assert!(!kernel_can_probe(&[0xcc])); // int3
        assert!(!kernel_can_probe(&[0xc5, 0xfe, 0x6f, 0x07])); // vmovdqu: opcode 6f after VEX
        assert!(kernel_can_probe(&[0xc5, 0xfd, 0x74, 0x0f])); // vpcmpeqb
        let f = decode_bytes("k", VirtAddr(0x1000), &[0x90, 0xf4, 0xc3]).unwrap();
        assert_eq!(
            f.insns.iter().map(|i| i.probeable).collect::<Vec<_>>(),
            vec![true, false, true]
        );
        assert_eq!(f.insns[1].refusal, Some(Refusal::Kernel));
    }

    /// Session 4's harm to the target: a uprobe on `syscall` (libc's `brk`, `getpid`) killed
    /// Python; the kernel accepts it, so the decoder refuses it.
    #[test]
    fn system_call_instructions_are_never_probed() {
        // mov eax,39; syscall; ret; sysenter
        let code = [0xb8, 0x27, 0, 0, 0, 0x0f, 0x05, 0xc3, 0x0f, 0x34];
        assert!(kernel_can_probe(&[0x0f, 0x05]));
        let f = decode_bytes("getpid", VirtAddr(0x1000), &code).unwrap();
        let got: Vec<(u64, Option<Refusal>)> =
            f.insns.iter().map(|i| (i.offset, i.refusal)).collect();
        assert_eq!(
            got,
            vec![
                (0, None),
                (5, Some(Refusal::SystemCall)),
                (7, None),
                (8, Some(Refusal::SystemCall))
            ]
        );
        assert!(f.insns.iter().all(|i| i.probeable == i.refusal.is_none()));
    }
}
