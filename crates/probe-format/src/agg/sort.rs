//! DTrace's print order of aggregation rows (libdtrace `dt_aggregate.c`): [`SortOptions`] and the
//! key, data and entry comparisons.

use super::*;

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
    /// `aggzoom` (not a sort order, but printed with it): distribution bars are scaled to the
    /// largest bucket shown instead of to the total (illumos `dt_quantize_total`: the highest
    /// bar is 95% of the 40 columns, `DTRACE_AGGZOOM_MAX`).
    pub zoom: bool,
    /// `agghist`: `count()` and `sum()` aggregations print as a histogram, one bar per entry
    /// (illumos `DTRACE_A_TOTAL`; see `output::format_aggregation`).
    pub hist: bool,
    /// `aggpack`: `quantize()` and `lquantize()` aggregations print packed, one line per entry
    /// (illumos `DTRACE_A_MINMAXBIN`).
    pub pack: bool,
    /// `aggpack`'s bars in UTF-8 block elements (U+2581..U+2588) rather than ASCII `_x X`
    /// (illumos `dt_print_packed`: option `encoding`, else the terminal).
    pub utf8: bool,
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
/// bucket with base + levels·step + 1; llquantize, as Oracle's dt_aggregate_llquantizedsum, each
/// bucket with its row's value, the middle one with 0), then by the count in the bucket holding
/// zero (llquantize: the middle bucket).
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
            // Oracle's dt_aggregate_llquantizedsum: each bucket by its label's value (0 for
            // the middle bucket, ± factor^(high+1) for the overflow buckets); the "zero" of the
            // tie-break is the middle bucket.
            let w = llquantize_bucket_values(factor, low, high, nsteps);
            let zero = llquantize_zero_bucket(factor, low, high, nsteps);
            return match (a.buckets(), b.buckets()) {
                (Some(x), Some(y)) => {
                    let tot = |v: &[i64]| -> f64 {
                        v.iter()
                            .zip(&w)
                            .map(|(&c, wv)| c as f64 * wv.unwrap_or(0) as f64)
                            .sum()
                    };
                    let z = |v: &[i64]| v.get(zero).copied().unwrap_or(0);
                    tot(x)
                        .partial_cmp(&tot(y))
                        .unwrap_or(Ordering::Equal)
                        .then(z(x).cmp(&z(y)))
                }
                _ => Ordering::Equal,
            };
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
