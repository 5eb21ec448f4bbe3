//! Aggregations: the aggregating functions ([`AggFunc`]), the value the BPF side accumulates per key
//! ([`AggData`], with its word layout), the bucket index functions the code generator mirrors in BPF
//! ([`quantize_bucket`], [`lquantize_bucket`], [`llquantize_bucket`]), and the model the consumer
//! keeps ([`Aggregation`], [`AggEntry`]) with `normalize()`, `denormalize()`, `trunc()` and
//! `clear()` and DTrace's sort order ([`SortOptions`]).
//!
//! Source: DTrace guide, chapter "Aggregations" (aggregating functions, `quantize`, `lquantize`,
//! `llquantize`, normalization, truncation, clearing) and chapter "Options and Tunables"
//! (`aggsortkey`, `aggsortrev`, `aggsortpos`, `aggsortkeypos`); bucket arithmetic from the DTrace
//! kernel's `dtrace_aggregate_quantize` / `_lquantize` / `_llquantize_bucket` and sort order from
//! libdtrace `dt_aggregate.c`.
//!
//! # BPF value layout (what probe-codegen stores per key)
//!
//! Every aggregation value is an array of 64-bit words in a per-CPU map; the consumer decodes each
//! CPU's words with [`AggData::from_words`] and adds CPUs up with [`AggData::merge`]. A freshly
//! created per-CPU element is zero on every CPU, so every layout treats all-zero words as "nothing
//! recorded" (this is why `min`/`max` carry a sample count).
//!
//! | function | words | meaning |
//! |---|---|---|
//! | `count()` | 1 | `[n]`: `n += 1` per call |
//! | `sum(x)` | 1 | `[s]`: `s += x` (two's complement, wrapping) |
//! | `avg(x)` | 2 | `[n, s]`: `n += 1; s += x` |
//! | `min(x)` | 2 | `[n, m]`: `if n == 0 \|\| x < m { m = x }; n += 1` (signed compare) |
//! | `max(x)` | 2 | `[n, m]`: `if n == 0 \|\| x > m { m = x }; n += 1` (signed compare) |
//! | `stddev(x)` | 4 | `[n, s, q_lo, q_hi]`: `n += 1; s += x; q += \|x\|²` with `q` a 128-bit unsigned (low word first, carry into `q_hi`) |
//! | `quantize(x[, inc])` | 127 | `[b₀..b₁₂₆]`: `b[quantize_bucket(x)] += inc` (inc defaults to 1) |
//! | `lquantize(x, base, limit, step[, inc])` | levels + 2 | `b[lquantize_bucket(x, ..)] += inc`, levels = (limit − base) / step |
//! | `llquantize(x, factor, low, high, nsteps[, inc])` | [`AggFunc::nwords`] | `b[llquantize_bucket(x, ..)] += inc` |

use crate::value::Value;
use std::cmp::Ordering;

mod data;
mod model;
mod sort;

pub use self::{data::*, model::*, sort::*};

/// Errors of aggregation parameters and data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AggError {
    /// `lquantize` parameters DTrace rejects: step ≤ 0, limit ≤ base, or more than 65535 levels.
    #[error("lquantize({base}, {limit}, {step}): {reason}")]
    BadLquantize {
        /// The base (lowest bucket's lower bound).
        base: i64,
        /// The limit (first value of the overflow bucket, before rounding to a step).
        limit: i64,
        /// The step.
        step: i64,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// `llquantize` parameters DTrace rejects.
    #[error("llquantize({factor}, {low}, {high}, {nsteps}): {reason}")]
    BadLlquantize {
        /// The factor (base of the orders of magnitude).
        factor: u16,
        /// The lowest order of magnitude.
        low: u16,
        /// The highest order of magnitude.
        high: u16,
        /// Steps per order of magnitude.
        nsteps: u16,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A BPF value of the wrong number of words for its function.
    #[error("aggregation {func}: expected {expected} words, got {got}")]
    WrongSize {
        /// The function's name.
        func: &'static str,
        /// Words the layout has.
        expected: usize,
        /// Words given.
        got: usize,
    },
}

/// An aggregating function with its constant parameters (guide, "Aggregations" > "Aggregating
/// Functions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggFunc {
    /// `count()`: number of calls.
    Count,
    /// `sum(x)`: total of the values.
    Sum,
    /// `avg(x)`: arithmetic mean (integer, truncated toward zero).
    Avg,
    /// `min(x)`: smallest value.
    Min,
    /// `max(x)`: largest value.
    Max,
    /// `stddev(x)`: standard deviation (integer square root, as DTrace).
    Stddev,
    /// `quantize(x)`: power-of-two frequency distribution.
    Quantize,
    /// `lquantize(x, base, limit, step)`: linear frequency distribution.
    Lquantize {
        /// Lower bound of the first bucket.
        base: i64,
        /// Upper limit: values ≥ `base + levels * step` go to the overflow bucket.
        limit: i64,
        /// Bucket width (> 0).
        step: i64,
    },
    /// `llquantize(x, factor, low, high, nsteps)`: log-linear frequency distribution.
    Llquantize {
        /// Base of the orders of magnitude (≥ 2).
        factor: u16,
        /// Lowest order of magnitude: values < factor^low go to the underflow bucket.
        low: u16,
        /// Highest order of magnitude: values ≥ factor^(high+1) go to the overflow bucket.
        high: u16,
        /// Linear steps per order of magnitude (a multiple of `factor`).
        nsteps: u16,
    },
}

impl AggFunc {
    /// The D name (`count`, `lquantize`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            AggFunc::Count => "count",
            AggFunc::Sum => "sum",
            AggFunc::Avg => "avg",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
            AggFunc::Stddev => "stddev",
            AggFunc::Quantize => "quantize",
            AggFunc::Lquantize { .. } => "lquantize",
            AggFunc::Llquantize { .. } => "llquantize",
        }
    }

    /// Checks the constant parameters as DTrace's compiler does (dt_cc.c).
    ///
    /// `lquantize`: step > 0, limit > base, (limit − base) / step between 1 and 65535 levels.
    /// `llquantize`: factor ≥ 2, low < high, nsteps ≥ factor, nsteps a multiple of factor,
    /// factor^(high+1) fits in 63 bits.
    pub fn validate(&self) -> Result<(), AggError> {
        match *self {
            AggFunc::Lquantize { base, limit, step } => {
                let bad = |reason| {
                    Err(AggError::BadLquantize {
                        base,
                        limit,
                        step,
                        reason,
                    })
                };
                if step <= 0 {
                    return bad("step must be greater than zero");
                }
                if limit <= base {
                    return bad("limit must be greater than base");
                }
                let levels = (i128::from(limit) - i128::from(base)) / i128::from(step);
                if levels < 1 {
                    return bad("range must hold at least one step");
                }
                if levels > i128::from(u16::MAX) {
                    return bad("too many levels (more than 65535)");
                }
                Ok(())
            }
            AggFunc::Llquantize {
                factor,
                low,
                high,
                nsteps,
            } => {
                let bad = |reason| {
                    Err(AggError::BadLlquantize {
                        factor,
                        low,
                        high,
                        nsteps,
                        reason,
                    })
                };
                if factor < 2 {
                    return bad("factor must be at least 2");
                }
                if low >= high {
                    return bad("high must be greater than low");
                }
                if nsteps < factor {
                    return bad("nsteps must be at least the factor");
                }
                if nsteps % factor != 0 {
                    return bad("nsteps must be a multiple of the factor");
                }
                let mut v: i64 = 1;
                for _ in 0..=high {
                    match v.checked_mul(i64::from(factor)) {
                        Some(n) => v = n,
                        None => return bad("factor^(high+1) overflows 64 bits"),
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Number of `lquantize` levels: (limit − base) / step (0 for other functions).
    pub fn lquantize_levels(&self) -> usize {
        match *self {
            AggFunc::Lquantize { base, limit, step } if step > 0 && limit > base => {
                ((i128::from(limit) - i128::from(base)) / i128::from(step)) as usize
            }
            _ => 0,
        }
    }

    /// Number of 64-bit words of the BPF value (see the module's layout table).
    pub fn nwords(&self) -> usize {
        match *self {
            AggFunc::Count | AggFunc::Sum => 1,
            AggFunc::Avg | AggFunc::Min | AggFunc::Max => 2,
            AggFunc::Stddev => 4,
            AggFunc::Quantize => QUANTIZE_NBUCKETS,
            AggFunc::Lquantize { .. } => self.lquantize_levels() + 2,
            AggFunc::Llquantize {
                factor,
                low,
                high,
                nsteps,
            } => llquantize_nbuckets(factor, low, high, nsteps),
        }
    }

    /// True for the distribution functions (quantize, lquantize, llquantize).
    pub fn is_distribution(&self) -> bool {
        matches!(
            self,
            AggFunc::Quantize | AggFunc::Lquantize { .. } | AggFunc::Llquantize { .. }
        )
    }
}

/// Number of `quantize()` buckets: 63 negative, one zero, 63 positive.
pub const QUANTIZE_NBUCKETS: usize = 127;
/// Index of the `quantize()` bucket holding 0.
pub const QUANTIZE_ZERO_BUCKET: usize = 63;

/// The `quantize()` bucket of `v`.
///
/// Layout (DTrace's `DTRACE_QUANTIZE_*`): 127 buckets. Bucket 63 holds 0. Bucket `64 + k`
/// (k = 0..=62) holds `[2^k, 2^(k+1))`, i.e. `64 + floor(log2 v)` for `v ≥ 1`. Bucket `62 − k`
/// holds `(−2^(k+1), −2^k]`, i.e. `62 − floor(log2 |v|)` for `v ≤ −1`, clamped to 0 (so
/// `i64::MIN` lands in bucket 0). In BPF: `v == 0 → 63`; `v > 0 → 127 − clz64(v)`;
/// `v < 0 → max(0, 62 − (63 − clz64(−v)))` with `−v` taken as unsigned.
pub fn quantize_bucket(v: i64) -> usize {
    match v.cmp(&0) {
        Ordering::Equal => QUANTIZE_ZERO_BUCKET,
        Ordering::Greater => 64 + (63 - v.leading_zeros() as usize),
        Ordering::Less => {
            let log = 63 - v.unsigned_abs().leading_zeros() as usize;
            62usize.saturating_sub(log)
        }
    }
}

/// The value a `quantize()` row is labelled with: the bound of bucket `i` nearest zero
/// (`DTRACE_QUANTIZE_BUCKETVAL`): `−2^(62−i)` for i < 63, 0 for 63, `2^(i−64)` above.
pub fn quantize_bucket_value(i: usize) -> i64 {
    match i.cmp(&QUANTIZE_ZERO_BUCKET) {
        Ordering::Less => -(1i64 << (62 - i)),
        Ordering::Equal => 0,
        Ordering::Greater => 1i64 << (i - 64),
    }
}

/// The `lquantize()` bucket of `v` for `lquantize(v, base, limit, step)`.
///
/// Layout: `levels + 2` buckets, levels = (limit − base) / step. Bucket 0 holds `v < base`;
/// bucket `1 + (v − base) / step` holds `[base + i·step, base + (i+1)·step)` for
/// i < levels; bucket `levels + 1` holds `v ≥ base + levels·step`. Arithmetic is on i64 (DTrace
/// truncates `v` to 32 bits first; Sightline does not, so large values land in the overflow
/// bucket rather than wrapping). `step` must be > 0 (see [`AggFunc::validate`]).
pub fn lquantize_bucket(v: i64, base: i64, limit: i64, step: i64) -> usize {
    let levels = ((i128::from(limit) - i128::from(base)) / i128::from(step.max(1))).max(0) as usize;
    if v < base {
        return 0;
    }
    let level = (i128::from(v) - i128::from(base)) / i128::from(step.max(1));
    if level < levels as i128 {
        level as usize + 1
    } else {
        levels + 1
    }
}

/// Number of `llquantize()` buckets: 1 (underflow) + Σ over orders low..=high of
/// (n − n/factor) with n = min(factor^(order+1), nsteps), + 1 (overflow).
pub fn llquantize_nbuckets(factor: u16, low: u16, high: u16, nsteps: u16) -> usize {
    if factor < 2 || nsteps == 0 {
        return 2;
    }
    let factor = i64::from(factor);
    let nsteps = i64::from(nsteps);
    let mut this: i64 = 1;
    for _ in 0..low {
        this = this.saturating_mul(factor);
    }
    this = this.saturating_mul(factor);
    let mut base: i64 = 1;
    for _ in low..=high {
        let nbuckets = this.min(nsteps);
        base += nbuckets - nbuckets / factor;
        this = this.saturating_mul(factor);
    }
    base as usize + 1
}

/// The `llquantize()` bucket of `v` (DTrace's `dtrace_aggregate_llquantize_bucket`).
///
/// Layout: bucket 0 holds `v < factor^low`. Then for each order of magnitude o = low..=high,
/// with `this = factor^(o+1)`, `last = factor^o` (for o = low) or the previous `this`, and
/// `n = min(this, nsteps)` buckets of width `this / n` covering `[last, this)`: `v` in that
/// range goes to `base + (v − last) / (this / n)`, where `base` starts at 1 and grows by
/// `n − n/factor` per order (the first `n/factor` buckets of an order would overlap the previous
/// order and are not allocated). The last bucket ([`llquantize_nbuckets`] − 1) holds
/// `v ≥ factor^(high+1)`. In BPF this is a loop over at most `high − low + 1` orders with constant
/// bounds.
pub fn llquantize_bucket(v: i64, factor: u16, low: u16, high: u16, nsteps: u16) -> usize {
    let factor = i64::from(factor.max(2));
    let nsteps = i64::from(nsteps.max(1));
    let mut this: i64 = 1;
    for _ in 0..low {
        this = this.saturating_mul(factor);
    }
    let mut last = this;
    if v < last {
        return 0;
    }
    let mut v = v;
    this = this.saturating_mul(factor);
    let mut base: i64 = 1;
    for _ in low..=high {
        let nbuckets = this.min(nsteps);
        let next = this.saturating_mul(factor);
        if next == this {
            v = this - 1;
        }
        if v < this {
            return (base + (v - last) / (this / nbuckets)) as usize;
        }
        base += nbuckets - nbuckets / factor;
        last = this;
        this = next;
    }
    base as usize
}

/// The label of each `llquantize()` bucket, as DTrace prints the rows: bucket 0 is labelled
/// `factor^low` (printed `< factor^low`), each in-range bucket with its lower bound, the last
/// with `factor^(high+1)` (printed `>= ...`). Same length as [`llquantize_nbuckets`].
pub fn llquantize_bucket_values(factor: u16, low: u16, high: u16, nsteps: u16) -> Vec<i64> {
    let factor = i64::from(factor.max(2));
    let nsteps = i64::from(nsteps.max(1));
    let mut value: i64 = 1;
    for _ in 0..low {
        value = value.saturating_mul(factor);
    }
    let mut out = vec![value];
    let mut next = value.saturating_mul(factor);
    let mut step = if next > nsteps { next / nsteps } else { 1 };
    let mut order = low;
    while order <= high {
        out.push(value);
        value += step;
        if value != next {
            continue;
        }
        next = value.saturating_mul(factor);
        step = if next > nsteps { next / nsteps } else { 1 };
        order += 1;
    }
    out.push(value);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_buckets() {
        assert_eq!(quantize_bucket(0), 63);
        assert_eq!(quantize_bucket(1), 64);
        assert_eq!(quantize_bucket(2), 65);
        assert_eq!(quantize_bucket(3), 65);
        assert_eq!(quantize_bucket(4), 66);
        assert_eq!(quantize_bucket(1023), 73);
        assert_eq!(quantize_bucket(1024), 74);
        assert_eq!(quantize_bucket(i64::MAX), 126);
        assert_eq!(quantize_bucket(-1), 62);
        assert_eq!(quantize_bucket(-2), 61);
        assert_eq!(quantize_bucket(-3), 61);
        assert_eq!(quantize_bucket(-4), 60);
        assert_eq!(quantize_bucket(i64::MIN), 0);
        assert_eq!(quantize_bucket(-(1 << 62)), 0);
        assert_eq!(quantize_bucket_value(0), -(1 << 62));
        assert_eq!(quantize_bucket_value(62), -1);
        assert_eq!(quantize_bucket_value(63), 0);
        assert_eq!(quantize_bucket_value(64), 1);
        assert_eq!(quantize_bucket_value(126), 1 << 62);
        // Every value lies between its bucket's label and the next bucket's label.
        for v in [-1000i64, -17, -1, 0, 1, 5, 64, 999_999] {
            let b = quantize_bucket(v);
            if v > 0 {
                assert!(quantize_bucket_value(b) <= v && v < quantize_bucket_value(b + 1));
            } else if v < 0 {
                assert!(quantize_bucket_value(b) >= v && v > quantize_bucket_value(b - 1));
            }
        }
    }

    // Guide, "Aggregations" > lquantize().
    #[test]
    fn lquantize_buckets() {
        // lquantize(x, 0, 10, 1): 10 levels, 12 buckets.
        assert_eq!(
            AggFunc::Lquantize {
                base: 0,
                limit: 10,
                step: 1
            }
            .nwords(),
            12
        );
        assert_eq!(lquantize_bucket(-1, 0, 10, 1), 0);
        assert_eq!(lquantize_bucket(0, 0, 10, 1), 1);
        assert_eq!(lquantize_bucket(9, 0, 10, 1), 10);
        assert_eq!(lquantize_bucket(10, 0, 10, 1), 11);
        assert_eq!(lquantize_bucket(i64::MAX, 0, 10, 1), 11);
        // Non-multiple range: lquantize(x, 0, 25, 10) has 2 levels; 20..=24 overflow.
        assert_eq!(lquantize_bucket(19, 0, 25, 10), 2);
        assert_eq!(lquantize_bucket(20, 0, 25, 10), 3);
        // Negative base.
        assert_eq!(lquantize_bucket(-5, -10, 10, 5), 2);
        assert!(
            AggFunc::Lquantize {
                base: 0,
                limit: 0,
                step: 1
            }
            .validate()
            .is_err()
        );
        assert!(
            AggFunc::Lquantize {
                base: 0,
                limit: 10,
                step: 0
            }
            .validate()
            .is_err()
        );
        assert!(
            AggFunc::Lquantize {
                base: 0,
                limit: 10,
                step: 1
            }
            .validate()
            .is_ok()
        );
    }

    // Guide, "Aggregations" > llquantize(): llquantize(x, 10, 0, 6, 20): values 1..9 one bucket
    // each, then 10..95 in steps of 5, 100..950 in steps of 50, ...
    #[test]
    fn llquantize_buckets() {
        let (f, lo, hi, n) = (10, 0, 6, 20);
        assert_eq!(llquantize_bucket(0, f, lo, hi, n), 0);
        assert_eq!(llquantize_bucket(1, f, lo, hi, n), 1);
        assert_eq!(llquantize_bucket(9, f, lo, hi, n), 9);
        // Order 1: this = 100, 20 buckets of width 5; the first 2 (0..9) are not allocated.
        assert_eq!(llquantize_bucket(10, f, lo, hi, n), 10);
        assert_eq!(llquantize_bucket(14, f, lo, hi, n), 10);
        assert_eq!(llquantize_bucket(15, f, lo, hi, n), 11);
        assert_eq!(llquantize_bucket(95, f, lo, hi, n), 27);
        assert_eq!(llquantize_bucket(100, f, lo, hi, n), 28);
        // 9 (order 0) + 18 per order for orders 1..=6 + underflow + overflow.
        assert_eq!(llquantize_nbuckets(f, lo, hi, n), 1 + 9 + 18 * 6 + 1);
        assert_eq!(llquantize_bucket(9_999_999, f, lo, hi, n), 9 + 18 * 6);
        assert_eq!(llquantize_bucket(10_000_000, f, lo, hi, n), 9 + 18 * 6 + 1);
        assert_eq!(llquantize_bucket(i64::MAX, f, lo, hi, n), 9 + 18 * 6 + 1);
        assert!(
            AggFunc::Llquantize {
                factor: 10,
                low: 0,
                high: 6,
                nsteps: 15
            }
            .validate()
            .is_err()
        );
        assert!(
            AggFunc::Llquantize {
                factor: 10,
                low: 0,
                high: 6,
                nsteps: 20
            }
            .validate()
            .is_ok()
        );
        assert_eq!(
            AggFunc::Llquantize {
                factor: 2,
                low: 0,
                high: 3,
                nsteps: 4
            }
            .nwords(),
            llquantize_nbuckets(2, 0, 3, 4)
        );
        let labels = llquantize_bucket_values(f, lo, hi, n);
        assert_eq!(labels.len(), llquantize_nbuckets(f, lo, hi, n));
        assert_eq!(&labels[..12], &[1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15]);
        assert_eq!(labels[28], 100);
        assert_eq!(*labels.last().unwrap(), 10_000_000);
        // Every label's bucket is the bucket itself.
        for (i, &v) in labels.iter().enumerate().skip(1) {
            assert_eq!(llquantize_bucket(v, f, lo, hi, n), i);
        }
    }

    // Guide, "Aggregations" > avg(), stddev(); libdtrace dt_stddev.
}
