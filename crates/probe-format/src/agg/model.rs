//! The consumer's model of an aggregation variable: [`Aggregation`] with its [`AggEntry`] rows and
//! DTrace's `normalize()`, `denormalize()`, `trunc()` and `clear()`.

use super::*;

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
}
