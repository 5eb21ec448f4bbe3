//! The eBPF instruction encoder and a small assembler with forward labels.
//!
//! Follows the kernel's `Documentation/bpf/standardization/instruction-set.rst` (RFC 9669): every
//! instruction is 64 bits: an 8-bit opcode (class in the low 3 bits), a byte holding `dst_reg`
//! (low nibble) and `src_reg` (high nibble), a signed 16-bit offset and a signed 32-bit immediate,
//! little-endian on x86-64. `lddw` (64-bit immediate load) takes two slots.

/// One encoded 8-byte instruction, laid out as the kernel's `struct bpf_insn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode: class | size/mode | op | source.
    pub code: u8,
    /// Destination register (0..=10).
    pub dst: u8,
    /// Source register (0..=10), or a pseudo value for `lddw` (1 = map fd).
    pub src: u8,
    /// Signed offset (jumps: in instructions, relative to the next one; memory: bytes).
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

impl Insn {
    /// The instruction as the kernel reads it (8 bytes, little-endian fields).
    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = (self.dst & 0xf) | (self.src << 4);
        b[2..4].copy_from_slice(&self.off.to_le_bytes());
        b[4..8].copy_from_slice(&self.imm.to_le_bytes());
        b
    }
}

/// A BPF register. `R0` is the return value/helper result, `R1..R5` helper arguments (clobbered
/// by calls), `R6..R9` callee-saved, `R10` the read-only frame pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reg(pub u8);

/// Return value and helper result.
pub const R0: Reg = Reg(0);
/// First helper argument; the program's context on entry.
pub const R1: Reg = Reg(1);
/// Second helper argument.
pub const R2: Reg = Reg(2);
/// Third helper argument.
pub const R3: Reg = Reg(3);
/// Fourth helper argument.
pub const R4: Reg = Reg(4);
/// Fifth helper argument.
pub const R5: Reg = Reg(5);
/// Callee-saved.
pub const R6: Reg = Reg(6);
/// Callee-saved.
pub const R7: Reg = Reg(7);
/// Callee-saved.
pub const R8: Reg = Reg(8);
/// Callee-saved.
pub const R9: Reg = Reg(9);
/// Frame pointer (read-only); the stack is the 512 bytes below it.
pub const R10: Reg = Reg(10);

// Instruction classes.
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const ALU: u8 = 0x04;
const JMP: u8 = 0x05;
const ALU64: u8 = 0x07;
// Sources.
const K: u8 = 0x00;
const X: u8 = 0x08;
// Memory modes.
const IMM: u8 = 0x00;
const MEM: u8 = 0x60;
const MEMSX: u8 = 0x80;
const ATOMIC: u8 = 0xc0;

/// Access width of a load or store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// 1 byte.
    B,
    /// 2 bytes.
    H,
    /// 4 bytes.
    W,
    /// 8 bytes.
    DW,
}

impl Size {
    fn bits(self) -> u8 {
        match self {
            Size::W => 0x00,
            Size::H => 0x08,
            Size::B => 0x10,
            Size::DW => 0x18,
        }
    }
    /// The size for a width in bytes (1, 2, 4, 8); other widths are a caller bug and give 8.
    pub fn from_bytes(n: u32) -> Size {
        match n {
            1 => Size::B,
            2 => Size::H,
            4 => Size::W,
            _ => Size::DW,
        }
    }
    /// Width in bytes.
    pub fn bytes(self) -> u32 {
        match self {
            Size::B => 1,
            Size::H => 2,
            Size::W => 4,
            Size::DW => 8,
        }
    }
}

/// An arithmetic/logic operation (64-bit unless used through [`Asm::alu32_imm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alu {
    /// dst += src
    Add,
    /// dst -= src
    Sub,
    /// dst *= src
    Mul,
    /// dst /= src, unsigned (x / 0 = 0 in BPF; codegen checks first)
    Div,
    /// dst /= src, signed (cpu v4: off = 1)
    SDiv,
    /// dst |= src
    Or,
    /// dst &= src
    And,
    /// dst <<= src
    Lsh,
    /// dst >>= src, logical
    Rsh,
    /// dst = -dst
    Neg,
    /// dst %= src, unsigned
    Mod,
    /// dst %= src, signed (cpu v4: off = 1)
    SMod,
    /// dst ^= src
    Xor,
    /// dst = src
    Mov,
    /// dst >>= src, arithmetic
    Arsh,
}

impl Alu {
    fn code_off(self) -> (u8, i16) {
        match self {
            Alu::Add => (0x00, 0),
            Alu::Sub => (0x10, 0),
            Alu::Mul => (0x20, 0),
            Alu::Div => (0x30, 0),
            Alu::SDiv => (0x30, 1),
            Alu::Or => (0x40, 0),
            Alu::And => (0x50, 0),
            Alu::Lsh => (0x60, 0),
            Alu::Rsh => (0x70, 0),
            Alu::Neg => (0x80, 0),
            Alu::Mod => (0x90, 0),
            Alu::SMod => (0x90, 1),
            Alu::Xor => (0xa0, 0),
            Alu::Mov => (0xb0, 0),
            Alu::Arsh => (0xc0, 0),
        }
    }
}

/// A conditional jump condition (64-bit compare).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    /// ==
    Eq,
    /// > unsigned
    Gt,
    /// >= unsigned
    Ge,
    /// & != 0
    Set,
    /// !=
    Ne,
    /// > signed
    SGt,
    /// >= signed
    SGe,
    /// < unsigned
    Lt,
    /// <= unsigned
    Le,
    /// < signed
    SLt,
    /// <= signed
    SLe,
}

impl Cond {
    fn code(self) -> u8 {
        match self {
            Cond::Eq => 0x10,
            Cond::Gt => 0x20,
            Cond::Ge => 0x30,
            Cond::Set => 0x40,
            Cond::Ne => 0x50,
            Cond::SGt => 0x60,
            Cond::SGe => 0x70,
            Cond::Lt => 0xa0,
            Cond::Le => 0xb0,
            Cond::SLt => 0xc0,
            Cond::SLe => 0xd0,
        }
    }
    /// The condition that holds exactly when `self` does not.
    pub fn negate(self) -> Option<Cond> {
        Some(match self {
            Cond::Eq => Cond::Ne,
            Cond::Ne => Cond::Eq,
            Cond::Gt => Cond::Le,
            Cond::Le => Cond::Gt,
            Cond::Ge => Cond::Lt,
            Cond::Lt => Cond::Ge,
            Cond::SGt => Cond::SLe,
            Cond::SLe => Cond::SGt,
            Cond::SGe => Cond::SLt,
            Cond::SLt => Cond::SGe,
            Cond::Set => return None,
        })
    }
}

/// A jump target, created by [`Asm::label`] and placed by [`Asm::bind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label(usize);

/// `src_reg` value of `lddw` meaning "the immediate is a map fd" (`BPF_PSEUDO_MAP_FD`).
pub const PSEUDO_MAP_FD: u8 = 1;

/// `src_reg` value of a call meaning "the immediate is a kernel function's BTF id"
/// (`BPF_PSEUDO_KFUNC_CALL`).
pub const PSEUDO_KFUNC_CALL: u8 = 2;

/// An instruction buffer with labels. Map references are emitted with the *map index* (into the
/// program's map table) as the immediate; [`MapRef`] records where, so the loader patches real fds.
#[derive(Debug, Default, Clone)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
    /// Where map references sit: (instruction index of the `lddw`, map index).
    pub map_refs: Vec<MapRef>,
    /// Conditional jumps emitted ([`Asm::cond_jumps`]).
    cond_jumps: usize,
}

/// One map reference in a program: the `lddw` at `insn` loads map number `map` of the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapRef {
    /// Index of the first slot of the `lddw` instruction.
    pub insn: usize,
    /// Index of the map in the program's map layout.
    pub map: usize,
}

impl Asm {
    /// An empty program.
    pub fn new() -> Asm {
        Asm::default()
    }
    /// Number of conditional jumps emitted so far: each is a branch the verifier may keep pending
    /// while it walks the other way.
    pub fn cond_jumps(&self) -> usize {
        self.cond_jumps
    }
    /// Number of instruction slots so far.
    pub fn len(&self) -> usize {
        self.insns.len()
    }
    /// True when nothing has been emitted.
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }
    fn push(&mut self, code: u8, dst: Reg, src: Reg, off: i16, imm: i32) {
        self.insns.push(Insn {
            code,
            dst: dst.0,
            src: src.0,
            off,
            imm,
        });
    }
    /// A fresh, unplaced label.
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }
    /// Places `l` at the next instruction.
    pub fn bind(&mut self, l: Label) {
        self.labels[l.0] = Some(self.insns.len());
    }
    /// `dst = imm` (64-bit, imm sign-extended from 32 bits), or an `lddw` when it does not fit.
    pub fn mov_imm(&mut self, dst: Reg, imm: i64) {
        if let Ok(v) = i32::try_from(imm) {
            self.push(ALU64 | K | 0xb0, dst, R0, 0, v);
        } else {
            self.lddw(dst, imm as u64);
        }
    }
    /// `dst = imm64` in two slots.
    pub fn lddw(&mut self, dst: Reg, imm: u64) {
        self.push(LD | IMM | 0x18, dst, R0, 0, imm as u32 as i32);
        self.push(0, R0, R0, 0, (imm >> 32) as u32 as i32);
    }
    /// `dst = &map` for map number `map` of the program's layout (patched to a fd at load).
    pub fn ld_map(&mut self, dst: Reg, map: usize) {
        self.map_refs.push(MapRef {
            insn: self.insns.len(),
            map,
        });
        self.push(LD | IMM | 0x18, dst, Reg(PSEUDO_MAP_FD), 0, map as i32);
        self.push(0, R0, R0, 0, 0);
    }
    /// `dst = src` (64-bit).
    pub fn mov(&mut self, dst: Reg, src: Reg) {
        self.alu(Alu::Mov, dst, src);
    }
    /// 64-bit `dst op= src`.
    pub fn alu(&mut self, op: Alu, dst: Reg, src: Reg) {
        let (c, off) = op.code_off();
        self.push(ALU64 | X | c, dst, src, off, 0);
    }
    /// 64-bit `dst op= imm` (imm sign-extended).
    pub fn alu_imm(&mut self, op: Alu, dst: Reg, imm: i32) {
        let (c, off) = op.code_off();
        self.push(ALU64 | K | c, dst, R0, off, imm);
    }
    /// 32-bit `dst op= imm`; the result is zero-extended to 64 bits.
    pub fn alu32_imm(&mut self, op: Alu, dst: Reg, imm: i32) {
        let (c, off) = op.code_off();
        self.push(ALU | K | c, dst, R0, off, imm);
    }
    /// `dst = (s64)(sN)src` sign extension of the low `bits` (8, 16 or 32) bits (cpu v4 `movsx`).
    pub fn movsx(&mut self, dst: Reg, src: Reg, bits: i16) {
        self.push(ALU64 | X | 0xb0, dst, src, bits, 0);
    }
    /// `dst = (u64)(uN)dst`: zero-extends the low `bits` bits (8, 16, 32) in place.
    pub fn zext(&mut self, dst: Reg, bits: u32) {
        match bits {
            32 => self.push(ALU | X | 0xb0, dst, dst, 0, 0), // w = w clears the upper half
            8 => self.alu_imm(Alu::And, dst, 0xff),
            16 => self.alu_imm(Alu::And, dst, 0xffff),
            _ => {}
        }
    }
    /// Byte swap to big-endian of the low `bits` (16, 32, 64) bits, zero-extending the result
    /// (`BPF_END | BPF_TO_BE`; on little-endian x86-64 this is a swap: `htons`, `htonl`, `htonll`).
    pub fn to_be(&mut self, dst: Reg, bits: i32) {
        self.push(ALU | 0xd0 | 0x08, dst, R0, 0, bits);
    }
    /// `dst = *(size *)(src + off)`, zero-extended.
    pub fn ldx(&mut self, size: Size, dst: Reg, src: Reg, off: i16) {
        self.push(LDX | MEM | size.bits(), dst, src, off, 0);
    }
    /// `dst = *(size *)(src + off)`, sign-extended (cpu v4 `ldsx`; not for `DW`).
    pub fn ldxsx(&mut self, size: Size, dst: Reg, src: Reg, off: i16) {
        self.push(LDX | MEMSX | size.bits(), dst, src, off, 0);
    }
    /// `*(size *)(dst + off) = src`.
    pub fn stx(&mut self, size: Size, dst: Reg, off: i16, src: Reg) {
        self.push(STX | MEM | size.bits(), dst, src, off, 0);
    }
    /// `*(size *)(dst + off) = imm`.
    pub fn st_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) {
        self.push(ST | MEM | size.bits(), dst, R0, off, imm);
    }
    /// Atomic `*(u64 *)(dst + off) += src` (`BPF_ATOMIC | BPF_ADD`).
    pub fn atomic_add64(&mut self, dst: Reg, off: i16, src: Reg) {
        self.push(STX | ATOMIC | Size::DW.bits(), dst, src, off, 0x00);
    }
    /// Atomic compare-and-exchange (`BPF_ATOMIC | BPF_CMPXCHG`, Linux 5.12): if
    /// `*(u64 *)(dst + off) == R0` it becomes `src`; R0 receives the old value either way.
    pub fn atomic_cmpxchg64(&mut self, dst: Reg, off: i16, src: Reg) {
        self.push(STX | ATOMIC | Size::DW.bits(), dst, src, off, 0xf1);
    }
    /// Unconditional jump to `l`.
    pub fn ja(&mut self, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.push(JMP, R0, R0, 0, 0);
    }
    /// `if dst cond src goto l` (64-bit compare).
    pub fn jmp(&mut self, c: Cond, dst: Reg, src: Reg, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.cond_jumps += 1;
        self.push(JMP | X | c.code(), dst, src, 0, 0);
    }
    /// `if dst cond imm goto l` (imm sign-extended to 64 bits).
    pub fn jmp_imm(&mut self, c: Cond, dst: Reg, imm: i32, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.cond_jumps += 1;
        self.push(JMP | K | c.code(), dst, R0, 0, imm);
    }
    /// Calls helper number `id` (`include/uapi/linux/bpf.h` `__BPF_FUNC_MAPPER` order).
    pub fn call(&mut self, id: i32) {
        self.push(JMP | 0x80, R0, R0, 0, id);
    }
    /// Calls the kernel function (kfunc) whose BTF type id in vmlinux is `btf_id`
    /// (`BPF_PSEUDO_KFUNC_CALL`, src_reg 2, Linux 5.13; kernel/bpf/verifier.c `add_kfunc_call`).
    pub fn call_kfunc(&mut self, btf_id: u32) {
        self.push(JMP | 0x80, R0, Reg(PSEUDO_KFUNC_CALL), 0, btf_id as i32);
    }
    /// Returns R0.
    pub fn exit(&mut self) {
        self.push(JMP | 0x90, R0, R0, 0, 0);
    }
    /// The longest distance, in instructions, of a jump to a label bound so far (a BPF jump
    /// reaches at most ±32767: [`Asm::finish`] panics beyond, so callers check this first).
    pub fn longest_jump(&self) -> u64 {
        self.fixups
            .iter()
            .filter_map(|&(at, l)| {
                self.labels[l.0].map(|t| (t as i64 - at as i64 - 1).unsigned_abs())
            })
            .max()
            .unwrap_or(0)
    }

    /// Resolves labels and returns the instructions. Panics on an unbound label or a jump farther
    /// than ±32767 instructions (code generator bugs, not user errors).
    pub fn finish(mut self) -> (Vec<Insn>, Vec<MapRef>) {
        for &(at, l) in &self.fixups {
            let target = self.labels[l.0].expect("jump to an unbound label");
            let rel = target as i64 - at as i64 - 1;
            self.insns[at].off = i16::try_from(rel).expect("jump out of range");
        }
        (self.insns, self.map_refs)
    }
}

/// Helper function ids used by the code generator (`enum bpf_func_id`, include/uapi/linux/bpf.h).
pub mod helper {
    /// `void *bpf_map_lookup_elem(map, key)`
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    /// `long bpf_map_update_elem(map, key, value, flags)`
    pub const MAP_UPDATE_ELEM: i32 = 2;
    /// `long bpf_map_delete_elem(map, key)`
    pub const MAP_DELETE_ELEM: i32 = 3;
    /// `u64 bpf_get_attach_cookie(ctx)` (Linux 5.15)
    pub const GET_ATTACH_COOKIE: i32 = 174;
    /// `u32 bpf_get_prandom_u32(void)`
    pub const GET_PRANDOM_U32: i32 = 7;
    /// `u64 bpf_ktime_get_ns(void)` (CLOCK_MONOTONIC)
    pub const KTIME_GET_NS: i32 = 5;
    /// `u32 bpf_get_smp_processor_id(void)`
    pub const GET_SMP_PROCESSOR_ID: i32 = 8;
    /// `u64 bpf_get_current_pid_tgid(void)`: tgid << 32 | tid
    pub const GET_CURRENT_PID_TGID: i32 = 14;
    /// `u64 bpf_get_current_uid_gid(void)`: gid << 32 | uid
    pub const GET_CURRENT_UID_GID: i32 = 15;
    /// `long bpf_get_current_comm(buf, size)`
    pub const GET_CURRENT_COMM: i32 = 16;
    /// `u64 bpf_get_current_task(void)`
    pub const GET_CURRENT_TASK: i32 = 35;
    /// `struct task_struct *bpf_get_current_task_btf(void)` (Linux 5.11)
    pub const GET_CURRENT_TASK_BTF: i32 = 158;
    /// `struct pt_regs *bpf_task_pt_regs(struct task_struct *task)`: the task's saved user
    /// registers (Linux 5.15)
    pub const TASK_PT_REGS: i32 = 175;
    /// `long bpf_probe_write_user(void *dst, const void *src, u32 len)` (Linux 4.8; the kernel
    /// withholds it under lockdown `integrity` and `confidentiality`)
    pub const PROBE_WRITE_USER: i32 = 36;
    /// `long bpf_send_signal(u32 sig)`: to the current process (Linux 5.3)
    pub const SEND_SIGNAL: i32 = 109;
    /// `long bpf_get_stack(ctx, buf, size, flags)`
    pub const GET_STACK: i32 = 67;
    /// `long bpf_probe_read_user(dst, size, unsafe_ptr)`
    pub const PROBE_READ_USER: i32 = 112;
    /// `long bpf_probe_read_kernel(dst, size, unsafe_ptr)`
    pub const PROBE_READ_KERNEL: i32 = 113;
    /// `long bpf_probe_read_user_str(dst, size, unsafe_ptr)`
    pub const PROBE_READ_USER_STR: i32 = 114;
    /// `long bpf_probe_read_kernel_str(dst, size, unsafe_ptr)`
    pub const PROBE_READ_KERNEL_STR: i32 = 115;
    /// `u64 bpf_ktime_get_boot_ns(void)`
    pub const KTIME_GET_BOOT_NS: i32 = 125;
    /// `long bpf_ringbuf_output(ringbuf, data, size, flags)`
    pub const RINGBUF_OUTPUT: i32 = 130;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_mov_and_exit_as_the_kernel_reads_them() {
        let mut a = Asm::new();
        a.mov_imm(R0, 42);
        a.exit();
        let (insns, _) = a.finish();
        // b7 00 00 00 2a 00 00 00: mov64 r0, 42 (instruction-set.rst, "ALU64 MOV K").
        assert_eq!(insns[0].to_bytes(), [0xb7, 0, 0, 0, 42, 0, 0, 0]);
        assert_eq!(insns[1].to_bytes(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn jumps_resolve_relative_to_the_next_instruction() {
        let mut a = Asm::new();
        let l = a.label();
        a.jmp_imm(Cond::Eq, R1, 0, l);
        a.mov_imm(R0, 1);
        a.bind(l);
        a.exit();
        let (insns, _) = a.finish();
        assert_eq!(insns[0].off, 1);
        assert_eq!(insns[0].code, 0x15);
    }

    #[test]
    fn cmpxchg_is_an_atomic_dw_store_with_the_fetch_flag() {
        let mut a = Asm::new();
        a.atomic_cmpxchg64(R9, 8, R2);
        let (insns, _) = a.finish();
        // db 29 08 00 f1 00 00 00: BPF_STX | BPF_ATOMIC | BPF_DW, dst r9, src r2, off 8,
        // imm BPF_CMPXCHG (0xf0 | BPF_FETCH) (instruction-set.rst, "Atomic operations").
        assert_eq!(insns[0].to_bytes(), [0xdb, 0x29, 8, 0, 0xf1, 0, 0, 0]);
    }

    #[test]
    fn wide_immediates_take_two_slots_and_map_refs_are_recorded() {
        let mut a = Asm::new();
        a.mov_imm(R1, 0x1_0000_0000);
        a.ld_map(R2, 3);
        let (insns, refs) = a.finish();
        assert_eq!(insns.len(), 4);
        assert_eq!(insns[0].code, 0x18);
        assert_eq!(insns[1].imm, 1);
        assert_eq!(refs, vec![MapRef { insn: 2, map: 3 }]);
        assert_eq!(insns[2].src, PSEUDO_MAP_FD);
        assert_eq!(insns[2].imm, 3);
    }
}
