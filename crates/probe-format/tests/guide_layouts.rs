//! Aggregation and trace layouts compared with expected text derived from the DTrace guide.
//!
//! Each expected text is DTrace's printf layout (dt_consume.c formats such as `"%16s |%s%s %-9lld"`)
//! applied to values worked out by hand from the guide's examples; the bar lengths are
//! `round(40 * |count| / total)` (20 per side when a table has both signs). Comments name the guide
//! section each case follows. Lines keep DTrace's trailing spaces (`count    `, padded keys).

use probe_format::agg::{AggFunc, Aggregation, SortOptions};
use probe_format::output::{
    TRACE_HEADER, end_of_record, format_trace, print_at_exit, printa, printa_formatted,
    printa_joined, probe_prefix,
};
use probe_format::printf::parse;
use probe_format::value::{Int, Value};

const QUANTIZE_GUIDE: &str = "\n  bash                                              \n           value  ------------- Distribution ------------- count    \n            8192 |                                         0        \n           16384 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@         4        \n           32768 |                                         0        \n           65536 |                                         0        \n          131072 |@@@@@@@@                                 1        \n          262144 |                                         0        \n\n  gnome-terminal                                    \n           value  ------------- Distribution ------------- count    \n            4096 |                                         0        \n            8192 |@@@@@@@@@@@@@                            5        \n           16384 |@@@@@@@@@@@@@                            5        \n           32768 |@@@@@@@@@@@                              4        \n           65536 |@@@                                      1        \n          131072 |                                         0        \n\n";
const LQUANTIZE_GUIDE: &str = "\n  gnome-session                                     \n           value  ------------- Distribution ------------- count    \n              25 |                                         0        \n              26 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@ 9        \n              27 |                                         0        \n\n";
const LQUANTIZE_RANGE: &str = "\n\n           value  ------------- Distribution ------------- count    \n             < 0 |@@@@@@@@@@                               1        \n               0 |                                         0        \n               2 |@@@@@@@@@@@@@@@@@@@@                     2        \n               4 |                                         0        \n               6 |                                         0        \n               8 |                                         0        \n           >= 10 |@@@@@@@@@@                               1        \n\n";
const LLQUANTIZE_STEPS: &str = "\n\n           value  ------------- Distribution ------------- count    \n               2 |                                         0        \n               3 |@@@@@@@@@@                               1        \n               4 |                                         0        \n               5 |                                         0        \n               6 |                                         0        \n               7 |                                         0        \n               8 |                                         0        \n               9 |                                         0        \n              10 |@@@@@@@@@@@@@@@@@@@@                     2        \n              15 |                                         0        \n              20 |                                         0        \n              25 |                                         0        \n              30 |                                         0        \n              35 |                                         0        \n              40 |                                         0        \n              45 |                                         0        \n              50 |                                         0        \n              55 |                                         0        \n              60 |                                         0        \n              65 |                                         0        \n              70 |                                         0        \n              75 |                                         0        \n              80 |                                         0        \n              85 |                                         0        \n              90 |                                         0        \n              95 |                                         0        \n             100 |                                         0        \n             150 |@@@@@@@@@@                               1        \n             200 |                                         0        \n\n";
const LLQUANTIZE_EMPTY: &str = "\n\n           value  ------------- Distribution ------------- count    \n               0 |                                         0        \n               1 |                                         0        \n               2 |                                         0        \n\n";
const QUANTIZE_NEGATIVE: &str = "\n\n           value  ------------- Distribution ------------- count    \n               0                                         | 0        \n               1                            @@@@@@@@@@@@@| -1       \n               2                                         | 0        \n               4              @@@@@@@@@@@@@@@@@@@@@@@@@@@| -2       \n               8                                         | 0        \n\n";
const QUANTIZE_NEGATIVE_VALUES: &str = "\n\n           value  ------------- Distribution ------------- count    \n              -8 |                                         0        \n              -4 |@@@@@@@@@@@@@@@@@@@@@@@@@@@              2        \n              -2 |                                         0        \n              -1 |@@@@@@@@@@@@@                            1        \n               0 |                                         0        \n\n";
const QUANTIZE_MIXED: &str = "\n\n           value  ------------- Distribution ------------- count    \n               0                     |                     0        \n               1                     |@@@@@@@@@@@@@        2        \n               2              @@@@@@@|                     -1       \n               4                     |                     0        \n\n";
const QUANTIZE_EMPTY: &str = "\n\n           value  ------------- Distribution ------------- count    \n              -1 |                                         0        \n               0 |                                         0        \n               1 |                                         0        \n\n";
const COUNT_KEYED: &str = "\n  dtrace                                                            1\n  cat                                                               4\n  sshd                                                              4\n";
const SCALARS: &str = "\n                3\n              600\n               -5\n              250\n                2\n                2\n";
const INT_KEYS: &str = "\n       42               -1                7\n";

fn agg(name: &str, id: u32, func: AggFunc) -> Aggregation {
    Aggregation::new(name, id, func)
}

fn exit_print(aggs: &[&Aggregation]) -> String {
    print_at_exit(aggs, &SortOptions::default())
}

// Guide, "Aggregations" > quantize(), the wrquantize.d example (write() latency by execname).
#[test]
fn quantize_matches_guide_example() {
    let mut a = agg("time", 0, AggFunc::Quantize);
    for _ in 0..4 {
        a.add(vec![Value::str("bash")], 20_000, 1);
    }
    a.add(vec![Value::str("bash")], 200_000, 1);
    for (v, n) in [(8192, 5), (16_384, 5), (40_000, 4), (65_536, 1)] {
        for _ in 0..n {
            a.add(vec![Value::str("gnome-terminal")], v, 1);
        }
    }
    assert_eq!(exit_print(&[&a]), QUANTIZE_GUIDE);
}

// Guide, "Aggregations" > lquantize(): write() file descriptors by execname,
// lquantize(arg0, 0, 100, 1).
#[test]
fn lquantize_matches_guide_example() {
    let mut a = agg(
        "fds",
        0,
        AggFunc::Lquantize {
            base: 0,
            limit: 100,
            step: 1,
        },
    );
    for _ in 0..9 {
        a.add(vec![Value::str("gnome-session")], 26, 1);
    }
    assert_eq!(exit_print(&[&a]), LQUANTIZE_GUIDE);
}

// Guide, "Aggregations" > lquantize(): values below the base count in the "< base" row, values at
// or above base + levels * step in the ">= limit" row.
#[test]
fn lquantize_underflow_and_overflow_rows() {
    let mut a = agg(
        "",
        0,
        AggFunc::Lquantize {
            base: 0,
            limit: 10,
            step: 2,
        },
    );
    for v in [-1, 3, 3, 50] {
        a.add(vec![], v, 1);
    }
    assert_eq!(exit_print(&[&a]), LQUANTIZE_RANGE);
}

// Guide, "Aggregations" > llquantize(): factor 10, magnitudes 0..6, 20 steps: 1..9 one bucket
// each, then 18 buckets per magnitude (10, 15, ..., 95; 100, 150, ...).
#[test]
fn llquantize_log_linear_rows() {
    let mut a = agg(
        "",
        0,
        AggFunc::Llquantize {
            factor: 10,
            low: 0,
            high: 6,
            nsteps: 20,
        },
    );
    for v in [3, 12, 12, 150] {
        a.add(vec![], v, 1);
    }
    assert_eq!(exit_print(&[&a]), LLQUANTIZE_STEPS);
    let mut e = agg(
        "",
        0,
        AggFunc::Llquantize {
            factor: 10,
            low: 0,
            high: 6,
            nsteps: 20,
        },
    );
    e.add(vec![], 5, 1);
    e.clear();
    // Oracle's dt_print_llquantize with no data: the rows around the first positive bucket
    // (the middle row "0", "1", and the ghost bin after it labelled as the next row, "2").
    assert_eq!(exit_print(&[&e]), LLQUANTIZE_EMPTY);
}

// Oracle DTrace's symmetric llquantize layout (tst.llquantneg.r): negative values have rows
// mirrored around the middle row "0"; with factor 10 and 20 steps, order 0's rows are 1..9 with
// a ghost bin between each two (skipped); a ghost bin at the edge of the shown rows takes the
// label of its neighbour outwards ("-4" before "-3").
#[test]
fn llquantize_negative_values() {
    let mut a = agg(
        "",
        0,
        AggFunc::Llquantize {
            factor: 10,
            low: 0,
            high: 6,
            nsteps: 20,
        },
    );
    for v in [-3, 0, 12] {
        a.add(vec![], v, 1);
    }
    let row = |label: &str, count: i64| {
        let at = if count == 1 { 13 } else { 0 };
        format!(
            "{label:>16} |{}{} {count:<9}\n",
            "@".repeat(at),
            " ".repeat(40 - at)
        )
    };
    let mut want =
        String::from("\n\n           value  ------------- Distribution ------------- count    \n");
    for (label, count) in [("-4", 0), ("-3", 1), ("-2", 0), ("-1", 0), ("0", 1)] {
        want.push_str(&row(label, count));
    }
    for k in 1..=9 {
        want.push_str(&row(&k.to_string(), 0));
    }
    want.push_str(&row("10", 1));
    want.push_str(&row("15", 0));
    want.push('\n');
    assert_eq!(exit_print(&[&a]), want);
    // With a middle bucket wider than 0 (low = 2), its row reads "abs() < 100" once a negative
    // row is shown (as the row before a nonzero middle bucket is: tst.llquantstep.r's "-27",
    // "abs() < 27") and "< 100" otherwise (Oracle's dt_print_llquantize).
    let f = AggFunc::Llquantize {
        factor: 10,
        low: 2,
        high: 3,
        nsteps: 10,
    };
    let mut b = agg("", 0, f);
    b.add(vec![], 5, 1);
    let out = exit_print(&[&b]);
    assert!(out.contains("            -100 |"), "{out}");
    assert!(out.contains("     abs() < 100 |"), "{out}");
    let mut c = agg("", 0, f);
    c.add(vec![], 150, 1);
    let out = exit_print(&[&c]);
    assert!(out.contains("           < 100 |"), "{out}");
    assert!(out.contains("             100 |"), "{out}");
    assert!(!out.contains("-100"), "{out}");
}

// Guide, "Aggregations" > quantize(): negative values have their own buckets (labelled with the
// bound nearest zero); with the optional increment, counts may be negative: DTrace then draws bars
// leftwards (only negative counts) or half bars around '|' (both signs).
#[test]
fn quantize_negative_values_and_counts() {
    let mut v = agg("", 0, AggFunc::Quantize);
    for x in [-1, -5, -5] {
        v.add(vec![], x, 1);
    }
    assert_eq!(exit_print(&[&v]), QUANTIZE_NEGATIVE_VALUES);
    let mut n = agg("", 0, AggFunc::Quantize);
    for x in [1, 4, 4] {
        n.add(vec![], x, -1);
    }
    assert_eq!(exit_print(&[&n]), QUANTIZE_NEGATIVE);
    let mut m = agg("", 0, AggFunc::Quantize);
    m.add(vec![], 1, 2);
    m.add(vec![], 2, -1);
    assert_eq!(exit_print(&[&m]), QUANTIZE_MIXED);
}

// Guide, "Aggregations" > "Clearing Aggregations": a cleared quantize keeps its key and shows the
// rows around zero.
#[test]
fn quantize_after_clear_shows_rows_around_zero() {
    let mut a = agg("", 0, AggFunc::Quantize);
    a.add(vec![], 1000, 1);
    a.clear();
    assert_eq!(exit_print(&[&a]), QUANTIZE_EMPTY);
}

// Guide, "Aggregations" > count(): keyed by execname, sorted by value (ties by key).
#[test]
fn count_keyed_sorted_by_value() {
    let mut a = agg("", 0, AggFunc::Count);
    for (k, n) in [("sshd", 4), ("dtrace", 1), ("cat", 4)] {
        for _ in 0..n {
            a.add(vec![Value::str(k)], 0, 1);
        }
    }
    assert_eq!(exit_print(&[&a]), COUNT_KEYED);
}

// Guide, "Aggregations" > sum(), min(), max(), avg(), stddev(); several unkeyed variables print
// in the order of first appearance, each " %16lld".
#[test]
fn scalar_functions() {
    let mut c = agg("c", 0, AggFunc::Count);
    let mut s = agg("s", 1, AggFunc::Sum);
    let mut mn = agg("mn", 2, AggFunc::Min);
    let mut mx = agg("mx", 3, AggFunc::Max);
    let mut av = agg("av", 4, AggFunc::Avg);
    let mut sd = agg("sd", 5, AggFunc::Stddev);
    for v in [100, 200, 300] {
        c.add(vec![], v, 1);
        s.add(vec![], v, 1);
    }
    for v in [3, -5, 250, 0] {
        mn.add(vec![], v, 1);
        mx.add(vec![], v, 1);
    }
    for v in [1, 2, 4] {
        av.add(vec![], v, 1);
    }
    for v in [2, 4, 4, 4, 5, 5, 7, 9] {
        sd.add(vec![], v, 1);
    }
    // Passed out of order: printing orders by variable id.
    assert_eq!(exit_print(&[&sd, &c, &s, &mn, &mx, &av]), SCALARS);
}

// Guide, "Aggregations": integer keys print with the width of their type (dt_print_datum).
#[test]
fn integer_keys_by_width() {
    let mut a = agg("", 0, AggFunc::Sum);
    a.add(vec![Value::Int(Int::i32(42)), Value::i64(-1)], 7, 1);
    assert_eq!(exit_print(&[&a]), INT_KEYS);
}

// Guide, "Aggregations" > "Data Normalization": normalize(@, 1000) divides what is printed.
#[test]
fn normalize_divides_printed_values() {
    let mut a = agg("", 0, AggFunc::Sum);
    a.add(vec![Value::str("x")], 123_456, 1);
    a.normalize(1000);
    assert_eq!(exit_print(&[&a]), format!("\n  {:<50} {:>16}\n", "x", 123));
    a.denormalize();
    assert_eq!(
        exit_print(&[&a]),
        format!("\n  {:<50} {:>16}\n", "x", 123_456)
    );
}

// Guide, "Output Formatting" > printa(): a format consumes the keys, %@ the value; a quantize's
// %@ prints its table.
#[test]
fn printa_formatted_and_default() {
    let mut a = agg("", 0, AggFunc::Count);
    for (k, n) in [("b", 2), ("a", 5)] {
        for _ in 0..n {
            a.add(vec![Value::str(k)], 0, 1);
        }
    }
    let p = parse("%-4s|%@3d|\n").unwrap();
    assert_eq!(
        printa_formatted(&p, &a, &SortOptions::default()).unwrap(),
        "b   |  2|\na   |  5|\n"
    );
    let rev = SortOptions {
        rev: true,
        ..Default::default()
    };
    assert_eq!(
        printa_formatted(&p, &a, &rev).unwrap(),
        "a   |  5|\nb   |  2|\n"
    );
    assert_eq!(
        printa(
            &a,
            &SortOptions {
                key: true,
                ..Default::default()
            }
        ),
        format!("\n  {:<50} {:>16}\n  {:<50} {:>16}\n", "a", 5, "b", 2)
    );
    let mut q = agg("", 0, AggFunc::Quantize);
    q.add(vec![], 1000, 1);
    q.clear();
    let p = parse("%@d").unwrap();
    assert_eq!(
        printa_formatted(&p, &q, &SortOptions::default()).unwrap(),
        &QUANTIZE_EMPTY[1..QUANTIZE_EMPTY.len() - 1]
    );
}

// Guide, "Data Recording Actions" > trace() and the dtrace(1M) default output: the heading, then
// per probe "%3d %6d %32s " and the data (" %16lld" for 64-bit integers, "  %-33s" for strings).
#[test]
fn trace_lines() {
    assert_eq!(
        TRACE_HEADER,
        format!("{:>3} {:>6} {:>32}\n", "CPU", "ID", "FUNCTION:NAME")
    );
    let line = format!(
        "{}{}{}",
        probe_prefix(0, 1, "", "BEGIN"),
        format_trace(&Value::i64(42), false),
        end_of_record(false)
    );
    assert_eq!(
        line,
        "  0      1                           :BEGIN                   42\n"
    );
    let s = format!(
        "{}{}{}",
        probe_prefix(1, 173, "getpid", "entry"),
        format_trace(&Value::str("bash"), false),
        end_of_record(false)
    );
    assert_eq!(
        s,
        "  1    173                     getpid:entry   bash                             \n"
    );
    assert_eq!(format_trace(&Value::str("bash"), true), "bash");
    // By D type, as Oracle's consumer: int in 10 columns, a signed short stays negative,
    // unsigned 64-bit values in 20.
    assert_eq!(
        format_trace(&Value::Int(Int::i32(-3)), false),
        "         -3"
    );
    assert_eq!(
        format_trace(
            &Value::Int(Int {
                bits: 0xffff,
                bytes: 2,
                signed: true
            }),
            false
        ),
        "    -1"
    );
}

// Guide, "Output Formatting" > printa(): several aggregations with the same keys print joined:
// the keys once, then each aggregation's value; a key missing from one aggregation shows 0.
// Order by the value of the aggregation at aggsortpos (libdtrace dt_aggregate_bundlecmp).
#[test]
fn printa_of_several_aggregations_joins_keys() {
    let mut a = agg("a", 0, AggFunc::Count);
    let mut b = agg("b", 1, AggFunc::Sum);
    a.add(vec![Value::str("x")], 0, 1);
    a.add(vec![Value::str("x")], 0, 1);
    a.add(vec![Value::str("y")], 0, 1);
    b.add(vec![Value::str("x")], 10, 1);
    b.add(vec![Value::str("y")], 20, 1);
    b.add(vec![Value::str("z")], 5, 1);
    let line = |k: &str, x: i64, y: i64| format!("  {k:<50} {x:>16} {y:>16}\n");
    let default = SortOptions::default();
    // z is missing from @a: its count is 0, the smallest.
    assert_eq!(
        printa_joined(&[&a, &b], None, &default).unwrap(),
        format!(
            "\n{}{}{}",
            line("z", 0, 5),
            line("y", 1, 20),
            line("x", 2, 10)
        )
    );
    let by_b = SortOptions {
        pos: 1,
        ..Default::default()
    };
    assert_eq!(
        printa_joined(&[&a, &b], None, &by_b).unwrap(),
        format!(
            "\n{}{}{}",
            line("z", 0, 5),
            line("x", 2, 10),
            line("y", 1, 20)
        )
    );
    let p = parse("%s %@d %@d\n").unwrap();
    assert_eq!(
        printa_joined(&[&a, &b], Some(&p), &default).unwrap(),
        "z 0 5\ny 1 20\nx 2 10\n"
    );
    // One aggregation: exactly printa().
    assert_eq!(
        printa_joined(&[&a], None, &default).unwrap(),
        printa(&a, &default)
    );
}

// Guide, "Data Recording Actions" > stack(), tracemem(): frames one per line indented by
// stackindent (14); raw bytes as a hex dump with offsets and printable characters
// (dt_consume.c dt_print_stack, dt_print_bytes).
#[test]
fn stacks_and_byte_dumps() {
    use probe_format::output::format_bytes_dump;
    use probe_format::value::{Stack, Symbol};
    let st = Stack {
        user: false,
        frames: vec![
            Symbol {
                addr: 0x10,
                module: Some("vmlinux".into()),
                name: Some("do_syscall_64".into()),
                offset: 0x5d,
            },
            Symbol {
                addr: 0x20,
                module: Some("vmlinux".into()),
                name: Some("entry_SYSCALL_64".into()),
                offset: 0,
            },
            Symbol::unknown(0xffff_ffff_8100_0000),
        ],
    };
    assert_eq!(
        format_trace(&Value::Stack(st), false),
        format!(
            "\n{0}vmlinux`do_syscall_64+0x5d\n{0}vmlinux`entry_SYSCALL_64\n{0}0xffffffff81000000\n",
            " ".repeat(14)
        )
    );
    let dump = format_bytes_dump(b"hello\x00\x01world, this is 20+");
    let lines: Vec<&str> = dump.lines().collect();
    assert_eq!(lines[0], "");
    assert_eq!(
        lines[1],
        format!(
            "{}{}  0123456789abcdef",
            " ".repeat(11),
            "0123456789abcdef"
                .chars()
                .map(|c| format!("  {c}"))
                .collect::<String>()
        )
    );
    assert_eq!(
        lines[2],
        "         0: 68 65 6c 6c 6f 00 01 77 6f 72 6c 64 2c 20 74 68  hello..world, th"
    );
    assert_eq!(
        lines[3],
        format!(
            "        10: 69 73 20 69 73 20 32 30 2b{}  is is 20+",
            "   ".repeat(7)
        )
    );
    assert_eq!(lines.len(), 4);
}
