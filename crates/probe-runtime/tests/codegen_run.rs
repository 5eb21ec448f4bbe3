//! Code-generator tests that run the generated programs: each D program is compiled, loaded, and
//! its BEGIN clause executed by `BPF_PROG_TEST_RUN`; the tests check the values the program
//! recorded (through the consumer's quiet output) or aggregated (read back from the maps).
//! Bucket indexes are compared with probe-format's reference functions.

use probe_runtime::catalog;
use probe_runtime::compile::{CompileOptions, Compiled, compile, parse};
use probe_runtime::run::{Consumer, RunConfig, StopReason};

/// Compiles `src` through the library's compile driver.
fn compiled(src: &str) -> Compiled {
    let mut sources = probe_syntax::SourceMap::new();
    sources.add("t.d", src.to_string());
    let ast = parse(&sources).unwrap_or_else(|e| panic!("{src}: {e:?}"));
    compile(&ast, &catalog::kernel(), &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"))
}

/// Compiles and runs `src`, returning (stdout, stderr, stop reason).
fn run(src: &str) -> (String, String, StopReason) {
    let c = compiled(src);
    let mut out = Vec::new();
    let mut err = Vec::new();
    let cfg = RunConfig {
        quiet: true,
        ..RunConfig::default()
    };
    let reason = {
        let mut c = Consumer::new(&c.checked, c.layout, cfg, &mut out, &mut err)
            .unwrap_or_else(|e| panic!("{src}: {e}"));
        c.run(None).unwrap_or_else(|e| panic!("{src}: {e}"))
    };
    (
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
        reason,
    )
}

/// The printed value of an integer expression, evaluated in BEGIN.
fn eval(expr: &str) -> String {
    let (out, err, _) = run(&format!("BEGIN {{ printf(\"%d\\n\", {expr}); exit(0); }}"));
    assert!(err.is_empty(), "{expr}: stderr {err}");
    out.lines().next().unwrap_or("").to_string()
}

#[test]
fn integer_arithmetic_follows_c() {
    let _serial = serial();
    if !test_support::privileged("loads and test-runs BPF programs") {
        return;
    }
    let cases = [
        ("7 / 2", "3"),
        ("-7 / 2", "-3"),
        ("-7 % 3", "-1"),
        ("7 % -3", "1"),
        ("(unsigned int)-1", "4294967295"),
        ("(char)300", "44"),
        ("(unsigned char)-1", "255"),
        ("(short)70000", "4464"),
        ("1LL << 40", "1099511627776"),
        ("-16 >> 2", "-4"),
        ("(unsigned int)0x80000000 >> 4", "134217728"),
        ("2147483647 + 1", "-2147483648"),
        ("~0", "-1"),
        ("!5", "0"),
        ("!0", "1"),
        ("3 > 2 && 2 > 1", "1"),
        ("0 || 0", "0"),
        ("1 ^^ 1", "0"),
        ("-1 < 1U", "0"),
        ("5 == 5 ? 10 : 20", "10"),
        ("(1 > 2) + (2 > 1) * 4", "4"),
    ];
    for (e, want) in cases {
        assert_eq!(eval(e), want, "{e}");
    }
}

#[test]
fn variables_strings_and_compound_assignment() {
    let _serial = serial();
    if !test_support::privileged("loads and test-runs BPF programs") {
        return;
    }
    let (out, _, _) = run(r#"BEGIN {
        x = 5; x += 3; x *= 2; y = x++; self->t = 7; this->c = self->t * 2;
        a["k", 1] = 9; a["k", 2] = 0;
        s = "abc"; t = "abd";
        printf("%d %d %d %d %d %d %d\n", x, y, self->t, this->c, a["k", 1], a["k", 2], a["zz", 3]);
        printf("%d %d %d %d %d\n", s < t, s == "abc", s != t, strlen(s), strlen(""));
        printf("%s|%s\n", s, execname);
        exit(0);
    }"#);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("17 16 7 14 9 0 0"));
    assert_eq!(lines.next(), Some("1 1 1 3 0"));
    // execname is the comm of the calling thread (the test harness names threads after tests).
    let comm = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
    assert_eq!(lines.next(), Some(format!("abc|{}", comm.trim()).as_str()));
}

#[test]
fn division_by_zero_is_a_dtrace_error_and_drops_the_clause_record() {
    let _serial = serial();
    if !test_support::privileged("loads and test-runs BPF programs") {
        return;
    }
    let (out, err, reason) =
        run("BEGIN { z = 0; printf(\"before\\n\"); printf(\"%d\\n\", 1 / z); } BEGIN { exit(4); }");
    assert!(err.contains("divide-by-zero"), "stderr: {err}");
    assert!(err.contains("error on enabled probe ID 1"), "stderr: {err}");
    // The faulting clause's data is discarded, like DTrace's uncommitted buffer.
    assert!(!out.contains("before"), "stdout: {out}");
    assert_eq!(reason, StopReason::Exit(4));
}

#[test]
fn aggregations_match_probe_format_buckets() {
    let _serial = serial();
    if !test_support::privileged("loads and test-runs BPF programs") {
        return;
    }
    let values: [i64; 18] = [
        0,
        15,
        -26,
        -27,
        500,
        1,
        2,
        3,
        4,
        7,
        8,
        1000,
        -1,
        -2,
        -3,
        -1000,
        i64::MAX,
        i64::MIN + 1,
    ];
    let mut body = String::new();
    for v in values {
        body.push_str(&format!(
            "@q = quantize({v}ll); @l = lquantize({v}ll, -10, 100, 10); @ll = llquantize({v}ll, 10, 0, 3, 10); @lg = llquantize({v}ll, 10, 0, 3, 20); @lt = llquantize({v}ll, 3, 3, 5, 27); @c = count(); @s = sum({v}ll); @mn = min({v}ll); @mx = max({v}ll);\n"
        ));
    }
    let (out, _, _) = run(&format!("BEGIN {{ {body} exit(0); }}"));
    // Build the expected output with probe-format from a user-space model of the same updates.
    use probe_format::agg::{AggFunc, Aggregation};
    let funcs = [
        ("q", AggFunc::Quantize),
        (
            "l",
            AggFunc::Lquantize {
                base: -10,
                limit: 100,
                step: 10,
            },
        ),
        (
            "ll",
            AggFunc::Llquantize {
                factor: 10,
                low: 0,
                high: 3,
                nsteps: 10,
            },
        ),
        (
            "lg",
            AggFunc::Llquantize {
                factor: 10,
                low: 0,
                high: 3,
                nsteps: 20,
            },
        ),
        (
            "lt",
            AggFunc::Llquantize {
                factor: 3,
                low: 3,
                high: 5,
                nsteps: 27,
            },
        ),
        ("c", AggFunc::Count),
        ("s", AggFunc::Sum),
        ("mn", AggFunc::Min),
        ("mx", AggFunc::Max),
    ];
    let mut models: Vec<Aggregation> = funcs
        .iter()
        .enumerate()
        .map(|(i, (n, f))| Aggregation::new(*n, i as u32, *f))
        .collect();
    for v in values {
        for m in &mut models {
            m.add(vec![], v, 1);
        }
    }
    let refs: Vec<&Aggregation> = models.iter().collect();
    let want = probe_format::output::print_at_exit(&refs, &Default::default());
    assert_eq!(out, want);
}

#[test]
fn keyed_aggregation_with_string_and_int_keys() {
    let _serial = serial();
    if !test_support::privileged("loads and test-runs BPF programs") {
        return;
    }
    let (out, _, _) = run(
        r#"BEGIN { @["b", 2] = count(); @["a", 1] = count(); @["b", 2] = count(); @a = avg(3); @a = avg(4); @sd = stddev(2); @sd = stddev(4); exit(0); }"#,
    );
    use probe_format::agg::{AggFunc, Aggregation};
    use probe_format::value::{Int, Value};
    let key = |s: &str, i: i32| vec![Value::Str(s.into()), Value::Int(Int::i32(i))];
    let mut c = Aggregation::new("", 0, AggFunc::Count);
    c.add(key("b", 2), 0, 1);
    c.add(key("a", 1), 0, 1);
    c.add(key("b", 2), 0, 1);
    let mut a = Aggregation::new("a", 1, AggFunc::Avg);
    a.add(vec![], 3, 1);
    a.add(vec![], 4, 1);
    let mut sd = Aggregation::new("sd", 2, AggFunc::Stddev);
    sd.add(vec![], 2, 1);
    sd.add(vec![], 4, 1);
    let want = probe_format::output::print_at_exit(&[&c, &a, &sd], &Default::default());
    assert_eq!(out, want);
}

/// Counts this process's BPF links and perf events by their fd targets (`/proc/self/fd`).
/// Tests of this file run one at a time: `attachments_open` counts this process's BPF and perf
/// descriptors, which a test attaching on another thread would change mid-count.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn attachments_open() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|t| {
            let t = t.to_string_lossy();
            t.contains("bpf-link")
                || t.contains("bpf_link")
                || t.contains("perf_event")
                || t.contains("bpf-raw-tracepoint")
        })
        .count()
}

#[test]
fn syscall_wildcard_attaches_in_two_links_and_detaches_completely() {
    let _serial = serial();
    if !test_support::privileged("attaches raw tracepoints") {
        return;
    }
    let src = "syscall:::entry { @[probefunc] = count(); } syscall:::return { @r = count(); } tick-1ms { exit(0); }";
    let prog = compiled(src);
    let before = attachments_open();
    {
        // Attached: one link per raw tracepoint (sys_enter, sys_exit) and one cpu-clock event.
        let mut s = probe_runtime::session::Session::load(prog.layout.clone(), false).unwrap();
        s.attach().unwrap();
        assert_eq!(s.attachments(), 3);
        assert_eq!(attachments_open(), before + 3);
        s.detach();
        assert_eq!(attachments_open(), before);
    }
    let mut out = Vec::new();
    let mut err = Vec::new();
    {
        let mut c = Consumer::new(
            &prog.checked,
            prog.layout.clone(),
            RunConfig {
                quiet: true,
                ..RunConfig::default()
            },
            &mut out,
            &mut err,
        )
        .unwrap();
        let reason = c.run(None).unwrap();
        assert_eq!(reason, StopReason::Exit(0));
        // After the run everything is detached already.
        assert_eq!(c.session().attachments(), 0);
    }
    assert_eq!(
        attachments_open(),
        before,
        "an attachment fd outlived the run"
    );
    let out = String::from_utf8(out).unwrap();
    // Every entry is counted under its system call's name; this process made some.
    assert!(
        out.lines().any(
            |l| l.trim_start().starts_with("ioctl") || l.trim_start().starts_with("epoll_wait")
        ),
        "{out}"
    );
}

#[test]
fn full_maps_and_ring_buffer_count_drops_the_dtrace_way() {
    let _serial = serial();
    if !test_support::privileged("attaches raw tracepoints") {
        return;
    }
    // A busy thread makes sure system calls happen while tracing.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::metadata("/");
            }
        })
    };
    // 1024 entries at most (the floor for a tiny dynvarsize); timestamps are distinct keys.
    let (_, err, _) = run(
        "#pragma D option dynvarsize=1k\nsyscall:::entry { a[timestamp] = 1; } tick-300ms { exit(0); }",
    );
    let n: u64 = err
        .lines()
        .find_map(|l| {
            l.strip_prefix("sightline: ")?
                .strip_suffix(" dynamic variable drops")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no dynamic variable drops reported: {err}"));
    assert!(n > 0);
    // A 16 KiB ring buffer read once a second overflows under a printf per system call.
    let (_, err, _) = run(
        "#pragma D option bufsize=16k\n#pragma D option switchrate=1s\nsyscall:::entry { printf(\"%s %d\\n\", execname, pid); } tick-500ms { exit(0); }",
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    busy.join().unwrap();
    assert!(
        err.lines().any(|l| l.contains(" drops on CPU ")),
        "no principal drops reported: {err}"
    );
}

#[test]
fn strjoin_and_lltostr_build_strings() {
    let _serial = serial();
    if !test_support::privileged("loads and test-runs BPF programs") {
        return;
    }
    let (out, err, _) = run(r#"BEGIN {
        s = strjoin("abc", "de");
        printf("[%s][%s][%s]\n", s, strjoin("", "x"), strjoin(s, ""));
        printf("[%s][%s][%s][%s]\n", lltostr(0), lltostr(12345), lltostr(-42), lltostr(-9223372036854775807LL - 1));
        exit(0);
    }"#);
    assert!(err.is_empty(), "{err}");
    let mut l = out.lines();
    assert_eq!(l.next(), Some("[abcde][x][abcde]"));
    assert_eq!(l.next(), Some("[0][12345][-42][-9223372036854775808]"));
}

/// The string subroutines of the DTrace guide ("Actions and Subroutines" → "Subroutines"), with
/// the edge cases illumos' dtrace_dif_subr defines; every expectation is derived by hand from
/// those rules. A NULL result (not found) prints as "" (Sightline's strings are values).
#[test]
fn string_subroutines_follow_dtrace() {
    let _serial = serial();
    if !test_support::privileged("loads and test-runs BPF programs") {
        return;
    }
    let strings = [
        // basename: the last component, trailing slashes ignored; "" -> "."; slashes only -> "/".
        (r#"basename("/usr/lib/libc.so.6")"#, "libc.so.6"),
        (r#"basename("/usr/lib/")"#, "lib"),
        (r#"basename("/")"#, "/"),
        (r#"basename("//")"#, "/"),
        (r#"basename("")"#, "."),
        (r#"basename("foo")"#, "foo"),
        (r#"basename("foo/")"#, "foo"),
        (r#"basename("/foo")"#, "foo"),
        (r#"basename("a//b//")"#, "b"),
        // dirname: everything before the last component's slashes; no slash -> "."; a component
        // right after the leading slashes -> "/".
        (r#"dirname("/usr/lib/libc.so.6")"#, "/usr/lib"),
        (r#"dirname("/usr/lib/")"#, "/usr"),
        (r#"dirname("/")"#, "/"),
        (r#"dirname("")"#, "."),
        (r#"dirname("foo")"#, "."),
        (r#"dirname("foo/")"#, "."),
        (r#"dirname("/foo")"#, "/"),
        (r#"dirname("//foo")"#, "/"),
        (r#"dirname("a//b//")"#, "a"),
        (r#"dirname("usr//lib")"#, "usr"),
        // substr: negative index from the end; a start before the string eats into the length;
        // a negative length leaves bytes off the end.
        (r#"substr("hello", 1)"#, "ello"),
        (r#"substr("hello", 0)"#, "hello"),
        (r#"substr("hello", -3)"#, "llo"),
        (r#"substr("hello", 1, 3)"#, "ell"),
        (r#"substr("hello", -3, 2)"#, "ll"),
        (r#"substr("hello", -10, 7)"#, "he"),
        (r#"substr("hello", -10)"#, "hello"),
        (r#"substr("hello", -10, 3)"#, ""),
        (r#"substr("hello", 5)"#, ""),
        (r#"substr("hello", 10)"#, ""),
        (r#"substr("hello", 1, -1)"#, "ell"),
        (r#"substr("hello", 1, -10)"#, ""),
        (r#"substr("hello", 2, 0)"#, ""),
        (r#"substr("hello", 0, 100)"#, "hello"),
        (r#"substr("", 0)"#, ""),
        // strchr / strrchr: from the first / last occurrence; none -> NULL.
        (r#"strchr("hello", 'l')"#, "llo"),
        (r#"strrchr("hello", 'l')"#, "lo"),
        (r#"strchr("hello", 'z')"#, ""),
        (r#"strrchr("hello", 'z')"#, ""),
        (r#"strchr("hello", 'h')"#, "hello"),
        (r#"strrchr("hello", 'o')"#, "o"),
        (r#"strchr("a/b/c", '/')"#, "/b/c"),
        (r#"strrchr("a/b/c", '/')"#, "/c"),
        // strstr: from the first occurrence; "" is found at 0; none -> NULL.
        (r#"strstr("hello world", "o w")"#, "o world"),
        (r#"strstr("hello", "l")"#, "llo"),
        (r#"strstr("hello", "")"#, "hello"),
        (r#"strstr("hello", "xyz")"#, ""),
        (r#"strstr("abc", "abcd")"#, ""),
        (r#"strstr("aaab", "aab")"#, "aab"),
        (r#"strstr("/usr/lib/libc.so.6", "lib")"#, "lib/libc.so.6"),
        // Nested: the results are ordinary strings.
        (r#"basename(dirname("/a/b/c"))"#, "b"),
        (r#"substr(basename("/usr/lib/libc.so.6"), 0, 4)"#, "libc"),
    ];
    for (expr, want) in strings {
        let (out, err, _) = run(&format!(
            "BEGIN {{ printf(\"[%s]\\n\", {expr}); exit(0); }}"
        ));
        assert!(err.is_empty(), "{expr}: stderr {err}");
        assert_eq!(
            out.lines().next(),
            Some(format!("[{want}]").as_str()),
            "{expr}"
        );
    }
    let ints = [
        // index: first position at or after start (negative start -> 0; start past the end ->
        // the length for an empty needle, else -1); both empty -> 0.
        (r#"index("hello", "l")"#, "2"),
        (r#"index("hello", "lo")"#, "3"),
        (r#"index("hello", "z")"#, "-1"),
        (r#"index("hello", "")"#, "0"),
        (r#"index("", "")"#, "0"),
        (r#"index("", "a")"#, "-1"),
        (r#"index("hello", "l", 3)"#, "3"),
        (r#"index("hello", "l", 4)"#, "-1"),
        (r#"index("hello", "h", -5)"#, "0"),
        (r#"index("hello", "", 7)"#, "5"),
        (r#"index("hello", "o", 5)"#, "-1"),
        (r#"index("abcabc", "abc", 1)"#, "3"),
        // rindex: last position at or before start (default: the length, so "" is found there;
        // negative start -> 0 for an empty needle, else -1; start past the end -> the length).
        (r#"rindex("hello", "l")"#, "3"),
        (r#"rindex("hello", "")"#, "5"),
        (r#"rindex("hello", "z")"#, "-1"),
        (r#"rindex("hello", "l", 2)"#, "2"),
        (r#"rindex("hello", "l", 1)"#, "-1"),
        (r#"rindex("hello", "l", 100)"#, "3"),
        (r#"rindex("hello", "", -1)"#, "0"),
        (r#"rindex("hello", "l", -1)"#, "-1"),
        (r#"rindex("", "")"#, "0"),
        (r#"rindex("abcabc", "abc")"#, "3"),
    ];
    for (expr, want) in ints {
        assert_eq!(eval(expr), want, "{expr}");
    }
    // A needle that is not a constant is compared over the whole strsize.
    let (out, err, _) = run(r#"BEGIN {
        t = "lib"; s = "/usr/lib/libc.so";
        printf("%d %d %s|%s\n", index(s, t), rindex(s, t), strstr(s, t), strchr(s, 'c'));
        exit(0);
    }"#);
    assert!(err.is_empty(), "{err}");
    assert_eq!(out.lines().next(), Some("5 9 lib/libc.so|c.so"));
}
