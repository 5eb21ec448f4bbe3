//! The running collector: X-Trace over TCP and UDP, OTLP/HTTP, and the store writer.
//!
//! ```text
//!  TCP 7831 ─ frames ─┐                      ┌──────────────┐
//!  UDP 7831 ─ datagrams ─┼─► bounded channel ─►│ writer thread │─► SQLite (WAL), one transaction
//!  HTTP 4318 /v1/traces ┘   (batches)          └──────────────┘    per drained group of batches
//! ```
//!
//! # Bounded memory and backpressure
//! Ingest tasks decode reports into batches and hand them to one writer thread through a channel
//! of [`Config::queue_batches`] batches. When the writer falls behind, the channel fills:
//! - a TCP connection then waits before reading more, so the sender's socket buffer fills and
//!   its writes block (TCP flow control is the backpressure);
//! - UDP has no flow control: while the channel is full the socket keeps up to
//!   [`UDP_PENDING_MAX`] events aside and retries every 20 ms; beyond that a report is dropped
//!   and counted in [`StatsSnapshot::udp_dropped_events`]. Datagrams the kernel drops before the
//!   collector reads them (its receive buffer, [`Config::udp_recv_buffer`], was full) are counted
//!   in [`StatsSnapshot::udp_kernel_dropped`], from the socket's `SO_RXQ_OVFL` drop counter;
//! - an OTLP request waits for room, then for the commit, before it is answered.
//!
//! Each X-Trace TCP connection holds at most [`TCP_BUFFER_UNCHARGED`] bytes, or one frame
//! ([`causal::wire::MAX_FRAME_LEN`]) charged against the decode budget; connections over all TCP
//! listeners are capped at [`ListenConfig::max_connections`] ([`crate::listen`]: beyond it they
//! are refused and counted; header and idle timeouts close slow peers); OTLP bodies at [`MAX_HTTP_BODY`]
//! (and [`MAX_GZIP_EXPANSION`] once decompressed), with at most [`MAX_HTTP_IN_FLIGHT`] bodies read
//! at once and [`MAX_HTTP_DECODING`] decompressed at once. Decoding (OTLP/HTTP, Zipkin and
//! OTLP/gRPC together) is charged against one budget, [`Config::decode_budget`], each request its
//! estimated cost ([`decode_cost`]); a request costing more than [`DECODE_COST_FACTOR`] times its
//! size is refused (`413`) before it is decoded, and one that finds no room in time is answered
//! `429` with `Retry-After` (gRPC `RESOURCE_EXHAUSTED`). Stalled peers do not keep slots: a TCP
//! connection stuck inside a frame for [`TCP_FRAME_TIMEOUT`] is closed, an OTLP body not complete
//! within [`HTTP_BODY_TIMEOUT`] is answered `408`.
//!
//! # Nothing acknowledged is lost
//! An OTLP request is answered `200` only after its events are committed. On shutdown
//! ([`Collector::shutdown`], which `sightline collect` calls on SIGTERM and SIGINT) the listeners
//! stop accepting, every TCP connection and the UDP socket read what has already arrived, in-flight
//! HTTP requests finish, and the writer drains the channel and commits before the call returns.
//!
//! # Malformed input
//! Never a crash: a report that does not decode is counted ([`StatsSnapshot::xtrace_malformed`])
//! and logged (the first ten, then at every power of two, through `tracing`); a TCP frame whose
//! length exceeds the maximum closes that connection; an OTLP body that does not decode is
//! answered `400` with a `google.rpc.Status`.

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{Buf, BytesMut};
use causal_analysis::Event;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinSet;

use crate::backend::TraceStore;
use crate::error::{CollectorError, OtlpError, error_chain};
use crate::listen::{Conn, Gate, ListenConfig};
use crate::otlp;
use crate::store::Store;
use crate::xtrace;

/// OTLP/HTTP requests whose bodies are read and decoded at once; more wait their turn.
pub const MAX_HTTP_IN_FLIGHT: usize = 16;
/// Largest OTLP/HTTP request body accepted, bytes (larger: `413`).
pub const MAX_HTTP_BODY: usize = 16 << 20;
/// Largest OTLP/HTTP body after gzip decompression, bytes (larger: `400`): the same as
/// [`MAX_HTTP_BODY`]. Decoding multiplies memory (a 3-byte `{},` becomes a ~32-byte JSON value or a
/// ~50-byte message), so a 64 KiB gzip bomb of 64 MiB used to cost ~1.2 GB per request.
pub const MAX_GZIP_EXPANSION: u64 = MAX_HTTP_BODY as u64;
/// OTLP/HTTP bodies decompressed and decoded at once (the decoded request is dropped before the
/// commit is awaited), which bounds decoding memory to about this many times
/// 25 × [`MAX_GZIP_EXPANSION`].
pub const MAX_HTTP_DECODING: usize = 2;
/// Default [`Config::decode_budget`]: 256 MiB.
pub const DECODE_BUDGET: usize = 256 << 20;
/// Default [`Config::decode_wait`]: 2 s.
pub const DECODE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// Most estimated decoding cost ([`decode_cost`]) of one request, as a multiple of its body once
/// decompressed, plus [`DECODE_COST_SLACK`]; a body over it is refused with `413` before it is
/// decoded (issue 22: 16 MiB of empty OTLP/JSON spans, `{},{},…`, took 1.42 GB to decode: one
/// 3-byte object becomes a JSON tree node and a ~230-byte span).
pub const DECODE_COST_FACTOR: u64 = 32;
/// See [`DECODE_COST_FACTOR`]: 1 MiB.
pub const DECODE_COST_SLACK: u64 = 1 << 20;
/// Estimated memory of one decoded JSON object (a `serde_json` map's B-tree leaf, ~630 bytes, and
/// the message built from it), bytes.
pub const JSON_OBJECT_COST: u64 = 1024;
/// Estimated memory of one decoded JSON array (its `Vec`), bytes.
pub const JSON_ARRAY_COST: u64 = 64;
/// Estimated memory of one decoded protobuf message (the largest, `Span`, is ~230 bytes), bytes.
pub const PROTO_MESSAGE_COST: u64 = 256;

/// The estimated memory that decoding `body` (decompressed) takes, bytes, without decoding it:
/// JSON, 3 × its length (the tree's strings and the request's) plus [`JSON_OBJECT_COST`] per
/// object and [`JSON_ARRAY_COST`] per array (counted by one scan outside strings); protobuf,
/// 2 × its length plus [`PROTO_MESSAGE_COST`] per length-delimited field that parses as a
/// message (counted by walking the wire format, 100 levels deep at most, as prost decodes).
pub fn decode_cost(body: &[u8], json: bool) -> u64 {
    let n = body.len() as u64;
    if json {
        let (mut objects, mut arrays) = (0u64, 0u64);
        let (mut in_string, mut escaped) = (false, false);
        for &b in body {
            if in_string {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_string = false;
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' => objects += 1,
                b'[' => arrays += 1,
                _ => {}
            }
        }
        3 * n + objects * JSON_OBJECT_COST + arrays * JSON_ARRAY_COST
    } else {
        2 * n + proto_messages(body, 0).unwrap_or(0) * PROTO_MESSAGE_COST
    }
}

/// The messages nested in `buf` when it parses as protobuf fields (`None` when it does not).
fn proto_messages(mut buf: &[u8], depth: u32) -> Option<u64> {
    fn varint(buf: &mut &[u8]) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&b, rest) = buf.split_first()?;
            *buf = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    let mut count = 0u64;
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        if key >> 3 == 0 {
            return None;
        }
        match key & 7 {
            0 => {
                varint(&mut buf)?;
            }
            1 => buf = buf.get(8..)?,
            5 => buf = buf.get(4..)?,
            2 => {
                let len = usize::try_from(varint(&mut buf)?).ok()?;
                let inner = buf.get(..len)?;
                buf = &buf[len..];
                if depth < 100
                    && let Some(c) = proto_messages(inner, depth + 1)
                {
                    count += 1 + c;
                }
            }
            _ => return None,
        }
    }
    Some(count)
}

/// The global decode budget ([`Config::decode_budget`]), in KiB permits.
#[derive(Debug, Clone)]
struct DecodeBudget {
    kib: Arc<Semaphore>,
    total_kib: u32,
    wait: std::time::Duration,
}

impl DecodeBudget {
    fn new(bytes: usize, wait: std::time::Duration) -> DecodeBudget {
        let total_kib = u32::try_from((bytes / 1024).max(1)).unwrap_or(u32::MAX >> 3);
        DecodeBudget {
            kib: Arc::new(Semaphore::new(total_kib as usize)),
            total_kib,
            wait,
        }
    }

    /// Room for `cost` bytes (at most the whole budget), waiting as long as it takes; `None` only
    /// if the budget is closed.
    async fn acquire_waiting(&self, cost: u64) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let kib = u32::try_from(cost.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, self.total_kib);
        self.kib.clone().acquire_many_owned(kib).await.ok()
    }

    /// Room for `cost` bytes (a request costing more than the whole budget takes all of it),
    /// waiting at most [`Config::decode_wait`]; `None` when there was none.
    async fn acquire(&self, cost: u64) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let kib = u32::try_from(cost.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, self.total_kib);
        tokio::time::timeout(self.wait, self.kib.clone().acquire_many_owned(kib))
            .await
            .ok()?
            .ok()
    }
}

/// Why a request was not decoded within the budget.
#[derive(Debug)]
enum BudgetRefusal {
    /// Its decoding cost exceeds [`DECODE_COST_FACTOR`] × its size (`413`).
    TooCostly { cost: u64, len: usize },
    /// No room in the global budget in time (`429`, `Retry-After`).
    Busy,
}

impl std::fmt::Display for BudgetRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BudgetRefusal::TooCostly { cost, len } => write!(
                f,
                "decoding this {len}-byte body would take about {} MiB, more than {DECODE_COST_FACTOR} times its size (too many empty or tiny messages)",
                cost >> 20
            ),
            BudgetRefusal::Busy => {
                f.write_str("the collector's decode budget is in use; retry after 1 s")
            }
        }
    }
}

/// Checks `body`'s decoding cost against the per-request cap and takes room for it in the
/// budget; the permit is to be held until the decoded request is dropped.
async fn budget_for(
    budget: &DecodeBudget,
    stats: &Stats,
    body: &[u8],
    json: bool,
) -> Result<tokio::sync::OwnedSemaphorePermit, BudgetRefusal> {
    let cost = decode_cost(body, json);
    if cost > DECODE_COST_FACTOR * body.len() as u64 + DECODE_COST_SLACK {
        return Err(BudgetRefusal::TooCostly {
            cost,
            len: body.len(),
        });
    }
    match budget.acquire(cost).await {
        Some(p) => Ok(p),
        None => {
            let n = bump(&stats.decode_budget_refused, 1);
            if worth_logging(n) {
                tracing::warn!(
                    "decode budget full for {:?}: a request of cost {cost} answered 429/RESOURCE_EXHAUSTED (#{n})",
                    budget.wait
                );
            }
            Err(BudgetRefusal::Busy)
        }
    }
}

/// The HTTP answer to a [`BudgetRefusal`]: `413`, or `429` with `Retry-After: 1`.
fn budget_reply(enc: Encoding, r: &BudgetRefusal) -> Response {
    match r {
        BudgetRefusal::TooCostly { .. } => {
            error_reply(enc, StatusCode::PAYLOAD_TOO_LARGE, 8, r.to_string())
        }
        BudgetRefusal::Busy => {
            let mut resp = error_reply(enc, StatusCode::TOO_MANY_REQUESTS, 8, r.to_string());
            resp.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            resp
        }
    }
}

/// Events the writer commits in one transaction at most.
pub const MAX_TRANSACTION_EVENTS: usize = 16_384;

/// Where to listen and where to store.
#[derive(Debug, Clone)]
pub struct Config {
    /// X-Trace TCP listener (`None`: off). Default `127.0.0.1:7831`.
    pub xtrace_tcp: Option<SocketAddr>,
    /// Serve the X-Trace TCP listener over TLS too (the certificate of [`ListenConfig::tls`],
    /// no ALPN; length-prefixed frames inside the TLS stream; the `causal` library's `tls://`
    /// sink speaks it). Off by default, and without [`ListenConfig::tls`]: reporters that send
    /// plain TCP (`tcp://`, the library's default) keep reaching a collector with TLS for OTLP
    /// unless this is asked for.
    pub xtrace_tls: bool,
    /// X-Trace UDP socket (`None`: off). Default `127.0.0.1:7831`.
    pub xtrace_udp: Option<SocketAddr>,
    /// OTLP/HTTP listener (`None`: off). Default `127.0.0.1:4318`.
    pub otlp_http: Option<SocketAddr>,
    /// OTLP/gRPC listener (`None`: off). Default `127.0.0.1:4317`.
    pub otlp_grpc: Option<SocketAddr>,
    /// Zipkin v2 listener, `POST /api/v2/spans` (`None`: off). Default `127.0.0.1:9411`.
    pub zipkin: Option<SocketAddr>,
    /// The SQLite file.
    pub db: PathBuf,
    /// Write into this ClickHouse store instead of the SQLite file `db` (`None`: SQLite).
    pub clickhouse: Option<crate::clickhouse::ClickHouseUrl>,
    /// Capacity of the channel to the writer, in batches. Default 64.
    pub queue_batches: usize,
    /// Most events in one batch from one connection. Default 1024.
    pub batch_events: usize,
    /// Longest time an OTLP/HTTP request may take to deliver its body once a decode slot is
    /// free; slower requests are answered `408` and free the slot. Default
    /// [`HTTP_BODY_TIMEOUT`].
    pub http_body_timeout: std::time::Duration,
    /// Longest time an X-Trace TCP connection may stay inside a frame (some bytes of it arrived,
    /// then nothing); the connection is then closed and the partial frame counted as malformed.
    /// An idle connection between frames is never closed. Default [`TCP_FRAME_TIMEOUT`].
    pub tcp_frame_timeout: std::time::Duration,
    /// Bearer token the OTLP/HTTP, OTLP/gRPC and Zipkin listeners require (`Authorization:
    /// Bearer TOKEN`, RFC 6750 §2.1); a request without it is refused (`401`, gRPC
    /// `UNAUTHENTICATED`) and counted in [`StatsSnapshot::unauthenticated_requests`]. `None`: no
    /// token needed. X-Trace TCP and UDP carry no credentials and are not covered.
    pub bearer_token: Option<String>,
    /// Retention by age: tasks first seen longer ago than this are deleted, oldest first, in
    /// steps of [`RETENTION_STEP`] tasks between the writer's batches (`None`: kept forever).
    pub retention: Option<std::time::Duration>,
    /// Retention by size: while the store uses more than this many bytes
    /// ([`Store::used_bytes`]), its oldest tasks are deleted in the same steps (`None`: no limit).
    pub max_store_bytes: Option<u64>,
    /// How often the writer checks retention when it is idle (it also checks after commits at
    /// most this often). Default 1 s.
    pub retention_interval: std::time::Duration,
    /// Receive buffer asked for on the X-Trace UDP socket, bytes (`SO_RCVBUFFORCE`, else
    /// `SO_RCVBUF`; the kernel doubles the value for its bookkeeping and raises it to its
    /// minimum of about 4.6 KiB). Default [`UDP_RCVBUF`] (8 MiB).
    pub udp_recv_buffer: usize,
    /// Connection limit, header and idle timeouts, and TLS of the TCP listeners
    /// ([`crate::listen`]).
    pub listen: ListenConfig,
    /// Global decode budget, bytes: the memory that OTLP/HTTP, OTLP/gRPC and Zipkin requests being
    /// decoded may take together, each charged its estimated decoding cost ([`decode_cost`]). A
    /// request that finds no room within [`Config::decode_wait`] is answered `429` with
    /// `Retry-After: 1` (gRPC: `RESOURCE_EXHAUSTED`). Default [`DECODE_BUDGET`].
    pub decode_budget: usize,
    /// Longest wait for room in the decode budget. Default [`DECODE_WAIT`].
    pub decode_wait: std::time::Duration,
}

/// Tasks deleted per retention step (one transaction); the writer commits pending batches between
/// steps, so ingest never waits for more than one step.
pub const RETENTION_STEP: usize = 256;

/// Default [`Config::tcp_frame_timeout`]: 30 s. Without it, as many senders as the connection
/// limit ([`ListenConfig::max_connections`]) that each send half a frame and stop hold every
/// connection slot, and no report is received again.
pub const TCP_FRAME_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Default [`Config::http_body_timeout`]: 30 s (a 16 MiB body at 0.6 MB/s). Without a limit, 16
/// clients that send headers and part of a body, then nothing, hold every decode slot forever
/// (no OTLP request is served again) and keep a clean shutdown waiting.
pub const HTTP_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Config {
    /// Loopback defaults (`127.0.0.1`, ports 7831, 4318, 4317 and 9411) with store `db`.
    pub fn loopback(db: impl Into<PathBuf>) -> Config {
        let lo = std::net::Ipv4Addr::LOCALHOST;
        Config {
            xtrace_tcp: Some(SocketAddr::from((lo, causal::wire::DEFAULT_PORT))),
            xtrace_tls: false,
            xtrace_udp: Some(SocketAddr::from((lo, causal::wire::DEFAULT_PORT))),
            otlp_http: Some(SocketAddr::from((lo, 4318))),
            otlp_grpc: Some(SocketAddr::from((lo, 4317))),
            zipkin: Some(SocketAddr::from((lo, 9411))),
            db: db.into(),
            clickhouse: None,
            queue_batches: 64,
            batch_events: 1024,
            http_body_timeout: HTTP_BODY_TIMEOUT,
            tcp_frame_timeout: TCP_FRAME_TIMEOUT,
            udp_recv_buffer: UDP_RCVBUF,
            listen: ListenConfig::default(),
            decode_budget: DECODE_BUDGET,
            decode_wait: DECODE_WAIT,
            bearer_token: None,
            retention: None,
            max_store_bytes: None,
            retention_interval: std::time::Duration::from_secs(1),
        }
    }
}

#[derive(Debug, Default)]
struct Stats {
    tcp_connections: AtomicU64,
    xtrace_reports: AtomicU64,
    xtrace_malformed: AtomicU64,
    udp_datagrams: AtomicU64,
    udp_dropped_events: AtomicU64,
    udp_kernel_dropped: AtomicU64,
    otlp_requests: AtomicU64,
    otlp_grpc_requests: AtomicU64,
    zipkin_requests: AtomicU64,
    zipkin_bad_requests: AtomicU64,
    otlp_bad_requests: AtomicU64,
    otlp_spans: AtomicU64,
    otlp_rejected_spans: AtomicU64,
    events_stored: AtomicU64,
    events_duplicate: AtomicU64,
    events_conflicting: AtomicU64,
    events_lost: AtomicU64,
    retention_deleted_tasks: AtomicU64,
    unauthenticated_requests: AtomicU64,
    decode_budget_refused: AtomicU64,
    listen: Arc<crate::listen::ListenStats>,
    transactions: AtomicU64,
    writer_cpu_ns: AtomicU64,
}

/// Counters of a running collector (totals since start).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatsSnapshot {
    /// TCP connections accepted.
    pub tcp_connections: u64,
    /// X-Trace reports decoded (TCP and UDP).
    pub xtrace_reports: u64,
    /// X-Trace frames or datagrams that did not decode, TCP frames longer than the maximum, and
    /// TCP frames cut short by the sender closing its connection.
    pub xtrace_malformed: u64,
    /// UDP datagrams received.
    pub udp_datagrams: u64,
    /// Events from UDP dropped because the writer's queue was full.
    pub udp_dropped_events: u64,
    /// UDP datagrams the kernel dropped on the X-Trace socket before the collector read them
    /// (mostly: the receive buffer was full). Read from the socket's drop counter, which
    /// `SO_RXQ_OVFL` (socket(7)) attaches to every datagram received: the count is as of the
    /// latest datagram received, so drops after it are counted when the next one arrives, and at
    /// shutdown from the socket's line in `/proc/net/udp` (the same counter).
    pub udp_kernel_dropped: u64,
    /// OTLP/HTTP requests received.
    pub otlp_requests: u64,
    /// OTLP/gRPC `Export` requests received (decoded; tonic answers undecodable ones itself).
    pub otlp_grpc_requests: u64,
    /// Zipkin v2 `POST /api/v2/spans` requests received (their spans count in `otlp_spans` and
    /// `otlp_rejected_spans`).
    pub zipkin_requests: u64,
    /// Zipkin requests answered 4xx (undecodable body, unsupported type or encoding).
    pub zipkin_bad_requests: u64,
    /// OTLP/HTTP requests answered 4xx (undecodable body, unsupported type or encoding).
    pub otlp_bad_requests: u64,
    /// OTLP spans accepted.
    pub otlp_spans: u64,
    /// OTLP spans rejected (reported back in `partial_success`).
    pub otlp_rejected_spans: u64,
    /// Events newly committed to the store ([`crate::store::InsertStats::events`]): an event
    /// delivered again (an exporter's retry, a re-sent report) is not counted twice.
    pub events_stored: u64,
    /// Events received that were identical to one already stored, so not stored again
    /// ([`crate::store::InsertStats::duplicates`]).
    pub events_duplicate: u64,
    /// Events stored as another version of an event already stored with different content
    /// ([`crate::store::InsertStats::conflicts`]); also counted in `events_stored`.
    pub events_conflicting: u64,
    /// Events lost because the store failed to write them (e.g. disk full); logged.
    pub events_lost: u64,
    /// Tasks deleted by retention ([`Config::retention`], [`Config::max_store_bytes`]).
    pub retention_deleted_tasks: u64,
    /// OTLP/HTTP, OTLP/gRPC and Zipkin requests refused for a missing or wrong bearer token
    /// ([`Config::bearer_token`]).
    pub unauthenticated_requests: u64,
    /// OTLP/HTTP, OTLP/gRPC and Zipkin requests refused because the decode budget had no room
    /// ([`Config::decode_budget`]): `429` (gRPC `RESOURCE_EXHAUSTED`).
    pub decode_budget_refused: u64,
    /// TCP connections refused at the connection limit ([`ListenConfig::max_connections`]).
    pub connections_refused: u64,
    /// `accept(2)` failures (e.g. `EMFILE`); each is followed by a pause.
    pub accept_errors: u64,
    /// HTTP/1.1 connections closed because a request header was not complete within
    /// [`ListenConfig::header_timeout`].
    pub header_timeouts: u64,
    /// Connections closed by [`ListenConfig::idle_timeout`].
    pub idle_closed: u64,
    /// TLS handshakes that failed or timed out.
    pub tls_failed: u64,
    /// Store transactions committed.
    pub transactions: u64,
    /// CPU time the store writer thread used, ns (Linux `/proc/thread-self/schedstat`; 0 when
    /// unavailable). Set when the writer stops.
    pub writer_cpu_ns: u64,
}

impl Stats {
    fn snapshot(&self) -> StatsSnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatsSnapshot {
            tcp_connections: g(&self.tcp_connections),
            xtrace_reports: g(&self.xtrace_reports),
            xtrace_malformed: g(&self.xtrace_malformed),
            udp_datagrams: g(&self.udp_datagrams),
            udp_dropped_events: g(&self.udp_dropped_events),
            udp_kernel_dropped: g(&self.udp_kernel_dropped),
            otlp_requests: g(&self.otlp_requests),
            otlp_grpc_requests: g(&self.otlp_grpc_requests),
            zipkin_requests: g(&self.zipkin_requests),
            zipkin_bad_requests: g(&self.zipkin_bad_requests),
            otlp_bad_requests: g(&self.otlp_bad_requests),
            otlp_spans: g(&self.otlp_spans),
            otlp_rejected_spans: g(&self.otlp_rejected_spans),
            events_stored: g(&self.events_stored),
            events_duplicate: g(&self.events_duplicate),
            events_conflicting: g(&self.events_conflicting),
            events_lost: g(&self.events_lost),
            retention_deleted_tasks: g(&self.retention_deleted_tasks),
            unauthenticated_requests: g(&self.unauthenticated_requests),
            decode_budget_refused: g(&self.decode_budget_refused),
            connections_refused: g(&self.listen.refused),
            accept_errors: g(&self.listen.accept_errors),
            header_timeouts: g(&self.listen.header_timeouts),
            idle_closed: g(&self.listen.idle_closed),
            tls_failed: g(&self.listen.tls_failed),
            transactions: g(&self.transactions),
            writer_cpu_ns: g(&self.writer_cpu_ns),
        }
    }
}

fn bump(c: &AtomicU64, n: u64) -> u64 {
    c.fetch_add(n, Ordering::Relaxed) + n
}

/// Logs the first ten occurrences, then those whose count is a power of two.
fn worth_logging(count: u64) -> bool {
    count <= 10 || count.is_power_of_two()
}

/// A batch of events for the writer; `ack` is answered after the commit (OTLP requests). An empty
/// batch only wakes the writer (the retention ticker sends them).
struct Batch {
    events: Vec<Event>,
    ack: Option<oneshot::Sender<Result<(), String>>>,
}

/// Addresses actually bound (useful with port 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BoundAddrs {
    /// X-Trace TCP.
    pub xtrace_tcp: Option<SocketAddr>,
    /// X-Trace UDP.
    pub xtrace_udp: Option<SocketAddr>,
    /// OTLP/HTTP.
    pub otlp_http: Option<SocketAddr>,
    /// OTLP/gRPC.
    pub otlp_grpc: Option<SocketAddr>,
    /// Zipkin v2.
    pub zipkin: Option<SocketAddr>,
}

/// A running collector. Must be shut down with [`Collector::shutdown`] for a clean stop.
#[derive(Debug)]
pub struct Collector {
    addrs: BoundAddrs,
    stats: Arc<Stats>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    tx: mpsc::Sender<Batch>,
    writer: std::thread::JoinHandle<()>,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Batch({} events)", self.events.len())
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Collector {
    /// Opens the store, binds the listeners and starts serving. Must be called inside a Tokio
    /// runtime (multi-threaded or not).
    ///
    /// # Errors
    /// [`CollectorError::Store`] when the store cannot be opened, [`CollectorError::Bind`] when a
    /// listener cannot be bound, [`CollectorError::SpawnWriter`] when the writer thread cannot start.
    pub async fn start(config: Config) -> Result<Collector, CollectorError> {
        let (store, clickhouse) = match &config.clickhouse {
            Some(u) => (None, Some(crate::clickhouse::ClickHouseStore::open(u)?)),
            None => (Some(Store::open(&config.db)?), None),
        };
        let stats = Arc::new(Stats::default());
        let (tx, rx) = mpsc::channel::<Batch>(config.queue_batches.max(1));
        let (stop, _) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let mut addrs = BoundAddrs::default();
        let batch_events = config.batch_events.max(1);

        let budget = DecodeBudget::new(config.decode_budget, config.decode_wait);
        // One connection limit for all TCP listeners: the descriptors are the process's.
        let gate = Gate::new(config.listen.clone(), stats.listen.clone());
        if let Some(addr) = config.xtrace_tcp {
            let l = TcpListener::bind(addr)
                .await
                .map_err(bind_error("X-Trace TCP", addr))?;
            addrs.xtrace_tcp = Some(l.local_addr().unwrap_or(addr));
            let (tx, stats, frame_timeout) = (tx.clone(), stats.clone(), config.tcp_frame_timeout);
            let tcp_budget = budget.clone();
            let serve = Arc::new(move |conn: Conn, stop: watch::Receiver<bool>| {
                bump(&stats.tcp_connections, 1);
                tcp_conn(
                    conn,
                    tx.clone(),
                    stats.clone(),
                    tcp_budget.clone(),
                    stop,
                    batch_events,
                    frame_timeout,
                )
            });
            tasks.spawn(crate::listen::accept_loop(
                l,
                "X-Trace TCP",
                gate.clone(),
                crate::listen::Refuse::Close,
                config.xtrace_tls.then_some(crate::listen::NO_ALPN),
                stop.subscribe(),
                serve,
            ));
        }
        if let Some(addr) = config.xtrace_udp {
            let s = UdpSocket::bind(addr)
                .await
                .map_err(bind_error("X-Trace UDP", addr))?;
            enlarge_udp_receive_buffer(&s, config.udp_recv_buffer);
            enable_drop_counter(&s);
            addrs.xtrace_udp = Some(s.local_addr().unwrap_or(addr));
            tasks.spawn(udp_loop(
                s,
                tx.clone(),
                stats.clone(),
                stop.subscribe(),
                batch_events,
            ));
        }
        // OTLP/HTTP and Zipkin share their body slots, so together they hold at most
        // MAX_HTTP_IN_FLIGHT bodies and decode MAX_HTTP_DECODING at once.
        let http_state = HttpState {
            tx: tx.clone(),
            stats: stats.clone(),
            busy: Arc::new(Semaphore::new(MAX_HTTP_IN_FLIGHT)),
            decoding: Arc::new(Semaphore::new(MAX_HTTP_DECODING)),
            body_timeout: config.http_body_timeout,
            token: config.bearer_token.as_deref().map(Arc::from),
            budget: budget.clone(),
        };
        let http_listeners = [
            (config.otlp_http, "OTLP/HTTP", "/v1/traces"),
            (config.zipkin, "Zipkin", "/api/v2/spans"),
        ];
        for (addr, what, path) in http_listeners {
            let Some(addr) = addr else { continue };
            let l = TcpListener::bind(addr)
                .await
                .map_err(bind_error(what, addr))?;
            let bound = Some(l.local_addr().unwrap_or(addr));
            let handler = if what == "Zipkin" {
                addrs.zipkin = bound;
                axum::routing::post(zipkin_spans)
            } else {
                addrs.otlp_http = bound;
                axum::routing::post(otlp_traces)
            };
            let app = axum::Router::new()
                .route(path, handler)
                .layer(DefaultBodyLimit::max(MAX_HTTP_BODY))
                .with_state(http_state.clone());
            tasks.spawn(crate::listen::serve_http(
                l,
                what,
                gate.clone(),
                app,
                stop.subscribe(),
            ));
        }

        if let Some(addr) = config.otlp_grpc {
            let l = TcpListener::bind(addr)
                .await
                .map_err(bind_error("OTLP/gRPC", addr))?;
            addrs.otlp_grpc = Some(l.local_addr().unwrap_or(addr));
            let (gtx, gstats, gbudget) = (tx.clone(), stats.clone(), budget.clone());
            let handler: crate::grpc::Handler = Arc::new(move |body: Bytes| {
                let (tx, stats, budget) = (gtx.clone(), gstats.clone(), gbudget.clone());
                Box::pin(async move {
                    bump(&stats.otlp_grpc_requests, 1);
                    let room = match budget_for(&budget, &stats, &body, false).await {
                        Ok(p) => p,
                        Err(r @ BudgetRefusal::Busy) => {
                            return Err(crate::grpc::resource_exhausted_retry(r.to_string(), 1));
                        }
                        Err(r) => return Err(tonic::Status::resource_exhausted(r.to_string())),
                    };
                    let req = otlp::decode_protobuf(&body).map_err(|e| {
                        bump(&stats.otlp_bad_requests, 1);
                        tonic::Status::invalid_argument(error_chain(&e))
                    })?;
                    let conv = convert(&stats, req);
                    drop((body, room));
                    commit(&tx, conv).await.map_err(tonic::Status::unavailable)
                })
            });
            let token = config.bearer_token.as_deref().map(Arc::<str>::from);
            let astats = stats.clone();
            let authorize: crate::grpc::Authorize = Arc::new(move |headers: &HeaderMap| {
                let ok = authorized(token.as_deref(), headers);
                if !ok {
                    let c = bump(&astats.unauthenticated_requests, 1);
                    if worth_logging(c) {
                        tracing::warn!(
                            "OTLP/gRPC: request without the bearer token refused (#{c})"
                        );
                    }
                }
                ok
            });
            let svc = crate::grpc::TraceService {
                handler,
                authorize,
                slots: http_state.busy.clone(),
            };
            let incoming = crate::listen::grpc_incoming(l, gate.clone(), stop.subscribe());
            let mut stop_rx = stop.subscribe();
            tasks.spawn(async move {
                let shutdown = async move {
                    let _ = stop_rx.wait_for(|s| *s).await;
                };
                let served = tonic::transport::Server::builder()
                    .concurrency_limit_per_connection(MAX_HTTP_IN_FLIGHT)
                    .add_service(svc)
                    .serve_with_incoming_shutdown(incoming, shutdown)
                    .await;
                if let Err(e) = served {
                    tracing::error!("OTLP/gRPC server failed: {}", error_chain(&e));
                }
            });
        }

        let retention = Retention {
            age: config.retention,
            max_bytes: config.max_store_bytes,
            interval: config.retention_interval,
        };
        if retention.age.is_some() || retention.max_bytes.is_some() {
            // Wakes an idle writer so retention runs without ingest.
            let (ttx, mut stop_rx, every) =
                (tx.clone(), stop.subscribe(), config.retention_interval);
            tasks.spawn(async move {
                let mut tick = tokio::time::interval(every);
                loop {
                    tokio::select! {
                        _ = tick.tick() => {
                            let _ = ttx.try_send(Batch { events: Vec::new(), ack: None });
                        }
                        _ = stop_rx.wait_for(|s| *s) => break,
                    }
                }
            });
        }
        let wstats = stats.clone();
        let writer = std::thread::Builder::new()
            .name("sightline-store".into())
            .spawn(move || match (store, clickhouse) {
                (Some(store), _) => writer_loop(store, rx, wstats, retention),
                (None, Some(ch)) => writer_loop(ch, rx, wstats, retention),
                (None, None) => unreachable!("one store is open"),
            })
            .map_err(CollectorError::SpawnWriter)?;
        Ok(Collector {
            addrs,
            stats,
            stop,
            tasks,
            tx,
            writer,
        })
    }

    /// The addresses bound.
    pub fn addrs(&self) -> BoundAddrs {
        self.addrs
    }

    /// The counters now.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Stops accepting, finishes reading what has arrived, commits everything queued, and returns
    /// the final counters.
    ///
    /// # Errors
    /// [`CollectorError::JoinWriter`], [`CollectorError::WriterPanicked`] when the writer thread
    /// panicked.
    pub async fn shutdown(self) -> Result<StatsSnapshot, CollectorError> {
        let Collector {
            stats,
            stop,
            mut tasks,
            tx,
            writer,
            ..
        } = self;
        let _ = stop.send(true);
        while tasks.join_next().await.is_some() {}
        drop(tx);
        tokio::task::spawn_blocking(move || writer.join())
            .await
            .map_err(CollectorError::JoinWriter)?
            .map_err(|_| CollectorError::WriterPanicked)?;
        Ok(stats.snapshot())
    }
}

/// The error of binding the listener `what` on `addr`.
fn bind_error(
    what: &'static str,
    addr: SocketAddr,
) -> impl FnOnce(std::io::Error) -> CollectorError {
    move |source| CollectorError::Bind { what, addr, source }
}

/// What retention the writer applies ([`Config::retention`], [`Config::max_store_bytes`]).
#[derive(Debug, Clone, Copy)]
struct Retention {
    age: Option<std::time::Duration>,
    max_bytes: Option<u64>,
    interval: std::time::Duration,
}

impl Retention {
    /// Deletes what retention asks for, [`RETENTION_STEP`] tasks per transaction, until nothing
    /// is left to delete or batches are waiting (the next check continues). Failures only log:
    /// ingest goes on.
    fn run(&self, store: &mut Store, rx: &mpsc::Receiver<Batch>, stats: &Stats) {
        loop {
            let mut deleted = 0;
            if let Some(age) = self.age {
                let before =
                    now_ns().saturating_sub(i64::try_from(age.as_nanos()).unwrap_or(i64::MAX));
                match store.delete_oldest_tasks(Some(before), RETENTION_STEP) {
                    Ok(n) => deleted += n,
                    Err(e) => {
                        tracing::warn!("retention: {}", error_chain(&e));
                        return;
                    }
                }
            }
            if deleted == 0
                && let Some(max) = self.max_bytes
            {
                match store.used_bytes() {
                    Ok(used) if used > max => match store.delete_oldest_tasks(None, RETENTION_STEP)
                    {
                        Ok(n) => deleted += n,
                        Err(e) => {
                            tracing::warn!("retention: {}", error_chain(&e));
                            return;
                        }
                    },
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!("retention: {}", error_chain(&e));
                        return;
                    }
                }
            }
            if deleted > 0 {
                bump(&stats.retention_deleted_tasks, deleted as u64);
            }
            if deleted == 0 || !rx.is_empty() {
                return;
            }
        }
    }
}

/// What the writer loop needs of a store beyond [`TraceStore`]: its retries, its background
/// work and its retention.
trait WriterStore: TraceStore {
    /// The store as log messages name it.
    const NAME: &'static str;
    /// Waits before each retry of a failed write, ms.
    const RETRY_WAITS_MS: &'static [u64];
    /// Background work kept running while the writer runs (SQLite's checkpointer).
    fn background(&self) -> Option<crate::store::Checkpointer> {
        None
    }
    /// The least time between two retention runs.
    fn retention_interval(retention: &Retention) -> std::time::Duration {
        retention.interval
    }
    /// Deletes what `retention` asks for; failures only log.
    fn retain(&mut self, retention: &Retention, rx: &mpsc::Receiver<Batch>, stats: &Stats);
}

impl WriterStore for Store {
    const NAME: &'static str = "store";
    // One retry: a busy database (another writer, e.g. `sightline import`) usually clears.
    const RETRY_WAITS_MS: &'static [u64] = &[200];
    fn background(&self) -> Option<crate::store::Checkpointer> {
        // Checkpoints on their own thread; without it SQLite's automatic ones run here.
        match self.start_checkpointer() {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(
                    "store checkpoints stay on the writer thread: {}",
                    error_chain(&e)
                );
                None
            }
        }
    }
    fn retain(&mut self, retention: &Retention, rx: &mpsc::Receiver<Batch>, stats: &Stats) {
        retention.run(self, rx, stats);
    }
}

/// A ClickHouse store retries a failed write three times, 0.2, 0.4 and 0.8 s apart (a retried
/// batch is idempotent: `docs/collector-store.md`, "ClickHouse"), and applies retention as day
/// partition drops, once a minute at most.
impl WriterStore for crate::clickhouse::ClickHouseStore {
    const NAME: &'static str = "ClickHouse";
    const RETRY_WAITS_MS: &'static [u64] = &[200, 400, 800];
    fn retention_interval(retention: &Retention) -> std::time::Duration {
        retention.interval.max(std::time::Duration::from_secs(60))
    }
    fn retain(&mut self, retention: &Retention, _rx: &mpsc::Receiver<Batch>, _stats: &Stats) {
        if let Some(age) = retention.age {
            let before = now_ns().saturating_sub(i64::try_from(age.as_nanos()).unwrap_or(i64::MAX));
            if let Err(e) = self.drop_days_before(before) {
                tracing::warn!("ClickHouse retention failed: {}", error_chain(&e));
            }
        }
    }
}

/// The store's writer thread, for either backend: takes batches off the bounded queue (a slow
/// store slows the acknowledgements, and the queue bounds memory), writes up to
/// [`MAX_TRANSACTION_EVENTS`] at a time, retries a failed write ([`WriterStore::RETRY_WAITS_MS`]),
/// answers every exporter waiting for its events only after the write, counts the outcome, and
/// runs retention between batches.
fn writer_loop<S: WriterStore>(
    mut store: S,
    mut rx: mpsc::Receiver<Batch>,
    stats: Arc<Stats>,
    retention: Retention,
) {
    let retains = retention.age.is_some() || retention.max_bytes.is_some();
    let retention_interval = S::retention_interval(&retention);
    let mut last_retention: Option<std::time::Instant> = None;
    let _background = store.background();
    // Committed batches are freed on another thread: freeing ~16k events, each a dozen
    // allocations made by the ingest threads, took about a tenth of this thread's time (this and
    // the task lookup of Store::insert together: 552k -> 605k events per writer CPU-second), and
    // this thread bounds the ingest rate. At most FREE_QUEUE batches wait to be freed (else they are freed
    // here), so memory stays bounded.
    const FREE_QUEUE: usize = 2;
    let (free_tx, free_rx) = std::sync::mpsc::sync_channel::<Vec<Event>>(FREE_QUEUE);
    let freer = std::thread::Builder::new()
        .name("sightline-free".into())
        .spawn(move || {
            for v in free_rx {
                drop(v)
            }
        })
        .ok();
    while let Some(first) = rx.blocking_recv() {
        let mut events = first.events;
        let mut acks: Vec<oneshot::Sender<Result<(), String>>> = first.ack.into_iter().collect();
        while events.len() < MAX_TRANSACTION_EVENTS {
            match rx.try_recv() {
                Ok(b) => {
                    events.extend(b.events);
                    acks.extend(b.ack);
                }
                Err(_) => break,
            }
        }
        let n = events.len() as u64;
        let mut result = store.insert(&events, now_ns());
        for &wait in S::RETRY_WAITS_MS {
            let Err(e) = &result else { break };
            tracing::warn!("{} write failed, retrying: {}", S::NAME, error_chain(e));
            std::thread::sleep(std::time::Duration::from_millis(wait));
            result = store.insert(&events, now_ns());
        }
        let outcome = match result {
            Ok(written) => {
                bump(&stats.events_stored, written.events as u64);
                if written.duplicates > 0 {
                    bump(&stats.events_duplicate, written.duplicates as u64);
                }
                if written.conflicts > 0 {
                    bump(&stats.events_conflicting, written.conflicts as u64);
                }
                if n > 0 {
                    bump(&stats.transactions, 1);
                }
                Ok(())
            }
            Err(e) => {
                bump(&stats.events_lost, n);
                let e = error_chain(&e);
                tracing::error!("{} write failed; {n} events lost: {e}", S::NAME);
                Err(e)
            }
        };
        for a in acks {
            let _ = a.send(outcome.clone());
        }
        if freer.is_some() {
            // Full (or the thread is gone): freed here instead.
            let _ = free_tx.try_send(events);
        }
        if retains && last_retention.is_none_or(|t| t.elapsed() >= retention_interval) {
            store.retain(&retention, &rx, &stats);
            last_retention = Some(std::time::Instant::now());
        }
    }
    stats
        .writer_cpu_ns
        .store(thread_cpu_ns(), Ordering::Relaxed);
    drop(free_tx);
    if let Some(f) = freer {
        let _ = f.join();
    }
}

/// CPU time of the calling thread, ns: the first field of `/proc/thread-self/schedstat`
/// (Documentation/scheduler/sched-stats.rst), or 0 when it cannot be read.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Most bytes a TCP connection reads after shutdown began (what had already arrived), bytes.
pub const SHUTDOWN_DRAIN: usize = 64 << 20;

/// How long a TCP connection waits for more of what its sender had already written once shutdown
/// began; a sender quiet that long is closed.
const SHUTDOWN_QUIET: std::time::Duration = std::time::Duration::from_millis(100);

/// Read buffer growth step for an X-Trace TCP connection, bytes.
const READ_CHUNK: usize = 16 << 10;

/// Most buffer an X-Trace TCP connection holds without charging the decode budget, bytes: a
/// frame longer than this is read into a buffer of its own length once the budget
/// ([`Config::decode_budget`]) has room for it (the connection waits, and TCP flow control holds
/// its sender). Issue 22: 1,024 connections each inside a 1 MiB frame took ~1.3 GB; now at most
/// 1,024 × 64 KiB plus the budget.
pub const TCP_BUFFER_UNCHARGED: usize = 64 << 10;

async fn tcp_conn(
    mut stream: Conn,
    tx: mpsc::Sender<Batch>,
    stats: Arc<Stats>,
    budget: DecodeBudget,
    mut stop: watch::Receiver<bool>,
    batch_events: usize,
    frame_timeout: std::time::Duration,
) {
    let peer = stream.peer();
    // Reporters keep their connection open between reports: no idle timeout (the frame timeout
    // applies inside a frame).
    let _forever = crate::listen::Busy::new(&stream.busy());
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let mut batch: Vec<Event> = Vec::with_capacity(batch_events.min(4096));
    let mut stopping = false;
    let mut drained = 0usize;
    // The budget held for a frame longer than TCP_BUFFER_UNCHARGED.
    let mut charged: Option<tokio::sync::OwnedSemaphorePermit> = None;
    'conn: loop {
        // The length of the frame being read (prefix included), once its prefix has arrived.
        let need = buf
            .get(..4)
            .map(|p| 4 + u32::from_be_bytes([p[0], p[1], p[2], p[3]]) as usize)
            .unwrap_or(0);
        if need > TCP_BUFFER_UNCHARGED && need <= causal::wire::MAX_FRAME_LEN + 4 {
            if charged.is_none() {
                let room = tokio::select! {
                    p = budget.acquire_waiting(need as u64) => p,
                    _ = stop.wait_for(|s| *s) => None,
                };
                let Some(room) = room else { break };
                charged = Some(room);
                buf.reserve(need - buf.len());
            }
        } else if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        let read = if stopping {
            // Shutting down: take only what has already arrived, and at most SHUTDOWN_DRAIN
            // bytes of it, so a sender that never pauses cannot hold the shutdown open.
            if drained >= SHUTDOWN_DRAIN {
                tracing::warn!(
                    "X-Trace TCP {peer}: still sending at shutdown; closing after {drained} bytes"
                );
                break;
            }
            // What the sender wrote before shutdown may still be in flight on its side (its
            // send queue waits for our receive window): read until the sender is quiet for
            // SHUTDOWN_QUIET or closes, not only what one non-blocking read finds.
            match tokio::time::timeout(SHUTDOWN_QUIET, stream.read_buf(&mut buf)).await {
                Err(_elapsed) => break,
                Ok(Ok(n)) => {
                    drained += n;
                    Ok(n)
                }
                Ok(r) => r,
            }
        } else {
            tokio::select! {
                biased;
                r = stream.read_buf(&mut buf) => r,
                _ = stop.wait_for(|s| *s) => { stopping = true; continue; }
                _ = tokio::time::sleep(frame_timeout), if !buf.is_empty() => {
                    let n = bump(&stats.xtrace_malformed, 1);
                    if worth_logging(n) {
                        tracing::warn!("X-Trace TCP {peer}: no progress inside a frame for {frame_timeout:?}; closing (#{n})");
                    }
                    break;
                }
            }
        };
        match read {
            Ok(0) => {
                if !buf.is_empty() {
                    // The sender closed in the middle of a frame: that report is lost.
                    let n = bump(&stats.xtrace_malformed, 1);
                    if worth_logging(n) {
                        tracing::warn!(
                            "X-Trace TCP {peer}: connection closed inside a frame; {} bytes dropped (#{n})",
                            buf.len()
                        );
                    }
                }
                break;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!("X-Trace TCP {peer}: read failed: {e}");
                break;
            }
        }
        loop {
            match causal::wire::split_frame(&buf) {
                Ok(Some((range, used))) => {
                    match xtrace::decode_payload(&buf[range]) {
                        Ok(e) => batch.push(e),
                        Err(e) => {
                            let n = bump(&stats.xtrace_malformed, 1);
                            if worth_logging(n) {
                                tracing::warn!(
                                    "X-Trace TCP {peer}: malformed report (#{n}): {}",
                                    error_chain(&e)
                                );
                            }
                        }
                    }
                    buf.advance(used);
                    if batch.len() >= batch_events && !send(&tx, &stats, &mut batch).await {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let n = bump(&stats.xtrace_malformed, 1);
                    if worth_logging(n) {
                        tracing::warn!(
                            "X-Trace TCP {peer}: closing the connection (#{n}): {}",
                            error_chain(&e)
                        );
                    }
                    break 'conn;
                }
            }
        }
        if charged.is_some() && buf.len() < TCP_BUFFER_UNCHARGED {
            // The long frame is decoded: back to a small buffer, and the budget freed.
            let mut small = BytesMut::with_capacity(READ_CHUNK.max(buf.len()));
            small.extend_from_slice(&buf);
            buf = small;
            charged = None;
        }
        if !batch.is_empty() && !send(&tx, &stats, &mut batch).await {
            return;
        }
    }
    if !batch.is_empty() {
        send(&tx, &stats, &mut batch).await;
    }
}

/// Sends the batch to the writer, waiting for room (backpressure). False when the writer is gone.
async fn send(tx: &mpsc::Sender<Batch>, stats: &Stats, batch: &mut Vec<Event>) -> bool {
    let events = std::mem::take(batch);
    bump(&stats.xtrace_reports, events.len() as u64);
    tx.send(Batch { events, ack: None }).await.is_ok()
}

/// Events a UDP socket holds while the writer's queue is full, before it starts dropping.
pub const UDP_PENDING_MAX: usize = 8192;

async fn udp_loop(
    sock: UdpSocket,
    tx: mpsc::Sender<Batch>,
    stats: Arc<Stats>,
    mut stop: watch::Receiver<bool>,
    batch_events: usize,
) {
    let mut buf = vec![0u8; 65_536];
    let mut cmsg = nix::cmsg_space!(u32);
    // The socket's kernel drop counter as of the latest datagram (SO_RXQ_OVFL), and how many
    // times it was seen to grow (for logging).
    let mut kernel_drops: u32 = 0;
    let mut drop_reports = 0u64;
    // Events received but not yet queued (the queue was full): bounded by UDP_PENDING_MAX.
    let mut pending: Vec<Event> = Vec::new();
    let mut retry = tokio::time::interval(std::time::Duration::from_millis(20));
    // Shutting down: datagrams already in the socket's queue are still read (at most
    // UDP_SHUTDOWN_DRAIN of them), then the socket closes.
    let mut stopping = false;
    let mut drained = 0usize;
    loop {
        if !stopping {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => stopping = true,
                r = sock.readable() => if let Err(e) = r {
                    tracing::warn!("X-Trace UDP socket failed: {e}");
                    break;
                },
                _ = retry.tick(), if !pending.is_empty() => {
                    pending = udp_flush(&tx, pending);
                    continue;
                }
            };
        }
        let mut received = 0usize;
        let mut empty = false;
        while received < batch_events {
            // While stopping, Tokio may not have seen the socket become readable: ask the kernel.
            let got = if stopping {
                recv_now(&sock, &mut buf, &mut cmsg)
            } else {
                recv_datagram(&sock, &mut buf, &mut cmsg)
            };
            let (n, peer, drops) = match got {
                Ok(d) => d,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    empty = true;
                    break;
                }
                Err(e) => {
                    tracing::debug!("X-Trace UDP receive failed: {e}");
                    empty = true;
                    break;
                }
            };
            received += 1;
            bump(&stats.udp_datagrams, 1);
            if let Some(d) = drops {
                // A running total since the socket was created (u32, so it may wrap).
                let new = d.wrapping_sub(kernel_drops);
                kernel_drops = d;
                if new > 0 {
                    let total = bump(&stats.udp_kernel_dropped, u64::from(new));
                    drop_reports += 1;
                    if worth_logging(drop_reports) {
                        tracing::warn!(
                            "X-Trace UDP: the kernel dropped {new} datagrams (receive buffer full); {total} so far"
                        );
                    }
                }
            }
            let mut payload = &buf[..n];
            // Accept a datagram with the TCP length prefix too.
            if n >= 4 && u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize == n - 4 {
                payload = &buf[4..n];
            }
            match xtrace::decode_payload(payload) {
                Ok(e) => {
                    bump(&stats.xtrace_reports, 1);
                    if pending.len() < UDP_PENDING_MAX {
                        pending.push(e);
                    } else {
                        let d = bump(&stats.udp_dropped_events, 1);
                        if worth_logging(d) {
                            tracing::warn!(
                                "X-Trace UDP: store queue full, {d} events dropped so far"
                            );
                        }
                    }
                }
                Err(e) => {
                    let c = bump(&stats.xtrace_malformed, 1);
                    if worth_logging(c) {
                        tracing::warn!(
                            "X-Trace UDP {peer}: malformed report (#{c}): {}",
                            error_chain(&e)
                        );
                    }
                }
            }
        }
        if stopping {
            // Waiting for room is fine now.
            if !pending.is_empty()
                && tx
                    .send(Batch {
                        events: std::mem::take(&mut pending),
                        ack: None,
                    })
                    .await
                    .is_err()
            {
                break;
            }
            drained += received;
            if empty || drained >= UDP_SHUTDOWN_DRAIN {
                break;
            }
        } else if !pending.is_empty() {
            pending = udp_flush(&tx, pending);
        }
    }
    // Drops after the last datagram received reach no control message: take the socket's final
    // count from /proc/net/udp instead.
    if let Some(d) = kernel_drops_now(&sock) {
        let new = d.wrapping_sub(kernel_drops);
        if new > 0 && new < u32::MAX / 2 {
            let total = bump(&stats.udp_kernel_dropped, u64::from(new));
            tracing::warn!(
                "X-Trace UDP: the kernel dropped {new} datagrams after the last one received; {total} in all"
            );
        }
    }
    // Shutting down: what is pending goes to the writer (waiting for room is fine now).
    if !pending.is_empty() {
        let _ = tx
            .send(Batch {
                events: pending,
                ack: None,
            })
            .await;
    }
}

/// The socket's kernel drop counter now: the `drops` column of its line in `/proc/net/udp` or
/// `/proc/net/udp6` (proc_net(5); the line whose `inode` is the socket's), the same counter
/// `SO_RXQ_OVFL` reports. `None` when it cannot be read.
fn kernel_drops_now(sock: &UdpSocket) -> Option<u32> {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::MetadataExt as _;
    let inode = std::fs::metadata(format!("/proc/self/fd/{}", sock.as_raw_fd()))
        .ok()?
        .ino()
        .to_string();
    let table = if sock.local_addr().ok()?.is_ipv4() {
        "/proc/net/udp"
    } else {
        "/proc/net/udp6"
    };
    let text = std::fs::read_to_string(table).ok()?;
    text.lines().skip(1).find_map(|line| {
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
        let cols: Vec<&str> = line.split_whitespace().collect();
        (cols.len() >= 13 && cols[9] == inode)
            .then(|| cols[12].parse::<i64>().ok().map(|d| d as u32))
            .flatten()
    })
}

/// Most datagrams the X-Trace UDP socket reads after shutdown began (what is already queued on it,
/// bounded so that a sender that never pauses cannot hold the shutdown open).
pub const UDP_SHUTDOWN_DRAIN: usize = 1 << 16;

/// Receives one datagram into `buf` with `recvmsg(2)` without waiting: (bytes, sender, the
/// socket's kernel drop counter when the datagram carried one). The counter is the
/// `SO_RXQ_OVFL` control message (socket(7)): the number of datagrams the kernel dropped on this
/// socket since it was created, as of when this datagram was queued; Linux attaches it only once
/// it is non-zero. `cmsg` must have room for it (`nix::cmsg_space!(u32)`).
///
/// # Errors
/// `WouldBlock` when no datagram is waiting (the socket's readiness is then cleared); other
/// errors of `recvmsg(2)`.
fn recv_datagram(
    sock: &UdpSocket,
    buf: &mut [u8],
    cmsg: &mut [u8],
) -> std::io::Result<(usize, String, Option<u32>)> {
    sock.try_io(tokio::io::Interest::READABLE, || recv_now(sock, buf, cmsg))
}

/// [`recv_datagram`] without Tokio's readiness: asks the kernel even when Tokio has not seen the
/// socket become readable (`MSG_DONTWAIT`: `WouldBlock` when nothing is queued).
fn recv_now(
    sock: &UdpSocket,
    buf: &mut [u8],
    cmsg: &mut [u8],
) -> std::io::Result<(usize, String, Option<u32>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg};
    use std::os::fd::AsRawFd as _;
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let msg = recvmsg::<SockaddrStorage>(
        sock.as_raw_fd(),
        &mut iov,
        Some(cmsg),
        MsgFlags::MSG_DONTWAIT,
    )
    .map_err(std::io::Error::from)?;
    let mut drops = None;
    // ENOBUFS here means the control data was cut short (MSG_CTRUNC): no counter this time.
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::RxqOvfl(d) = c {
                drops = Some(d);
            }
        }
    }
    let peer = msg
        .address
        .map(|a| a.to_string())
        .unwrap_or_else(|| "?".into());
    Ok((msg.bytes, peer, drops))
}

/// Queues `pending` if the writer has room; gives it back otherwise (UDP never waits).
/// Receive buffer asked for on the X-Trace UDP socket, bytes (the kernel doubles it for overhead).
pub const UDP_RCVBUF: usize = 8 << 20;

/// Enlarges the UDP socket's receive buffer to `bytes` ([`UDP_RCVBUF`] unless configured).
///
/// # Why is this needed?
/// The kernel charges each queued datagram its whole buffer (about 2 KiB for a small report), so
/// the default `net.core.rmem_default` (208 KiB) holds only ~100 reports: a burst while the
/// collector is descheduled on a busy machine was dropped in the kernel, uncounted by us.
/// `SO_RCVBUFFORCE` (socket(7); needs CAP_NET_ADMIN) may exceed `net.core.rmem_max`; without the
/// capability, `SO_RCVBUF` gets as much as `rmem_max` allows. Failure only logs: the default
/// buffer still works.
fn enlarge_udp_receive_buffer(sock: &UdpSocket, bytes: usize) {
    use nix::sys::socket::{setsockopt, sockopt};
    if setsockopt(sock, sockopt::RcvBufForce, &bytes).is_err()
        && let Err(e) = setsockopt(sock, sockopt::RcvBuf, &bytes)
    {
        tracing::warn!("setsockopt(SO_RCVBUF) on the X-Trace UDP socket: {e}");
    }
}

/// Turns on `SO_RXQ_OVFL` (socket(7)): each datagram received then carries the socket's count of
/// datagrams the kernel dropped, which [`StatsSnapshot::udp_kernel_dropped`] reports. Failure
/// only logs (the kernel drops then go uncounted).
fn enable_drop_counter(sock: &UdpSocket) {
    use nix::sys::socket::{setsockopt, sockopt};
    if let Err(e) = setsockopt(sock, sockopt::RxqOvfl, &1) {
        tracing::warn!(
            "setsockopt(SO_RXQ_OVFL) on the X-Trace UDP socket: {e}; kernel drops are not counted"
        );
    }
}

fn udp_flush(tx: &mpsc::Sender<Batch>, pending: Vec<Event>) -> Vec<Event> {
    match tx.try_send(Batch {
        events: pending,
        ack: None,
    }) {
        Ok(()) => Vec::new(),
        Err(mpsc::error::TrySendError::Full(b) | mpsc::error::TrySendError::Closed(b)) => b.events,
    }
}

#[derive(Clone)]
struct HttpState {
    tx: mpsc::Sender<Batch>,
    stats: Arc<Stats>,
    /// Requests whose bodies are being read or decoded at once (bounds their memory).
    busy: Arc<Semaphore>,
    /// Requests being decompressed and decoded at once ([`MAX_HTTP_DECODING`]).
    decoding: Arc<Semaphore>,
    /// [`Config::http_body_timeout`].
    body_timeout: std::time::Duration,
    /// [`Config::bearer_token`].
    token: Option<Arc<str>>,
    /// [`Config::decode_budget`], shared with OTLP/gRPC.
    budget: DecodeBudget,
}

/// Whether `headers` carry `Authorization: Bearer <token>` (RFC 6750 §2.1; the scheme name in
/// any case) when a token is required. The token is compared in constant time.
fn authorized(token: Option<&str>, headers: &HeaderMap) -> bool {
    let Some(want) = token else {
        return true;
    };
    let Some(got) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim())
    else {
        return false;
    };
    got.len() == want.len()
        && got
            .bytes()
            .zip(want.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The `401` of a request without the bearer token, counted.
fn unauthenticated(stats: &Stats, what: &str) -> Response {
    let c = bump(&stats.unauthenticated_requests, 1);
    if worth_logging(c) {
        tracing::warn!("{what}: request without the bearer token refused (#{c})");
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "a bearer token is required\n",
    )
        .into_response()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Protobuf,
    Json,
}

fn reply(enc: Encoding, status: StatusCode, proto: Vec<u8>, json: String) -> Response {
    match enc {
        Encoding::Protobuf => (
            status,
            [(header::CONTENT_TYPE, "application/x-protobuf")],
            proto,
        )
            .into_response(),
        Encoding::Json => {
            (status, [(header::CONTENT_TYPE, "application/json")], json).into_response()
        }
    }
}

fn error_reply(enc: Encoding, status: StatusCode, code: i32, message: String) -> Response {
    let proto = prost::Message::encode_to_vec(&otlp::RpcStatus {
        code,
        message: message.clone(),
    });
    let json = serde_json::json!({"code": code, "message": message}).to_string();
    reply(enc, status, proto, json)
}

fn gunzip(body: &[u8]) -> Result<Vec<u8>, OtlpError> {
    let mut out = Vec::new();
    let mut d = flate2::read::GzDecoder::new(body).take(MAX_GZIP_EXPANSION + 1);
    d.read_to_end(&mut out).map_err(OtlpError::Gzip)?;
    if out.len() as u64 > MAX_GZIP_EXPANSION {
        return Err(OtlpError::GzipTooLarge {
            limit: MAX_GZIP_EXPANSION,
        });
    }
    Ok(out)
}

/// Reads a request body once one of [`MAX_HTTP_IN_FLIGHT`] slots is free (so at most that many
/// bodies are in memory; other requests wait and their senders see TCP backpressure), within
/// [`Config::http_body_timeout`]. Gives the slot (held until the request is answered) and the
/// body, or the response to send: `413` (too large), `408` (too slow), `503` (shutting down).
async fn read_body(
    st: &HttpState,
    what: &str,
    body: axum::body::Body,
) -> Result<(tokio::sync::OwnedSemaphorePermit, Bytes), Response> {
    // A declared length over the limit is answered at once, before waiting for a slot or a body.
    if http_body::Body::size_hint(&body)
        .exact()
        .is_some_and(|n| n > MAX_HTTP_BODY as u64)
    {
        bump(&st.stats.otlp_bad_requests, 1);
        let mut r = (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body over the limit of {MAX_HTTP_BODY} bytes\n"),
        )
            .into_response();
        r.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
        return Err(r);
    }
    let Ok(slot) = st.busy.clone().acquire_owned().await else {
        return Err(StatusCode::SERVICE_UNAVAILABLE.into_response());
    };
    let body: Bytes = match tokio::time::timeout(
        st.body_timeout,
        axum::body::to_bytes(body, MAX_HTTP_BODY),
    )
    .await
    {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            bump(&st.stats.otlp_bad_requests, 1);
            // Only a body over the limit is 413; a malformed chunk size, a connection cut short
            // and other framing errors are the client's bad request (issue 22: all were 413).
            let status = if body_too_large(&e) {
                StatusCode::PAYLOAD_TOO_LARGE
            } else {
                StatusCode::BAD_REQUEST
            };
            let detail =
                std::iter::successors(Some(&e as &(dyn std::error::Error + 'static)), |e| {
                    e.source()
                })
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(": ");
            return Err((status, format!("request body: {detail}\n")).into_response());
        }
        Err(_) => {
            let c = bump(&st.stats.otlp_bad_requests, 1);
            if worth_logging(c) {
                tracing::warn!(
                    "{what}: request body not complete after {:?}; answered 408",
                    st.body_timeout
                );
            }
            let mut r = (StatusCode::REQUEST_TIMEOUT, "request body too slow\n").into_response();
            r.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
            return Err(r);
        }
    };
    Ok((slot, body))
}

/// Whether reading a body failed because it exceeds [`MAX_HTTP_BODY`] (axum's limit is
/// `http_body_util::Limited`, whose error is `LengthLimitError`).
fn body_too_large(e: &axum::Error) -> bool {
    std::iter::successors(Some(e as &(dyn std::error::Error + 'static)), |e| {
        e.source()
    })
    .any(|e| e.is::<http_body_util::LengthLimitError>())
}

/// The body decompressed as its `Content-Encoding` says (`identity` or `gzip`); the error is the
/// message of a `400` (bad gzip) or `415` (another encoding).
fn decompressed<'b>(
    headers: &HeaderMap,
    body: &'b [u8],
) -> Result<std::borrow::Cow<'b, [u8]>, (StatusCode, String)> {
    let cenc = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .trim()
        .to_ascii_lowercase();
    match cenc.as_str() {
        "" | "identity" => Ok(body.into()),
        "gzip" | "x-gzip" => gunzip(body)
            .map(Into::into)
            .map_err(|e| (StatusCode::BAD_REQUEST, error_chain(&e))),
        other => Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("unsupported content encoding {other:?}"),
        )),
    }
}

/// `POST /v1/traces` (OTLP/HTTP, OTLP specification "OTLP/HTTP").
async fn otlp_traces(
    State(st): State<HttpState>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    if !authorized(st.token.as_deref(), &headers) {
        return unauthenticated(&st.stats, "OTLP/HTTP");
    }
    let (_slot, body) = match read_body(&st, "OTLP/HTTP", body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let n = bump(&st.stats.otlp_requests, 1);
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let enc = if ctype.starts_with("application/x-protobuf")
        || ctype.starts_with("application/protobuf")
    {
        Encoding::Protobuf
    } else if ctype.starts_with("application/json") {
        Encoding::Json
    } else {
        bump(&st.stats.otlp_bad_requests, 1);
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("unsupported content type {ctype:?}\n"),
        )
            .into_response();
    };
    let Ok(decoding) = st.decoding.clone().acquire_owned().await else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let body = match decompressed(&headers, &body) {
        Ok(b) => b,
        Err((status, message)) => {
            bump(&st.stats.otlp_bad_requests, 1);
            return error_reply(enc, status, 3, message);
        }
    };
    let room = match budget_for(&st.budget, &st.stats, &body, enc == Encoding::Json).await {
        Ok(p) => p,
        Err(r) => {
            if matches!(r, BudgetRefusal::TooCostly { .. }) {
                bump(&st.stats.otlp_bad_requests, 1);
            }
            return budget_reply(enc, &r);
        }
    };
    let req = match enc {
        Encoding::Protobuf => otlp::decode_protobuf(&body),
        Encoding::Json => otlp::decode_json(&body),
    };
    let req = match req {
        Ok(r) => r,
        Err(e) => {
            let c = bump(&st.stats.otlp_bad_requests, 1);
            if worth_logging(c) {
                tracing::warn!("OTLP/HTTP request #{n}: {}", error_chain(&e));
            }
            return error_reply(enc, StatusCode::BAD_REQUEST, 3, error_chain(&e));
        }
    };
    let conv = convert(&st.stats, req);
    // Only the events wait for the commit.
    drop((body, decoding, room));
    let resp = match commit(&st.tx, conv).await {
        Ok(r) => r,
        Err(e) => return error_reply(enc, StatusCode::SERVICE_UNAVAILABLE, 14, e),
    };
    reply(
        enc,
        StatusCode::OK,
        prost::Message::encode_to_vec(&resp),
        otlp::response_json(&resp),
    )
}

/// `POST /api/v2/spans` (Zipkin v2, JSON): the spans as the OTLP request they mean
/// ([`crate::zipkin`]), stored as OTLP spans are; answered `202` after the commit, as Zipkin
/// answers. The same limits as OTLP/HTTP apply (body size, gzip, slots, timeout).
async fn zipkin_spans(
    State(st): State<HttpState>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    if !authorized(st.token.as_deref(), &headers) {
        return unauthenticated(&st.stats, "Zipkin");
    }
    let (_slot, body) = match read_body(&st, "Zipkin", body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let n = bump(&st.stats.zipkin_requests, 1);
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_ascii_lowercase();
    if !ctype.starts_with("application/json") {
        bump(&st.stats.zipkin_bad_requests, 1);
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("unsupported content type {ctype:?}: only Zipkin v2 JSON is accepted\n"),
        )
            .into_response();
    }
    let Ok(decoding) = st.decoding.clone().acquire_owned().await else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let mut room = None;
    let req = match decompressed(&headers, &body) {
        Ok(b) => {
            match budget_for(&st.budget, &st.stats, &b, true).await {
                Ok(p) => room = Some(p),
                Err(r) => {
                    if matches!(r, BudgetRefusal::TooCostly { .. }) {
                        bump(&st.stats.zipkin_bad_requests, 1);
                    }
                    return budget_reply(Encoding::Json, &r);
                }
            }
            crate::zipkin::decode_json(&b).map_err(|e| (StatusCode::BAD_REQUEST, error_chain(&e)))
        }
        Err(e) => Err(e),
    };
    let req = match req {
        Ok(r) => r,
        Err((status, message)) => {
            let c = bump(&st.stats.zipkin_bad_requests, 1);
            if worth_logging(c) {
                tracing::warn!("Zipkin request #{n}: {message}");
            }
            return (status, format!("{message}\n")).into_response();
        }
    };
    let conv = convert(&st.stats, req);
    drop((body, decoding, room));
    match commit(&st.tx, conv).await {
        Ok(_) => StatusCode::ACCEPTED.into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

/// The spans of one OTLP request (HTTP or gRPC) as events, counted; the request is dropped.
fn convert(stats: &Stats, req: otlp::ExportTraceServiceRequest) -> otlp::Converted {
    let conv = otlp::to_events(&req);
    drop(req);
    bump(&stats.otlp_spans, conv.spans);
    if conv.rejected > 0 {
        bump(&stats.otlp_rejected_spans, conv.rejected);
    }
    conv
}

/// Stores the events of one OTLP request ([`convert`]): queues them for the writer and waits for
/// the commit; the answer reports rejected spans in `partial_success`.
///
/// # Errors
/// `events not stored: …` when the writer failed or the collector is shutting down (OTLP's
/// `UNAVAILABLE`: the exporter retries).
async fn commit(
    tx: &mpsc::Sender<Batch>,
    conv: otlp::Converted,
) -> Result<otlp::ExportTraceServiceResponse, String> {
    if !conv.events.is_empty() {
        let (ack, done) = oneshot::channel();
        let stored = match tx
            .send(Batch {
                events: conv.events,
                ack: Some(ack),
            })
            .await
        {
            Ok(()) => done
                .await
                .unwrap_or_else(|_| Err("the store writer stopped".into())),
            Err(_) => Err("the collector is shutting down".into()),
        };
        if let Err(e) = stored {
            return Err(format!("events not stored: {e}"));
        }
    }
    Ok(otlp::ExportTraceServiceResponse {
        partial_success: (conv.rejected > 0).then(|| otlp::ExportTracePartialSuccess {
            rejected_spans: conv.rejected as i64,
            error_message: conv.first_error.unwrap_or_default(),
        }),
    })
}

#[cfg(test)]
mod udp_buffer_tests {
    use super::*;

    /// Regression: under load the X-Trace UDP test lost 7 of 839 datagrams in the kernel because
    /// the socket kept the default 208 KiB receive buffer.
    #[tokio::test]
    async fn udp_socket_gets_the_enlarged_receive_buffer() {
        if !test_support::privileged("SO_RCVBUFFORCE needs CAP_NET_ADMIN") {
            return;
        }
        let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let before = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::RcvBuf).unwrap();
        enlarge_udp_receive_buffer(&s, UDP_RCVBUF);
        let after = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::RcvBuf).unwrap();
        // socket(7): the kernel doubles the value set, and reports the doubled value.
        assert_eq!(after, 2 * UDP_RCVBUF, "was {before} before");
    }

    #[tokio::test]
    async fn udp_socket_gets_the_drop_counter_option() {
        use nix::sys::socket::{getsockopt, sockopt};
        let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        assert!(!getsockopt(&s, sockopt::RxqOvfl).map(|v| v != 0).unwrap());
        enable_drop_counter(&s);
        assert!(getsockopt(&s, sockopt::RxqOvfl).map(|v| v != 0).unwrap());
        // Nothing dropped yet: /proc/net/udp has the socket's line, with 0.
        assert_eq!(kernel_drops_now(&s), Some(0));
    }
}

#[cfg(test)]
mod decode_cost_tests {
    use super::*;

    fn over_cap(body: &[u8], json: bool) -> bool {
        decode_cost(body, json) > DECODE_COST_FACTOR * body.len() as u64 + DECODE_COST_SLACK
    }

    /// Issue 22's bodies of empty spans are over the per-request cap in both encodings; an
    /// exporter's ordinary spans are well under it.
    #[test]
    fn empty_spans_are_over_the_cap_and_real_spans_under_it() {
        let mut json = br#"{"resourceSpans":[{"scopeSpans":[{"spans":["#.to_vec();
        for _ in 0..400_000 {
            json.extend_from_slice(b"{},");
        }
        json.extend_from_slice(b"{}]}]}]}");
        assert!(over_cap(&json, true));
        // Braces inside strings are not objects.
        let quoted = format!(r#"{{"a":"{}"}}"#, "{".repeat(1 << 20));
        assert!(!over_cap(quoted.as_bytes(), true));
        assert_eq!(
            decode_cost(quoted.as_bytes(), true),
            3 * quoted.len() as u64 + JSON_OBJECT_COST
        );
        let empty = otlp::ExportTraceServiceRequest {
            resource_spans: vec![otlp::ResourceSpans {
                scope_spans: vec![otlp::ScopeSpans {
                    spans: vec![otlp::Span::default(); 400_000],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let pb = prost::Message::encode_to_vec(&empty);
        // 400,000 spans, one scope, one resource: each a message.
        assert_eq!(proto_messages(&pb, 0), Some(400_002));
        assert!(over_cap(&pb, false));
    }

    /// The captured requests of real SDKs cost a small multiple of their size.
    #[test]
    fn captured_sdk_requests_are_under_the_cap() {
        for (file, json) in [
            ("otlp/python_sdk_traces.pb", false),
            ("otlp/node_sdk_traces.json", true),
        ] {
            let Some(path) = test_support::shared_data(file) else {
                return;
            };
            let body = std::fs::read(path).unwrap();
            let per_byte = decode_cost(&body, json) as f64 / body.len() as f64;
            eprintln!("{file}: decoding cost {per_byte:.1} × its size");
            assert!(
                per_byte < DECODE_COST_FACTOR as f64,
                "{file}: {per_byte:.1}"
            );
        }
    }
}
