//! The typed events of a run: what a D program's consumer produces, as Rust values with `serde`.
//!
//! One schema: the JSON Lines output of `sightline probe --json` is exactly the `serde_json`
//! serialization of these types, one [`Event`] per line (`docs/probe-json.md`). A program using
//! the `sightline-probe` library receives the same values.
//!
//! - [`Event::Record`] ([`Record`]): one probe firing: its probe ([`ProbeRef`]), CPU, timestamp,
//!   clause and recorded items ([`RecordItem`]: `trace()`, `printf()`, `exit()`).
//! - [`Event::Aggregation`] ([`AggregationSnapshot`]): one aggregation's entries, with
//!   distributions as numeric [`Bucket`]s.
//! - [`Event::Drops`] ([`Drops`]): records, aggregation updates, dynamic variables or
//!   speculations lost ([`DropKind`]).
//! - [`Event::Error`] ([`ProbeError`]): a run-time fault (what fires DTrace's ERROR probe).
//! - [`Event::Exit`] ([`Exit`]): why tracing stopped and the `exit()` status, last.
//!
//! ```
//! use probe_format::event::{Event, Exit, ExitReason};
//! let e = Event::Exit(Exit { reason: ExitReason::Exit, status: Some(3) });
//! let line = serde_json::to_string(&e).unwrap();
//! assert_eq!(line, r#"{"type":"exit","reason":"exit","status":3}"#);
//! assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), e);
//! ```

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::agg::{AggData, AggFunc, Aggregation, SortOptions};
use crate::value::{Int, Stack, Symbol, Value};

pub use crate::json::{Bucket, DropKind, ProbeRef, RecordItem};

/// One event of a run, tagged by `"type"` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A probe firing's recorded data.
    Record(Record),
    /// One aggregation's entries (at a `printa()`, at exit, or on demand).
    Aggregation(AggregationSnapshot),
    /// Lost data, counted.
    Drops(Drops),
    /// A run-time fault (the ERROR probe).
    Error(ProbeError),
    /// The end of the run.
    Exit(Exit),
}

/// One probe firing (`"type": "record"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The CPU the probe fired on.
    pub cpu: u32,
    /// The probe.
    pub probe: ProbeRef,
    /// The clause (0-based, program order) whose actions recorded it; its shape is the clause's
    /// schema. Absent in lines written before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clause: Option<usize>,
    /// `bpf_ktime_get_ns()` at the firing (CLOCK_MONOTONIC, ns), `None` when not recorded.
    pub timestamp_ns: Option<u64>,
    /// The recorded items, in clause order.
    pub data: Vec<RecordItem>,
}

impl Record {
    /// The record's values in order: each `trace()` value, then each `printf()` argument (what a
    /// clause schema's fields describe). `exit()` is not a value.
    pub fn values(&self) -> Vec<&Value> {
        let mut out = Vec::new();
        for it in &self.data {
            match it {
                RecordItem::Trace(v) => out.push(v),
                RecordItem::Printf { args, .. } => out.extend(args.iter()),
                RecordItem::Print { .. } | RecordItem::Exit(_) => {}
            }
        }
        out
    }

    /// The record's values ([`Record::values`]) decoded into `T`, position by position: a
    /// `#[derive(Deserialize)]` struct takes its fields in declaration order (serde's sequence
    /// form), a tuple takes them as they come. Integers decode into any Rust integer type that
    /// holds them, strings into `String`, symbols and stacks into [`Symbol`]/[`Stack`] or their
    /// JSON forms.
    ///
    /// # Errors
    /// `serde_json::Error` when the values do not fit `T` (wrong count or type).
    ///
    /// ```
    /// use probe_format::event::{ProbeRef, Record, RecordItem};
    /// use probe_format::Value;
    /// #[derive(serde::Deserialize, Debug, PartialEq)]
    /// struct Open { pid: u32, path: String }
    /// let rec = Record {
    ///     cpu: 0,
    ///     probe: ProbeRef { id: 1, provider: "syscall".into(), module: "".into(),
    ///                       function: "openat".into(), name: "entry".into() },
    ///     clause: Some(0),
    ///     timestamp_ns: Some(1),
    ///     data: vec![RecordItem::Printf {
    ///         format: "%d %s\n".into(),
    ///         text: "7 /etc/passwd\n".into(),
    ///         args: vec![Value::i64(7), Value::str("/etc/passwd")],
    ///     }],
    /// };
    /// let o: Open = rec.decode().unwrap();
    /// assert_eq!(o, Open { pid: 7, path: "/etc/passwd".into() });
    /// ```
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        let seq: Vec<serde_json::Value> = self
            .values()
            .into_iter()
            .map(|v| serde_json::to_value(v).expect("values serialize"))
            .collect();
        serde_json::from_value(serde_json::Value::Array(seq))
    }

    /// The text the record's `printf()`s and `print()`s produced, concatenated.
    pub fn text(&self) -> String {
        self.data
            .iter()
            .filter_map(|it| match it {
                RecordItem::Printf { text, .. } | RecordItem::Print { text, .. } => {
                    Some(text.as_str())
                }
                _ => None,
            })
            .collect()
    }
}

/// An aggregation's entries at one moment (`"type": "aggregation"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AggregationSnapshot {
    /// The variable's name without `@` (`""` for `@`).
    pub name: String,
    /// The aggregating function: `count`, `sum`, `avg`, `min`, `max`, `stddev`, `quantize`,
    /// `lquantize`, `llquantize`.
    pub function: String,
    /// lquantize's and llquantize's constants (all `None` for the other functions).
    pub params: AggParams,
    /// The `normalize()` factor (1 if none); `value` and bucket counts are divided by it.
    pub normal: u64,
    /// The entries in DTrace's print order (value ascending unless `aggsort*` options say
    /// otherwise).
    pub entries: Vec<AggEntrySnapshot>,
}

impl AggregationSnapshot {
    /// The snapshot of `agg` with entries ordered as DTrace prints them under `opts`.
    pub fn of(agg: &Aggregation, opts: &SortOptions) -> AggregationSnapshot {
        let normal = agg.normal.max(1);
        let entries = agg
            .sorted(opts)
            .into_iter()
            .map(|e| AggEntrySnapshot::of(&agg.func, &e.data, e.keys.clone(), normal))
            .collect();
        AggregationSnapshot {
            name: agg.name.clone(),
            function: agg.func.name().to_string(),
            params: AggParams::of(&agg.func),
            normal: agg.normal,
            entries,
        }
    }

    /// The entry whose keys equal `keys` (compared as [`Value`]s), if any.
    pub fn get(&self, keys: &[Value]) -> Option<&AggEntrySnapshot> {
        self.entries.iter().find(|e| e.keys == keys)
    }
}

/// lquantize (`base`, `limit`, `step`) and llquantize (`factor`, `low`, `high`, `nsteps`)
/// constants; empty (`{}` in JSON) for the other functions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggParams {
    /// lquantize: the lowest bucket's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<i64>,
    /// lquantize: the upper limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
    /// lquantize: the bucket width.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<i64>,
    /// llquantize: the factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<u16>,
    /// llquantize: the lowest magnitude.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<u16>,
    /// llquantize: the highest magnitude.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<u16>,
    /// llquantize: steps per magnitude.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nsteps: Option<u16>,
}

impl AggParams {
    /// The constants of `func`.
    pub fn of(func: &AggFunc) -> AggParams {
        match *func {
            AggFunc::Lquantize { base, limit, step } => AggParams {
                base: Some(base),
                limit: Some(limit),
                step: Some(step),
                ..AggParams::default()
            },
            AggFunc::Llquantize {
                factor,
                low,
                high,
                nsteps,
            } => AggParams {
                factor: Some(factor),
                low: Some(low),
                high: Some(high),
                nsteps: Some(nsteps),
                ..AggParams::default()
            },
            _ => AggParams::default(),
        }
    }
}

/// One aggregation entry: its keys and its value(s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AggEntrySnapshot {
    /// The key tuple (`[]` for an unkeyed aggregation).
    pub keys: Vec<Value>,
    /// The number DTrace prints (count, sum, min, max, avg truncated, stddev), normalized; `None`
    /// for distributions. (Every value fits `i64` or `u64`; JSON carries it as a number.)
    #[serde(with = "scalar")]
    pub value: Option<i128>,
    /// avg, stddev: the number of values (not normalized).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// avg, stddev: their sum (not normalized).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<i64>,
    /// stddev: the sum of squares, a decimal string (128-bit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum_of_squares: Option<String>,
    /// quantize, lquantize, llquantize: the nonzero buckets, lowest first, counts normalized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<Vec<Bucket>>,
}

impl AggEntrySnapshot {
    /// The entry of `data` (of `func`) with `keys`, normalized by `normal` (≥ 1).
    pub fn of(func: &AggFunc, data: &AggData, keys: Vec<Value>, normal: u64) -> AggEntrySnapshot {
        let value = data.scalar(normal).map(|v| {
            if data.scalar_is_unsigned() {
                i128::from(v as u64)
            } else {
                i128::from(v)
            }
        });
        let (count, sum, sum_of_squares) = match data {
            AggData::Avg { count, sum } => (Some(*count), Some(*sum), None),
            AggData::Stddev { count, sum, sum_sq } => {
                (Some(*count), Some(*sum), Some(sum_sq.to_string()))
            }
            _ => (None, None, None),
        };
        let buckets = func.is_distribution().then(|| {
            crate::json::buckets(func, data)
                .into_iter()
                .map(|b| Bucket {
                    count: b.count / normal.max(1) as i64,
                    ..b
                })
                .collect()
        });
        AggEntrySnapshot {
            keys,
            value,
            count,
            sum,
            sum_of_squares,
            buckets,
        }
    }

    /// The sum of the bucket counts (a distribution's number of values), `None` for scalars.
    pub fn total(&self) -> Option<i64> {
        self.buckets
            .as_ref()
            .map(|b| b.iter().map(|b| b.count).sum())
    }
}

/// Lost data (`"type": "drops"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drops {
    /// What was lost.
    pub kind: DropKind,
    /// The CPU, for the per-CPU kinds (principal, aggregation, errors).
    pub cpu: Option<u32>,
    /// How many since the last report.
    pub count: u64,
    /// DTrace's message ("3 drops on CPU 1").
    pub message: String,
}

impl Drops {
    /// The drop report of `count` drops of `kind` on `cpu`, with DTrace's message.
    pub fn new(kind: DropKind, cpu: Option<u32>, count: u64) -> Drops {
        Drops {
            kind,
            cpu,
            count,
            message: crate::json::drop_message(kind, cpu, count),
        }
    }
}

/// A run-time fault that fired the ERROR probe (`"type": "error"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeError {
    /// The probe whose clause faulted.
    pub probe: ProbeRef,
    /// What happened ("invalid address (0x0) in action #1").
    pub message: String,
}

/// Why tracing stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// `exit(status)` ran.
    Exit,
    /// Interrupted: SIGINT/SIGTERM, or the library's `stop()`.
    Interrupted,
    /// The `-c`/`-p` target exited.
    TargetExited,
    /// `bufpolicy=fill` and the buffer filled up.
    BufferFull,
}

/// The end of a run (`"type": "exit"`), the last event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// Why tracing stopped.
    pub reason: ExitReason,
    /// The `exit()` status (`None` unless `reason` is [`ExitReason::Exit`]).
    pub status: Option<i32>,
}

/// An aggregation's value as a JSON number: `i64` or `u64` (serde's buffered content, which
/// internally tagged enums use, has no 128-bit integers).
mod scalar {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Num {
        U(u64),
        I(i64),
    }

    pub(super) fn serialize<S: Serializer>(v: &Option<i128>, s: S) -> Result<S::Ok, S::Error> {
        match *v {
            None => s.serialize_none(),
            Some(v) => match (u64::try_from(v), i64::try_from(v)) {
                (Ok(u), _) => s.serialize_u64(u),
                (_, Ok(i)) => s.serialize_i64(i),
                _ => Err(serde::ser::Error::custom(
                    "aggregation value beyond 64 bits",
                )),
            },
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i128>, D::Error> {
        Ok(
            match Option::<Num>::deserialize(d).map_err(D::Error::custom)? {
                None => None,
                Some(Num::U(u)) => Some(i128::from(u)),
                Some(Num::I(i)) => Some(i128::from(i)),
            },
        )
    }
}

// --- serde forms of the pre-existing value types -------------------------------------------

impl Serialize for ProbeRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ProbeRepr {
            id: self.id,
            provider: self.provider.clone(),
            module: self.module.clone(),
            function: self.function.clone(),
            name: self.name.clone(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for ProbeRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = ProbeRepr::deserialize(d)?;
        Ok(ProbeRef {
            id: r.id,
            provider: r.provider,
            module: r.module,
            function: r.function,
            name: r.name,
        })
    }
}

#[derive(Serialize, Deserialize)]
struct ProbeRepr {
    id: u32,
    provider: String,
    module: String,
    function: String,
    name: String,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
enum ItemRepr {
    Trace {
        value: Value,
    },
    Printf {
        format: String,
        text: String,
        args: Vec<Value>,
    },
    Print {
        #[serde(rename = "type")]
        type_name: String,
        address: u64,
        text: String,
    },
    Exit {
        status: i32,
    },
}

impl Serialize for RecordItem {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RecordItem::Trace(v) => ItemRepr::Trace { value: v.clone() },
            RecordItem::Printf { format, text, args } => ItemRepr::Printf {
                format: format.clone(),
                text: text.clone(),
                args: args.clone(),
            },
            RecordItem::Print {
                type_name,
                address,
                text,
            } => ItemRepr::Print {
                type_name: type_name.clone(),
                address: *address,
                text: text.clone(),
            },
            RecordItem::Exit(status) => ItemRepr::Exit { status: *status },
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for RecordItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match ItemRepr::deserialize(d)? {
            ItemRepr::Trace { value } => RecordItem::Trace(value),
            ItemRepr::Printf { format, text, args } => RecordItem::Printf { format, text, args },
            ItemRepr::Print {
                type_name,
                address,
                text,
            } => RecordItem::Print {
                type_name,
                address,
                text,
            },
            ItemRepr::Exit { status } => RecordItem::Exit(status),
        })
    }
}

impl Serialize for Bucket {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        BucketRepr {
            min: self.min,
            max: self.max,
            count: self.count,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Bucket {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let b = BucketRepr::deserialize(d)?;
        Ok(Bucket {
            min: b.min,
            max: b.max,
            count: b.count,
        })
    }
}

#[derive(Serialize, Deserialize)]
struct BucketRepr {
    min: Option<i64>,
    max: Option<i64>,
    count: i64,
}

impl Serialize for DropKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for DropKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        DropKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| D::Error::custom(format!("unknown drop kind {s:?}")))
    }
}

/// A symbol's JSON form (`docs/probe-json.md`, *Values*).
#[derive(Serialize, Deserialize)]
struct SymbolRepr {
    addr: u64,
    module: Option<String>,
    symbol: Option<String>,
    offset: u64,
    #[serde(default)]
    text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
}

impl SymbolRepr {
    fn of(s: &Symbol, pid: Option<u32>) -> SymbolRepr {
        SymbolRepr {
            addr: s.addr,
            module: s.module.clone(),
            symbol: s.name.clone(),
            offset: s.offset,
            text: s.with_offset(),
            pid,
        }
    }

    fn symbol(self) -> Symbol {
        Symbol {
            addr: self.addr,
            module: self.module,
            name: self.symbol,
            offset: self.offset,
        }
    }
}

impl Serialize for Symbol {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SymbolRepr::of(self, None).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Symbol {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(SymbolRepr::deserialize(d)?.symbol())
    }
}

#[derive(Serialize, Deserialize)]
struct StackRepr {
    user: bool,
    frames: Vec<SymbolRepr>,
}

impl Serialize for Stack {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        StackRepr {
            user: self.user,
            frames: self
                .frames
                .iter()
                .map(|f| SymbolRepr::of(f, None))
                .collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Stack {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = StackRepr::deserialize(d)?;
        Ok(Stack {
            user: r.user,
            frames: r.frames.into_iter().map(SymbolRepr::symbol).collect(),
        })
    }
}

#[derive(Deserialize)]
struct BytesRepr {
    bytes: String,
}

/// The untagged JSON forms of a [`Value`], tried in order when deserializing.
#[derive(Deserialize)]
#[serde(untagged)]
enum ValueRepr {
    Unsigned(u64),
    Signed(i64),
    Str(String),
    Bytes(BytesRepr),
    Stack(StackRepr),
    Sym(SymbolRepr),
}

/// A value serializes as `docs/probe-json.md` says: an integer as a number (unsigned types as
/// unsigned), a string as a string, bytes as `{"bytes": hex}`, symbols and stacks as objects.
impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Int(i) if i.signed => s.serialize_i64(i.as_i64()),
            Value::Int(i) => s.serialize_u64(i.as_u64()),
            Value::Str(v) => s.serialize_str(v),
            Value::Bytes(b) => {
                use serde::ser::SerializeMap;
                let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("bytes", &hex)?;
                m.end()
            }
            Value::Sym(sym) => SymbolRepr::of(sym, None).serialize(s),
            Value::Usym { pid, sym } => SymbolRepr::of(sym, Some(*pid)).serialize(s),
            Value::Stack(st) => st.serialize(s),
        }
    }
}

/// The JSON forms back: a number becomes a 64-bit [`Int`] (unsigned when it is non-negative:
/// JSON does not carry the D type's width, the clause schema does), an object with `"bytes"`
/// raw bytes, with `"frames"` a stack, with `"addr"` a symbol (a user symbol when it has
/// `"pid"`).
impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match ValueRepr::deserialize(d)? {
            ValueRepr::Unsigned(u) => Value::Int(Int::u64(u)),
            ValueRepr::Signed(i) => Value::Int(Int::i64(i)),
            ValueRepr::Str(s) => Value::Str(s),
            ValueRepr::Bytes(b) => {
                let hex = b.bytes.as_bytes();
                if hex.len() % 2 != 0 {
                    return Err(D::Error::custom("odd number of hex digits in \"bytes\""));
                }
                let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
                let mut out = Vec::with_capacity(hex.len() / 2);
                for p in hex.chunks(2) {
                    match (digit(p[0]), digit(p[1])) {
                        (Some(h), Some(l)) => out.push(h << 4 | l),
                        _ => return Err(D::Error::custom("a non-hex digit in \"bytes\"")),
                    }
                }
                Value::Bytes(out)
            }
            ValueRepr::Stack(st) => Value::Stack(Stack {
                user: st.user,
                frames: st.frames.into_iter().map(SymbolRepr::symbol).collect(),
            }),
            ValueRepr::Sym(r) => match r.pid {
                Some(pid) => Value::Usym {
                    pid,
                    sym: r.symbol(),
                },
                None => Value::Sym(r.symbol()),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn probe() -> ProbeRef {
        ProbeRef {
            id: 5,
            provider: "syscall".into(),
            module: "".into(),
            function: "openat".into(),
            name: "entry".into(),
        }
    }

    #[test]
    fn values_round_trip_through_their_json_forms() {
        let sym = Symbol {
            addr: 0x1010,
            module: Some("vmlinux".into()),
            name: Some("ksys_read".into()),
            offset: 0x10,
        };
        let vals = [
            Value::i64(-3),
            Value::u64(u64::MAX),
            Value::str("a\"b"),
            Value::Bytes(vec![0, 0xab, 255]),
            Value::Sym(sym.clone()),
            Value::Usym {
                pid: 9,
                sym: sym.clone(),
            },
            Value::Stack(Stack {
                user: true,
                frames: vec![sym.clone()],
            }),
        ];
        for v in vals {
            let j = serde_json::to_value(&v).unwrap();
            assert_eq!(j, crate::json::value_json(&v), "one schema for {v:?}");
            assert_eq!(serde_json::from_value::<Value>(j).unwrap(), v);
        }
        // A 32-bit signed -1 serializes as -1 and comes back as a 64-bit -1.
        let j = serde_json::to_value(Value::Int(Int::i32(-1))).unwrap();
        assert_eq!(j, json!(-1));
        assert_eq!(serde_json::from_value::<Value>(j).unwrap(), Value::i64(-1));
    }

    #[test]
    fn every_event_kind_round_trips_and_is_tagged() {
        let mut a = Aggregation::new(
            "lat",
            0,
            AggFunc::Lquantize {
                base: 0,
                limit: 10,
                step: 5,
            },
        );
        a.add(vec![Value::str("sh")], 7, 2);
        let mut c = Aggregation::new("", 1, AggFunc::Count);
        for _ in 0..3 {
            c.add(vec![], 1, 1);
        }
        let mut m = Aggregation::new("m", 2, AggFunc::Min);
        m.add(vec![], -9, 1);
        let events = [
            Event::Aggregation(AggregationSnapshot::of(&c, &SortOptions::default())),
            Event::Aggregation(AggregationSnapshot::of(&m, &SortOptions::default())),
            Event::Record(Record {
                cpu: 1,
                probe: probe(),
                clause: Some(2),
                timestamp_ns: Some(42),
                data: vec![
                    // Non-negative integers come back unsigned (JSON has no width).
                    RecordItem::Trace(Value::u64(1)),
                    RecordItem::Printf {
                        format: "%s".into(),
                        text: "x".into(),
                        args: vec![Value::str("x")],
                    },
                    RecordItem::Exit(0),
                ],
            }),
            Event::Aggregation(AggregationSnapshot::of(&a, &SortOptions::default())),
            Event::Drops(Drops::new(DropKind::SpecUnavailable, None, 2)),
            Event::Error(ProbeError {
                probe: probe(),
                message: "invalid address (0x0) in action #1".into(),
            }),
            Event::Exit(Exit {
                reason: ExitReason::TargetExited,
                status: None,
            }),
        ];
        let tags = [
            "aggregation",
            "aggregation",
            "record",
            "aggregation",
            "drops",
            "error",
            "exit",
        ];
        for (e, tag) in events.iter().zip(tags) {
            let line = serde_json::to_string(e).unwrap();
            let j: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(j["type"], tag);
            assert_eq!(&serde_json::from_str::<Event>(&line).unwrap(), e);
        }
        let Event::Aggregation(cs) = &events[0] else {
            unreachable!()
        };
        assert_eq!(cs.entries[0].value, Some(3));
        let Event::Aggregation(ms) = &events[1] else {
            unreachable!()
        };
        assert_eq!(ms.entries[0].value, Some(-9));
        let Event::Aggregation(s) = &events[3] else {
            unreachable!()
        };
        let e = s.get(&[Value::str("sh")]).unwrap();
        assert_eq!(
            e.buckets.as_deref().unwrap(),
            &[Bucket {
                min: Some(5),
                max: Some(9),
                count: 2
            }]
        );
        assert_eq!(e.total(), Some(2));
        assert_eq!(s.params.step, Some(5));
        let Event::Drops(d) = &events[4] else {
            unreachable!()
        };
        assert_eq!(
            serde_json::to_value(d).unwrap()["kind"],
            "speculation_unavailable"
        );
    }

    #[test]
    fn decode_takes_the_values_by_position_and_refuses_a_misfit() {
        #[derive(Deserialize, Debug, PartialEq)]
        struct Hit {
            n: u8,
            who: String,
            delta: i64,
        }
        let rec = Record {
            cpu: 0,
            probe: probe(),
            clause: None,
            timestamp_ns: None,
            data: vec![
                RecordItem::Trace(Value::u64(200)),
                RecordItem::Printf {
                    format: "%s %d".into(),
                    text: "sh -4".into(),
                    args: vec![Value::str("sh"), Value::i64(-4)],
                },
            ],
        };
        assert_eq!(
            rec.decode::<Hit>().unwrap(),
            Hit {
                n: 200,
                who: "sh".into(),
                delta: -4
            }
        );
        assert_eq!(rec.text(), "sh -4");
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Wrong {
            n: String,
        }
        assert!(rec.decode::<Wrong>().is_err());
    }
}
