//! The cost views over accounting reports (docs/causal-accounting.md): `show --cost`,
//! `tasks --sort cost` and `cost --by`, on a constructed X-Trace export whose reports carry
//! known figures.

use crate::run;

/// One X-Trace report of task `task` (16 hex digits), event `op`, with `fields`, in the JSON
/// export form `sightline import` reads.
pub(crate) fn report(
    task: &str,
    op: &str,
    edge: Option<&str>,
    label: &str,
    host: &str,
    fields: &[(&str, &str)],
) -> String {
    let mut s = format!(
        r#"{{"version":"X-Trace Report ver 1.0","X-Trace":["19{task}{op}"],"Label":["{label}"],"Host":["{host}"],"Agent":["a"],"Timestamp":["1700000000000"]"#
    );
    if let Some(e) = edge {
        s.push_str(&format!(r#","Edge":["{e}"]"#));
    }
    for (k, v) in fields {
        s.push_str(&format!(r#","{k}":["{v}"]"#));
    }
    s.push('}');
    s
}

/// An accounting report: (activity, host, pid) and (cpu ns, read bytes, energy µJ).
fn account(
    task: &str,
    op: &str,
    (activity, host, pid): (&str, &str, &str),
    (cpu, read, energy): (&str, &str, &str),
) -> String {
    report(
        task,
        op,
        None,
        "sightline account",
        host,
        &[
            ("activity", activity),
            ("account.pid", pid),
            ("account.tid", pid),
            ("cpu_ns", cpu),
            ("read_bytes", read),
            ("net_tx_bytes", "10"),
            ("energy_uj", energy),
        ],
    )
}

#[test]
fn cost_views_sum_the_accounting_reports() {
    let (a, b) = ("1111111111111111", "2222222222222222");
    let reports_a = [
        report(a, "00000000000000A1", None, "request", "h1", &[]),
        account(
            a,
            "00000000000000A2",
            ("backend a", "h1", "10"),
            ("20000000", "100", "1000"),
        ),
        account(
            a,
            "00000000000000A3",
            ("backend b", "h2", "20"),
            ("60000000", "300", "3000"),
        ),
    ];
    let reports_b = [
        report(b, "00000000000000B1", None, "request", "h1", &[]),
        account(
            b,
            "00000000000000B2",
            ("backend a", "h1", "10"),
            ("5000000", "7", "250"),
        ),
    ];
    let json = format!(
        r#"[{{"id":"{a}","reports":[{}]}},{{"id":"{b}","reports":[{}]}}]"#,
        reports_a.join(","),
        reports_b.join(",")
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("costs.json");
    std::fs::write(&file, json).unwrap();
    let db = dir.path().join("s.db");
    run(&["import", file.to_str().unwrap()], &db);

    let show = run(&["show", a, "--cost"], &db);
    assert!(
        show.contains("cost: CPU 80.000ms · read 400 B · write 0 B · net 20 B out 0 B in"),
        "{show}"
    );
    assert!(show.contains("energy 4.000mJ"), "{show}");
    let row_b = show
        .lines()
        .find(|l| l.starts_with("backend b"))
        .unwrap_or_else(|| panic!("{show}"));
    let cols: Vec<&str> = row_b.split_whitespace().collect();
    // ACTIVITY(2 words) HOST PID TID CPU % READ % NET % ENERGY %
    assert_eq!(
        cols[2..],
        [
            "h2", "20", "20", "60.000ms", "75%", "300", "75%", "10", "50%", "3.000mJ", "75%"
        ],
        "{row_b}"
    );

    // Costliest first: a (80 ms) before b (5 ms), whatever their order in the store.
    let tasks = run(&["tasks", "--sort", "cost"], &db);
    let ids: Vec<&str> = tasks
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(ids, [a, b], "{tasks}");
    let top = run(&["tasks", "--sort", "cost", "--limit", "1"], &db);
    assert_eq!(top.lines().count(), 2, "{top}");
    assert!(top.contains(a), "{top}");

    let by = run(&["cost", "--by", "activity,host"], &db);
    let line = |k: &str| {
        by.lines()
            .find(|l| l.starts_with(k))
            .unwrap_or_else(|| panic!("{k}: {by}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        line("backend a")[2..],
        ["h1", "25.000ms", "107", "20", "0", "1.250mJ"]
    );
    assert_eq!(
        line("backend b")[2..],
        ["h2", "60.000ms", "300", "10", "0", "3.000mJ"]
    );
    let bad = crate::sightline()
        .args(["cost", "--by", "colour", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("expected activity, host, process or task")
    );
}

#[test]
fn account_refuses_a_bad_calibration_file_and_no_target() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model.txt");
    std::fs::write(&model, "watts_per_core = 10\nvolts = 3\n").unwrap();
    let out = crate::sightline()
        .args([
            "account",
            "--exe",
            "/bin/true",
            "--sink",
            "off",
            "--energy-model",
        ])
        .arg(&model)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("calibration line 2: unknown key"), "{err}");
    let out = crate::sightline()
        .args(["account", "--sink", "off"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing to account"), "{err}");
}

#[test]
fn account_runs_for_a_duration_and_prints_its_table() {
    if !test_support::privileged("loads the accounting BPF program") {
        return;
    }
    // The sightline binary links the causal library (its registry and probes): a valid target
    // even when no process runs it.
    let out = crate::sightline()
        .args([
            "account",
            "--no-rapl",
            "--sink",
            "off",
            "--duration",
            "500ms",
            "--exe",
        ])
        .arg(crate::bin())
        .output()
        .unwrap();
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{so}\n{se}");
    assert!(so.starts_with("TASK "), "{so}");
    assert!(so.contains("energy from model"), "{so}");
    assert!(se.contains("accounting reports sent"), "{se}");
}

/// `sightline probe -e --causal SIGHTLINE ARGS` compiles.
fn compiles_with_causal<S: AsRef<std::ffi::OsStr>>(args: &[S]) {
    let out = crate::sightline()
        .args(["probe", "-e", "--causal"])
        .arg(crate::bin())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `sightline probe -e -n CLAUSE` (no `--causal`) fails, naming `name`.
fn unknown_without_causal(clause: &str, name: &str) {
    let out = crate::sightline()
        .args(["probe", "-e", "-n", clause])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(name), "{err}");
}

#[test]
fn probe_causal_defines_causal_task_and_causal_activity() {
    // The sightline binary links the causal library: its causal:context probes exist.
    let clause =
        "syscall::read:return /causal_task/ { @[causal_task, causal_activity] = sum(arg0); }";
    compiles_with_causal(&["-n", clause]);
    // Without --causal the names are unknown.
    unknown_without_causal(clause, "causal_task");
    // --causal alone is no program.
    let out = crate::sightline()
        .args(["probe", "--causal"])
        .arg(crate::bin())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no probes specified"));
}

#[test]
fn probe_causal_defines_causal_baggage_in_clauses_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("by-client.d");
    std::fs::write(
        &file,
        "#!/usr/sbin/dtrace -s\nsyscall::read:return /causal_baggage[\"tier\"] == \"gold\"/ { @g = count(); }\n",
    )
    .unwrap();
    let clause =
        "syscall::read:return /causal_task/ { @[causal_baggage[\"client\"]] = sum(arg0); }";
    compiles_with_causal(&[
        "-s".as_ref(),
        file.as_os_str(),
        "-n".as_ref(),
        clause.as_ref(),
    ]);
    // Without --causal, causal_baggage is an unknown name.
    unknown_without_causal(clause, "causal_baggage");
    // The key must be a string constant.
    let out = crate::sightline()
        .args(["probe", "-e", "--causal"])
        .arg(crate::bin())
        .args(["-n", "BEGIN { k = \"client\"; trace(causal_baggage[k]); }"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("-n: causal_baggage at byte 28: give the key as a string constant"),
        "{err}"
    );
}
