//! What the BPF side accumulates per key: [`AggData`], decoded from each CPU's words and merged
//! across CPUs, and DTrace's `stddev()` arithmetic.

use super::*;

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

    pub(super) fn buckets_mut(&mut self) -> Option<&mut Vec<i64>> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
