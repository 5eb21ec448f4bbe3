//! Error types of the collector, one enum per domain.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Errors of the embedded store (SQLite).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Opening or creating the database file failed.
    #[error("opening store {path}: {source}")]
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
    #[error("store: {what}: {source}")]
    Sql {
        /// What the statement was doing.
        what: &'static str,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The checkpointer thread could not be started.
    #[error("starting the store checkpointer thread: {0}")]
    Thread(String),
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

/// Errors decoding an OTLP request.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The body is not an `ExportTraceServiceRequest` in protobuf.
    #[error("invalid OTLP protobuf body: {0}")]
    Protobuf(String),
    /// The body is not an `ExportTraceServiceRequest` in OTLP/JSON.
    #[error("invalid OTLP/JSON body: {0}")]
    Json(String),
    /// The gzip body did not decompress, or decompressed beyond the limit.
    #[error("invalid gzip body: {0}")]
    Gzip(String),
}

/// Errors importing files.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Reading the file failed.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is neither an X-Trace JSON export nor OTLP (JSON or protobuf).
    #[error("{path}: not an X-Trace JSON export nor an OTLP traces request: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Storing failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Errors starting or running the collector.
#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    /// Binding a listening socket failed.
    #[error("binding {what} on {addr}: {source}")]
    Bind {
        /// Which listener (`X-Trace TCP`, `X-Trace UDP`, `OTLP/HTTP`).
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The I/O error (e.g. the port is in use).
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The writer thread could not be started or panicked.
    #[error("store writer thread: {0}")]
    Writer(String),
}
