//! The causal-tracing collector: ingest, embedded store, and file import.
//!
//! The main types:
//! - [`server::Collector`] (configured by [`server::Config`]): listens for X-Trace reports over TCP
//!   and UDP (port 7831; 4-byte big-endian length, then an X-Trace 1.0 text or native binary
//!   report, decoded by the `causal` crate) and OTLP/HTTP (`POST /v1/traces` on port 4318,
//!   protobuf or JSON, chunked, gzip), OTLP/gRPC ([`grpc`], port 4317, gzip) and Zipkin v2 JSON
//!   ([`zipkin`], `POST /api/v2/spans` on port 9411), and writes events through a bounded queue to
//! - [`store::Store`]: one SQLite file in WAL mode (schema in `docs/collector-store.md`), which
//!   lists tasks ([`store::TaskSummary`]) and loads a task's events for `causal_analysis`;
//! - [`clickhouse::ClickHouseStore`]: the same store in ClickHouse tables, for several collectors
//!   writing into one store; [`backend::TraceStore`] and [`backend::AnyStore`] cover both;
//! - [`import::import_file`]: X-Trace JSON exports and OTLP requests from files;
//! - [`otlp`]: the OTLP messages and the span → event mapping (`docs/otlp-mapping.md`);
//! - [`xtrace`]: X-Trace reports → events;
//! - [`query`]: the searches of the web UI and its Jaeger API (services, operations, tasks by
//!   service, operation, attribute, duration, errors and time), and [`query::load_graph`].
#![deny(missing_docs)]

pub mod backend;
pub mod clickhouse;
pub mod error;
pub mod grpc;
pub mod import;
pub mod listen;
pub mod otlp;
pub mod query;
pub mod server;
pub mod store;
pub mod xtrace;
pub mod zipkin;

pub use backend::{AnyStore, StoreSpec, TraceStore};
pub use error::{CollectorError, ImportError, OtlpError, StoreError};
pub use server::{BoundAddrs, Collector, Config, StatsSnapshot};
pub use store::{Store, TaskFilter, TaskSort, TaskSummary};
