//! TLS on the OTLP/HTTP and OTLP/gRPC listeners (issue 17) with a certificate generated for the
//! test (rcgen): OTLP/JSON over HTTPS and OTLP/protobuf over gRPC-over-TLS are stored; without
//! the bearer token both are refused and counted; a plain-text client gets no answer.

mod common;

use causal_collector::Collector;
use causal_collector::listen::{ListenConfig, TlsFiles};
use common::{config, post, request_json, rt, span_json};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;

#[test]
fn otlp_over_https_and_grpc_over_tls_with_a_bearer_token() {
    let tmp = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_file, key_file) = (tmp.path().join("c.pem"), tmp.path().join("k.pem"));
    std::fs::write(&cert_file, ck.cert.pem()).unwrap();
    std::fs::write(&key_file, ck.signing_key.serialize_pem()).unwrap();
    let cert_der = ck.cert.der().to_vec();
    // A key file that is no key is refused with the file's name.
    let e = TlsFiles::load(&cert_file, &cert_file).unwrap_err();
    assert!(e.to_string().contains("c.pem"), "{e}");
    let cfg = causal_collector::Config {
        listen: ListenConfig {
            tls: Some(TlsFiles::load(&cert_file, &key_file).unwrap()),
            ..ListenConfig::default()
        },
        bearer_token: Some("s3cret".into()),
        ..config(&tmp.path().join("t.db"))
    };
    let json = request_json(&[span_json("4af7651916cd43dd8448eb211c80319c", 1, "https")]);
    let pb = prost::Message::encode_to_vec(
        &causal_collector::otlp::decode_json(&request_json(&[span_json(
            "5af7651916cd43dd8448eb211c80319c",
            2,
            "grpc-tls",
        )]))
        .unwrap(),
    );
    let stats = rt().block_on(async {
        let c = Collector::start(cfg).await.unwrap();
        let (h, g) = (c.addrs().otlp_http.unwrap(), c.addrs().otlp_grpc.unwrap());
        let name = ServerName::try_from("localhost").unwrap();
        let https = common::tls_connector(&cert_der, &[b"http/1.1"]);
        for (auth, want) in [(None, 401), (Some("Authorization: Bearer s3cret"), 200)] {
            let s = TcpStream::connect(h).await.unwrap();
            let mut s = https.connect(name.clone(), s).await.unwrap();
            let extra: Vec<&str> = auth.into_iter().collect();
            let a = post(&mut s, "/v1/traces", "application/json", &extra, &json)
                .await
                .unwrap();
            assert_eq!(a.status, want, "{}", String::from_utf8_lossy(&a.body));
        }
        let grpc = common::tls_connector(&cert_der, &[b"h2"]);
        for (auth, want) in [(None, 16), (Some("Bearer s3cret"), 0)] {
            let s = TcpStream::connect(g).await.unwrap();
            let s = grpc.connect(name.clone(), s).await.unwrap();
            assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            let r = common::grpc_export(s, &pb, auth).await;
            assert_eq!(r.status, want, "{r:?}");
        }
        // Plain HTTP to the TLS port: the handshake fails, nothing is answered in clear.
        let mut s = TcpStream::connect(h).await.unwrap();
        let a = post(&mut s, "/v1/traces", "application/json", &[], &json).await;
        assert!(a.is_err(), "{a:?}");
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest).await;
        assert!(!String::from_utf8_lossy(&rest).contains("HTTP/1.1"));
        c.shutdown().await.unwrap()
    });
    assert_eq!(stats.unauthenticated_requests, 2, "{stats:?}");
    assert_eq!(
        (stats.otlp_requests, stats.otlp_grpc_requests),
        (1, 1),
        "{stats:?}"
    );
    assert_eq!(stats.events_stored, 4, "{stats:?}");
    assert!(stats.tls_failed >= 1, "{stats:?}");
}

/// Three X-Trace reports of one task, length-prefixed (binary format).
fn xtrace_frames(task: u64) -> Vec<u8> {
    use causal::metadata::{Metadata, OpId, TaskId};
    let mut bytes = Vec::new();
    for i in 1..=3u64 {
        let mut r = causal::Report::new(Metadata::new(
            TaskId::from_u64(task).unwrap(),
            OpId::new(0x100 + i),
        ));
        if i > 1 {
            r.edges.push(OpId::new(0x100 + i - 1));
        }
        r.agent = Some("tls-agent".into());
        r.label = Some(format!("step {i}"));
        r.timestamp_ns = Some(1_000_000 * i);
        causal::wire::encode_frame(&mut bytes, &r, causal::wire::WireFormat::Binary);
    }
    bytes
}

#[test]
fn xtrace_tcp_over_tls_when_asked_for() {
    use tokio::io::AsyncWriteExt;
    let tmp = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_file, key_file) = (tmp.path().join("c.pem"), tmp.path().join("k.pem"));
    std::fs::write(&cert_file, ck.cert.pem()).unwrap();
    std::fs::write(&key_file, ck.signing_key.serialize_pem()).unwrap();
    let cert_der = ck.cert.der().to_vec();
    let listen = ListenConfig {
        tls: Some(TlsFiles::load(&cert_file, &key_file).unwrap()),
        ..ListenConfig::default()
    };
    let db = tmp.path().join("x.db");
    let with_tls = causal_collector::Config {
        listen: listen.clone(),
        xtrace_tls: true,
        ..config(&db)
    };
    let stats = rt().block_on(async {
        let c = Collector::start(with_tls).await.unwrap();
        let tcp = c.addrs().xtrace_tcp.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let s = TcpStream::connect(tcp).await.unwrap();
        let mut s = common::tls_connector(&cert_der, &[])
            .connect(name, s)
            .await
            .unwrap();
        s.write_all(&xtrace_frames(0xA1)).await.unwrap();
        s.shutdown().await.unwrap();
        // The same reports in clear: the handshake fails, nothing of them is stored.
        let mut p = TcpStream::connect(tcp).await.unwrap();
        p.write_all(&xtrace_frames(0xB2)).await.unwrap();
        let mut rest = Vec::new();
        let _ = p.read_to_end(&mut rest).await;
        // The first connection's reports are in the store once the writer has them.
        for _ in 0..500 {
            if c.stats().events_stored >= 3 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        c.shutdown().await.unwrap()
    });
    assert_eq!(stats.events_stored, 3, "{stats:?}");
    assert_eq!(stats.tls_failed, 1, "{stats:?}");
    let store = causal_collector::Store::open(&db).unwrap();
    let tasks = store
        .tasks(&causal_collector::TaskFilter::default())
        .unwrap();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0].events, 3, "{tasks:?}");

    // TLS for OTLP alone leaves X-Trace TCP in clear (the library's reporter speaks plain TCP).
    let db2 = tmp.path().join("y.db");
    let otlp_only = causal_collector::Config {
        listen,
        ..config(&db2)
    };
    let stats = rt().block_on(async {
        let c = Collector::start(otlp_only).await.unwrap();
        let mut p = TcpStream::connect(c.addrs().xtrace_tcp.unwrap())
            .await
            .unwrap();
        p.write_all(&xtrace_frames(0xC3)).await.unwrap();
        drop(p);
        for _ in 0..500 {
            if c.stats().events_stored >= 3 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        c.shutdown().await.unwrap()
    });
    assert_eq!((stats.events_stored, stats.tls_failed), (3, 0), "{stats:?}");
}
