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
        /// Which parameter is at fault: 1 factor, 2 low, 3 high, 4 nsteps (the argument number
        /// of Oracle's `D_LLQUANT_*` errors).
        arg: u8,
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
    /// `llquantize` (Oracle's `dt_cg_agg_llquantize`): factor ≥ 2, high ≥ low,
    /// factor^(high+1) fits in 64 bits, nsteps ≥ 1; nsteps < factor must divide the factor;
    /// nsteps > factor must be a multiple of it and divide factor^2 (low = 0) or factor^(low+1).
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
                let bad = |arg, reason| {
                    Err(AggError::BadLlquantize {
                        factor,
                        low,
                        high,
                        nsteps,
                        arg,
                        reason,
                    })
                };
                let (f, st) = (u128::from(factor), u128::from(nsteps));
                if factor < 2 {
                    return bad(1, "factor must be at least 2");
                }
                if high < low {
                    return bad(3, "high must be at least low");
                }
                let pow = |e: u16| -> Option<u128> {
                    (0..e).try_fold(1u128, |v, _| {
                        v.checked_mul(f).filter(|&x| x <= u64::MAX as u128)
                    })
                };
                if pow(high + 1).is_none() {
                    return bad(3, "factor^(high+1) overflows 64 bits");
                }
                if nsteps == 0 {
                    return bad(4, "nsteps must be a positive integer");
                }
                if nsteps < factor && factor % nsteps != 0 {
                    return bad(
                        4,
                        "nsteps must evenly divide the factor when nsteps < factor",
                    );
                }
                if nsteps > factor {
                    if nsteps % factor != 0 {
                        return bad(
                            4,
                            "nsteps must be a multiple of the factor when nsteps > factor",
                        );
                    }
                    let (cover, what) = if low == 0 {
                        (
                            f * f,
                            "nsteps must evenly divide factor^2 when nsteps > factor and low is 0",
                        )
                    } else {
                        (
                            pow(low + 1).unwrap_or(1),
                            "nsteps must evenly divide factor^(low+1) when nsteps > factor",
                        )
                    };
                    if cover % st != 0 {
                        return bad(4, what);
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

/// The constants of an `llquantize(factor, low, high, nsteps)` layout (Oracle DTrace's
/// `dt_cg_agg_llquantize_bin`): `per` buckets per order of magnitude (`nsteps − nsteps /
/// factor`: the first `nsteps / factor` steps of an order lie in the orders below), and `zero`,
/// the index of the middle bucket (`|v| < factor^low`).
struct LlqLayout {
    factor: u128,
    low: u32,
    high: u32,
    steps: u128,
    /// `nsteps / factor`.
    sf: u128,
    per: usize,
    zero: usize,
}

impl LlqLayout {
    fn new(factor: u16, low: u16, high: u16, nsteps: u16) -> LlqLayout {
        let factor = u128::from(factor.max(2));
        let steps = u128::from(nsteps.max(1));
        let (low, high) = (u32::from(low), u32::from(high.max(low)));
        let sf = steps / factor;
        let per = (steps - sf) as usize;
        let zero = 1 + (high - low + 1) as usize * per;
        LlqLayout {
            factor,
            low,
            high,
            steps,
            sf,
            per,
            zero,
        }
    }

    /// `factor^e`, saturated far above any 64-bit value.
    fn pow(&self, e: u32) -> u128 {
        let mut v: u128 = 1;
        for _ in 0..e {
            v = v.saturating_mul(self.factor).min(1 << 100);
        }
        v
    }

    /// The smallest `|v|` of order `mag` whose step index (before the shift by `sf`) is at
    /// least `j`: for order 0 the index is `|v| · steps / factor`, above it `|v| / (factor^(mag+1)
    /// / steps)`.
    fn lowest(&self, mag: u32, j: u128) -> u128 {
        let at_least = if mag == 0 {
            (j * self.factor).div_ceil(self.steps)
        } else {
            j * (self.pow(mag + 1) / self.steps)
        };
        at_least.max(self.pow(mag))
    }

    /// The range of `|v|` (inclusive) of positive bucket `zero + k` (`k` from 1 to the last one
    /// below the overflow bucket); `None` for a bucket no value reaches (a "ghost bin" of order 0
    /// with more steps than the factor).
    fn abs_range(&self, k: usize) -> Option<(u128, u128)> {
        let k = k - 1;
        let mag = self.low + (k / self.per) as u32;
        let j = (k % self.per) as u128 + self.sf;
        let lo = self.lowest(mag, j);
        let top = self.pow(mag + 1);
        let hi = if (k % self.per) + 1 == self.per {
            top
        } else {
            self.lowest(mag, j + 1).min(top)
        };
        (lo < hi).then(|| (lo, hi - 1))
    }
}

/// Number of `llquantize()` buckets in Oracle DTrace's layout: `2 · (high − low + 1) · (nsteps −
/// nsteps / factor) + 3` (a negative overflow bucket, the negative orders, the middle bucket,
/// the positive orders, a positive overflow bucket).
pub fn llquantize_nbuckets(factor: u16, low: u16, high: u16, nsteps: u16) -> usize {
    2 * LlqLayout::new(factor, low, high, nsteps).zero + 1
}

/// The index of the middle `llquantize()` bucket, which holds the values with `|v| <
/// factor^low` (0 when `low` is 0): DTrace's "underflow" bucket, the "zero" of the sort order.
pub fn llquantize_zero_bucket(factor: u16, low: u16, high: u16, nsteps: u16) -> usize {
    LlqLayout::new(factor, low, high, nsteps).zero
}

/// The `llquantize()` bucket of `v`, as Oracle DTrace's `dt_cg_agg_llquantize_bin` computes it.
///
/// Layout (symmetric around the middle bucket `zero` = [`llquantize_zero_bucket`]): bucket
/// `zero` holds `|v| < factor^low`; for each order of magnitude `mag` from `low` to `high`,
/// `|v|` in `[factor^mag, factor^(mag+1))` goes to step `i` = `|v| / (factor^(mag+1) / nsteps)`
/// (order 0: `|v| · nsteps / factor`) minus `nsteps / factor`, and the bucket is `zero ± ((mag −
/// low) · per + i + 1)` (`per` = nsteps − nsteps / factor), `+` for `v ≥ 0`; `|v| ≥
/// factor^(high+1)` goes to the last bucket, or bucket 0 for a negative `v`. `|v|` is unsigned,
/// so `i64::MIN` is `2^63`.
pub fn llquantize_bucket(v: i64, factor: u16, low: u16, high: u16, nsteps: u16) -> usize {
    let l = LlqLayout::new(factor, low, high, nsteps);
    let tmp = u128::from(v.unsigned_abs());
    if tmp < l.pow(l.low) {
        return l.zero;
    }
    let mut off = (l.high - l.low + 1) as usize * l.per + 1;
    for mag in l.low..=l.high {
        let max = l.pow(mag + 1);
        if tmp < max {
            let ind = if mag == 0 {
                tmp * l.steps / max
            } else {
                tmp / (max / l.steps)
            };
            off = (mag - l.low) as usize * l.per + (ind - l.sf) as usize + 1;
            break;
        }
    }
    if v < 0 { l.zero - off } else { l.zero + off }
}

/// The inclusive range of values each `llquantize()` bucket holds (bucket 0 from `i64::MIN`, the
/// last up to `i64::MAX`), `None` for a bucket no value can reach: a "ghost bin" of order 0
/// (with `low` = 0 and more steps than the factor, order 0's steps are fractions of 1), or an
/// overflow bucket beyond 64 bits. Same length as [`llquantize_nbuckets`].
pub fn llquantize_ranges(factor: u16, low: u16, high: u16, nsteps: u16) -> Vec<Option<(i64, i64)>> {
    let l = LlqLayout::new(factor, low, high, nsteps);
    let n = 2 * l.zero + 1;
    let clamp = |x: i128| x.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    let mut out = vec![None; n];
    let under = l.pow(l.low) as i128 - 1;
    out[l.zero] = Some((clamp(-under), clamp(under)));
    for k in 1..l.zero {
        if let Some((lo, hi)) = l.abs_range(k) {
            let (lo, hi) = (lo as i128, hi as i128);
            if lo <= i64::MAX as i128 {
                out[l.zero + k] = Some((clamp(lo), clamp(hi)));
            }
            if -hi <= i64::MAX as i128 && -lo >= i64::MIN as i128 {
                out[l.zero - k] = Some((clamp(-hi), clamp(-lo)));
            }
        }
    }
    let over = l.pow(l.high + 1) as i128;
    if over <= i64::MAX as i128 {
        out[n - 1] = Some((over as i64, i64::MAX));
    }
    if -over >= i64::MIN as i128 {
        out[0] = Some((i64::MIN, (-over) as i64));
    }
    out
}

/// The value each `llquantize()` bucket is labelled and weighed with (Oracle's
/// `dt_print_llquantize` labels, `dt_aggregate_llquantizedsum` weights): 0 for the middle
/// bucket, `±` the smallest `|v|` of each other bucket (`-factor^(high+1)` and `factor^(high+1)`
/// for the overflow buckets), `None` for a ghost bin (see [`llquantize_ranges`]). As `i128`:
/// `factor^(high+1)` may pass `i64::MAX`.
pub fn llquantize_bucket_values(
    factor: u16,
    low: u16,
    high: u16,
    nsteps: u16,
) -> Vec<Option<i128>> {
    let l = LlqLayout::new(factor, low, high, nsteps);
    let n = 2 * l.zero + 1;
    let mut out = vec![None; n];
    out[l.zero] = Some(0);
    for k in 1..l.zero {
        if let Some((lo, _)) = l.abs_range(k) {
            out[l.zero + k] = Some(lo as i128);
            out[l.zero - k] = Some(-(lo as i128));
        }
    }
    let over = l.pow(l.high + 1) as i128;
    out[0] = Some(-over);
    out[n - 1] = Some(over);
    out
}

/// The row labels of an `llquantize()` table (Oracle's `dt_print_llquantize`), `None` for a
/// ghost bin: the middle bucket `0` when `low` is 0, else `< factor^low` when `negatives_shown`
/// is false and `abs() < factor^low` when it is true; the overflow buckets `<= -factor^(high+1)`
/// and `>= factor^(high+1)`; the others their value ([`llquantize_bucket_values`]).
pub fn llquantize_labels(
    factor: u16,
    low: u16,
    high: u16,
    nsteps: u16,
    negatives_shown: bool,
) -> Vec<Option<String>> {
    let l = LlqLayout::new(factor, low, high, nsteps);
    let values = llquantize_bucket_values(factor, low, high, nsteps);
    let n = values.len();
    let scale = l.pow(l.low);
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let v = (*v)?;
            Some(if i == l.zero {
                if scale == 1 {
                    "0".to_string()
                } else if negatives_shown {
                    format!("abs() < {scale}")
                } else {
                    format!("< {scale}")
                }
            } else if i == 0 {
                format!("<= {v}")
            } else if i == n - 1 {
                format!(">= {v}")
            } else {
                v.to_string()
            })
        })
        .collect()
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

    // Oracle DTrace's layout (dt_cg_agg_llquantize_bin), with the rows its tst.llquantneg.r
    // shows for llquantize(x, 10, 0, 6, 20): 0, then 1..9 (one row each, a ghost bin between
    // two: order 0 has 20 steps of 1/2), then 10, 15, 20, ... 95, 100, mirrored for negatives.
    #[test]
    fn llquantize_oracle_layout() {
        let (f, lo, hi, n) = (10, 0, 6, 20);
        let z = llquantize_zero_bucket(f, lo, hi, n);
        assert_eq!(z, 1 + 7 * 18);
        assert_eq!(llquantize_nbuckets(f, lo, hi, n), 2 * 7 * 18 + 3);
        let b = |v| llquantize_bucket(v, f, lo, hi, n);
        assert_eq!(b(0), z);
        assert_eq!(b(1), z + 1);
        assert_eq!(b(2), z + 3);
        assert_eq!(b(9), z + 17);
        assert_eq!(b(10), z + 19);
        assert_eq!(b(14), z + 19);
        assert_eq!(b(15), z + 20);
        assert_eq!(b(99), z + 36);
        assert_eq!(b(100), z + 37);
        assert_eq!(b(-1), z - 1);
        assert_eq!(b(-15), z - 20);
        assert_eq!(b(9_999_999), 2 * z - 1);
        assert_eq!(b(10_000_000), 2 * z);
        assert_eq!(b(i64::MAX), 2 * z);
        assert_eq!(b(-10_000_000), 0);
        assert_eq!(b(i64::MIN), 0);
        let labels = llquantize_labels(f, lo, hi, n, false);
        let l = |i: usize| labels[i].as_deref();
        assert_eq!(l(z), Some("0"));
        assert_eq!(l(z + 1), Some("1"));
        assert_eq!(l(z + 2), None);
        assert_eq!(l(z + 3), Some("2"));
        assert_eq!(l(z + 19), Some("10"));
        assert_eq!(l(z + 20), Some("15"));
        assert_eq!(l(z - 20), Some("-15"));
        assert_eq!(l(0), Some("<= -10000000"));
        assert_eq!(l(2 * z), Some(">= 10000000"));
        // Every value lies in its bucket's range, ranges ascend and cover i64 without gaps.
        let ranges = llquantize_ranges(f, lo, hi, n);
        let mut next = i64::MIN;
        for r in ranges.iter().flatten() {
            assert_eq!(r.0, next);
            next = r.1.wrapping_add(1);
        }
        assert_eq!(next, i64::MIN, "the last range ends at i64::MAX");
        for v in (-200_000i64..200_000)
            .step_by(7)
            .chain([i64::MIN, i64::MAX, 0, -1, 1])
        {
            let (a, z2) = ranges[b(v)].expect("a reached bucket has a range");
            assert!(a <= v && v <= z2, "v={v} in {a}..={z2}");
        }
    }

    // tst.llquantstep.r (llquantize(i, 3, 3, 5, 27)): "abs() < 27", then 27, 30, ... in steps
    // of 3, 81, 90, ... in steps of 9, 243, 270, ..., ">= 729"; nsteps below the factor
    // (llquantize(x, 10, 2, 3, 5)) makes an order's first bucket narrower: 100..199.
    #[test]
    fn llquantize_steps_and_labels() {
        let (f, lo, hi, n) = (3, 3, 5, 27);
        let z = llquantize_zero_bucket(f, lo, hi, n);
        assert_eq!(z, 1 + 3 * 18);
        let b = |v| llquantize_bucket(v, f, lo, hi, n);
        assert_eq!(b(26), z);
        assert_eq!(b(-26), z);
        assert_eq!(b(27), z + 1);
        assert_eq!(b(30), z + 2);
        assert_eq!(b(81), z + 19);
        assert_eq!(b(90), z + 20);
        assert_eq!(b(728), 2 * z - 1);
        assert_eq!(b(729), 2 * z);
        let labels = llquantize_labels(f, lo, hi, n, true);
        assert_eq!(labels[z].as_deref(), Some("abs() < 27"));
        assert_eq!(labels[z + 2].as_deref(), Some("30"));
        assert_eq!(labels[z + 20].as_deref(), Some("90"));
        assert_eq!(labels[2 * z].as_deref(), Some(">= 729"));
        let labels = llquantize_labels(f, lo, hi, n, false);
        assert_eq!(labels[z].as_deref(), Some("< 27"));
        let r = llquantize_ranges(10, 2, 3, 5);
        let z = llquantize_zero_bucket(10, 2, 3, 5);
        assert_eq!(z, 1 + 2 * 5);
        assert_eq!(r[z], Some((-99, 99)));
        assert_eq!(r[z + 1], Some((100, 199)));
        assert_eq!(r[z + 2], Some((200, 399)));
        assert_eq!(r[z + 6], Some((1000, 1999)));
        assert_eq!(r[z - 1], Some((-199, -100)));
        assert_eq!(r[2 * z], Some((10_000, i64::MAX)));
    }

    // Oracle's dt_cg_agg_llquantize checks, one D_LLQUANT_* argument each.
    #[test]
    fn llquantize_parameter_checks() {
        let arg = |factor, low, high, nsteps| match (AggFunc::Llquantize {
            factor,
            low,
            high,
            nsteps,
        })
        .validate()
        {
            Ok(()) => 0,
            Err(AggError::BadLlquantize { arg, .. }) => arg,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(arg(10, 0, 6, 20), 0);
        assert_eq!(arg(10, 2, 2, 10), 0, "high may equal low");
        assert_eq!(arg(3, 3, 5, 27), 0);
        assert_eq!(arg(10, 2, 3, 5), 0, "nsteps dividing the factor");
        assert_eq!(arg(1, 0, 6, 20), 1);
        assert_eq!(arg(10, 3, 2, 10), 3);
        assert_eq!(arg(10, 0, 19, 10), 3, "10^20 passes 64 bits");
        assert_eq!(arg(10, 0, 18, 10), 0, "10^19 fits in 64 bits");
        assert_eq!(arg(10, 0, 6, 0), 4);
        assert_eq!(arg(10, 0, 6, 3), 4, "3 does not divide 10");
        assert_eq!(arg(10, 0, 6, 15), 4, "15 is not a multiple of 10");
        assert_eq!(arg(10, 0, 6, 30), 4, "30 does not divide 10^2");
        assert_eq!(arg(10, 1, 6, 30), 4, "30 does not divide 10^2");
        assert_eq!(arg(10, 2, 6, 200), 0, "200 divides 10^3");
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
    }

    // Guide, "Aggregations" > avg(), stddev(); libdtrace dt_stddev.
}
