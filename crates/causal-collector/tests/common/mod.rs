//! Clients of the hostile-client, memory and TLS tests: plain and TLS HTTP/1.1, and gRPC over
//! HTTP/2 (the `h2` crate), each reading the whole answer.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use causal_collector::Config;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_rustls::rustls;

/// Every listener on an ephemeral loopback port, store `db`.
pub fn config(db: &Path) -> Config {
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    Config {
        xtrace_tcp: Some(any),
        xtrace_udp: None,
        otlp_http: Some(any),
        otlp_grpc: Some(any),
        zipkin: None,
        ..Config::loopback(db)
    }
}

/// A multi-threaded runtime of two workers.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One OTLP/JSON span of trace `trace` (32 hex digits) named `name`.
pub fn span_json(trace: &str, span: u32, name: &str) -> String {
    format!(
        r#"{{"traceId":"{trace}","spanId":"{span:016x}","name":"{name}","kind":2,"startTimeUnixNano":"1000","endTimeUnixNano":"2000","attributes":[{{"key":"http.method","value":{{"stringValue":"GET"}}}}]}}"#
    )
}

/// An OTLP/JSON request of `spans`.
pub fn request_json(spans: &[String]) -> Vec<u8> {
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"svc"}}}}]}},"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    )
    .into_bytes()
}

/// An HTTP/1.1 answer: status, headers (lowercase names), body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Posts `body` to `path` over `s` (`extra` header lines added) and reads the answer (until
/// Content-Length bytes or the connection closes).
pub async fn post<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    path: &str,
    content_type: &str,
    extra: &[&str],
    body: &[u8],
) -> std::io::Result<Answer> {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for e in extra {
        req.push_str(e);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    let mut sent = s.write_all(req.as_bytes()).await;
    if sent.is_ok() {
        sent = s.write_all(body).await;
    }
    if sent.is_ok() {
        sent = s.flush().await;
    }
    // A server that answers before reading the body (503, 413) may close while we write: its
    // answer is still there to read.
    match (read_answer(s).await, sent) {
        (Ok(a), _) => Ok(a),
        (Err(_), Err(e)) | (Err(e), Ok(())) => Err(e),
    }
}

/// Reads one HTTP/1.1 answer from `s` (within 30 s).
pub async fn read_answer<S: AsyncRead + Unpin>(s: &mut S) -> std::io::Result<Answer> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let mut lines = head.lines();
            let status = lines
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let len: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let mut body = buf[end + 4..].to_vec();
            while body.len() < len {
                let n = tokio::time::timeout(Duration::from_secs(30), s.read(&mut tmp))
                    .await
                    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&tmp[..n]);
            }
            return Ok(Answer {
                status,
                headers,
                body,
            });
        }
        let n = tokio::time::timeout(Duration::from_secs(30), s.read(&mut tmp))
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

/// A gRPC answer: `grpc-status`, `grpc-message`, the whole metadata (headers and trailers).
#[derive(Debug)]
pub struct GrpcAnswer {
    pub status: i32,
    pub message: String,
    pub metadata: Vec<(String, String)>,
}

/// Calls OTLP's `TraceService/Export` with the protobuf `message` over `io` (HTTP/2 via `h2`),
/// with `authorization` when given.
pub async fn grpc_export<S>(io: S, message: &[u8], authorization: Option<&str>) -> GrpcAnswer
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut client, conn) = h2::client::handshake(io).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = http::Request::builder()
        .method("POST")
        .uri("http://127.0.0.1/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    let (resp, mut send) = client.send_request(req.body(()).unwrap(), false).unwrap();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(message);
    send.send_data(framed.into(), true).unwrap();
    let resp = resp.await.unwrap();
    let mut metadata: Vec<(String, String)> = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let mut body = resp.into_body();
    while let Some(d) = body.data().await {
        let d = d.unwrap();
        let _ = body.flow_control().release_capacity(d.len());
    }
    if let Ok(Some(t)) = body.trailers().await {
        metadata.extend(
            t.iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())),
        );
    }
    let get = |k: &str| {
        metadata
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    GrpcAnswer {
        status: get("grpc-status")
            .and_then(|s| s.parse().ok())
            .unwrap_or(-1),
        message: get("grpc-message").unwrap_or_default(),
        metadata,
    }
}

/// A TLS client trusting only `cert_der`, offering `alpn`.
pub fn tls_connector(cert_der: &[u8], alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(cert_der.to_vec()))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tokio_rustls::TlsConnector::from(Arc::new(c))
}

/// This process's peak resident set (`VmHWM` of `/proc/self/status`), bytes.
pub fn peak_rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        * 1024
}

/// Resets the peak resident set to the current one (proc(5): writing 5 to `clear_refs`).
pub fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}
