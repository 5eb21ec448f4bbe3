//! Peak memory of the collector decoding hostile OTLP bodies, measured from `/proc/self/status`
//! (`VmHWM`, reset through `clear_refs`). One test in this binary, so that no other test's
//! memory is measured with it.

mod common;

use std::time::Duration;

use causal_collector::Collector;
use common::{config, peak_rss, reset_peak_rss, rt};
use tokio::net::TcpStream;

const MIB: u64 = 1 << 20;

/// `{"resourceSpans":[{"scopeSpans":[{"spans":[{},{},…]}]}]}` of about `bytes` bytes.
fn empty_spans(bytes: usize) -> Vec<u8> {
    let head = br#"{"resourceSpans":[{"scopeSpans":[{"spans":["#;
    let tail = br#"{}]}]}]}"#;
    let mut v = Vec::with_capacity(bytes);
    v.extend_from_slice(head);
    while v.len() + 3 + tail.len() < bytes {
        v.extend_from_slice(b"{},");
    }
    v.extend_from_slice(tail);
    v
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, b).unwrap();
    gz.finish().unwrap()
}

/// Issue 22: one 16 MiB OTLP/JSON body of empty spans cost 1.42 GB RSS, three at once 2.9 GB;
/// four gzip bodies of ~16 KB, each 16 MiB decompressed, 2.7 GB. Now each is refused (`413`,
/// its decoding cost over 32 × its size) after a scan, and the peak stays within the documented
/// bound: the bodies in memory (3 × 16 MiB, and 2 decompressions of 16 MiB at once) plus the
/// decode budget (256 MiB), 400 MiB in all; a valid 8 MiB body (32,000 spans) is stored within
/// the same bound.
#[test]
fn hostile_json_and_gzip_bodies_stay_within_the_memory_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let json = empty_spans(16 << 20);
    assert!(json.len() as u64 > 15 * MIB);
    let gz = gzip(&json);
    assert!(gz.len() < 64 << 10, "{}", gz.len());
    let spans: Vec<String> = (0..32_000)
        .map(|i| common::span_json("3af7651916cd43dd8448eb211c80319c", i + 1, "valid"))
        .collect();
    let valid = common::request_json(&spans);
    let bound = 400 * MIB;
    let runtime = rt();
    let (peaks, stats) = runtime.block_on(async {
        let c = Collector::start(config(&tmp.path().join("m.db")))
            .await
            .unwrap();
        let addr = c.addrs().otlp_http.unwrap();
        let mut peaks = Vec::new();
        for (what, body, extra, n) in [
            ("3 × 16 MiB JSON of empty spans", &json, None, 3),
            (
                "4 gzip bodies of empty spans",
                &gz,
                Some("Content-Encoding: gzip"),
                4,
            ),
        ] {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let base = peak_rss();
            reset_peak_rss();
            let mut sends = Vec::new();
            for _ in 0..n {
                let body = body.clone();
                sends.push(tokio::spawn(async move {
                    let mut s = TcpStream::connect(addr).await.unwrap();
                    let extra: Vec<&str> = extra.into_iter().collect();
                    common::post(&mut s, "/v1/traces", "application/json", &extra, &body)
                        .await
                        .unwrap()
                }));
            }
            for s in sends {
                let a = s.await.unwrap();
                assert_eq!(
                    a.status,
                    413,
                    "{what}: {}",
                    String::from_utf8_lossy(&a.body)
                );
                assert!(String::from_utf8_lossy(&a.body).contains("more than 32 times"));
            }
            let peak = peak_rss();
            eprintln!(
                "{what}: peak RSS {} MiB (before: {} MiB)",
                peak / MIB,
                base / MIB
            );
            peaks.push((what, peak));
        }
        reset_peak_rss();
        let mut s = TcpStream::connect(addr).await.unwrap();
        let a = common::post(&mut s, "/v1/traces", "application/json", &[], &valid)
            .await
            .unwrap();
        assert_eq!(a.status, 200);
        let peak = peak_rss();
        eprintln!("valid 8 MiB: peak RSS {} MiB", peak / MIB);
        peaks.push(("valid body of 32,000 spans", peak));
        (peaks, c.shutdown().await.unwrap())
    });
    for (what, peak) in peaks {
        assert!(peak < bound, "{what}: peak RSS {} MiB", peak / MIB);
    }
    assert_eq!(stats.otlp_bad_requests, 7, "{stats:?}");
    assert_eq!(stats.otlp_spans, 32_000, "{stats:?}");
}
