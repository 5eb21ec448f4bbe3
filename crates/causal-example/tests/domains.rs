//! End to end across administrative domains (X-Trace's Destination option, issue 17): the
//! client and front end of the example system report to domain a's collector, the two back ends
//! to domain b's, each process told its domain's collector by `SIGHTLINE_CAUSAL_DESTINATION`
//! alone. Each store holds its domain's part; the edges that cross name the other domain's
//! collector (`EdgeDestination`), and joining the peer's store by that name gives the whole task.

mod common;

use std::ffi::OsStr;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;

use common::Server;

use causal_collector::query::{Peer, load_graph_with_peers};
use causal_collector::{Collector, Config, Store, TraceStore};

/// A server of the example system reporting to its domain's collector `destination` (an empty
/// `SIGHTLINE_CAUSAL_SINK` is unset: the sink defaults to the destination).
fn server(args: &[&str], destination: &str) -> Server {
    Server::start(
        args,
        &[
            ("SIGHTLINE_CAUSAL_SINK", OsStr::new("")),
            ("SIGHTLINE_CAUSAL_DESTINATION", OsStr::new(destination)),
        ],
    )
}

#[test]
fn each_domain_stores_its_part_and_the_peer_named_by_its_edges_completes_the_task() {
    let tmp = tempfile::tempdir().unwrap();
    let (db_a, db_b) = (tmp.path().join("a.db"), tmp.path().join("b.db"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let config = |db: &std::path::Path| Config {
        xtrace_tcp: Some(any),
        xtrace_udp: None,
        otlp_http: None,
        otlp_grpc: None,
        zipkin: None,
        ..Config::loopback(db)
    };
    let ca = rt.block_on(Collector::start(config(&db_a))).unwrap();
    let cb = rt.block_on(Collector::start(config(&db_b))).unwrap();
    let dest_a = format!("tcp://{}", ca.addrs().xtrace_tcp.unwrap());
    let dest_b = format!("tcp://{}", cb.addrs().xtrace_tcp.unwrap());

    let back_a = server(&["backend", "a", "5"], &dest_b);
    let back_b = server(&["backend", "b", "10"], &dest_b);
    let url = |s: &Server| format!("http://{}", s.addr);
    let front = server(&["frontend", &url(&back_a), &url(&back_b)], &dest_a);
    let client = Command::new(common::BIN)
        .args(["client", &url(&front), "1"])
        .env_remove("SIGHTLINE_CAUSAL_SINK")
        .env("SIGHTLINE_CAUSAL_DESTINATION", &dest_a)
        .output()
        .unwrap();
    assert!(client.status.success(), "{client:?}");
    let out = String::from_utf8_lossy(&client.stdout).to_string();
    let task = out
        .lines()
        .find_map(|l| l.strip_prefix("task "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("client said {out}"))
        .to_string();
    for s in [front, back_a, back_b] {
        s.stop();
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let sa = rt.block_on(ca.shutdown()).unwrap();
    let sb = rt.block_on(cb.shutdown()).unwrap();
    // Domain a: client request, frontend recv, 2 x (call backend, backend answered), join
    // answers, client done. Domain b: 2 x (backend recv, backend done).
    assert_eq!(
        (sa.events_stored, sb.events_stored),
        (8, 4),
        "{sa:?} {sb:?}"
    );

    let a = Store::open(&db_a).unwrap();
    let b = Store::open(&db_b).unwrap();
    let id = a.resolve_task(&task).unwrap();
    // Every edge from one domain into the other names the collector of its parent's domain.
    let named = |store: &Store, dest: &str| {
        store
            .load_task(&id)
            .unwrap()
            .iter()
            .filter(|e| {
                e.fields
                    .iter()
                    .any(|(k, v)| k == "EdgeDestination" && v == dest)
            })
            .flat_map(|e| e.labels.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(named(&b, &dest_a), ["backend recv", "backend recv"]);
    assert_eq!(named(&a, &dest_b), ["backend answered", "backend answered"]);

    let home = [("b.db".to_string(), &b as &dyn TraceStore)];
    let (g, _, alone) = load_graph_with_peers(&home, &[], &id, true).unwrap();
    assert_eq!(g.events.len(), 4);
    assert!(
        alone
            .view_ends
            .iter()
            .all(|v| v.domain.as_deref() == Some(dest_a.as_str())),
        "{:?}",
        alone.view_ends
    );
    let peers = [Peer {
        destination: dest_a.clone(),
        name: "a.db".into(),
        store: &a,
    }];
    let (g, _, join) = load_graph_with_peers(&home, &peers, &id, true).unwrap();
    assert_eq!(g.events.len(), 12);
    assert!(join.view_ends.is_empty(), "{:?}", join.view_ends);
    // Into b twice (the calls), back into a twice (the answers).
    assert_eq!(join.crossings.len(), 4, "{:?}", join.crossings);
}
