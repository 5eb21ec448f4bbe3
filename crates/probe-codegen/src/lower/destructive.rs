//! The destructive actions that act in the kernel (DTrace guide, "Destructive Actions"):
//! `copyout()`, `copyoutstr()` and `chill()`. (`system()` runs in the consumer, `raise()` and
//! `stop()` are one helper call each, in `stmts.rs`.)
//!
//! - `copyout(buf, addr, nbytes)` reads `nbytes` (a constant, 1 to [`COPYIN_MAX`]) at kernel
//!   address `buf` (a `copyin()` buffer) into scratch memory and writes them to user address
//!   `addr` with `bpf_probe_write_user`; a failed read or write is DTrace's invalid-address fault.
//! - `copyoutstr(str, addr, maxlen)` writes the string and its NUL, at most `maxlen` bytes (as
//!   DTrace's `dtrace_copyoutstr`, which stops at the NUL or at `maxlen`).
//! - `chill(ns)` spins on this CPU until `ns` nanoseconds of CLOCK_MONOTONIC have passed, as
//!   DTrace's `dtrace_action_chill`: each CPU may chill at most `chill_max` (500 ms) per
//!   `chill_interval` (1 s), counted in the [`MapRole::ChillBudget`] map; a `chill()` that would
//!   exceed it (or a negative one) does not spin and is DTrace's illegal-operation fault. The spin
//!   loop runs on the `bpf_iter_num` kfuncs, which the verifier checks once (a plain loop would be
//!   walked iteration by iteration): at most [`SPIN_ITERATIONS`] rounds of [`SPIN_READS`] clock
//!   reads, far more than 500 ms takes.

use super::*;

/// DTrace's `dtrace_chill_max`: the most nanoseconds one CPU may chill per interval.
pub const CHILL_MAX_NS: u64 = 500_000_000;
/// DTrace's `dtrace_chill_interval`, in nanoseconds.
pub const CHILL_INTERVAL_NS: u64 = 1_000_000_000;
/// Rounds of the spin loop at most (`BPF_MAX_LOOPS`, the iterator's largest range).
pub const SPIN_ITERATIONS: i32 = 8 << 20;
/// Clock reads per round of the spin loop (the deadline is checked after the last).
pub const SPIN_READS: usize = 8;

impl ProgGen<'_, '_> {
    /// The `sl_chill` map, created on first use and shared by all programs.
    fn chill_map(&mut self) -> usize {
        if let Some(m) = self.b.chill_map {
            return m;
        }
        let m = self.b.add_map(MapSpec {
            name: "sl_chill".into(),
            kind: MapKind::PercpuArray,
            key_size: 4,
            value_size: 16,
            max_entries: 1,
            no_prealloc: false,
            role: MapRole::ChillBudget,
        });
        self.b.chill_map = Some(m);
        m
    }

    /// `chill(ns)`: see the module documentation.
    pub(super) fn chill(&mut self, ns: &TExpr, span: Span) -> Res<()> {
        let Some(k) = self.b.opts.kfuncs else {
            return self.err(
                span,
                "chill() needs the kernel's bpf_iter_num kfuncs (Linux 6.4, found in kernel BTF)",
            );
        };
        let map = self.chill_map();
        let ns_slot = self.slot(span)?;
        let now_slot = self.slot(span)?;
        let it_slot = self.slot(span)?;
        self.int(ns)?;
        let a = &mut self.asm;
        a.stx(Size::DW, R10, ns_slot, R0);
        a.call(helper::KTIME_GET_NS);
        a.stx(Size::DW, R10, now_slot, R0);
        a.st_imm(Size::W, R10, SLOT_KEY, 0);
        lookup_slot_key(a, map);
        let (done, within, over) = (a.label(), a.label(), a.label());
        a.jmp_imm(Cond::Eq, R0, 0, done);
        a.mov(R9, R0);
        // A new interval once the current one is over: mark = now, chilled = 0.
        a.ldx(Size::DW, R1, R9, 0);
        a.ldx(Size::DW, R2, R10, now_slot);
        a.alu(Alu::Sub, R2, R1);
        a.jmp_imm(Cond::Le, R2, CHILL_INTERVAL_NS as i32, within);
        a.ldx(Size::DW, R2, R10, now_slot);
        a.stx(Size::DW, R9, 0, R2);
        a.st_imm(Size::DW, R9, 8, 0);
        a.bind(within);
        // chilled + ns beyond chill_max, or wrapping (a negative ns): the fault, no spin.
        a.ldx(Size::DW, R1, R9, 8);
        a.ldx(Size::DW, R3, R10, ns_slot);
        a.alu(Alu::Add, R3, R1);
        a.jmp_imm(Cond::Gt, R3, CHILL_MAX_NS as i32, over);
        a.jmp(Cond::Lt, R3, R1, over);
        a.stx(Size::DW, R9, 8, R3);
        // deadline = now + ns, kept in ns_slot.
        a.ldx(Size::DW, R1, R10, ns_slot);
        a.ldx(Size::DW, R2, R10, now_slot);
        a.alu(Alu::Add, R1, R2);
        a.stx(Size::DW, R10, ns_slot, R1);
        a.mov(R1, R10);
        a.alu_imm(Alu::Add, R1, it_slot as i32);
        a.mov_imm(R2, 0);
        a.mov_imm(R3, SPIN_ITERATIONS as i64);
        a.call_kfunc(k.new);
        let (round, end) = (a.label(), a.label());
        a.bind(round);
        a.mov(R1, R10);
        a.alu_imm(Alu::Add, R1, it_slot as i32);
        a.call_kfunc(k.next);
        a.jmp_imm(Cond::Eq, R0, 0, end);
        for _ in 0..SPIN_READS {
            a.call(helper::KTIME_GET_NS);
        }
        a.ldx(Size::DW, R1, R10, ns_slot);
        a.jmp(Cond::Lt, R0, R1, round);
        a.bind(end);
        a.mov(R1, R10);
        a.alu_imm(Alu::Add, R1, it_slot as i32);
        a.call_kfunc(k.destroy);
        a.ja(done);
        a.bind(over);
        self.fault(Fault::IllOp, Some(ns_slot), span)?;
        self.asm.bind(done);
        Ok(())
    }

    /// `copyout(buf, addr, size)`: see the module documentation.
    pub(super) fn copyout(&mut self, buf: &TExpr, addr: &TExpr, size: u32, span: Span) -> Res<()> {
        if size == 0 {
            return Ok(());
        }
        if size > COPYIN_MAX {
            return self.err(
                span,
                format!("copyout() size {size} is out of range: sightline copies 1 to {COPYIN_MAX} bytes"),
            );
        }
        let addr_slot = self.slot(span)?;
        let buf_slot = self.slot(span)?;
        self.int(addr)?;
        self.asm.stx(Size::DW, R10, addr_slot, R0);
        self.int(buf)?;
        self.asm.stx(Size::DW, R10, buf_slot, R0);
        let off = self.scratch(size, span)?;
        let a = &mut self.asm;
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, off as i32);
        a.mov_imm(R2, size as i64);
        a.ldx(Size::DW, R3, R10, buf_slot);
        self.call_or_fault(helper::PROBE_READ_KERNEL, buf_slot, span)?;
        let a = &mut self.asm;
        a.ldx(Size::DW, R1, R10, addr_slot);
        a.mov(R2, R7);
        a.alu_imm(Alu::Add, R2, off as i32);
        a.mov_imm(R3, size as i64);
        self.call_or_fault(helper::PROBE_WRITE_USER, addr_slot, span)
    }

    /// `copyoutstr(s, addr, maxlen)`: see the module documentation.
    pub(super) fn copyoutstr(
        &mut self,
        s: &TExpr,
        addr: &TExpr,
        maxlen: &TExpr,
        span: Span,
    ) -> Res<()> {
        let ss = self.strsize();
        let addr_slot = self.slot(span)?;
        let max_slot = self.slot(span)?;
        self.int(addr)?;
        self.asm.stx(Size::DW, R10, addr_slot, R0);
        self.int(maxlen)?;
        self.asm.stx(Size::DW, R10, max_slot, R0);
        let off = self.scratch(ss, span)?;
        self.string(s, off)?;
        self.strlen_at(off, span)?;
        let a = &mut self.asm;
        // n = min(strlen + 1, maxlen), in [1, strsize] where the verifier sees it.
        a.alu_imm(Alu::Add, R0, 1);
        let (shorter, done) = (a.label(), a.label());
        a.ldx(Size::DW, R1, R10, max_slot);
        a.jmp(Cond::Le, R0, R1, shorter);
        a.mov(R0, R1);
        a.bind(shorter);
        a.jmp_imm(Cond::Lt, R0, 1, done);
        let fits = a.label();
        a.jmp_imm(Cond::Le, R0, ss as i32, fits);
        a.mov_imm(R0, ss as i64);
        a.bind(fits);
        a.mov(R3, R0);
        a.ldx(Size::DW, R1, R10, addr_slot);
        a.mov(R2, R7);
        a.alu_imm(Alu::Add, R2, off as i32);
        self.call_or_fault(helper::PROBE_WRITE_USER, addr_slot, span)?;
        self.asm.bind(done);
        Ok(())
    }
}
