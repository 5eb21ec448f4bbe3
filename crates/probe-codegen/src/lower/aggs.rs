//! Aggregations: keys, and the update of each aggregating function's value words (the layout of
//! probe-format's `agg` module) in the per-CPU maps.

use super::*;

/// The constants of an `llquantize(factor, low, high, nsteps)` bucket computation (the layout
/// of [`probe_format::agg::llquantize_bucket`], Oracle DTrace's): `sf` = nsteps / factor, `per`
/// = nsteps − sf buckets per order of magnitude, `zero` the middle bucket's index.
#[derive(Clone, Copy, Debug)]
pub struct LlqConsts {
    /// The factor.
    pub factor: u64,
    /// Lowest order of magnitude.
    pub low: u32,
    /// Highest order of magnitude.
    pub high: u32,
    /// Steps per order.
    pub steps: u64,
    /// `steps / factor`: the steps of an order that lie in the orders below.
    pub sf: u64,
    /// Buckets per order (`steps − sf`).
    pub per: u64,
    /// Index of the middle bucket (`1 + (high − low + 1) · per`).
    pub zero: u64,
}

impl LlqConsts {
    /// The constants of validated parameters (see `AggFunc::validate`: factor^(high+1) fits in
    /// 64 bits).
    pub fn new(factor: u16, low: u16, high: u16, nsteps: u16) -> LlqConsts {
        let (factor, steps) = (u64::from(factor.max(2)), u64::from(nsteps.max(1)));
        let (low, high) = (u32::from(low), u32::from(high.max(low)));
        let sf = steps / factor;
        let per = steps - sf;
        LlqConsts {
            factor,
            low,
            high,
            steps,
            sf,
            per,
            zero: 1 + u64::from(high - low + 1) * per,
        }
    }

    /// `factor^e` (wrapping past 64 bits, which validated parameters never reach).
    pub fn pow(&self, e: u32) -> u64 {
        (0..e).fold(1u64, |v, _| v.wrapping_mul(self.factor))
    }
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
                // Oracle's dt_cg_agg_llquantize_bin, unrolled over the orders of magnitude
                // (each a compare with a constant): tmp = |v| (unsigned); the middle bucket for
                // tmp < factor^low; else the order holding tmp, the step within it, and the
                // bucket mirrored around the middle for v < 0.
                let p = LlqConsts::new(*factor, *low, *high, *nsteps);
                let (have, shift) = (a.label(), a.label());
                let pos = a.label();
                a.mov(R3, R2);
                a.jmp_imm(Cond::SGe, R2, 0, pos);
                a.alu_imm(Alu::Neg, R3, 0);
                a.bind(pos);
                a.mov_imm(R0, p.zero as i64);
                a.mov_imm(R1, p.pow(p.low) as i64);
                a.jmp(Cond::Lt, R3, R1, have);
                let orders: Vec<(u32, Label)> = (p.low..=p.high).map(|m| (m, a.label())).collect();
                for &(mag, l) in &orders {
                    a.mov_imm(R1, p.pow(mag + 1) as i64);
                    a.jmp(Cond::Lt, R3, R1, l);
                }
                a.mov_imm(R4, (p.high - p.low + 1) as i64 * p.per as i64 + 1);
                a.ja(shift);
                for &(mag, l) in &orders {
                    a.bind(l);
                    let max = p.pow(mag + 1);
                    a.mov(R4, R3);
                    if mag == 0 {
                        // tmp < factor <= 65535: tmp * steps cannot overflow.
                        a.alu_imm(Alu::Mul, R4, p.steps as i32);
                        a.mov_imm(R1, max as i64);
                    } else {
                        a.mov_imm(R1, (max / p.steps) as i64);
                    }
                    a.alu(Alu::Div, R4, R1);
                    let off = (mag - p.low) as i64 * p.per as i64 + 1 - p.sf as i64;
                    a.alu_imm(Alu::Add, R4, off as i32);
                    a.ja(shift);
                }
                a.bind(shift);
                let plus = a.label();
                a.jmp_imm(Cond::SGe, R2, 0, plus);
                a.alu(Alu::Sub, R0, R4);
                a.ja(have);
                a.bind(plus);
                a.alu(Alu::Add, R0, R4);
                a.bind(have);
                self.bump_bucket(2 * p.zero as u32 + 1, islot);
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

    /// The BPF code's bucket computation, replayed over 64-bit unsigned arithmetic as the
    /// instructions do it, equals probe-format's reference function (Oracle's layout).
    #[test]
    fn llquantize_bucket_code_matches_probe_format() {
        fn bpf(v: i64, p: &LlqConsts) -> u64 {
            let tmp = v.unsigned_abs();
            if tmp < p.pow(p.low) {
                return p.zero;
            }
            let mut ind = (p.high - p.low + 1) as u64 * p.per + 1;
            for mag in p.low..=p.high {
                let max = p.pow(mag + 1);
                if tmp < max {
                    let q = if mag == 0 {
                        tmp * p.steps / max
                    } else {
                        tmp / (max / p.steps)
                    };
                    let off = (mag - p.low) as i64 * p.per as i64 + 1 - p.sf as i64;
                    ind = q.wrapping_add(off as u64);
                    break;
                }
            }
            if v < 0 { p.zero - ind } else { p.zero + ind }
        }
        for (factor, low, high, nsteps) in [
            (10u16, 0u16, 3u16, 10u16),
            (10, 0, 6, 20),
            (2, 0, 10, 2),
            (10, 1, 4, 20),
            (4, 2, 6, 8),
            (3, 3, 5, 27),
            (10, 2, 3, 5),
            (10, 7, 10, 10),
            (2, 0, 62, 2),
        ] {
            let p = LlqConsts::new(factor, low, high, nsteps);
            assert_eq!(
                2 * p.zero as usize + 1,
                probe_format::agg::llquantize_nbuckets(factor, low, high, nsteps)
            );
            let mut v: i64 = -300_000;
            while v < 300_000 {
                let theirs = probe_format::agg::llquantize_bucket(v, factor, low, high, nsteps);
                assert_eq!(
                    bpf(v, &p) as usize,
                    theirs,
                    "v={v} for {factor},{low},{high},{nsteps}"
                );
                v += if v.abs() < 2000 { 1 } else { 37 };
            }
            for v in [i64::MIN, i64::MIN + 1, i64::MAX, 1 << 40, -(1 << 40)] {
                let theirs = probe_format::agg::llquantize_bucket(v, factor, low, high, nsteps);
                assert_eq!(
                    bpf(v, &p) as usize,
                    theirs,
                    "v={v} for {factor},{low},{high},{nsteps}"
                );
            }
        }
    }
}
