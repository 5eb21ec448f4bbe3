//! The web UI and its Jaeger API on a ClickHouse store (issue 20): every file of
//! ../shared/data imported into SQLite and into ClickHouse gives the same answers from both
//! servers. Needs a ClickHouse server (`.ci/run` starts Debian's clickhouse-server on
//! 127.0.0.1:8123; elsewhere set $SIGHTLINE_CLICKHOUSE_URL), else the test skips.

mod common;

use causal_collector::StoreSpec;
use causal_collector::clickhouse::{ClickHouseStore, ClickHouseUrl};
use common::{HDFS_TASK, NODE_TASK, PY_TASK, Server, get, get_json, shared_store};
use serde_json::Value;

/// A ClickHouse database of its own for this test, dropped first; `None` (after a skip
/// message, or a panic under CI) when no server answers.
fn server_db() -> Option<ClickHouseUrl> {
    let url = ClickHouseUrl::parse(&test_support::clickhouse_server()?)
        .expect("SIGHTLINE_CLICKHOUSE_URL parses")
        .with_database("sightline_test_ui");
    ClickHouseStore::open(&url)
        .unwrap()
        .drop_database()
        .unwrap();
    Some(url)
}

/// The JSON answer of GET `base` + `path` (the two stores' answers must be equal).
fn answer(base: &str, path: &str) -> Value {
    get_json(&format!("{base}{path}"))
}

#[test]
fn ui_and_jaeger_api_answer_alike_on_clickhouse_and_sqlite() {
    let Some(url) = server_db() else { return };
    let d = tempfile::tempdir().unwrap();
    let Some(db) = shared_store(d.path()) else {
        return;
    };
    // The same files into ClickHouse, as `sightline import --store clickhouse://…` does.
    let mut ch = ClickHouseStore::open(&url).unwrap();
    let mut files: Vec<_> = ["xtrace", "otlp"]
        .iter()
        .filter_map(|d| test_support::shared_data(d))
        .flat_map(|d| std::fs::read_dir(d).unwrap().flatten().map(|e| e.path()))
        .filter(|p| !p.to_string_lossy().ends_with(".headers.txt"))
        .collect();
    files.sort();
    for f in &files {
        causal_collector::import::import_file(&mut ch, f, 1).unwrap();
    }
    let lite = Server::start(&db, None);
    let house = Server::start_store(StoreSpec::ClickHouse(url.clone()), None);
    let (l, h) = (&lite.base, &house.base);

    let services = answer(l, "/api/ui/services");
    let list = services["services"].as_array().unwrap().clone();
    assert!(list.len() >= 3, "{services}");
    assert_eq!(answer(h, "/api/ui/services"), services);
    assert_eq!(answer(h, "/api/services"), answer(l, "/api/services"));
    let mut paths = vec![
        "/api/ui/search".to_string(),
        "/api/ui/search?errors=1".to_string(),
        "/api/ui/search?limit=3".to_string(),
        format!("/api/ui/task/{NODE_TASK}"),
        format!("/api/ui/task/{}", &PY_TASK[..8]),
        format!("/api/ui/task/{HDFS_TASK}"),
        format!("/api/ui/task/{HDFS_TASK}/dag"),
        format!("/api/ui/task/{NODE_TASK}/item/0"),
        format!("/api/ui/compare?a={NODE_TASK}&b={PY_TASK}"),
        format!("/api/traces/{NODE_TASK}"),
        format!("/api/traces/{HDFS_TASK}"),
        "/api/traces?service=FsShell&limit=5".to_string(),
    ];
    // Services of each kind (OTLP, Jaeger's, X-Trace agents), not all 190 (each path is a
    // request to each server).
    let named = ["research-node-demo", "FsShell", "DataNode"];
    for n in named {
        assert!(list.iter().any(|s| s == n), "{n} in {services}");
    }
    let sample = list
        .iter()
        .step_by(40)
        .chain(list.last())
        .map(|s| s.as_str().unwrap());
    for s in named.into_iter().chain(sample) {
        let enc = s.replace(' ', "%20");
        paths.push(format!("/api/ui/operations?service={enc}"));
        paths.push(format!("/api/services/{enc}/operations"));
        paths.push(format!("/api/operations?service={enc}"));
        paths.push(format!("/api/ui/search?service={enc}"));
        paths.push(format!("/api/traces?service={enc}&limit=3"));
    }
    for p in &paths {
        let want = answer(l, p);
        assert_eq!(answer(h, p), want, "GET {p}");
    }
    // The operations of a service are real ones, not an empty list on both.
    let ops = answer(h, "/api/services/research-node-demo/operations");
    assert!(
        ops["data"].as_array().is_some_and(|a| !a.is_empty()),
        "{ops}"
    );
    // Unknown tasks are the same error on both.
    assert_eq!(
        get(&format!("{h}/api/ui/task/FFFFFFFF")).0,
        get(&format!("{l}/api/ui/task/FFFFFFFF")).0
    );
    drop(house);
    ch.drop_database().unwrap();
}
