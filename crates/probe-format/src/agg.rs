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

/// What one key of an aggregation has accumulated (all CPUs merged), decoded from the BPF words.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AggData {
    /// `count()`.
    Count(u64),
    /// `sum()`.
    Sum(i64),
    /// `avg()`: number of values and their sum.
    Avg {
        /// Number of values.
        count: u64,
        /// Their sum.
        sum: i64,
    },
    /// `min()`: `None` until a value is recorded (and after `clear()`; prints as 0, as DTrace's zeroed data).
    Min(Option<i64>),
    /// `max()`: `None` until a value is recorded (and after `clear()`; prints as 0).
    Max(Option<i64>),
    /// `stddev()`: number, sum, and sum of squares (128-bit).
    Stddev {
        /// Number of values.
        count: u64,
        /// Their sum.
        sum: i64,
        /// Sum of their squares.
        sum_sq: u128,
    },
    /// `quantize()`: 127 bucket counts (see [`quantize_bucket`]).
    Quantize(Vec<i64>),
    /// `lquantize()`: levels + 2 bucket counts (see [`lquantize_bucket`]).
    Lquantize(Vec<i64>),
    /// `llquantize()`: bucket counts (see [`llquantize_bucket`]).
    Llquantize(Vec<i64>),
}

impl AggData {
    /// The empty value of `func` (what a new key starts from; also what `clear()` leaves).
    pub fn zero(func: &AggFunc) -> AggData {
        match func {
            AggFunc::Count => AggData::Count(0),
            AggFunc::Sum => AggData::Sum(0),
            AggFunc::Avg => AggData::Avg { count: 0, sum: 0 },
            AggFunc::Min => AggData::Min(None),
            AggFunc::Max => AggData::Max(None),
            AggFunc::Stddev => AggData::Stddev {
                count: 0,
                sum: 0,
                sum_sq: 0,
            },
            AggFunc::Quantize => AggData::Quantize(vec![0; QUANTIZE_NBUCKETS]),
            AggFunc::Lquantize { .. } => AggData::Lquantize(vec![0; func.nwords()]),
            AggFunc::Llquantize { .. } => AggData::Llquantize(vec![0; func.nwords()]),
        }
    }

    /// Decodes one CPU's BPF words (layout in the module docs).
    pub fn from_words(func: &AggFunc, w: &[u64]) -> Result<AggData, AggError> {
        let expected = func.nwords();
        if w.len() != expected {
            return Err(AggError::WrongSize {
                func: func.name(),
                expected,
                got: w.len(),
            });
        }
        Ok(match func {
            AggFunc::Count => AggData::Count(w[0]),
            AggFunc::Sum => AggData::Sum(w[0] as i64),
            AggFunc::Avg => AggData::Avg {
                count: w[0],
                sum: w[1] as i64,
            },
            AggFunc::Min => AggData::Min((w[0] != 0).then_some(w[1] as i64)),
            AggFunc::Max => AggData::Max((w[0] != 0).then_some(w[1] as i64)),
            AggFunc::Stddev => AggData::Stddev {
                count: w[0],
                sum: w[1] as i64,
                sum_sq: u128::from(w[2]) | (u128::from(w[3]) << 64),
            },
            AggFunc::Quantize => AggData::Quantize(w.iter().map(|&x| x as i64).collect()),
            AggFunc::Lquantize { .. } => AggData::Lquantize(w.iter().map(|&x| x as i64).collect()),
            AggFunc::Llquantize { .. } => {
                AggData::Llquantize(w.iter().map(|&x| x as i64).collect())
            }
        })
    }

    /// Adds one value `x` with increment `inc` (1 except for the distributions' optional
    /// increment argument), as the BPF program does. Used by tests and by anything that
    /// aggregates in user space.
    pub fn add(&mut self, func: &AggFunc, x: i64, inc: i64) {
        match (self, func) {
            (AggData::Count(n), _) => *n = n.wrapping_add(1),
            (AggData::Sum(s), _) => *s = s.wrapping_add(x),
            (AggData::Avg { count, sum }, _) => {
                *count += 1;
                *sum = sum.wrapping_add(x);
            }
            (AggData::Min(m), _) => *m = Some(m.map_or(x, |m| m.min(x))),
            (AggData::Max(m), _) => *m = Some(m.map_or(x, |m| m.max(x))),
            (AggData::Stddev { count, sum, sum_sq }, _) => {
                *count += 1;
                *sum = sum.wrapping_add(x);
                let a = u128::from(x.unsigned_abs());
                *sum_sq = sum_sq.wrapping_add(a * a);
            }
            (AggData::Quantize(b), _) => b[quantize_bucket(x)] += inc,
            (AggData::Lquantize(b), AggFunc::Lquantize { base, limit, step }) => {
                b[lquantize_bucket(x, *base, *limit, *step)] += inc
            }
            (
                AggData::Llquantize(b),
                AggFunc::Llquantize {
                    factor,
                    low,
                    high,
                    nsteps,
                },
            ) => b[llquantize_bucket(x, *factor, *low, *high, *nsteps)] += inc,
            _ => {}
        }
    }

    /// Adds another CPU's (or snapshot's) data into this one.
    pub fn merge(&mut self, other: &AggData) {
        match (self, other) {
            (AggData::Count(a), AggData::Count(b)) => *a = a.wrapping_add(*b),
            (AggData::Sum(a), AggData::Sum(b)) => *a = a.wrapping_add(*b),
            (AggData::Avg { count, sum }, AggData::Avg { count: c2, sum: s2 }) => {
                *count = count.wrapping_add(*c2);
                *sum = sum.wrapping_add(*s2);
            }
            (AggData::Min(a), AggData::Min(b)) => {
                *a = match (*a, *b) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                }
            }
            (AggData::Max(a), AggData::Max(b)) => {
                *a = match (*a, *b) {
                    (Some(x), Some(y)) => Some(x.max(y)),
                    (x, y) => x.or(y),
                }
            }
            (
                AggData::Stddev { count, sum, sum_sq },
                AggData::Stddev {
                    count: c2,
                    sum: s2,
                    sum_sq: q2,
                },
            ) => {
                *count = count.wrapping_add(*c2);
                *sum = sum.wrapping_add(*s2);
                *sum_sq = sum_sq.wrapping_add(*q2);
            }
            (AggData::Quantize(a), AggData::Quantize(b))
            | (AggData::Lquantize(a), AggData::Lquantize(b))
            | (AggData::Llquantize(a), AggData::Llquantize(b)) => {
                for (x, y) in a.iter_mut().zip(b) {
                    *x = x.wrapping_add(*y);
                }
            }
            _ => {}
        }
    }

    /// The single integer DTrace reports for a scalar aggregation, normalized by `normal`
    /// (≥ 1): count, sum, min, max divided by `normal`; avg = sum / normal / count; stddev as
    /// [`stddev`]. Distributions return `None`. Divisions truncate toward zero (C).
    pub fn scalar(&self, normal: u64) -> Option<i64> {
        let n = normal.max(1) as i64;
        Some(match self {
            AggData::Count(c) => (*c as i64) / n,
            AggData::Sum(s) => s / n,
            AggData::Min(m) => m.unwrap_or(0) / n,
            AggData::Max(m) => m.unwrap_or(0) / n,
            AggData::Avg { count, sum } => {
                if *count == 0 {
                    0
                } else {
                    sum / n / (*count as i64)
                }
            }
            AggData::Stddev { count, sum, sum_sq } => stddev(*count, *sum, *sum_sq, normal) as i64,
            _ => return None,
        })
    }

    /// Whether the printed scalar is unsigned (count and stddev print with `%llu`-like rules).
    pub fn scalar_is_unsigned(&self) -> bool {
        matches!(self, AggData::Count(_) | AggData::Stddev { .. })
    }

    /// Bucket counts of a distribution (`None` for scalars).
    pub fn buckets(&self) -> Option<&[i64]> {
        match self {
            AggData::Quantize(b) | AggData::Lquantize(b) | AggData::Llquantize(b) => Some(b),
            _ => None,
        }
    }

    fn buckets_mut(&mut self) -> Option<&mut Vec<i64>> {
        match self {
            AggData::Quantize(b) | AggData::Lquantize(b) | AggData::Llquantize(b) => Some(b),
            _ => None,
        }
    }
}

/// DTrace's `stddev()` result (libdtrace `dt_stddev`): with `n` values, sum `s` and sum of squares
/// `q`, `isqrt(q / normal / normal / n − |s / normal / n|²)` in 128-bit unsigned arithmetic, every
/// division truncating (the average `s / normal / n` is a signed 64-bit division). 0 when n = 0.
pub fn stddev(count: u64, sum: i64, sum_sq: u128, normal: u64) -> u64 {
    if count == 0 {
        return 0;
    }
    let normal = normal.max(1);
    let avg_sq = sum_sq / u128::from(normal) / u128::from(normal) / u128::from(count);
    let avg = (sum / normal as i64 / count as i64).unsigned_abs();
    let sq_avg = u128::from(avg) * u128::from(avg);
    isqrt(avg_sq.wrapping_sub(sq_avg))
}

/// Floor of the square root of a 128-bit value (DTrace's `dt_sqrt_128`: digit-by-digit).
fn isqrt(x: u128) -> u64 {
    if x == 0 {
        return 0;
    }
    let mut r = (x as f64).sqrt() as u128;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r as u64
}

/// One key of an aggregation and what it accumulated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggEntry {
    /// The key tuple (empty for an unkeyed `@x = count()`).
    pub keys: Vec<Value>,
    /// The merged data.
    pub data: AggData,
}

/// An aggregation variable as the consumer holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aggregation {
    /// The name without `@` (empty for the anonymous `@`).
    pub name: String,
    /// Variable order: DTrace numbers aggregation variables in order of first appearance in the
    /// program, and prints them in that order.
    pub id: u32,
    /// The aggregating function (one per variable, as DTrace requires).
    pub func: AggFunc,
    /// The keys and their data, in any order (printing sorts them).
    pub entries: Vec<AggEntry>,
    /// The normalization factor (`normalize(@x, n)`; 1 when not normalized).
    pub normal: u64,
}

impl Aggregation {
    /// An empty aggregation.
    pub fn new(name: impl Into<String>, id: u32, func: AggFunc) -> Self {
        Aggregation {
            name: name.into(),
            id,
            func,
            entries: Vec::new(),
            normal: 1,
        }
    }

    /// Adds `x` (with increment `inc`) under `keys`, creating the key if new: a user-space model
    /// of the BPF side, for tests.
    pub fn add(&mut self, keys: Vec<Value>, x: i64, inc: i64) {
        let func = self.func;
        match self.entries.iter_mut().find(|e| e.keys == keys) {
            Some(e) => e.data.add(&func, x, inc),
            None => {
                let mut data = AggData::zero(&func);
                data.add(&func, x, inc);
                self.entries.push(AggEntry { keys, data });
            }
        }
    }

    /// Merges entries whose key tuples are equal (first occurrence keeps its place), combining their
    /// data as [`AggData::merge`] does (sums for count/sum/avg/stddev and buckets, min of mins, max
    /// of maxes). Used after keys are replaced by what they aggregate by (a `func()` key by its
    /// symbol, see [`crate::value::Symbol::function_key`]), where distinct kernel keys become one.
    pub fn merge_equal_keys(entries: Vec<AggEntry>) -> Vec<AggEntry> {
        let mut out: Vec<AggEntry> = Vec::with_capacity(entries.len());
        let mut index: std::collections::HashMap<Vec<Value>, usize> =
            std::collections::HashMap::new();
        for e in entries {
            match index.get(&e.keys) {
                Some(&i) => out[i].data.merge(&e.data),
                None => {
                    index.insert(e.keys.clone(), out.len());
                    out.push(e);
                }
            }
        }
        out
    }

    /// `normalize(@x, n)`: values print divided by `n` (guide, "Aggregations" > "Data
    /// Normalization"). `n` = 0 is treated as 1.
    pub fn normalize(&mut self, n: u64) {
        self.normal = n.max(1);
    }

    /// `denormalize(@x)`: undo `normalize()`.
    pub fn denormalize(&mut self) {
        self.normal = 1;
    }

    /// `clear(@x)`: zero every value, keeping the keys (guide, "Aggregations" > "Clearing
    /// Aggregations").
    pub fn clear(&mut self) {
        let func = self.func;
        for e in &mut self.entries {
            e.data = AggData::zero(&func);
        }
    }

    /// `trunc(@x, n)`: keep the `n` entries with the largest values (n > 0), the `|n|` smallest
    /// (n < 0), or none (`trunc(@x)` = `n` None or 0) (guide, "Aggregations" > "Truncating
    /// Aggregations"). Values compare as in [`compare_data`].
    pub fn trunc(&mut self, n: Option<i64>) {
        let n = n.unwrap_or(0);
        if n == 0 {
            self.entries.clear();
            return;
        }
        let opts = SortOptions::default();
        let mut idx: Vec<usize> = (0..self.entries.len()).collect();
        idx.sort_by(|&a, &b| {
            compare_entries(&self.func, &self.entries[a], &self.entries[b], &opts)
        });
        let keep: Vec<usize> = if n > 0 {
            idx.iter().rev().take(n as usize).copied().collect()
        } else {
            idx.iter()
                .take(n.unsigned_abs() as usize)
                .copied()
                .collect()
        };
        let mut i = 0;
        self.entries.retain(|_| {
            let k = keep.contains(&i);
            i += 1;
            k
        });
    }

    /// The entries in DTrace's print order under `opts` (see [`SortOptions`]).
    pub fn sorted(&self, opts: &SortOptions) -> Vec<&AggEntry> {
        let mut v: Vec<&AggEntry> = self.entries.iter().collect();
        v.sort_by(|a, b| compare_entries(&self.func, a, b, opts));
        v
    }

    /// Total of the bucket counts in a distribution entry (used by JSON output).
    pub fn bucket_total(data: &AggData) -> i64 {
        data.buckets().map_or(0, |b| b.iter().sum())
    }

    /// Sets every bucket of distribution entries to zero without dropping keys (alias of
    /// [`Aggregation::clear`] for distributions; kept for symmetry with the BPF side).
    pub fn zero_buckets(&mut self) {
        for e in &mut self.entries {
            if let Some(b) = e.data.buckets_mut() {
                b.iter_mut().for_each(|x| *x = 0);
            }
        }
    }
}

/// The sort options of DTrace's aggregation printing (guide, "Options and Tunables";
/// libdtrace `dt_aggregate_qsort`).
///
/// Default order: by value ascending, ties broken by key ascending. `aggsortkey`: by key
/// instead. `aggsortrev`: the whole comparison reversed (values, keys and, for the output at
/// exit, the order of the variables). `aggsortkeypos`: the key compared first (the others
/// follow in order, wrapping around); ignored when out of range. `aggsortpos`: for a
/// `printa()` of several aggregations, which one's value sorts (out of range = 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SortOptions {
    /// `aggsortkey`.
    pub key: bool,
    /// `aggsortrev`.
    pub rev: bool,
    /// `aggsortkeypos`.
    pub keypos: usize,
    /// `aggsortpos`.
    pub pos: usize,
}

/// Compares two keys as DTrace does (`dt_aggregate_keycmp`): integers as unsigned 64-bit values
/// of their width, strings byte-wise (a prefix sorts first), symbols by address, stacks frame by
/// frame by address. Values of different kinds order Int < Str < Sym < Usym < Stack < Bytes.
pub fn compare_key(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Int(_) => 0,
            Value::Str(_) => 1,
            Value::Sym(_) => 2,
            Value::Usym { .. } => 3,
            Value::Stack(_) => 4,
            Value::Bytes(_) => 5,
        }
    }
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.bytes.cmp(&y.bytes).then(x.as_u64().cmp(&y.as_u64())),
        (Value::Str(x), Value::Str(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Bytes(x), Value::Bytes(y)) => x.cmp(y),
        (Value::Sym(x), Value::Sym(y)) => x.addr.cmp(&y.addr),
        (Value::Usym { pid: p, sym: x }, Value::Usym { pid: q, sym: y }) => {
            p.cmp(q).then(x.addr.cmp(&y.addr))
        }
        (Value::Stack(x), Value::Stack(y)) => {
            let xa = x.frames.iter().map(|f| f.addr);
            let ya = y.frames.iter().map(|f| f.addr);
            xa.cmp(ya)
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Compares key tuples starting at key `keypos` (then the following ones, wrapping around), as
/// `dt_aggregate_keycmp` with `aggsortkeypos`.
pub fn compare_keys(a: &[Value], b: &[Value], keypos: usize) -> Ordering {
    let n = a.len().min(b.len());
    let keypos = if keypos >= n { 0 } else { keypos };
    for i in 0..n {
        let k = (i + keypos) % n;
        let o = compare_key(&a[k], &b[k]);
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Compares two values of the same function as DTrace sorts them (`dt_aggregate_valcmp`):
/// count/sum/min/max by value; avg by sum / count; stddev by its result; distributions by
/// Σ bucket value × count (lquantize weighs its underflow bucket with base − 1 and its overflow
/// bucket with base + levels·step + 1; llquantize its underflow bucket with factor^low − 1), then,
/// for quantize and lquantize, by the count in the bucket holding zero.
pub fn compare_data(func: &AggFunc, a: &AggData, b: &AggData) -> Ordering {
    let weights: Option<Vec<i64>> = match *func {
        AggFunc::Quantize => Some((0..QUANTIZE_NBUCKETS).map(quantize_bucket_value).collect()),
        AggFunc::Lquantize { base, step, .. } => {
            let levels = func.lquantize_levels() as i64;
            let mut w = vec![base - 1];
            w.extend((0..levels).map(|i| base + i * step));
            w.push(base + levels * step + 1);
            Some(w)
        }
        AggFunc::Llquantize {
            factor,
            low,
            high,
            nsteps,
        } => {
            let mut w = llquantize_bucket_values(factor, low, high, nsteps);
            if let Some(first) = w.first_mut() {
                *first -= 1;
            }
            Some(w)
        }
        _ => None,
    };
    match (weights, a.buckets(), b.buckets()) {
        (Some(w), Some(x), Some(y)) => {
            let tot =
                |v: &[i64]| -> f64 { v.iter().zip(&w).map(|(&c, &wv)| c as f64 * wv as f64).sum() };
            let zero = |v: &[i64]| -> i64 {
                w.iter()
                    .position(|&wv| wv == 0)
                    .and_then(|i| v.get(i).copied())
                    .unwrap_or(0)
            };
            tot(x)
                .partial_cmp(&tot(y))
                .unwrap_or(Ordering::Equal)
                .then(zero(x).cmp(&zero(y)))
        }
        _ => match (a, b) {
            (AggData::Count(x), AggData::Count(y)) => (*x as i64).cmp(&(*y as i64)),
            _ => a.scalar(1).cmp(&b.scalar(1)),
        },
    }
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

/// The full entry comparison of DTrace's default print order under `opts`.
pub fn compare_entries(func: &AggFunc, a: &AggEntry, b: &AggEntry, opts: &SortOptions) -> Ordering {
    let o = if opts.key {
        compare_keys(&a.keys, &b.keys, opts.keypos)
    } else {
        compare_data(func, &a.data, &b.data)
            .then_with(|| compare_keys(&a.keys, &b.keys, opts.keypos))
    };
    if opts.rev { o.reverse() } else { o }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Symbol;

    fn ksym(addr: u64, name: &str, start: u64) -> Symbol {
        Symbol {
            addr,
            module: Some("vmlinux".into()),
            name: Some(name.into()),
            offset: addr - start,
        }
    }

    /// Entries with `Sym` keys replaced by their function key, as the consumer does.
    fn by_symbol(entries: &[AggEntry]) -> Vec<AggEntry> {
        let key = |k: &Value| {
            if let Value::Sym(s) = k {
                Value::Sym(s.function_key())
            } else {
                k.clone()
            }
        };
        entries
            .iter()
            .map(|e| AggEntry {
                keys: e.keys.iter().map(key).collect(),
                data: e.data.clone(),
            })
            .collect()
    }

    /// Regression: `@[func(arg0)] = count()` printed one row per sampled address ("vmlinux`mm_access"
    /// twice); DTrace keys `func()` by the symbol, so rows of one function merge.
    #[test]
    fn func_keys_merge_per_symbol() {
        // The kernel's keys are addresses; the consumer replaces each by its symbol, then merges.
        let raw = |addr: u64| vec![Value::Sym(ksym(addr, "mm_access", 0x1000))];
        let keys = |addr: u64| vec![Value::Sym(ksym(addr, "mm_access", 0x1000).function_key())];
        let other = vec![Value::Sym(ksym(0x2010, "schedule", 0x2000).function_key())];
        let mut count = Aggregation::new("", 0, AggFunc::Count);
        count.add(raw(0x1004), 0, 1);
        count.add(raw(0x1020), 0, 1);
        count.add(vec![Value::Sym(ksym(0x2010, "schedule", 0x2000))], 0, 1);
        count.add(raw(0x1020), 0, 1);
        assert_eq!(count.entries.len(), 3);
        let merged = Aggregation::merge_equal_keys(by_symbol(&count.entries));
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].keys, keys(0x1004));
        assert_eq!(merged[0].data, AggData::Count(3));
        assert_eq!(merged[1].keys, other);
        assert_eq!(merged[1].data, AggData::Count(1));
        if let Value::Sym(s) = &merged[0].keys[0] {
            assert_eq!(
                (s.addr, s.offset, s.without_offset()),
                (0x1000, 0, "vmlinux`mm_access".to_string())
            );
        }

        for (func, a, b, want) in [
            (AggFunc::Min, 7, 3, AggData::Min(Some(3))),
            (AggFunc::Max, 7, 3, AggData::Max(Some(7))),
            (AggFunc::Avg, 7, 3, AggData::Avg { count: 2, sum: 10 }),
            (AggFunc::Sum, 7, 3, AggData::Sum(10)),
        ] {
            let mut agg = Aggregation::new("", 0, func);
            agg.add(raw(0x1004), a, 1);
            agg.add(raw(0x1008), b, 1);
            assert_eq!(agg.entries.len(), 2);
            let merged = Aggregation::merge_equal_keys(by_symbol(&agg.entries));
            assert_eq!(merged.len(), 1, "{func:?}");
            assert_eq!(merged[0].data, want, "{func:?}");
        }
        let mut q = Aggregation::new("", 0, AggFunc::Quantize);
        q.add(raw(0x1004), 1, 1);
        q.add(raw(0x1008), 1, 1);
        q.add(raw(0x100c), 1000, 1);
        let merged = Aggregation::merge_equal_keys(by_symbol(&q.entries));
        assert_eq!(merged.len(), 1);
        let b = merged[0].data.buckets().expect("buckets");
        assert_eq!((b[quantize_bucket(1)], b[quantize_bucket(1000)]), (2, 1));
    }

    /// `mod()`/`umod()` keys are the module: every address in it is one row, printed bare.
    #[test]
    fn mod_keys_merge_per_module() {
        let k = |s: Symbol| vec![Value::Sym(s.module_key())];
        let mut agg = Aggregation::new("", 0, AggFunc::Count);
        agg.add(k(ksym(0x1004, "mm_access", 0x1000)), 0, 1);
        agg.add(k(ksym(0x2010, "schedule", 0x2000)), 0, 1);
        agg.add(k(Symbol::unknown(0x5000)), 0, 1);
        let merged = Aggregation::merge_equal_keys(agg.entries);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].data, AggData::Count(2));
        let Value::Sym(s) = &merged[0].keys[0] else {
            panic!("a symbol key")
        };
        assert_eq!(
            (s.without_offset(), s.with_offset()),
            ("vmlinux".to_string(), "vmlinux".to_string())
        );
        assert_eq!(
            (s.module.as_deref(), s.name.as_deref(), s.addr),
            (Some("vmlinux"), None, 0)
        );
        let Value::Sym(s) = &merged[1].keys[0] else {
            panic!("a symbol key")
        };
        assert_eq!(s.without_offset(), "0x5000");
    }

    // Guide, "Aggregations" > quantize(): powers of two; the kernel's dtrace_aggregate_quantize.
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
    #[test]
    fn scalars_and_stddev() {
        let mut a = AggData::zero(&AggFunc::Avg);
        for x in [1, 2, 4] {
            a.add(&AggFunc::Avg, x, 1);
        }
        assert_eq!(a.scalar(1), Some(2)); // 7 / 3 truncates
        let mut n = AggData::zero(&AggFunc::Avg);
        for x in [-1, -2, -4] {
            n.add(&AggFunc::Avg, x, 1);
        }
        assert_eq!(n.scalar(1), Some(-2)); // toward zero
        // Values 2, 4, 4, 4, 5, 5, 7, 9: population stddev exactly 2.
        let mut s = AggData::zero(&AggFunc::Stddev);
        for x in [2, 4, 4, 4, 5, 5, 7, 9] {
            s.add(&AggFunc::Stddev, x, 1);
        }
        assert_eq!(s.scalar(1), Some(2));
        // 1, 2: avg of squares 5/2 = 2, avg 3/2 = 1: sqrt(2 - 1) = 1.
        assert_eq!(stddev(2, 3, 5, 1), 1);
        assert_eq!(stddev(0, 0, 0, 1), 0);
        // Large values use 128-bit squares: {0, 2^40}: avg² = 2^78, avg of squares 2^79.
        let big = 1i64 << 40;
        assert_eq!(stddev(2, big, (big as u128) * (big as u128), 1), 1u64 << 39);
    }

    #[test]
    fn words_decode_and_merge() {
        let mut m = AggData::from_words(&AggFunc::Min, &[0, 0]).unwrap();
        assert_eq!(m, AggData::Min(None));
        m.merge(&AggData::from_words(&AggFunc::Min, &[3, (-7i64) as u64]).unwrap());
        m.merge(&AggData::from_words(&AggFunc::Min, &[1, 4]).unwrap());
        assert_eq!(m, AggData::Min(Some(-7)));
        let s = AggData::from_words(&AggFunc::Stddev, &[2, 3, 5, 1]).unwrap();
        assert_eq!(
            s,
            AggData::Stddev {
                count: 2,
                sum: 3,
                sum_sq: 5 + (1u128 << 64)
            }
        );
        assert!(AggData::from_words(&AggFunc::Quantize, &[0; 3]).is_err());
    }

    // Guide, "Aggregations" > "Truncating Aggregations", "Clearing Aggregations".
    #[test]
    fn trunc_clear_normalize() {
        let mut a = Aggregation::new("a", 0, AggFunc::Count);
        for (k, n) in [("a", 3), ("b", 1), ("c", 7), ("d", 5)] {
            for _ in 0..n {
                a.add(vec![Value::str(k)], 0, 1);
            }
        }
        let mut top = a.clone();
        top.trunc(Some(2));
        let keys: Vec<_> = top
            .sorted(&SortOptions::default())
            .iter()
            .map(|e| e.keys[0].clone())
            .collect();
        assert_eq!(keys, vec![Value::str("d"), Value::str("c")]);
        let mut bottom = a.clone();
        bottom.trunc(Some(-1));
        assert_eq!(bottom.entries.len(), 1);
        assert_eq!(bottom.entries[0].keys[0], Value::str("b"));
        let mut cleared = a.clone();
        cleared.clear();
        assert_eq!(cleared.entries.len(), 4);
        assert!(cleared.entries.iter().all(|e| e.data == AggData::Count(0)));
        let mut all = a.clone();
        all.trunc(None);
        assert!(all.entries.is_empty());
        a.normalize(2);
        assert_eq!(a.entries[2].data.scalar(a.normal), Some(3)); // c: 7 / 2
    }

    #[test]
    fn sort_orders() {
        let mut a = Aggregation::new("a", 0, AggFunc::Sum);
        a.add(vec![Value::str("b"), Value::i64(2)], 5, 1);
        a.add(vec![Value::str("a"), Value::i64(3)], 5, 1);
        a.add(vec![Value::str("c"), Value::i64(1)], 1, 1);
        let order = |o: SortOptions| -> Vec<Value> {
            a.sorted(&o).iter().map(|e| e.keys[0].clone()).collect()
        };
        // By value, ties by key.
        assert_eq!(
            order(SortOptions::default()),
            vec![Value::str("c"), Value::str("a"), Value::str("b")]
        );
        assert_eq!(
            order(SortOptions {
                rev: true,
                ..Default::default()
            }),
            vec![Value::str("b"), Value::str("a"), Value::str("c")]
        );
        assert_eq!(
            order(SortOptions {
                key: true,
                ..Default::default()
            }),
            vec![Value::str("a"), Value::str("b"), Value::str("c")]
        );
        assert_eq!(
            order(SortOptions {
                key: true,
                keypos: 1,
                ..Default::default()
            }),
            vec![Value::str("c"), Value::str("b"), Value::str("a")]
        );
    }
}
