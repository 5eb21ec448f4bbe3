//! The collector's TCP listeners under hostile clients: one connection limit for the process,
//! header, handshake and idle timeouts, and optional TLS (rustls).
//!
//! ```text
//!  accept ─► slot free? ── no ──► refused (plain HTTP: `503` + `Retry-After`, else closed), counted
//!              │ yes
//!              ▼
//!        TLS handshake (if configured, within the header timeout)
//!              ▼
//!        [`Conn`]: closed after `idle_timeout` without reading or writing a byte while no
//!        request is being handled
//!              ▼
//!        HTTP/1.1 (hyper; the request header must arrive within `header_timeout`), HTTP/2,
//!        gRPC (tonic), or X-Trace frames
//! ```
//!
//! # Why
//! Issue 22: 1,100 connections that sent part of a header and stopped used up the collector's
//! 1,024 file descriptors; valid requests then timed out and the log repeated `accept error: Too
//! many open files` every second. Now every accepted connection holds one of
//! [`ListenConfig::max_connections`] slots, shared by all TCP listeners of a collector, whose
//! default ([`default_max_connections`]) stays below the descriptor limit; a connection beyond it
//! is accepted and closed at once (so it leaves the accept queue and frees its descriptor), with
//! `503 Service Unavailable` and `Retry-After: 1` on the HTTP listeners. Slow or silent peers do
//! not keep their slot: the header timeout closes a connection whose request header is not
//! complete in time (slowloris), the idle timeout one that neither sends nor reads. When
//! `accept(2)` fails anyway (`EMFILE`, `ENFILE`: other descriptors of the process), the loop
//! backs off for [`ACCEPT_BACKOFF`] and logs the first ten failures, then every power of two.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tokio_rustls::rustls;

use crate::error::CollectorError;

/// Default [`ListenConfig::header_timeout`]: 10 s for a request header (and a TLS handshake).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`ListenConfig::idle_timeout`]: 120 s without a byte read or written.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Pause after a failed `accept(2)` (e.g. `EMFILE`) before the next try.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Descriptors kept free of connections by [`default_max_connections`] (the store, its WAL, the
/// UDP socket, listeners, the runtime's own).
pub const RESERVED_DESCRIPTORS: u64 = 128;
/// Upper end of [`default_max_connections`].
pub const MAX_CONNECTIONS_CAP: usize = 16_384;

/// Limits and TLS of a collector's TCP listeners.
#[derive(Debug, Clone)]
pub struct ListenConfig {
    /// Most TCP connections open at once over all listeners (X-Trace TCP, OTLP/HTTP, OTLP/gRPC,
    /// Zipkin, and the UI when it is served with [`serve_router`]). Default
    /// [`default_max_connections`].
    pub max_connections: usize,
    /// Longest time a client may take to send a complete HTTP/1.1 request header (hyper's
    /// `header_read_timeout`, which also bounds the wait for the next request on a kept-alive
    /// connection) and to complete a TLS handshake. Default [`HEADER_TIMEOUT`].
    pub header_timeout: Duration,
    /// A connection that neither sends nor reads a byte for this long while none of its requests
    /// is being handled is closed (HTTP/2 and gRPC included; X-Trace TCP connections between
    /// frames included). Default [`IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
    /// TLS for the OTLP/HTTP, OTLP/gRPC and Zipkin listeners, the UI when served with
    /// [`serve_router`], and X-Trace TCP when [`crate::Config::xtrace_tls`] asks for it; `None`:
    /// plain TCP.
    pub tls: Option<TlsFiles>,
}

impl Default for ListenConfig {
    fn default() -> ListenConfig {
        ListenConfig {
            max_connections: default_max_connections(),
            header_timeout: HEADER_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            tls: None,
        }
    }
}

/// The soft `RLIMIT_NOFILE` of this process, descriptors (getrlimit(2)); 1024 when unknown.
pub fn descriptor_limit() -> u64 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(1024)
}

/// The default connection limit: the descriptor limit ([`descriptor_limit`]) less
/// [`RESERVED_DESCRIPTORS`], at least 16 and at most [`MAX_CONNECTIONS_CAP`] (896 under the
/// common soft limit of 1,024; each connection uses one descriptor).
pub fn default_max_connections() -> usize {
    let free = descriptor_limit().saturating_sub(RESERVED_DESCRIPTORS);
    usize::try_from(free)
        .unwrap_or(usize::MAX)
        .clamp(16, MAX_CONNECTIONS_CAP)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (setrlimit(2)), as servers commonly do, so
/// that [`default_max_connections`] allows more connections; returns the soft limit now in force.
/// Failure leaves the limit as it was.
pub fn raise_descriptor_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    descriptor_limit()
}

/// A certificate chain and private key read from PEM files (`--tls-cert`, `--tls-key`).
#[derive(Clone)]
pub struct TlsFiles {
    certs: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: Arc<rustls::pki_types::PrivateKeyDer<'static>>,
}

impl std::fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TlsFiles({} certificates)", self.certs.len())
    }
}

impl TlsFiles {
    /// Reads the certificate chain (PEM `CERTIFICATE` blocks, leaf first) from `cert` and the
    /// private key (PEM PKCS#8, PKCS#1 or SEC1) from `key`, and checks that they make a rustls
    /// server configuration.
    ///
    /// # Errors
    /// [`CollectorError::Tls`] naming the file and what is wrong with it.
    pub fn load(cert: &Path, key: &Path) -> Result<TlsFiles, CollectorError> {
        use rustls::pki_types::pem::PemObject as _;
        let tls_err = |file: &Path, message: String| CollectorError::Tls {
            file: file.to_path_buf(),
            message,
        };
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(cert)
            .map_err(|e| tls_err(cert, e.to_string()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_err(cert, e.to_string()))?;
        if certs.is_empty() {
            return Err(tls_err(cert, "no PEM CERTIFICATE block".into()));
        }
        let k = rustls::pki_types::PrivateKeyDer::from_pem_file(key)
            .map_err(|e| tls_err(key, e.to_string()))?;
        let files = TlsFiles {
            certs,
            key: Arc::new(k),
        };
        files
            .server_config(&[])
            .map_err(|e| tls_err(key, e.to_string()))?;
        Ok(files)
    }

    /// A rustls server configuration (ring provider, TLS 1.2 and 1.3) offering `alpn`.
    fn server_config(&self, alpn: &[&[u8]]) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut c = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(self.certs.clone(), self.key.clone_key())?;
        c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(c))
    }
}

/// Counters of the listeners (part of the collector's statistics).
#[derive(Debug, Default)]
pub(crate) struct ListenStats {
    pub(crate) refused: AtomicU64,
    pub(crate) accept_errors: AtomicU64,
    pub(crate) header_timeouts: AtomicU64,
    pub(crate) idle_closed: AtomicU64,
    pub(crate) tls_failed: AtomicU64,
}

fn bump(c: &AtomicU64) -> u64 {
    c.fetch_add(1, Ordering::Relaxed) + 1
}

fn worth_logging(count: u64) -> bool {
    count <= 10 || count.is_power_of_two()
}

/// The connection slots of one collector and what its listeners do at the limit.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    slots: Arc<Semaphore>,
    pub(crate) stats: Arc<ListenStats>,
    pub(crate) config: ListenConfig,
}

/// What a listener does with a connection beyond the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refuse {
    /// Answer `503` with `Retry-After: 1`, then close.
    Http,
    /// Close at once.
    Close,
}

/// The canned answer to a connection beyond the limit (RFC 9110 §15.6.4, §10.2.3).
const HTTP_REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\
Content-Type: text/plain\r\nContent-Length: 27\r\nConnection: close\r\n\r\ntoo many connections; retry";

impl Gate {
    pub(crate) fn new(config: ListenConfig, stats: Arc<ListenStats>) -> Gate {
        Gate {
            slots: Arc::new(Semaphore::new(config.max_connections.max(1))),
            stats,
            config,
        }
    }

    /// The TLS acceptor offering `alpn`, when TLS is configured.
    fn acceptor(&self, alpn: &[&[u8]]) -> Option<tokio_rustls::TlsAcceptor> {
        let files = self.config.tls.as_ref()?;
        // Checked by TlsFiles::load.
        let c = files.server_config(alpn).ok()?;
        Some(tokio_rustls::TlsAcceptor::from(c))
    }
}

/// No ALPN protocol offered (the X-Trace TCP listener's TLS: its frames are not HTTP).
pub(crate) const NO_ALPN: &[&[u8]] = &[];

/// Accepts connections until `stop`, each in its own task holding a slot of `gate`: a TLS
/// handshake when `tls` is asked for and configured (offering `alpn`), then `serve(conn, stop)`.
/// Connections beyond the limit are refused as `refuse` says and counted. Returns after every
/// connection's task has ended.
pub(crate) async fn accept_loop<F, Fut>(
    listener: TcpListener,
    what: &'static str,
    gate: Gate,
    refuse: Refuse,
    tls_alpn: Option<&'static [&'static [u8]]>,
    mut stop: watch::Receiver<bool>,
    serve: Arc<F>,
) where
    F: Fn(Conn, watch::Receiver<bool>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let acceptor = tls_alpn.and_then(|alpn| gate.acceptor(alpn));
    if tls_alpn.is_some() && gate.config.tls.is_some() && acceptor.is_none() {
        // Never serve in clear what was configured for TLS (TlsFiles::load checked the files,
        // so this is not expected).
        tracing::error!("{what}: the TLS configuration could not be built; not listening");
        return;
    }
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            a = listener.accept() => a,
        };
        while conns.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                let n = bump(&gate.stats.accept_errors);
                if worth_logging(n) {
                    tracing::warn!(
                        "{what}: accept failed (#{n}): {e}; pausing {ACCEPT_BACKOFF:?} ({} connections open)",
                        gate.config.max_connections - gate.slots.available_permits()
                    );
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(slot) = gate.slots.clone().try_acquire_owned() else {
            let n = bump(&gate.stats.refused);
            if worth_logging(n) {
                tracing::warn!(
                    "{what}: {peer} refused: {} connections open, the limit (#{n} refused)",
                    gate.config.max_connections
                );
            }
            if refuse == Refuse::Http && acceptor.is_none() {
                // Never waits: a peer that does not read loses the answer, not our time.
                let _ = stream.try_write(HTTP_REFUSAL);
            }
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (gate, acceptor, stop) = (gate.clone(), acceptor.clone(), stop.clone());
        let fut = async move {
            let inner = match acceptor {
                None => Inner::Plain(stream),
                Some(a) => {
                    match tokio::time::timeout(gate.config.header_timeout, a.accept(stream)).await {
                        Ok(Ok(s)) => Inner::Tls(Box::new(s)),
                        Ok(Err(e)) => {
                            let n = bump(&gate.stats.tls_failed);
                            if worth_logging(n) {
                                tracing::warn!(
                                    "{what}: TLS handshake with {peer} failed (#{n}): {e}"
                                );
                            }
                            return None;
                        }
                        Err(_) => {
                            bump(&gate.stats.tls_failed);
                            return None;
                        }
                    }
                }
            };
            Some(Conn {
                inner,
                peer,
                idle_timeout: gate.config.idle_timeout,
                idle: Box::pin(tokio::time::sleep(gate.config.idle_timeout)),
                busy: Arc::new(AtomicUsize::new(0)),
                stats: gate.stats.clone(),
                _slot: slot,
            })
        };
        let serve = serve.clone();
        conns.spawn(async move {
            if let Some(conn) = fut.await {
                serve(conn, stop).await;
            }
        });
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

enum Inner {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// One accepted connection: the stream (plain or TLS), its slot, and its idle timer.
pub(crate) struct Conn {
    inner: Inner,
    peer: SocketAddr,
    idle_timeout: Duration,
    idle: Pin<Box<Sleep>>,
    busy: Arc<AtomicUsize>,
    stats: Arc<ListenStats>,
    _slot: OwnedSemaphorePermit,
}

impl Conn {
    /// The peer's address.
    pub(crate) fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// A counter of this connection's requests being handled; while it is above zero the idle
    /// timeout does not apply.
    pub(crate) fn busy(&self) -> Arc<AtomicUsize> {
        self.busy.clone()
    }

    fn touch(&mut self) {
        self.idle.as_mut().reset(Instant::now() + self.idle_timeout);
    }

    /// On a read or write that cannot progress: the idle timeout's error once it has passed.
    fn idle_expired(&mut self, cx: &mut Context<'_>) -> bool {
        if self.busy.load(Ordering::Relaxed) > 0 {
            self.touch();
            return false;
        }
        if self.idle.as_mut().poll(cx).is_ready() {
            bump(&self.stats.idle_closed);
            return true;
        }
        false
    }
}

fn idle_error() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "connection idle for too long")
}

/// Marks a request of a connection as being handled while it lives ([`Conn::busy`]).
pub(crate) struct Busy(Arc<AtomicUsize>);

impl Busy {
    pub(crate) fn new(c: &Arc<AtomicUsize>) -> Busy {
        c.fetch_add(1, Ordering::Relaxed);
        Busy(c.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A byte stream of either kind ([`Inner`]).
trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

impl Inner {
    /// The stream, plain or TLS, as one type.
    fn io(&mut self) -> Pin<&mut dyn Io> {
        match self {
            Inner::Plain(s) => Pin::new(s),
            Inner::Tls(s) => Pin::new(s.as_mut()),
        }
    }
}

impl Conn {
    /// A read's or write's outcome `r`: progress resets the idle timer; no progress past the idle
    /// timeout is its error.
    fn progress<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                self.touch();
                Poll::Ready(r)
            }
            Poll::Pending if self.idle_expired(cx) => Poll::Ready(Err(idle_error())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = this.inner.io().poll_read(cx, buf);
        this.progress(cx, r)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = this.inner.io().poll_write(cx, buf);
        this.progress(cx, r)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().inner.io().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().inner.io().poll_shutdown(cx)
    }
}

/// ALPN of the HTTP listeners: HTTP/2 and HTTP/1.1.
const HTTP_ALPN: &[&[u8]] = &[b"h2", b"http/1.1"];
/// ALPN of the gRPC listener: HTTP/2 only.
const GRPC_ALPN: &[&[u8]] = &[b"h2"];

/// Serves `router` over HTTP/1.1 and HTTP/2 (hyper) on `listener` until `stop`, with the limits
/// and TLS of `gate`; in-flight requests finish on stop (graceful shutdown).
pub(crate) async fn serve_http(
    listener: TcpListener,
    what: &'static str,
    gate: Gate,
    router: axum::Router,
    stop: watch::Receiver<bool>,
) {
    let header_timeout = gate.config.header_timeout;
    let stats = gate.stats.clone();
    let serve = Arc::new(move |conn: Conn, mut stop: watch::Receiver<bool>| {
        let (router, stats) = (router.clone(), stats.clone());
        async move {
            let busy = conn.busy();
            let svc =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let guard = Busy::new(&busy);
                    let router = router.clone();
                    async move {
                        let resp =
                            tower::ServiceExt::oneshot(router, req.map(axum::body::Body::new))
                                .await;
                        drop(guard);
                        resp
                    }
                });
            let mut b =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            b.http1()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout);
            b.http2().timer(hyper_util::rt::TokioTimer::new());
            let c = b.serve_connection(hyper_util::rt::TokioIo::new(conn), svc);
            tokio::pin!(c);
            let stopping = tokio::select! {
                r = c.as_mut() => Err(r),
                _ = stop.wait_for(|s| *s) => Ok(()),
            };
            let served = match stopping {
                Err(r) => r,
                Ok(()) => {
                    c.as_mut().graceful_shutdown();
                    c.await
                }
            };
            if let Err(e) = served
                && e.downcast_ref::<hyper::Error>()
                    .is_some_and(hyper::Error::is_timeout)
            {
                bump(&stats.header_timeouts);
            }
        }
    });
    accept_loop(
        listener,
        what,
        gate,
        Refuse::Http,
        Some(HTTP_ALPN),
        stop,
        serve,
    )
    .await;
}

/// Serves an axum `router` on `listener` until `shutdown` completes, with the connection limit,
/// timeouts and TLS of `config` (the UI's listener uses it). Each call has its own connection
/// slots.
pub async fn serve_router(
    listener: TcpListener,
    what: &'static str,
    config: ListenConfig,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    serve_http(
        listener,
        what,
        Gate::new(config, Arc::default()),
        router,
        stop,
    )
    .await;
}

/// What tonic learns of a connection ([`tonic::transport::server::Connected`]): its busy counter,
/// so that a request being handled holds off the idle timeout.
#[derive(Debug, Clone)]
pub(crate) struct ConnBusy(pub(crate) Arc<AtomicUsize>);

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = ConnBusy;

    fn connect_info(&self) -> ConnBusy {
        ConnBusy(self.busy.clone())
    }
}

/// The gRPC listener's connections as the incoming stream of
/// `tonic::transport::Server::serve_with_incoming_shutdown`: accepted with the limits and TLS of
/// `gate` (refused ones are closed, which gRPC clients see as `UNAVAILABLE` and retry). The
/// stream ends when `stop` is set.
pub(crate) fn grpc_incoming(
    listener: TcpListener,
    gate: Gate,
    stop: watch::Receiver<bool>,
) -> impl tokio_stream::Stream<Item = Result<Conn, io::Error>> + Send + 'static {
    let (tx, rx) = tokio::sync::mpsc::channel::<Conn>(64);
    let serve = Arc::new(move |conn: Conn, _stop: watch::Receiver<bool>| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(conn).await;
        }
    });
    tokio::spawn(accept_loop(
        listener,
        "OTLP/gRPC",
        gate,
        Refuse::Close,
        Some(GRPC_ALPN),
        stop,
        serve,
    ));
    tokio_stream::StreamExt::map(tokio_stream::wrappers::ReceiverStream::new(rx), Ok)
}
