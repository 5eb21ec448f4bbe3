//! Aggregations: keys, and the update of each aggregating function's value words (the layout of
//! probe-format's `agg` module) in the per-CPU maps.

use super::*;

/// The lower bounds of llquantize's buckets 1.. (ascending): bucket `i + 1` holds values
/// `>= bounds[i]` (and below the next bound); bucket 0 holds values below `factor^low`. Taken
/// from probe-format's labels so the BPF side and the printer agree exactly
/// ([`probe_format::agg::llquantize_bucket`]).
pub fn llquantize_boundaries(factor: u16, low: u16, high: u16, nsteps: u16) -> Vec<i64> {
    let v = probe_format::agg::llquantize_bucket_values(factor, low, high, nsteps);
    v[1..].to_vec()
}

impl ProgGen<'_, '_> {
    pub(super) fn aggregate(
        &mut self,
        id: usize,
        keys: &[TExpr],
        value: Option<&TExpr>,
        incr: Option<&TExpr>,
        span: Span,
    ) -> Res<()> {
        let desc = self.b.layout.aggs[id].clone();
        // Value and weight first, into stack slots.
        let vslot = self.slot(span)?;
        match value {
            Some(v) => self.int(v)?,
            None => self.asm.mov_imm(R0, 0),
        }
        self.asm.stx(Size::DW, R10, vslot, R0);
        let islot = self.slot(span)?;
        match incr {
            Some(v) => self.int(v)?,
            None => self.asm.mov_imm(R0, 1),
        }
        self.asm.stx(Size::DW, R10, islot, R0);
        let map = desc.map;
        let done = self.asm.label();
        if desc.keys.is_empty() {
            self.asm.st_imm(Size::W, R10, SLOT_KEY, desc.number as i32);
            let a = &mut self.asm;
            lookup_slot_key(a, map);
            a.jmp_imm(Cond::Eq, R0, 0, done);
            a.mov(R9, R0);
        } else {
            // The key: the aggregation's number in its shared map, then its keys.
            let kinds: Vec<FieldKind> = desc.keys.iter().map(|f| f.kind.clone()).collect();
            let koff = self.prefixed_key(desc.number, &kinds, keys, span)?;
            let a = &mut self.asm;
            a.ld_map(R1, map);
            a.mov(R2, R7);
            a.alu_imm(Alu::Add, R2, koff as i32);
            a.call(helper::MAP_LOOKUP_ELEM);
            let found = a.label();
            a.jmp_imm(Cond::Ne, R0, 0, found);
            // Create the entry from the zero region (BPF_NOEXIST: another CPU may have raced us).
            a.ld_map(R1, map);
            a.mov(R2, R7);
            a.alu_imm(Alu::Add, R2, koff as i32);
            a.mov(R3, R7);
            a.alu_imm(Alu::Add, R3, self.zero_off as i32);
            a.mov_imm(R4, 1);
            a.call(helper::MAP_UPDATE_ELEM);
            a.ld_map(R1, map);
            a.mov(R2, R7);
            a.alu_imm(Alu::Add, R2, koff as i32);
            a.call(helper::MAP_LOOKUP_ELEM);
            a.jmp_imm(Cond::Ne, R0, 0, found);
            self.stat_inc(Stat::AggDrops);
            self.asm.ja(done);
            self.asm.bind(found);
            self.asm.mov(R9, R0);
        }
        let signed = self.b.prog.aggregations[id]
            .arg_ty
            .as_int()
            .is_none_or(|(_, s)| s);
        let a = &mut self.asm;
        a.ldx(Size::DW, R2, R10, vslot);
        // Words 0 and 1 of avg() and stddev(): count += 1, sum += the value in R2.
        let count_and_sum = |a: &mut Asm| {
            a.ldx(Size::DW, R1, R9, 0);
            a.alu_imm(Alu::Add, R1, 1);
            a.stx(Size::DW, R9, 0, R1);
            a.ldx(Size::DW, R1, R9, 8);
            a.alu(Alu::Add, R1, R2);
            a.stx(Size::DW, R9, 8, R1);
        };
        match &desc.func {
            AggFunc::Count => {
                a.ldx(Size::DW, R1, R9, 0);
                a.alu_imm(Alu::Add, R1, 1);
                a.stx(Size::DW, R9, 0, R1);
            }
            AggFunc::Sum => {
                a.ldx(Size::DW, R1, R9, 0);
                a.alu(Alu::Add, R1, R2);
                a.stx(Size::DW, R9, 0, R1);
            }
            AggFunc::Avg => count_and_sum(a),
            AggFunc::Min | AggFunc::Max => {
                let set = a.label();
                let skip = a.label();
                a.ldx(Size::DW, R1, R9, 0);
                a.jmp_imm(Cond::Eq, R1, 0, set);
                a.ldx(Size::DW, R3, R9, 8);
                let better = match (&desc.func, signed) {
                    (AggFunc::Min, true) => Cond::SLt,
                    (AggFunc::Min, false) => Cond::Lt,
                    (_, true) => Cond::SGt,
                    (_, false) => Cond::Gt,
                };
                a.jmp(better, R2, R3, set);
                a.ja(skip);
                a.bind(set);
                a.stx(Size::DW, R9, 8, R2);
                a.bind(skip);
                a.alu_imm(Alu::Add, R1, 1);
                a.stx(Size::DW, R9, 0, R1);
            }
            AggFunc::Stddev => {
                // count, sum, and the 128-bit sum of squares (lo, hi).
                count_and_sum(a);
                // u = |v|; a = u >> 32; b = u & 0xffffffff.
                let pos = a.label();
                a.jmp_imm(Cond::SGe, R2, 0, pos);
                a.alu_imm(Alu::Neg, R2, 0);
                a.bind(pos);
                a.mov(R3, R2);
                a.alu_imm(Alu::Rsh, R3, 32); // a
                a.mov(R4, R2);
                a.zext(R4, 32); // b
                a.mov(R5, R4);
                a.alu(Alu::Mul, R5, R4); // lo = b*b
                a.mov(R0, R3);
                a.alu(Alu::Mul, R0, R4); // mid = a*b
                a.alu(Alu::Mul, R3, R3); // hi = a*a
                a.mov(R4, R0);
                a.alu_imm(Alu::Rsh, R4, 31);
                a.alu(Alu::Add, R3, R4); // hi += mid >> 31
                a.alu_imm(Alu::Lsh, R0, 33);
                a.alu(Alu::Add, R0, R5); // lo' = lo + (mid << 33)
                let nc1 = a.label();
                a.jmp(Cond::Ge, R0, R5, nc1);
                a.alu_imm(Alu::Add, R3, 1);
                a.bind(nc1);
                // (lo', hi) += into slots 2, 3.
                a.ldx(Size::DW, R1, R9, 16);
                a.alu(Alu::Add, R1, R0);
                let nc2 = a.label();
                a.jmp(Cond::Ge, R1, R0, nc2);
                a.alu_imm(Alu::Add, R3, 1);
                a.bind(nc2);
                a.stx(Size::DW, R9, 16, R1);
                a.ldx(Size::DW, R1, R9, 24);
                a.alu(Alu::Add, R1, R3);
                a.stx(Size::DW, R9, 24, R1);
            }
            AggFunc::Quantize => {
                self.quantize_bucket(R2);
                self.bump_bucket(QUANTIZE_BUCKETS, islot);
            }
            AggFunc::Lquantize { base, step, .. } => {
                let levels = desc.func.lquantize_levels() as u32;
                let under = a.label();
                let over = a.label();
                let have = a.label();
                a.mov_imm(R1, *base);
                a.jmp(Cond::SLt, R2, R1, under);
                a.mov_imm(R1, base + levels as i64 * step);
                a.jmp(Cond::SGe, R2, R1, over);
                a.mov_imm(R1, *base);
                a.alu(Alu::Sub, R2, R1);
                a.mov_imm(R1, *step);
                a.alu(Alu::Div, R2, R1);
                a.alu_imm(Alu::Add, R2, 1);
                a.mov(R0, R2);
                a.ja(have);
                a.bind(under);
                a.mov_imm(R0, 0);
                a.ja(have);
                a.bind(over);
                a.mov_imm(R0, levels as i64 + 1);
                a.bind(have);
                self.bump_bucket(levels + 2, islot);
            }
            AggFunc::Llquantize {
                factor,
                low,
                high,
                nsteps,
            } => {
                let bounds = llquantize_boundaries(*factor, *low, *high, *nsteps);
                // Bucket = number of bounds <= v (bounds ascend), by a descending compare chain.
                let have = a.label();
                for (i, bnd) in bounds.iter().enumerate().rev() {
                    let next = a.label();
                    a.mov_imm(R1, *bnd);
                    a.jmp(Cond::SLt, R2, R1, next);
                    a.mov_imm(R0, i as i64 + 1);
                    a.ja(have);
                    a.bind(next);
                }
                a.mov_imm(R0, 0);
                a.bind(have);
                self.bump_bucket(bounds.len() as u32 + 1, islot);
            }
        }
        self.asm.bind(done);
        Ok(())
    }

    /// R0 = quantize bucket of the signed value in `v` (clobbers R1..R4): 63 for 0,
    /// 64 + floor(log2 v) for v > 0, 62 - floor(log2 -v) for v < 0 (at least 0).
    fn quantize_bucket(&mut self, v: Reg) {
        let a = &mut self.asm;
        let neg = a.label();
        let have = a.label();
        let log = a.label();
        a.mov(R3, v);
        a.mov_imm(R0, QUANTIZE_ZERO);
        a.jmp_imm(Cond::Eq, R3, 0, have);
        a.mov_imm(R4, 1); // sign: 1 positive, 0 negative
        a.jmp_imm(Cond::SGt, R3, 0, log);
        a.alu_imm(Alu::Neg, R3, 0);
        a.mov_imm(R4, 0);
        a.bind(log);
        // R1 = floor(log2(R3)) for R3 != 0 (unsigned).
        a.mov_imm(R1, 0);
        for sh in [32, 16, 8, 4, 2, 1] {
            let skip = a.label();
            a.mov(R2, R3);
            a.alu_imm(Alu::Rsh, R2, sh);
            a.jmp_imm(Cond::Eq, R2, 0, skip);
            a.mov(R3, R2);
            a.alu_imm(Alu::Add, R1, sh);
            a.bind(skip);
        }
        a.jmp_imm(Cond::Eq, R4, 0, neg);
        a.mov_imm(R0, QUANTIZE_ZERO + 1);
        a.alu(Alu::Add, R0, R1);
        a.ja(have);
        a.bind(neg);
        a.mov_imm(R0, QUANTIZE_ZERO - 1);
        a.alu(Alu::Sub, R0, R1);
        a.jmp_imm(Cond::SGe, R0, 0, have);
        a.mov_imm(R0, 0);
        a.bind(have);
    }

    /// `value[R0] += weight` with R0 clamped to `n - 1` (so the verifier sees the bound).
    fn bump_bucket(&mut self, n: u32, islot: i16) {
        let a = &mut self.asm;
        let ok = a.label();
        a.jmp_imm(Cond::Le, R0, (n - 1) as i32, ok);
        a.mov_imm(R0, (n - 1) as i64);
        a.bind(ok);
        a.alu_imm(Alu::Lsh, R0, 3);
        a.mov(R1, R9);
        a.alu(Alu::Add, R1, R0);
        a.ldx(Size::DW, R2, R1, 0);
        a.ldx(Size::DW, R3, R10, islot);
        a.alu(Alu::Add, R2, R3);
        a.stx(Size::DW, R1, 0, R2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The BPF side computes the llquantize bucket as "how many lower bounds are <= v"; that
    /// must equal probe-format's reference function for every value.
    #[test]
    fn llquantize_compare_chain_matches_probe_format() {
        for (factor, low, high, nsteps) in [
            (10u16, 0u16, 3u16, 10u16),
            (2, 0, 10, 2),
            (10, 1, 4, 20),
            (4, 2, 6, 8),
        ] {
            let bounds = llquantize_boundaries(factor, low, high, nsteps);
            assert_eq!(
                bounds.len() + 1,
                probe_format::agg::llquantize_nbuckets(factor, low, high, nsteps),
                "bucket count for {factor},{low},{high},{nsteps}"
            );
            let mut v: i64 = -5;
            while v < 200_000 {
                let ours = bounds.iter().filter(|&&b| v >= b).count();
                let theirs = probe_format::agg::llquantize_bucket(v, factor, low, high, nsteps);
                assert_eq!(ours, theirs, "v={v} for {factor},{low},{high},{nsteps}");
                v = if v < 1000 { v + 1 } else { v + 37 };
            }
        }
    }
}
