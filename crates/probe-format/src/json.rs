//! Strict JSON Lines output (`sightline probe --json`): one complete JSON object per line, one
//! line per probe record, aggregation, drop report or run-time error. Schemas (and examples) are in
//! `docs/probe-json.md`; every object has a `"type"` field naming its schema.
//!
//! Every line is the `serde_json` serialization of one [`crate::event::Event`] (one schema for the
//! CLI and the library). The functions return the object ([`serde_json::Value`]) or the line without its trailing
//! newline (`*_line`); the caller writes `line + "\n"` and nothing else to stdout.

use crate::agg::{
    AggData, AggFunc, Aggregation, QUANTIZE_NBUCKETS, QUANTIZE_ZERO_BUCKET, SortOptions,
    llquantize_ranges, quantize_bucket_value,
};
use crate::value::Value;
use serde_json::Value as Json;

/// A value as JSON: integers as numbers (unsigned types as unsigned), strings as strings, raw
/// bytes as `{"bytes": "<hex>"}`, symbols as `{"addr", "module", "symbol", "offset", "text"}`
/// (user symbols add `"pid"`), stacks as `{"user": bool, "frames": [symbol, ...]}`.
pub fn value_json(v: &Value) -> Json {
    serde_json::to_value(v).expect("a value serializes")
}

/// One bucket of a distribution: the inclusive range of values it holds (`None` = unbounded) and
/// its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Smallest value in the bucket, `None` for an underflow bucket.
    pub min: Option<i64>,
    /// Largest value in the bucket, `None` for an overflow bucket.
    pub max: Option<i64>,
    /// The count (may be negative with a negative increment).
    pub count: i64,
}

/// The nonzero buckets of a distribution with their value ranges, lowest first (empty for
/// scalars). quantize: bucket 63 is `[0, 0]`, positive buckets `[2^k, 2^(k+1) − 1]`, negative
/// ones `[−2^(k+1) + 1, −2^k]`, the extremes reach `i64::MIN`/`i64::MAX`. lquantize: `[null,
/// base − 1]`, `[base + i·step, base + (i+1)·step − 1]`, `[base + levels·step, null]`.
/// llquantize (Oracle's symmetric layout): `[null, −factor^(high+1)]`, the negative buckets,
/// the middle `[−(factor^low − 1), factor^low − 1]`, the positive buckets, `[factor^(high+1),
/// null]` ([`crate::agg::llquantize_ranges`]).
pub fn buckets(func: &AggFunc, data: &AggData) -> Vec<Bucket> {
    let Some(counts) = data.buckets() else {
        return Vec::new();
    };
    let range = |i: usize| -> (Option<i64>, Option<i64>) {
        match *func {
            AggFunc::Quantize => {
                let lo = if i == 0 {
                    i64::MIN
                } else if i <= QUANTIZE_ZERO_BUCKET {
                    quantize_bucket_value(i - 1) + 1
                } else {
                    quantize_bucket_value(i)
                };
                let hi = if i == QUANTIZE_NBUCKETS - 1 {
                    i64::MAX
                } else if i < QUANTIZE_ZERO_BUCKET {
                    quantize_bucket_value(i)
                } else {
                    quantize_bucket_value(i + 1) - 1
                };
                // The zero bucket holds exactly 0; negative buckets are (next lower label, label].
                if i == QUANTIZE_ZERO_BUCKET {
                    (Some(0), Some(0))
                } else {
                    (Some(lo), Some(hi))
                }
            }
            AggFunc::Lquantize { base, step, .. } => {
                let levels = counts.len() - 2;
                if i == 0 {
                    (None, Some(base - 1))
                } else if i == levels + 1 {
                    (Some(base + levels as i64 * step), None)
                } else {
                    let lo = base + (i as i64 - 1) * step;
                    (Some(lo), Some(lo + step - 1))
                }
            }
            AggFunc::Llquantize {
                factor,
                low,
                high,
                nsteps,
            } => {
                let n = counts.len();
                match llquantize_ranges(factor, low, high, nsteps)
                    .get(i)
                    .copied()
                    .flatten()
                {
                    Some((lo, hi)) => ((i != 0).then_some(lo), (i + 1 != n).then_some(hi)),
                    None => (None, None),
                }
            }
            _ => (None, None),
        }
    };
    counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c != 0)
        .map(|(i, &count)| {
            let (min, max) = range(i);
            Bucket { min, max, count }
        })
        .collect()
}

/// An aggregation as one JSON object:
/// `{"type": "aggregation", "name", "function", "params", "normal", "entries": [{"keys": [...],
/// "value", ...}]}` with entries in DTrace's print order under `opts`: the serialization of
/// [`crate::event::Event::Aggregation`].
pub fn aggregation_json(agg: &Aggregation, opts: &SortOptions) -> Json {
    serde_json::to_value(crate::event::Event::Aggregation(
        crate::event::AggregationSnapshot::of(agg, opts),
    ))
    .expect("an aggregation serializes")
}

/// [`aggregation_json`] as one line (no trailing newline).
pub fn aggregation_line(agg: &Aggregation, opts: &SortOptions) -> String {
    aggregation_json(agg, opts).to_string()
}

/// The probe a record came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRef {
    /// The probe's ID (as `-l` lists it).
    pub id: u32,
    /// Provider (`syscall`, `profile`, `dtrace`, tracepoint category providers, ...).
    pub provider: String,
    /// Module.
    pub module: String,
    /// Function.
    pub function: String,
    /// Name.
    pub name: String,
}

/// One piece of data a probe firing recorded, in clause order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordItem {
    /// `trace(v)` (also `stack()`, `ustack()`, `sym()` ... used as statements).
    Trace(Value),
    /// `printf(fmt, args...)`: the formatted text and the arguments.
    Printf {
        /// The format string.
        format: String,
        /// The output text.
        text: String,
        /// The arguments as recorded.
        args: Vec<Value>,
    },
    /// `print(ptr)`: the pointee's type, the address and the printed text
    /// ([`crate::print::format_print`]).
    Print {
        /// The C name of the pointee's type (`struct task_struct`).
        type_name: String,
        /// The pointer's value.
        address: u64,
        /// The output text, one line per value, each ending in a newline.
        text: String,
    },
    /// `exit(status)`.
    Exit(i32),
}

/// A probe record as one JSON object:
/// `{"type": "record", "cpu", "probe": {"id", "provider", "module", "function", "name"},
/// "timestamp_ns", "data": [{"action": "trace", "value"} | {"action": "printf", "format", "text",
/// "args"} | {"action": "print", "type", "address", "text"} | {"action": "exit", "status"}]}`. `timestamp_ns` is the BPF `bpf_ktime_get_ns()` time
/// of the firing (CLOCK_MONOTONIC, ns), `null` when not recorded.
pub fn record_json(
    cpu: u32,
    probe: &ProbeRef,
    timestamp_ns: Option<u64>,
    items: &[RecordItem],
) -> Json {
    serde_json::to_value(crate::event::Event::Record(crate::event::Record {
        cpu,
        probe: probe.clone(),
        clause: None,
        timestamp_ns,
        data: items.to_vec(),
    }))
    .expect("a record serializes")
}

/// [`record_json`] as one line.
pub fn record_line(
    cpu: u32,
    probe: &ProbeRef,
    timestamp_ns: Option<u64>,
    items: &[RecordItem],
) -> String {
    record_json(cpu, probe, timestamp_ns, items).to_string()
}

/// Kinds of drops DTrace reports (dt_handle.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropKind {
    /// Records lost because the principal buffer (ring buffer) was full, on one CPU.
    Principal,
    /// Aggregation updates lost (map full), on one CPU.
    Aggregation,
    /// Dynamic variable drops (associative arrays, thread-locals: map full).
    Dynamic,
    /// Speculation drops: a record did not fit its speculative buffer (`specsize`).
    Speculative,
    /// Failed speculations: `speculation()` found no free speculative buffer (`nspec`).
    SpecUnavailable,
    /// Run-time errors (faults) whose ERROR record was lost because the ring buffer was full,
    /// on one CPU: the kernel's error count minus the ERROR records read. The errors whose
    /// record arrived are reported one by one ("error on enabled probe ID ...").
    Errors,
}

impl DropKind {
    /// Every kind, in declaration order.
    pub const ALL: [DropKind; 6] = [
        DropKind::Principal,
        DropKind::Aggregation,
        DropKind::Dynamic,
        DropKind::Speculative,
        DropKind::SpecUnavailable,
        DropKind::Errors,
    ];

    /// The kind's name in JSON (`"principal"`, `"speculation_unavailable"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DropKind::Principal => "principal",
            DropKind::Aggregation => "aggregation",
            DropKind::Dynamic => "dynamic",
            DropKind::Speculative => "speculative",
            DropKind::SpecUnavailable => "speculation_unavailable",
            DropKind::Errors => "errors",
        }
    }
}

/// DTrace's drop message (without the `dtrace: ` prefix or newline): per CPU
/// `"N drops on CPU k"` / `"N aggregation drops on CPU k"`, global `"N dynamic variable drops"`,
/// `"N speculative drops"`, `"N failed speculations (no speculative buffer available)"`,
/// `"N errors on CPU k (their ERROR records were dropped)"`
/// (singular when N = 1) (dt_handle.c `dt_handle_cpudrop`, `dt_handle_status`).
pub fn drop_message(kind: DropKind, cpu: Option<u32>, count: u64) -> String {
    let s = if count > 1 { "s" } else { "" };
    match kind {
        DropKind::Principal | DropKind::Aggregation => {
            let what = if kind == DropKind::Aggregation {
                "aggregation "
            } else {
                ""
            };
            match cpu {
                Some(c) => format!("{count} {what}drop{s} on CPU {c}"),
                None => format!("{count} {what}drop{s}"),
            }
        }
        DropKind::Dynamic => format!("{count} dynamic variable drop{s}"),
        DropKind::Speculative => format!("{count} speculative drop{s}"),
        DropKind::SpecUnavailable => {
            format!("{count} failed speculation{s} (no speculative buffer available)")
        }
        DropKind::Errors => match cpu {
            Some(c) => format!("{count} error{s} on CPU {c} (their ERROR records were dropped)"),
            None => format!("{count} error{s} (their ERROR records were dropped)"),
        },
    }
}

/// A drop report as one line: `{"type": "drops", "kind", "cpu", "count", "message"}` (`cpu` null
/// for the global kinds).
pub fn drops_line(kind: DropKind, cpu: Option<u32>, count: u64) -> String {
    serde_json::to_string(&crate::event::Event::Drops(crate::event::Drops::new(
        kind, cpu, count,
    )))
    .expect("drops serialize")
}

/// A run-time error (what fires the ERROR probe: a bad address in `copyinstr()`, a division by
/// zero) as one line: `{"type": "error", "probe": {...}, "message"}`.
pub fn error_line(probe: &ProbeRef, message: &str) -> String {
    serde_json::to_string(&crate::event::Event::Error(crate::event::ProbeError {
        probe: probe.clone(),
        message: message.to_string(),
    }))
    .expect("an error serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Int, Symbol};
    use serde_json::json;

    #[test]
    fn values() {
        assert_eq!(value_json(&Value::i64(-3)), json!(-3));
        assert_eq!(value_json(&Value::u64(u64::MAX)), json!(u64::MAX));
        assert_eq!(value_json(&Value::Int(Int::i32(-1))), json!(-1));
        assert_eq!(value_json(&Value::str("a\"b")), json!("a\"b"));
        assert_eq!(
            value_json(&Value::Bytes(vec![0, 255])),
            json!({"bytes": "00ff"})
        );
        let s = Symbol {
            addr: 16,
            module: Some("vmlinux".into()),
            name: Some("f".into()),
            offset: 4,
        };
        assert_eq!(value_json(&Value::Sym(s))["text"], json!("vmlinux`f+0x4"));
    }

    // Guide, "Aggregations" > quantize(): each row counts values ≥ its value and < the next.
    #[test]
    fn quantize_bucket_ranges() {
        let mut a = Aggregation::new("q", 0, AggFunc::Quantize);
        for v in [0, 1, 3, -3, 1 << 40] {
            a.add(vec![], v, 1);
        }
        let b = buckets(&a.func, &a.entries[0].data);
        let got: Vec<(Option<i64>, Option<i64>, i64)> =
            b.iter().map(|b| (b.min, b.max, b.count)).collect();
        assert_eq!(
            got,
            vec![
                (Some(-3), Some(-2), 1),
                (Some(0), Some(0), 1),
                (Some(1), Some(1), 1),
                (Some(2), Some(3), 1),
                (Some(1 << 40), Some((1 << 41) - 1), 1)
            ]
        );
    }

    #[test]
    fn lquantize_and_llquantize_ranges() {
        let f = AggFunc::Lquantize {
            base: 0,
            limit: 10,
            step: 5,
        };
        let mut d = AggData::zero(&f);
        for v in [-1, 7, 100] {
            d.add(&f, v, 1);
        }
        let got: Vec<_> = buckets(&f, &d).iter().map(|b| (b.min, b.max)).collect();
        assert_eq!(
            got,
            vec![(None, Some(-1)), (Some(5), Some(9)), (Some(10), None)]
        );
        let f = AggFunc::Llquantize {
            factor: 10,
            low: 0,
            high: 2,
            nsteps: 10,
        };
        let mut d = AggData::zero(&f);
        for v in [0, 25, 5000] {
            d.add(&f, v, 1);
        }
        let got: Vec<_> = buckets(&f, &d).iter().map(|b| (b.min, b.max)).collect();
        assert_eq!(
            got,
            vec![(Some(0), Some(0)), (Some(20), Some(29)), (Some(1000), None)]
        );
    }

    // Every aggregating function has a JSON form with its documented fields (docs/probe-json.md).
    #[test]
    fn every_function_has_its_fields() {
        let funcs = [
            AggFunc::Count,
            AggFunc::Sum,
            AggFunc::Avg,
            AggFunc::Min,
            AggFunc::Max,
            AggFunc::Stddev,
            AggFunc::Quantize,
            AggFunc::Lquantize {
                base: 0,
                limit: 10,
                step: 2,
            },
            AggFunc::Llquantize {
                factor: 10,
                low: 0,
                high: 3,
                nsteps: 10,
            },
        ];
        for f in funcs {
            let mut a = Aggregation::new("x", 0, f);
            for v in [1, 3, 7] {
                a.add(vec![Value::str("k"), Value::i64(2)], v, 1);
            }
            let v: Json =
                serde_json::from_str(&aggregation_line(&a, &SortOptions::default())).unwrap();
            assert_eq!(v["function"], f.name());
            let e = &v["entries"][0];
            assert_eq!(e["keys"], json!(["k", 2]));
            let expected_value = match f {
                AggFunc::Count => json!(3),
                AggFunc::Sum => json!(11),
                AggFunc::Avg => json!(3),
                AggFunc::Min => json!(1),
                AggFunc::Max => json!(7),
                AggFunc::Stddev => json!(3), // isqrt(59/3 - (11/3)^2) = isqrt(19 - 9) = 3
                _ => Json::Null,
            };
            assert_eq!(e["value"], expected_value, "{}", f.name());
            if f.is_distribution() {
                let total: i64 = e["buckets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b["count"].as_i64().unwrap())
                    .sum();
                assert_eq!(total, 3, "{}", f.name());
            } else {
                assert!(e.get("buckets").is_none());
            }
            if matches!(f, AggFunc::Avg | AggFunc::Stddev) {
                assert_eq!(e["count"], json!(3));
                assert_eq!(e["sum"], json!(11));
            }
            if f == AggFunc::Stddev {
                assert_eq!(e["sum_of_squares"], json!("59"));
            }
        }
    }

    #[test]
    fn lines_are_single_json_objects() {
        let mut a = Aggregation::new("lat", 0, AggFunc::Avg);
        a.add(vec![Value::str("bash")], 10, 1);
        a.add(vec![Value::str("bash")], 21, 1);
        let line = aggregation_line(&a, &SortOptions::default());
        assert!(!line.contains('\n'));
        let v: Json = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "aggregation");
        assert_eq!(v["function"], "avg");
        assert_eq!(v["entries"][0]["keys"], json!(["bash"]));
        assert_eq!(v["entries"][0]["value"], json!(15));
        assert_eq!(v["entries"][0]["count"], json!(2));
        assert_eq!(v["entries"][0]["sum"], json!(31));
        let p = ProbeRef {
            id: 1,
            provider: "dtrace".into(),
            module: "".into(),
            function: "".into(),
            name: "BEGIN".into(),
        };
        let r = record_line(
            0,
            &p,
            Some(5),
            &[
                RecordItem::Printf {
                    format: "%d\n".into(),
                    text: "1\n".into(),
                    args: vec![Value::i64(1)],
                },
                RecordItem::Exit(0),
            ],
        );
        assert!(!r.contains('\n'));
        let v: Json = serde_json::from_str(&r).unwrap();
        assert_eq!(v["data"][0]["text"], "1\n");
        assert_eq!(v["data"][1], json!({"action": "exit", "status": 0}));
        assert_eq!(
            drop_message(DropKind::Principal, Some(1), 3),
            "3 drops on CPU 1"
        );
        assert_eq!(
            drop_message(DropKind::Aggregation, Some(0), 1),
            "1 aggregation drop on CPU 0"
        );
        assert_eq!(
            drop_message(DropKind::Dynamic, None, 2),
            "2 dynamic variable drops"
        );
        assert_eq!(
            drop_message(DropKind::Speculative, None, 38),
            "38 speculative drops"
        );
        assert_eq!(
            drop_message(DropKind::SpecUnavailable, None, 1),
            "1 failed speculation (no speculative buffer available)"
        );
        assert_eq!(
            drop_message(DropKind::SpecUnavailable, None, 2),
            "2 failed speculations (no speculative buffer available)"
        );
        let v: Json = serde_json::from_str(&drops_line(DropKind::Dynamic, None, 2)).unwrap();
        assert_eq!(v["cpu"], Json::Null);
    }
}
