//! Every endpoint of the UI's JSON API and Jaeger's query API, on a store loaded from the real
//! traces in `../shared/data/xtrace` and `../shared/data/otlp` (docs/ui-api.md).

mod common;

use common::{HDFS_TASK, NODE_TASK, PY_TASK, Server, get, get_headers, get_json, post_status};
use serde_json::Value;

fn server() -> Option<(tempfile::TempDir, Server)> {
    let dir = tempfile::tempdir().unwrap();
    let db = common::shared_store(dir.path())?;
    let s = Server::start(&db, None);
    Some((dir, s))
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn tasks(v: &Value) -> Vec<String> {
    v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn services_operations_and_search() {
    let Some((_d, s)) = server() else { return };
    let b = &s.base;
    let svc = strs(&get_json(&format!("{b}/api/ui/services"))["services"]);
    for want in [
        "FsShell",
        "DataNode",
        "research-node-demo",
        "research-py-demo",
    ] {
        assert!(svc.contains(&want.to_string()), "{want} in {svc:?}");
    }
    let ops = get_json(&format!("{b}/api/ui/operations?service=research-node-demo"));
    assert_eq!(
        strs(&ops["operations"]),
        ["fanout_a", "fanout_b", "handle_request", "join"]
    );
    // Recent tasks by default: all 13, newest (the Python demo, 2026-11-30 09:10:23) first.
    let all = tasks(&get_json(&format!("{b}/api/ui/search")));
    assert_eq!(all.len(), 13);
    assert_eq!(all[0], PY_TASK);
    assert_eq!(all[1], NODE_TASK);
    let one = get_json(&format!("{b}/api/ui/search?service=research-node-demo"));
    assert_eq!(tasks(&one), [NODE_TASK]);
    let hit = &one["tasks"][0];
    assert_eq!(hit["events"], 9);
    assert_eq!(strs(&hit["services"]), ["research-node-demo"]);
    assert_eq!(hit["errors"], 0);
    assert_eq!(
        hit["last_ts_ns"].as_i64().unwrap() - hit["first_ts_ns"].as_i64().unwrap(),
        15_118_017
    );
    assert_eq!(
        tasks(&get_json(&format!(
            "{b}/api/ui/search?service=research-node-demo&operation=join"
        ))),
        [NODE_TASK]
    );
    assert!(
        tasks(&get_json(&format!(
            "{b}/api/ui/search?service=research-node-demo&operation=nope"
        )))
        .is_empty()
    );
    let get_attr = tasks(&get_json(&format!(
        "{b}/api/ui/search?attr=http.method=GET"
    )));
    assert!(get_attr.contains(&NODE_TASK.to_string()), "{get_attr:?}");
    assert!(
        get_attr.iter().all(|t| t.len() == 32),
        "only OTLP spans carry http.method"
    );
    // At least 1 s: the X-Trace tasks of 1.034 s and longer (10 of them).
    let slow = tasks(&get_json(&format!(
        "{b}/api/ui/search?min_duration_ns=1000000000"
    )));
    assert_eq!(slow.len(), 10, "{slow:?}");
    assert!(slow.contains(&HDFS_TASK.to_string()));
    let fast = tasks(&get_json(&format!(
        "{b}/api/ui/search?max_duration_ns=20000000&min_duration_ns=1"
    )));
    assert_eq!(fast, [PY_TASK, NODE_TASK]);
    // 2026-01-01 .. 2027-01-01: the two OTLP demos.
    let recent = tasks(&get_json(&format!(
        "{b}/api/ui/search?since_ns=1767225600000000000&until_ns=1798761600000000000"
    )));
    assert_eq!(recent, [PY_TASK, NODE_TASK]);
    assert!(tasks(&get_json(&format!("{b}/api/ui/search?errors=1"))).is_empty());
    assert_eq!(
        tasks(&get_json(&format!("{b}/api/ui/search?limit=3"))).len(),
        3
    );
    let (status, _, body) = get(&format!("{b}/api/ui/search?limit=x"));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("parameter limit"), "{body}");
}

fn id_index(p: &Value, id: &str) -> usize {
    p["items"]["id"]
        .as_array()
        .unwrap()
        .iter()
        .position(|v| v == id)
        .unwrap_or_else(|| panic!("no item {id}"))
}

#[test]
fn task_payload_is_columnar_with_critical_path_and_detail() {
    let Some((_d, s)) = server() else { return };
    let b = &s.base;
    let p = get_json(&format!("{b}/api/ui/task/{}", NODE_TASK.to_lowercase()));
    assert_eq!(p["task"], NODE_TASK);
    assert_eq!(p["events"], 9);
    assert_eq!(p["duration_ns"], 15_118_017);
    assert_eq!(p["joins"], 1);
    let items = &p["items"];
    let n = items["id"].as_array().unwrap().len();
    // 4 spans and the span event `cache.miss`.
    assert_eq!(n, 5);
    for col in [
        "lane", "row", "start", "end", "label", "agent", "span", "error", "events", "parent",
    ] {
        assert_eq!(items[col].as_array().unwrap().len(), n, "{col}");
    }
    let strings = strs(&p["strings"]);
    let label = |k: usize| strings[items["label"][k].as_u64().unwrap() as usize].clone();
    let root = id_index(&p, "88FA71D484DA1DC1");
    assert_eq!(label(root), "handle_request");
    assert_eq!(
        (items["span"][root].as_u64(), items["start"][root].as_i64()),
        (Some(1), Some(0))
    );
    assert_eq!(items["events"][root], 2);
    let miss = id_index(&p, "1EE2F319F50A7406:event1");
    assert_eq!(
        (label(miss).as_str(), items["span"][miss].as_u64()),
        ("cache.miss", Some(0))
    );
    // The critical path (docs/critical-path.md, the Node demo): handle_request, then fanout_a.
    let cp: Vec<usize> = p["critical_path"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(cp, [root, id_index(&p, "1EE2F319F50A7406")]);
    assert_eq!(p["critical_path"]["total_ns"], 14_607_753);
    assert_eq!(
        p["critical_path"]["rules"],
        serde_json::json!(["span_tree"])
    );
    // join's two links, as item index pairs.
    let join = id_index(&p, "9774DEC99193F301");
    let e = &p["edges"];
    let links: Vec<usize> = (0..e["from"].as_array().unwrap().len())
        .filter(|&i| e["to"][i] == join && e["kind"][i] == "link")
        .map(|i| e["from"][i].as_u64().unwrap() as usize)
        .collect();
    assert_eq!(links.len(), 2);
    assert!(links.contains(&id_index(&p, "75A3333C86293E0D")));
    assert_eq!(p["skew_adjustment"]["hosts"].as_array().unwrap().len(), 0);
    // The collapse tree: every span under handle_request, the span event under fanout_a.
    let parent = |k: usize| items["parent"][k].as_i64().unwrap();
    assert_eq!(parent(root), -1);
    assert_eq!(parent(join), root as i64);
    assert_eq!(parent(id_index(&p, "75A3333C86293E0D")), root as i64);
    assert_eq!(parent(miss), id_index(&p, "1EE2F319F50A7406") as i64);

    let d = get_json(&format!("{b}/api/ui/task/{NODE_TASK}/item/{root}"));
    assert_eq!(d["id"], "88FA71D484DA1DC1");
    assert_eq!(d["critical"], true);
    let attrs = d["attributes"].as_array().unwrap();
    assert!(
        attrs.contains(&serde_json::json!(["http.method", "GET"])),
        "{attrs:?}"
    );
    let reports = d["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0]["labels"][0], "handle_request start");
    assert_eq!(d["duration_ns"], 14_607_753);
    let (status, _, _) = get(&format!("{b}/api/ui/task/{NODE_TASK}/item/99"));
    assert_eq!(status, 404);
    let (status, _, body) = get(&format!("{b}/api/ui/task/FFFFFFFF"));
    assert_eq!(status, 404);
    assert!(body.contains("no task matches"), "{body}");
}

#[test]
fn dag_layout_of_a_real_xtrace_task() {
    let Some((dir, s)) = server() else { return };
    let d = get_json(&format!("{}/api/ui/task/{HDFS_TASK}/dag", s.base));
    assert_eq!(d["events"], 839);
    assert_eq!(d["joins"].as_array().unwrap().len(), 46);
    assert_eq!(d["critical_path"].as_array().unwrap().len(), 681);
    let layer: Vec<u64> = d["layer"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let pos: Vec<u64> = d["position"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!((layer.len(), pos.len()), (839, 839));
    let e = &d["edges"];
    let from = e["from"].as_array().unwrap();
    assert_eq!(from.len(), 884, "887 edges less 3 from unknown events");
    for i in 0..from.len() {
        let (a, c) = (
            from[i].as_u64().unwrap() as usize,
            e["to"][i].as_u64().unwrap() as usize,
        );
        assert!(layer[a] < layer[c], "edge {a}->{c} goes down the layers");
    }
    let mut slots: Vec<(u64, u64)> = layer.iter().copied().zip(pos.iter().copied()).collect();
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), 839, "no two events share a slot");
    assert_eq!(
        d["layers"].as_u64().unwrap(),
        layer.iter().max().unwrap() + 1
    );
    // Cached: the same bytes again, and gzip-compressed for a client that accepts it.
    let again = get_json(&format!("{}/api/ui/task/{HDFS_TASK}/dag", s.base));
    assert_eq!(again, d);
    let (enc, gz) = common::get_gzip(&format!("{}/api/ui/task/{HDFS_TASK}/dag", s.base));
    assert_eq!(enc.as_deref(), Some("gzip"));
    let mut plain = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut plain).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&plain).unwrap(), d);
    assert!(
        gz.len() * 2 < plain.len(),
        "{} bytes gzip, {} plain",
        gz.len(),
        plain.len()
    );
    // A task that receives an event is rebuilt, not served from the cache.
    let mut store = causal_collector::Store::open(&dir.path().join("ui.db")).unwrap();
    let late = causal_analysis::Event {
        task: HDFS_TASK.into(),
        id: "00000000000000EE".into(),
        labels: vec!["late".into()],
        ..Default::default()
    };
    store.insert(&[late], 9).unwrap();
    let grown = get_json(&format!("{}/api/ui/task/{HDFS_TASK}", s.base));
    assert_eq!(grown["events"], 840);
}

#[test]
fn compare_two_tasks() {
    let Some((_d, s)) = server() else { return };
    let c = get_json(&format!(
        "{}/api/ui/compare?a={NODE_TASK}&b={PY_TASK}",
        s.base
    ));
    let c = &c["comparison"];
    assert_eq!(c["a"]["task"], NODE_TASK);
    assert_eq!(c["b"]["task"], PY_TASK);
    assert_eq!(
        (c["a"]["events"].as_u64(), c["b"]["events"].as_u64()),
        (Some(9), Some(9))
    );
    let agents: Vec<&str> = c["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["agent"].as_str().unwrap())
        .collect();
    assert!(
        agents.contains(&"research-node-demo") && agents.contains(&"research-py-demo"),
        "{agents:?}"
    );
    // Two services: every operation is in one task only; fanout_a of the Node demo lasted
    // 664834048 - 654000000 ns (its span's end and start in the data).
    let ops = c["operations"].as_array().unwrap();
    let fanout_a = ops
        .iter()
        .find(|o| o["agent"] == "research-node-demo" && o["operation"] == "fanout_a")
        .unwrap_or_else(|| panic!("{ops:?}"));
    assert_eq!(
        fanout_a,
        &serde_json::json!({
            "agent": "research-node-demo", "operation": "fanout_a", "count": [1, 0],
            "time_ns": [10_834_048, 0], "critical_path_ns": fanout_a["critical_path_ns"],
            "change": "missing"
        })
    );
    assert!(
        ops.iter()
            .all(|o| o["change"] != "changed" && o["change"] != "same")
    );
    let (status, _, _) = get(&format!("{}/api/ui/compare?a={NODE_TASK}", s.base));
    assert_eq!(status, 400);
}

#[test]
fn jaeger_query_api() {
    let Some((_d, s)) = server() else { return };
    let b = &s.base;
    let svc = get_json(&format!("{b}/api/services"));
    let list = strs(&svc["data"]);
    assert!(list.contains(&"research-node-demo".to_string()));
    assert_eq!(svc["total"].as_u64().unwrap() as usize, list.len());
    assert!(svc["errors"].is_null());
    let ops = get_json(&format!("{b}/api/services/research-node-demo/operations"));
    assert_eq!(
        strs(&ops["data"]),
        ["fanout_a", "fanout_b", "handle_request", "join"]
    );
    let ops2 = get_json(&format!("{b}/api/operations?service=research-node-demo"));
    assert_eq!(ops2["data"][0]["name"], "fanout_a");

    let t = get_json(&format!("{b}/api/traces/{}", NODE_TASK.to_lowercase()));
    assert_eq!(t["total"], 1);
    let tr = &t["data"][0];
    let trace_id = NODE_TASK.to_lowercase();
    assert_eq!(tr["traceID"], trace_id.as_str());
    let spans = tr["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 4, "the span event is a log, not a span");
    let span = |name: &str| {
        spans
            .iter()
            .find(|s| s["operationName"] == name)
            .unwrap()
            .clone()
    };
    let root = span("handle_request");
    assert_eq!(root["spanID"], "88fa71d484dа1dc1".replace('а', "a"));
    assert!(root["references"].as_array().unwrap().is_empty());
    // handle_request ended before its children (docs/otlp-mapping.md): 14.607 ms.
    assert_eq!(root["duration"], 14_607, "µs");
    assert_eq!(root["processID"], "p1");
    assert!(
        root["tags"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!({"key": "http.method", "type": "string", "value": "GET"}))
    );
    let a = span("fanout_a");
    assert_eq!(
        a["startTime"].as_i64().unwrap() - root["startTime"].as_i64().unwrap(),
        4_000
    );
    let logs = a["logs"].as_array().unwrap();
    assert_eq!(logs.len(), 1);
    assert_eq!(
        logs[0]["fields"][0],
        serde_json::json!({"key": "event", "type": "string", "value": "cache.miss"})
    );
    let join = span("join");
    let refs = join["references"].as_array().unwrap();
    assert_eq!(refs.len(), 3);
    assert_eq!(
        refs[0],
        serde_json::json!({"refType": "CHILD_OF", "traceID": trace_id, "spanID": "88fa71d484da1dc1"})
    );
    assert_eq!(
        refs.iter()
            .filter(|r| r["refType"] == "FOLLOWS_FROM")
            .count(),
        2
    );
    assert_eq!(tr["processes"]["p1"]["serviceName"], "research-node-demo");
    assert!(tr["warnings"].is_null() && t["errors"].is_null());

    // Searches as Grafana's Jaeger data source sends them.
    let found = get_json(&format!(
        "{b}/api/traces?service=research-node-demo&operation=join&tags=%7B%22http.method%22%3A%22GET%22%7D&limit=20&start=1764000000000000&end=1799000000000000"
    ));
    assert_eq!(found["total"], 1);
    assert_eq!(found["data"][0]["traceID"], trace_id.as_str());
    let slow = get_json(&format!(
        "{b}/api/traces?service=FsShell&minDuration=1.5s&maxDuration=2s"
    ));
    let ids: Vec<&str> = slow["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["traceID"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["57c1c4a67a6a88fd"]);
    let hdfs = &slow["data"][0];
    assert_eq!(
        hdfs["spans"].as_array().unwrap().len(),
        839,
        "X-Trace events are spans"
    );
    let joins = hdfs["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["references"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["refType"] == "FOLLOWS_FROM")
        })
        .count();
    assert_eq!(joins, 46);
    assert_eq!(
        get_json(&format!("{b}/api/traces?service=FsShell&tag=nope:x"))["total"],
        0
    );
    let (status, _, body) = get(&format!("{b}/api/traces?operation=join"));
    assert_eq!(status, 400);
    let e: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(e["errors"][0]["code"], 400);
    assert!(e["data"].is_null());
    let (status, _, _) = get(&format!("{b}/api/traces?service=x&minDuration=fast"));
    assert_eq!(status, 400);
    let (status, _, body) = get(&format!("{b}/api/traces/00000000deadbeef"));
    assert_eq!(status, 404, "{body}");
}

#[test]
fn get_only_no_cors_by_default_and_the_page_is_embedded() {
    let Some((d, s)) = server() else { return };
    let b = &s.base;
    assert_eq!(post_status(&format!("{b}/api/services")), 405);
    assert_eq!(post_status(&format!("{b}/api/ui/search")), 405);
    let h = get_headers(&format!("{b}/api/services"));
    assert!(
        !h.iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("access-control-allow-origin")),
        "{h:?}"
    );
    let (status, ty, page) = get(&format!("{b}/trace/{NODE_TASK}?span=x"));
    assert_eq!((status, ty.as_str()), (200, "text/html; charset=utf-8"));
    assert!(page.contains(r#"<script type="module" src="/assets/app.js">"#));
    for (file, ty) in [
        ("app.js", "text/javascript"),
        ("trace.js", "text/javascript"),
        ("style.css", "text/css"),
    ] {
        let (status, t, body) = get(&format!("{b}/assets/{file}"));
        assert_eq!((status, t.as_str()), (200, ty), "{file}");
        assert!(!body.contains("innerHTML"), "{file} inserts text only");
    }
    assert_eq!(get(&format!("{b}/assets/nope.js")).0, 404);
    drop(s);
    let db = d.path().join("ui.db");
    let s = Server::start(&db, Some("https://grafana.example"));
    let h = get_headers(&format!("{}/api/services", s.base));
    assert!(
        h.contains(&(
            "access-control-allow-origin".into(),
            "https://grafana.example".into()
        )),
        "{h:?}"
    );
}

#[test]
fn a_task_view_joins_the_peer_store_its_edge_destination_names() {
    use causal_analysis::{Event, Parent};
    let dir = tempfile::tempdir().unwrap();
    let ev = |id: &str, ts: i64, parents: &[&str], fields: &[(&str, &str)]| Event {
        task: "6161616161616161".into(),
        id: id.into(),
        agent: Some("svc".into()),
        host: Some("h1".into()),
        timestamp_ns: Some(ts),
        labels: vec![format!("step {id}")],
        parents: parents.iter().map(|p| Parent::causal(*p)).collect(),
        fields: fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Event::default()
    };
    let (a_db, b_db) = (dir.path().join("a.db"), dir.path().join("b.db"));
    let mut a = causal_collector::Store::open(&a_db).unwrap();
    a.insert(&[ev("A1", 10, &[], &[]), ev("A2", 20, &["A1"], &[])], 1)
        .unwrap();
    let mut b = causal_collector::Store::open(&b_db).unwrap();
    b.insert(
        &[
            ev("B1", 30, &["A2"], &[("EdgeDestination", "tcp://a:7831")]),
            ev("B2", 40, &["B1"], &[]),
        ],
        1,
    )
    .unwrap();
    drop((a, b));
    let b_spec = causal_collector::StoreSpec::Sqlite(b_db.clone());
    let alone = Server::start_store(b_spec.clone(), None);
    let p = get_json(&format!("{}/api/ui/task/6161616161616161", alone.base));
    assert_eq!(p["events"], 2);
    drop(alone);
    let peers = vec![(
        "tcp://a:7831".to_string(),
        causal_collector::StoreSpec::Sqlite(a_db),
    )];
    let joined = Server::start_with_peers(b_spec, None, peers);
    let p = get_json(&format!("{}/api/ui/task/6161616161616161", joined.base));
    assert_eq!(p["events"], 4, "{p}");
    let ids = strs(&p["items"]["id"]);
    assert_eq!(ids, ["A1", "A2", "B1", "B2"]);
}
