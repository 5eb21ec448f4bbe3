//! `sightline probe -l` lists each description's probes in ID order, as dtrace(1M) does.
//! Regression: tracefs directory order printed sched's IDs as 100380 before 100379.

#[test]
fn listed_probes_are_in_id_order() {
    if !test_support::privileged("reads tracefs (mounting it if needed)") {
        return;
    }
    let out = crate::sightline()
        .args(["probe", "-l", "-n", "sched:::", "-n", "dtrace:::"])
        .output()
        .expect("run sightline probe -l");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<(u32, &str)> = text
        .lines()
        .skip(1)
        .map(|l| {
            let mut f = l.split_whitespace();
            (
                f.next().and_then(|id| id.parse().ok()).expect("numeric ID"),
                f.next().expect("provider"),
            )
        })
        .collect();
    let sched: Vec<u32> = rows
        .iter()
        .filter(|(_, p)| *p == "sched")
        .map(|(id, _)| *id)
        .collect();
    assert!(sched.len() > 10, "few sched tracepoints listed:\n{text}");
    assert!(
        sched.windows(2).all(|w| w[0] < w[1]),
        "sched IDs not ascending: {sched:?}"
    );
    // Each description keeps its place: sched's rows first, then dtrace's BEGIN END ERROR.
    let tail: Vec<(u32, &str)> = rows[sched.len()..].to_vec();
    assert_eq!(
        tail,
        vec![(1, "dtrace"), (2, "dtrace"), (3, "dtrace")],
        "{text}"
    );
}

/// `-l -v` prints each probe's stability attributes and argument types as `dtrace -l -v`
/// (DTrace guide, "Stability"): dtrace, syscall and tracepoint probes.
#[test]
fn verbose_listing_shows_stability_and_argument_types() {
    if !test_support::privileged("reads tracefs (mounting it if needed)") {
        return;
    }
    let text = verbose_listing(&[
        "-n",
        "dtrace:::BEGIN",
        "-n",
        "syscall::openat:entry",
        "-n",
        "sched:::sched_process_exit",
    ]);
    let blocks: Vec<&str> = text.split(ATTRIBUTES).collect();
    assert_eq!(blocks.len(), 4, "three probes with attributes:\n{text}");
    // BEGIN: Stable everywhere, no arguments.
    assert!(
        blocks[1].starts_with(
            "\t\tIdentifier Names: Stable\n\t\tData Semantics:   Stable\n\t\tDependency Class: Common\n"
        ),
        "{text}"
    );
    assert!(blocks[1].contains("\tArgument Types\n\t\tNone\n"), "{text}");
    // openat: a private, ISA-dependent function name; typed arguments from tracefs.
    assert!(
        blocks[2].starts_with(
            "\t\tIdentifier Names: Private\n\t\tData Semantics:   Private\n\t\tDependency Class: ISA\n"
        ),
        "{text}"
    );
    assert!(
        blocks[2].contains("\t\targs[1]: const char * filename\n"),
        "{text}"
    );
    // A Linux tracepoint: Unstable, its fields typed.
    assert!(
        blocks[3].starts_with("\t\tIdentifier Names: Unstable\n"),
        "{text}"
    );
    assert!(blocks[3].contains("\t\targs->pid: pid_t\n"), "{text}");
}

/// The line that opens each probe's attribute block in `-l -v`.
/// `-l -v` of a sightline-usdt program (crates/usdt/examples/usdt-typed.rs) shows each argument's
/// Rust type and name from its `.note.sightline` note (docs/usdt.md) and the provider's declared
/// stability as the arguments' attributes (the description stays Private/Private/Unknown: module
/// and function are the binary and a Rust function, as in DTrace's USDT guidance); the provider
/// declaring none keeps the default.
#[test]
fn verbose_listing_of_typed_usdt_arguments() {
    if !test_support::privileged("creates a held command to list its probes") {
        return;
    }
    let Some(bin) = crate::usdt_typed() else {
        return;
    };
    let text = verbose_listing(&[
        "-c",
        bin.to_str().unwrap(),
        "-n",
        "webserver$target:::request",
        "-n",
        "webserver$target:::upload",
        "-n",
        "plain$target:::tick",
    ]);
    let private = "\t\tIdentifier Names: Private\n\t\tData Semantics:   Private\n\t\tDependency Class: Unknown\n";
    let evolving = "\t\tIdentifier Names: Evolving\n\t\tData Semantics:   Evolving\n\t\tDependency Class: Common\n";
    let block = |args: &str, types: &[&str]| {
        let mut b = format!("{private}\n\tArgument Attributes\n{args}\n\tArgument Types\n");
        for t in types {
            b.push_str(&format!("\t\t{t}\n"));
        }
        b
    };
    let blocks: Vec<&str> = text.split(ATTRIBUTES).collect();
    assert_eq!(blocks.len(), 4, "three probes:\n{text}");
    // Each block runs to the next probe's ID line (or the end).
    let body = |b: &str| b.split("\n\n").take(3).collect::<Vec<_>>().join("\n\n") + "\n";
    assert_eq!(
        body(blocks[1]),
        block(
            evolving,
            &["args[0]: &str request_path", "args[1]: u16 status"]
        ),
        "{text}"
    );
    assert_eq!(
        body(blocks[2]),
        block(
            evolving,
            &[
                "args[0]: &str file_name",
                "args[1]: &[u8] head",
                "args[2]: usize head.len",
                "args[3]: i64 delta"
            ]
        ),
        "{text}"
    );
    assert_eq!(
        body(blocks[3]),
        block(private, &["args[0]: u64 i"]),
        "{text}"
    );
    for (b, name) in blocks[..3].iter().zip(["request", "upload", "tick"]) {
        assert!(
            b.trim_end().ends_with(&format!(" {name}")),
            "{name}: {text}"
        );
    }
}

const ATTRIBUTES: &str = "\n\n\tProbe Description Attributes\n";

/// The standard output of `sightline probe -l -v ARGS`, which must succeed.
fn verbose_listing(args: &[&str]) -> String {
    let out = crate::sightline()
        .args(["probe", "-l", "-v"])
        .args(args)
        .output()
        .expect("run sightline probe -l -v");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `-x amin=` refuses a script whose probes are less stable than asked (DTrace's D_ATTR_MIN).
#[test]
fn amin_refuses_less_stable_probes() {
    let out = crate::sightline()
        .args([
            "probe",
            "-e",
            "-x",
            "amin=Evolving",
            "-n",
            "syscall::read:entry { trace(arg0); }",
        ])
        .output()
        .expect("run sightline probe");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("attributes for probe description syscall::read:entry (Private/Private/ISA"),
        "{err}"
    );
    let out = crate::sightline()
        .args([
            "probe",
            "-e",
            "-x",
            "amin=Stable/Stable/Common",
            "-n",
            "dtrace:::BEGIN { exit(0); }",
        ])
        .output()
        .expect("run sightline probe");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `-l -v` of USDT and pid probes: user-defined providers that declare nothing are
/// Private/Private/Unknown; USDT arguments are typed by their stapsdt sizes, pid entry probes have
/// no typed arguments.
#[test]
fn verbose_listing_of_usdt_and_pid_probes() {
    if !test_support::privileged("creates a held command to list its probes") {
        return;
    }
    let python = "/usr/bin/python3.11";
    if !test_support::require_file(python, "the python3.11 binary with USDT probes") {
        return;
    }
    let text = verbose_listing(&[
        "-c",
        python,
        "-n",
        "python$target:::function-entry",
        "-n",
        "pid$target:libc.so.6:getpid:entry",
    ]);
    let blocks: Vec<&str> = text.split(ATTRIBUTES).collect();
    assert_eq!(blocks.len(), 3, "two probes:\n{text}");
    for b in &blocks[1..] {
        assert!(
            b.starts_with(
                "\t\tIdentifier Names: Private\n\t\tData Semantics:   Private\n\t\tDependency Class: Unknown\n"
            ),
            "{text}"
        );
    }
    // function-entry(filename, funcname, lineno): two pointers and an int.
    assert!(
        blocks[1].contains(
            "\tArgument Types\n\t\targs[0]: uint64_t\n\t\targs[1]: uint64_t\n\t\targs[2]: int32_t\n"
        ),
        "{text}"
    );
    assert!(blocks[2].contains("\tArgument Types\n\t\tNone\n"), "{text}");
}
