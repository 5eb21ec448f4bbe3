//! OTLP/gRPC ingest with a real client: the OpenTelemetry Python SDK's gRPC exporter
//! (`opentelemetry-exporter-otlp-proto-grpc`, installed by `scripts/install-deps.sh` into
//! `/opt/sightline-otel-venv`, or the Python of `$SIGHTLINE_OTEL_PYTHON`) sends gzip-compressed
//! spans to a running collector, which stores them with their attribute types, resource and scope.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use causal_analysis::AttrValue;
use causal_collector::{Collector, Config, Store, TaskFilter};

fn python() -> Option<PathBuf> {
    let p = std::env::var_os("SIGHTLINE_OTEL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/sightline-otel-venv/bin/python"));
    test_support::require_file(
        &p,
        "the OpenTelemetry Python venv (scripts/install-deps.sh)",
    )
    .then_some(p)
}

fn config(db: &Path) -> Config {
    Config {
        xtrace_tcp: None,
        xtrace_udp: None,
        otlp_http: None,
        otlp_grpc: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        zipkin: None,
        ..Config::loopback(db)
    }
}

/// Runs the Python exporter against a collector with `config`; (stdout lines, final counters).
fn export_with(
    py: &Path,
    config: Config,
    token: Option<&str>,
) -> (Vec<String>, causal_collector::StatsSnapshot) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otel_python/grpc_export.py");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = Collector::start(config).await.unwrap();
        let port = c.addrs().otlp_grpc.unwrap().port();
        let mut cmd = tokio::process::Command::new(py);
        cmd.arg(&script).arg(port.to_string());
        if let Some(t) = token {
            cmd.arg(t);
        }
        let out = cmd.output().await.unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        (lines, c.shutdown().await.unwrap())
    })
}

#[test]
fn grpc_requests_without_the_bearer_token_are_refused_and_counted() {
    let Some(py) = python() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("t.db");
    let cfg = || Config {
        bearer_token: Some("s3cret".into()),
        ..config(&db)
    };
    let (out, stats) = export_with(&py, cfg(), None);
    assert!(out[1].starts_with("failed"), "{out:?}");
    // One Export per span, none stored.
    assert_eq!(
        (
            stats.unauthenticated_requests,
            stats.otlp_grpc_requests,
            stats.events_stored
        ),
        (2, 0, 0),
        "{stats:?}"
    );
    let (out, stats) = export_with(&py, cfg(), Some("wrong"));
    assert!(out[1].starts_with("failed"), "{out:?}");
    assert_eq!(stats.unauthenticated_requests, 2, "{stats:?}");
    let (out, stats) = export_with(&py, cfg(), Some("s3cret"));
    assert_eq!(out[1], "ok");
    assert_eq!(
        (stats.unauthenticated_requests, stats.events_stored),
        (0, 4),
        "{stats:?}"
    );
}

#[test]
fn python_sdk_grpc_exporter_spans_are_stored_with_types_resource_and_scope() {
    let Some(py) = python() else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otel_python/grpc_export.py");
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("g.db");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (out, stats) = rt.block_on(async {
        let c = Collector::start(config(&db)).await.unwrap();
        let port = c.addrs().otlp_grpc.unwrap().port();
        let out = tokio::process::Command::new(&py)
            .arg(&script)
            .arg(port.to_string())
            .output()
            .await
            .unwrap();
        (out, c.shutdown().await.unwrap())
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = stdout.lines();
    let trace = lines.next().unwrap().to_ascii_uppercase();
    assert_eq!(lines.next(), Some("ok"), "{stdout}");
    // SimpleSpanProcessor: one Export per span.
    assert_eq!(
        (
            stats.otlp_grpc_requests,
            stats.otlp_spans,
            stats.events_stored
        ),
        (2, 2, 4),
        "{stats:?}"
    );

    let store = Store::open(&db).unwrap();
    let tasks = store.tasks(&TaskFilter::default()).unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].task_id, trace);
    assert_eq!(tasks[0].hosts, ["grpc-host"]);
    let events = store.load_task(&trace).unwrap();
    let labels: Vec<&str> = events.iter().filter_map(|e| e.label()).collect();
    assert_eq!(
        labels,
        [
            "charge start",
            "charge end",
            "checkout start",
            "checkout end"
        ]
    );
    let charge = &events[0];
    assert_eq!(charge.agent.as_deref(), Some("shop"));
    assert_eq!(charge.field("span.kind"), Some("client"));
    assert_eq!(charge.typed("amount.cents"), Some(&AttrValue::Int(1250)));
    assert_eq!(
        charge.typed("retry.ids"),
        Some(&AttrValue::Array(vec![
            AttrValue::Int(1),
            AttrValue::Int(2),
            AttrValue::Int(3)
        ]))
    );
    assert_eq!(charge.field("retry.ids"), Some("[1,2,3]"));
    assert_eq!(charge.typed("card.ok"), Some(&AttrValue::Bool(true)));
    assert_eq!(charge.typed("fx.rate"), Some(&AttrValue::Double(0.5)));
    assert_eq!(charge.field("otel.scope.name"), Some("shop"));
    assert_eq!(charge.field("otel.scope.version"), Some("2.1"));
    assert_eq!(
        charge.typed("resource.shop.replicas"),
        Some(&AttrValue::Int(3))
    );
    // The SDK's own resource attributes arrive too (not only the three the model uses).
    assert_eq!(
        charge.field("resource.telemetry.sdk.language"),
        Some("python")
    );
    // The child's parent is the root span's start.
    let root_start = events[2].id.clone();
    assert!(
        charge.parents.iter().any(|p| p.id == root_start),
        "{:?}",
        charge.parents
    );
}
