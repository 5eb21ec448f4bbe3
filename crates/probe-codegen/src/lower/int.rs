//! Integer expressions (result in `R0`): operators, conversions, `copyin`, dereferences and the
//! integer subroutines.

use super::*;

impl ProgGen<'_, '_> {
    pub(super) fn int(&mut self, e: &TExpr) -> Res<()> {
        match &e.kind {
            TExprKind::Int(v) => {
                let mut v = *v as i64;
                if let Type::Int { bytes, signed } = e.ty
                    && bytes < 8
                {
                    let sh = 64 - bytes as u32 * 8;
                    v = if signed {
                        (v << sh) >> sh
                    } else {
                        ((v as u64) << sh >> sh) as i64
                    };
                }
                self.asm.mov_imm(R0, v);
            }
            TExprKind::Str(_) => return self.err(e.span, "a string where an integer is expected"),
            TExprKind::Builtin(b) => self.builtin_int(*b, e.span)?,
            TExprKind::ProbeArg(n) => {
                if let GroupKey::Tracepoint(..) = self.group {
                    return self.err(
                        e.span,
                        "args[N] is not defined at tracepoints: use args->field",
                    );
                }
                if matches!(self.group, GroupKey::Profile(..)) {
                    self.profile_arg(*n)?;
                } else {
                    self.arg(*n, e.span)?;
                }
                self.normalize(R0, &e.ty);
            }
            TExprKind::TpField(name) if self.group == GroupKey::SysEnter => {
                self.syscall_field(name, e.span)?;
                self.normalize(R0, &e.ty);
            }
            TExprKind::TpField(name) => {
                let f = self.tp_field(name, e.span)?;
                if f.array.is_some() || f.data_loc_string {
                    return self.err(
                        e.span,
                        format!("tracepoint field `{name}` is not an integer"),
                    );
                }
                let size = Size::from_bytes(f.size);
                if f.signed && f.size < 8 {
                    self.asm.ldxsx(size, R0, R6, f.offset as i16);
                } else {
                    self.asm.ldx(size, R0, R6, f.offset as i16);
                }
                self.normalize(R0, &e.ty);
            }
            TExprKind::ArrayElem(base, i) => {
                let TExprKind::TpField(name) = &base.kind else {
                    return self.err(
                        e.span,
                        "indexing is supported on tracepoint array fields only",
                    );
                };
                let f = self.tp_field(name, e.span)?;
                let n = f.array.unwrap_or(1).max(1);
                let elem = f.size / n;
                if *i >= n {
                    return self.err(
                        e.span,
                        format!("index {i} is out of bounds of `{name}` ({n} elements)"),
                    );
                }
                let off = (f.offset + i * elem) as i16;
                if f.signed && elem < 8 {
                    self.asm.ldxsx(Size::from_bytes(elem), R0, R6, off);
                } else {
                    self.asm.ldx(Size::from_bytes(elem), R0, R6, off);
                }
                self.normalize(R0, &e.ty);
            }
            TExprKind::Var(va) => {
                if !e.ty.is_integral() && !matches!(e.ty, Type::Symbol(_)) {
                    return self.err(
                        e.span,
                        "a non-integer variable where an integer is expected",
                    );
                }
                self.var_read_int(va, e.span)?;
            }
            TExprKind::Unary(op, inner) => match op {
                UnaryOp::Not => {
                    self.int(inner)?;
                    let a = &mut self.asm;
                    let one = a.label();
                    let done = a.label();
                    a.jmp_imm(Cond::Eq, R0, 0, one);
                    a.mov_imm(R0, 0);
                    a.ja(done);
                    a.bind(one);
                    a.mov_imm(R0, 1);
                    a.bind(done);
                }
                UnaryOp::Neg => {
                    self.int(inner)?;
                    self.asm.alu_imm(Alu::Neg, R0, 0);
                    self.normalize(R0, &e.ty);
                }
                UnaryOp::BitNot => {
                    self.int(inner)?;
                    self.asm.alu_imm(Alu::Xor, R0, -1);
                    self.normalize(R0, &e.ty);
                }
                UnaryOp::Plus => self.int(inner)?,
                UnaryOp::Deref => {
                    self.int(inner)?;
                    self.deref(&e.ty, !var_address(inner), e.span)?;
                }
                UnaryOp::AddrOf => {
                    return self.err(e.span, "the & operator is not supported by sightline");
                }
            },
            TExprKind::Deref(inner) => {
                self.int(inner)?;
                self.deref(&e.ty, !var_address(inner), e.span)?;
            }
            TExprKind::Binary(op, l, r) => self.binary(*op, l, r, &e.ty, e.span)?,
            TExprKind::StrCmp(op, l, r) => {
                let ss = self.strsize();
                let a_off = self.scratch(ss, e.span)?;
                self.string(l, a_off)?;
                let b_off = self.scratch(ss, e.span)?;
                self.string(r, b_off)?;
                self.strcmp(a_off, b_off, ss);
                // R0 = -1/0/1; turn into the comparison's truth value.
                let c = match op {
                    BinaryOp::Eq => Cond::Eq,
                    BinaryOp::Ne => Cond::Ne,
                    BinaryOp::Lt => Cond::SLt,
                    BinaryOp::Le => Cond::SLe,
                    BinaryOp::Gt => Cond::SGt,
                    BinaryOp::Ge => Cond::SGe,
                    _ => return self.err(e.span, "internal: string operator"),
                };
                self.set_cond(c, R0, 0);
            }
            TExprKind::Ternary(c, t, f) => {
                self.int(c)?;
                let els = self.asm.label();
                let done = self.asm.label();
                self.asm.jmp_imm(Cond::Eq, R0, 0, els);
                self.int(t)?;
                self.asm.ja(done);
                self.asm.bind(els);
                self.int(f)?;
                self.asm.bind(done);
            }
            TExprKind::Cast(inner) => {
                if inner.ty.is_string() {
                    return self.err(e.span, "a string cannot be converted to an integer");
                }
                self.int(inner)?;
                self.normalize(R0, &e.ty);
            }
            TExprKind::Assign(..) => self.assign(e)?,
            TExprKind::VarAddr(va) => self.var_addr(va, e.span)?,
            TExprKind::StoreMember {
                target,
                offset,
                value,
            } => self.store_member(target, *offset, value, &e.ty, e.span)?,
            TExprKind::StorePtr { addr, value } => self.store_ptr(addr, value, &e.ty, e.span)?,
            TExprKind::ElemLoad {
                target,
                index,
                len,
                base,
            } => {
                self.elem_ptr(target, index, *len, *base, &e.ty, false, e.span)?;
                let bytes = e.ty.size(self.strsize());
                let size = Size::from_bytes(bytes);
                match e.ty {
                    Type::Int { signed: true, .. } if bytes < 8 => self.asm.ldxsx(size, R0, R0, 0),
                    _ => self.asm.ldx(size, R0, R0, 0),
                }
            }
            TExprKind::ElemStore {
                target,
                index,
                len,
                base,
                value,
            } => {
                let vslot = self.slot(e.span)?;
                self.int(value)?;
                self.asm.stx(Size::DW, R10, vslot, R0);
                let skip = self.asm.label();
                self.elem_ptr(target, index, *len, *base, &e.ty, true, e.span)?;
                self.asm.jmp_imm(Cond::Eq, R0, 0, skip);
                self.asm.ldx(Size::DW, R1, R10, vslot);
                let bytes = e.ty.size(self.strsize());
                self.asm.stx(Size::from_bytes(bytes), R0, 0, R1);
                self.asm.bind(skip);
                self.asm.ldx(Size::DW, R0, R10, vslot);
            }
            TExprKind::CopyStruct { target, src } => {
                self.copy_struct(target, src, &e.ty, e.span)?
            }
            TExprKind::IncDec {
                target,
                increment,
                prefix,
            } => {
                let old = self.slot(e.span)?;
                let new = self.slot(e.span)?;
                self.var_read_int(target, e.span)?;
                self.asm.stx(Size::DW, R10, old, R0);
                self.asm
                    .alu_imm(Alu::Add, R0, if *increment { 1 } else { -1 });
                self.normalize(R0, &e.ty);
                self.asm.stx(Size::DW, R10, new, R0);
                self.var_write_int(target, new, e.span)?;
                self.asm
                    .ldx(Size::DW, R0, R10, if *prefix { new } else { old });
            }
            TExprKind::Call(subr, args) => self.call_int(*subr, args, e)?,
            TExprKind::Stack { .. } => return self.err(e.span, "a stack is not an integer"),
            TExprKind::Symbol(_, inner) => self.int(inner)?,
        }
        Ok(())
    }

    /// `copyin(uaddr, size)` (DTrace guide, "Actions and Subroutines" > copyin): copies `size`
    /// bytes of user memory at `uaddr` into a scratch buffer of the clause and leaves the
    /// buffer's address in R0 (a plain integer, read back through `bpf_probe_read_kernel` like
    /// any pointer). A constant `size` must be in 1..=[`COPYIN_MAX`] bytes (a compile error
    /// otherwise); a computed one gets a buffer of [`COPYIN_MAX`] bytes and is checked at run
    /// time: above [`COPYIN_MAX`] (negative values included, as unsigned) the clause faults with
    /// `out of scratch space` ([`Fault::NoScratch`], DTrace's `DTRACEFLT_NOSCRATCH`), 0 copies
    /// nothing. The buffer keeps a NUL after the bytes so `stringof(copyin(..))` stops there.
    /// Each copyin() gets its own buffer, kept until the clause ends. A fault reports `invalid
    /// address` (ERROR probe).
    fn copyin(&mut self, args: &[TExpr], span: Span) -> Res<()> {
        let mut size_e = &args[1];
        while let TExprKind::Cast(inner) = &size_e.kind {
            size_e = inner;
        }
        let size = match size_e.kind {
            TExprKind::Int(v) if (1..=COPYIN_MAX as u64).contains(&v) => v as u32,
            TExprKind::Int(v) => {
                return self.err(span, format!("copyin() size {v} is out of range: sightline copies 1 to {COPYIN_MAX} bytes"));
            }
            _ => return self.copyin_computed(args, span),
        };
        let addr = self.slot(span)?;
        self.int(&args[0])?;
        self.asm.stx(Size::DW, R10, addr, R0);
        // size bytes, then at least one zero byte (the last 8-byte word is zeroed first).
        let alloc = (size + 8) & !7;
        let off = self.scratch(alloc, span)?;
        self.pin(off);
        let a = &mut self.asm;
        a.st_imm(Size::DW, R7, (off + alloc - 8) as i16, 0);
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, off as i32);
        a.mov_imm(R2, size as i64);
        a.ldx(Size::DW, R3, R10, addr);
        self.call_or_fault(helper::PROBE_READ_USER, addr, span)?;
        self.scratch_address(off, span)
    }

    /// `copyin(uaddr, size)` with a `size` known only at run time (see [`Self::copyin`]).
    fn copyin_computed(&mut self, args: &[TExpr], span: Span) -> Res<()> {
        let addr = self.slot(span)?;
        let size = self.slot(span)?;
        self.int(&args[0])?;
        self.asm.stx(Size::DW, R10, addr, R0);
        self.int(&args[1])?;
        self.asm.stx(Size::DW, R10, size, R0);
        let ok = self.asm.label();
        self.asm.jmp_imm(Cond::Le, R0, COPYIN_MAX as i32, ok);
        self.fault(Fault::NoScratch, Some(size), span)?;
        self.asm.bind(ok);
        let alloc = COPYIN_MAX + 8;
        let off = self.scratch(alloc, span)?;
        self.pin(off);
        let a = &mut self.asm;
        // The NUL after the copied bytes: at off + size, 0 <= size <= COPYIN_MAX (the check
        // above bounds the reloaded spill for the verifier; the mask keeps it so on any kernel).
        a.ldx(Size::DW, R2, R10, size);
        a.alu_imm(Alu::And, R2, 2047);
        let fits = a.label();
        a.jmp_imm(Cond::Le, R2, COPYIN_MAX as i32, fits);
        a.mov_imm(R2, COPYIN_MAX as i64);
        a.bind(fits);
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, off as i32);
        a.alu(Alu::Add, R1, R2);
        a.st_imm(Size::B, R1, 0, 0);
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, off as i32);
        a.ldx(Size::DW, R3, R10, addr);
        self.call_or_fault(helper::PROBE_READ_USER, addr, span)?;
        self.scratch_address(off, span)
    }

    /// The scratch memory from `off` to the current end is kept until the clause ends (an
    /// `alloca()` or `copyin()` buffer), and pointers may reach it.
    fn pin(&mut self, off: u32) {
        self.pinned = self.pinned.max(self.scratch_next);
        self.pin_lo.get_or_insert(off);
    }

    /// `alloca(size)`: R0 = the address of `size` zeroed bytes of scratch memory, kept until the
    /// clause ends (pinned, as copyin()'s buffers); `alloca(0)` is the address the next
    /// allocation gets. A computed size above [`COPYIN_MAX`], or beyond what `-x scratchsize`
    /// leaves to the clause, faults with `out of scratch space` (DTrace's
    /// `DTRACEFLT_NOSCRATCH`); a computed size's buffer is always [`COPYIN_MAX`] bytes.
    fn alloca(&mut self, size_e: &TExpr, span: Span) -> Res<()> {
        let mut inner = size_e;
        while let TExprKind::Cast(i) = &inner.kind {
            inner = i;
        }
        let left = self
            .b
            .scratch_size
            .map(|s| s.saturating_sub(self.scratch_used));
        let size = match inner.kind {
            TExprKind::Int(v) if (0..=COPYIN_MAX as u64).contains(&v) => {
                let v = v as u32;
                if left.is_some_and(|l| v > l) {
                    self.fault_always(Fault::NoScratch, None, span)?;
                }
                v
            }
            TExprKind::Int(v) => {
                return self.err(
                    span,
                    format!("alloca() size {v} is out of range: sightline allocates 0 to {COPYIN_MAX} bytes"),
                );
            }
            _ => {
                let cap = left.unwrap_or(COPYIN_MAX).min(COPYIN_MAX);
                let slot = self.slot(span)?;
                self.int(size_e)?;
                self.asm.stx(Size::DW, R10, slot, R0);
                let ok = self.asm.label();
                self.asm.jmp_imm(Cond::Le, R0, cap as i32, ok);
                self.fault(Fault::NoScratch, Some(slot), span)?;
                self.asm.bind(ok);
                COPYIN_MAX
            }
        };
        self.scratch_used = self.scratch_used.saturating_add(size);
        let alloc = (size + 7) & !7;
        let off = self.scratch(alloc, span)?;
        self.pin(off);
        self.zero(off, alloc);
        self.scratch_address(off, span)
    }

    /// `bcopy(src, dest, size)`: copies `size` bytes (a constant) from kernel or scratch memory
    /// at `src` to `dest`, which must lie in this clause's pinned scratch memory (`alloca()` and
    /// `copyin()` buffers, offsets below `pinned`); another `dest` faults with `invalid address`
    /// (illumos `dtrace_dif_subr` DIF_SUBR_BCOPY: `dtrace_inscratch` or BADADDR), as does a bad
    /// `src`.
    ///
    /// `copyinto(uaddr, size, dest)` is the same copy from user memory (`read` is
    /// `probe_read_user`; its arguments come in that order).
    fn bcopy(&mut self, args: &[TExpr], span: Span, read: i32) -> Res<()> {
        let (src_e, dst_e, size_e) = if read == helper::PROBE_READ_USER {
            (&args[0], &args[2], &args[1])
        } else {
            (&args[0], &args[1], &args[2])
        };
        let mut inner = size_e;
        while let TExprKind::Cast(i) = &inner.kind {
            inner = i;
        }
        let TExprKind::Int(size) = inner.kind else {
            return self.err(span, "internal: bcopy()/copyinto() size");
        };
        let size = size as u32;
        let src = self.slot(span)?;
        let dst = self.slot(span)?;
        let size_slot = self.slot(span)?;
        // Arguments are evaluated left to right (Oracle's tst.copyinto_arg_order).
        for e in args {
            if e.ty == probe_sema::types::Type::String {
                // A string source: its bytes, in scratch memory past the clause's buffers
                // (at least `size` of them, so the copy stays in the scratch memory).
                let at = self.scratch(self.strsize().max(size), span)?;
                self.string(e, at)?;
                self.scratch_address(at, span)?;
            } else {
                self.int(e)?;
            }
            let slot = if std::ptr::eq(e, src_e) {
                src
            } else if std::ptr::eq(e, dst_e) {
                dst
            } else {
                size_slot
            };
            self.asm.stx(Size::DW, R10, slot, R0);
        }
        if self.pin_lo.is_none() {
            let name = if read == helper::PROBE_READ_USER {
                "copyinto"
            } else {
                "bcopy"
            };
            return self.err(
                span,
                format!("{name}() destination must be scratch memory: no alloca() or copyin() comes before it in this clause"),
            );
        }
        self.scratch_place(dst, size, span)?;
        let a = &mut self.asm;
        a.mov_imm(R2, size as i64);
        a.ldx(Size::DW, R3, R10, src);
        self.call_or_fault(read, src, span)?;
        self.asm.mov_imm(R0, 0);
        Ok(())
    }

    /// `*p = value` through a pointer into the clause's scratch memory (what `alloca()` and
    /// `copyin()` return): the address is turned into an offset from the scratch memory's
    /// start, checked against the memory pinned so far (DTrace's "invalid address" fault when
    /// outside), and the value stored at that offset of the map value. R0 = the value.
    fn store_ptr(&mut self, addr: &TExpr, value: &TExpr, ty: &Type, span: Span) -> Res<()> {
        let size = ty.size(self.strsize()).clamp(1, 8);
        let aslot = self.slot(span)?;
        let vslot = self.slot(span)?;
        self.int(addr)?;
        self.asm.stx(Size::DW, R10, aslot, R0);
        self.int(value)?;
        self.asm.stx(Size::DW, R10, vslot, R0);
        self.scratch_place(aslot, size, span)?;
        let a = &mut self.asm;
        a.ldx(Size::DW, R0, R10, vslot);
        a.stx(Size::from_bytes(size), R1, 0, R0);
        Ok(())
    }

    /// A fault known at compile time. It is still emitted behind a branch: the kernel's
    /// verifier rejects instructions that no jump reaches (`check_cfg`), so the code after it
    /// must stay reachable in the program's shape; the branch is never taken.
    fn fault_always(&mut self, fault: Fault, addr_slot: Option<i16>, span: Span) -> Res<()> {
        let skip = self.asm.label();
        self.asm.mov_imm(R0, 1);
        self.asm.jmp_imm(Cond::Eq, R0, 0, skip);
        self.fault(fault, addr_slot, span)?;
        self.asm.bind(skip);
        Ok(())
    }

    /// The clause's `alloca()`/`copyin()` memory so far, as scratch offsets `(lo, hi)` (`None`
    /// before the first), when `size` bytes fit in it.
    fn pinned_region(&self, size: u32) -> Option<(u32, u32)> {
        self.pin_lo
            .filter(|lo| self.pinned >= lo + size)
            .map(|lo| (lo, self.pinned))
    }

    /// R1 = a map-value pointer to the `size` bytes at the address in stack slot `slot`, which
    /// must lie in the clause's `alloca()`/`copyin()` memory so far (scratch offsets from the
    /// first such buffer to the end of the last); another address is DTrace's "invalid
    /// address" fault. Used by `bcopy()` and stores through pointers.
    fn scratch_place(&mut self, slot: i16, size: u32, span: Span) -> Res<()> {
        let Some((lo, hi)) = self.pinned_region(size) else {
            // No scratch memory of that size in this clause: every such access faults.
            self.fault_always(Fault::BadAddr, Some(slot), span)?;
            self.asm.mov(R1, R7);
            return Ok(());
        };
        let room = hi - lo - size;
        // The address's offset from the clause's first buffer.
        self.scratch_address(lo, span)?;
        let a = &mut self.asm;
        a.ldx(Size::DW, R1, R10, slot);
        a.alu(Alu::Sub, R1, R0);
        let ok = a.label();
        a.jmp_imm(Cond::Le, R1, room as i32, ok);
        self.fault(Fault::BadAddr, Some(slot), span)?;
        let a = &mut self.asm;
        a.bind(ok);
        // R1 (0 ..= room) is re-checked after the reload for the verifier.
        a.mov(R2, R1);
        a.alu_imm(Alu::And, R2, 0x7fff);
        let fits = a.label();
        a.jmp_imm(Cond::Le, R2, room as i32, fits);
        a.mov_imm(R2, 0);
        a.bind(fits);
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, lo as i32);
        a.alu(Alu::Add, R1, R2);
        Ok(())
    }

    /// Before a load of `size` bytes from the address in stack slot `slot`, in a program
    /// whose clauses take `alloca()`/`copyin()` memory: an address in the scratch memory (or
    /// within [`SCRATCH_SPAN`] bytes below it) must lie in the running clause's buffers, or it
    /// is DTrace's "invalid address" fault (Oracle checks loads through pointers to `alloca()`
    /// memory against the clause's allocation: reading below it, beyond its top or in a
    /// later clause faults). Other addresses are left to the load itself.
    fn scratch_load_check(&mut self, slot: i16, size: u32, span: Span) -> Res<()> {
        if !self.b.scratch_pointers {
            return Ok(());
        }
        self.scratch_address(0, span)?;
        let a = &mut self.asm;
        a.ldx(Size::DW, R1, R10, slot);
        a.alu(Alu::Sub, R1, R0);
        a.mov(R2, R1);
        a.alu_imm(Alu::Add, R2, SCRATCH_SPAN as i32);
        let fine = a.label();
        a.jmp_imm(Cond::Ge, R2, 2 * SCRATCH_SPAN as i32, fine);
        if let Some((lo, hi)) = self.pinned_region(size) {
            let a = &mut self.asm;
            a.alu_imm(Alu::Sub, R1, lo as i32);
            a.jmp_imm(Cond::Le, R1, (hi - lo - size) as i32, fine);
        }
        self.fault(Fault::BadAddr, Some(slot), span)?;
        self.asm.bind(fine);
        Ok(())
    }

    /// R0 = the address of scratch offset `off` as a plain integer (from the prologue's
    /// [`SLOT_SCRATCH_BASE`]).
    fn scratch_address(&mut self, off: u32, _span: Span) -> Res<()> {
        let a = &mut self.asm;
        a.ldx(Size::DW, R0, R10, SLOT_SCRATCH_BASE);
        a.alu_imm(Alu::Add, R0, off as i32);
        Ok(())
    }

    /// `uregs[index]`: R0 = the current thread's saved user register `index` (DTrace's `R_*`
    /// numbering, mapped to a `struct pt_regs` word by `probe_sema::consts::uregs_word`; the
    /// mapping is emitted as compares so a computed index works too). The registers are the ones
    /// the kernel saved when the thread entered it (`bpf_task_pt_regs` of the current task): at a
    /// system call, the caller's; at a user probe, the probed instruction's. An index naming no
    /// saved register faults with "illegal operation" (DTrace's `DTRACEFLT_ILLOP`).
    fn uregs(&mut self, index: &TExpr, span: Span) -> Res<()> {
        let idx = self.slot(span)?;
        let word = self.slot(span)?;
        self.int(index)?;
        self.asm.stx(Size::DW, R10, idx, R0);
        let have = self.asm.label();
        self.asm.jmp_imm(Cond::Le, R0, 20, have);
        for k in 21..=41 {
            if let Some(w) = probe_sema::consts::uregs_word(k) {
                let next = self.asm.label();
                self.asm.jmp_imm(Cond::Ne, R0, k as i32, next);
                self.asm.mov_imm(R0, w as i64);
                self.asm.ja(have);
                self.asm.bind(next);
            }
        }
        self.fault(Fault::IllOp, Some(idx), span)?;
        self.asm.bind(have);
        self.asm.stx(Size::DW, R10, word, R0);
        let spill = self.slot(span)?;
        let val = self.slot(span)?;
        let a = &mut self.asm;
        a.call(helper::GET_CURRENT_TASK_BTF);
        a.mov(R1, R0);
        a.call(helper::TASK_PT_REGS);
        // The BTF pointer as a plain integer (it takes no computed offset): spilled and read back.
        a.stx(Size::DW, R10, spill, R0);
        a.mov(R1, R10);
        a.alu_imm(Alu::Add, R1, val as i32);
        a.mov_imm(R2, 8);
        a.mov(R3, R10);
        a.alu_imm(Alu::Add, R3, spill as i32);
        a.call(helper::PROBE_READ_KERNEL);
        a.ldx(Size::DW, R3, R10, val);
        a.ldx(Size::DW, R1, R10, word);
        a.alu_imm(Alu::Lsh, R1, 3);
        a.alu(Alu::Add, R3, R1);
        a.stx(Size::DW, R10, spill, R3);
        a.st_imm(Size::DW, R10, val, 0);
        a.mov(R1, R10);
        a.alu_imm(Alu::Add, R1, val as i32);
        a.mov_imm(R2, 8);
        self.call_or_fault(helper::PROBE_READ_KERNEL, spill, span)?;
        self.asm.ldx(Size::DW, R0, R10, val);
        Ok(())
    }

    /// R0 = *(ty *)R0 from kernel memory; a fault reports `invalid address`. With `check`, an
    /// address in scratch memory is checked first ([`Self::scratch_load_check`]); without, R0
    /// is a D variable's own storage (a map-value pointer, which takes no such arithmetic).
    fn deref(&mut self, ty: &Type, check: bool, span: Span) -> Res<()> {
        let size = ty.as_int().map(|(b, _)| b as u32).unwrap_or(8);
        let addr = self.slot(span)?;
        let val = self.slot(span)?;
        self.asm.stx(Size::DW, R10, addr, R0);
        if check {
            self.scratch_load_check(addr, size, span)?;
        }
        let a = &mut self.asm;
        a.st_imm(Size::DW, R10, val, 0);
        a.mov(R1, R10);
        a.alu_imm(Alu::Add, R1, val as i32);
        a.mov_imm(R2, size as i64);
        a.ldx(Size::DW, R3, R10, addr);
        self.call_or_fault(helper::PROBE_READ_KERNEL, addr, span)?;
        self.asm.ldx(Size::DW, R0, R10, val);
        self.normalize(R0, ty);
        Ok(())
    }

    /// R0 = (r cond imm) ? 1 : 0.
    fn set_cond(&mut self, c: Cond, r: Reg, imm: i32) {
        self.set_bool(|a, t| a.jmp_imm(c, r, imm, t));
    }

    /// R0 = 1 when the jump `jump` emits (to the label it is given) is taken, else 0.
    fn set_bool(&mut self, jump: impl FnOnce(&mut Asm, Label)) {
        let a = &mut self.asm;
        let t = a.label();
        let done = a.label();
        jump(a, t);
        a.mov_imm(R0, 0);
        a.ja(done);
        a.bind(t);
        a.mov_imm(R0, 1);
        a.bind(done);
    }

    fn binary(&mut self, op: BinaryOp, l: &TExpr, r: &TExpr, ty: &Type, span: Span) -> Res<()> {
        match op {
            BinaryOp::LogAnd | BinaryOp::LogOr => {
                let a_done = self.asm.label();
                let done = self.asm.label();
                self.int(l)?;
                if op == BinaryOp::LogAnd {
                    self.asm.jmp_imm(Cond::Eq, R0, 0, a_done);
                } else {
                    self.asm.jmp_imm(Cond::Ne, R0, 0, a_done);
                }
                self.int(r)?;
                self.set_cond(Cond::Ne, R0, 0);
                self.asm.ja(done);
                self.asm.bind(a_done);
                self.asm
                    .mov_imm(R0, if op == BinaryOp::LogAnd { 0 } else { 1 });
                self.asm.bind(done);
                return Ok(());
            }
            BinaryOp::LogXor => {
                let s = self.slot(span)?;
                self.int(l)?;
                self.set_cond(Cond::Ne, R0, 0);
                self.asm.stx(Size::DW, R10, s, R0);
                self.int(r)?;
                self.set_cond(Cond::Ne, R0, 0);
                self.asm.ldx(Size::DW, R1, R10, s);
                self.asm.alu(Alu::Xor, R0, R1);
                return Ok(());
            }
            _ => {}
        }
        let s = self.slot(span)?;
        self.int(l)?;
        self.asm.stx(Size::DW, R10, s, R0);
        self.int(r)?;
        self.asm.mov(R1, R0);
        self.asm.ldx(Size::DW, R0, R10, s);
        // Signedness of the operation: comparisons use the (common) operand type.
        let opnd_signed = l.ty.as_int().is_some_and(|(_, s)| s);
        let res_signed = ty.as_int().is_some_and(|(_, s)| s);
        if op.is_comparison() {
            let c = match (op, opnd_signed) {
                (BinaryOp::Eq, _) => Cond::Eq,
                (BinaryOp::Ne, _) => Cond::Ne,
                (BinaryOp::Lt, true) => Cond::SLt,
                (BinaryOp::Lt, false) => Cond::Lt,
                (BinaryOp::Le, true) => Cond::SLe,
                (BinaryOp::Le, false) => Cond::Le,
                (BinaryOp::Gt, true) => Cond::SGt,
                (BinaryOp::Gt, false) => Cond::Gt,
                (BinaryOp::Ge, true) => Cond::SGe,
                (_, _) => Cond::Ge,
            };
            self.set_bool(|a, t| a.jmp(c, R0, R1, t));
            return Ok(());
        }
        let alu = match op {
            BinaryOp::Add => Alu::Add,
            BinaryOp::Sub => Alu::Sub,
            BinaryOp::Mul => Alu::Mul,
            BinaryOp::Div => {
                if res_signed {
                    Alu::SDiv
                } else {
                    Alu::Div
                }
            }
            BinaryOp::Mod => {
                if res_signed {
                    Alu::SMod
                } else {
                    Alu::Mod
                }
            }
            BinaryOp::Shl => Alu::Lsh,
            BinaryOp::Shr => {
                if res_signed {
                    Alu::Arsh
                } else {
                    Alu::Rsh
                }
            }
            BinaryOp::BitAnd => Alu::And,
            BinaryOp::BitOr => Alu::Or,
            BinaryOp::BitXor => Alu::Xor,
            _ => return self.err(span, format!("internal: operator {}", op.as_str())),
        };
        if matches!(op, BinaryOp::Div | BinaryOp::Mod) {
            let ok = self.asm.label();
            self.asm.jmp_imm(Cond::Ne, R1, 0, ok);
            self.fault(Fault::DivZero, None, span)?;
            self.asm.bind(ok);
        }
        // 64-bit arithmetic, not cut to the operands' C width: DTrace computes in 64-bit
        // registers and narrows a value only where it is stored, recorded or cast (Oracle's
        // dt_cg_arithmetic_op: `(i + 3 * i) * i` of an int `i` keeps its high bits until then).
        self.asm.alu(alu, R0, R1);
        Ok(())
    }

    fn call_int(&mut self, subr: Subr, args: &[TExpr], e: &TExpr) -> Res<()> {
        match subr {
            Subr::Strlen => {
                let off = self.scratch(self.strsize(), e.span)?;
                self.string(&args[0], off)?;
                self.strlen_at(off, e.span)?;
            }
            Subr::Strtoll => {
                let base = match args.get(1).map(|b| &b.kind) {
                    Some(TExprKind::Int(b)) => *b as u32,
                    _ => return self.err(e.span, "internal: strtoll() base"),
                };
                self.strtoll(&args[0], base, e.span)?;
            }
            Subr::Rand => {
                // DTrace's rand() is never negative (illumos dtrace.c DIF_SUBR_RAND: a value
                // modulo 1771875); the `int` of 32 random bits would be negative half the time.
                // Clearing the sign bit keeps 31 uniform bits: 0 ..= 2^31 - 1.
                self.asm.call(helper::GET_PRANDOM_U32);
                self.asm.alu_imm(Alu::And, R0, 0x7fff_ffff);
                self.normalize(R0, &e.ty);
            }
            Subr::Htons | Subr::Htonl | Subr::Htonll => {
                self.int(&args[0])?;
                let bits = match subr {
                    Subr::Htons => 16,
                    Subr::Htonl => 32,
                    _ => 64,
                };
                self.asm.to_be(R0, bits);
                self.normalize(R0, &e.ty);
            }
            Subr::Copyin => self.copyin(args, e.span)?,
            Subr::Uregs => self.uregs(&args[0], e.span)?,
            Subr::Alloca => self.alloca(&args[0], e.span)?,
            Subr::Bcopy => self.bcopy(args, e.span, helper::PROBE_READ_KERNEL)?,
            Subr::Copyinto => self.bcopy(args, e.span, helper::PROBE_READ_USER)?,
            Subr::Speculation => self.speculation(e.span)?,
            Subr::StrChar => self.str_char(args, e.span)?,
            Subr::Index | Subr::Rindex if args.len() >= 2 => {
                let kind = if subr == Subr::Index {
                    Search::Index
                } else {
                    Search::Rindex
                };
                let (_, w) = self.search(kind, args, e.span)?;
                self.asm.ldx(Size::DW, R0, R7, w as i16);
            }
            other => {
                return self.err(
                    e.span,
                    format!("subroutine {other:?} is not supported by sightline yet")
                        .to_lowercase(),
                );
            }
        }
        Ok(())
    }

    /// `s[i]`: R0 = the character at index `i` of the string `args[0]` (sign-extended as a
    /// `char`); an index at or past `strsize` faults with "invalid address" (the fault's value
    /// is the index).
    fn str_char(&mut self, args: &[TExpr], span: Span) -> Res<()> {
        let ss = self.strsize();
        let off = self.scratch(ss, span)?;
        self.string(&args[0], off)?;
        let slot = self.slot(span)?;
        self.int(&args[1])?;
        self.asm.stx(Size::DW, R10, slot, R0);
        let ok = self.asm.label();
        self.asm.jmp_imm(Cond::Lt, R0, ss as i32, ok);
        self.fault(Fault::BadAddr, Some(slot), span)?;
        self.asm.bind(ok);
        let a = &mut self.asm;
        // The index is below strsize; the mask and the compare bound it for the verifier.
        a.ldx(Size::DW, R0, R10, slot);
        a.alu_imm(Alu::And, R0, 0x1fff);
        let fits = a.label();
        a.jmp_imm(Cond::Lt, R0, ss as i32, fits);
        a.mov_imm(R0, 0);
        a.bind(fits);
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, off as i32);
        a.alu(Alu::Add, R1, R0);
        a.ldx(Size::B, R0, R1, 0);
        self.normalize(R0, &Type::CHAR);
        Ok(())
    }

    /// R0 = strcmp-like sign (-1, 0, 1) of the NUL-padded strings at scratch `a` and `b`.
    fn strcmp(&mut self, a_off: u32, b_off: u32, len: u32) {
        let a = &mut self.asm;
        let differ = a.label();
        let done = a.label();
        let mut i = 0;
        while i < len {
            a.ldx(Size::DW, R1, R7, (a_off + i) as i16);
            a.ldx(Size::DW, R2, R7, (b_off + i) as i16);
            a.jmp(Cond::Ne, R1, R2, differ);
            i += 8;
        }
        a.mov_imm(R0, 0);
        a.ja(done);
        a.bind(differ);
        // Byte order: big-endian words compare like the bytes in memory.
        a.to_be(R1, 64);
        a.to_be(R2, 64);
        let lt = a.label();
        a.jmp(Cond::Lt, R1, R2, lt);
        a.mov_imm(R0, 1);
        a.ja(done);
        a.bind(lt);
        a.mov_imm(R0, -1);
        a.bind(done);
    }
}

/// True when the address `e` is a D variable's own storage (a [`TExprKind::VarAddr`] plus
/// offsets, through casts): a member of a struct-typed variable.
fn var_address(e: &TExpr) -> bool {
    match &e.kind {
        TExprKind::VarAddr(_) => true,
        TExprKind::Cast(x) => var_address(x),
        TExprKind::Binary(BinaryOp::Add, a, b) => var_address(a) || var_address(b),
        _ => false,
    }
}
