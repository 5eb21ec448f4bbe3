//! The `causal` library's reporter against real collectors (issue 17, administrative domains):
//! over TLS to a collector serving X-Trace TCP with `xtrace_tls` (a certificate generated for the
//! test), and, with `follow_destination`, the reports of a task whose metadata names another
//! domain's collector (X-Trace's Destination option) sent to that collector instead. Its own
//! binary: the reporter is started once per process.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use causal::metadata::options_with_destination;
use causal::{Context, Metadata, OpId, TaskId};
use causal_collector::Collector;
use causal_collector::listen::{ListenConfig, TlsFiles};
use causal_collector::store::Store;
use common::{config, rt};

#[test]
fn reports_go_over_tls_and_to_the_collector_their_destination_names() {
    let tmp = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_file, key_file) = (tmp.path().join("c.pem"), tmp.path().join("k.pem"));
    std::fs::write(&cert_file, ck.cert.pem()).unwrap();
    std::fs::write(&key_file, ck.signing_key.serialize_pem()).unwrap();
    let (db_a, db_b) = (tmp.path().join("a.db"), tmp.path().join("b.db"));
    // Domain A: X-Trace over TLS only. Domain B: plain X-Trace TCP.
    let cfg_a = causal_collector::Config {
        listen: ListenConfig {
            tls: Some(TlsFiles::load(&cert_file, &key_file).unwrap()),
            ..ListenConfig::default()
        },
        xtrace_tls: true,
        otlp_http: None,
        otlp_grpc: None,
        ..config(&db_a)
    };
    let cfg_b = causal_collector::Config {
        otlp_http: None,
        otlp_grpc: None,
        ..config(&db_b)
    };
    let remote_task = TaskId::from_u64(0x00c0_ffee_0000_0017).unwrap();
    let ((sa, sb), (local_task, sent)) = rt().block_on(async {
        let a = Collector::start(cfg_a).await.unwrap();
        let b = Collector::start(cfg_b).await.unwrap();
        let a_addr: SocketAddr = a.addrs().xtrace_tcp.unwrap();
        let b_addr: SocketAddr = b.addrs().xtrace_tcp.unwrap();
        let ca = cert_file.clone();
        let reported = tokio::task::spawn_blocking(move || {
            causal::reporter::init(causal::Config {
                sink: causal::Sink::Tls {
                    addr: a_addr,
                    host: "localhost".into(),
                },
                tls_ca: Some(ca),
                follow_destination: true,
                flush_interval: Duration::from_millis(2),
                ..causal::Config::default()
            })
            .unwrap();
            // A task started here (no destination): its two events go to the sink, over TLS.
            let local = causal::start_task("local request", []);
            causal::report("local step", []);
            // A task that came from domain B: its metadata names B's collector.
            let opts = options_with_destination(&[], &format!("tcp://{b_addr}")).unwrap();
            let md = Metadata::with_options(remote_task, OpId::new(0x51), &opts).unwrap();
            let guard = Context::from_metadata(&md).attach();
            for _ in 0..3 {
                causal::report("work for b", []);
            }
            drop(guard);
            assert!(causal::flush(Duration::from_secs(10)), "flushed");
            (local.task_id(), causal::stats().sent)
        })
        .await
        .unwrap();
        // The reporter has written everything; give the collectors time to store it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let sa = a.shutdown().await.unwrap();
        let sb = b.shutdown().await.unwrap();
        ((sa, sb), reported)
    });
    assert_eq!(sent, 5, "every report written");
    assert_eq!(sa.events_stored, 2, "{sa:?}");
    assert_eq!(sb.events_stored, 3, "{sb:?}");
    let a = Store::open(&db_a).unwrap();
    let b = Store::open(&db_b).unwrap();
    let local = a.load_task(&local_task.to_hex()).unwrap();
    let labels: Vec<&str> = local
        .iter()
        .flat_map(|e| &e.labels)
        .map(String::as_str)
        .collect();
    assert_eq!(labels, ["local request", "local step"]);
    let remote = b.load_task(&remote_task.to_hex()).unwrap();
    assert_eq!(remote.len(), 3);
    assert!(a.load_task(&remote_task.to_hex()).unwrap().is_empty());
    // The first remote event follows the metadata's event, the next ones the one before.
    let parents: Vec<Vec<&str>> = remote
        .iter()
        .map(|e| e.parents.iter().map(|p| p.id.as_str()).collect())
        .collect();
    assert_eq!(parents[0], ["0000000000000051"], "{parents:?}");
    assert_eq!(parents[1], [remote[0].id.as_str()]);
}
