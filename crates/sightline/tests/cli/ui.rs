//! `sightline ui` and `sightline collect --ui`: each prints its URL and answers the UI's API
//! from the store (the API itself is tested in the causal-ui crate).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;

use crate::{COLLECT_ANY_PORTS, Collecting, sigterm};

/// GET `path` from `addr` over HTTP/1.0: (status line, body).
fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let (head, body) = r.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// Reads lines of `out` until one starts `sightline ui: http://`; returns its `ADDR:PORT`.
fn ui_addr(out: &mut impl BufRead) -> String {
    for _ in 0..4 {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        if let Some(rest) = line.strip_prefix("sightline ui: http://") {
            return rest.split('/').next().unwrap().to_string();
        }
    }
    panic!("no `sightline ui:` line");
}

#[test]
fn ui_serves_the_store_and_prints_its_url() {
    let Some(node) = test_support::shared_data("otlp/node_sdk_traces.json") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("ui.db");
    let st = crate::sightline()
        .arg("import")
        .arg(&node)
        .arg("--db")
        .arg(&db)
        .status()
        .unwrap();
    assert!(st.success());
    let mut child = crate::sightline()
        .args(["ui", "--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let addr = ui_addr(&mut out);
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let (status, body) = get(&addr, "/api/ui/search?service=research-node-demo");
    assert!(status.ends_with("200 OK"), "{status}");
    assert!(
        body.contains("\"task_id\":\"8591D7138ADDD9177ACBFCEBE886FE31\""),
        "{body}"
    );
    let (status, page) = get(&addr, "/");
    assert!(
        status.ends_with("200 OK") && page.contains("/assets/app.js"),
        "{status}"
    );
    assert!(sigterm(&mut child).success());
    // A mistyped store is an error, not an empty UI.
    let out = crate::sightline()
        .args(["ui", "--listen", "127.0.0.1:0", "--db"])
        .arg(tmp.path().join("nope.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no store at"));
}

#[test]
fn collect_serves_the_ui_too() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("collect.db");
    let mut c = Collecting::start(
        crate::sightline()
            .args(COLLECT_ANY_PORTS)
            .args(["--ui", "127.0.0.1:0", "--db"])
            .arg(&db)
            .stderr(Stdio::null()),
    );
    let addr = ui_addr(&mut c.stdout);
    let (status, body) = get(&addr, "/api/services");
    assert!(status.ends_with("200 OK"), "{status}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["total"], 0);
    assert!(v["data"].as_array().unwrap().is_empty());
    assert!(c.sigterm().success());
}
