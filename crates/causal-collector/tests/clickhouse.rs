//! The ClickHouse store against a real server (`.ci/run` starts Debian's clickhouse-server on
//! 127.0.0.1:8123; elsewhere set $SIGHTLINE_CLICKHOUSE_URL to a server, or the tests skip):
//! every file of ../shared/data gives the same task list, views, critical paths and comparisons
//! as the SQLite store; two collectors writing at once store each event once; a newer schema is
//! refused.

use std::path::PathBuf;

use causal_analysis::{Comparison, CriticalPath, render};
use causal_collector::clickhouse::{ClickHouseStore, ClickHouseUrl};
use causal_collector::{Store, StoreError, TaskFilter, TaskSort, TraceStore, query};

/// The server to test against, with a database of its own for `name`, dropped first; `None`
/// (after a skip message, or a panic under CI) when no server answers.
fn server(name: &str) -> Option<ClickHouseUrl> {
    let url = ClickHouseUrl::parse(&test_support::clickhouse_server()?)
        .expect("SIGHTLINE_CLICKHOUSE_URL parses")
        .with_database(&format!("sightline_test_{name}"));
    ClickHouseStore::open(&url)
        .expect("open")
        .drop_database()
        .expect("drop the test database");
    Some(url)
}

/// Every trace file of ../shared/data.
fn data_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["xtrace", "otlp"] {
        let Some(d) = test_support::shared_data(dir) else {
            continue;
        };
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("json") | Some("pb")
            ) {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// The `show` text view of a task with its critical path, as `sightline show --critical-path`.
fn view(store: &dyn TraceStore, task: &str) -> String {
    let (g, skew) = query::load_graph(store, task, true).unwrap();
    let cp = CriticalPath::compute(&g);
    let notes = skew.lines();
    render::text_view(
        &g,
        &render::TextOptions {
            critical_path: cp.as_ref(),
            critical_path_only: false,
            notes: &notes,
            verbose: true,
        },
    )
}

#[test]
fn same_answers_as_sqlite_for_every_shared_file() {
    let Some(url) = server("same") else { return };
    let files = data_files();
    if files.is_empty() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut lite = Store::open(&dir.path().join("s.db")).unwrap();
    let mut ch = ClickHouseStore::open(&url).unwrap();
    for f in &files {
        let a = causal_collector::import::import_file(&mut lite, f, 1_000).unwrap();
        let b = causal_collector::import::import_file(&mut ch, f, 1_000).unwrap();
        assert_eq!((a.events, a.tasks), (b.events, b.tasks), "{}", f.display());
        assert!(b.events > 0, "{} stored nothing", f.display());
    }
    // Imported again: nothing new, and no count changes below.
    for f in &files {
        let b = causal_collector::import::import_file(&mut ch, f, 2_000).unwrap();
        assert_eq!(b.events, 0, "{} stored twice", f.display());
        assert!(b.duplicates > 0);
    }
    let all = lite.tasks(&TaskFilter::default()).unwrap();
    assert!(all.len() >= files.len(), "{} tasks", all.len());
    assert_eq!(ch.tasks(&TaskFilter::default()).unwrap(), all);
    assert_eq!(
        ch.event_count().unwrap(),
        lite.event_count().unwrap(),
        "events stored once"
    );
    // The searches of `tasks`: by service, errors, duration order with a limit, a time range.
    let service = all
        .iter()
        .flat_map(|t| t.services.clone())
        .next()
        .expect("some task names a service");
    let mid = all[all.len() / 2].first_seen_ns();
    let filters = [
        TaskFilter {
            service: Some(service),
            ..TaskFilter::default()
        },
        TaskFilter {
            errors: true,
            ..TaskFilter::default()
        },
        TaskFilter {
            sort: TaskSort::Duration,
            limit: Some(3),
            ..TaskFilter::default()
        },
        TaskFilter {
            since_ns: Some(mid),
            limit: Some(4),
            ..TaskFilter::default()
        },
        TaskFilter {
            title: Some("trace".into()),
            min_duration_ns: Some(1),
            ..TaskFilter::default()
        },
        TaskFilter {
            operation: Some("GET /".into()),
            ..TaskFilter::default()
        },
    ];
    for f in &filters {
        assert_eq!(ch.tasks(f).unwrap(), lite.tasks(f).unwrap(), "{f:?}");
    }
    // The UI's queries: services, each service's operations, one task's summary.
    let services = query::services(&lite).unwrap();
    assert!(services.len() >= 3, "{services:?}");
    assert_eq!(query::services(&ch).unwrap(), services);
    for s in &services {
        assert_eq!(
            query::operations(&ch, s).unwrap(),
            query::operations(&lite, s).unwrap(),
            "operations of {s}"
        );
    }
    for t in all.iter().step_by(7) {
        let one = query::task_summary(&ch, &t.task_id).unwrap();
        assert_eq!(one.as_ref(), Some(t), "the summary of {} alone", t.task_id);
        assert!(query::task_exists(&ch, &t.task_id).unwrap());
    }
    assert!(!query::task_exists(&ch, "FFFFFFFFFFFFFFFF").unwrap());
    // `show --critical-path` of every task, and `--compare` of neighbours.
    for t in &all {
        let id = &t.task_id;
        assert_eq!(
            ch.resolve_task(&id[..6]).ok(),
            lite.resolve_task(&id[..6]).ok()
        );
        assert_eq!(view(&ch, id), view(&lite, id), "task {id}");
    }
    for w in all.windows(2) {
        let cmp = |s: &dyn TraceStore| {
            let (a, _) = query::load_graph(s, &w[0].task_id, true).unwrap();
            let (b, _) = query::load_graph(s, &w[1].task_id, true).unwrap();
            Comparison::compute(&a, &b).text(40)
        };
        assert_eq!(cmp(&ch), cmp(&lite));
    }
    ch.drop_database().unwrap();
}

#[test]
fn two_collectors_write_one_store_concurrently() {
    let Some(url) = server("two") else { return };
    let Some(f) = test_support::shared_data("xtrace/mapreduce_medium.json") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut lite = Store::open(&dir.path().join("s.db")).unwrap();
    causal_collector::import::import_file(&mut lite, &f, 1).unwrap();
    let task = lite.tasks(&TaskFilter::default()).unwrap()[0]
        .task_id
        .clone();
    let events = lite.load_task(&task).unwrap();
    assert!(events.len() > 100);
    // Both collectors write the whole task in small batches, in opposite orders (every event
    // arrives twice, from two processes' worth of connections, racing).
    ClickHouseStore::open(&url).unwrap();
    let run = |reverse: bool| {
        let url = url.clone();
        let mut evs = events.clone();
        std::thread::spawn(move || {
            if reverse {
                evs.reverse();
            }
            let mut s = ClickHouseStore::open(&url).unwrap();
            let mut written = 0;
            for chunk in evs.chunks(37) {
                written += s.insert(chunk, 5).unwrap().events;
            }
            written
        })
    };
    let (a, b) = (run(false), run(true));
    let written = a.join().unwrap() + b.join().unwrap();
    assert!(written >= events.len(), "{written} written");
    let ch = ClickHouseStore::open(&url).unwrap();
    let got = ch.tasks(&TaskFilter::default()).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].events,
        events.len() as i64,
        "each event counted once"
    );
    let mut loaded = ch.load_task(&task).unwrap();
    assert_eq!(loaded.len(), events.len(), "each event loaded once");
    let key = |e: &causal_analysis::Event| e.id.clone();
    let mut want = events.clone();
    loaded.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(loaded, want);
    assert_eq!(ch.event_count().unwrap(), events.len() as i64);
    ch.drop_database().unwrap();
}

#[test]
fn without_the_duplicate_lookup_results_stay_the_same() {
    let Some(url) = server("nolookup") else {
        return;
    };
    let Some(f) = test_support::shared_data("xtrace/mapreduce_medium.json") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut lite = Store::open(&dir.path().join("s.db")).unwrap();
    causal_collector::import::import_file(&mut lite, &f, 1).unwrap();
    let off = ClickHouseUrl::parse(&format!(
        "clickhouse://{}:{}/{}?duplicate_lookup=off",
        url.host, url.port, url.database
    ))
    .unwrap();
    assert!(!off.duplicate_lookup && url.duplicate_lookup);
    assert!(off.to_string().ends_with("?duplicate_lookup=off"), "{off}");
    let mut ch = ClickHouseStore::open(&off).unwrap();
    let first = causal_collector::import::import_file(&mut ch, &f, 1).unwrap();
    // Imported again: without the lookup every event is sent (and counted) again...
    let again = causal_collector::import::import_file(&mut ch, &f, 2).unwrap();
    assert_eq!(again.events, first.events);
    assert_eq!(again.duplicates, 0);
    // ...and every answer is still the store's with each event once.
    let all = lite.tasks(&TaskFilter::default()).unwrap();
    assert_eq!(ch.tasks(&TaskFilter::default()).unwrap(), all);
    assert_eq!(ch.event_count().unwrap(), lite.event_count().unwrap());
    for t in &all {
        assert_eq!(view(&ch, &t.task_id), view(&lite, &t.task_id));
    }
    let bad = ClickHouseUrl::parse("clickhouse://h/db?dedupe=no").unwrap_err();
    assert!(bad.to_string().contains("unknown option"), "{bad}");
    ch.drop_database().unwrap();
}

#[test]
fn a_newer_schema_is_refused_and_an_old_one_reopens() {
    let Some(url) = server("schema") else { return };
    let mut s = ClickHouseStore::open(&url).unwrap();
    assert_eq!(
        s.schema_version().unwrap(),
        Some(causal_collector::clickhouse::CLICKHOUSE_SCHEMA_VERSION)
    );
    // Reopening the current version changes nothing.
    drop(ClickHouseStore::open(&url).unwrap());
    s.set_schema_version(99).unwrap();
    let e = ClickHouseStore::open(&url).unwrap_err();
    assert!(
        matches!(e, StoreError::ClickHouseSchema { found: 99, .. }),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(msg.contains("newer than this sightline"), "{msg}");
    s.drop_database().unwrap();
}

/// Runs `sql` on the server of `url` (outside the store, as an older sightline would have).
fn run_sql(url: &ClickHouseUrl, sql: &str) {
    ureq::post(format!("http://{}:{}/", url.host, url.port))
        .send(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

#[test]
fn a_version_1_store_is_upgraded_with_its_operations_backfilled() {
    let Some(url) = server("upgrade") else { return };
    let Some(file) = data_files().into_iter().next() else {
        return;
    };
    let mut ch = ClickHouseStore::open(&url).unwrap();
    causal_collector::import::import_file(&mut ch, &file, 1_000).unwrap();
    let services = query::services(&ch).unwrap();
    assert!(!services.is_empty(), "{}", file.display());
    let before: Vec<Vec<String>> = services
        .iter()
        .map(|s| query::operations(&ch, s).unwrap())
        .collect();
    assert!(before.iter().any(|o| !o.is_empty()), "{before:?}");
    // As a version 1 store: no operations table, version 1 recorded.
    let db = &url.database;
    run_sql(&url, &format!("DROP TABLE {db}.service_operations_mv"));
    run_sql(&url, &format!("DROP TABLE {db}.service_operations"));
    ch.set_schema_version(1).unwrap();
    drop(ch);
    let ch = ClickHouseStore::open(&url).unwrap();
    assert_eq!(
        ch.schema_version().unwrap(),
        Some(causal_collector::clickhouse::CLICKHOUSE_SCHEMA_VERSION)
    );
    let after: Vec<Vec<String>> = services
        .iter()
        .map(|s| query::operations(&ch, s).unwrap())
        .collect();
    assert_eq!(after, before, "operations after the upgrade");
    ch.drop_database().unwrap();
}

#[test]
fn a_batch_of_16k_events_is_looked_up_and_stored_once() {
    // Regression: the duplicate lookup of a 16,384-event batch (the collector's largest) was one
    // query longer than the server's max_query_size, and the whole batch failed.
    let Some(url) = server("bigbatch") else {
        return;
    };
    let events: Vec<causal_analysis::Event> = (0..16_384u64)
        .map(|i| causal_analysis::Event {
            task: format!(
                "{:016X}{:016X}00000000",
                0xB16B_A7C4_0000_0000u64 | (i / 20),
                i / 20 + 1
            ),
            id: format!("{:08X}{:08X}:start", (i / 20) as u32, (i % 20) as u32 + 1),
            agent: Some("svc".into()),
            timestamp_ns: Some(1_700_000_000_000_000_000 + i as i64 * 1_000),
            labels: vec!["op start".into()],
            ..Default::default()
        })
        .collect();
    let mut ch = ClickHouseStore::open(&url).unwrap();
    let first = TraceStore::insert(&mut ch, &events, 1).unwrap();
    assert_eq!((first.events, first.duplicates), (16_384, 0));
    let again = TraceStore::insert(&mut ch, &events, 2).unwrap();
    assert_eq!((again.events, again.duplicates), (0, 16_384));
    assert_eq!(ch.event_count().unwrap(), 16_384);
    ch.drop_database().unwrap();
}

#[test]
fn urls_keep_credentials_out_of_messages() {
    let u = ClickHouseUrl::parse("clickhouse://alice:s%40cret@ch.example:9123/traces").unwrap();
    assert_eq!(u.host, "ch.example");
    assert_eq!(u.port, 9123);
    assert_eq!(u.database, "traces");
    let shown = format!("{u} {u:?}");
    assert!(
        !shown.contains("cret") && !shown.contains("alice"),
        "{shown}"
    );
    assert_eq!(
        ClickHouseUrl::parse("clickhouse://h/db").unwrap().port,
        8123
    );
    for bad in [
        "clickhouse://h:8123",
        "clickhouse://h:8123/a-b",
        "clickhouse://:8123/db",
        "clickhouse://h:99999/db",
    ] {
        let e = ClickHouseUrl::parse(bad).unwrap_err().to_string();
        assert!(e.starts_with("bad store URL"), "{bad}: {e}");
    }
    // A server that is not there is a clear error naming it, not a hang.
    let gone = ClickHouseUrl::parse("clickhouse://127.0.0.1:1/db").unwrap();
    let e = ClickHouseStore::open(&gone).unwrap_err().to_string();
    assert!(e.contains("127.0.0.1:1/db unreachable"), "{e}");
}

#[test]
fn two_collectors_ingest_otlp_into_one_clickhouse() {
    let Some(url) = server("collect") else { return };
    let Some(node) = test_support::shared_data("otlp/node_sdk_traces.json") else {
        return;
    };
    let body = std::fs::read(node).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = || causal_collector::Config {
        xtrace_tcp: None,
        xtrace_udp: None,
        otlp_http: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
        otlp_grpc: None,
        zipkin: None,
        clickhouse: Some(url.clone()),
        ..causal_collector::Config::loopback("unused.db")
    };
    let stored = rt.block_on(async {
        let a = causal_collector::Collector::start(config()).await.unwrap();
        let b = causal_collector::Collector::start(config()).await.unwrap();
        // The same export sent to both (an exporter retrying against another collector): the
        // POSTs are answered only after the write, so the store holds it when they return.
        for c in [&a, &b] {
            let addr = c.addrs().otlp_http.unwrap();
            let body = body.clone();
            let status = tokio::task::spawn_blocking(move || {
                ureq::post(format!("http://{addr}/v1/traces"))
                    .header("Content-Type", "application/json")
                    .send(&body[..])
                    .unwrap()
                    .status()
                    .as_u16()
            })
            .await
            .unwrap();
            assert_eq!(status, 200);
        }
        let sa = a.shutdown().await.unwrap();
        let sb = b.shutdown().await.unwrap();
        (sa.events_stored, sb.events_stored)
    });
    assert_eq!(
        stored,
        (9, 0),
        "the second collector found every event stored"
    );
    let ch = ClickHouseStore::open(&url).unwrap();
    let tasks = ch.tasks(&TaskFilter::default()).unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].events, 9);
    assert_eq!(ch.load_task(&tasks[0].task_id).unwrap().len(), 9);
    ch.drop_database().unwrap();
}

/// Events of the time-range test: task `task`'s events at `times` (`None`: without a
/// timestamp), of service `svc`, ids `E0`, `E1`, …
fn timed_events(task: &str, svc: &str, times: &[Option<i64>]) -> Vec<causal_analysis::Event> {
    times
        .iter()
        .enumerate()
        .map(|(i, &ts)| causal_analysis::Event {
            task: task.into(),
            id: format!("E{i}"),
            agent: Some(svc.into()),
            timestamp_ns: ts,
            labels: vec![format!("step {i}")],
            parents: if i > 0 {
                vec![causal_analysis::Parent::causal(format!("E{}", i - 1))]
            } else {
                Vec::new()
            },
            ..causal_analysis::Event::default()
        })
        .collect()
}

/// A time-range search prunes ClickHouse's day partitions (`tasks_sql`) and still returns
/// exactly the SQLite store's tasks, for tasks straddling the range's edges: first seen just
/// before, at, and just after each end, with events on other days than their first, untimed
/// tasks (first seen when received), tasks mixing untimed and timed events, events delivered
/// twice, and times outside what ClickHouse's `DateTime` holds.
#[test]
fn time_range_search_matches_sqlite_at_the_edges() {
    let Some(url) = server("range") else { return };
    const DAY: i64 = 86_400_000_000_000;
    const H: i64 = 3_600_000_000_000;
    let t0: i64 = 1_700_000_000_000_000_000;
    let since = t0 + 2 * DAY + H;
    let until = t0 + 3 * DAY + 5 * H;
    let s = Some;
    // (task, service, event times, received time of its batch)
    let tasks: Vec<(&str, &str, Vec<Option<i64>>, i64)> = vec![
        // First seen 1 ns before `since` (same day), the rest inside: out.
        (
            "A1",
            "svc1",
            vec![s(since - 1), s(since + H), s(since + 2 * H)],
            5,
        ),
        // At `since`: in.
        ("A2", "svc1", vec![s(since), s(since + DAY)], 5),
        // 1 ns before `until`, its last event two days later: in, with all 3 events.
        (
            "A3",
            "svc2",
            vec![s(until - 1), s(until + DAY), s(until + 2 * DAY)],
            5,
        ),
        // At `until`: out.
        ("A4", "svc1", vec![s(until), s(until + 1)], 5),
        // First a day before the range, then events inside: out.
        ("A5", "svc1", vec![s(since - DAY), s(since + H)], 5),
        // A week before, with its last event inside: out.
        ("A6", "svc2", vec![s(since - 7 * DAY), s(since + 3 * H)], 5),
        // Events stored out of order: the earliest (inside) comes last.
        ("A7", "svc1", vec![s(until + DAY), s(since + 5)], 5),
        // No timestamps, received inside: in; received before: out.
        ("B1", "svc1", vec![None, None], since + 10),
        ("B2", "svc2", vec![None], since - 10),
        // Untimed events with one timed event inside (first seen then): in; before: out.
        ("C1", "svc1", vec![None, s(since + 7), None], t0),
        ("C2", "svc2", vec![None, s(since - 7)], since + 20),
        // A timed event in the first day of 1970 (the untimed events' day): out of the range,
        // in a range over that day.
        ("D1", "svc1", vec![s(1_000), s(2_000)], since + 30),
        // Past 2106 (DateTime wraps): out of the range, in an open-ended one.
        ("D2", "svc2", vec![s(i64::MAX - 10)], since + 40),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut lite = Store::open(&dir.path().join("s.db")).unwrap();
    let mut ch = ClickHouseStore::open(&url).unwrap();
    for (task, svc, times, received) in &tasks {
        let evs = timed_events(task, svc, times);
        // In two batches each (more than one part and summary row per task).
        let (a, b) = evs.split_at(evs.len() / 2);
        for part in [a, b] {
            lite.insert(part, *received).unwrap();
            ch.insert(part, *received).unwrap();
        }
    }
    // A8: first seen inside, of service svc1 there and of svc3 only on a later day.
    let mut a8 = timed_events("A8", "svc1", &[Some(since + 1), Some(until + DAY)]);
    a8[1].agent = Some("svc3".into());
    for part in a8.chunks(1) {
        lite.insert(part, 5).unwrap();
        ch.insert(part, 5).unwrap();
    }
    // A7 delivered again: counted once.
    let again = timed_events("A7", "svc1", &tasks[6].2);
    ch.insert(&again, 99).unwrap();
    let ids = |v: &[causal_collector::TaskSummary]| -> Vec<String> {
        v.iter().map(|t| t.task_id.clone()).collect()
    };
    let range = |since: Option<i64>, until: Option<i64>| TaskFilter {
        since_ns: since,
        until_ns: until,
        ..TaskFilter::default()
    };
    let cases: Vec<(TaskFilter, Vec<&str>)> = vec![
        (
            range(Some(since), Some(until)),
            vec!["A2", "A8", "A7", "C1", "B1", "A3"],
        ),
        (
            TaskFilter {
                service: Some("svc1".into()),
                ..range(Some(since), Some(until))
            },
            vec!["A2", "A8", "A7", "C1", "B1"],
        ),
        (
            TaskFilter {
                service: Some("svc3".into()),
                ..range(Some(since), Some(until))
            },
            vec!["A8"],
        ),
        (
            TaskFilter {
                service: Some("svc3".into()),
                ..range(None, Some(since))
            },
            vec![],
        ),
        (
            TaskFilter {
                limit: Some(2),
                ..range(Some(since), Some(until))
            },
            vec!["B1", "A3"],
        ),
        (
            TaskFilter {
                sort: TaskSort::Duration,
                limit: Some(3),
                ..range(Some(since), Some(until))
            },
            vec!["A8", "A7", "A3"],
        ),
        (
            TaskFilter {
                min_duration_ns: Some(DAY),
                ..range(Some(since), Some(until))
            },
            vec!["A2", "A8", "A7", "A3"],
        ),
        (range(Some(0), Some(DAY)), vec!["D1"]),
        (
            range(Some(since), None),
            vec!["A2", "A8", "A7", "C1", "B1", "A3", "A4", "D2"],
        ),
        (
            range(None, Some(since)),
            vec!["D1", "A6", "A5", "B2", "C2", "A1"],
        ),
        // A range past 2106, and an empty one.
        (range(Some(i64::MAX - 11), Some(i64::MAX)), vec!["D2"]),
        (range(Some(until), Some(since)), vec![]),
    ];
    for (f, want) in &cases {
        let got = ch.tasks(f).unwrap();
        assert_eq!(got, lite.tasks(f).unwrap(), "{f:?}");
        assert_eq!(ids(&got), *want, "{f:?}");
    }
    // Whole summaries, not their days in the range: A3's three events over three days.
    let a3 = ch
        .tasks(&TaskFilter {
            task_id: Some("A3".into()),
            ..range(Some(since), Some(until))
        })
        .unwrap();
    assert_eq!((a3[0].events, a3[0].last_ts_ns), (3, Some(until + 2 * DAY)));
    let a7 = &ch.tasks(&range(Some(since), Some(until))).unwrap()[2];
    assert_eq!((a7.task_id.as_str(), a7.events), ("A7", 2));
    ch.drop_database().unwrap();
}

#[test]
fn a_version_2_store_is_upgraded_with_its_service_tasks_backfilled() {
    let Some(url) = server("upgrade3") else {
        return;
    };
    let Some(file) = data_files().into_iter().next() else {
        return;
    };
    let mut ch = ClickHouseStore::open(&url).unwrap();
    causal_collector::import::import_file(&mut ch, &file, 1_000).unwrap();
    let services = query::services(&ch).unwrap();
    let by_service = |ch: &ClickHouseStore| -> Vec<usize> {
        services
            .iter()
            .map(|s| {
                ch.tasks(&TaskFilter {
                    service: Some(s.clone()),
                    ..TaskFilter::default()
                })
                .unwrap()
                .len()
            })
            .collect()
    };
    let before = by_service(&ch);
    assert!(before.iter().all(|&n| n > 0), "{before:?}");
    // As a version 2 store: no service_tasks, version 2 recorded; a search by service finds
    // nothing there.
    let db = &url.database;
    run_sql(&url, &format!("DROP TABLE {db}.service_tasks_mv"));
    run_sql(&url, &format!("DROP TABLE {db}.service_tasks"));
    ch.set_schema_version(2).unwrap();
    drop(ch);
    let ch = ClickHouseStore::open(&url).unwrap();
    assert_eq!(
        ch.schema_version().unwrap(),
        Some(causal_collector::clickhouse::CLICKHOUSE_SCHEMA_VERSION)
    );
    assert_eq!(
        by_service(&ch),
        before,
        "tasks by service after the upgrade"
    );
    ch.drop_database().unwrap();
}

/// `show` loads a task's events in arrival order, each copy once, without `FINAL`: events
/// stored in three batches out of id order, the first batch written again (no duplicate
/// lookup, so the copies reach the table), and another version of one event, come back as
/// SQLite returns them.
#[test]
fn a_task_loads_in_arrival_order_with_copies_collapsed() {
    let Some(url) = server("load") else { return };
    let off = ClickHouseUrl::parse(&format!(
        "clickhouse://{}:{}/{}?duplicate_lookup=off",
        url.host, url.port, url.database
    ))
    .unwrap();
    let t0 = 1_700_000_000_000_000_000i64;
    let mut evs = timed_events(
        "F00D",
        "svc",
        &(0..9).map(|i| Some(t0 + i * 1_000)).collect::<Vec<_>>(),
    );
    evs.reverse();
    let dir = tempfile::tempdir().unwrap();
    let mut lite = Store::open(&dir.path().join("s.db")).unwrap();
    let mut ch = ClickHouseStore::open(&off).unwrap();
    let mut changed = evs[4].clone();
    changed.labels = vec!["another version".into()];
    let batches = [
        &evs[..3],
        &evs[3..6],
        &evs[6..],
        &evs[..3],
        std::slice::from_ref(&changed),
    ];
    for (i, b) in batches.iter().enumerate() {
        lite.insert(b, i as i64).unwrap();
        ch.insert(b, i as i64).unwrap();
    }
    let loaded = ch.load_task("F00D").unwrap();
    assert_eq!(loaded.len(), 10, "9 events and one more version");
    assert_eq!(loaded, lite.load_task("F00D").unwrap());
    assert_eq!(loaded[0].id, "E8");
    assert_eq!(loaded[9].labels, ["another version"]);
    ch.drop_database().unwrap();
}
