//! Shared by the API and browser tests: a store loaded from `../shared/data`, a UI server on a
//! free loopback port, and a blocking HTTP GET.
#![allow(dead_code, reason = "each test binary uses part of it")]

use std::path::{Path, PathBuf};

use causal_collector::Store;

/// The Node SDK demo's trace (4 spans, a span event, a span with two links).
pub const NODE_TASK: &str = "8591D7138ADDD9177ACBFCEBE886FE31";
/// The Python SDK demo's trace.
pub const PY_TASK: &str = "5CE078B77501FEBEF14820271589AF94";
/// The HDFS download X-Trace task (839 events, 46 joins).
pub const HDFS_TASK: &str = "57C1C4A67A6A88FD";

/// A store with every file of `../shared/data/xtrace` and `../shared/data/otlp` imported, or
/// `None` (after printing why; a failure under `CI=true`) when the data is absent.
pub fn shared_store(dir: &Path) -> Option<PathBuf> {
    let xtrace = test_support::shared_data("xtrace")?;
    let otlp = test_support::shared_data("otlp")?;
    let db = dir.join("ui.db");
    let mut store = Store::open(&db).unwrap();
    let mut files: Vec<PathBuf> = [xtrace, otlp]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap().flatten().map(|e| e.path()))
        .filter(|p| !p.to_string_lossy().ends_with(".headers.txt"))
        .collect();
    files.sort();
    for f in files {
        causal_collector::import::import_file(&mut store, &f, 1)
            .unwrap_or_else(|e| panic!("importing {}: {e}", f.display()));
    }
    Some(db)
}

/// A UI server on 127.0.0.1 (a free port) in its own thread; stops when dropped.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start(db: &Path, cors_origin: Option<&str>) -> Server {
        Server::start_store(
            causal_collector::StoreSpec::Sqlite(db.to_path_buf()),
            cors_origin,
        )
    }

    /// A server of the store `store` (SQLite or ClickHouse).
    pub fn start_store(store: causal_collector::StoreSpec, cors_origin: Option<&str>) -> Server {
        Server::start_with_peers(store, cors_origin, Vec::new())
    }

    /// A server of the store `store` with the peers `peers` (collector URI, store).
    pub fn start_with_peers(
        store: causal_collector::StoreSpec,
        cors_origin: Option<&str>,
        peers: Vec<(String, causal_collector::StoreSpec)>,
    ) -> Server {
        let opts = causal_ui::UiOptions {
            store,
            cors_origin: cors_origin.map(str::to_string),
            peers,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = causal_ui::bind("127.0.0.1:0".parse().unwrap())
                    .await
                    .unwrap();
                tx.send(l.local_addr().unwrap()).unwrap();
                causal_ui::serve(
                    l,
                    causal_ui::router(opts),
                    causal_collector::listen::ListenConfig::default(),
                    async {
                        let _ = stopped.await;
                    },
                )
                .await
                .unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        Server {
            base: format!("http://{addr}"),
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// GET `url`: (status, content type, body).
pub fn get(url: &str) -> (u16, String, String) {
    let mut r = agent()
        .get(url)
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let ty = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = r
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_string()
        .unwrap();
    (r.status().as_u16(), ty, body)
}

/// GET `url` expecting 200 and JSON.
pub fn get_json(url: &str) -> serde_json::Value {
    let (status, ty, body) = get(url);
    assert_eq!(status, 200, "GET {url}: {body}");
    assert!(ty.starts_with("application/json"), "GET {url}: {ty}");
    serde_json::from_str(&body).unwrap()
}

/// Headers of GET `url`.
pub fn get_headers(url: &str) -> Vec<(String, String)> {
    let r = agent().get(url).call().unwrap();
    r.headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect()
}

/// POST an empty body to `url`: the status.
pub fn post_status(url: &str) -> u16 {
    agent().post(url).send("").unwrap().status().as_u16()
}

/// GET `url` with `Accept-Encoding: gzip`: (the `Content-Encoding` header, body bytes as sent).
pub fn get_gzip(url: &str) -> (Option<String>, Vec<u8>) {
    let mut r = agent()
        .get(url)
        .header("Accept-Encoding", "gzip")
        .call()
        .unwrap();
    let enc = r
        .headers()
        .get("content-encoding")
        .map(|v| v.to_str().unwrap().to_string());
    let body = r
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_vec()
        .unwrap();
    (enc, body)
}
