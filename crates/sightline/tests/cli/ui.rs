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
    ui_url(out, "http")
}

/// Reads lines of `out` until one starts `sightline ui: SCHEME://`; returns its `ADDR:PORT`.
fn ui_url(out: &mut impl BufRead, scheme: &str) -> String {
    let prefix = format!("sightline ui: {scheme}://");
    for _ in 0..4 {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        if let Some(rest) = line.strip_prefix(&prefix) {
            return rest.split('/').next().unwrap().to_string();
        }
    }
    panic!("no `{prefix}` line");
}

/// A self-signed certificate for `localhost` (rcgen) written to DIR/c.pem and its key to
/// DIR/k.pem; their paths.
fn certificate(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.join("c.pem"), dir.join("k.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// GET `https://localhost:PORT/PATH` with curl, trusting only `cert`: (HTTP status, body).
fn curl_https(addr: &str, path: &str, cert: &std::path::Path) -> (String, String) {
    let port = addr.rsplit(':').next().unwrap();
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "20",
            "-w",
            "\n%{http_code}",
            "--resolve",
        ])
        .arg(format!("localhost:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(cert)
        .arg(format!("https://localhost:{port}{path}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.to_string(), body.to_string())
}

#[test]
fn ui_and_collect_ui_over_tls_from_certificate_files() {
    if !test_support::require_tool("curl") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(tmp.path());
    let db = tmp.path().join("tls.db");
    // `collect --ui` with --tls-cert: its UI is served over HTTPS as the OTLP listeners are.
    let mut c = Collecting::start(
        crate::sightline()
            .args(COLLECT_ANY_PORTS)
            .args(["--ui", "127.0.0.1:0", "--tls-cert"])
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .arg("--db")
            .arg(&db)
            .stderr(Stdio::null()),
    );
    assert!(c.after("OTLP/HTTP").starts_with("https://"), "{}", c.first);
    let addr = ui_url(&mut c.stdout, "https");
    let (code, body) = curl_https(&addr, "/api/services", &cert);
    assert_eq!(code, "200", "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["total"], 0);
    assert!(c.sigterm().success());

    // `sightline ui` with --tls-cert: HTTPS answers, plain HTTP gets no HTTP answer.
    let mut child = crate::sightline()
        .args(["ui", "--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let addr = ui_url(&mut out, "https");
    let (code, page) = curl_https(&addr, "/", &cert);
    assert_eq!(code, "200");
    assert!(page.contains("/assets/app.js"), "{page:.200}");
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    // The server may already have closed (a failed handshake): the write may fail.
    let _ = write!(s, "GET / HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    let mut r = Vec::new();
    let _ = s.read_to_end(&mut r);
    assert!(
        !String::from_utf8_lossy(&r).contains("HTTP/1."),
        "answered in clear: {:?}",
        String::from_utf8_lossy(&r)
    );
    assert!(sigterm(&mut child).success());
    // Only one of the two files: refused by the argument parser.
    let out = crate::sightline()
        .args(["ui", "--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&cert)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
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
