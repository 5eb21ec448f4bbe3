//! Variables: pointers to their storage (globals, associative arrays, thread-locals, clause
//! locals), reads, writes, deletes and assignments.

use super::*;

impl ProgGen<'_, '_> {
    /// Leaves a pointer to the variable's storage in R0 (or 0 if a dynamic variable is absent).
    /// With `create`, absent dynamic variables are created zeroed (a full map counts a drop and
    /// yields 0).
    pub(super) fn var_ptr(&mut self, va: &VarAccess, create: bool, span: Span) -> Res<()> {
        let home = self.b.homes[va.var.0 as usize].clone();
        match home {
            VarHome::Global { offset } => {
                self.asm.mov(R0, R8);
                self.asm.alu_imm(Alu::Add, R0, offset as i32);
            }
            VarHome::ClauseLocal => {
                let Some(&off) = self.clause_locals.get(&va.var.0) else {
                    return self.err(span, "clause-local variable used outside its clause");
                };
                self.asm.mov(R0, R7);
                self.asm.alu_imm(Alu::Add, R0, off as i32);
            }
            VarHome::ThreadLocal { map, id } => {
                let kslot = self.thread_key(id, span)?;
                self.map_ptr(map, R10, kslot as i32, create)?;
            }
            VarHome::Map {
                map,
                key_fields,
                id,
            } => {
                let koff = self.prefixed_key(id, &key_fields, &va.keys, span)?;
                self.map_ptr(map, R7, koff as i32, create)?;
            }
        }
        Ok(())
    }

    /// Builds a thread-local's 16-byte key on the stack, (thread id, variable `id`), and returns
    /// its stack offset.
    fn thread_key(&mut self, id: u32, span: Span) -> Res<i16> {
        let hi = self.slot(span)?;
        let lo = self.slot(span)?;
        debug_assert_eq!(lo + 8, hi, "slots are allocated downwards, 8 bytes apart");
        self.asm.call(helper::GET_CURRENT_PID_TGID);
        self.asm.zext(R0, 32);
        self.asm.stx(Size::DW, R10, lo, R0);
        self.asm.st_imm(Size::DW, R10, hi, id as i32);
        Ok(lo)
    }

    /// Builds the key of an entry in a shared map in scratch memory: the number `id` of its
    /// variable or aggregation (8 bytes), then the tuple; returns its scratch offset.
    pub(super) fn prefixed_key(
        &mut self,
        id: u32,
        kinds: &[FieldKind],
        keys: &[TExpr],
        span: Span,
    ) -> Res<u32> {
        let size: u32 = kinds.iter().map(FieldKind::size).sum();
        let off = self.scratch(8 + size, span)?;
        let mut o = off + 8;
        for (k, e) in kinds.iter().zip(keys) {
            self.store_value(e, k, o)?;
            o += k.size();
        }
        self.asm.st_imm(Size::DW, R7, off as i16, id as i32);
        Ok(off)
    }

    fn map_ptr(&mut self, map: usize, kbase: Reg, koff: i32, create: bool) -> Res<()> {
        let a = &mut self.asm;
        a.ld_map(R1, map);
        a.mov(R2, kbase);
        a.alu_imm(Alu::Add, R2, koff);
        a.call(helper::MAP_LOOKUP_ELEM);
        if create {
            let done = a.label();
            a.jmp_imm(Cond::Ne, R0, 0, done);
            a.ld_map(R1, map);
            a.mov(R2, kbase);
            a.alu_imm(Alu::Add, R2, koff);
            a.mov(R3, R7);
            a.alu_imm(Alu::Add, R3, self.zero_off as i32);
            a.mov_imm(R4, 0);
            a.call(helper::MAP_UPDATE_ELEM);
            let ok = a.label();
            a.jmp_imm(Cond::Eq, R0, 0, ok);
            self.stat_inc(Stat::DynvarDrops);
            self.asm.mov_imm(R0, 0);
            self.asm.ja(done);
            self.asm.bind(ok);
            let a = &mut self.asm;
            a.ld_map(R1, map);
            a.mov(R2, kbase);
            a.alu_imm(Alu::Add, R2, koff);
            a.call(helper::MAP_LOOKUP_ELEM);
            a.bind(done);
        }
        Ok(())
    }

    pub(super) fn var_read_int(&mut self, va: &VarAccess, span: Span) -> Res<()> {
        self.var_ptr(va, false, span)?;
        let z = self.asm.label();
        self.asm.jmp_imm(Cond::Eq, R0, 0, z);
        self.asm.ldx(Size::DW, R0, R0, 0);
        self.asm.bind(z);
        Ok(())
    }

    /// Deletes a dynamic variable (assignment of 0).
    fn var_delete(&mut self, va: &VarAccess, span: Span) -> Res<()> {
        let home = self.b.homes[va.var.0 as usize].clone();
        match home {
            VarHome::ThreadLocal { map, id } => {
                let kslot = self.thread_key(id, span)?;
                let a = &mut self.asm;
                a.ld_map(R1, map);
                a.mov(R2, R10);
                a.alu_imm(Alu::Add, R2, kslot as i32);
                a.call(helper::MAP_DELETE_ELEM);
            }
            VarHome::Map {
                map,
                key_fields,
                id,
            } => {
                let koff = self.prefixed_key(id, &key_fields, &va.keys, span)?;
                let a = &mut self.asm;
                a.ld_map(R1, map);
                a.mov(R2, R7);
                a.alu_imm(Alu::Add, R2, koff as i32);
                a.call(helper::MAP_DELETE_ELEM);
            }
            _ => {}
        }
        Ok(())
    }

    /// Stores the integer in stack slot `vslot` into the variable (dynamic variables: 0 deletes).
    pub(super) fn var_write_int(&mut self, va: &VarAccess, vslot: i16, span: Span) -> Res<()> {
        let dynamic = self.b.prog.var(va.var).is_dynamic();
        if dynamic {
            let del = self.asm.label();
            let done = self.asm.label();
            self.asm.ldx(Size::DW, R0, R10, vslot);
            self.asm.jmp_imm(Cond::Eq, R0, 0, del);
            self.var_ptr(va, true, span)?;
            self.asm.jmp_imm(Cond::Eq, R0, 0, done);
            self.asm.ldx(Size::DW, R1, R10, vslot);
            self.asm.stx(Size::DW, R0, 0, R1);
            self.asm.ja(done);
            self.asm.bind(del);
            self.var_delete(va, span)?;
            self.asm.bind(done);
        } else {
            self.var_ptr(va, false, span)?;
            self.asm.ldx(Size::DW, R1, R10, vslot);
            self.asm.stx(Size::DW, R0, 0, R1);
        }
        Ok(())
    }

    /// R0 = the address of the variable's storage, or of the zeroed region when a dynamic
    /// variable does not exist (its members read as 0).
    pub(super) fn var_addr(&mut self, va: &VarAccess, span: Span) -> Res<()> {
        self.var_ptr(va, false, span)?;
        let done = self.asm.label();
        self.asm.jmp_imm(Cond::Ne, R0, 0, done);
        self.asm.mov(R0, R7);
        self.asm.alu_imm(Alu::Add, R0, self.zero_off as i32);
        self.asm.bind(done);
        Ok(())
    }

    /// R0 = the address of element `index` of the fixed-size array at byte `base` of the
    /// variable `va` (`len` elements of type `elem`), after checking the subscript: outside the
    /// array it raises the index-out-of-bounds fault and ends the clause. With `create`, a
    /// dynamic variable is created (R0 = 0 when that fails); otherwise an absent one reads from
    /// the zeroed region.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn elem_ptr(
        &mut self,
        va: &VarAccess,
        index: &TExpr,
        len: u32,
        base: u32,
        elem: &Type,
        create: bool,
        span: Span,
    ) -> Res<()> {
        let esize = elem.size(self.strsize());
        if !matches!(esize, 1 | 2 | 4 | 8) {
            return self.err(span, "internal: array element of unsupported size");
        }
        let islot = self.slot(span)?;
        self.int(index)?;
        self.asm.stx(Size::DW, R10, islot, R0);
        let ok = self.asm.label();
        self.asm.jmp_imm(Cond::Lt, R0, len as i32, ok);
        self.fault(Fault::BadIndex, Some(islot), span)?;
        self.asm.bind(ok);
        if create {
            self.var_ptr(va, true, span)?;
        } else {
            self.var_addr(va, span)?;
        }
        let done = self.asm.label();
        self.asm.jmp_imm(Cond::Eq, R0, 0, done);
        self.asm.ldx(Size::DW, R1, R10, islot);
        // Bounded again after the reload, for the verifier.
        self.asm.jmp_imm(Cond::Ge, R1, len as i32, done);
        if esize > 1 {
            self.asm.alu_imm(Alu::Mul, R1, esize as i32);
        }
        if base > 0 {
            self.asm.alu_imm(Alu::Add, R1, base as i32);
        }
        self.asm.alu(Alu::Add, R0, R1);
        self.asm.bind(done);
        Ok(())
    }

    /// `var.member = value`: stores `value` (of integer or pointer type `ty`) at byte `offset`
    /// of the variable (created if dynamic); R0 = the value.
    pub(super) fn store_member(
        &mut self,
        va: &VarAccess,
        offset: u32,
        value: &TExpr,
        ty: &Type,
        span: Span,
    ) -> Res<()> {
        let bytes = ty.size(self.strsize());
        let size = self.b.prog.var(va.var).ty.size(self.strsize());
        let Ok(off) = i16::try_from(offset) else {
            return self.err(span, "member offset too large");
        };
        if !matches!(bytes, 1 | 2 | 4 | 8) || offset + bytes > size {
            return self.err(span, "internal: member store outside its variable");
        }
        let vslot = self.slot(span)?;
        self.int(value)?;
        self.asm.stx(Size::DW, R10, vslot, R0);
        self.var_ptr(va, true, span)?;
        let skip = self.asm.label();
        self.asm.jmp_imm(Cond::Eq, R0, 0, skip);
        self.asm.ldx(Size::DW, R1, R10, vslot);
        self.asm.stx(Size::from_bytes(bytes), R0, off, R1);
        self.asm.bind(skip);
        self.asm.ldx(Size::DW, R0, R10, vslot);
        Ok(())
    }

    /// `var = other` of one struct type: copies its bytes from the address `src` computes.
    pub(super) fn copy_struct(
        &mut self,
        va: &VarAccess,
        src: &TExpr,
        ty: &Type,
        span: Span,
    ) -> Res<()> {
        let size = ty.size(self.strsize());
        let sslot = self.slot(span)?;
        self.int(src)?;
        self.asm.stx(Size::DW, R10, sslot, R0);
        self.var_ptr(va, true, span)?;
        let skip = self.asm.label();
        self.asm.jmp_imm(Cond::Eq, R0, 0, skip);
        self.asm.mov(R1, R0);
        self.asm.mov_imm(R2, size as i64);
        self.asm.ldx(Size::DW, R3, R10, sslot);
        // A variable's bytes never fault; a pointer's may (`v = *(struct s *)p`).
        self.call_or_fault(helper::PROBE_READ_KERNEL, sslot, span)?;
        self.asm.bind(skip);
        self.asm.mov_imm(R0, 0);
        Ok(())
    }

    pub(super) fn assign(&mut self, e: &TExpr) -> Res<()> {
        let TExprKind::Assign(va, value) = &e.kind else {
            unreachable!("assign() on a non-assignment")
        };
        if e.ty.is_string() || matches!(e.ty, Type::Stack { .. }) {
            let k = value_kind(&e.ty, self.strsize());
            let tmp = self.scratch(k.size(), e.span)?;
            self.store_value(value, &k, tmp)?;
            self.var_ptr(va, true, e.span)?;
            let skip = self.asm.label();
            self.asm.jmp_imm(Cond::Eq, R0, 0, skip);
            self.asm.mov(R9, R0);
            self.copy(R9, 0, R7, tmp as i32, k.size());
            self.asm.bind(skip);
            return Ok(());
        }
        let vslot = self.slot(e.span)?;
        self.int(value)?;
        // A value is narrowed to its variable's type where it is stored (arithmetic is 64-bit).
        self.normalize(R0, &e.ty);
        self.asm.stx(Size::DW, R10, vslot, R0);
        self.var_write_int(va, vslot, e.span)?;
        self.asm.ldx(Size::DW, R0, R10, vslot);
        Ok(())
    }
}
