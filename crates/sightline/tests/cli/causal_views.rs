//! `sightline show` and `import` on hand-made OTLP traces whose answers are known: the clock-skew
//! line and `--no-skew-adjust`, the critical path first or alone with labelled time columns, each
//! span once with its duration, kind and status, processes told apart by service, and a second
//! import that changes nothing.

use std::path::Path;

use crate::run;
use serde_json::Value;

const T0: i64 = 1_700_000_000_000_000_000;
const MS: i64 = 1_000_000;
const SKEWED: &str = "0AF7651916CD43DD8448EB211C80319C";
const TWO_SERVICES: &str = "4BF92F3577B34DA6A3CE929D0E0E4736";

fn span(
    trace: &str,
    id: &str,
    parent: Option<&str>,
    name: &str,
    kind: u8,
    t0: i64,
    t1: i64,
) -> Value {
    let mut s = serde_json::json!({
        "traceId": trace, "spanId": id, "name": name, "kind": kind,
        "startTimeUnixNano": (T0 + t0).to_string(), "endTimeUnixNano": (T0 + t1).to_string(),
    });
    if let Some(p) = parent {
        s["parentSpanId"] = p.into();
    }
    s
}

fn resource(attrs: &[(&str, &str)], spans: Vec<Value>) -> Value {
    let attrs: Vec<Value> = attrs
        .iter()
        .map(|(k, v)| serde_json::json!({"key": k, "value": {"stringValue": v}}))
        .collect();
    serde_json::json!({"resource": {"attributes": attrs}, "scopeSpans": [{"spans": spans}]})
}

/// Trace SKEWED: `frontend` on host a calls `backend` on host b, whose clock is 65.4 ms behind
/// (it stamped its 20–80 ms as −45.4–14.6 ms) and which fails. Trace TWO_SERVICES: `alpha` calls
/// `beta`, neither reporting a pid or a host.
fn write_traces(dir: &Path) -> std::path::PathBuf {
    let mut server = span(
        SKEWED,
        "00F067AA0BA902B7",
        Some("53995C3F42CD8AD8"),
        "GET /stock",
        2,
        -45_400_000,
        14_600_000,
    );
    server["status"] = serde_json::json!({"code": 2, "message": "boom"});
    server["attributes"] = serde_json::json!([
        {"key": "http.route", "value": {"stringValue": "/stock"}},
        {"key": "http.status_code", "value": {"intValue": "500"}},
        {"key": "retry.ids", "value": {"arrayValue": {"values": [{"intValue": "1"}, {"intValue": 2}]}}}
    ]);
    let body = serde_json::json!({"resourceSpans": [
        resource(&[("service.name", "frontend"), ("host.name", "a")],
                 vec![span(SKEWED, "53995C3F42CD8AD8", None, "checkout", 3, 0, 100 * MS)]),
        resource(&[("service.name", "backend"), ("host.name", "b")], vec![server]),
        resource(&[("service.name", "alpha")],
                 vec![span(TWO_SERVICES, "1111111111111111", None, "root", 2, 0, 50 * MS)]),
        resource(&[("service.name", "beta")],
                 vec![span(TWO_SERVICES, "2222222222222222", Some("1111111111111111"), "work", 1, 10 * MS, 40 * MS)]),
    ]});
    let f = dir.join("traces.json");
    std::fs::write(&f, serde_json::to_vec(&body).unwrap()).unwrap();
    f
}

fn store() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let f = write_traces(tmp.path());
    let db = tmp.path().join("v.db");
    let out = run(&["import", f.to_str().unwrap()], &db);
    assert!(out.contains(": 8 events in 2 tasks (OtlpJson)"), "{out}");
    (tmp, db)
}

#[test]
fn skew_is_corrected_and_shown_and_can_be_turned_off() {
    let (_tmp, db) = store();
    let text = run(&["show", SKEWED, "--critical-path"], &db);
    let mut lines = text.lines();
    let head = lines.next().unwrap();
    assert!(head.ends_with("2 hosts, duration 100.000ms"), "{text}");
    assert_eq!(
        lines.next(),
        Some("skew adjusted: host b +65.4 ms (against a, 2 bounds)"),
        "{text}"
    );
    assert!(!text.contains("problem:"), "{text}");
    // The server span now lies inside its client span: 20..80 ms, on the path unclipped.
    assert!(
        text.contains("     +20.000ms    20.000ms  backend: GET /stock start  [b backend]  00F067AA0BA902B7:start"),
        "{text}"
    );
    assert!(!text.contains("(clipped)"), "{text}");
    // `tasks` shows the corrected duration too (stored: 145.4 ms, as --no-skew-adjust shows).
    let row = |args: &[&str]| {
        run(args, &db)
            .lines()
            .find(|l| l.starts_with(SKEWED))
            .unwrap_or_else(|| panic!("no {SKEWED} row"))
            .to_string()
    };
    let adjusted = row(&["tasks"]);
    assert!(adjusted.contains(" 100.000ms "), "{adjusted}");
    let stored = row(&["tasks", "--no-skew-adjust"]);
    assert!(stored.contains(" 145.400ms "), "{stored}");
    let listed: Value = serde_json::from_str(&run(&["tasks", "--json"], &db)).unwrap();
    let t = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_id"] == SKEWED)
        .unwrap();
    assert_eq!(
        t["last_ts_ns"].as_i64().unwrap() - t["first_ts_ns"].as_i64().unwrap(),
        100 * MS
    );

    let raw = run(
        &["show", SKEWED, "--critical-path", "--no-skew-adjust"],
        &db,
    );
    assert!(!raw.contains("skew adjusted"), "{raw}");
    assert!(
        raw.lines().next().unwrap().ends_with("duration 145.400ms"),
        "{raw}"
    );
    assert!(
        raw.contains("problem: clock skew: 1 edges from a to b go back in time"),
        "{raw}"
    );
    // Unadjusted, the path still never lasts longer than the root span: the server is clipped.
    assert!(raw.contains("critical path: 4 events, 100.000ms;"), "{raw}");
    assert!(raw.contains("(clipped)"), "{raw}");

    let v: Value = serde_json::from_str(&run(
        &["show", SKEWED, "--format", "json", "--critical-path"],
        &db,
    ))
    .unwrap();
    assert_eq!(v["skew_adjustment"]["reference"], "a");
    assert_eq!(v["skew_adjustment"]["hosts"][0]["host"], "b");
    assert_eq!(v["skew_adjustment"]["hosts"][0]["offset_ns"], 65_400_000);
    let cp = &v["critical_path"];
    assert_eq!(cp["total_ns"], 100 * MS);
    assert_eq!(cp["rules"], serde_json::json!(["span_tree"]));
    let deltas: Vec<i64> = cp["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["delta_ns"].as_i64().unwrap())
        .collect();
    assert_eq!(deltas, [0, 20 * MS, 60 * MS, 20 * MS]);
}

#[test]
fn critical_path_first_or_alone_and_each_span_once() {
    let (_tmp, db) = store();
    let text = run(&["show", SKEWED, "--critical-path"], &db);
    let path_at = text.find("\ncritical path: ").expect("path listed");
    let spans_at = text
        .find("\nspans (2): +offset from the task's start, then duration")
        .unwrap();
    assert!(path_at < spans_at, "the path comes first: {text}");
    assert!(
        text.contains("; rule: span tree; columns: offset from the task's start, step duration\n"),
        "{text}"
    );
    // Each span once, with its duration, kind and status.
    let span_lines: Vec<&str> = text[spans_at..].lines().skip(2).collect();
    assert_eq!(
        span_lines,
        [
            "* +0ns 100.000ms  frontend: checkout (client)  [a frontend]  53995C3F42CD8AD8",
            "*   +20.000ms 60.000ms  backend: GET /stock (server, error: boom)  [b backend]  00F067AA0BA902B7",
        ],
        "{text}"
    );

    assert!(!text.contains("http.route"), "{text}");
    let verbose = run(&["show", SKEWED, "-v"], &db);
    assert!(
        verbose.contains(
            "(server, error: boom)  [b backend]  00F067AA0BA902B7\n      http.route = /stock\n      http.status_code = 500\n      retry.ids = [1,2]\n      resource.service.name = backend\n      resource.host.name = b\n"
        ),
        "{verbose}"
    );
    // The JSON keeps the attributes' OTLP types (issue 17: int arrays came back as strings).
    let json: Value =
        serde_json::from_str(&run(&["show", SKEWED, "--format", "json"], &db)).unwrap();
    let start = json["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == "00F067AA0BA902B7:start")
        .unwrap();
    assert_eq!(
        start["typed"],
        serde_json::json!([
            ["http.status_code", {"int": 500}],
            ["retry.ids", {"array": [{"int": 1}, {"int": 2}]}]
        ])
    );

    let only = run(&["show", SKEWED, "--critical-path-only"], &db);
    assert!(
        only.contains("\ncritical path: 4 events, 100.000ms;"),
        "{only}"
    );
    assert!(!only.contains("spans ("), "{only}");
    assert!(only.starts_with(&text[..path_at]), "same header: {only}");
}

#[test]
fn two_services_without_pid_or_host_are_two_processes() {
    let (_tmp, db) = store();
    let text = run(&["show", TWO_SERVICES, "--critical-path-only"], &db);
    let procs: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "time by process:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(
        procs,
        [
            "      30.000ms  60.0%     1 steps  beta",
            "      20.000ms  40.0%     2 steps  alpha",
        ],
        "{text}"
    );
    assert_eq!(
        text.matches("time between processes: 20.000ms").count(),
        1,
        "{text}"
    );
}

#[test]
fn a_second_import_changes_nothing() {
    let (tmp, db) = store();
    let before: Vec<String> = [SKEWED, TWO_SERVICES]
        .iter()
        .map(|t| run(&["show", t, "--critical-path"], &db))
        .collect();
    let tasks = run(&["tasks"], &db);
    let out = run(
        &["import", tmp.path().join("traces.json").to_str().unwrap()],
        &db,
    );
    assert!(
        out.contains(": 0 events in 2 tasks (OtlpJson); 8 already stored (not stored again)"),
        "{out}"
    );
    let after: Vec<String> = [SKEWED, TWO_SERVICES]
        .iter()
        .map(|t| run(&["show", t, "--critical-path"], &db))
        .collect();
    assert_eq!(before, after);
    assert_eq!(run(&["tasks"], &db), tasks);
}

/// `tasks` finds tasks by service, operation, attribute, duration and error, sorted by start or
/// duration.
#[test]
fn tasks_are_found_by_service_operation_attribute_duration_and_error() {
    let (_tmp, db) = store();
    let ids = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["tasks", "--json"];
        a.extend_from_slice(args);
        let v: Value = serde_json::from_str(&run(&a, &db)).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|t| t["task_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&["--service", "backend"]), [SKEWED]);
    assert_eq!(ids(&["--service", "beta"]), [TWO_SERVICES]);
    assert!(ids(&["--service", "back"]).is_empty());
    assert_eq!(ids(&["--operation", "work"]), [TWO_SERVICES]);
    assert_eq!(ids(&["--operation", "GET /stock"]), [SKEWED]);
    assert_eq!(ids(&["--attr", "http.status_code=500"]), [SKEWED]);
    assert_eq!(
        ids(&["--attr", "http.route=/stock", "--attr", "retry.ids=[1,2]"]),
        [SKEWED]
    );
    assert!(ids(&["--attr", "http.status_code=200"]).is_empty());
    assert_eq!(ids(&["--errors"]), [SKEWED]);
    // Durations as stored (earliest to latest timestamp, before any skew correction): SKEWED
    // spans 145.4 ms, TWO_SERVICES 50 ms.
    assert_eq!(ids(&["--min-duration", "100ms"]), [SKEWED]);
    assert_eq!(ids(&["--max-duration", "0.05s"]), [TWO_SERVICES]);
    assert_eq!(ids(&["--sort", "duration"]), [SKEWED, TWO_SERVICES]);
    assert_eq!(ids(&["--sort", "duration", "--limit", "1"]), [SKEWED]);
    let v: Value = serde_json::from_str(&run(&["tasks", "--json", "--errors"], &db)).unwrap();
    assert_eq!(v[0]["errors"], 1);
    assert_eq!(v[0]["services"], serde_json::json!(["backend", "frontend"]));
    // A bad --attr or duration is a usage error.
    let out = crate::sightline()
        .args(["tasks", "--attr", "novalue", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("expected KEY=VALUE"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `show --format json` is streamed from the graph (issue 17: 6.4 s and 577 MB for 100,000
/// events as one JSON value): the same document, `resources` only with `--resources`.
#[test]
fn show_json_has_every_part_of_the_task() {
    let (_tmp, db) = store();
    let plain: Value =
        serde_json::from_str(&run(&["show", TWO_SERVICES, "--format", "json"], &db)).unwrap();
    let keys: Vec<&str> = plain
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for k in [
        "task",
        "events",
        "edges",
        "problems",
        "critical_path",
        "skew_adjustment",
    ] {
        assert!(keys.contains(&k), "{k} in {keys:?}");
    }
    assert!(!keys.contains(&"resources"), "{keys:?}");
    assert_eq!(plain["task"], TWO_SERVICES);
    assert_eq!(plain["events"].as_array().unwrap().len(), 4);
    assert!(plain["critical_path"].is_null());
    // 2 start → end edges, the child's parent edge, and the nesting edge of `work` in `root`.
    assert_eq!(
        plain["edges"].as_array().unwrap().len(),
        4,
        "{}",
        plain["edges"]
    );
    let full: Value = serde_json::from_str(&run(
        &[
            "show",
            TWO_SERVICES,
            "--format",
            "json",
            "--resources",
            "--critical-path",
        ],
        &db,
    ))
    .unwrap();
    assert_eq!(full["critical_path"]["total_ns"], 50 * MS);
    assert!(full["resources"].is_object(), "{}", full["resources"]);
    assert_eq!(full["events"], plain["events"]);
}

#[test]
fn show_follows_a_task_into_the_peer_store_its_edge_destination_names() {
    use crate::cost_views::report;
    let task = "5151515151515151";
    let tmp = tempfile::tempdir().unwrap();
    let store = |name: &str, reports: &[String]| {
        let f = tmp.path().join(format!("{name}.json"));
        let json = format!(r#"[{{"id":"{task}","reports":[{}]}}]"#, reports.join(","));
        std::fs::write(&f, json).unwrap();
        let db = tmp.path().join(format!("{name}.db"));
        run(&["import", f.to_str().unwrap()], &db);
        db
    };
    // Domain a: the request and its call out. Domain b: the call's handling, whose first event
    // names a's collector (the library's EdgeDestination, from the metadata's Destination).
    let a = store(
        "a",
        &[
            report(task, "00000000000000A1", None, "request", "ha", &[]),
            report(
                task,
                "00000000000000A2",
                Some("00000000000000A1"),
                "call b",
                "ha",
                &[],
            ),
        ],
    );
    let b = store(
        "b",
        &[
            report(
                task,
                "00000000000000B1",
                Some("00000000000000A2"),
                "handle",
                "hb",
                &[("EdgeDestination", "tcp://collector.a:7831")],
            ),
            report(
                task,
                "00000000000000B2",
                Some("00000000000000B1"),
                "reply",
                "hb",
                &[],
            ),
        ],
    );
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let alone = run(&["show", task], &b);
    assert!(
        alone.contains(&format!(
            "view ends: 00000000000000B1 (in {b_s}) follows 00000000000000A2, reported to tcp://collector.a:7831: join its store with --peer tcp://collector.a:7831=STORE"
        )),
        "{alone}"
    );
    let peer = format!("tcp://collector.a:7831={a_s}");
    let whole = run(&["show", task, "--peer", &peer], &b);
    assert!(
        whole.contains(&format!("domains: {b_s} 2 events, {a_s} 2 events")),
        "{whole}"
    );
    assert!(
        whole.contains(&format!(
            "domain boundary: {a_s} -> {b_s}: 00000000000000A2 -> 00000000000000B1"
        )),
        "{whole}"
    );
    assert!(!whole.contains("view ends"), "{whole}");
    let v: Value = serde_json::from_str(&run(
        &["show", task, "--peer", &peer, "--format", "json"],
        &b,
    ))
    .unwrap();
    assert_eq!(v["events"].as_array().unwrap().len(), 4);
    assert_eq!(v["domains"]["view_ends"].as_array().unwrap().len(), 0);
    // A peer for another collector is not joined, and the view still ends at B1.
    let other = format!("tcp://collector.c:7831={a_s}");
    let v: Value = serde_json::from_str(&run(
        &["show", task, "--peer", &other, "--format", "json"],
        &b,
    ))
    .unwrap();
    assert_eq!(v["events"].as_array().unwrap().len(), 2);
    assert_eq!(
        v["domains"]["view_ends"][0]["domain"],
        "tcp://collector.a:7831"
    );
}

#[test]
fn show_joins_a_task_from_two_domains_stores() {
    // Trace TWO_SERVICES across two administrative domains: `alpha` reports to domain a's
    // collector, `beta` (called by alpha) to domain b's.
    let tmp = tempfile::tempdir().unwrap();
    let part = |name: &str, r: Value| {
        let f = tmp.path().join(format!("{name}.json"));
        std::fs::write(
            &f,
            serde_json::to_vec(&serde_json::json!({"resourceSpans": [r]})).unwrap(),
        )
        .unwrap();
        let db = tmp.path().join(format!("{name}.db"));
        run(&["import", f.to_str().unwrap()], &db);
        db
    };
    let a = part(
        "a",
        resource(
            &[("service.name", "alpha")],
            vec![span(
                TWO_SERVICES,
                "1111111111111111",
                None,
                "root",
                2,
                0,
                50 * MS,
            )],
        ),
    );
    let b = part(
        "b",
        resource(
            &[("service.name", "beta")],
            vec![span(
                TWO_SERVICES,
                "2222222222222222",
                Some("1111111111111111"),
                "work",
                1,
                10 * MS,
                40 * MS,
            )],
        ),
    );
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let text = run(&["show", TWO_SERVICES, "--db", a_s], &b);
    assert!(
        text.contains(&format!("domains: {a_s} 2 events, {b_s} 2 events")),
        "{text}"
    );
    // beta's span starts after alpha's: the one edge from a's events to b's.
    let boundary: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("domain boundary:"))
        .collect();
    assert_eq!(boundary.len(), 1, "{text}");
    assert!(
        boundary[0].starts_with(&format!("domain boundary: {a_s} -> {b_s}: ")),
        "{text}"
    );
    assert!(!text.contains("view ends:"), "{text}");
    assert!(text.contains("root") && text.contains("work"), "{text}");
    // Domain b alone: its view ends at alpha's span, which only a holds.
    let out = crate::sightline()
        .args(["show", TWO_SERVICES, "--format", "json", "--db"])
        .arg(&b)
        .arg("--db")
        .arg(&b)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["domains"]["repeated"], 2, "{}", v["domains"]);
    assert_eq!(v["domains"]["view_ends"].as_array().unwrap().len(), 1);
    assert_eq!(v["domains"]["crossings"].as_array().unwrap().len(), 0);
    // Only `show` joins stores.
    let out = crate::sightline()
        .args(["tasks", "--db", a_s, "--db", b_s])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("only `sightline show` joins"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
