//! Peak memory of the collector decoding hostile OTLP bodies, measured from `/proc/self/status`
//! (`VmHWM`, reset through `clear_refs`). The tests of this binary run one at a time ([`ALONE`]),
//! so that no test's memory is measured with another's.

mod common;

use std::time::Duration;

use causal_collector::Collector;
use common::{config, peak_rss, reset_peak_rss, rt};
use tokio::net::TcpStream;

const MIB: u64 = 1 << 20;

/// Held by each test for its whole run.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
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

/// Issue 22: 1,024 X-Trace TCP connections each inside a 1 MiB frame took ~1.3 GB. Each
/// connection now holds at most 64 KiB unless the decode budget (here 32 MiB) has room for its
/// frame, so 1,024 connections that each sent 600 KiB of a 1 MiB frame stay under
/// 1,024 × 64 KiB + 32 MiB (+ 64 MiB of slack for the runtime); a small report on another
/// connection is stored meanwhile, and the cut frames are counted when their senders close.
#[test]
fn xtrace_tcp_connections_inside_long_frames_stay_within_the_memory_bound() {
    use tokio::io::AsyncWriteExt;
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    {
        use nix::sys::resource::{Resource, getrlimit, setrlimit};
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        if hard < 4096 {
            eprintln!("skipped: RLIMIT_NOFILE hard limit {hard} < 4096");
            return;
        }
        if soft < 4096 {
            setrlimit(Resource::RLIMIT_NOFILE, 4096, hard).unwrap();
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let cfg = causal_collector::Config {
        decode_budget: 32 << 20,
        listen: causal_collector::listen::ListenConfig {
            max_connections: 2000,
            ..Default::default()
        },
        ..config(&tmp.path().join("x.db"))
    };
    let mut partial = ((1u32 << 20) - 16).to_be_bytes().to_vec();
    partial.resize(4 + (600 << 10), b'x');
    let (peak, stats) = rt().block_on(async {
        let c = Collector::start(cfg).await.unwrap();
        let addr = c.addrs().xtrace_tcp.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        reset_peak_rss();
        let base = peak_rss();
        let mut conns = Vec::new();
        for _ in 0..1024 {
            let mut s = TcpStream::connect(addr).await.unwrap();
            // The kernel takes what fits in its buffers; the rest waits in this task.
            let p = partial.clone();
            let w = tokio::spawn(async move {
                let _ = s.write_all(&p).await;
                s
            });
            conns.push(w);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut report = Vec::new();
        causal::wire::write_frame(
            &mut report,
            b"X-Trace Report ver 1.0\nX-Trace: 19AAAABBBBCCCCDDDD0000000000000001\nHost: h\nLabel: small\n",
        );
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&report).await.unwrap();
        let t0 = std::time::Instant::now();
        while c.stats().xtrace_reports < 1 && t0.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(c.stats().xtrace_reports, 1, "{:?}", c.stats());
        let peak = peak_rss().saturating_sub(base);
        eprintln!("1,024 connections inside 1 MiB frames: peak RSS +{} MiB", peak / MIB);
        for w in conns {
            w.abort();
        }
        drop(s);
        let t0 = std::time::Instant::now();
        while c.stats().xtrace_malformed < 1024 && t0.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (peak, c.shutdown().await.unwrap())
    });
    assert!(
        peak < 64 * MIB + 32 * MIB + 64 * MIB,
        "peak RSS +{} MiB",
        peak / MIB
    );
    assert_eq!(stats.xtrace_malformed, 1024, "{stats:?}");
    assert_eq!(stats.events_stored, 1, "{stats:?}");
}
