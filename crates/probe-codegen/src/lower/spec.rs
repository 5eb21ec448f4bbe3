//! Speculations (DTrace guide, "Speculative Tracing"): `speculation()`, `speculate(id)`,
//! `commit(id)`, `discard(id)`.
//!
//! The kernel side only hands out and retires speculation ids; the speculative data itself
//! travels in ordinary ring-buffer records and waits in the consumer until its commit or discard
//! arrives (probe-runtime's `spec` module; `docs/probe-internals.md`). Each id has one `u64` state
//! word in the `sl_spec` array map: `generation << 8 | state`, state 0 free, 1 active.
//!
//! - `speculation()` claims the first free id with a compare-and-exchange `g<<8|0 → g<<8|1` and
//!   returns it; with none free it returns 0 and counts a failed speculation.
//! - `speculate(id)` records `id` and the active state word (the *token*) in the clause's record;
//!   an id of 0 or a speculation that is not active records token 0 and the consumer drops the
//!   record ("silently discarded", as the guide says).
//! - `commit(id)` / `discard(id)` free the id at once (`g<<8|1 → (g+1)<<8|0`) and record the
//!   token they retired; the consumer then prints or drops exactly the records carrying that
//!   token. The generation makes a record that loses a race with the commit (speculated just
//!   before, submitted just after) recognizably stale, and lets the id be reused immediately, so
//!   DTrace's "available buffer(s) still busy" failure cannot happen here.
//!
//! An id above `nspec` (or negative) is DTrace's illegal-operation fault.

use super::*;

/// Most speculation buffers a program may ask for (`nspec`): `speculation()` tries the ids in
/// turn, in straight-line code.
pub const NSPEC_MAX: u64 = 256;

/// Which speculation action.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum SpecAction {
    Speculate,
    Commit,
    Discard,
}

impl ProgGen<'_, '_> {
    /// The `sl_spec` map (created on first use, shared by all programs) and `nspec`.
    fn spec_map(&mut self, span: Span) -> Res<(usize, u32)> {
        let nspec = self.b.prog.options.nspec.unwrap_or(1);
        if nspec == 0 || nspec > NSPEC_MAX {
            return self.err(
                span,
                format!("nspec must be from 1 to {NSPEC_MAX} (it is {nspec})"),
            );
        }
        let m = match self.b.spec_map {
            Some(m) => m,
            None => {
                let m = self.b.add_map(MapSpec {
                    name: "sl_spec".into(),
                    kind: MapKind::Array,
                    key_size: 4,
                    value_size: 8,
                    max_entries: nspec as u32 + 1,
                    no_prealloc: false,
                    role: MapRole::Speculations,
                });
                self.b.spec_map = Some(m);
                m
            }
        };
        Ok((m, nspec as u32))
    }

    /// R0 = `speculation()`: a free speculation id made active, or 0 (counted as a failed
    /// speculation) when all `nspec` are in use.
    pub(super) fn speculation(&mut self, span: Span) -> Res<()> {
        let (map, nspec) = self.spec_map(span)?;
        let done = self.asm.label();
        for id in 1..=nspec {
            let a = &mut self.asm;
            let next = a.label();
            a.st_imm(Size::W, R10, SLOT_KEY, id as i32);
            lookup_slot_key(a, map);
            a.jmp_imm(Cond::Eq, R0, 0, next);
            a.mov(R9, R0);
            a.ldx(Size::DW, R1, R9, 0);
            a.mov(R2, R1);
            a.alu_imm(Alu::And, R2, 0xff);
            a.jmp_imm(Cond::Ne, R2, 0, next);
            a.mov(R2, R1);
            a.alu_imm(Alu::Or, R2, SPEC_ACTIVE as i32);
            a.mov(R0, R1);
            a.atomic_cmpxchg64(R9, 0, R2);
            a.jmp(Cond::Ne, R0, R1, next);
            a.mov_imm(R0, id as i64);
            a.ja(done);
            a.bind(next);
        }
        self.stat_inc(Stat::SpecUnavail);
        self.asm.mov_imm(R0, 0);
        self.asm.bind(done);
        Ok(())
    }

    /// `speculate(id)`, `commit(id)`, `discard(id)`: writes the id to the record field at
    /// `offs[0]` and the token (see the module documentation) to `offs[1]`. A `speculate()`
    /// whose token is 0 (id 0, an id above `nspec`, or a speculation not active) ends the
    /// clause there (Oracle's dt_cg_act_speculate: no speculation buffer, exit); `commit()` and
    /// `discard()` of an id above `nspec` fault with "illegal operation".
    pub(super) fn spec_action(
        &mut self,
        which: SpecAction,
        id: &TExpr,
        offs: &[u32],
        span: Span,
    ) -> Res<()> {
        let (map, nspec) = self.spec_map(span)?;
        let (id_off, tok_off) = (offs[0] as i16, offs[1] as i16);
        let idslot = self.slot(span)?;
        self.int(id)?;
        let a = &mut self.asm;
        a.stx(Size::DW, R7, id_off, R0);
        a.stx(Size::DW, R10, idslot, R0);
        a.st_imm(Size::DW, R7, tok_off, 0);
        let (out, valid) = (a.label(), a.label());
        a.jmp_imm(Cond::Eq, R0, 0, out);
        a.jmp_imm(Cond::Le, R0, nspec as i32, valid);
        if which == SpecAction::Speculate {
            a.ja(out);
        } else {
            self.fault(Fault::IllOp, Some(idslot), span)?;
        }
        let a = &mut self.asm;
        a.bind(valid);
        a.stx(Size::W, R10, SLOT_KEY, R0);
        lookup_slot_key(a, map);
        a.jmp_imm(Cond::Eq, R0, 0, out);
        a.mov(R9, R0);
        a.ldx(Size::DW, R1, R9, 0);
        a.mov(R2, R1);
        a.alu_imm(Alu::And, R2, 0xff);
        a.jmp_imm(Cond::Ne, R2, SPEC_ACTIVE as i32, out);
        if which != SpecAction::Speculate {
            // Retire the generation: g<<8|1 -> (g+1)<<8|0, unless another CPU got there first.
            a.mov(R2, R1);
            a.alu_imm(Alu::Rsh, R2, 8);
            a.alu_imm(Alu::Add, R2, 1);
            a.alu_imm(Alu::Lsh, R2, 8);
            a.mov(R0, R1);
            a.atomic_cmpxchg64(R9, 0, R2);
            a.jmp(Cond::Ne, R0, R1, out);
        }
        a.stx(Size::DW, R7, tok_off, R1);
        a.bind(out);
        if which == SpecAction::Speculate {
            // As DTrace, a speculate() on id 0 or on a speculation that is not active skips the
            // rest of the clause: nothing of it is recorded and its assignments do not happen.
            if let Some(end) = self.clause_end {
                let a = &mut self.asm;
                a.ldx(Size::DW, R1, R7, tok_off);
                a.jmp_imm(Cond::Eq, R1, 0, end);
            }
        }
        Ok(())
    }
}
