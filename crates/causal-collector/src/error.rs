//! Error types of the collector, one enum per domain.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Errors of the embedded store (SQLite).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Opening or creating the database file failed.
    #[error("opening store {path}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The file holds a schema this version does not know.
    #[error("store {path} has schema version {found}; this sightline reads version {expected}")]
    SchemaVersion {
        /// The database file.
        path: PathBuf,
        /// Version found in the `meta` table.
        found: String,
        /// Version this code writes.
        expected: u32,
    },
    /// A statement failed.
    #[error("store: {what}")]
    Sql {
        /// What the statement was doing.
        what: &'static str,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The checkpointer thread could not be started.
    #[error("starting the store checkpointer thread: {0}")]
    Thread(String),
    /// A ClickHouse request failed (server unreachable, credentials refused, a failed
    /// statement); `detail` is the server's first line or the transport error.
    #[error("store: {what}: {detail}")]
    ClickHouse {
        /// What the request was doing.
        what: &'static str,
        /// What went wrong.
        detail: String,
    },
    /// The ClickHouse store was written by a newer sightline (schema `found` > `expected`).
    #[error(
        "store {store} has schema version {found}, newer than this sightline's {expected}: upgrade sightline (the store is left as it is)"
    )]
    ClickHouseSchema {
        /// The store, without credentials.
        store: String,
        /// Version found in `sightline_meta`.
        found: u32,
        /// Version this code writes.
        expected: u32,
    },
    /// A `--store` URL that cannot be used.
    #[error("bad store URL: {0}")]
    BadStoreUrl(String),
    /// No task id starts with the given text.
    #[error("no task matches {0:?}")]
    NoSuchTask(String),
    /// Several task ids start with the given text.
    #[error("{prefix:?} matches {count} tasks (e.g. {examples}); give more digits")]
    AmbiguousTask {
        /// The prefix given.
        prefix: String,
        /// How many tasks matched.
        count: usize,
        /// A few of them.
        examples: String,
    },
}

/// Errors decoding an OTLP request (OTLP specification, "OTLP/HTTP").
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The body is not an `ExportTraceServiceRequest` in protobuf.
    #[error("decoding the OTLP protobuf body")]
    Protobuf(#[source] prost::DecodeError),
    /// The body is not JSON.
    #[error("decoding the OTLP/JSON body")]
    Json(#[source] serde_json::Error),
    /// The body is JSON but not an object (an `ExportTraceServiceRequest` is one).
    #[error("decoding the OTLP/JSON body: the body is not a JSON object")]
    NotAnObject,
    /// A 64-bit integer field (proto3 JSON writes them as numbers or decimal strings) with a
    /// value that is neither, or out of range.
    #[error("decoding the OTLP/JSON body: {field} is {value}, not {expected}")]
    Integer {
        /// The field (`startTimeUnixNano`, `intValue`, ...).
        field: &'static str,
        /// The value as JSON text.
        value: String,
        /// What it must be (`a u64`, `an i64`).
        expected: &'static str,
    },
    /// The gzip body did not decompress.
    #[error("decompressing the gzip body")]
    Gzip(#[source] std::io::Error),
    /// The gzip body decompresses to more than the collector takes.
    #[error("decompressing the gzip body: it decompresses beyond {limit} bytes")]
    GzipTooLarge {
        /// The limit, bytes.
        limit: u64,
    },
}

/// Errors importing files.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Reading the file failed.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is JSON, but neither an X-Trace JSON export nor an OTLP/JSON request.
    #[error("importing {path}: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: &'static str,
    },
    /// The file is OTLP/JSON (it has `resourceSpans`) but does not decode.
    #[error("importing {path} as an OTLP/JSON traces request")]
    Otlp {
        /// The file.
        path: PathBuf,
        /// Why it does not decode.
        source: OtlpError,
    },
    /// The file is neither JSON nor an OTLP protobuf traces request.
    #[error("importing {path}: neither JSON nor an OTLP protobuf traces request")]
    NotJsonNorOtlp {
        /// The file.
        path: PathBuf,
        /// Why it is not JSON.
        source: serde_json::Error,
    },
    /// Storing failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Errors starting or running the collector.
#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    /// Binding a listening socket failed.
    #[error("binding {what} on {addr}")]
    Bind {
        /// Which listener (`X-Trace TCP`, `X-Trace UDP`, `OTLP/HTTP`).
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The I/O error (e.g. the port is in use).
        source: std::io::Error,
    },
    /// A TLS certificate or key file could not be used (`--tls-cert`, `--tls-key`).
    #[error("TLS file {}: {message}", file.display())]
    Tls {
        /// The certificate or key file.
        file: std::path::PathBuf,
        /// What is wrong with it (unreadable, no PEM block, a key that does not fit).
        message: String,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store writer thread could not be started.
    #[error("starting the store writer thread")]
    SpawnWriter(#[source] std::io::Error),
    /// Waiting for the store writer thread at shutdown failed.
    #[error("waiting for the store writer thread")]
    JoinWriter(#[source] tokio::task::JoinError),
    /// The store writer thread panicked.
    #[error("the store writer thread panicked")]
    WriterPanicked,
}

/// The text of `error` followed by each of its sources, joined with `": "`: what a reply or a
/// log line shows (the messages of this crate's errors leave their cause to the source).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cause = e.source();
    }
    out
}
