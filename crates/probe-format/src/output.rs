//! DTrace's text output, byte for byte: the per-probe lines of non-quiet mode, `trace()` data,
//! stacks, and aggregations (`printa()` and the print at exit) with their distributions.
//!
//! Layouts follow the DTrace guide (chapters "Data Recording Actions", "Aggregations", "Output
//! Formatting") and, for exact widths, libdtrace's consumer: `dt_consume.c` (`dt_print_datum`,
//! `dt_print_bytes`, `dt_print_quantize`, `dt_print_lquantize`, `dt_print_llquantize`,
//! `dt_print_quantline`, `dt_print_stack`, `dt_print_aggs`) and the `dtrace` command's `chew`
//! callback. Every layout is described in `docs/probe-output.md`.

use crate::agg::{
    AggData, AggFunc, Aggregation, QUANTIZE_NBUCKETS, QUANTIZE_ZERO_BUCKET, SortOptions,
    compare_entries, llquantize_labels, llquantize_nbuckets, llquantize_zero_bucket,
    quantize_bucket_value,
};
use crate::printf::{AggArg, FormatError, Piece, format_printa, format_stack};
use crate::value::{Int, Value};
use std::fmt::Write as _;

/// The heading printed once, before the first probe line, in non-quiet mode (`%3s %6s %32s`).
pub const TRACE_HEADER: &str = "CPU     ID                    FUNCTION:NAME\n";

/// Default indent of stack frames (DTrace's `stackindent` option).
pub const STACK_INDENT: usize = 14;

/// The start of a probe's line in non-quiet mode: `%3d %6d %32s ` with `FUNCTION:NAME` (e.g.
/// `  0      1                           :BEGIN `). The records' data follows on the same line,
/// then [`end_of_record`].
pub fn probe_prefix(cpu: u32, probe_id: u32, function: &str, name: &str) -> String {
    format!(
        "{cpu:>3} {probe_id:>6} {:>32} ",
        format!("{function}:{name}")
    )
}

/// [`TRACE_HEADER`] in Oracle dtrace's testing mode (`_DTRACE_TESTING` in its environment,
/// set by its test harness `runtest.sh`; cmd/dtrace.c `chew`): `%32s`, without the CPU and ID
/// columns, which vary from run to run.
pub const TRACE_HEADER_TESTING: &str = "                   FUNCTION:NAME\n";

/// [`probe_prefix`] in testing mode (see [`TRACE_HEADER_TESTING`]): `%32s ` with
/// `FUNCTION:NAME` only.
pub fn probe_prefix_testing(function: &str, name: &str) -> String {
    format!("{:>32} ", format!("{function}:{name}"))
}

/// [`FLOW_HEADER`] in testing mode (see [`TRACE_HEADER_TESTING`]): `%-41s` of `FUNCTION`.
pub const FLOW_HEADER_TESTING: &str = "FUNCTION                                 \n";

/// What ends a probe's output: a newline in non-quiet mode, nothing in quiet mode.
pub fn end_of_record(quiet: bool) -> &'static str {
    if quiet { "" } else { "\n" }
}

/// The heading printed once, before the first probe line, under `flowindent` (`dtrace -F`):
/// `CPU FUNCTION` as `%3s %-41s` (the function column is 41 wide, so the heading keeps trailing
/// spaces). Printed even in quiet mode, as the `dtrace` command's `chew` does.
pub const FLOW_HEADER: &str = "CPU FUNCTION                                 \n";

/// How `flowindent` classifies a probe from its name (libdtrace `dt_flowindent`): `entry` or a
/// name ending in `-entry` is an entry, `return` or a name ending in `-return` a return (so USDT
/// probes such as `method-entry` take part, and `carpentry` does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowKind {
    /// A function entry: printed with `->` (`=>` for the `syscall` provider), then indented.
    Entry,
    /// A function return: unindented, then printed with `<-` (`<=` for `syscall`).
    Return,
    /// Neither: printed as `| FUNCTION:NAME` at the current indent.
    Other,
}

impl FlowKind {
    /// The kind of the probe named `name` (the fourth part of its description).
    pub fn of(name: &str) -> FlowKind {
        let ends = |word: &str| {
            name.strip_suffix(word)
                .is_some_and(|head| head.is_empty() || head.ends_with('-'))
        };
        if ends("entry") {
            FlowKind::Entry
        } else if ends("return") {
            FlowKind::Return
        } else {
            FlowKind::Other
        }
    }
}

/// One CPU's `flowindent` state: the indent in columns and the last record's probe
/// (`provider:module:function:name`) and clause.
#[derive(Debug, Clone, Default)]
struct CpuFlow {
    indent: usize,
    last: Option<(String, u32)>,
}

/// The `flowindent` layout (`dtrace -F`, `-x flowindent`, `#pragma D option flowindent`; DTrace
/// guide, "dtrace(1M) Utility" and "Options and Tunables"): each probe line starts with the CPU
/// and the function, indented two columns deeper after every entry and two shallower at every
/// return. The indent is kept per CPU, as libdtrace consumes each CPU's buffer on its own.
///
/// Rules from libdtrace's `dt_flowindent` and the `dtrace` command's `chew`: an entry probe prints
/// ` -> FUNC` and then indents; a return unindents (never below zero) and prints ` <- FUNC`; for
/// the `syscall` provider the arrows are ` => ` and ` <= `; any other probe prints
/// `| FUNC:NAME`. When the previous record on that CPU was the same probe from another clause, an
/// entry counts as "other", so two clauses on one entry probe indent once.
#[derive(Debug, Clone, Default)]
pub struct FlowIndent {
    cpus: std::collections::BTreeMap<u32, CpuFlow>,
}

impl FlowIndent {
    /// A layout with every CPU at indent 0.
    pub fn new() -> FlowIndent {
        FlowIndent::default()
    }

    /// The start of a record's line, `%3d %-41s ` (CPU, then the indented arrow and function),
    /// for a probe fired on `cpu` and recorded by clause `clause` (0-based), and updates that
    /// CPU's indent. `desc` is the probe's description: provider, module, function, name (the
    /// probe is told apart by it rather than by its id, which user-space probes may share).
    /// The records' data follows on the same line, then [`end_of_record`].
    pub fn prefix(&mut self, cpu: u32, clause: u32, desc: [&str; 4]) -> String {
        let label = self.label(cpu, clause, desc);
        format!("{cpu:>3} {label:<41} ")
    }

    /// [`FlowIndent::prefix`] in testing mode (see [`TRACE_HEADER_TESTING`]): `%-41s `, without
    /// the CPU column (the indent is still kept per CPU).
    pub fn prefix_testing(&mut self, cpu: u32, clause: u32, desc: [&str; 4]) -> String {
        let label = self.label(cpu, clause, desc);
        format!("{label:<41} ")
    }

    /// The indented arrow and function of a record's line (see [`FlowIndent::prefix`]).
    fn label(&mut self, cpu: u32, clause: u32, desc: [&str; 4]) -> String {
        let [provider, module, function, name] = desc;
        let probe = format!("{provider}:{module}:{function}:{name}");
        let st = self.cpus.entry(cpu).or_default();
        let mut kind = FlowKind::of(name);
        // Another clause's record of the same probe firing: do not indent a second time.
        if kind == FlowKind::Entry
            && st
                .last
                .as_ref()
                .is_some_and(|(p, c)| *p == probe && *c != clause)
        {
            kind = FlowKind::Other;
        }
        let syscall = provider == "syscall";
        if kind == FlowKind::Return {
            st.indent = st.indent.saturating_sub(2);
        }
        let pad = " ".repeat(st.indent);
        let label = match kind {
            FlowKind::Entry => format!("{pad}{}{function}", if syscall { " => " } else { " -> " }),
            FlowKind::Return => format!("{pad}{}{function}", if syscall { " <= " } else { " <- " }),
            FlowKind::Other => format!("{pad}| {function}:{name}"),
        };
        if kind == FlowKind::Entry {
            st.indent += 2;
        }
        st.last = Some((probe, clause));
        label
    }
}

/// An integer as `trace()` and aggregation keys print it: the C format is chosen by width
/// (8 bytes: `%lld` of the signed value; 4: `%d` of the signed 32-bit value; 2 and 1: `%d` of the
/// unsigned value, as the consumer reads `uint16_t`/`uint8_t`), padded to 16, 8, 5 or 3
/// characters after one space unless `quiet`.
pub fn format_int_datum(i: &Int, quiet: bool) -> String {
    let (text, width) = match i.bytes {
        1 => ((i.bits & 0xff).to_string(), 3),
        2 => ((i.bits & 0xffff).to_string(), 5),
        4 => ((i.bits as u32 as i32).to_string(), 8),
        _ => ((i.bits as i64).to_string(), 16),
    };
    if quiet {
        text
    } else {
        format!(" {text:>width$}")
    }
}

/// An integer as `trace()` prints it (Oracle's dt_consume.c `dt_print_trace`): by its D type,
/// signed types as `%ld`/`%d`/`%hd`/`%hhd` in 19, 10, 5 or 3 columns, unsigned ones as
/// `%lu`/`%u`/`%hu`/`%hhu` in 20, 10, 5 or 3, after one space unless `quiet` (so `(char)-1`
/// prints `-1` and `(unsigned)-1` prints `4294967295`; illumos printed every width below 8
/// bytes as the unsigned value and 4 bytes as signed).
pub fn format_trace_int(i: &Int, quiet: bool) -> String {
    let mask = match i.bytes {
        1 => 0xff,
        2 => 0xffff,
        4 => 0xffff_ffff,
        _ => u64::MAX,
    };
    let raw = i.bits & mask;
    let (text, width) = if i.signed {
        let v = match i.bytes {
            1 => i64::from(raw as u8 as i8),
            2 => i64::from(raw as u16 as i16),
            4 => i64::from(raw as u32 as i32),
            _ => raw as i64,
        };
        let w = match i.bytes {
            1 => 3,
            2 => 5,
            4 => 10,
            _ => 19,
        };
        (v.to_string(), w)
    } else {
        let w = match i.bytes {
            1 => 3,
            2 => 5,
            4 => 10,
            _ => 20,
        };
        (raw.to_string(), w)
    };
    if quiet {
        text
    } else {
        format!(" {text:>width$}")
    }
}

/// `trace(v)` output (the record's part of the line). Integers as [`format_trace_int`]; strings
/// `"  %-33s"` (quiet: `%s`); symbols `"  %-50s"`; stacks as [`format_stack`] with the default
/// indent; raw bytes as a hex dump ([`format_bytes_dump`]).
pub fn format_trace(v: &Value, quiet: bool) -> String {
    match v {
        Value::Int(i) => format_trace_int(i, quiet),
        Value::Str(s) if quiet => s.clone(),
        Value::Str(s) => format!("  {s:<33}"),
        // `sym()`/`usym()` values come with offset 0 and `mod()`/`umod()` as their module
        // (the runtime's key normalization), so only `uaddr()` shows an offset (dt_print_uaddr).
        Value::Sym(s) => format!("  {:<50}", s.with_offset()),
        Value::Usym { sym, .. } => format!("  {:<50}", sym.with_offset()),
        Value::Stack(st) => format_stack(st, STACK_INDENT),
        Value::Bytes(b) => format_bytes_dump(b),
    }
}

/// DTrace's hex dump of raw bytes (`tracemem()`, non-string data): a column header, then per 16
/// bytes the offset, the bytes in hex and their printable characters (dt_consume.c
/// `dt_print_bytes`).
pub fn format_bytes_dump(b: &[u8]) -> String {
    let mut s = String::from("\n           ");
    for d in "0123456789abcdef".chars() {
        let _ = write!(s, "  {d}");
    }
    s.push_str("  0123456789abcdef\n");
    for (row, chunk) in b.chunks(16).enumerate() {
        let _ = write!(s, "     {:>5x}:", row * 16);
        for byte in chunk {
            let _ = write!(s, " {byte:02x}");
        }
        s.push_str(&"   ".repeat(16 - chunk.len()));
        s.push_str("  ");
        for &c in chunk {
            s.push(if (b' '..=b'~').contains(&c) {
                c as char
            } else {
                '.'
            });
        }
        s.push('\n');
    }
    s
}

/// An aggregation key as `printa()`/the exit print shows it (dt_print_datum): integers as
/// [`format_int_datum`], strings and symbols `"  %-50s"`, stacks one frame per line.
pub fn format_key(v: &Value) -> String {
    match v {
        Value::Str(s) => format!("  {s:<50}"),
        Value::Int(i) => format_int_datum(i, false),
        other => format_trace(other, false),
    }
}

/// With `aggzoom`, the fraction of the 40 columns the highest bar fills (`DTRACE_AGGZOOM_MAX`).
const AGGZOOM_MAX: f64 = 0.95;

const DIST_HEADER: &str = "------------- Distribution -------------";

fn dist_header() -> String {
    format!("\n{:>16} {DIST_HEADER:>41} {:<9}\n", "value", "count")
}

/// One distribution row's bar and count (dt_print_quantline): 40 columns of `@` scaled to the
/// total of the absolute counts of the printed rows, rounded half up; with negative counts the bar
/// grows left of `|`; with both signs, each half is 20 columns around a centre `|`. The count is
/// divided by `normal` and left-justified in 9 columns.
fn quant_line(val: i64, normal: u64, total: f64, positives: bool, negatives: bool) -> String {
    let ats = |n: usize| "@".repeat(n);
    let sp = |n: usize| " ".repeat(n);
    let shown = val / normal.max(1) as i64;
    let depth = |len: usize| -> usize {
        if total == 0.0 {
            0
        } else {
            ((val.unsigned_abs() as f64 * len as f64) / total + 0.5) as usize
        }
        .min(len)
    };
    if !negatives {
        let d = if positives { depth(40) } else { 0 };
        return format!("|{}{} {shown:<9}\n", ats(d), sp(40 - d));
    }
    if !positives {
        let d = depth(40);
        return format!("{}{}| {shown:<9}\n", sp(40 - d), ats(d));
    }
    let d = depth(20);
    if val <= 0 {
        format!("{}{}|{} {shown:<9}\n", sp(20 - d), ats(d), sp(20))
    } else {
        format!("{}|{}{} {shown:<9}\n", sp(20), ats(d), sp(20 - d))
    }
}

/// The rows DTrace shows: from one before the first nonzero bucket to one after the last (within
/// the array); `empty` when all are zero.
fn shown_range(b: &[i64], empty: (usize, usize)) -> (usize, usize) {
    let Some(first) = b.iter().position(|&c| c != 0) else {
        return empty;
    };
    let last = b.iter().rposition(|&c| c != 0).unwrap_or(first);
    (first.saturating_sub(1), (last + 1).min(b.len() - 1))
}

/// The height of the bars' scale of the rows `lo..=hi` (the sum of their absolute counts, or
/// with `zoom` the largest one / 0.95) and whether any row is positive / negative.
fn totals(b: &[i64], lo: usize, hi: usize, zoom: bool) -> (f64, bool, bool) {
    let rows = &b[lo..=hi];
    let total = if zoom {
        rows.iter()
            .map(|&c| c.unsigned_abs() as f64 / AGGZOOM_MAX)
            .fold(0.0, f64::max)
    } else {
        rows.iter().map(|&c| c.unsigned_abs() as f64).sum()
    };
    (
        total,
        rows.iter().any(|&c| c > 0),
        rows.iter().any(|&c| c < 0),
    )
}

/// A `quantize()` table (dt_print_quantize): a blank line, the `value  ---- Distribution ----
/// count` header, then rows labelled with the power of two nearest zero of each bucket
/// ([`quantize_bucket_value`]), `%16lld ` then the bar. Shows one zero row before and after the
/// nonzero buckets (the last bucket, 2^62 and up, included); with no data, the rows -1, 0 and 1.
pub fn format_quantize(b: &[i64], normal: u64, zoom: bool) -> String {
    let mut s = dist_header();
    if b.len() != QUANTIZE_NBUCKETS {
        return s;
    }
    // As Oracle's dt_print_quantize: every bucket is scanned, so a value of 2^62 or more (the
    // last bucket) is shown; illumos' scan stopped before the last bucket and lost it.
    let (lo, hi) = shown_range(b, (QUANTIZE_ZERO_BUCKET - 1, QUANTIZE_ZERO_BUCKET + 1));
    let (total, pos, neg) = totals(b, lo, hi, zoom);
    for (i, &count) in b.iter().enumerate().take(hi + 1).skip(lo) {
        let _ = write!(s, "{:>16} ", quantize_bucket_value(i));
        s.push_str(&quant_line(count, normal, total, pos, neg));
    }
    s
}

/// An `lquantize()` table (dt_print_lquantize): rows `< base`, then `base + i·step` for each
/// level, then `>= base + levels·step`, each label right-aligned in 16 columns. Shows one zero row
/// around the nonzero buckets; with no data, the first three rows.
pub fn format_lquantize(b: &[i64], base: i64, step: i64, normal: u64, zoom: bool) -> String {
    let mut s = dist_header();
    if b.len() < 2 {
        return s;
    }
    let levels = b.len() - 2;
    let (lo, hi) = shown_range(b, (0, 2.min(b.len() - 1)));
    let (total, pos, neg) = totals(b, lo, hi, zoom);
    for (i, &count) in b.iter().enumerate().take(hi + 1).skip(lo) {
        let label = if i == 0 {
            format!("< {base}")
        } else if i == levels + 1 {
            format!(">= {}", base + levels as i64 * step)
        } else {
            (base + (i as i64 - 1) * step).to_string()
        };
        let _ = write!(s, "{label:>16} ");
        s.push_str(&quant_line(count, normal, total, pos, neg));
    }
    s
}

/// An `llquantize()` table in Oracle DTrace's layout (`dt_print_llquantize`): the rows from one
/// before the first nonzero bucket to one after the last, labelled by [`llquantize_labels`]
/// (`abs() < factor^low` for the middle row when a negative row is shown, else `< factor^low`;
/// `0` when `low` is 0). Ghost bins (buckets no value reaches) are skipped, except that a ghost
/// at either end of the shown rows takes the label of its nearest labelled neighbour outwards
/// (within `nsteps / factor` buckets), as Oracle's "ghost-bin" fix does. With no data, the rows
/// around the first positive bucket.
pub fn format_llquantize(
    b: &[i64],
    factor: u16,
    low: u16,
    high: u16,
    nsteps: u16,
    normal: u64,
    zoom: bool,
) -> String {
    let mut s = dist_header();
    let n = llquantize_nbuckets(factor, low, high, nsteps);
    if b.len() != n {
        return s;
    }
    let zero = llquantize_zero_bucket(factor, low, high, nsteps);
    let (mut lo, mut hi) = match b.iter().position(|&c| c != 0) {
        Some(first) => (first, b.iter().rposition(|&c| c != 0).unwrap_or(first)),
        None => (zero + 1, zero + 1),
    };
    let (total, pos, neg) = totals(b, lo, hi, zoom);
    lo = lo.saturating_sub(1);
    hi = (hi + 1).min(n - 1);
    let mut labels = llquantize_labels(factor, low, high, nsteps, lo < zero);
    let pad = if low == 0 && nsteps > factor {
        (nsteps / factor) as usize
    } else {
        0
    };
    if labels[lo].is_none() {
        let found = (1..pad).find_map(|d| lo.checked_sub(d).and_then(|j| labels[j].clone()));
        labels[lo] = found;
    }
    if labels[hi].is_none() {
        let found = (1..pad).find_map(|d| labels.get(hi + d).cloned().flatten());
        labels[hi] = found;
    }
    for (i, &count) in b.iter().enumerate().take(hi + 1).skip(lo) {
        let Some(label) = &labels[i] else {
            continue;
        };
        let _ = write!(s, "{label:>16} ");
        s.push_str(&quant_line(count, normal, total, pos, neg));
    }
    s
}

/// An aggregation's value as the default print shows it after the keys (dt_print_datum):
/// count/sum/min/max/avg `" %16lld"`, stddev `" %16llu"`, distributions as their table.
/// Values are divided by `normal`.
pub fn format_agg_value(func: &AggFunc, data: &AggData, normal: u64, zoom: bool) -> String {
    match (func, data) {
        (AggFunc::Quantize, AggData::Quantize(b)) => format_quantize(b, normal, zoom),
        (AggFunc::Lquantize { base, step, .. }, AggData::Lquantize(b)) => {
            format_lquantize(b, *base, *step, normal, zoom)
        }
        (
            AggFunc::Llquantize {
                factor,
                low,
                high,
                nsteps,
            },
            AggData::Llquantize(b),
        ) => format_llquantize(b, *factor, *low, *high, *nsteps, normal, zoom),
        (_, d) => {
            let v = d.scalar(normal).unwrap_or(0);
            if d.scalar_is_unsigned() && matches!(d, AggData::Stddev { .. }) {
                format!(" {:>16}", v as u64)
            } else {
                format!(" {v:>16}")
            }
        }
    }
}

/// The entries of one aggregation in DTrace's order and layout (dt_print_aggs per entry): the
/// keys ([`format_key`]), the value ([`format_agg_value`]), a newline. With `agghist`, a
/// `count()` or `sum()` aggregation prints as [`format_agghist`]; with `aggpack`, a `quantize()`
/// or `lquantize()` one as [`format_aggpack`].
pub fn format_aggregation(agg: &Aggregation, opts: &SortOptions) -> String {
    if opts.hist && matches!(agg.func, AggFunc::Count | AggFunc::Sum) {
        return format_agghist(agg, opts);
    }
    if opts.pack && matches!(agg.func, AggFunc::Quantize | AggFunc::Lquantize { .. }) {
        return format_aggpack(agg, opts);
    }
    let mut s = String::new();
    for e in agg.sorted(opts) {
        for k in &e.keys {
            s.push_str(&format_key(k));
        }
        s.push_str(&format_agg_value(&agg.func, &e.data, agg.normal, opts.zoom));
        s.push('\n');
    }
    s
}

/// A key as the packed layouts of `agghist` and `aggpack` print it (illumos dt_print_datum's
/// `packedwidth`): integers as [`format_int_datum`], strings right-aligned in 16 columns after a
/// space (` %16s`), other keys as [`format_key`].
fn format_packed_key(v: &Value) -> String {
    match v {
        Value::Str(s) => format!(" {s:>16}"),
        other => format_key(other),
    }
}

/// The width of the key columns of a packed layout: each key's packed width (integers 3, 5, 8
/// or 16 by size, anything else 16) plus one for its space.
fn packed_key_width(keys: &[Value]) -> usize {
    keys.iter()
        .map(|k| match k {
            Value::Int(i) => match i.bytes {
                1 => 4,
                2 => 6,
                4 => 9,
                _ => 17,
            },
            _ => 17,
        })
        .sum()
}

/// `dt_ndigits`: the columns a bucket value takes in aggpack's header and lines: its digits (as
/// illumos counts them: one more for each power of ten it exceeds, so 10 and 100 count like 9
/// and 99), one more for a minus sign, at least 4.
fn ndigits(v: i64) -> usize {
    let mut n = 1;
    let mut val = v;
    if val < 0 {
        val = if val == i64::MIN { i64::MAX } else { -val };
        n += 1;
    }
    let mut cmp: i64 = 10;
    while val > cmp && cmp > 0 {
        n += 1;
        cmp = cmp.saturating_mul(10);
        if cmp == i64::MAX {
            break;
        }
    }
    n.max(4)
}

/// `agghist` (illumos dt_print_datum with `DTRACE_A_TOTAL`): a `count()` or `sum()`
/// aggregation as a histogram. A header `\n{key:>W} ---- Distribution ---- count` (`W` the keys'
/// packed width, `value` in 16 columns without keys), then per entry in print order its keys
/// (`format_packed_key`), a space and a bar as distribution rows draw them, scaled to the
/// total of the entries' absolute values (with `aggzoom`, to the largest / 0.95), the value
/// divided by `normalize()`'s factor.
pub fn format_agghist(agg: &Aggregation, opts: &SortOptions) -> String {
    let entries = agg.sorted(opts);
    let Some(first) = entries.first() else {
        return String::new();
    };
    let vals: Vec<i64> = entries
        .iter()
        .map(|e| e.data.scalar(1).unwrap_or(0))
        .collect();
    let total = if opts.zoom {
        (vals.iter())
            .map(|v| v.unsigned_abs() as f64 / AGGZOOM_MAX)
            .fold(0.0, f64::max)
    } else {
        vals.iter().map(|v| v.unsigned_abs() as f64).sum()
    };
    let pos = vals.iter().any(|&v| v > 0);
    let neg = vals.iter().any(|&v| v < 0);
    let w = packed_key_width(&first.keys);
    let mut s = if w == 0 {
        dist_header()
    } else {
        format!("\n{:>w$} {DIST_HEADER:>41} {:<9}\n", "key", "count")
    };
    for (e, &v) in entries.iter().zip(&vals) {
        for k in &e.keys {
            s.push_str(&format_packed_key(k));
        }
        s.push(' ');
        s.push_str(&quant_line(v, agg.normal, total, pos, neg));
    }
    s
}

/// One bucket of an `aggpack` line (illumos dt_print_packed): a space for 0; a negative count
/// as `v`/`V` by its share of the line's total (`"vvvvVV"`); a positive one as one of eight
/// UTF-8 block elements U+2581..U+2588 or, in ASCII, `"__xxxxXX"`, rounded half up.
fn packed_cell(datum: i64, total: f64, utf8: bool) -> char {
    if datum == 0 {
        return ' ';
    }
    let share = |levels: usize| -> usize {
        ((datum.unsigned_abs() as f64 * (levels - 1) as f64) / total + 0.5) as usize
    };
    if datum < 0 {
        return b"vvvvVV"[share(6).min(5)] as char;
    }
    if utf8 {
        return char::from_u32(0x2581 + share(8).min(7) as u32).unwrap_or('?');
    }
    b"__xxxxXX"[share(8).min(7)] as char
}

/// `aggpack` (illumos `dt_print_quantize_packed`, `dt_print_lquantize_packed`): a `quantize()`
/// or `lquantize()` aggregation one line per entry. quantize shows the buckets from one below
/// the lowest nonzero bucket of any entry (not below the zero bucket when that is the lowest)
/// to one above the highest; lquantize shows all its buckets. A header `\n{key:>W} {min} .---.
/// {max} | count` (one `-` per bucket), then per entry its keys, ` {low} :`, one
/// `packed_cell` per bucket scaled to the entry's total (with `aggzoom`, its largest / 0.95),
/// `: {high} | {count}` with the entry's count (not normalized). quantize's bounds are the
/// buckets' values in `ndigits` columns after a space; lquantize's `< base` and `>= limit` in
/// 8, without the space.
pub fn format_aggpack(agg: &Aggregation, opts: &SortOptions) -> String {
    let entries = agg.sorted(opts);
    let Some(first) = entries.first() else {
        return String::new();
    };
    let w = packed_key_width(&first.keys);
    let key_col = if w > 0 { "key" } else { "" };
    let buckets: Vec<&[i64]> = (entries.iter())
        .map(|e| e.data.buckets().unwrap_or(&[]))
        .collect();
    let (lo, hi, lo_label, hi_label, lo_w, hi_w) = match agg.func {
        AggFunc::Lquantize { base, step, .. } => {
            let n = buckets.iter().map(|b| b.len()).max().unwrap_or(2).max(2);
            let levels = (n - 2) as i64;
            (
                0,
                n - 1,
                format!("< {base}"),
                format!(">= {}", base + levels * step),
                8,
                8,
            )
        }
        _ => {
            let mut min = usize::MAX;
            let mut max = 0;
            for b in &buckets {
                match b.iter().position(|&c| c != 0) {
                    Some(f) => {
                        min = min.min(f);
                        max = max.max(b.iter().rposition(|&c| c != 0).unwrap_or(f));
                    }
                    None => {
                        min = min.min(QUANTIZE_ZERO_BUCKET);
                        max = max.max(QUANTIZE_ZERO_BUCKET);
                    }
                }
            }
            if min != 0 && min != QUANTIZE_ZERO_BUCKET {
                min -= 1;
            }
            if max < QUANTIZE_NBUCKETS - 1 {
                max += 1;
            }
            let (lv, hv) = (quantize_bucket_value(min), quantize_bucket_value(max));
            (
                min,
                max,
                lv.to_string(),
                hv.to_string(),
                ndigits(lv),
                ndigits(hv),
            )
        }
    };
    let (min_w, max_w) = if matches!(agg.func, AggFunc::Lquantize { .. }) {
        (7, 8)
    } else {
        (lo_w, hi_w)
    };
    let mut s = format!(
        "\n{key_col:>w$} {:>min_w$} .{}. {:<max_w$} | count\n",
        "min",
        "-".repeat(hi - lo + 1),
        "max"
    );
    for (e, b) in entries.iter().zip(&buckets) {
        for k in &e.keys {
            s.push_str(&format_packed_key(k));
        }
        let cells = (lo..=hi).map(|i| b.get(i).copied().unwrap_or(0));
        let total = if opts.zoom {
            (cells.clone())
                .map(|c| c.unsigned_abs() as f64 / AGGZOOM_MAX)
                .fold(0.0, f64::max)
        } else {
            cells.clone().map(|c| c.unsigned_abs() as f64).sum()
        };
        let count: i64 = cells.clone().sum();
        // quantize's lower bound follows a space (" %*lld :"), lquantize's does not ("%8s :").
        let sep = if matches!(agg.func, AggFunc::Lquantize { .. }) {
            ""
        } else {
            " "
        };
        let _ = write!(s, "{sep}{lo_label:>lo_w$} :");
        s.extend(cells.map(|c| packed_cell(c, total, opts.utf8)));
        let _ = writeln!(s, ": {hi_label:<hi_w$} | {count}");
    }
    s
}

/// `printa(@x)` without a format: a blank line, then [`format_aggregation`] (dt_consume.c prints
/// `"\n"` before walking the aggregation).
pub fn printa(agg: &Aggregation, opts: &SortOptions) -> String {
    format!("\n{}", format_aggregation(agg, opts))
}

/// `printa(format, @x)`: for each entry in print order, the format with the keys as arguments and
/// `%@` as the value (distributions print their table). No blank line first (dt_printf.c
/// `dt_fprinta`).
pub fn printa_formatted(
    pieces: &[Piece],
    agg: &Aggregation,
    opts: &SortOptions,
) -> Result<String, FormatError> {
    let mut s = String::new();
    for e in agg.sorted(opts) {
        let arg = match e.data.scalar(agg.normal) {
            Some(v) if e.data.scalar_is_unsigned() => AggArg::Int(Int::u64(v as u64)),
            Some(v) => AggArg::Int(Int::i64(v)),
            None => AggArg::Text(format_agg_value(&agg.func, &e.data, agg.normal, opts.zoom)),
        };
        s.push_str(&format_printa(pieces, &e.keys, &arg)?);
    }
    Ok(s)
}

/// The entries of several aggregations with the same key types joined on their keys, for
/// `printa(@a, @b, ...)`: every key present in any of them, with each aggregation's data (zero
/// data where an aggregation lacks the key), in DTrace's order for a joined walk
/// (`dt_aggregate_walk_joined`, `dt_aggregate_bundlecmp`): by the values of the aggregation at
/// `aggsortpos` (out of range: the first), then of the following ones (wrapping around), then by
/// key; `aggsortkey` compares the keys first; `aggsortrev` reverses everything.
pub fn join_aggregations(
    aggs: &[&Aggregation],
    opts: &SortOptions,
) -> Vec<(Vec<Value>, Vec<AggData>)> {
    let mut rows: Vec<(Vec<Value>, Vec<AggData>)> = Vec::new();
    for (i, a) in aggs.iter().enumerate() {
        for e in &a.entries {
            let pos = match rows.iter().position(|(k, _)| *k == e.keys) {
                Some(p) => p,
                None => {
                    rows.push((
                        e.keys.clone(),
                        aggs.iter().map(|g| AggData::zero(&g.func)).collect(),
                    ));
                    rows.len() - 1
                }
            };
            rows[pos].1[i] = e.data.clone();
        }
    }
    let n = aggs.len();
    let start = if opts.pos < n { opts.pos } else { 0 };
    rows.sort_by(|(ka, da), (kb, db)| {
        let keys = || crate::agg::compare_keys(ka, kb, opts.keypos);
        let values = || {
            (0..n)
                .map(|j| (j + start) % n)
                .map(|i| crate::agg::compare_data(&aggs[i].func, &da[i], &db[i]))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        };
        let o = if opts.key {
            keys().then_with(values)
        } else {
            values().then_with(keys)
        };
        if opts.rev { o.reverse() } else { o }
    });
    rows
}

/// `printa(@a, @b, ...)` of several aggregations (same key types): without a format, a blank
/// line, then per joined key the keys once and each aggregation's value in argument order
/// (dt_print_aggs with several variables); with a format, the keys feed the conversions and the
/// `%@` conversions take the aggregations' values in argument order (a `%@` beyond the last
/// aggregation repeats the last one, as dt_printf_format). Order as [`join_aggregations`]. A
/// single aggregation gives exactly [`printa`] / [`printa_formatted`].
pub fn printa_joined(
    aggs: &[&Aggregation],
    format: Option<&[Piece]>,
    opts: &SortOptions,
) -> Result<String, FormatError> {
    if let [one] = aggs {
        return match format {
            None => Ok(printa(one, opts)),
            Some(p) => printa_formatted(p, one, opts),
        };
    }
    let rows = join_aggregations(aggs, opts);
    let mut s = String::new();
    if format.is_none() {
        s.push('\n');
    }
    for (keys, datas) in rows {
        match format {
            None => {
                for k in &keys {
                    s.push_str(&format_key(k));
                }
                for (a, d) in aggs.iter().zip(&datas) {
                    s.push_str(&format_agg_value(&a.func, d, a.normal, opts.zoom));
                }
                s.push('\n');
            }
            Some(pieces) => {
                let args: Vec<AggArg> = aggs
                    .iter()
                    .zip(&datas)
                    .map(|(a, d)| match d.scalar(a.normal) {
                        Some(v) if d.scalar_is_unsigned() => AggArg::Int(Int::u64(v as u64)),
                        Some(v) => AggArg::Int(Int::i64(v)),
                        None => AggArg::Text(format_agg_value(&a.func, d, a.normal, opts.zoom)),
                    })
                    .collect();
                s.push_str(&crate::printf::format_printa_multi(pieces, &keys, &args)?);
            }
        }
    }
    Ok(s)
}

/// What DTrace prints once tracing stops (the `dtrace` command: a newline, then every
/// aggregation not yet printed by `printa()`): `aggs` should be exactly those. Variables print in
/// [`Aggregation::id`] order (reversed under `aggsortrev`), each one's entries sorted.
pub fn print_at_exit(aggs: &[&Aggregation], opts: &SortOptions) -> String {
    let mut order: Vec<&Aggregation> = aggs.to_vec();
    order.sort_by_key(|a| a.id);
    if opts.rev {
        order.reverse();
    }
    let mut s = String::from("\n");
    for a in order {
        s.push_str(&format_aggregation(a, opts));
    }
    s
}

/// Compares entries of one aggregation in print order (re-exported for consumers that stream).
pub fn entry_order(agg: &Aggregation, opts: &SortOptions) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..agg.entries.len()).collect();
    idx.sort_by(|&a, &b| compare_entries(&agg.func, &agg.entries[a], &agg.entries[b], opts));
    idx
}

#[cfg(test)]
mod flow_tests {
    use super::*;

    const PID: [&str; 4] = ["pid42", "a.out", "", ""];

    fn line(
        f: &mut FlowIndent,
        cpu: u32,
        clause: u32,
        provider: &str,
        function: &str,
        name: &str,
    ) -> String {
        f.prefix(cpu, clause, [provider, PID[1], function, name])
    }

    #[test]
    fn header_is_cpu_and_a_41_column_function() {
        assert_eq!(FLOW_HEADER, format!("{:>3} {:<41}\n", "CPU", "FUNCTION"));
        assert_eq!(FLOW_HEADER.len(), 3 + 1 + 41 + 1);
        assert_eq!(FLOW_HEADER_TESTING, format!("{:<41}\n", "FUNCTION"));
        assert_eq!(TRACE_HEADER_TESTING, format!("{:>32}\n", "FUNCTION:NAME"));
        assert_eq!(
            probe_prefix_testing("", "BEGIN"),
            format!("{:>32} ", ":BEGIN")
        );
    }

    #[test]
    fn kinds_follow_the_name() {
        assert_eq!(FlowKind::of("entry"), FlowKind::Entry);
        assert_eq!(FlowKind::of("method-entry"), FlowKind::Entry);
        assert_eq!(FlowKind::of("return"), FlowKind::Return);
        assert_eq!(FlowKind::of("function-return"), FlowKind::Return);
        assert_eq!(FlowKind::of("carpentry"), FlowKind::Other);
        assert_eq!(FlowKind::of("BEGIN"), FlowKind::Other);
        assert_eq!(FlowKind::of("4"), FlowKind::Other);
    }

    #[test]
    fn nested_calls_indent_by_two() {
        let mut f = FlowIndent::new();
        let got: Vec<String> = [
            ("foo", "entry"),
            ("bar", "entry"),
            ("bar", "return"),
            ("foo", "return"),
        ]
        .iter()
        .map(|(func, name)| line(&mut f, 0, 0, PID[0], func, name))
        .collect();
        assert_eq!(
            got,
            [
                format!("  0 {:<41} ", " -> foo"),
                format!("  0 {:<41} ", "   -> bar"),
                format!("  0 {:<41} ", "   <- bar"),
                format!("  0 {:<41} ", " <- foo"),
            ]
        );
        assert_eq!(got[1], "  0    -> bar                                 ");
    }

    #[test]
    fn other_probes_show_function_and_name_with_a_bar() {
        let mut f = FlowIndent::new();
        line(&mut f, 1, 0, PID[0], "foo", "entry");
        assert_eq!(
            line(&mut f, 1, 1, "pid42", "foo", "4"),
            format!("  1 {:<41} ", "  | foo:4")
        );
        assert_eq!(
            line(&mut f, 1, 2, "dtrace", "", "BEGIN"),
            format!("  1 {:<41} ", "  | :BEGIN")
        );
    }

    #[test]
    fn syscall_arrows_are_double() {
        let mut f = FlowIndent::new();
        assert_eq!(
            line(&mut f, 0, 0, "syscall", "read", "entry"),
            format!("  0 {:<41} ", " => read")
        );
        assert_eq!(
            line(&mut f, 0, 0, "syscall", "read", "return"),
            format!("  0 {:<41} ", " <= read")
        );
    }

    #[test]
    fn indent_is_per_cpu_and_never_negative() {
        let mut f = FlowIndent::new();
        line(&mut f, 0, 0, PID[0], "foo", "entry");
        // CPU 1 has its own indent: its return stays at column 0.
        assert_eq!(
            line(&mut f, 1, 0, PID[0], "foo", "return"),
            format!("  1 {:<41} ", " <- foo")
        );
        assert_eq!(
            line(&mut f, 0, 0, PID[0], "bar", "entry"),
            format!("  0 {:<41} ", "   -> bar")
        );
    }

    #[test]
    fn a_second_clause_on_the_same_entry_does_not_indent_again() {
        let mut f = FlowIndent::new();
        assert_eq!(
            line(&mut f, 0, 0, PID[0], "foo", "entry"),
            format!("  0 {:<41} ", " -> foo")
        );
        assert_eq!(
            line(&mut f, 0, 1, PID[0], "foo", "entry"),
            format!("  0 {:<41} ", "  | foo:entry")
        );
        assert_eq!(
            line(&mut f, 0, 0, PID[0], "bar", "entry"),
            format!("  0 {:<41} ", "   -> bar")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // illumos dt_ndigits: one column per power of ten the value *exceeds* (so 100 takes as
    // many as 99), a minus sign, at least 4.
    #[test]
    fn ndigits_as_illumos_counts() {
        assert_eq!(ndigits(0), 4);
        assert_eq!(ndigits(128), 4);
        assert_eq!(ndigits(9999), 4);
        assert_eq!(ndigits(10_001), 5);
        assert_eq!(ndigits(100_000), 5);
        assert_eq!(ndigits(100_001), 6);
        assert_eq!(ndigits(-4), 4);
        assert_eq!(ndigits(-1024), 5);
        assert_eq!(ndigits(i64::MIN), 20);
    }

    // dt_print_packed: 8 levels for positive counts, 6 for negative ones, rounded half up.
    #[test]
    fn packed_cells() {
        assert_eq!(packed_cell(0, 10.0, false), ' ');
        assert_eq!(packed_cell(1, 100.0, false), '_');
        assert_eq!(packed_cell(10, 10.0, false), 'X');
        assert_eq!(packed_cell(5, 10.0, false), 'x');
        assert_eq!(packed_cell(7, 10.0, false), 'x');
        assert_eq!(packed_cell(8, 10.0, false), 'X');
        assert_eq!(packed_cell(10, 10.0, true), '\u{2588}');
        assert_eq!(packed_cell(1, 100.0, true), '\u{2581}');
        assert_eq!(packed_cell(-10, 10.0, false), 'V');
        assert_eq!(packed_cell(-1, 10.0, false), 'v');
    }
}
