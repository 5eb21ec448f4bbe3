//! The library's API end to end: compile errors as typed diagnostics, the schema, records decoded
//! into user structs, exact aggregation counts under a created command, the tokio stream.

use serde::Deserialize;
use sightline_probe::{Error, Event, ExitReason, Script, Target, Value};

/// Every event of a run, failing the test on a run error.
fn events(script: &Script, target: Target) -> Vec<Event> {
    let program = script.compile(target).expect("compiles");
    program
        .run()
        .expect("starts")
        .map(|e| e.expect("runs"))
        .collect()
}

#[test]
fn a_compile_error_is_a_typed_diagnostic_with_its_span() {
    let src = "BEGIN\n{\n  trace(nosuchvar + 1);\n}\n";
    let e = Script::new(src).compile(Target::System).unwrap_err();
    let Error::Compile {
        diagnostics,
        rendered,
    } = &e
    else {
        panic!("expected a compile error, got {e:?}");
    };
    let d = diagnostics
        .iter()
        .find(|d| d.severity == "error")
        .expect("an error");
    assert_eq!(&src[d.span.0..d.span.1], "nosuchvar", "{d:?}");
    assert_eq!((d.line, d.column), (3, 9), "{d:?}");
    assert_eq!(d.file, "-n");
    assert!(d.message.contains("nosuchvar"), "{d:?}");
    assert!(rendered.contains("nosuchvar"), "{rendered}");
    assert!(
        e.to_string()
            .starts_with("the D program does not compile: -n:3:9: "),
        "{e}"
    );
    // A syntax error too.
    let e = Script::new("BEGIN { trace(1) ")
        .compile(Target::System)
        .unwrap_err();
    assert!(matches!(e, Error::Compile { .. }), "{e:?}");
}

#[test]
fn the_schema_names_each_clause_field_with_its_d_type() {
    let p = Script::new(
        "syscall::openat:entry { printf(\"%d %s\\n\", pid, copyinstr(arg1)); }
         syscall::read:return /arg0 > 0/ { trace(arg0); @bytes[execname] = sum(arg0); }",
    )
    .compile(Target::System)
    .unwrap();
    let s = p.schema();
    assert_eq!(s.clauses.len(), 2);
    let f: Vec<(&str, &str, &str)> = s.clauses[0]
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.action.as_str(), f.ty.as_str()))
        .collect();
    assert_eq!(
        f,
        [
            ("pid", "printf", "int"),
            ("copyinstr(arg1)", "printf", "string")
        ]
    );
    assert_eq!(s.clauses[0].fields[0].bytes, Some(4));
    assert_eq!(s.clauses[0].fields[1].kind, "string");
    assert_eq!(s.clauses[1].fields[0].name, "arg0");
    assert_eq!(s.clauses[1].fields[0].ty, "int64_t");
    assert_eq!(s.clauses[1].descriptions, ["syscall::read:return"]);
    assert_eq!(s.aggregations.len(), 1);
    assert_eq!(s.aggregations[0].name, "bytes");
    assert_eq!(s.aggregations[0].function, "sum");
    assert_eq!(s.aggregations[0].keys, ["string"]);
}

#[test]
fn a_printf_record_decodes_into_a_user_struct() {
    if !test_support::privileged("running BEGIN through the library") {
        return;
    }
    #[derive(Deserialize, Debug, PartialEq)]
    struct Greeting {
        word: String,
        n: u32,
        delta: i64,
    }
    let evs = events(
        &Script::new(r#"BEGIN { printf("%s %d %d\n", "hello", 42, -7); exit(3); }"#),
        Target::System,
    );
    let Some(Event::Record(rec)) = evs.first() else {
        panic!("first event is not a record: {evs:?}");
    };
    assert_eq!(
        rec.decode::<Greeting>().unwrap(),
        Greeting {
            word: "hello".into(),
            n: 42,
            delta: -7
        }
    );
    assert_eq!(rec.text(), "hello 42 -7\n");
    assert_eq!(rec.clause, Some(0));
    assert_eq!(
        (rec.probe.provider.as_str(), rec.probe.name.as_str()),
        ("dtrace", "BEGIN")
    );
    assert!(rec.timestamp_ns.is_some_and(|t| t > 0));
    let Some(Event::Exit(exit)) = evs.last() else {
        panic!("last event is not the exit: {evs:?}");
    };
    assert_eq!((exit.reason, exit.status), (ExitReason::Exit, Some(3)));
}

/// A C program making exactly `n` getpid(2) calls (`syscall(SYS_getpid)`: no libc caching).
fn getpid_program(n: u32) -> Option<std::path::PathBuf> {
    if !test_support::require_tool("cc") {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("sightline-probe-api-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join("getpids.c");
    std::fs::write(
        &c,
        format!(
            "#include <unistd.h>\n#include <sys/syscall.h>\nint main(void) {{ for (int i = 0; i < {n}; i++) syscall(SYS_getpid); return 0; }}\n"
        ),
    )
    .unwrap();
    let exe = dir.join("getpids");
    let st = std::process::Command::new("cc")
        .arg("-O1")
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .status()
        .unwrap();
    assert!(st.success(), "cc failed");
    Some(exe)
}

#[test]
fn counting_getpid_under_a_created_command_gives_the_exact_count() {
    if !test_support::privileged("attaching syscall probes through the library") {
        return;
    }
    let Some(exe) = getpid_program(1234) else {
        return;
    };
    let evs = events(
        &Script::new("syscall::getpid:entry /pid == $target/ { @calls[probefunc] = count(); }"),
        Target::command([exe.display().to_string()]).unwrap(),
    );
    let aggs: Vec<_> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Aggregation(a) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(aggs.len(), 1, "{evs:?}");
    assert_eq!(aggs[0].name, "calls");
    assert_eq!(aggs[0].function, "count");
    let e = aggs[0]
        .get(&[Value::str("getpid")])
        .expect("a getpid entry");
    assert_eq!(e.value, Some(1234));
    let Some(Event::Exit(exit)) = evs.last() else {
        panic!("no exit event: {evs:?}");
    };
    assert_eq!(exit.reason, ExitReason::TargetExited);
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
}

#[test]
fn distributions_arrive_as_numeric_buckets_and_a_fault_as_an_error_event() {
    if !test_support::privileged("running BEGIN through the library") {
        return;
    }
    let evs = events(
        &Script::new(
            "BEGIN { @q = quantize(5); @q = quantize(5); @q = quantize(100); @l = lquantize(7, 0, 10, 5); }
             BEGIN { trace(*(int *)0); }
             BEGIN { exit(0); }",
        ),
        Target::System,
    );
    let agg = |name: &str| {
        evs.iter()
            .find_map(|e| match e {
                Event::Aggregation(a) if a.name == name => Some(a.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no @{name} in {evs:?}"))
    };
    let q = agg("q");
    let b: Vec<(Option<i64>, Option<i64>, i64)> = q.entries[0]
        .buckets
        .as_ref()
        .unwrap()
        .iter()
        .map(|b| (b.min, b.max, b.count))
        .collect();
    assert_eq!(b, [(Some(4), Some(7), 2), (Some(64), Some(127), 1)]);
    assert_eq!(q.entries[0].value, None);
    let l = agg("l");
    assert_eq!(l.params.step, Some(5));
    assert_eq!(l.entries[0].total(), Some(1));
    let err = evs
        .iter()
        .find_map(|e| match e {
            Event::Error(p) => Some(p),
            _ => None,
        })
        .expect("an error event");
    assert_eq!(err.probe.name, "BEGIN");
    assert!(err.message.contains("invalid address"), "{}", err.message);
}

#[test]
fn the_stream_and_snapshots_on_demand() {
    if !test_support::privileged("running probes through the library") {
        return;
    }
    use tokio_stream::StreamExt;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let program = Script::new("BEGIN { @n = sum(41); @n = sum(1); }")
            .compile(Target::System)
            .unwrap();
        let mut stream = program.run().unwrap().into_stream();
        let handle = stream.handle();
        handle.snapshot();
        // The on-demand snapshot arrives while tracing goes on.
        let first = stream.next().await.unwrap().unwrap();
        let Event::Aggregation(a) = first else {
            panic!("expected the snapshot, got {first:?}");
        };
        assert_eq!(a.entries[0].value, Some(42));
        handle.stop();
        let rest: Vec<Event> = stream.map(|e| e.unwrap()).collect().await;
        let Some(Event::Exit(exit)) = rest.last() else {
            panic!("no exit: {rest:?}");
        };
        assert_eq!(exit.reason, ExitReason::Interrupted);
        // At exit the aggregation arrives once more.
        assert!(
            rest.iter()
                .any(|e| matches!(e, Event::Aggregation(a) if a.entries[0].value == Some(42)))
        );
    });
}

#[test]
fn amin_refuses_a_clause_with_less_stable_probes() {
    let e = Script::new("dtrace:::BEGIN { exit(0); }\nsyscall::read:entry { trace(arg0); }")
        .option_value("amin", "Evolving/Evolving/Common")
        .compile(Target::System)
        .unwrap_err();
    let Error::Compile { diagnostics, .. } = &e else {
        panic!("expected a compile error, got {e:?}");
    };
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0].line, 2, "the read clause, not BEGIN");
    assert_eq!(diagnostics[0].code.as_deref(), Some("D_ATTR_MIN"));
    assert!(
        diagnostics[0].message.contains("(Private/Private/ISA"),
        "{}",
        diagnostics[0].message
    );
    assert!(
        Script::new("dtrace:::BEGIN { exit(0); }")
            .option_value("amin", "Stable")
            .compile(Target::System)
            .is_ok()
    );
    // DTrace compares the description as written: fields left empty or globbed add nothing, so
    // `syscall:::entry` and `syscall::read*:entry` are Evolving although every syscall probe's
    // function is Private.
    for ok in ["syscall:::entry", "syscall::read*:entry"] {
        let r = Script::new(format!("{ok} {{ trace(arg0); }}"))
            .option_value("amin", "Evolving/Evolving/Common")
            .compile(Target::System);
        assert!(r.is_ok(), "{ok}: {:?}", r.err());
    }
    // No provider named: DTrace's default, Unstable/Unstable/Common, below Evolving.
    let e = Script::new("BEGIN { exit(0); }")
        .option_value("amin", "Evolving")
        .compile(Target::System)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("description BEGIN (Unstable/Unstable/Common"),
        "{e}"
    );
    let e = Script::new("BEGIN { exit(0); }")
        .option_value("amin", "Solid")
        .compile(Target::System)
        .unwrap_err();
    assert!(e.to_string().contains("invalid attributes"), "{e}");
}

#[test]
fn a_failed_speculation_is_a_typed_drops_event() {
    if !test_support::privileged("running BEGIN through the library") {
        return;
    }
    #[derive(Deserialize)]
    struct Ids(i64, i64);
    let evs = events(
        &Script::new(r#"BEGIN { printf("%d %d\n", speculation(), speculation()); exit(0); }"#),
        Target::System,
    );
    let Some(Event::Record(rec)) = evs.first() else {
        panic!("no record first: {evs:?}");
    };
    let Ids(first, second) = rec.decode().unwrap();
    assert_eq!((first, second), (1, 0), "one speculation buffer by default");
    let drops: Vec<_> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Drops(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(drops.len(), 1, "{evs:?}");
    assert_eq!(drops[0].kind, sightline_probe::DropKind::SpecUnavailable);
    assert_eq!(drops[0].count, 1);
    assert_eq!(drops[0].cpu, None);
}

#[test]
fn a_slow_consumer_gets_drops_counted_and_the_traced_command_runs_through() {
    if !test_support::privileged("attaching syscall probes through the library") {
        return;
    }
    let n = 200_000;
    let Some(exe) = getpid_program(n) else {
        return;
    };
    let program = Script::new("syscall::getpid:entry /pid == $target/ { trace(arg0); }")
        .option_value("bufsize", "16k")
        .compile(Target::command([exe.display().to_string()]).unwrap())
        .unwrap();
    let run = program
        .run_with(sightline_probe::RunOptions { queue: 1 })
        .unwrap();
    let (mut records, mut dropped, mut exit) = (0u64, 0u64, None);
    for e in run {
        match e.unwrap() {
            Event::Record(_) => {
                records += 1;
                // Slow at first: the queue of one fills, then the ring buffer.
                if records < 50 {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
            Event::Drops(d) if d.kind == sightline_probe::DropKind::Principal => dropped += d.count,
            Event::Exit(x) => exit = Some(x),
            _ => {}
        }
    }
    assert!(
        dropped > 0,
        "no drops with a 16 KiB buffer and a slow consumer"
    );
    // Every getpid() fired the probe once: each one arrived or was counted as dropped.
    assert_eq!(
        records + dropped,
        u64::from(n),
        "records {records} + drops {dropped}"
    );
    assert_eq!(exit.map(|x| x.reason), Some(ExitReason::TargetExited));
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
}
